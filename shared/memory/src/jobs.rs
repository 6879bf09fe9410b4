//! Job definitions in memory: [`MemoryJobStore`], the [`JobStore`] that behaves as the DynamoDB
//! jobs table does (`sundial_aws::dynamo::jobs`).
//!
//! What it keeps, as that table does: each job as stored (its document through JSON,
//! `next_run_at` to the whole second), a name lock per (owner, name) naming the job that holds
//! it, a job count per owner, and the sparse due index: a job's bucket (`<minute>#<shard>` of its
//! due instant) while it is active and has a next run. Every write checks what the table's
//! conditions and transactions check, in the same order, and fails with the same error.

use crate::audit::MemoryAuditTrail;
use crate::guard::lock;
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use sundial_domain::audit::AuditRecord;
use sundial_domain::due_index::{due_bucket, format_instant, parse_instant};
use sundial_domain::health::Baseline;
use sundial_domain::job::{Job, JobDocument, JobId};
use sundial_domain::ports::store::{Advance, Catalogue, DueIndex, Page, StoreError, StoreResult};
use sundial_domain::versions::JobVersion;

/// A job as stored, with its place in the due index.
#[derive(Debug, Clone)]
struct Stored {
    job: Job,
    /// `(due_bucket, due_at)` while the job is in the `by-due` index.
    due: Option<(String, String)>,
}

#[derive(Debug, Default)]
struct State {
    jobs: BTreeMap<String, Stored>,
    /// (owner, name) → the id of the job holding the name.
    names: HashMap<(String, String), String>,
    /// Jobs per owner, as the owner counter item counts them.
    counts: HashMap<String, i64>,
    /// Due-index queries of buckets starting with this fail (a throttled partition).
    failing_due: Option<String>,
    /// (job id, version) → the version kept, as the runs table's version items are (a deleted
    /// job's expire there, unread: they are never dropped here).
    versions: BTreeMap<(String, u64), JobVersion>,
}

impl State {
    /// Keeps `after`'s new versions and drops the ones it no longer keeps, as the adapter's
    /// write does beside the job.
    fn keep_versions(&mut self, before: &[u64], after: &Job) -> StoreResult<()> {
        for version in after.versions.iter().filter(|v| !before.contains(v)) {
            let kept = JobVersion {
                job_id: after.id.clone(),
                version: *version,
                document: after.document.clone(),
                at: after.updated_at,
            };
            let stored = serde_json::to_string(&kept)
                .and_then(|text| serde_json::from_str::<JobVersion>(&text))
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            self.versions.insert((after.id.to_string(), *version), stored);
        }
        for version in before.iter().filter(|v| !after.versions.contains(v)) {
            self.versions.remove(&(after.id.to_string(), *version));
        }
        Ok(())
    }
}

/// Jobs in memory, in `shards` due-index partitions per minute.
#[derive(Debug)]
pub struct MemoryJobStore {
    shards: u16,
    state: Mutex<State>,
    audit: MemoryAuditTrail,
}

impl MemoryJobStore {
    /// A store whose due index spreads each minute over `shards` partitions (at least one), as
    /// the DynamoDB store built with the same count does.
    pub fn new(shards: u16) -> Self {
        MemoryJobStore {
            shards: shards.max(1),
            state: Mutex::new(State::default()),
            audit: MemoryAuditTrail::new(),
        }
    }

    /// This store, writing the records of its changes into `trail` (shared with the others).
    pub fn recording_to(mut self, trail: MemoryAuditTrail) -> Self {
        self.audit = trail;
        self
    }

    /// Makes every due-index query of a bucket starting with `prefix` (a minute such as
    /// `2030-01-01T11:40Z`) fail as throttled; `None`: queries work again.
    pub fn fail_due_queries(&self, prefix: Option<&str>) {
        lock(&self.state).failing_due = prefix.map(str::to_string);
    }

