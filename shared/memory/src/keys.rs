//! API keys in memory: [`MemoryKeyStore`], the [`KeyStore`] that behaves as the keys' items in
//! the DynamoDB jobs table do (`sundial_aws::dynamo::keys`): one record per id, created only if
//! absent and while its owner has fewer than [`MAX_KEYS_PER_OWNER`] not revoked, listed by owner
//! and name (revoked ones left out), revoked only by its owner and once, its last use and its last
//! refusal written at most every minute, kept through its JSON form (times to the millisecond).

use crate::audit::MemoryAuditTrail;
use crate::guard::lock;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Mutex;
use sundial_domain::audit::AuditRecord;
use sundial_domain::keys::{ApiKey, LAST_USED_EVERY, MAX_KEYS_PER_OWNER};
use sundial_domain::ports::store::{KeyStore, StoreError, StoreResult};

/// API keys in memory, by id.
#[derive(Debug, Default)]
pub struct MemoryKeyStore {
    keys: Mutex<BTreeMap<String, ApiKey>>,
    audit: MemoryAuditTrail,
}

impl MemoryKeyStore {
    pub fn new() -> Self {
        MemoryKeyStore::default()
    }

    /// This store, writing the records of its changes into `trail` (shared with the others).
    pub fn recording_to(mut self, trail: MemoryAuditTrail) -> Self {
        self.audit = trail;
        self
    }
}

/// `at` as stored: to the millisecond.
fn stored_at(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

#[async_trait]
impl KeyStore for MemoryKeyStore {
    async fn get(&self, id: &str) -> StoreResult<Option<ApiKey>> {
        Ok(lock(&self.keys).get(id).cloned())
    }

    async fn list(&self, owner: &str) -> StoreResult<Vec<ApiKey>> {
        let mut keys: Vec<ApiKey> = lock(&self.keys)
            .values()
            .filter(|k| k.owner == owner && k.revoked_at.is_none())
            .cloned()
            .collect();
        keys.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
        Ok(keys)
    }

    async fn create(&self, key: &ApiKey, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let mut keys = lock(&self.keys);
        // As the adapter's condition: a revoked key's record may be written over.
        if keys.get(&key.id).is_some_and(|k| k.revoked_at.is_none()) {
            return Err(StoreError::Conflict);
        }
        if keys.values().filter(|k| k.owner == key.owner && k.revoked_at.is_none()).count()
            >= MAX_KEYS_PER_OWNER
        {
            return Err(StoreError::QuotaExceeded(MAX_KEYS_PER_OWNER as u32));
        }
        let stored = serde_json::to_string(key)
            .and_then(|text| serde_json::from_str::<ApiKey>(&text))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        keys.insert(key.id.clone(), stored);
        self.audit.append(audit);
        Ok(())
    }

    async fn revoke(
        &self,
        owner: &str,
        id: &str,
        at: DateTime<Utc>,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let mut keys = lock(&self.keys);
        match keys.get_mut(id) {
            Some(key) if key.owner == owner && key.revoked_at.is_none() => {
                key.revoked_at = Some(stored_at(at));
                self.audit.append(audit);
                Ok(())
            }
            _ => Err(StoreError::NotFound),
        }
    }

    async fn refused(&self, id: &str, at: DateTime<Utc>, record: &AuditRecord) -> StoreResult<()> {
        let mut keys = lock(&self.keys);
        if let Some(key) = keys.get_mut(id)
            && key.last_refused_at.is_none_or(|last| last <= at - LAST_USED_EVERY)
        {
            key.last_refused_at = Some(stored_at(at));
            self.audit.append(Some(record));
        }
        Ok(())
    }

    async fn touch(&self, id: &str, at: DateTime<Utc>) -> StoreResult<()> {
        // As the adapter's condition: written only a minute or more after the last.
        if let Some(key) = lock(&self.keys).get_mut(id)
            && key.last_used_at.is_none_or(|last| last <= at - LAST_USED_EVERY)
        {
            key.last_used_at = Some(stored_at(at));
        }
        Ok(())
    }
}
