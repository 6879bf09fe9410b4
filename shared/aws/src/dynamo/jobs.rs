//! The jobs table in DynamoDB.
//!
//! A job is one item keyed by `job_id`, its document kept as JSON text beside the attributes the
//! indexes need. Two helper items keep the per-owner rules exact without a scan: a name lock
//! (`name#<owner>#<name>`) makes names unique per owner, and an owner counter (`owner#<owner>`)
//! enforces the jobs-per-owner limit; both are written in the same transaction as the job.
//! `due_bucket`/`due_at` are present only while the job is active and has a next run, so paused
//! and finished jobs leave the sparse `by-due` index. That index holds keys only: the tick reads
//! the jobs it finds there from the table, so an advance of `next_run_at` writes index entries
//! the size of their keys, not of the job (a write costs a unit per KB of what it writes).

use super::audit;
use super::batch;
use super::cursor::{self, Part};
use super::item::{self, Item, TransactFailure, failed, get_n, get_opt_s, get_s, n, s};
use super::update::Update;
use crate::errors::store_error;
use crate::metrics::{Ledger, writes};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update as TransactUpdate};
use std::collections::HashMap;
use std::sync::Arc;
use sundial_domain::audit::AuditRecord;
use sundial_domain::due_index::{due_bucket, format_instant, parse_instant};
use sundial_domain::health::Baseline;
use sundial_domain::job::{Gap, Job, JobDocument, JobId};
use sundial_domain::ports::store::{Advance, Catalogue, DueIndex, Page, StoreError, StoreResult};
use sundial_domain::run_limit::{Mark, RunCount};
use sundial_domain::stored::decode_lenient;
use sundial_domain::versions::JobVersion;

/// Index of an owner's jobs, sorted by name.
pub const BY_OWNER_INDEX: &str = "by-owner";
/// Sparse index of active jobs by due minute and shard.
pub const BY_DUE_INDEX: &str = "by-due";

/// Jobs in one DynamoDB table.
#[derive(Debug, Clone)]
pub struct DynamoJobStore {
    client: Client,
    table: String,
    /// Where the jobs' kept versions are (the runs table).
    versions_table: String,
    shards: u16,
    ledger: Arc<Ledger>,
}

fn name_lock_key(owner: &str, name: &str) -> String {
    format!("name#{owner}#{name}")
}

fn owner_counter_key(owner: &str) -> String {
    format!("owner#{owner}")
}

impl DynamoJobStore {
    /// Jobs in `table`, their kept versions in `versions_table` (the runs table: versions are a
    /// job's history, read by job, expiring as runs do, and out of the jobs table's scans).
    pub fn new(
        client: Client,
        table: impl Into<String>,
        versions_table: impl Into<String>,
        shards: u16,
        ledger: Arc<Ledger>,
    ) -> Self {
        DynamoJobStore {
            client,
            table: table.into(),
            versions_table: versions_table.into(),
            shards: shards.max(1),
            ledger,
        }
    }

