//! Concurrency groups in memory: [`MemoryGroupStore`], the [`GroupStore`] that behaves as the
//! groups' items in the DynamoDB jobs table do (`sundial_aws::dynamo::groups`): one record
//! per owner and name, created only if absent, replaced and deleted only under the version read,
//! and kept as the adapter keeps it: through its JSON form (slots', waiters' and links' times to
//! the millisecond). Links are a record of their own beside it, with their own version.

use crate::audit::MemoryAuditTrail;
use crate::guard::lock;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Mutex;
use sundial_domain::audit::AuditRecord;
use sundial_domain::group::{Group, Link, Links};
use sundial_domain::ports::store::{GroupStore, StoreError, StoreResult};

/// Concurrency groups in memory.
#[derive(Debug, Default)]
pub struct MemoryGroupStore {
    groups: Mutex<HashMap<(String, String), (Group, Links)>>,
    audit: MemoryAuditTrail,
}

/// A link's time as stored: to the millisecond.
fn stored_at(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

impl MemoryGroupStore {
    pub fn new() -> Self {
        MemoryGroupStore::default()
    }

    /// This store, writing the records of its changes into `trail` (shared with the others).
    pub fn recording_to(mut self, trail: MemoryAuditTrail) -> Self {
        self.audit = trail;
        self
    }

    /// How many groups are stored, every owner's.
    pub fn len(&self) -> usize {
        lock(&self.groups).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl GroupStore for MemoryGroupStore {
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<Group>> {
        Ok(lock(&self.groups).get(&(owner.to_string(), name.to_string())).map(|(g, _)| g.clone()))
    }

    async fn put(
        &self,
        group: &Group,
        expected: Option<u64>,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let mut groups = lock(&self.groups);
        let key = (group.owner.clone(), group.name.clone());
        match (groups.get(&key), expected) {
            (None, None) => {}
            (Some(_), None) => return Err(StoreError::Conflict),
            (None, Some(_)) => return Err(StoreError::NotFound),
            (Some((stored, _)), Some(version)) if stored.version != version => {
                return Err(StoreError::Conflict);
            }
            (Some(_), Some(_)) => {}
        }
        let stored = serde_json::to_string(group)
            .and_then(|text| serde_json::from_str::<Group>(&text))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let links = groups.remove(&key).map(|(_, links)| links).unwrap_or_default();
        groups.insert(key, (stored, links));
        self.audit.append(audit);
        Ok(())
    }

    async fn delete(
        &self,
        owner: &str,
        name: &str,
        version: u64,
        links_version: u64,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let mut groups = lock(&self.groups);
        let key = (owner.to_string(), name.to_string());
        match groups.get(&key) {
            None => Err(StoreError::NotFound),
            Some((stored, links)) if stored.version != version || links.version != links_version => {
                Err(StoreError::Conflict)
            }
            Some(_) => {
                groups.remove(&key);
                self.audit.append(audit);
                Ok(())
            }
        }
    }

    async fn links(&self, owner: &str, name: &str) -> StoreResult<Links> {
        let groups = lock(&self.groups);
        Ok(groups.get(&(owner.to_string(), name.to_string())).map(|(_, l)| l.clone()).unwrap_or_default())
    }

    async fn link(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()> {
        let mut groups = lock(&self.groups);
        let (_, links) =
            groups.get_mut(&(owner.to_string(), name.to_string())).ok_or(StoreError::NotFound)?;
        links.jobs.insert(job.to_string(), Link { at: stored_at(at) });
        links.version += 1;
        Ok(())
    }

    async fn unlink(&self, owner: &str, name: &str, job: &str) -> StoreResult<()> {
        let mut groups = lock(&self.groups);
        if let Some((_, links)) = groups.get_mut(&(owner.to_string(), name.to_string()))
            && links.jobs.remove(job).is_some()
        {
            links.version += 1;
        }
        Ok(())
    }
}
