//! Concurrency groups in memory: [`MemoryGroupStore`], the [`GroupStore`] that behaves as the
//! groups' items in the DynamoDB jobs table do (`sundial_adapters::dynamo::groups`): one record
//! per owner and name, created only if absent, replaced and deleted only under the version read,
//! and kept as the adapter keeps it: through its JSON form (slots', waiters' and links' times to
//! the millisecond).

use crate::guard::lock;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use sundial_domain::group::Group;
use sundial_domain::ports::store::{GroupStore, StoreError, StoreResult};

/// Concurrency groups in memory.
#[derive(Debug, Default)]
pub struct MemoryGroupStore {
    groups: Mutex<HashMap<(String, String), Group>>,
}

impl MemoryGroupStore {
    pub fn new() -> Self {
        MemoryGroupStore::default()
    }
}

#[async_trait]
impl GroupStore for MemoryGroupStore {
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<Group>> {
        Ok(lock(&self.groups).get(&(owner.to_string(), name.to_string())).cloned())
    }

    async fn put(&self, group: &Group, expected: Option<u64>) -> StoreResult<()> {
        let mut groups = lock(&self.groups);
        let key = (group.owner.clone(), group.name.clone());
        match (groups.get(&key), expected) {
            (None, None) => {}
            (Some(_), None) => return Err(StoreError::Conflict),
            (None, Some(_)) => return Err(StoreError::NotFound),
            (Some(stored), Some(version)) if stored.version != version => return Err(StoreError::Conflict),
            (Some(_), Some(_)) => {}
        }
        let stored = serde_json::to_string(group)
            .and_then(|text| serde_json::from_str::<Group>(&text))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        groups.insert(key, stored);
        Ok(())
    }

    async fn delete(&self, owner: &str, name: &str, version: u64) -> StoreResult<()> {
        let mut groups = lock(&self.groups);
        let key = (owner.to_string(), name.to_string());
        match groups.get(&key) {
            None => Err(StoreError::NotFound),
            Some(stored) if stored.version != version => Err(StoreError::Conflict),
            Some(_) => {
                groups.remove(&key);
                Ok(())
            }
        }
    }
}