    /// Bulk-loads jobs with BatchWriteItem (25 at a time), for seeding benchmarks and tests.
    /// It writes no name locks or owner counters: names and limits are not enforced, so it is
    /// not a substitute for [`JobStore::create`].
    pub async fn import(&self, jobs: &[Job]) -> StoreResult<()> {
        use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
        for chunk in jobs.chunks(25) {
            let mut requests = Vec::with_capacity(chunk.len());
            for job in chunk {
                let put = PutRequest::builder()
                    .set_item(Some(self.to_item(job)?))
                    .build()
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                requests.push(WriteRequest::builder().put_request(put).build());
            }
            let mut pending = Some(requests);
            while let Some(requests) = pending.take().filter(|r| !r.is_empty()) {
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, requests)
                    .send()
                    .await
                    .map_err(store_error)?;
                pending = out.unprocessed_items.and_then(|mut u| u.remove(&self.table));
            }
        }
        Ok(())
    }

    /// Reads full jobs by id (those a keys-only index names, or the watchdog's), consistently,
    /// in the given order; ids without a job, or whose item does not decode, are left out.
    async fn batch_get(&self, ids: &[String]) -> StoreResult<Vec<Job>> {
        let keys = ids.iter().map(|id| Item::from([("job_id".to_string(), s(id))])).collect();
        let jobs = batch::get(&self.client, &self.table, keys, true, quarantined).await?;
        let mut found: HashMap<String, Job> = jobs.into_iter().map(|job| (job.id.to_string(), job)).collect();
        // A job deleted between the index query and the read is simply not listed.
        Ok(ids.iter().filter_map(|id| found.remove(id)).collect())
    }

    fn to_item(&self, job: &Job) -> StoreResult<Item> {
        let document =
            serde_json::to_string(&job.document).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let mut item = Item::from([
            ("job_id".into(), s(job.id.as_str())),
            ("owner".into(), s(&job.owner)),
            ("name".into(), s(&job.document.name)),
            ("document".into(), s(document)),
            ("version".into(), n(job.version)),
            ("signing_secret".into(), s(&job.signing_secret)),
            ("created_at".into(), s(job.created_at.to_rfc3339())),
            ("updated_at".into(), s(job.updated_at.to_rfc3339())),
        ]);
        if let Some(next) = job.next_run_at {
            item.insert("next_run_at".into(), s(format_instant(next)));
        }
        if !job.pauses.is_empty() {
            let pauses =
                serde_json::to_string(&job.pauses).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            item.insert("pauses".into(), s(pauses));
        }
        if !job.gaps.is_empty() {
            item.insert("gaps".into(), s(encode_gaps(&job.gaps)?));
        }
        if let Some(baseline) = &job.baseline {
            let text = serde_json::to_string(baseline).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            item.insert("baseline".into(), s(text));
        }
        if job.counted.runs > 0 {
            item.insert("scheduled_runs".into(), n(job.counted.runs));
        }
        if !job.counted.marks.is_empty() {
            item.insert("counted_marks".into(), s(encode_marks(&job.counted.marks)?));
        }
        if !job.versions.is_empty() {
            let versions =
                serde_json::to_string(&job.versions).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            item.insert("versions".into(), s(versions));
        }
        if !job.skips.is_empty() {
            let skips = serde_json::to_string(&job.skips).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            item.insert("skips".into(), s(skips));
        }
        if !job.children.is_empty() {
            let children = job.children.iter().map(|c| c.to_string()).collect();
            item.insert("children".into(), AttributeValue::Ss(children));
        }
        if let Some(due) = job.index_at() {
            item.insert("due_bucket".into(), s(due_bucket(job.id.as_str(), due, self.shards)));
            item.insert("due_at".into(), s(format_instant(due)));
        }
        Ok(item)
    }

    fn put(&self, item: Item, condition: &str) -> StoreResult<Put> {
        Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(condition)
            .build()
            .map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    fn name_lock(&self, job: &Job) -> StoreResult<Put> {
        let lock = Item::from([
            ("job_id".into(), s(name_lock_key(&job.owner, &job.document.name))),
            ("lock_of".into(), s(job.id.as_str())),
        ]);
        self.put(lock, "attribute_not_exists(job_id)")
    }

    fn release_name(&self, owner: &str, name: &str, id: &JobId) -> StoreResult<Delete> {
        Delete::builder()
            .table_name(&self.table)
            .key("job_id", s(name_lock_key(owner, name)))
            .condition_expression("lock_of = :id")
            .expression_attribute_values(":id", s(id.as_str()))
            .build()
            .map_err(|e| StoreError::Corrupt(e.to_string()))
    }

    fn count(&self, owner: &str, delta: i64, max: Option<u32>) -> StoreResult<TransactUpdate> {
        let mut update = Update::new()
            .set_to("job_count", "if_not_exists(job_count, :zero) + :delta")
            .value(":zero", n(0))
            .value(":delta", n(delta));
        let mut request =
            TransactUpdate::builder().table_name(&self.table).key("job_id", s(owner_counter_key(owner)));
        if let Some(max) = max {
            // An owner's first job passes only if the limit allows one at all.
            request = request.condition_expression(
                "(attribute_not_exists(job_count) AND :zero < :max) OR job_count < :max",
            );
            update = update.value(":max", n(max));
        }
        update.apply_transact(request).build().map_err(|e| StoreError::Corrupt(e.to_string()))
    }
}

