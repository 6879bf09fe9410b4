//! The storage ports: what the use cases need from storage, in domain terms.
//!
//! Each adapter maps its own errors onto [`StoreError`], which says whether a retry can help, so
//! no storage type crosses this boundary.
//!
//! A write made for an API request carries its [`AuditRecord`] (`audit`): the adapter writes the
//! record in the same all-or-nothing write as the change, so the trail holds a record exactly
//! when its change took effect. Writes of Sundial's own (the tick, workers, the watchdog) carry
//! none.

use crate::audit::{AuditQuery, AuditRecord};
use crate::fence::Fence;
use crate::group::{Group, Links};
use crate::health::{Baseline, Trouble, TroubleMark, Troubles};
use crate::job::{Gap, Job, JobId};
use crate::keys::ApiKey;
use crate::named_calendar::NamedCalendar;
use crate::run::{Published, RunEvent};
use crate::run::{Run, RunId, RunKey, RunState};
use crate::versions::JobVersion;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// A conditional write's outcome where losing to a concurrent change is expected, not a failure:
/// the write took effect (`Won`), or another writer's did first (`Lost`: the run, job or record
/// moved on, and whoever moved it tells it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Race<T> {
    Won(T),
    Lost,
}

impl<T> Race<T> {
    /// The winner's value changed by `f`; a lost race stays lost.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Race<U> {
        match self {
            Race::Won(value) => Race::Won(f(value)),
            Race::Lost => Race::Lost,
        }
    }
}

/// The loop of every read-decide-write under a condition: runs `attempt` until one wins or
/// `times` have lost, and gives the winner's value (`None`: every attempt lost, the record is
/// contended). An attempt reads, decides and writes, and answers [`Race::Lost`] (through
/// [`Raced::raced`], say) when its condition failed and it should read again; an error ends the
/// loop.
pub async fn until_won<T, E, F, Fut>(times: usize, mut attempt: F) -> Result<Option<T>, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Race<T>, E>>,
{
    for _ in 0..times {
        if let Race::Won(value) = attempt().await? {
            return Ok(Some(value));
        }
    }
    Ok(None)
}

/// Turns a store result's `Conflict` into [`Race::Lost`], leaving real failures errors.
pub trait Raced<T> {
    fn raced(self) -> Result<Race<T>, StoreError>;
}

impl<T> Raced<T> for StoreResult<T> {
    fn raced(self) -> Result<Race<T>, StoreError> {
        match self {
            Ok(value) => Ok(Race::Won(value)),
            Err(StoreError::Conflict) => Ok(Race::Lost),
            Err(e) => Err(e),
        }
    }
}

/// A storage failure, with what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The item does not exist (or no longer does).
    #[error("not found")]
    NotFound,
    /// A conditional write lost: the version (or another fenced attribute) changed since read.
    #[error("the item changed since it was read")]
    Conflict,
    /// Another job of the same owner has this name.
    #[error("a job named `{0}` already exists")]
    NameTaken(String),
    /// The owner has as many jobs as allowed.
    #[error("the owner already has the maximum of {0} jobs")]
    QuotaExceeded(u32),
    /// A pagination cursor that this store did not issue for this query.
    #[error("the pagination token is not valid here")]
    BadCursor,
    /// Storage could not be reached or throttled: retrying may succeed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// Storage refused the request as such (access denied, an invalid request, a missing
    /// table): a misconfiguration or a defect, which retrying will not mend.
    #[error("storage refused the request: {0}")]
    Rejected(String),
    /// An item that does not decode: a defect or a manual edit, retrying will not help.
    #[error("stored item is corrupt: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Whether the same request may succeed later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// One page of a listing; `next` continues it.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// Job definitions, as two roles: the [`Catalogue`] of job documents and the [`DueIndex`] the
/// tick walks. A use case holds the roles it uses; an adapter implements both.
pub trait JobStore: Catalogue + DueIndex {}

impl<T: Catalogue + DueIndex + ?Sized> JobStore for T {}

