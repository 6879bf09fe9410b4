//! API keys as their owner's admins manage them: make one (its secret shown once), list them,
//! revoke one; and the check of a presented key that every API request makes. A key is found by
//! the id its secret names and read consistently, so a revoked key is refused by the next request
//! (the bound on revocation is the read itself: nothing caches a key). A revoked or expired
//! key's own secret presented again is recorded in the audit trail (once a minute per key).

use crate::audit::Recording;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::audit::{Actor, ActorKind, AuditRecord, Stamp, Target, TargetKind};
use sundial_domain::auth::digest;
use sundial_domain::clock::Clock;
use sundial_domain::entropy::Entropy;
use sundial_domain::keys::{self, ApiKey, KeyDocument, KeyRef, Principal};
use sundial_domain::ports::store::{KeyStore, StoreError};
use sundial_domain::validation::ValidationError;
use sundial_domain::versions::FieldChange;

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
    /// The owner has a grant to this JWT subject already (409 at the API).
    #[error("this subject has a grant of the owner's already; revoke it first")]
    GrantExists,
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

/// A key just made, with its secret (none for a grant to a JWT subject): shown in this one
/// response, never again.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub key: ApiKey,
    pub secret: Option<String>,
}

/// The key use cases.
#[derive(Debug, Clone)]
pub struct Keys {
    store: Arc<dyn KeyStore>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    recording: Recording,
}

impl Keys {
    pub fn new(
        store: Arc<dyn KeyStore>,
        clock: Arc<dyn Clock>,
        entropy: Arc<dyn Entropy>,
        recording: Recording,
    ) -> Self {
        Keys { store, clock, entropy, recording }
    }

    /// These use cases acting for the request `stamp` names: each change is written with its
    /// audit record, and a refused use of a revoked or expired key is recorded under it.
    pub fn acting(&self, stamp: Arc<Stamp>) -> Keys {
        Keys { recording: self.recording.by(stamp), ..self.clone() }
    }

    /// The record of a change of `key` at `at`, from `old` to `new` (its name, role and expiry:
    /// never its secret or digest).
    fn record(
        &self,
        key: &ApiKey,
        at: DateTime<Utc>,
        old: Option<&ApiKey>,
        new: Option<&ApiKey>,
    ) -> Option<AuditRecord> {
        let target = Target { kind: TargetKind::Key, id: key.id.clone(), name: Some(key.name.clone()) };
        let shown = |k: Option<&ApiKey>| {
            k.map_or_else(
                || serde_json::json!({}),
                |k| {
                    serde_json::json!({"name": k.name, "role": k.role, "expires_at": k.expires_at,
                        "revoked_at": k.revoked_at, "subject": k.subject})
                },
            )
        };
        Some(self.recording.record(&key.owner, at, target)?.changing(&shown(old), &shown(new)))
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
        let (id, secret, secret_digest) = match &document.subject {
            Some(subject) => {
                if subject.is_empty()
                    || subject.chars().count() > keys::MAX_SUBJECT_LEN
                    || subject.chars().any(char::is_control)
                {
                    let reason =
                        format!("must be 1-{} characters, none a control character", keys::MAX_SUBJECT_LEN);
                    return Err(ValidationError::new("subject", reason).into());
                }
                if *subject == by.owner {
                    return Err(ValidationError::new(
                        "subject",
                        "is this owner: it acts as itself without a grant",
                    )
                    .into());
                }
                // A grant has no secret: no digest matches one.
                (keys::grant_id(&by.owner, subject), None, String::new())
            }
            None => {
                let (id, secret) = keys::new_secret(self.entropy.as_ref());
                let secret_digest = digest(&secret);
                (id, Some(secret), secret_digest)
            }
        };
        let key = ApiKey {
            id,
            owner: by.owner.clone(),
            name: document.name.clone(),
            role: document.role,
            created_by: by.actor(),
            created_at: stored(now),
            expires_at: expires_at.map(stored),
            last_used_at: None,
            revoked_at: None,
            last_refused_at: None,
            subject: document.subject.clone(),
            digest: secret_digest,
        };
        let record = self.record(&key, now, None, Some(&key));
        match self.store.create(&key, record.as_ref()).await {
            Err(StoreError::Conflict) if key.subject.is_some() => return Err(KeysError::GrantExists),
            other => other?,
        }
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
        let key = self.store.get(id).await?.filter(|k| k.owner == owner && k.revoked_at.is_none());
        let key = key.ok_or(KeysError::NotFound)?;
        let now = stored(self.clock.now());
        let revoked = ApiKey { revoked_at: Some(now), ..key.clone() };
        let record = self.record(&key, now, Some(&key), Some(&revoked));
        Ok(self.store.revoke(owner, id, now, record.as_ref()).await?)
    }

    /// The principal the JWT subject `subject` is in `owner`'s name, if `owner` granted it a
    /// role (and the grant is neither revoked nor expired).
    pub async fn granted(&self, owner: &str, subject: &str) -> Result<Option<Principal>, StoreError> {
        let Some(grant) = self.store.get(&keys::grant_id(owner, subject)).await? else { return Ok(None) };
        let now = self.clock.now();
        if !grant.grants(owner, subject, now) {
            return Ok(None);
        }
        if grant.use_is_news(now)
            && let Err(e) = self.store.touch(&grant.id, now).await
        {
            tracing::warn!(key_id = %grant.id, error = %e, "a grant's last use was not recorded");
        }
        Ok(Some(Principal {
            owner: grant.owner,
            role: grant.role,
            key: Some(KeyRef { id: grant.id, name: grant.name }),
        }))
    }

    /// Who presents `secret`, if it is a good key of Sundial's: `None` for one that is not (never
    /// issued, revoked, expired, or another secret under a real key's id).
    pub async fn authenticate(&self, secret: &str) -> Result<Option<Principal>, StoreError> {
        let Some(id) = keys::id_of(secret) else { return Ok(None) };
        let Some(key) = self.store.get(id).await? else { return Ok(None) };
        let now = self.clock.now();
        if !key.accepts(secret, now) {
            // The key's own secret, refused for being revoked or expired: recorded (once a
            // minute: a key replayed in a loop costs a read a request, not a write).
            if key.is_secret(secret) && key.refusal_is_news(now) {
                self.record_refusal(&key, now).await;
            }
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

impl Keys {
    /// Records a refused use of `key` (revoked or expired) at `now`, under the request's stamp.
    /// Best effort: the refusal stands whether or not it is recorded.
    async fn record_refusal(&self, key: &ApiKey, now: DateTime<Utc>) {
        let target = Target { kind: TargetKind::Key, id: key.id.clone(), name: Some(key.name.clone()) };
        let Some(mut record) = self.recording.record(&key.owner, now, target) else { return };
        // Whoever presented it, it was this key.
        record.actor = Actor { kind: ActorKind::Key, name: key.name.clone(), key_id: Some(key.id.clone()) };
        record.action = "key.refused".into();
        let why = if key.revoked_at.is_some() { "revoked" } else { "expired" };
        record.changes =
            vec![FieldChange { field: "refused".into(), old: None, new: Some(serde_json::json!(why)) }];
        if let Err(e) = self.store.refused(&key.id, now, &record).await {
            tracing::warn!(key_id = %key.id, error = %e, "a refused use of a key was not recorded");
        }
    }
}

/// `at` to the millisecond, as stored.
fn stored(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}