/// Whether `id` is a job's id (not one of the helper items the table also holds).
fn is_job_id(id: &str) -> bool {
    JobId::parse(id).is_some()
}

/// The key of the `by-owner` index a listing of `owner`'s jobs continues after.
fn by_owner(owner: &str) -> [Part<'_>; 3] {
    [Part::Free("job_id", is_job_id), Part::Fixed("owner", owner), Part::Free("name", cursor::any)]
}

/// The key a listing of the whole table continues after.
const WHOLE_TABLE: [Part<'static>; 1] = [Part::Free("job_id", is_job_id)];

fn from_item(item: &Item) -> StoreResult<Job> {
    let time = |name: &str| {
        parse_instant(get_s(item, name)?)
            .ok_or_else(|| StoreError::Corrupt(format!("attribute {name} is not a time")))
    };
    let id = get_s(item, "job_id")?;
    let raw: serde_json::Value = serde_json::from_str(get_s(item, "document")?)
        .map_err(|e| StoreError::Corrupt(format!("document: {e}")))?;
    // Leniently: a field another version wrote is dropped, not poison (the API's input is strict).
    let (document, dropped): (JobDocument, _) =
        decode_lenient(raw).map_err(|e| StoreError::Corrupt(format!("document: {e}")))?;
    if !dropped.is_empty() {
        tracing::warn!(job_id = %id, fields = ?dropped, "stored job fields this version does not know are ignored");
    }
    Ok(Job {
        id: JobId::parse(id).ok_or_else(|| StoreError::Corrupt(format!("job_id {id}")))?,
        owner: get_s(item, "owner")?.to_string(),
        document,
        version: get_n(item, "version")?,
        created_at: time("created_at")?,
        updated_at: time("updated_at")?,
        next_run_at: get_opt_s(item, "next_run_at").and_then(parse_instant),
        signing_secret: get_s(item, "signing_secret")?.to_string(),
        pauses: match get_opt_s(item, "pauses") {
            Some(text) => {
                serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("pauses: {e}")))?
            }
            None => Vec::new(),
        },
        gaps: match get_opt_s(item, "gaps") {
            Some(text) => {
                serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("gaps: {e}")))?
            }
            None => Vec::new(),
        },
        counted: RunCount {
            runs: if item.contains_key("scheduled_runs") { get_n(item, "scheduled_runs")? } else { 0 },
            marks: match get_opt_s(item, "counted_marks") {
                Some(text) => serde_json::from_str(text)
                    .map_err(|e| StoreError::Corrupt(format!("counted_marks: {e}")))?,
                None => Vec::new(),
            },
        },
        versions: match get_opt_s(item, "versions") {
            Some(text) => {
                serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("versions: {e}")))?
            }
            None => Vec::new(),
        },
        baseline: match get_opt_s(item, "baseline") {
            Some(text) => {
                Some(serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("baseline: {e}")))?)
            }
            None => None,
        },
        skips: match get_opt_s(item, "skips") {
            Some(text) => {
                serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("skips: {e}")))?
            }
            None => Vec::new(),
        },
        children: match item.get("children") {
            Some(AttributeValue::Ss(ids)) => {
                let mut children = ids
                    .iter()
                    .map(|id| JobId::parse(id).ok_or_else(|| StoreError::Corrupt(format!("children: {id}"))))
                    .collect::<StoreResult<Vec<_>>>()?;
                children.sort();
                children
            }
            Some(_) => return Err(StoreError::Corrupt("children is not a string set".into())),
            None => Vec::new(),
        },
    })
}

/// The condition of a write over a job read as `before`: the same version (no edit since) and
/// the same `next_run_at` (no advance by the tick since, which keeps the version). The edit and
/// the tick's advance both write `next_run_at`, so both check it.
fn read_condition(before: &Job) -> (String, std::collections::HashMap<String, AttributeValue>) {
    let mut values = std::collections::HashMap::from([(":v".to_string(), n(before.version))]);
    let condition = match before.next_run_at {
        Some(next) => {
            values.insert(":next_read".to_string(), s(format_instant(next)));
            "version = :v AND next_run_at = :next_read"
        }
        None => "version = :v AND attribute_not_exists(next_run_at)",
    };
    (condition.to_string(), values)
}