/// The job documents: created, read, listed, replaced and deleted under their version.
#[async_trait]
pub trait Catalogue: Send + Sync + std::fmt::Debug {
    /// Stores a new job, with the versions it keeps: fails with `NameTaken` if the owner has a
    /// job of that name and with `QuotaExceeded` if the owner already has `max_jobs`. All or
    /// nothing, with `audit`.
    async fn create(&self, job: &Job, max_jobs: u32, audit: Option<&AuditRecord>) -> StoreResult<()>;

    async fn get(&self, id: &JobId) -> StoreResult<Option<Job>>;

    /// The owner's job named `name`, read consistently (a job created a moment ago is found).
    async fn find_by_name(&self, owner: &str, name: &str) -> StoreResult<Option<Job>>;

    /// The jobs of `ids` that exist, read in batches (order not kept).
    async fn get_many(&self, ids: &[JobId]) -> StoreResult<Vec<Job>>;

    /// The owner's jobs by name, `limit` at a time.
    async fn list(&self, owner: &str, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>>;

    /// The cursor [`Catalogue::list`] continues with right after `job` (its owner's listing): a
    /// filtered listing that stops within a page picks up there.
    async fn cursor_after(&self, job: &Job) -> StoreResult<String>;

    /// Every owner's jobs, `limit` at a time, in an order of the store's choosing that a cursor
    /// continues (a scan: the operators' whole-stack forecast). Jobs only, never the store's
    /// helper records.
    async fn list_all(&self, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>>;

    /// Replaces `before` with `after` if the job still has `before`'s version and `next_run_at`
    /// (`Conflict` if not: edited, or advanced by the tick; `NotFound` if the job is gone).
    /// `after` carries its new version. In the same write, as [`Catalogue::create`] does, the
    /// versions `after` keeps that `before` did not ([`Job::versions`]) are stored with `after`'s
    /// document, and those it no longer keeps are dropped.
    async fn update(&self, before: &Job, after: &Job, audit: Option<&AuditRecord>) -> StoreResult<()>;

    /// The kept version `version` of job `id`'s document (`None`: not kept). A deleted job's
    /// versions stay until they expire (400 days after they were made).
    async fn version(&self, id: &JobId, version: u64) -> StoreResult<Option<JobVersion>>;

    /// Deletes the job and frees its name, fenced by the version read (`Conflict` if the job
    /// was edited since, or linked to a new child: the caller reads it again and re-decides).
    async fn delete(&self, job: &Job, audit: Option<&AuditRecord>) -> StoreResult<()>;

    /// Records the job's learned baseline, whatever its version: it is learned again at its
    /// next run's end, so an edit in flight that writes the one it read loses nothing for long
    /// (`NotFound` if the job is gone).
    async fn set_baseline(&self, id: &JobId, baseline: &Baseline) -> StoreResult<()>;
}

/// The `by-due` index: which jobs fall due in each minute, and the tick's advance of a job to
/// its next instant.
#[async_trait]
pub trait DueIndex: Send + Sync + std::fmt::Debug {
    /// How many partitions each minute of the index is written over: the one owner of the
    /// deployment's `SUNDIAL_DUE_SHARDS`.
    fn shards(&self) -> u16;

    /// The ids of the jobs one `by-due` partition (`<minute>#<shard>`) names, every page, in
    /// due order: keys only, so that a minute of many jobs is held as ids, and its jobs are read
    /// batch by batch. The index is eventually consistent: the caller reads each job again
    /// ([`Catalogue::get_many`]) and its stored `next_run_at` governs.
    async fn due_ids(&self, bucket: &str) -> StoreResult<Vec<JobId>>;

    /// Moves `job` from its `next_run_at` to `next` without touching its version, if it still
    /// exists with the version and `next_run_at` it was read with (`Conflict` otherwise): a job
    /// paused, edited or deleted since it was read is not re-armed. What `to` records besides
    /// is written in the same write: it holds if and only if the pass moved the job.
    async fn advance(&self, job: &Job, to: &Advance) -> StoreResult<()>;
}

/// Where an advance moves a job, and what it records with the move.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advance {
    /// The job's next instant (`None`: no more).
    pub next: Option<DateTime<Utc>>,
    /// The job's gaps, when the pass recorded or told one (`None`: as they are).
    pub gaps: Option<Vec<Gap>>,
    /// The job's count of scheduled runs, when the pass changed it (`None`: as it is).
    pub counted: Option<crate::run_limit::RunCount>,
}

impl Advance {
    /// A move to `next` that records nothing else.
    pub fn to(next: Option<DateTime<Utc>>) -> Self {
        Advance { next, ..Advance::default() }
    }
}

/// Concurrency groups, each one record written under its version.
#[async_trait]
pub trait GroupStore: Send + Sync + std::fmt::Debug {
    /// The owner's group `name`, read consistently.
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<Group>>;