    /// Stores jobs as they are, without name locks or owner counts (names and the per-owner
    /// limit are not enforced): seeding, as `DynamoJobStore::import` does.
    pub fn import(&self, jobs: &[Job]) -> StoreResult<()> {
        let stored = jobs.iter().map(|job| self.stored(job)).collect::<StoreResult<Vec<_>>>()?;
        let mut state = lock(&self.state);
        for entry in stored {
            state.jobs.insert(entry.job.id.to_string(), entry);
        }
        Ok(())
    }

    /// Every job, as stored: what a scan of the table shows (name locks and counters aside).
    pub fn all(&self) -> Vec<Job> {
        lock(&self.state).jobs.values().map(|s| s.job.clone()).collect()
    }

    /// The ids of every job in the due index, with its bucket: what a scan of `by-due` shows.
    pub fn due_index(&self) -> Vec<(JobId, String)> {
        let state = lock(&self.state);
        state
            .jobs
            .values()
            .filter_map(|s| s.due.as_ref().map(|(bucket, _)| (s.job.id.clone(), bucket.clone())))
            .collect()
    }

    /// The job as the table keeps it: the document through JSON, `next_run_at` to the second,
    /// and its due-index entry.
    fn stored(&self, job: &Job) -> StoreResult<Stored> {
        let text = serde_json::to_string(&job.document).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let document: JobDocument =
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("document: {e}")))?;
        let due =
            job.index_at().map(|due| (due_bucket(job.id.as_str(), due, self.shards), format_instant(due)));
        Ok(Stored {
            job: Job { document, next_run_at: job.next_run_at.map(whole_second), ..job.clone() },
            due,
        })
    }
}

/// An instant as the table keeps `next_run_at`: formatted to the whole second.
fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    parse_instant(&format_instant(t)).unwrap_or(t)
}

/// Whether the stored job still has the version and `next_run_at` of `read` (compared as the
/// table compares them: the instant's text, to the second).
fn unchanged_since(stored: &Job, read: &Job) -> bool {
    stored.version == read.version
        && stored.next_run_at.map(format_instant) == read.next_run_at.map(format_instant)
}

fn name_key(owner: &str, name: &str) -> (String, String) {
    (owner.to_string(), name.to_string())
}

/// A transaction cancelled for a reason the adapter does not name (a condition it does not map).
fn cancelled(reasons: &str) -> StoreError {
    StoreError::Unavailable(format!("transaction cancelled: {reasons}"))
}

fn encode_cursor(id: &str, owner: &str, name: &str) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::json!([id, owner, name]).to_string())
}

/// The (name, id) a cursor continues after; `BadCursor` unless it was issued for `owner`.
fn decode_cursor(cursor: &str, owner: &str) -> StoreResult<(String, String)> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| StoreError::BadCursor)?;
    let (id, cursor_owner, name): (String, String, String) =
        serde_json::from_slice(&bytes).map_err(|_| StoreError::BadCursor)?;
    if cursor_owner != owner {
        return Err(StoreError::BadCursor);
    }
    Ok((name, id))
}

/// The job id a whole-store listing continues after.
fn decode_scan_cursor(cursor: &str) -> StoreResult<String> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| StoreError::BadCursor)?;
    let id = String::from_utf8(bytes).map_err(|_| StoreError::BadCursor)?;
    JobId::parse(&id).map(|id| id.to_string()).ok_or(StoreError::BadCursor)
}

#[async_trait]
impl Catalogue for MemoryJobStore {
    async fn create(&self, job: &Job, max_jobs: u32, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let entry = self.stored(job)?;
        let mut state = lock(&self.state);
        let names = name_key(&job.owner, &job.document.name);
        // The transaction's three conditions, reported in the adapter's order: the name lock,
        // then the owner counter (absent, or below the limit), then the job's own id.
        if state.names.contains_key(&names) {
            return Err(StoreError::NameTaken(job.document.name.clone()));
        }
        if state.counts.get(&job.owner).copied().unwrap_or(0) >= i64::from(max_jobs) {
            return Err(StoreError::QuotaExceeded(max_jobs));
        }
        if state.jobs.contains_key(job.id.as_str()) {
            return Err(cancelled("[ConditionalCheckFailed, None, None]"));
        }
        state.names.insert(names, job.id.to_string());
        *state.counts.entry(job.owner.clone()).or_insert(0) += 1;
        state.jobs.insert(job.id.to_string(), entry);
        state.keep_versions(&[], job)?;
        self.audit.append(audit);
        Ok(())
    }