/// The key of version `version` of job `id`'s document in the versions table (the runs table):
/// a partition per job apart from its runs' (`versions#<id>`), one item per version.
fn version_key(id: &str, version: u64) -> Item {
    Item::from([
        ("job_id".to_string(), s(format!("versions#{id}"))),
        ("run_key".to_string(), s(format!("v{version:020}"))),
    ])
}

/// How long a kept version lives: as long as an audit record, so that a job edited rarely
/// keeps its history for over a year, and a deleted job's history goes by itself.
const VERSION_DAYS: i64 = 400;

impl DynamoJobStore {
    /// The writes that keep `after`'s new versions (its document, as of its update) and drop the
    /// ones it no longer keeps, for the transaction that writes `after`. Version items carry no
    /// in-flight attributes: they stay out of the runs table's index, and expire by its TTL.
    fn version_writes(&self, before: &[u64], after: &Job) -> StoreResult<Vec<TransactWriteItem>> {
        let mut writes = Vec::new();
        for version in after.versions.iter().filter(|v| !before.contains(v)) {
            let kept = JobVersion {
                job_id: after.id.clone(),
                version: *version,
                document: after.document.clone(),
                at: after.updated_at,
            };
            let doc = serde_json::to_string(&kept).map_err(|e| StoreError::Corrupt(e.to_string()))?;
            let expires = (after.updated_at + chrono::Duration::days(VERSION_DAYS)).timestamp();
            let put = Put::builder()
                .table_name(&self.versions_table)
                .set_item(Some(version_key(after.id.as_str(), *version)))
                .item("doc", s(doc))
                .item("expires_at", n(expires))
                .build()
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            writes.push(TransactWriteItem::builder().put(put).build());
        }
        for version in before.iter().filter(|v| !after.versions.contains(v)) {
            let delete = Delete::builder()
                .table_name(&self.versions_table)
                .set_key(Some(version_key(after.id.as_str(), *version)))
                .build()
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            writes.push(TransactWriteItem::builder().delete(delete).build());
        }
        self.ledger.add(writes::ITEM, 2 * writes.len() as u64);
        Ok(writes)
    }
}

#[async_trait]
impl Catalogue for DynamoJobStore {
    async fn create(&self, job: &Job, max_jobs: u32, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let mut items = vec![
            TransactWriteItem::builder()
                .put(self.put(self.to_item(job)?, "attribute_not_exists(job_id)")?)
                .build(),
            TransactWriteItem::builder().put(self.name_lock(job)?).build(),
            TransactWriteItem::builder().update(self.count(&job.owner, 1, Some(max_jobs))?).build(),
        ];
        items.extend(self.version_writes(&[], job)?);
        let items = audit::with_record(items, &self.versions_table, audit, &self.ledger)?;
        match item::transact(&self.client, items).await {
            Ok(()) => Ok(()),
            Err(TransactFailure::Cancelled(r)) if failed(&r, 1) => {
                Err(StoreError::NameTaken(job.document.name.clone()))
            }
            Err(TransactFailure::Cancelled(r)) if failed(&r, 2) => Err(StoreError::QuotaExceeded(max_jobs)),
            Err(TransactFailure::Cancelled(r)) => {
                Err(StoreError::Unavailable(format!("transaction cancelled: {r:?}")))
            }
            Err(TransactFailure::Store(e)) => Err(e),
        }
    }

