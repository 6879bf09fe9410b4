//! Named calendars in DynamoDB, in the jobs table: one item per (owner, name), keyed
//! `calendar#<owner>#<name>`, the calendar kept as JSON text (`doc`) beside its `version`, every
//! write conditional on that version (a create on the key's absence). The jobs linked to it are
//! another item, `calendarlinks#<owner>#<name>`, kept as a group's links are
//! ([`super::groups`]); and the owner's list is a third, `calendars#<owner>`: one `c_<name>`
//! attribute per calendar and their `count`, written in the transaction that creates or deletes
//! one, so a listing is one read and a batch read, and the count bounds how many an owner keeps.
//! None of these items carries `owner`, `name`, `document` or due attributes, so all stay out of
//! the jobs table's indexes and its scan of jobs.

use super::audit;
use super::item::{self, Item, TransactFailure, failed, get_n, get_s, n, s};
use super::links::LinksItem;
use super::update::Update;
use crate::errors::store_error;
use crate::metrics::{Ledger, writes};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem, Update as TransactUpdate};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::audit::AuditRecord;
use sundial_domain::group::Links;
use sundial_domain::named_calendar::{MAX_CALENDARS_PER_OWNER, NamedCalendar};
use sundial_domain::ports::store::{CalendarStore, StoreError, StoreResult};

/// Named calendars, in the jobs table.
#[derive(Debug, Clone)]
pub struct DynamoCalendarStore {
    client: Client,
    table: String,
    /// Where the records of its changes go (the runs table).
    audit_table: String,
    ledger: Arc<Ledger>,
}

fn calendar_key(owner: &str, name: &str) -> String {
    format!("calendar#{owner}#{name}")
}

fn links_key(owner: &str, name: &str) -> String {
    format!("calendarlinks#{owner}#{name}")
}

fn list_key(owner: &str) -> String {
    format!("calendars#{owner}")
}

/// The list's attribute for calendar `name`.
fn listed_attribute(name: &str) -> String {
    format!("c_{name}")
}

