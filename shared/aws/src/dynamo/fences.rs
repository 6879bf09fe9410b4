//! Start fences in DynamoDB: one item per `forbid` or `replace` job in the jobs table, keyed
//! `fence#<job id>`, holding the encoded key of the run that last passed the fence (`holder`)
//! and of the one before it (`previous`).
//! A take is a put conditional on the holder read (on the key's absence for a first take), so
//! of runs racing for one fence one wins. The item carries only its key and the holder (about
//! 100 bytes: one write unit), no `doc`, `owner` or due attributes, so it stays out of the jobs
//! table's indexes and of its job scans.

use super::item::{Item, get_opt_s, get_s, s};
use crate::errors::store_error;
use crate::metrics::{Ledger, writes};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use std::sync::Arc;
use sundial_domain::fence::Fence;
use sundial_domain::job::JobId;
use sundial_domain::ports::store::{FenceStore, StoreError, StoreResult};
use sundial_domain::run::RunKey;

/// Start fences, in the jobs table.
#[derive(Debug, Clone)]
pub struct DynamoFenceStore {
    client: Client,
    table: String,
    ledger: Arc<Ledger>,
}

fn fence_key(job_id: &JobId) -> String {
    format!("fence#{job_id}")
}

impl DynamoFenceStore {
    pub fn new(client: Client, table: impl Into<String>, ledger: Arc<Ledger>) -> Self {
        DynamoFenceStore { client, table: table.into(), ledger }
    }

    fn decode(item: &Item) -> StoreResult<Fence> {
        let key = |text: &str| {
            RunKey::decode(text)
                .ok_or_else(|| StoreError::Corrupt(format!("fence key `{text}` is not a run key")))
        };
        let holder = key(get_s(item, "holder")?)?;
        let previous = get_opt_s(item, "previous").map(key).transpose()?;
        Ok(Fence { holder, previous })
    }
}

#[async_trait]
impl FenceStore for DynamoFenceStore {
    async fn get(&self, job_id: &JobId) -> StoreResult<Option<Fence>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("job_id", s(fence_key(job_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        out.item.as_ref().map(Self::decode).transpose()
    }

    async fn take(
        &self,
        job_id: &JobId,
        expected: Option<&RunKey>,
        run: &RunKey,
        previous: Option<&RunKey>,
    ) -> StoreResult<()> {
        let mut request = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("job_id", s(fence_key(job_id)))
            .item("holder", s(run.encode()));
        if let Some(previous) = previous {
            request = request.item("previous", s(previous.encode()));
        }
        let request = match expected {
            None => request.condition_expression("attribute_not_exists(job_id)"),
            Some(holder) => request
                .condition_expression("holder = :h")
                .expression_attribute_values(":h", s(holder.encode())),
        };
        self.ledger.add(writes::ITEM, 1);
        request.send().await.map_err(store_error).map(|_| ())
    }

    async fn remove(&self, job_id: &JobId) -> StoreResult<()> {
        self.ledger.add(writes::ITEM, 1);
        self.client
            .delete_item()
            .table_name(&self.table)
            .key("job_id", s(fence_key(job_id)))
            .send()
            .await
            .map_err(store_error)
            .map(|_| ())
    }
}
