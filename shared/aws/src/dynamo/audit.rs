//! The audit trail in DynamoDB, in the runs table: one item per record, keyed `audit#<owner>` and
//! the record's id (a ULID, so an owner's records sort by time), the record kept as JSON text
//! (`doc`) with what the trail filters on beside it (`audit_job`, `actor_name`, `actor_key`,
//! `audit_action`) and `expires_at` for the table's TTL. A record carries no in-flight
//! attributes, so it stays out of the runs table's index.
//!
//! A record is written only inside its change's transaction ([`put`]): the stores add it to the
//! transaction that makes the change, so both land or neither does. Reading ([`DynamoAuditTrail`])
//! walks the owner's partition newest first between the query's times, filtered, within a read
//! budget per page; the cursor is the last record id read, so a page never shifts when new
//! records land.

use super::item::{self, Item, TransactFailure, failed, get_s, n, s};
use crate::errors::store_error;
use crate::metrics::{Ledger, writes};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use sundial_domain::audit::{AuditQuery, AuditRecord, IdRange};
use sundial_domain::ports::store::{AuditTrail, Page, StoreError, StoreResult};

/// The most items one page of the trail reads (filters then keep some of them).
const READ_BUDGET: i32 = 1_000;
/// Items read per query call within the budget.
const READ_STEP: i32 = 200;

fn partition(owner: &str) -> String {
    format!("audit#{owner}")
}

/// The item of `record`, written into `table` (the runs table) in its change's transaction.
pub fn put(table: &str, record: &AuditRecord, ledger: &Ledger) -> StoreResult<TransactWriteItem> {
    let doc = serde_json::to_string(record).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let mut builder = Put::builder()
        .table_name(table)
        .item("job_id", s(partition(&record.owner)))
        .item("run_key", s(&record.id))
        .item("doc", s(doc))
        .item("actor_name", s(&record.actor.name))
        .item("audit_action", s(&record.action))
        .item("expires_at", n(record.expires_at.timestamp()))
        // A record is never written over: an id drawn twice fails its change, as a retry can.
        .condition_expression("attribute_not_exists(run_key)");
    if let Some(job) = &record.job {
        builder = builder.item("audit_job", s(job.as_str()));
    }
    if let Some(key) = &record.actor.key_id {
        builder = builder.item("actor_key", s(key));
    }
    // Two write units in a transaction per KB: the record is one item more in its change's.
    ledger.add(writes::ITEM, 2);
    let put = builder.build().map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(TransactWriteItem::builder().put(put).build())
}

/// `items`, with the record `audit` (if any) as one more, last, so that the indexes of the
/// change's own items in a cancellation's reasons stay as they were.
pub fn with_record(
    mut items: Vec<TransactWriteItem>,
    table: &str,
    audit: Option<&AuditRecord>,
    ledger: &Ledger,
) -> StoreResult<Vec<TransactWriteItem>> {
    if let Some(record) = audit {
        items.push(put(table, record, ledger)?);
    }
    Ok(items)
}

/// The audit trail, read from the runs table.
#[derive(Debug, Clone)]
pub struct DynamoAuditTrail {
    client: Client,
    table: String,
}

impl DynamoAuditTrail {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoAuditTrail { client, table: table.into() }
    }
}

/// The filter expression and its values for `query`'s filters other than time.
fn filter(query: &AuditQuery) -> (Option<String>, Item) {
    let mut terms = Vec::new();
    let mut values = Item::new();
    if let Some(job) = &query.job {
        terms.push("audit_job = :job");
        values.insert(":job".into(), s(job.as_str()));
    }
    if let Some(actor) = &query.actor {
        terms.push("(actor_name = :actor OR actor_key = :actor)");
        values.insert(":actor".into(), s(actor));
    }
    if let Some(action) = &query.action {
        terms.push("audit_action = :action");
        values.insert(":action".into(), s(action));
    }
    ((!terms.is_empty()).then(|| terms.join(" AND ")), values)
}

#[async_trait]
impl AuditTrail for DynamoAuditTrail {
    async fn page(
        &self,
        owner: &str,
        query: &AuditQuery,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<AuditRecord>> {
        if cursor.is_some_and(|c| c.is_empty() || !c.bytes().all(|b| b.is_ascii_alphanumeric())) {
            return Err(StoreError::Corrupt("not a cursor of the audit trail".into()));
        }
        let Some(IdRange { low, high }) = query.ids(cursor) else {
            // DynamoDB refuses a range whose bounds are upside down: it holds nothing.
            return Ok(Page { items: Vec::new(), next: None });
        };
        let (filter, mut values) = filter(query);
        values.insert(":pk".into(), s(partition(owner)));
        values.insert(":low".into(), s(&low));
        values.insert(":high".into(), s(&high));
        let mut records = Vec::new();
        let mut start: Option<Item> = None;
        let mut read = 0;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("job_id = :pk AND run_key BETWEEN :low AND :high")
                .set_filter_expression(filter.clone())
                .set_expression_attribute_values(Some(values.clone()))
                .scan_index_forward(false)
                .consistent_read(true)
                .limit(READ_STEP)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(store_error)?;
            read += out.scanned_count();
            for item in out.items() {
                // BETWEEN is inclusive: the high bound itself was shown, or is past `to`.
                if get_s(item, "run_key")? == high {
                    continue;
                }
                let record: AuditRecord = serde_json::from_str(get_s(item, "doc")?)
                    .map_err(|e| StoreError::Corrupt(format!("audit record: {e}")))?;
                records.push(record);
            }
            if records.len() >= limit as usize {
                records.truncate(limit as usize);
                let next = records.last().map(|r| r.id.clone());
                return Ok(Page { items: records, next });
            }
            match out.last_evaluated_key {
                None => return Ok(Page { items: records, next: None }),
                Some(key) if read >= READ_BUDGET => {
                    // Out of budget: the next page starts below the last item read.
                    let next = get_s(&key, "run_key")?.to_string();
                    return Ok(Page { items: records, next: Some(next) });
                }
                Some(key) => start = Some(key),
            }
        }
    }
}

/// Writes the one item `put` (its condition failing as `Conflict`): alone, as a PutItem, or with
/// the record `audit` in one transaction.
pub async fn put_one(
    client: &Client,
    put: Put,
    table: &str,
    audit: Option<&AuditRecord>,
    ledger: &Ledger,
) -> StoreResult<()> {
    let Some(record) = audit else {
        ledger.add(writes::ITEM, 1);
        return client
            .put_item()
            .table_name(put.table_name())
            .set_item(Some(put.item().clone()))
            .set_condition_expression(put.condition_expression().map(str::to_string))
            .set_expression_attribute_names(put.expression_attribute_names().cloned())
            .set_expression_attribute_values(put.expression_attribute_values().cloned())
            .send()
            .await
            .map(|_| ())
            .map_err(store_error);
    };
    ledger.add(writes::ITEM, 2);
    let items = vec![TransactWriteItem::builder().put(put).build(), self::put(table, record, ledger)?];
    match item::transact(client, items).await {
        Ok(()) => Ok(()),
        Err(TransactFailure::Cancelled(r)) if failed(&r, 0) => Err(StoreError::Conflict),
        Err(TransactFailure::Cancelled(r)) => {
            Err(StoreError::Unavailable(format!("transaction cancelled: {r:?}")))
        }
        Err(TransactFailure::Store(e)) => Err(e),
    }
}