    async fn get(&self, id: &JobId) -> StoreResult<Option<Job>> {
        Ok(lock(&self.state).jobs.get(id.as_str()).map(|s| s.job.clone()))
    }

    async fn find_by_name(&self, owner: &str, name: &str) -> StoreResult<Option<Job>> {
        let state = lock(&self.state);
        let id = state.names.get(&(owner.to_string(), name.to_string()));
        Ok(id.and_then(|id| state.jobs.get(id)).map(|s| s.job.clone()))
    }

    async fn get_many(&self, ids: &[JobId]) -> StoreResult<Vec<Job>> {
        // Read 100 at a time, as BatchGetItem does, which refuses a batch naming a key twice.
        if ids.chunks(100).any(|chunk| {
            let mut seen = std::collections::HashSet::new();
            !chunk.iter().all(|id| seen.insert(id))
        }) {
            return Err(StoreError::Rejected("Provided list of item keys contains duplicates".into()));
        }
        let state = lock(&self.state);
        Ok(ids.iter().filter_map(|id| state.jobs.get(id.as_str()).map(|s| s.job.clone())).collect())
    }

    async fn list(&self, owner: &str, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>> {
        let start = cursor.map(|c| decode_cursor(c, owner)).transpose()?;
        let limit = limit.max(1) as usize;
        let state = lock(&self.state);
        // The `by-owner` index: the owner's jobs by name.
        let mut keys: Vec<(&str, &str)> = state
            .jobs
            .values()
            .filter(|s| s.job.owner == owner)
            .map(|s| (s.job.document.name.as_str(), s.job.id.as_str()))
            .filter(|key| start.as_ref().is_none_or(|(name, id)| *key > (name.as_str(), id.as_str())))
            .collect();
        keys.sort_unstable();
        keys.truncate(limit + 1);
        let next = if keys.len() > limit {
            keys.truncate(limit);
            keys.last().map(|(name, id)| encode_cursor(id, owner, name))
        } else {
            None
        };
        let items = keys.iter().filter_map(|(_, id)| state.jobs.get(*id).map(|s| s.job.clone())).collect();
        Ok(Page { items, next })
    }

    async fn cursor_after(&self, job: &Job) -> StoreResult<String> {
        Ok(encode_cursor(job.id.as_str(), &job.owner, &job.document.name))
    }

    async fn list_all(&self, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>> {
        let after = cursor.map(decode_scan_cursor).transpose()?;
        let limit = limit.max(1) as usize;
        let state = lock(&self.state);
        // By id, as a scan of the table would go in some fixed order.
        let mut ids: Vec<&str> = state
            .jobs
            .keys()
            .map(String::as_str)
            .filter(|id| after.as_deref().is_none_or(|after| *id > after))
            .collect();
        ids.sort_unstable();
        ids.truncate(limit + 1);
        let next = if ids.len() > limit {
            ids.truncate(limit);
            ids.last().map(|id| URL_SAFE_NO_PAD.encode(id))
        } else {
            None
        };
        let items = ids.iter().filter_map(|id| state.jobs.get(*id).map(|s| s.job.clone())).collect();
        Ok(Page { items, next })
    }

    async fn update(&self, before: &Job, after: &Job, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let entry = self.stored(after)?;
        let mut state = lock(&self.state);
        // The put is conditioned on the item it writes (`after`'s id) still being as read.
        let fenced = state.jobs.get(after.id.as_str()).is_some_and(|s| unchanged_since(&s.job, before));
        if !fenced {
            // A lost condition is either a newer version or a deleted job: told apart.
            return Err(if state.jobs.contains_key(before.id.as_str()) {
                StoreError::Conflict
            } else {
                StoreError::NotFound
            });
        }
        if before.document.name != after.document.name {
            let new_name = name_key(&after.owner, &after.document.name);
            let old_name = name_key(&before.owner, &before.document.name);
            if state.names.contains_key(&new_name) {
                return Err(StoreError::NameTaken(after.document.name.clone()));
            }
            if state.names.get(&old_name).map(String::as_str) != Some(before.id.as_str()) {
                return Err(cancelled("[None, ConditionalCheckFailed, None]"));
            }
            state.names.remove(&old_name);
            state.names.insert(new_name, after.id.to_string());
        }
        state.jobs.insert(after.id.to_string(), entry);
        state.keep_versions(&before.versions, after)?;
        self.audit.append(audit);
        Ok(())
    }

    async fn version(&self, id: &JobId, version: u64) -> StoreResult<Option<JobVersion>> {
        Ok(lock(&self.state).versions.get(&(id.to_string(), version)).cloned())
    }

    async fn delete(&self, job: &Job, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let mut state = lock(&self.state);
        let name = name_key(&job.owner, &job.document.name);
        let Some(stored) = state.jobs.get(job.id.as_str()) else {
            return Err(StoreError::NotFound);
        };
        if stored.job.version != job.version {
            return Err(StoreError::Conflict);
        }
        // The name lock released must be this job's: a stale read of a renamed job loses.
        if state.names.get(&name).map(String::as_str) != Some(job.id.as_str()) {
            return Err(StoreError::Conflict);
        }
        state.jobs.remove(job.id.as_str());
        state.names.remove(&name);
        // Its versions stay until they expire, as the table's do (nothing reads them again).
        *state.counts.entry(job.owner.clone()).or_insert(0) -= 1;
        self.audit.append(audit);
        Ok(())
    }

    async fn set_baseline(&self, id: &JobId, baseline: &Baseline) -> StoreResult<()> {
        let mut state = lock(&self.state);
        let stored = state.jobs.get_mut(id.as_str()).ok_or(StoreError::NotFound)?;
        stored.job.baseline = Some(*baseline);
        Ok(())
    }
}

#[async_trait]
impl DueIndex for MemoryJobStore {
    fn shards(&self) -> u16 {
        self.shards
    }

    async fn due_ids(&self, bucket: &str) -> StoreResult<Vec<JobId>> {
        let state = lock(&self.state);
        if state.failing_due.as_deref().is_some_and(|prefix| bucket.starts_with(prefix)) {
            return Err(StoreError::Unavailable(format!("injected: the due query of {bucket} is throttled")));
        }
        let mut due: Vec<(&str, &Job)> = state
            .jobs
            .values()
            .filter_map(|s| match &s.due {
                Some((b, at)) if b == bucket => Some((at.as_str(), &s.job)),
                _ => None,
            })
            .collect();
        due.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
        Ok(due.into_iter().map(|(_, job)| job.id.clone()).collect())
    }

    async fn advance(&self, job: &Job, to: &Advance) -> StoreResult<()> {
        let next = to.next;
        let mut state = lock(&self.state);
        let Some(stored) = state.jobs.get_mut(job.id.as_str()) else { return Err(StoreError::Conflict) };
        if !unchanged_since(&stored.job, job) {
            return Err(StoreError::Conflict);
        }
        // Whether the job is active is the read's: its version is the stored one.
        let active = !job.document.paused;
        stored.job.next_run_at = next.map(whole_second);
        if let Some(gaps) = &to.gaps {
            stored.job.gaps = gaps.clone();
        }
        if let Some(count) = &to.counted {
            stored.job.counted = count.clone();
        }
        stored.due = match next {
            Some(next) if active => {
                let filed = job.claimable_from(next);
                Some((due_bucket(job.id.as_str(), filed, self.shards), format_instant(filed)))
            }
            _ => None,
        };
        Ok(())
    }
}