fn built<T, E: std::fmt::Display>(built: Result<T, E>) -> StoreResult<T> {
    built.map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl DynamoCalendarStore {
    /// The store in `table`, writing the records of its changes into `audit_table`.
    pub fn new(
        client: Client,
        table: impl Into<String>,
        audit_table: impl Into<String>,
        ledger: Arc<Ledger>,
    ) -> Self {
        DynamoCalendarStore { client, table: table.into(), audit_table: audit_table.into(), ledger }
    }

    fn decode(item: &Item) -> StoreResult<NamedCalendar> {
        let mut calendar: NamedCalendar =
            serde_json::from_str(get_s(item, "doc")?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        calendar.version = get_n(item, "version")?;
        Ok(calendar)
    }

    async fn read(&self, key: String) -> StoreResult<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("job_id", s(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        Ok(out.item)
    }

    /// The links item of calendar `name` of `owner`.
    fn links_item(&self, owner: &str, name: &str) -> LinksItem<'_> {
        LinksItem {
            client: &self.client,
            table: &self.table,
            ledger: &self.ledger,
            record: calendar_key(owner, name),
            key: links_key(owner, name),
        }
    }

    /// After a conditional write failed: `NotFound` if the calendar is gone, else `Conflict`.
    async fn why_refused(&self, owner: &str, name: &str) -> StoreError {
        match self.get(owner, name).await {
            Ok(None) => StoreError::NotFound,
            Ok(Some(_)) => StoreError::Conflict,
            Err(e) => e,
        }
    }

    /// A new calendar, listed in the same transaction while the owner has fewer than the most.
    async fn create(
        &self,
        calendar: &NamedCalendar,
        doc: String,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let put = built(
            Put::builder()
                .table_name(&self.table)
                .item("job_id", s(calendar_key(&calendar.owner, &calendar.name)))
                .item("doc", s(doc))
                .item("version", n(calendar.version))
                .condition_expression("attribute_not_exists(job_id)")
                .build(),
        )?;
        let listed = Update::new()
            .set("#c", ":one", n(1))
            .add("#count", ":one", n(1))
            .name("#c", listed_attribute(&calendar.name))
            .name("#count", "count")
            .value(":max", n(MAX_CALENDARS_PER_OWNER));
        let request = TransactUpdate::builder()
            .table_name(&self.table)
            .key("job_id", s(list_key(&calendar.owner)))
            .condition_expression("attribute_not_exists(#count) OR #count < :max");
        let list = built(listed.apply_transact(request).build())?;
        self.ledger.add(writes::ITEM, 4);
        let items = vec![
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder().update(list).build(),
        ];
        let items = audit::with_record(items, &self.audit_table, audit, &self.ledger)?;
        match item::transact(&self.client, items).await {
            Ok(()) => Ok(()),
            Err(TransactFailure::Cancelled(r)) if failed(&r, 0) => Err(StoreError::Conflict),
            Err(TransactFailure::Cancelled(r)) if failed(&r, 1) => {
                Err(StoreError::QuotaExceeded(MAX_CALENDARS_PER_OWNER as u32))
            }
            Err(TransactFailure::Cancelled(_)) => Err(StoreError::Conflict),
            Err(TransactFailure::Store(e)) => Err(e),
        }
    }
}

#[async_trait]
impl CalendarStore for DynamoCalendarStore {
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<NamedCalendar>> {
        self.read(calendar_key(owner, name)).await?.as_ref().map(Self::decode).transpose()
    }

    async fn list(&self, owner: &str) -> StoreResult<Vec<NamedCalendar>> {
        let Some(listed) = self.read(list_key(owner)).await? else { return Ok(Vec::new()) };
        let keys: Vec<Item> = listed
            .keys()
            .filter_map(|attribute| attribute.strip_prefix("c_"))
            .map(|name| Item::from([("job_id".to_string(), s(calendar_key(owner, name)))]))
            .collect();
        let mut calendars =
            super::batch::get(&self.client, &self.table, keys, true, |item| Self::decode(item).map(Some))
                .await?;
        calendars.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(calendars)
    }

    async fn put(
        &self,
        calendar: &NamedCalendar,
        expected: Option<u64>,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let doc = serde_json::to_string(calendar).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let Some(version) = expected else { return self.create(calendar, doc, audit).await };
        let put = built(
            Put::builder()
                .table_name(&self.table)
                .item("job_id", s(calendar_key(&calendar.owner, &calendar.name)))
                .item("doc", s(doc))
                .item("version", n(calendar.version))
                .condition_expression("version = :v")
                .expression_attribute_values(":v", n(version))
                .build(),
        )?;
        match audit::put_one(&self.client, put, &self.audit_table, audit, &self.ledger).await {
            Err(StoreError::Conflict) => Err(self.why_refused(&calendar.owner, &calendar.name).await),
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
        let calendar = built(
            Delete::builder()
                .table_name(&self.table)
                .key("job_id", s(calendar_key(owner, name)))
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
        let unlisted = Update::new()
            .remove("#c")
            .add("#count", ":minus", n(-1))
            .name("#c", listed_attribute(name))
            .name("#count", "count");
        let request = TransactUpdate::builder()
            .table_name(&self.table)
            .key("job_id", s(list_key(owner)))
            .condition_expression("attribute_exists(#c)");
        let list = built(unlisted.apply_transact(request).build())?;
        self.ledger.add(writes::ITEM, 6);
        let items = vec![
            TransactWriteItem::builder().delete(calendar).build(),
            TransactWriteItem::builder().delete(links).build(),
            TransactWriteItem::builder().update(list).build(),
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

    async fn unlink_stale(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()> {
        self.links_item(owner, name).unlink(job, Some(at)).await
    }

    async fn unlink(&self, owner: &str, name: &str, job: &str) -> StoreResult<()> {
        self.links_item(owner, name).unlink(job, None).await
    }
}