    async fn get(&self, id: &JobId) -> StoreResult<Option<Job>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("job_id", s(id.as_str()))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        out.item.as_ref().map(from_item).transpose()
    }

    async fn find_by_name(&self, owner: &str, name: &str) -> StoreResult<Option<Job>> {
        // The name lock holds the id of the job holding the name; both reads are consistent,
        // where the by-owner index is not.
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("job_id", s(name_lock_key(owner, name)))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        let Some(id) = out.item.as_ref().and_then(|lock| get_opt_s(lock, "lock_of")).and_then(JobId::parse)
        else {
            return Ok(None);
        };
        Ok(self.get(&id).await?.filter(|job| job.owner == owner && job.document.name == name))
    }

    async fn get_many(&self, ids: &[JobId]) -> StoreResult<Vec<Job>> {
        let ids: Vec<String> = ids.iter().map(JobId::to_string).collect();
        self.batch_get(&ids).await
    }

    async fn list(&self, owner: &str, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>> {
        let key = by_owner(owner);
        let limit = limit.max(1) as usize;
        let mut keys: Vec<Item> = Vec::with_capacity(limit + 1);
        let mut exclusive_start = cursor.map(|c| cursor::decode(&key, c)).transpose()?;
        // One key more than asked tells whether another page exists, so `next` is never a
        // pointer to an empty page.
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(BY_OWNER_INDEX)
                .key_condition_expression("#o = :o")
                .expression_attribute_names("#o", "owner")
                .expression_attribute_values(":o", s(owner))
                .set_exclusive_start_key(exclusive_start)
                .limit((limit + 1 - keys.len()) as i32)
                .send()
                .await
                .map_err(store_error)?;
            keys.extend(out.items.unwrap_or_default());
            exclusive_start = out.last_evaluated_key;
            if keys.len() > limit || exclusive_start.is_none() {
                break;
            }
        }
        let next = if keys.len() > limit {
            keys.truncate(limit);
            keys.last().map(|last| cursor::encode(&key, last)).transpose()?
        } else {
            None
        };
        let ids =
            keys.iter().map(|k| get_s(k, "job_id").map(str::to_string)).collect::<StoreResult<Vec<_>>>()?;
        Ok(Page { items: self.batch_get(&ids).await?, next })
    }

    async fn cursor_after(&self, job: &Job) -> StoreResult<String> {
        let key = Item::from([
            ("job_id".to_string(), s(job.id.as_str())),
            ("owner".to_string(), s(&job.owner)),
            ("name".to_string(), s(&job.document.name)),
        ]);
        cursor::encode(&by_owner(&job.owner), &key)
    }

    async fn list_all(&self, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>> {
        let limit = limit.max(1) as usize;
        let mut exclusive_start = cursor.map(|c| cursor::decode(&WHOLE_TABLE, c)).transpose()?;
        let mut jobs: Vec<Job> = Vec::with_capacity(limit + 1);
        // A scan of the table, job items only (name locks and owner counters have no document).
        // The scan's order is fixed by the key's hash, so the last job returned continues it;
        // one job more than asked tells whether another page exists.
        loop {
            let out = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression("attribute_exists(#d)")
                .expression_attribute_names("#d", "document")
                .consistent_read(true)
                .set_exclusive_start_key(exclusive_start)
                .limit((limit + 1 - jobs.len()).max(25) as i32)
                .send()
                .await
                .map_err(store_error)?;
            for it in out.items() {
                jobs.extend(quarantined(it)?);
            }
            exclusive_start = out.last_evaluated_key;
            if jobs.len() > limit || exclusive_start.is_none() {
                break;
            }
        }
        let next = if jobs.len() > limit {
            jobs.truncate(limit);
            let last = jobs.last().map(|j| Item::from([("job_id".to_string(), s(j.id.as_str()))]));
            last.map(|key| cursor::encode(&WHOLE_TABLE, &key)).transpose()?
        } else {
            None
        };
        Ok(Page { items: jobs, next })
    }

    async fn update(&self, before: &Job, after: &Job, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let item = self.to_item(after)?;
        let versions = self.version_writes(&before.versions, after)?;
        let alone = before.document.name == after.document.name && versions.is_empty() && audit.is_none();
        let result = if alone {
            let (condition, values) = read_condition(before);
            self.client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression(condition)
                .set_expression_attribute_values(Some(values))
                .send()
                .await
                .map(|_| ())
                .map_err(store_error)
        } else {
            let (condition, values) = read_condition(before);
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(item))
                .condition_expression(condition)
                .set_expression_attribute_values(Some(values))
                .build()
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            // The job, its name when it changes, the versions it keeps and the change's record,
            // in one write.
            let renamed = before.document.name != after.document.name;
            let mut items = vec![TransactWriteItem::builder().put(put).build()];
            if renamed {
                items.push(
                    TransactWriteItem::builder()
                        .delete(self.release_name(&before.owner, &before.document.name, &before.id)?)
                        .build(),
                );
                items.push(TransactWriteItem::builder().put(self.name_lock(after)?).build());
            }
            items.extend(versions);
            let items = audit::with_record(items, &self.versions_table, audit, &self.ledger)?;
            match item::transact(&self.client, items).await {
                Ok(()) => Ok(()),
                Err(TransactFailure::Cancelled(r)) if failed(&r, 0) => Err(StoreError::Conflict),
                Err(TransactFailure::Cancelled(r)) if renamed && failed(&r, 2) => {
                    Err(StoreError::NameTaken(after.document.name.clone()))
                }
                Err(TransactFailure::Cancelled(r)) => {
                    Err(StoreError::Unavailable(format!("transaction cancelled: {r:?}")))
                }
                Err(TransactFailure::Store(e)) => Err(e),
            }
        };
        match result {
            // A lost condition is either a newer version or a deleted job: tell them apart.
            Err(StoreError::Conflict) if self.get(&before.id).await?.is_none() => Err(StoreError::NotFound),
            other => other,
        }
    }

    async fn version(&self, id: &JobId, version: u64) -> StoreResult<Option<JobVersion>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.versions_table)
            .set_key(Some(version_key(id.as_str(), version)))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        let Some(item) = out.item else { return Ok(None) };
        let kept: JobVersion = serde_json::from_str(get_s(&item, "doc")?)
            .map_err(|e| StoreError::Corrupt(format!("job version: {e}")))?;
        Ok(Some(kept))
    }

    async fn delete(&self, job: &Job, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let delete_job = Delete::builder()
            .table_name(&self.table)
            .key("job_id", s(job.id.as_str()))
            .condition_expression("version = :v")
            .expression_attribute_values(":v", n(job.version))
            .build()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let items = vec![
            TransactWriteItem::builder().delete(delete_job).build(),
            TransactWriteItem::builder()
                .delete(self.release_name(&job.owner, &job.document.name, &job.id)?)
                .build(),
            TransactWriteItem::builder().update(self.count(&job.owner, -1, None)?).build(),
        ];
        let items = audit::with_record(items, &self.versions_table, audit, &self.ledger)?;
        match item::transact(&self.client, items).await {
            // Its kept versions expire by themselves.
            Ok(()) => Ok(()),
            // Gone, or edited since it was read.
            Err(TransactFailure::Cancelled(r)) if failed(&r, 0) => match self.get(&job.id).await? {
                Some(_) => Err(StoreError::Conflict),
                None => Err(StoreError::NotFound),
            },
            Err(TransactFailure::Cancelled(r)) if failed(&r, 1) => Err(StoreError::Conflict),
            Err(TransactFailure::Cancelled(r)) => {
                Err(StoreError::Unavailable(format!("transaction cancelled: {r:?}")))
            }
            Err(TransactFailure::Store(e)) => Err(e),
        }
    }

    async fn set_baseline(&self, id: &JobId, baseline: &Baseline) -> StoreResult<()> {
        let text = serde_json::to_string(baseline).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let request = self.client.update_item().table_name(&self.table).key("job_id", s(id.as_str()));
        let update = Update::new().set("baseline", ":baseline", s(text));
        match update.apply(request).condition_expression("attribute_exists(job_id)").send().await {
            Ok(_) => {
                self.ledger.add(writes::ITEM, 1);
                Ok(())
            }
            Err(e) => match store_error(e) {
                StoreError::Conflict => Err(StoreError::NotFound),
                other => Err(other),
            },
        }
    }
}

