//! Start fences in memory: [`MemoryFenceStore`], the [`FenceStore`] that behaves as the fences'
//! items in the DynamoDB jobs table do (`sundial_aws::dynamo::fences`): one holder per job,
//! replaced only over the holder read, which becomes the previous one.

use crate::guard::lock;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use sundial_domain::fence::Fence;
use sundial_domain::job::JobId;
use sundial_domain::ports::store::{FenceStore, StoreError, StoreResult};
use sundial_domain::run::RunKey;

/// Start fences in memory.
#[derive(Debug, Default)]
pub struct MemoryFenceStore {
    fences: Mutex<HashMap<JobId, Fence>>,
}

impl MemoryFenceStore {
    pub fn new() -> Self {
        MemoryFenceStore::default()
    }
}

#[async_trait]
impl FenceStore for MemoryFenceStore {
    async fn get(&self, job_id: &JobId) -> StoreResult<Option<Fence>> {
        Ok(lock(&self.fences).get(job_id).cloned())
    }

    async fn take(
        &self,
        job_id: &JobId,
        expected: Option<&RunKey>,
        run: &RunKey,
        previous: Option<&RunKey>,
    ) -> StoreResult<()> {
        let mut fences = lock(&self.fences);
        if fences.get(job_id).map(|fence| &fence.holder) != expected {
            return Err(StoreError::Conflict);
        }
        fences.insert(job_id.clone(), Fence { holder: run.clone(), previous: previous.cloned() });
        Ok(())
    }

    async fn remove(&self, job_id: &JobId) -> StoreResult<()> {
        lock(&self.fences).remove(job_id);
        Ok(())
    }
}
