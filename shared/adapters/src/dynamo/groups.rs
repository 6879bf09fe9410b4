//! Concurrency groups in DynamoDB: one item per (owner, name) in the jobs table, keyed
//! `group#<owner>#<name>`, the group kept as JSON text beside its `version`. Every write is
//! conditional on that version (a create on the key's absence), so the slot ledger is changed by
//! one writer at a time across every worker. The item carries no `owner`, `name` or due
//! attributes, so it stays out of the jobs table's indexes.

use super::item::{self, Item, get_n, get_s, n, s};
use crate::metrics::{Ledger, writes};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use std::sync::Arc;
use sundial_domain::group::Group;
use sundial_domain::ports::store::{GroupStore, StoreError, StoreResult};

/// Concurrency groups, in the jobs table.
#[derive(Debug, Clone)]
pub struct DynamoGroupStore {
    client: Client,
    table: String,
    ledger: Arc<Ledger>,
}

fn group_key(owner: &str, name: &str) -> String {
    format!("group#{owner}#{name}")
}

impl DynamoGroupStore {
    pub fn new(client: Client, table: impl Into<String>, ledger: Arc<Ledger>) -> Self {
        DynamoGroupStore { client, table: table.into(), ledger }
    }

    fn decode(item: &Item) -> StoreResult<Group> {
        let mut group: Group =
            serde_json::from_str(get_s(item, "doc")?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        group.version = get_n(item, "version")?;
        Ok(group)
    }

    /// After a conditional write failed: `NotFound` if the group is gone, else `Conflict`.
    async fn why_refused(&self, owner: &str, name: &str) -> StoreError {
        match self.get(owner, name).await {
            Ok(None) => StoreError::NotFound,
            Ok(Some(_)) => StoreError::Conflict,
            Err(e) => e,
        }
    }
}

#[async_trait]
impl GroupStore for DynamoGroupStore {
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<Group>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("job_id", s(group_key(owner, name)))
            .consistent_read(true)
            .send()
            .await
            .map_err(item::classify)?;
        out.item.as_ref().map(Self::decode).transpose()
    }

    async fn put(&self, group: &Group, expected: Option<u64>) -> StoreResult<()> {
        let doc = serde_json::to_string(group).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut request = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("job_id", s(group_key(&group.owner, &group.name)))
            .item("doc", s(doc))
            .item("version", n(group.version));
        request = match expected {
            None => request.condition_expression("attribute_not_exists(job_id)"),
            Some(version) => {
                request.condition_expression("version = :v").expression_attribute_values(":v", n(version))
            }
        };
        self.ledger.add(writes::ITEM, 1);
        match request.send().await.map_err(item::classify) {
            Err(StoreError::Conflict) if expected.is_some() => {
                Err(self.why_refused(&group.owner, &group.name).await)
            }
            other => other.map(|_| ()),
        }
    }

    async fn delete(&self, owner: &str, name: &str, version: u64) -> StoreResult<()> {
        self.ledger.add(writes::ITEM, 1);
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key("job_id", s(group_key(owner, name)))
            .condition_expression("version = :v")
            .expression_attribute_values(":v", n(version))
            .send()
            .await
            .map_err(item::classify);
        match deleted {
            Err(StoreError::Conflict) => Err(self.why_refused(owner, name).await),
            other => other.map(|_| ()),
        }
    }
}
