//! The links item of a record jobs name (a concurrency group, a named calendar): one
//! `l_<job id>` attribute per job linked to it (the link's time, Unix milliseconds) and a
//! `version` every link and unlink moves, so that the record's delete is fenced by it. A link
//! checks the record's own item in the same transaction: a job never links to a record deleted
//! meanwhile. The item carries no indexed attribute.

use super::item::{self, Item, TransactFailure, failed, get_n, n, s};
use super::update::Update;
use crate::errors::store_error;
use crate::metrics::{Ledger, writes};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem, Update as TransactUpdate};
use chrono::{DateTime, Utc};
use sundial_domain::group::{Link, Links};
use sundial_domain::ports::store::{StoreError, StoreResult};

/// The links item `key` of the record `record` (both keys of the table), in `table`.
#[derive(Debug)]
pub struct LinksItem<'a> {
    pub client: &'a Client,
    pub table: &'a str,
    pub ledger: &'a Ledger,
    /// The record the jobs name: a link checks it exists.
    pub record: String,
    /// The links item's own key.
    pub key: String,
}

/// The attribute holding `job`'s link.
fn attribute(job: &str) -> String {
    format!("l_{job}")
}

fn built<T, E: std::fmt::Display>(built: Result<T, E>) -> StoreResult<T> {
    built.map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl LinksItem<'_> {
    /// The links, read consistently (empty, version 0, if none ever was).
    pub async fn read(&self) -> StoreResult<Links> {
        let out = self
            .client
            .get_item()
            .table_name(self.table)
            .key("job_id", s(&self.key))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        let Some(stored) = out.item else { return Ok(Links::default()) };
        decode(&stored)
    }

    /// Links `job` as of `at` if the record exists (`NotFound` otherwise), in one transaction.
    pub async fn link(&self, job: &str, at: DateTime<Utc>) -> StoreResult<()> {
        let exists = built(
            ConditionCheck::builder()
                .table_name(self.table)
                .key("job_id", s(&self.record))
                .condition_expression("attribute_exists(job_id)")
                .build(),
        )?;
        let update = Update::new()
            .set("#l", ":at", n(at.timestamp_millis()))
            .add("version", ":one", n(1))
            .name("#l", attribute(job));
        let request = TransactUpdate::builder().table_name(self.table).key("job_id", s(&self.key));
        let link = built(update.apply_transact(request).build())?;
        self.ledger.add(writes::ITEM, 4);
        let items = vec![
            TransactWriteItem::builder().condition_check(exists).build(),
            TransactWriteItem::builder().update(link).build(),
        ];
        match item::transact(self.client, items).await {
            Ok(()) => Ok(()),
            Err(TransactFailure::Cancelled(r)) if failed(&r, 0) => Err(StoreError::NotFound),
            Err(TransactFailure::Cancelled(_)) => Err(StoreError::Conflict),
            Err(TransactFailure::Store(e)) => Err(e),
        }
    }

    /// Removes `job`'s link if it has one; with `made_at`, only if it is still the link made
    /// then (one made again since stays).
    pub async fn unlink(&self, job: &str, made_at: Option<DateTime<Utc>>) -> StoreResult<()> {
        self.ledger.add(writes::ITEM, 1);
        let mut update = Update::new().remove("#l").add("version", ":one", n(1)).name("#l", attribute(job));
        let condition = match made_at {
            Some(at) => {
                update = update.value(":at", n(at.timestamp_millis()));
                "#l = :at"
            }
            None => "attribute_exists(#l)",
        };
        let request = self.client.update_item().table_name(self.table).key("job_id", s(&self.key));
        match update.apply(request).condition_expression(condition).send().await.map_err(store_error) {
            // No such link (or made again since): nothing to remove.
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The links a links item holds.
fn decode(stored: &Item) -> StoreResult<Links> {
    let mut links = Links { version: get_n(stored, "version")?, ..Links::default() };
    for (name, value) in stored {
        let Some(job) = name.strip_prefix("l_") else { continue };
        let at = match value {
            AttributeValue::N(millis) => millis.parse::<i64>().ok().and_then(DateTime::from_timestamp_millis),
            _ => None,
        };
        let at = at.ok_or_else(|| StoreError::Corrupt(format!("link {name} is not a time")))?;
        links.jobs.insert(job.to_string(), Link { at });
    }
    Ok(links)
}