    /// Writes `group`: a new one (`expected` = `None`, `Conflict` if the name exists) or over the
    /// version `expected` (`Conflict` if it moved, `NotFound` if the group is gone). `group`
    /// carries its new version.
    async fn put(&self, group: &Group, expected: Option<u64>, audit: Option<&AuditRecord>)
    -> StoreResult<()>;

    /// Deletes the group and its links if the group still has `version` and its links
    /// `links_version` (`Conflict` if either moved, `NotFound` if the group is gone).
    async fn delete(
        &self,
        owner: &str,
        name: &str,
        version: u64,
        links_version: u64,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()>;

    /// The jobs linked to the group, read consistently (empty, version 0, if none ever was).
    async fn links(&self, owner: &str, name: &str) -> StoreResult<Links>;

    /// Links `job` to the group as of `at`, moving the links' version, only if the group exists
    /// (`NotFound` otherwise): the check and the link are one write, so a job never names a
    /// group deleted meanwhile. Never writes the group's ledger.
    async fn link(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()>;

    /// Removes `job`'s link, if it has one.
    async fn unlink(&self, owner: &str, name: &str, job: &str) -> StoreResult<()>;
}

/// Named calendars, each one record written under its version, with the jobs linked to it
/// beside it (as a group keeps them) and the owner's list of them.
#[async_trait]
pub trait CalendarStore: Send + Sync + std::fmt::Debug {
    /// The owner's calendar `name`, read consistently.
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<NamedCalendar>>;

    /// The owner's calendars, by name (at most [`crate::named_calendar::MAX_CALENDARS_PER_OWNER`]).
    async fn list(&self, owner: &str) -> StoreResult<Vec<NamedCalendar>>;

    /// Writes `calendar`: a new one (`expected` = `None`: `Conflict` if the name exists,
    /// `QuotaExceeded` if the owner has the most calendars allowed) or over the version
    /// `expected` (`Conflict` if it moved, `NotFound` if the calendar is gone). `calendar`
    /// carries its new version.
    async fn put(
        &self,
        calendar: &NamedCalendar,
        expected: Option<u64>,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()>;

    /// Deletes the calendar and its links if the calendar still has `version` and its links
    /// `links_version` (`Conflict` if either moved, `NotFound` if the calendar is gone).
    async fn delete(
        &self,
        owner: &str,
        name: &str,
        version: u64,
        links_version: u64,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()>;

    /// The jobs linked to the calendar, read consistently (empty, version 0, if none ever was).
    async fn links(&self, owner: &str, name: &str) -> StoreResult<Links>;

    /// Links `job` to the calendar as of `at`, moving the links' version, only if the calendar
    /// exists (`NotFound` otherwise), in one write.
    async fn link(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()>;

    /// Removes `job`'s link, if it has one.
    async fn unlink(&self, owner: &str, name: &str, job: &str) -> StoreResult<()>;

    /// Removes `job`'s link only if it is still the one made at `at` (a link made again since,
    /// by an edit naming the calendar anew, stays): how stale links are pruned.
    async fn unlink_stale(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()>;
}

/// API keys kept as data: each found by its id, listed by owner.
#[async_trait]
pub trait KeyStore: Send + Sync + std::fmt::Debug {
    /// The key `id`, read consistently; a revoked key is found, with when it was revoked.
    async fn get(&self, id: &str) -> StoreResult<Option<ApiKey>>;

    /// The owner's keys that are not revoked, by name.
    async fn list(&self, owner: &str) -> StoreResult<Vec<ApiKey>>;

    /// Stores a new key: `Conflict` if a key of its id exists not revoked (a revoked one is
    /// written over: a grant revoked is granted again under its id), `QuotaExceeded` if the owner
    /// has the most keys allowed ([`crate::keys::MAX_KEYS_PER_OWNER`]). All or nothing.
    async fn create(&self, key: &ApiKey, audit: Option<&AuditRecord>) -> StoreResult<()>;

    /// Revokes the owner's key `id` at `at` (`NotFound` if it has no such key not revoked): it
    /// leaves the owner's list and quota, and stays readable as revoked, so a use of it after is
    /// recognised (and recorded) as one.
    async fn revoke(
        &self,
        owner: &str,
        id: &str,
        at: DateTime<Utc>,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()>;

    /// Records `record`, a refused use of the revoked or expired key `id` at `at`, unless one
    /// was recorded within [`crate::keys::LAST_USED_EVERY`] before: a key replayed in a loop
    /// writes one record a minute, not one per request.
    async fn refused(&self, id: &str, at: DateTime<Utc>, record: &AuditRecord) -> StoreResult<()>;

    /// Records a use of key `id` at `at` (best effort: nothing if the key is gone).
    async fn touch(&self, id: &str, at: DateTime<Utc>) -> StoreResult<()>;
}

/// The audit trail, as its owner reads it: records are written only with their changes (see the
/// module's note), never through this port.
#[async_trait]
pub trait AuditTrail: Send + Sync + std::fmt::Debug {
    /// The owner's records that `query` asks for, newest first, at most `limit` (fewer when the
    /// store stops at its read budget: `next` then continues).
    async fn page(
        &self,
        owner: &str,
        query: &AuditQuery,
        limit: u32,
        cursor: Option<&str>,
    ) -> StoreResult<Page<AuditRecord>>;
}

/// The per-job start fences of `forbid` and `replace` jobs ([`crate::fence`]): one small record
/// per job naming the run that last passed it.
#[async_trait]
pub trait FenceStore: Send + Sync + std::fmt::Debug {
    /// The job's fence, read consistently (`None`: it was never taken).
    async fn get(&self, job_id: &JobId) -> StoreResult<Option<Fence>>;

    /// Makes `run` the fence's holder, with `previous` the run whose call it waits out, if the
    /// holder is still `expected` (`None`: the fence was never taken): `Conflict` otherwise. Of
    /// runs racing for one holder's fence, one wins.
    async fn take(
        &self,
        job_id: &JobId,
        expected: Option<&RunKey>,
        run: &RunKey,
        previous: Option<&RunKey>,
    ) -> StoreResult<()>;

    /// Removes the job's fence (the job is being deleted); nothing if there is none.
    async fn remove(&self, job_id: &JobId) -> StoreResult<()>;
}

/// Whether an insert created the run or found it there.
#[derive(Debug, Clone, PartialEq)]
pub enum Inserted {
    Created,
    /// The run already existed (another claimer won): here it is.
    Exists(Box<Run>),
}

/// Runs, as four roles: their [`RunHistory`], the [`RunWrites`] that move them, the
/// [`RunOutbox`] of events recorded on them, and the [`InFlightIndex`] the watchdog walks. A use
/// case holds the roles it uses; an adapter implements all four.
pub trait RunStore: RunHistory + RunWrites + RunOutbox + InFlightIndex {}

impl<T: RunHistory + RunWrites + RunOutbox + InFlightIndex + ?Sized> RunStore for T {}

/// Reading runs: one, a job's history, the runs around one, a batch.
#[async_trait]
pub trait RunHistory: Send + Sync + std::fmt::Debug {
    async fn get(&self, job_id: &JobId, key: &RunKey) -> StoreResult<Option<Run>>;

    /// A job's runs, newest first, optionally only those in `state`.
    async fn list(
        &self,
        job_id: &JobId,
        limit: u32,
        cursor: Option<&str>,
        state: Option<RunState>,
    ) -> StoreResult<Page<Run>>;

    /// Up to `limit` of the job's runs scheduled before `key` (older keys), newest first, as
    /// of every write acknowledged before the call (a consistent read).
    async fn before(&self, job_id: &JobId, key: &RunKey, limit: u32) -> StoreResult<Vec<Run>>;

    /// Up to `limit` of the job's runs keyed after `key` and scheduled at or before `until`,
    /// oldest first, as of every write acknowledged before the call (a consistent read).
    async fn after(
        &self,
        job_id: &JobId,
        key: &RunKey,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<Run>>;

    /// The runs of `ids` that exist, read in batches (order not kept); a run that does not decode
    /// is left out and reported, so it never stalls the others.
    async fn get_many(&self, ids: &[RunId]) -> StoreResult<Vec<Run>>;
}

/// Writing runs: the insert that makes an instant run once, and the fenced writes that move a
/// run on.
#[async_trait]
pub trait RunWrites: Send + Sync + std::fmt::Debug {
    /// Writes a new run if no run has its key: the fence that makes a scheduled instant run once.
    async fn insert(&self, run: &Run, audit: Option<&AuditRecord>) -> StoreResult<Inserted>;

    /// Replaces `before` with `after` if the run is still in `before`'s state and attempt (the
    /// fencing token): `Conflict` otherwise. A move to a terminal state leaves the in-flight
    /// index.
    async fn transition(&self, before: &Run, after: &Run, audit: Option<&AuditRecord>) -> StoreResult<()>;

    /// Like [`RunWrites::transition`], and only if no change was written to the run since
    /// `before` was read (its `updated_at`): the watchdog's rescue of an attempt whose lease it
    /// saw expired, which a heartbeat extending that lease meanwhile must win.
    async fn transition_unchanged(&self, before: &Run, after: &Run) -> StoreResult<()>;

    /// Records that the job's failing streak following the succeeded run `after` (`None`: no
    /// success in view) has been told, unless that streak or a later one already was
    /// (`Conflict`): the conditional flag that tells `failing` once per streak. In the same
    /// write, `failing` becomes the job's open trouble as of `mark` (replacing an older one).
    async fn flag_failing(
        &self,
        job_id: &JobId,
        after: Option<&RunKey>,
        mark: &TroubleMark,
    ) -> StoreResult<()>;

    /// The troubles told about the job and not recovered from, read consistently.
    async fn troubles(&self, job_id: &JobId) -> StoreResult<Troubles>;

    /// Opens `trouble` on the job as of `mark`, unless it is open already (`Conflict`): the
    /// conditional flag that tells `failure_rate` once until the job recovers from it.
    async fn open_trouble(&self, job_id: &JobId, trouble: Trouble, mark: &TroubleMark) -> StoreResult<()>;

    /// Closes the troubles `ended` holds if each is still open with the mark it holds
    /// (`Conflict` otherwise, and nothing is closed), recording `by` (the run that closes them)
    /// with the close: the conditional flag that tells `recovered` once per trouble told.
    async fn close_troubles(&self, job_id: &JobId, ended: &Troubles, by: &str) -> StoreResult<()>;

    /// Who last closed the job's troubles (the `by` of the last close), read consistently: how a
    /// closer whose answer was lost recognises its own write.
    async fn troubles_closed_by(&self, job_id: &JobId) -> StoreResult<Option<String>>;

    /// Records that the run's message was sent (manual and backfilled runs).
    async fn mark_resent(&self, run: &Run, at: DateTime<Utc>) -> StoreResult<()>;

    /// Records that the call of the run's attempt `attempt` has ended ([`Run::call_ended`]), if
    /// the run is still at that attempt (`Conflict` otherwise), whatever its state.
    async fn mark_call_ended(&self, run: &Run, attempt: u32) -> StoreResult<()>;
}

/// The events recorded on runs, and the marks of their publishing.
#[async_trait]
pub trait RunOutbox: Send + Sync + std::fmt::Debug {
    /// Records `event` on `run` if the run is still in the state and attempt it was read in and
    /// has no event of that id: the conditional flag behind `sla_missed` and `late_start`. An
    /// unsent event recorded on an ended run puts the run back in the in-flight index (a run that
    /// ended with nothing to tell has left it), so that the watchdog publishes what its recorder
    /// did not (`failing`, `failure_rate`, `recovered`, decided after the end is written).
    async fn record_event(&self, run: &Run, event: &RunEvent) -> StoreResult<()>;

    /// Takes the publishing of `event`, left unsent, over at `now`, if it is still unsent and
    /// nobody took it over since it was read (`Conflict` otherwise): of racing watchdog passes,
    /// one publishes it.
    async fn take_event(&self, run: &Run, event: &RunEvent, now: DateTime<Utc>) -> StoreResult<()>;

    /// Marks what an announcement `published` of the run's events, in one write; with
    /// `settle`, the ended run also leaves the in-flight index (`Conflict`, and nothing marked,
    /// if it has not ended or the store holds an event `run` does not: one recorded since the
    /// caller's read, or by a write whose answer was lost, is still to be published).
    async fn mark_events_sent(&self, run: &Run, published: &Published, settle: bool) -> StoreResult<()>;
}

/// The in-flight index: every run the watchdog must look at, spread over partitions.
#[async_trait]
pub trait InFlightIndex: Send + Sync + std::fmt::Debug {
    /// How many partitions the index is written over (the deployment's `SUNDIAL_DUE_SHARDS`).
    fn shards(&self) -> u16;

    /// The runs in the `shards` partitions of the in-flight index scheduled at or before
    /// `until`, oldest first (then by job and key): every QUEUED, RUNNING and RETRYING run, and
    /// ended runs whose events are not all published yet. Only their ids: read them with
    /// [`RunHistory::get_many`] a batch at a time.
    async fn in_flight(&self, until: DateTime<Utc>, shards: u16) -> StoreResult<Vec<RunId>>;
}

/// Whether a run written whole (an insert) belongs in the in-flight index: in flight, or ended
/// with events not yet published (a run the tick writes SKIPPED carries its `skipped` event
/// unsent). Every [`RunStore`] keeps this rule, so the watchdog finds the same runs in each.
pub fn in_flight_when_written(run: &Run) -> bool {
    run.state.is_in_flight() || run.events.iter().any(|e| !e.sent)
}

/// Whether the transition from `before` to `after` takes the run out of the in-flight index:
/// it ends the run and every event `after` carries is published. A run that ends with events
/// unsent stays until [`RunOutbox::mark_events_sent`] settles it.
pub fn transition_leaves_in_flight(before: &Run, after: &Run) -> bool {
    before.state.is_in_flight() && after.state.is_terminal() && after.events.iter().all(|e| e.sent)
}

/// The partition of the in-flight index (of `shards`) that holds the run `key` of `job_id`:
/// spread by job and key, so one job's burst does not crowd a partition.
pub fn in_flight_shard(job_id: &JobId, key: &RunKey, shards: u16) -> u16 {
    crate::due_index::shard_of(&format!("{job_id}#{}", key.encode()), shards)
}

/// The tick's progress: the last minute fully processed, and the last minute it reached; and
/// the watchdog's view of it: an open stall incident, and an alert recorded but not yet sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickState {
    pub watermark: Option<DateTime<Utc>>,
    pub reached: Option<DateTime<Utc>>,
    /// When the watchdog found the scheduler stalled; cleared when it recovers.
    pub stalled_since: Option<DateTime<Utc>>,
    /// `scheduler_stalled` or `scheduler_recovered`, recorded and not yet published.
    pub unsent_alert: Option<String>,
    /// When the unsent alert's publisher took it on (recorded it, or took it over).
    pub alert_taken_at: Option<DateTime<Utc>>,
    /// The most partitions of the due and in-flight indexes any pass has read: after the shard
    /// count shrinks, items written in the higher partitions are still read.
    pub shards: Option<u16>,
    /// The shard count the tick last looked back for after it grew (a pass that went through
    /// without an error): a larger count looks back again.
    pub looked_back: Option<u16>,
    /// Where the watchdog's last pass stopped when its time budget ran out: the next resumes
    /// after this run.
    pub watchdog_cursor: Option<RunId>,
}

/// Where the tick keeps its progress. Both minutes only ever move forward; an incident opens
/// and closes once, whatever number of watchdogs race on it (the loser gets `Conflict`).
#[async_trait]
pub trait TickStateStore: Send + Sync + std::fmt::Debug {
    async fn get(&self) -> StoreResult<TickState>;
    async fn set_reached(&self, minute: DateTime<Utc>) -> StoreResult<()>;
    async fn set_watermark(&self, minute: DateTime<Utc>) -> StoreResult<()>;
    /// Opens a stall incident at `since`, if none is open, recording `alert` unsent (taken on
    /// by its recorder at `since`).
    async fn open_incident(&self, since: DateTime<Utc>, alert: &str) -> StoreResult<()>;
    /// Closes the incident opened at `since`, recording `alert` unsent (taken on at `now`).
    async fn close_incident(&self, since: DateTime<Utc>, alert: &str, now: DateTime<Utc>) -> StoreResult<()>;
    /// Takes the publishing of the unsent `alert` over at `now`, if nobody took it since it was
    /// read (`taken_at`, as read): `Conflict` otherwise, so overlapping passes publish it once.
    async fn take_alert(
        &self,
        alert: &str,
        taken_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Marks `alert` published.
    async fn mark_alert_sent(&self, alert: &str) -> StoreResult<()>;
    /// Records that a pass reads `shards` partitions, if that is more than recorded.
    async fn note_shards(&self, shards: u16) -> StoreResult<()>;
    /// Records that the tick looked back for `shards` partitions, if that is more than recorded.
    async fn set_looked_back(&self, shards: u16) -> StoreResult<()>;
    /// Records where the watchdog's pass stopped (`None`: it went through every run).
    async fn set_watchdog_cursor(&self, cursor: Option<&RunId>) -> StoreResult<()>;
}

/// A response kept for an idempotent replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

/// What an idempotency key says about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// First use, or a retry of a request that failed: process it, then `complete` (or
    /// `release` on failure). `first_seen` is when the key was first claimed, the same for
    /// every retry, so an effect derived from it (a triggered run's key) is the same too.
    New { first_seen: DateTime<Utc> },
    /// Seen with the same request: send this response again.
    Replay(StoredResponse),
    /// Seen with a different request.
    Mismatch,
    /// The same request is being processed right now.
    InProgress,
}

/// Responses to requests that carried an `Idempotency-Key`.
#[async_trait]
pub trait IdempotencyStore: Send + Sync + std::fmt::Debug {
    /// Claims `key` for a request whose fingerprint is `fingerprint`.
    async fn claim(&self, key: &str, fingerprint: &str, now: DateTime<Utc>) -> StoreResult<Claim>;
    /// Records the response of a claimed request.
    async fn complete(&self, key: &str, response: &StoredResponse, now: DateTime<Utc>) -> StoreResult<()>;
    /// Gives a claim up (the request failed), so a retry processes it again; the key keeps its
    /// first-seen time and its fingerprint.
    async fn release(&self, key: &str) -> StoreResult<()>;
}
