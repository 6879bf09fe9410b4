//! The audit trail in memory: [`MemoryAuditTrail`], shared by the stores that write records with
//! their changes (each appends a change's record under the lock that makes the change, after its
//! checks passed) and read as the DynamoDB trail is (`sundial_aws::dynamo::audit`): an owner's
//! records newest first, by id, filtered, paged by the last id shown.

use crate::guard::lock;
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use sundial_domain::audit::{AuditQuery, AuditRecord};
use sundial_domain::ports::store::{AuditTrail, Page, StoreError, StoreResult};

/// Audit records in memory, shared by every clone.
#[derive(Debug, Clone, Default)]
pub struct MemoryAuditTrail {
    records: Arc<Mutex<Vec<AuditRecord>>>,
}

impl MemoryAuditTrail {
    pub fn new() -> Self {
        MemoryAuditTrail::default()
    }

    /// Appends `record`, if any: called by a store under the lock of the change it records.
    pub(crate) fn append(&self, record: Option<&AuditRecord>) {
        if let Some(record) = record {
            lock(&self.records).push(record.clone());
        }
    }

    /// Every record, in the order written (for tests).
    pub fn all(&self) -> Vec<AuditRecord> {
        lock(&self.records).clone()
    }
}

#[async_trait]
impl AuditTrail for MemoryAuditTrail {
    async fn page(
        &self,
        owner: &str,
        query: &AuditQuery,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<AuditRecord>> {
        if cursor.is_some_and(|c| c.is_empty()) {
            return Err(StoreError::Corrupt("an empty cursor".into()));
        }
        // The ids' range, as the adapter's key condition reads it.
        let Some(range) = query.ids(cursor) else { return Ok(Page { items: Vec::new(), next: None }) };
        let mut records: Vec<AuditRecord> = lock(&self.records)
            .iter()
            .filter(|r| r.owner == owner && range.contains(&r.id) && query.matches(r))
            .cloned()
            .collect();
        records.sort_by(|a, b| b.id.cmp(&a.id));
        let more = records.len() > limit as usize;
        records.truncate(limit as usize);
        let next = more.then(|| records.last().map(|r| r.id.clone())).flatten();
        Ok(Page { items: records, next })
    }
}
