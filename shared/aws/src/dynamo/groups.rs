//! Concurrency groups in DynamoDB: one item per (owner, name) in the jobs table, keyed
//! `group#<owner>#<name>`, the group kept as JSON text beside its `version`. Every write is
//! conditional on that version (a create on the key's absence), so the slot ledger is changed by
//! one writer at a time across every worker. The jobs linked to the group are another item,
//! `grouplinks#<owner>#<name>` (one `l_<job id>` attribute per link, the link's time in Unix
//! milliseconds, and a `version`), so the ledger every admission rewrites does not grow with
//! them; a link checks the group's item in the same transaction, and a delete removes both under
//! both versions. Neither item carries `owner`, `name` or due attributes, so both stay out of the
//! jobs table's indexes.

use super::audit;
use super::item::{self, Item, TransactFailure, failed, get_n, get_s, n, s};
use super::links::LinksItem;
use crate::errors::store_error;
use crate::metrics::{Ledger, writes};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::audit::AuditRecord;
use sundial_domain::group::{Group, Links};
use sundial_domain::ports::store::{GroupStore, StoreError, StoreResult};

/// Concurrency groups, in the jobs table.
#[derive(Debug, Clone)]
pub struct DynamoGroupStore {
    client: Client,
    table: String,
    /// Where the records of its changes go (the runs table).
    audit_table: String,
    ledger: Arc<Ledger>,
}

fn group_key(owner: &str, name: &str) -> String {
    format!("group#{owner}#{name}")
}

fn links_key(owner: &str, name: &str) -> String {
    format!("grouplinks#{owner}#{name}")
}

fn built<T, E: std::fmt::Display>(built: Result<T, E>) -> StoreResult<T> {
    built.map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl DynamoGroupStore {
    /// The store in `table`, writing the records of its changes into `audit_table`.
    pub fn new(
        client: Client,
        table: impl Into<String>,
        audit_table: impl Into<String>,
        ledger: Arc<Ledger>,
    ) -> Self {
        DynamoGroupStore { client, table: table.into(), audit_table: audit_table.into(), ledger }
    }

    fn decode(item: &Item) -> StoreResult<Group> {
        let mut group: Group =
            serde_json::from_str(get_s(item, "doc")?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        group.version = get_n(item, "version")?;
        Ok(group)
    }

    /// The links item of group `name` of `owner`.
    fn links_item(&self, owner: &str, name: &str) -> LinksItem<'_> {
        LinksItem {
            client: &self.client,
            table: &self.table,
            ledger: &self.ledger,
            record: group_key(owner, name),
            key: links_key(owner, name),
        }
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
            .map_err(store_error)?;
        out.item.as_ref().map(Self::decode).transpose()
    }

    async fn put(
        &self,
        group: &Group,
        expected: Option<u64>,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let doc = serde_json::to_string(group).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut request = Put::builder()
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
        let put = built(request.build())?;
        match audit::put_one(&self.client, put, &self.audit_table, audit, &self.ledger).await {
            Err(StoreError::Conflict) if expected.is_some() => {
                Err(self.why_refused(&group.owner, &group.name).await)
            }
            other => other.map(|_| ()),
        }
    }

    async fn delete(
        &self,
        owner: &str,
        name: &str,
        version: u64,
        links_version: u64,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let group = built(
            Delete::builder()
                .table_name(&self.table)
                .key("job_id", s(group_key(owner, name)))
                .condition_expression("version = :v")
                .expression_attribute_values(":v", n(version))
                .build(),
        )?;
        let links = built(
            Delete::builder()
                .table_name(&self.table)
                .key("job_id", s(links_key(owner, name)))
                .condition_expression("attribute_not_exists(job_id) OR version = :v")
                .expression_attribute_values(":v", n(links_version))
                .build(),
        )?;
        self.ledger.add(writes::ITEM, 4);
        let items = vec![
            TransactWriteItem::builder().delete(group).build(),
            TransactWriteItem::builder().delete(links).build(),
        ];
        let items = audit::with_record(items, &self.audit_table, audit, &self.ledger)?;
        match item::transact(&self.client, items).await {
            Ok(()) => Ok(()),
            Err(TransactFailure::Cancelled(r)) if failed(&r, 0) => Err(self.why_refused(owner, name).await),
            Err(TransactFailure::Cancelled(_)) => Err(StoreError::Conflict),
            Err(TransactFailure::Store(e)) => Err(e),
        }
    }

    async fn links(&self, owner: &str, name: &str) -> StoreResult<Links> {
        self.links_item(owner, name).read().await
    }

    async fn link(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()> {
        self.links_item(owner, name).link(job, at).await
    }

    async fn unlink(&self, owner: &str, name: &str, job: &str) -> StoreResult<()> {
        self.links_item(owner, name).unlink(job, None).await
    }
}
