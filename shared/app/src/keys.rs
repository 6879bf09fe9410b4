//! API keys as their owner's admins manage them: make one (its secret shown once), list them,
//! revoke one; and the check of a presented key that every API request makes. A key is found by
//! the id its secret names and read consistently, so a revoked key is refused by the next request
//! (the bound on revocation is the read itself: nothing caches a key).

use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::auth::digest;
use sundial_domain::clock::Clock;
use sundial_domain::entropy::Entropy;
use sundial_domain::keys::{self, ApiKey, KeyDocument, KeyRef, Principal};
use sundial_domain::ports::store::{KeyStore, StoreError};
use sundial_domain::validation::ValidationError;

/// Why a key operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    /// A value Sundial cannot accept (422 at the API).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("key not found")]
    NotFound,
    #[error("the owner already has the maximum of {0} keys")]
    QuotaExceeded(u32),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for KeysError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => KeysError::NotFound,
            StoreError::QuotaExceeded(max) => KeysError::QuotaExceeded(max),
            other => KeysError::Store(other),
        }
    }
}

/// A key just made, with its secret: shown in this one response, never again.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub key: ApiKey,
    pub secret: String,
}

/// The key use cases.
#[derive(Debug, Clone)]
pub struct Keys {
    store: Arc<dyn KeyStore>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
}

impl Keys {
    pub fn new(store: Arc<dyn KeyStore>, clock: Arc<dyn Clock>, entropy: Arc<dyn Entropy>) -> Self {
        Keys { store, clock, entropy }
    }

    /// Makes a key of `by`'s owner, as `document` says.
    pub async fn create(&self, by: &Principal, document: &KeyDocument) -> Result<NewKey, KeysError> {
        if !keys::valid_name(&document.name) {
            let reason = format!("must be 1-{} letters, digits, '-', '_' and '.'", keys::MAX_NAME_LEN);
            return Err(ValidationError::new("name", reason).into());
        }
        let now = self.clock.now();
        if document.expires_at.is_some_and(|t| t <= now) {
            return Err(ValidationError::new("expires_at", "must be in the future").into());
        }
        // A key made by a key that expires expires no later: revoking access by letting a key
        // run out is not undone by the keys it made.
        let maker_expires = match &by.key {
            Some(maker) => self.store.get(&maker.id).await?.and_then(|k| k.expires_at),
            None => None,
        };
        let expires_at = match (document.expires_at, maker_expires) {
            (Some(asked), Some(cap)) if asked > cap => {
                let reason = format!("must not be later than the expiry of the key making it ({cap})");
                return Err(ValidationError::new("expires_at", reason).into());
            }
            (None, Some(cap)) => Some(cap),
            (asked, _) => asked,
        };
        let (id, secret) = keys::new_secret(self.entropy.as_ref());
        let key = ApiKey {
            id,
            owner: by.owner.clone(),
            name: document.name.clone(),
            role: document.role,
            created_by: by.actor(),
            created_at: stored(now),
            expires_at: expires_at.map(stored),
            last_used_at: None,
            digest: digest(&secret),
        };
        self.store.create(&key).await?;
        Ok(NewKey { key, secret })
    }

    /// The owner's keys, by name (never their secrets).
    pub async fn list(&self, owner: &str) -> Result<Vec<ApiKey>, KeysError> {
        Ok(self.store.list(owner).await?)
    }

    /// Revokes the owner's key `id`: the next request that presents it is refused.
    pub async fn revoke(&self, owner: &str, id: &str) -> Result<(), KeysError> {
        if id.len() != 20 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(KeysError::NotFound);
        }
        Ok(self.store.delete(owner, id).await?)
    }

    /// Who presents `secret`, if it is a good key of Sundial's: `None` for one that is not (never
    /// issued, revoked, expired, or another secret under a real key's id).
    pub async fn authenticate(&self, secret: &str) -> Result<Option<Principal>, StoreError> {
        let Some(id) = keys::id_of(secret) else { return Ok(None) };
        let Some(key) = self.store.get(id).await? else { return Ok(None) };
        let now = self.clock.now();
        if !key.accepts(secret, now) {
            return Ok(None);
        }
        if key.use_is_news(now)
            && let Err(e) = self.store.touch(&key.id, now).await
        {
            tracing::warn!(key_id = %key.id, error = %e, "a key's last use was not recorded");
        }
        Ok(Some(Principal {
            owner: key.owner,
            role: key.role,
            key: Some(KeyRef { id: key.id, name: key.name }),
        }))
    }
}

/// `at` to the millisecond, as stored.
fn stored(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}