#[async_trait]
impl DueIndex for DynamoJobStore {
    fn shards(&self) -> u16 {
        self.shards
    }

    async fn due_ids(&self, bucket: &str) -> StoreResult<Vec<JobId>> {
        let query = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(BY_DUE_INDEX)
            .key_condition_expression("due_bucket = :b")
            .expression_attribute_values(":b", s(bucket));
        let ids = item::query_all(query, |it| get_s(it, "job_id").map(str::to_string)).await?;
        // An id that does not parse is no job's: quarantined like an item that does not decode.
        Ok(ids.iter().filter_map(|id| JobId::parse(id)).collect())
    }

    async fn advance(&self, job: &Job, to: &Advance) -> StoreResult<()> {
        let next = to.next;
        let active = !job.document.paused;
        let mut update = match next {
            Some(next) if active => {
                let filed = job.claimable_from(next);
                Update::new()
                    .set("next_run_at", ":next", s(format_instant(next)))
                    .set("due_bucket", ":bucket", s(due_bucket(job.id.as_str(), filed, self.shards)))
                    .set("due_at", ":filed", s(format_instant(filed)))
            }
            Some(next) => Update::new()
                .set("next_run_at", ":next", s(format_instant(next)))
                .remove("due_bucket")
                .remove("due_at"),
            None => Update::new().remove("next_run_at").remove("due_bucket").remove("due_at"),
        };
        if let Some(gaps) = &to.gaps {
            update = update.set("gaps", ":gaps", s(encode_gaps(gaps)?));
        }
        if let Some(count) = &to.counted {
            update = update.set("scheduled_runs", ":runs", n(count.runs));
            update = match count.marks.is_empty() {
                true => update.remove("counted_marks"),
                false => update.set("counted_marks", ":marks", s(encode_marks(&count.marks)?)),
            };
        }
        update = update.value(":v", n(job.version));
        let mut condition = "attribute_exists(job_id) AND version = :v".to_string();
        match job.next_run_at {
            Some(current) => {
                condition.push_str(" AND next_run_at = :current");
                update = update.value(":current", s(format_instant(current)));
            }
            None => condition.push_str(" AND attribute_not_exists(next_run_at)"),
        }
        let request = self.client.update_item().table_name(&self.table).key("job_id", s(job.id.as_str()));
        update.apply(request).condition_expression(condition).send().await.map_err(store_error)?;
        self.ledger.add(writes::ITEM, 1);
        if job.index_at().is_some() {
            self.ledger.add(writes::INDEX_REMOVE, 1);
        }
        if next.is_some() && active {
            self.ledger.add(writes::INDEX_PUT, 1);
        }
        Ok(())
    }
}

