//! API keys in memory: [`MemoryKeyStore`], the [`KeyStore`] that behaves as the keys' items in
//! the DynamoDB jobs table do (`sundial_aws::dynamo::keys`): one record per id, created only if
//! absent and while its owner has fewer than [`MAX_KEYS_PER_OWNER`], listed by owner and name,
//! deleted only by its owner, its last use written at most every minute, kept through its JSON
//! form (times to the millisecond).

use crate::guard::lock;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Mutex;
use sundial_domain::keys::{ApiKey, LAST_USED_EVERY, MAX_KEYS_PER_OWNER};
use sundial_domain::ports::store::{KeyStore, StoreError, StoreResult};

/// API keys in memory, by id.
#[derive(Debug, Default)]
pub struct MemoryKeyStore {
    keys: Mutex<BTreeMap<String, ApiKey>>,
}

impl MemoryKeyStore {
    pub fn new() -> Self {
        MemoryKeyStore::default()
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
        let mut keys: Vec<ApiKey> = lock(&self.keys).values().filter(|k| k.owner == owner).cloned().collect();
        keys.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
        Ok(keys)
    }

    async fn create(&self, key: &ApiKey) -> StoreResult<()> {
        let mut keys = lock(&self.keys);
        if keys.contains_key(&key.id) {
            return Err(StoreError::Conflict);
        }
        if keys.values().filter(|k| k.owner == key.owner).count() >= MAX_KEYS_PER_OWNER {
            return Err(StoreError::QuotaExceeded(MAX_KEYS_PER_OWNER as u32));
        }
        let stored = serde_json::to_string(key)
            .and_then(|text| serde_json::from_str::<ApiKey>(&text))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        keys.insert(key.id.clone(), stored);
        Ok(())
    }

    async fn delete(&self, owner: &str, id: &str) -> StoreResult<()> {
        let mut keys = lock(&self.keys);
        match keys.get(id) {
            Some(key) if key.owner == owner => {
                keys.remove(id);
                Ok(())
            }
            _ => Err(StoreError::NotFound),
        }
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