/// The job's gaps as stored: a JSON list (a few hundred bytes each, at most `GAPS_KEPT`).
fn encode_gaps(gaps: &[Gap]) -> StoreResult<String> {
    serde_json::to_string(gaps).map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// A job item of a batch read, decoded; one that does not decode (a manual edit, a defect) is
/// left out and reported, so that one bad item never stalls the tick, the watchdog or a
/// workflow's cascade for every other job read with it.
fn quarantined(it: &Item) -> StoreResult<Option<Job>> {
    match from_item(it) {
        Ok(job) => Ok(Some(job)),
        Err(e) => {
            let id = it.get("job_id").and_then(|v| v.as_s().ok()).map_or("?", String::as_str);
            tracing::error!(job_id = %id, error = %e, "a stored job does not decode: left out until it is fixed");
            Ok(None)
        }
    }
}

/// Reads a raw attribute of a job item (tests look at the index attributes this way).
pub async fn raw_attribute(
    client: &Client,
    table: &str,
    id: &JobId,
    name: &str,
) -> StoreResult<Option<AttributeValue>> {
    let out = client
        .get_item()
        .table_name(table)
        .key("job_id", s(id.as_str()))
        .consistent_read(true)
        .send()
        .await
        .map_err(store_error)?;
    Ok(out.item.and_then(|mut i| i.remove(name)))
}

/// A count's marks as kept in the job's item: JSON text.
fn encode_marks(marks: &[Mark]) -> StoreResult<String> {
    serde_json::to_string(marks).map_err(|e| StoreError::Corrupt(e.to_string()))
}
