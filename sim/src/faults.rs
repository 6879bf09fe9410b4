//! Faults at every await point: wrappers around the in-memory ports that stop at each call (the
//! executor may switch actors or crash the caller there), may refuse it as a throttle or a 5xx
//! does, may apply it and lose the answer (a timeout after the write), and may lose, duplicate or
//! delay a message. They also tell the [`Ledger`] what happened, for the checker.

use crate::executor::Sim;
use crate::ledger::{Ledger, Line, Start, Told};
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use sundial_domain::audit::AuditRecord;
use sundial_domain::events::{JobNotice, Notification, SchedulerAlert};
use sundial_domain::fence::Fence;
use sundial_domain::group::{Group, Links};
use sundial_domain::health::{Baseline, Trouble, TroubleMark, Troubles};
use sundial_domain::job::{Job, JobId};
use sundial_domain::named_calendar::NamedCalendar;
use sundial_domain::ports::bus::{EventBus, PublishError};
use sundial_domain::ports::queue::{QueueError, Received, RunInbox, RunQueue};
use sundial_domain::ports::store::{
    Advance, CalendarStore, Catalogue, DueIndex, FenceStore, GroupStore, InFlightIndex, Inserted, Page,
    RunHistory, RunOutbox, RunWrites, StoreError, StoreResult, TickState, TickStateStore,
};
use sundial_domain::ports::topics::{JobTopics, Subscription, TopicError};
use sundial_domain::run::{Published, Run, RunEvent, RunId, RunKey, RunState};
use sundial_domain::run_queue::{Dispatch, MAX_DELAY_S};
use sundial_memory::{
    MemoryCalendarStore, MemoryEventBus, MemoryFenceStore, MemoryGroupStore, MemoryJobStore, MemoryQueue,
    MemoryRunStore, MemoryTickStateStore, MemoryTopics,
};

/// How often each fault strikes while faults are on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// A call refused before it takes effect (throttling, a 5xx).
    pub refuse: f64,
    /// A write applied whose answer is lost (a timeout after the fact).
    pub ambiguous: f64,
    /// An actor stopped at a call dies there (a process crash between two AWS calls).
    pub crash: f64,
    /// A message sent is lost, duplicated, or delayed beyond its own delay.
    pub lose: f64,
    pub duplicate: f64,
    pub delay: f64,
}

impl Rates {
    pub const NONE: Rates =
        Rates { refuse: 0.0, ambiguous: 0.0, crash: 0.0, lose: 0.0, duplicate: 0.0, delay: 0.0 };

    /// The rates the seeds run with.
    pub const DEFAULT: Rates =
        Rates { refuse: 0.02, ambiguous: 0.01, crash: 0.002, lose: 0.01, duplicate: 0.02, delay: 0.03 };
}

/// What a call meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Proceed,
    Refuse,
    Ambiguous,
}

/// The fault injector every wrapper shares.
#[derive(Debug)]
pub struct Faults {
    sim: Sim,
    ledger: Ledger,
    rates: Rates,
    on: AtomicBool,
    /// A queue outage: while the virtual clock is in this window, every send is refused (SQS
    /// throttling or an outage lasting minutes, not a single refused call).
    outage: Option<(DateTime<Utc>, DateTime<Utc>)>,
}

impl Faults {
    /// Faults at `rates`, and a queue outage over `outage` if there is one.
    pub fn new(
        sim: Sim,
        ledger: Ledger,
        rates: Rates,
        outage: Option<(DateTime<Utc>, DateTime<Utc>)>,
    ) -> Arc<Faults> {
        Arc::new(Faults { sim, ledger, rates, on: AtomicBool::new(true), outage })
    }

    /// Whether the queue is in its outage now.
    fn queue_out(&self) -> bool {
        let now = self.sim.now();
        self.on() && self.outage.is_some_and(|(from, to)| from <= now && now < to)
    }

    /// Stops injecting faults (the quiet period, in which every run must end).
    pub fn stop(&self) {
        self.on.store(false, Ordering::SeqCst);
    }

    pub fn on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    pub fn rates(&self) -> Rates {
        if self.on() { self.rates } else { Rates::NONE }
    }

    /// Records a line of the trace.
    pub fn note(&self, what: String, job: Option<&JobId>, run: Option<String>) {
        let (step, at, actor) = {
            let core = self.sim.core();
            (core.step, core.now(), core.actor.clone())
        };
        let line = Line { step, at, actor, what, job: job.map(|j| j.to_string()), run };
        self.ledger.get().lines.push(line);
    }

    /// The stop before a call: time passes (a call's latency), and the call's fate is drawn.
    async fn enter(&self, write: bool) -> Verdict {
        self.sim.yield_now().await;
        let rates = self.rates();
        let mut core = self.sim.core();
        let latency = core.between(1, 20);
        core.pass(Duration::milliseconds(latency));
        if core.chance(rates.refuse) {
            drop(core);
            self.ledger.fault("refused call");
            return Verdict::Refuse;
        }
        if write && core.chance(rates.ambiguous) {
            drop(core);
            self.ledger.fault("applied, answer lost");
            return Verdict::Ambiguous;
        }
        Verdict::Proceed
    }

    /// Runs one call through the injector: `op` names it in the trace.
    async fn call<T, E>(
        &self,
        op: &str,
        subject: Subject<'_>,
        write: bool,
        call: impl Future<Output = Result<T, E>>,
        unavailable: impl Fn(String) -> E,
    ) -> Result<T, E> {
        let verdict = self.enter(write).await;
        if verdict == Verdict::Refuse {
            self.note(format!("{op}: refused (injected)"), subject.job, subject.encoded_key());
            return Err(unavailable("injected: throttled".into()));
        }
        let out = call.await;
        let how = match (&out, verdict) {
            (Ok(_), Verdict::Ambiguous) => "applied, answer lost (injected)",
            (Ok(_), _) => "ok",
            (Err(_), _) => "error",
        };
        self.note(format!("{op}: {how}"), subject.job, subject.encoded_key());
        if write {
            // The answer is on its way: a crash here comes after the call took effect.
            self.sim.yield_now().await;
        }
        match (out, verdict) {
            (Ok(_), Verdict::Ambiguous) => Err(unavailable("injected: timed out after the write".into())),
            (out, _) => out,
        }
    }
}

/// What a call is about, for the trace.
#[derive(Debug, Clone, Copy)]
struct Subject<'a> {
    job: Option<&'a JobId>,
    key: Option<&'a RunKey>,
}

impl<'a> Subject<'a> {
    const NONE: Subject<'static> = Subject { job: None, key: None };

    fn job(job: &'a JobId) -> Self {
        Subject { job: Some(job), key: None }
    }

    fn run(job: &'a JobId, key: &'a RunKey) -> Self {
        Subject { job: Some(job), key: Some(key) }
    }

    fn of(run: &'a Run) -> Self {
        Subject::run(&run.job_id, &run.key)
    }

    fn encoded_key(&self) -> Option<String> {
        Some(self.key?.encode())
    }
}

// ---------------------------------------------------------------------------------------------
// Stores
// ---------------------------------------------------------------------------------------------

/// The job store, faulty; tells the ledger every version written.
#[derive(Debug)]
pub struct FaultyJobs {
    pub inner: Arc<MemoryJobStore>,
    pub faults: Arc<Faults>,
    pub ledger: Ledger,
    pub sim: Sim,
}

impl FaultyJobs {
    fn written(&self, id: &JobId, job: Option<Job>) {
        let at = self.sim.now();
        self.ledger.get().versions.entry(id.clone()).or_default().push((at, job));
    }
}

#[async_trait]
impl Catalogue for FaultyJobs {
    async fn create(&self, job: &Job, max_jobs: u32, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let create = async {
            let out = self.inner.create(job, max_jobs, audit).await;
            if out.is_ok() {
                self.written(&job.id, Some(job.clone()));
            }
            out
        };
        self.faults.call("jobs.create", Subject::job(&job.id), true, create, StoreError::Unavailable).await
    }

    async fn get(&self, id: &JobId) -> StoreResult<Option<Job>> {
        self.faults
            .call("jobs.get", Subject::job(id), false, self.inner.get(id), StoreError::Unavailable)
            .await
    }

    async fn find_by_name(&self, owner: &str, name: &str) -> StoreResult<Option<Job>> {
        let find = self.inner.find_by_name(owner, name);
        self.faults.call("jobs.find_by_name", Subject::NONE, false, find, StoreError::Unavailable).await
    }

    async fn get_many(&self, ids: &[JobId]) -> StoreResult<Vec<Job>> {
        self.faults
            .call("jobs.get_many", Subject::NONE, false, self.inner.get_many(ids), StoreError::Unavailable)
            .await
    }

    async fn list(&self, owner: &str, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>> {
        self.faults
            .call(
                "jobs.list",
                Subject::NONE,
                false,
                self.inner.list(owner, limit, cursor),
                StoreError::Unavailable,
            )
            .await
    }

    async fn cursor_after(&self, job: &Job) -> StoreResult<String> {
        self.inner.cursor_after(job).await
    }

    async fn version(
        &self,
        id: &JobId,
        version: u64,
    ) -> StoreResult<Option<sundial_domain::versions::JobVersion>> {
        self.inner.version(id, version).await
    }

    async fn list_all(&self, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>> {
        self.faults
            .call(
                "jobs.list_all",
                Subject::NONE,
                false,
                self.inner.list_all(limit, cursor),
                StoreError::Unavailable,
            )
            .await
    }

    async fn update(&self, before: &Job, after: &Job, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let update = async {
            // A slow edit: the API's write of a job arrives a while after its read (a slow
            // validation, a retried PUT), long enough for a claim pass to advance the job.
            let slow = self.faults.on() && self.sim.core().chance(0.5);
            if slow {
                let by = Duration::milliseconds(self.sim.core().between(100, 3_000));
                self.sim.sleep(by).await;
            }
            let stored = self.inner.get(&after.id).await.ok().flatten();
            let out = self.inner.update(before, after, audit).await;
            if out.is_ok() {
                self.written(&after.id, Some(after.clone()));
                // Accepted: the job must have been as its writer read it (the tick's advance
                // keeps the version and moves `next_run_at`; an edit must not undo it).
                if let Some(stored) = stored.filter(|s| {
                    s.version != before.version
                        || s.next_run_at.map(|t| t.timestamp()) != before.next_run_at.map(|t| t.timestamp())
                }) {
                    self.ledger.get().violations.push(format!(
                        "stale write accepted: jobs.update of job {} (version {}, next_run_at {:?}) written over version {}, next_run_at {:?}",
                        after.id, before.version, before.next_run_at, stored.version, stored.next_run_at
                    ));
                }
            }
            out
        };
        self.faults.call("jobs.update", Subject::job(&after.id), true, update, StoreError::Unavailable).await
    }

    async fn delete(&self, job: &Job, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let delete = async {
            let out = self.inner.delete(job, audit).await;
            if out.is_ok() {
                self.written(&job.id, None);
            }
            out
        };
        self.faults.call("jobs.delete", Subject::job(&job.id), true, delete, StoreError::Unavailable).await
    }

    async fn set_baseline(&self, id: &JobId, baseline: &Baseline) -> StoreResult<()> {
        let set = self.inner.set_baseline(id, baseline);
        self.faults.call("jobs.set_baseline", Subject::job(id), true, set, StoreError::Unavailable).await
    }
}

#[async_trait]
impl DueIndex for FaultyJobs {
    fn shards(&self) -> u16 {
        self.inner.shards()
    }

    async fn due_ids(&self, bucket: &str) -> StoreResult<Vec<JobId>> {
        self.faults
            .call(
                &format!("jobs.due {bucket}"),
                Subject::NONE,
                false,
                self.inner.due_ids(bucket),
                StoreError::Unavailable,
            )
            .await
    }

    async fn advance(&self, job: &Job, to: &Advance) -> StoreResult<()> {
        let advance = async {
            let out = self.inner.advance(job, to).await;
            if out.is_ok() {
                let actor = self.sim.core().actor.clone();
                let mut ledger = self.ledger.get();
                let claimed = ledger.claiming.remove(&(actor, job.id.clone())).unwrap_or_default();
                ledger.advances.push(crate::ledger::Advanced {
                    at: self.sim.now(),
                    job_id: job.id.clone(),
                    version: job.version,
                    from: job.next_run_at,
                    max_runs: job.document.schedule.as_ref().and_then(|s| s.max_runs),
                    scheduled_runs: job.counted.runs,
                    next: to.next,
                    counted: to.counted.as_ref().map(|c| c.runs),
                    claimed,
                });
            }
            out
        };
        self.faults.call("jobs.advance", Subject::job(&job.id), true, advance, StoreError::Unavailable).await
    }
}

/// The run store, faulty; tells the ledger which runs were written, and whether a transition was
/// accepted over a run that had moved on (a stale write).
#[derive(Debug)]
pub struct FaultyRuns {
    pub inner: Arc<MemoryRunStore>,
    pub faults: Arc<Faults>,
    pub ledger: Ledger,
    pub sim: Sim,
}

impl FaultyRuns {
    fn touch(&self, run: &Run) {
        self.ledger.get().touched.insert((run.job_id.clone(), run.key.clone()));
    }

    /// A write, with the run it concerns noted as touched as soon as it is done.
    async fn write<T>(&self, run: &Run, write: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        let out = write.await;
        self.touch(run);
        out
    }

    /// A scheduled run written (created or found) by the actor polled: a backfill's, or a claim
    /// of the schedule, counted by the advance of its job that follows from the same actor (if
    /// any).
    fn claimed(&self, run: &Run) {
        let actor = self.sim.core().actor.clone();
        let mut ledger = self.ledger.get();
        let key = (run.job_id.clone(), run.key.clone());
        if ledger.backfillers.contains(&actor) {
            ledger.backfilled.insert(key);
        } else {
            ledger.claiming.entry((actor, key.0)).or_default().insert(key.1);
        }
    }

    async fn stored(&self, run: &Run) -> Option<Run> {
        self.inner.get(&run.job_id, &run.key).await.ok().flatten()
    }

    /// A transition the store accepted must have been written over the run as its writer read
    /// it: the same state and attempt (and, for `unchanged`, the same change time).
    fn fenced(&self, op: &str, stored: Option<&Run>, before: &Run, unchanged: bool) {
        let Some(stored) = stored else { return };
        let same = stored.state == before.state
            && stored.attempt == before.attempt
            && (!unchanged || stored.updated_at == before.updated_at);
        if !same {
            self.ledger.get().violations.push(format!(
                "stale write accepted: {op} of run {} written over {} attempt {} from {} attempt {}",
                before.id(),
                stored.state,
                stored.attempt,
                before.state,
                before.attempt
            ));
        }
    }
}

#[async_trait]
impl RunHistory for FaultyRuns {
    async fn get(&self, job_id: &JobId, key: &RunKey) -> StoreResult<Option<Run>> {
        self.faults
            .call(
                "runs.get",
                Subject::run(job_id, key),
                false,
                self.inner.get(job_id, key),
                StoreError::Unavailable,
            )
            .await
    }

    async fn list(
        &self,
        job_id: &JobId,
        limit: u32,
        cursor: Option<&str>,
        state: Option<RunState>,
    ) -> StoreResult<Page<Run>> {
        self.faults
            .call(
                "runs.list",
                Subject::job(job_id),
                false,
                self.inner.list(job_id, limit, cursor, state),
                StoreError::Unavailable,
            )
            .await
    }

    async fn before(&self, job_id: &JobId, key: &RunKey, limit: u32) -> StoreResult<Vec<Run>> {
        self.faults
            .call(
                "runs.before",
                Subject::run(job_id, key),
                false,
                self.inner.before(job_id, key, limit),
                StoreError::Unavailable,
            )
            .await
    }

    async fn after(
        &self,
        job_id: &JobId,
        key: &RunKey,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<Run>> {
        self.faults
            .call(
                "runs.after",
                Subject::run(job_id, key),
                false,
                self.inner.after(job_id, key, until, limit),
                StoreError::Unavailable,
            )
            .await
    }

    async fn get_many(&self, ids: &[RunId]) -> StoreResult<Vec<Run>> {
        self.faults
            .call("runs.get_many", Subject::NONE, false, self.inner.get_many(ids), StoreError::Unavailable)
            .await
    }
}

#[async_trait]
impl RunWrites for FaultyRuns {
    async fn insert(&self, run: &Run, audit: Option<&AuditRecord>) -> StoreResult<Inserted> {
        let insert = async {
            let out = self.inner.insert(run, audit).await;
            if out.is_ok() && run.key.manual.is_none() {
                self.claimed(run);
            }
            if matches!(out, Ok(Inserted::Created)) {
                let key = (run.job_id.clone(), run.key.clone());
                self.ledger.get().created_at.insert(key, self.sim.now());
            }
            out
        };
        self.faults
            .call("runs.insert", Subject::of(run), true, self.write(run, insert), StoreError::Unavailable)
            .await
    }

    async fn transition(&self, before: &Run, after: &Run, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let op = format!(
            "runs.transition {} #{} -> {} #{}",
            before.state, before.attempt, after.state, after.attempt
        );

        let started = AtomicBool::new(false);
        let out = self
            .faults
            .call(
                &op,
                Subject::of(after),
                true,
                self.write(after, self.checked(&op, before, after, false, &started, audit)),
                StoreError::Unavailable,
            )
            .await;
        self.unanswered(out.is_err() && started.load(Ordering::SeqCst), after);
        out
    }

    async fn transition_unchanged(&self, before: &Run, after: &Run) -> StoreResult<()> {
        let op = format!(
            "runs.transition_unchanged {} #{} -> {} #{}",
            before.state, before.attempt, after.state, after.attempt
        );

        let started = AtomicBool::new(false);
        let out = self
            .faults
            .call(
                &op,
                Subject::of(after),
                true,
                self.write(after, self.checked(&op, before, after, true, &started, None)),
                StoreError::Unavailable,
            )
            .await;
        self.unanswered(out.is_err() && started.load(Ordering::SeqCst), after);
        out
    }

    async fn flag_failing(
        &self,
        job_id: &JobId,
        after: Option<&RunKey>,
        mark: &TroubleMark,
    ) -> StoreResult<()> {
        self.faults
            .call(
                "runs.flag_failing",
                Subject::job(job_id),
                true,
                self.inner.flag_failing(job_id, after, mark),
                StoreError::Unavailable,
            )
            .await
    }

    async fn troubles(&self, job_id: &JobId) -> StoreResult<Troubles> {
        self.faults
            .call(
                "runs.troubles",
                Subject::job(job_id),
                false,
                self.inner.troubles(job_id),
                StoreError::Unavailable,
            )
            .await
    }

    async fn open_trouble(&self, job_id: &JobId, trouble: Trouble, mark: &TroubleMark) -> StoreResult<()> {
        self.faults
            .call(
                "runs.open_trouble",
                Subject::job(job_id),
                true,
                self.inner.open_trouble(job_id, trouble, mark),
                StoreError::Unavailable,
            )
            .await
    }

    async fn close_troubles(&self, job_id: &JobId, ended: &Troubles, by: &str) -> StoreResult<()> {
        self.faults
            .call(
                "runs.close_troubles",
                Subject::job(job_id),
                true,
                self.inner.close_troubles(job_id, ended, by),
                StoreError::Unavailable,
            )
            .await
    }

    async fn troubles_closed_by(&self, job_id: &JobId) -> StoreResult<Option<String>> {
        self.faults
            .call(
                "runs.troubles_closed_by",
                Subject::job(job_id),
                false,
                self.inner.troubles_closed_by(job_id),
                StoreError::Unavailable,
            )
            .await
    }

    async fn mark_resent(&self, run: &Run, at: DateTime<Utc>) -> StoreResult<()> {
        self.faults
            .call(
                "runs.mark_resent",
                Subject::of(run),
                true,
                self.write(run, self.inner.mark_resent(run, at)),
                StoreError::Unavailable,
            )
            .await
    }

    async fn mark_call_ended(&self, run: &Run, attempt: u32) -> StoreResult<()> {
        self.faults
            .call(
                "runs.mark_call_ended",
                Subject::of(run),
                true,
                self.write(run, self.inner.mark_call_ended(run, attempt)),
                StoreError::Unavailable,
            )
            .await
    }
}

#[async_trait]
impl RunOutbox for FaultyRuns {
    async fn record_event(&self, run: &Run, event: &RunEvent) -> StoreResult<()> {
        let op = format!("runs.record_event {}", event.id);

        self.faults
            .call(
                &op,
                Subject::of(run),
                true,
                self.write(run, self.inner.record_event(run, event)),
                StoreError::Unavailable,
            )
            .await
    }

    async fn take_event(&self, run: &Run, event: &RunEvent, now: DateTime<Utc>) -> StoreResult<()> {
        self.faults
            .call(
                "runs.take_event",
                Subject::of(run),
                true,
                self.write(run, self.inner.take_event(run, event, now)),
                StoreError::Unavailable,
            )
            .await
    }

    async fn mark_events_sent(&self, run: &Run, published: &Published, settle: bool) -> StoreResult<()> {
        let out = self
            .faults
            .call(
                "runs.mark_events_sent",
                Subject::of(run),
                true,
                self.write(run, self.inner.mark_events_sent(run, published, settle)),
                StoreError::Unavailable,
            )
            .await;
        if out.is_ok() {
            // What this actor published and has now marked is out of the window.
            let actor = self.sim.core().actor.clone();
            let run_id = run.id().to_string();
            let marked: Vec<(&str, DateTime<Utc>)> = run
                .events
                .iter()
                .filter(|e| published.sent.contains(&e.id) || published.shared_only.contains(&e.id))
                .map(|e| (e.kind.as_str(), e.at))
                .collect();
            if let Some(told) = self.ledger.get().unmarked.get_mut(&actor) {
                told.retain(|t| t.run_id != run_id || !marked.contains(&(t.event, t.at)));
            }
        }
        out
    }
}

#[async_trait]
impl InFlightIndex for FaultyRuns {
    fn shards(&self) -> u16 {
        self.inner.shards()
    }

    async fn in_flight(&self, until: DateTime<Utc>, shards: u16) -> StoreResult<Vec<RunId>> {
        self.faults
            .call(
                "runs.in_flight",
                Subject::NONE,
                false,
                self.inner.in_flight(until, shards),
                StoreError::Unavailable,
            )
            .await
    }
}

impl FaultyRuns {
    /// The transition itself, with the fence checked against the run as stored just before.
    /// `started` is set when the write applied an attempt's start.
    async fn checked(
        &self,
        op: &str,
        before: &Run,
        after: &Run,
        unchanged: bool,
        started: &AtomicBool,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let stored = self.stored(after).await;
        let out = match unchanged {
            true => self.inner.transition_unchanged(before, after).await,
            false => self.inner.transition(before, after, audit).await,
        };
        if out.is_ok() {
            self.fenced(op, stored.as_ref(), before, unchanged);
            if after.state == RunState::Running && after.attempt > before.attempt {
                self.started(after);
                started.store(true, Ordering::SeqCst);
            }
        }
        out
    }
}

impl FaultyRuns {
    /// Notes a start the store applied but its writer was told failed (its answer lost).
    fn unanswered(&self, applied_start: bool, run: &Run) {
        if applied_start {
            self.ledger.get().unanswered_starts.insert((run.id().to_string(), run.attempt));
        }
    }

    /// Notes an attempt's start.
    fn started(&self, run: &Run) {
        let actor = self.sim.core().actor.clone();
        self.ledger.get().starts.push(Start {
            job_id: run.job_id.clone(),
            run_id: run.id().to_string(),
            attempt: run.attempt,
            actor,
        });
    }
}

/// The named calendars, faulty: a read or a write refused, a write applied with its answer lost.
#[derive(Debug)]
pub struct FaultyCalendars {
    pub inner: Arc<MemoryCalendarStore>,
    pub faults: Arc<Faults>,
}

#[async_trait]
impl CalendarStore for FaultyCalendars {
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<NamedCalendar>> {
        let op = format!("calendars.get {name}");
        self.faults
            .call(&op, Subject::NONE, false, self.inner.get(owner, name), StoreError::Unavailable)
            .await
    }

    async fn list(&self, owner: &str) -> StoreResult<Vec<NamedCalendar>> {
        let op = format!("calendars.list {owner}");
        self.faults.call(&op, Subject::NONE, false, self.inner.list(owner), StoreError::Unavailable).await
    }

    async fn put(
        &self,
        calendar: &NamedCalendar,
        expected: Option<u64>,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let op = format!("calendars.put {} v{} over v{expected:?}", calendar.name, calendar.version);
        self.faults
            .call(
                &op,
                Subject::NONE,
                true,
                self.inner.put(calendar, expected, audit),
                StoreError::Unavailable,
            )
            .await
    }

    async fn delete(
        &self,
        owner: &str,
        name: &str,
        version: u64,
        links: u64,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let op = format!("calendars.delete {name} v{version} links v{links}");
        let delete = self.inner.delete(owner, name, version, links, audit);
        self.faults.call(&op, Subject::NONE, true, delete, StoreError::Unavailable).await
    }

    async fn links(&self, owner: &str, name: &str) -> StoreResult<Links> {
        let op = format!("calendars.links {name}");
        self.faults
            .call(&op, Subject::NONE, false, self.inner.links(owner, name), StoreError::Unavailable)
            .await
    }

    async fn link(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()> {
        let op = format!("calendars.link {name} {job}");
        let link = self.inner.link(owner, name, job, at);
        self.faults.call(&op, Subject::NONE, true, link, StoreError::Unavailable).await
    }

    async fn unlink_stale(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()> {
        let op = format!("calendars.unlink_stale {name} {job}");
        let unlink = self.inner.unlink_stale(owner, name, job, at);
        self.faults.call(&op, Subject::NONE, true, unlink, StoreError::Unavailable).await
    }

    async fn unlink(&self, owner: &str, name: &str, job: &str) -> StoreResult<()> {
        let op = format!("calendars.unlink {name} {job}");
        let unlink = self.inner.unlink(owner, name, job);
        self.faults.call(&op, Subject::NONE, true, unlink, StoreError::Unavailable).await
    }
}

/// The concurrency groups, faulty: a read or a write refused, a write applied with its answer
/// lost, a crash between two calls (a slot taken and never used, a release never written).
#[derive(Debug)]
pub struct FaultyGroups {
    pub inner: Arc<MemoryGroupStore>,
    pub faults: Arc<Faults>,
}

/// A group's slots as the trace shows them: `run-id#attempt`, ….
fn slots_of(group: &Group) -> String {
    let slots: Vec<String> = group.slots.iter().map(|(id, s)| format!("{id}#{}", s.attempt)).collect();
    let mut waiting: Vec<(&DateTime<Utc>, &String, &DateTime<Utc>)> =
        group.waiting.iter().map(|(id, w)| (&w.instant, id, &w.seen_at)).collect();
    waiting.sort();
    let first: Vec<String> = waiting
        .iter()
        .take(2)
        .map(|(_, id, seen)| format!("{id} seen {}", seen.format("%H:%M:%S")))
        .collect();
    format!(
        "v{} slots [{}] waiting {} (first: {})",
        group.version,
        slots.join(", "),
        group.waiting.len(),
        first.join(", ")
    )
}

#[async_trait]
impl GroupStore for FaultyGroups {
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<Group>> {
        let op = format!("groups.get {name}");
        self.faults
            .call(&op, Subject::NONE, false, self.inner.get(owner, name), StoreError::Unavailable)
            .await
    }

    async fn put(
        &self,
        group: &Group,
        expected: Option<u64>,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let op = format!("groups.put {} over v{expected:?}: {}", group.name, slots_of(group));
        self.faults
            .call(&op, Subject::NONE, true, self.inner.put(group, expected, audit), StoreError::Unavailable)
            .await
    }

    async fn delete(
        &self,
        owner: &str,
        name: &str,
        version: u64,
        links: u64,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let op = format!("groups.delete {name} v{version} links v{links}");
        let delete = self.inner.delete(owner, name, version, links, audit);
        self.faults.call(&op, Subject::NONE, true, delete, StoreError::Unavailable).await
    }

    async fn links(&self, owner: &str, name: &str) -> StoreResult<Links> {
        let op = format!("groups.links {name}");
        self.faults
            .call(&op, Subject::NONE, false, self.inner.links(owner, name), StoreError::Unavailable)
            .await
    }

    async fn link(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()> {
        let op = format!("groups.link {name} {job}");
        let link = self.inner.link(owner, name, job, at);
        self.faults.call(&op, Subject::NONE, true, link, StoreError::Unavailable).await
    }

    async fn unlink(&self, owner: &str, name: &str, job: &str) -> StoreResult<()> {
        let op = format!("groups.unlink {name} {job}");
        let unlink = self.inner.unlink(owner, name, job);
        self.faults.call(&op, Subject::NONE, true, unlink, StoreError::Unavailable).await
    }
}

/// The start fences, faulty: a read or a take refused, a take applied with its answer lost, a
/// crash between a take and the start write that follows it.
#[derive(Debug)]
pub struct FaultyFences {
    pub inner: Arc<MemoryFenceStore>,
    pub faults: Arc<Faults>,
}

#[async_trait]
impl FenceStore for FaultyFences {
    async fn get(&self, job_id: &JobId) -> StoreResult<Option<Fence>> {
        let read = self.inner.get(job_id);
        self.faults.call("fences.get", Subject::job(job_id), false, read, StoreError::Unavailable).await
    }

    async fn take(
        &self,
        job_id: &JobId,
        expected: Option<&RunKey>,
        run: &RunKey,
        previous: Option<&RunKey>,
    ) -> StoreResult<()> {
        let key = |k: Option<&RunKey>| k.map_or_else(|| "nothing".to_string(), RunKey::encode);
        let op = format!("fences.take {} over {} after {}", run.encode(), key(expected), key(previous));
        let take = self.inner.take(job_id, expected, run, previous);
        self.faults.call(&op, Subject::job(job_id), true, take, StoreError::Unavailable).await
    }

    async fn remove(&self, job_id: &JobId) -> StoreResult<()> {
        let remove = self.inner.remove(job_id);
        self.faults.call("fences.remove", Subject::job(job_id), true, remove, StoreError::Unavailable).await
    }
}

/// The tick's progress, faulty; tells the ledger the minutes marked reached or processed.
#[derive(Debug)]
pub struct FaultyTickState {
    pub inner: Arc<MemoryTickStateStore>,
    pub faults: Arc<Faults>,
    pub ledger: Ledger,
    pub sim: Sim,
}

impl FaultyTickState {
    fn reached(&self, minute: DateTime<Utc>) {
        let at = self.sim.now();
        self.ledger.get().reached.push((at, minute));
    }
}

#[async_trait]
impl TickStateStore for FaultyTickState {
    async fn get(&self) -> StoreResult<TickState> {
        self.faults.call("tick.get", Subject::NONE, false, self.inner.get(), StoreError::Unavailable).await
    }

    async fn set_reached(&self, minute: DateTime<Utc>) -> StoreResult<()> {
        let set = async {
            let out = self.inner.set_reached(minute).await;
            if out.is_ok() {
                self.reached(minute);
            }
            out
        };
        self.faults
            .call(&format!("tick.set_reached {minute}"), Subject::NONE, true, set, StoreError::Unavailable)
            .await
    }

    async fn set_watermark(&self, minute: DateTime<Utc>) -> StoreResult<()> {
        let set = async {
            let out = self.inner.set_watermark(minute).await;
            if out.is_ok() {
                self.reached(minute);
                self.ledger.get().processed.push((self.sim.now(), minute));
            }
            out
        };
        self.faults
            .call(&format!("tick.set_watermark {minute}"), Subject::NONE, true, set, StoreError::Unavailable)
            .await
    }

    async fn open_incident(&self, since: DateTime<Utc>, alert: &str) -> StoreResult<()> {
        self.faults
            .call(
                "tick.open_incident",
                Subject::NONE,
                true,
                self.inner.open_incident(since, alert),
                StoreError::Unavailable,
            )
            .await
    }

    async fn close_incident(&self, since: DateTime<Utc>, alert: &str, now: DateTime<Utc>) -> StoreResult<()> {
        self.faults
            .call(
                "tick.close_incident",
                Subject::NONE,
                true,
                self.inner.close_incident(since, alert, now),
                StoreError::Unavailable,
            )
            .await
    }

    async fn take_alert(
        &self,
        alert: &str,
        taken_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.faults
            .call(
                "tick.take_alert",
                Subject::NONE,
                true,
                self.inner.take_alert(alert, taken_at, now),
                StoreError::Unavailable,
            )
            .await
    }

    async fn mark_alert_sent(&self, alert: &str) -> StoreResult<()> {
        self.faults
            .call(
                "tick.mark_alert_sent",
                Subject::NONE,
                true,
                self.inner.mark_alert_sent(alert),
                StoreError::Unavailable,
            )
            .await
    }

    async fn note_shards(&self, shards: u16) -> StoreResult<()> {
        self.faults
            .call(
                "tick.note_shards",
                Subject::NONE,
                true,
                self.inner.note_shards(shards),
                StoreError::Unavailable,
            )
            .await
    }

    async fn set_looked_back(&self, shards: u16) -> StoreResult<()> {
        self.faults
            .call(
                "tick.set_looked_back",
                Subject::NONE,
                true,
                self.inner.set_looked_back(shards),
                StoreError::Unavailable,
            )
            .await
    }

    async fn set_watchdog_cursor(&self, cursor: Option<&RunId>) -> StoreResult<()> {
        self.faults
            .call(
                "tick.set_watchdog_cursor",
                Subject::NONE,
                true,
                self.inner.set_watchdog_cursor(cursor),
                StoreError::Unavailable,
            )
            .await
    }
}

// ---------------------------------------------------------------------------------------------
// Queue, bus, topics
// ---------------------------------------------------------------------------------------------

/// The runs queue, faulty: besides refused and ambiguous calls, a message sent may be lost,
/// duplicated or delayed further; redelivery after a hold and redrive after the receive limit
/// are the queue's own.
#[derive(Debug)]
pub struct FaultyQueue {
    pub inner: Arc<MemoryQueue>,
    pub faults: Arc<Faults>,
    pub ledger: Ledger,
    pub sim: Sim,
}

#[async_trait]
impl RunQueue for FaultyQueue {
    async fn send(&self, batch: &[Dispatch]) -> Vec<Result<(), QueueError>> {
        let mut verdict = self.faults.enter(true).await;
        if verdict != Verdict::Refuse && self.faults.queue_out() {
            self.ledger.fault("queue outage");
            verdict = Verdict::Refuse;
        }
        if verdict == Verdict::Refuse {
            self.faults.note(format!("queue.send {} messages: refused (injected)", batch.len()), None, None);
            return batch
                .iter()
                .map(|_| Err(QueueError::Unavailable("injected: throttled".into())))
                .collect();
        }
        let rates = self.faults.rates();
        let mut sent = Vec::with_capacity(batch.len());
        for dispatch in batch {
            let job = JobId::parse(&dispatch.message.job_id);
            let mut core = self.sim.core();
            if core.chance(rates.lose) {
                drop(core);
                self.ledger.fault("message lost");
                self.faults.note(
                    format!("queue.send attempt {}: lost (injected)", dispatch.message.attempt),
                    job.as_ref(),
                    Some(dispatch.message.run_key.clone()),
                );
                continue;
            }
            let mut dispatch = dispatch.clone();
            if core.chance(rates.delay) {
                let extra = core.between(1, 90) as u32;
                dispatch.delay_s = (dispatch.delay_s + extra).min(MAX_DELAY_S);
                drop(core);
                self.ledger.fault("message delayed");
            } else {
                drop(core);
            }
            let twice = self.sim.core().chance(rates.duplicate);
            if twice {
                self.ledger.fault("message duplicated");
                sent.push(dispatch.clone());
            }
            self.faults.note(
                format!(
                    "queue.send attempt {} delay {} s{}",
                    dispatch.message.attempt,
                    dispatch.delay_s,
                    if twice { " twice (injected)" } else { "" }
                ),
                job.as_ref(),
                Some(dispatch.message.run_key.clone()),
            );
            sent.push(dispatch);
        }
        let results = self.inner.send(&sent).await;
        self.sim.yield_now().await;
        let failed = results.iter().find_map(|r| r.clone().err());
        if verdict == Verdict::Ambiguous || failed.is_some() {
            let how = if failed.is_some() { "failed" } else { "applied, answer lost (injected)" };
            self.faults.note(format!("queue.send {} messages: {how}", batch.len()), None, None);
        }
        match (verdict, failed) {
            (_, Some(e)) => batch.iter().map(|_| Err(e.clone())).collect(),
            (Verdict::Ambiguous, None) => batch
                .iter()
                .map(|_| Err(QueueError::Unavailable("injected: timed out after the send".into())))
                .collect(),
            _ => batch.iter().map(|_| Ok(())).collect(),
        }
    }
}

#[async_trait]
impl RunInbox for FaultyQueue {
    /// Never a long poll: the in-memory queue would wait in real time; a consumer with nothing
    /// to do sleeps on the virtual clock instead.
    async fn receive(&self, max: i32, _wait_s: i32) -> Result<Vec<Received>, QueueError> {
        self.faults
            .call("queue.receive", Subject::NONE, false, self.inner.receive(max, 0), QueueError::Unavailable)
            .await
    }

    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        self.faults
            .call("queue.delete", Subject::NONE, true, self.inner.delete(receipt), QueueError::Unavailable)
            .await
    }

    async fn set_visibility(&self, receipt: &str, seconds: u32) -> Result<(), QueueError> {
        self.faults
            .call(
                "queue.set_visibility",
                Subject::NONE,
                true,
                self.inner.set_visibility(receipt, seconds),
                QueueError::Unavailable,
            )
            .await
    }

    async fn dead_letter(&self, message: &Received, reason: &str) -> Result<(), QueueError> {
        self.faults
            .call(
                "queue.dead_letter",
                Subject::NONE,
                true,
                self.inner.dead_letter(message, reason),
                QueueError::Unavailable,
            )
            .await
    }

    async fn forward_to_dead_letter(&self, body: &str, reason: &str) -> Result<(), QueueError> {
        self.faults
            .call(
                "queue.forward_to_dead_letter",
                Subject::NONE,
                true,
                self.inner.forward_to_dead_letter(body, reason),
                QueueError::Unavailable,
            )
            .await
    }

    async fn redrive(&self) -> Result<usize, QueueError> {
        self.faults
            .call("queue.redrive", Subject::NONE, true, self.inner.redrive(), QueueError::Unavailable)
            .await
    }
}

/// The event bus, faulty; tells the ledger what each actor published and has not yet marked.
#[derive(Debug)]
pub struct FaultyBus {
    pub inner: Arc<MemoryEventBus>,
    pub faults: Arc<Faults>,
    pub ledger: Ledger,
    pub sim: Sim,
}

#[async_trait]
impl EventBus for FaultyBus {
    async fn publish(&self, notification: &Notification) -> Result<(), PublishError> {
        let run = RunId::parse(&notification.run_id);
        let subject = run.as_ref().map_or(Subject::NONE, |r| Subject::run(&r.job_id, &r.key));
        let op = format!("bus.publish {}", notification.event);
        // Noted with the publish itself: the publisher may die right after it.
        let told =
            Told { run_id: notification.run_id.clone(), event: notification.event, at: notification.at };
        let published = AtomicBool::new(false);
        let publish = async {
            let before = self.inner.published().len();
            let out = self.inner.publish(notification).await;
            if self.inner.published().len() > before {
                published.store(true, Ordering::SeqCst);
                let actor = self.sim.core().actor.clone();
                self.ledger.get().unmarked.entry(actor).or_default().push(told.clone());
            }
            out
        };
        let out = self.faults.call(&op, subject, true, publish, PublishError::Unavailable).await;
        if out.is_err() && published.load(Ordering::SeqCst) {
            // Published, but its answer was lost: the publisher leaves it unsent, to be told again.
            self.ledger.get().window.insert(told);
        }
        out
    }

    async fn publish_to_job(&self, notification: &Notification) -> Result<(), PublishError> {
        self.faults
            .call(
                "bus.publish_to_job",
                Subject::NONE,
                true,
                self.inner.publish_to_job(notification),
                PublishError::Unavailable,
            )
            .await
    }

    async fn publish_notice(&self, notice: &JobNotice, to_job: bool) -> Result<(), PublishError> {
        let id = JobId::parse(&notice.job_id);
        let subject = id.as_ref().map_or(Subject::NONE, Subject::job);
        self.faults
            .call(
                "bus.publish_notice",
                subject,
                true,
                self.inner.publish_notice(notice, to_job),
                PublishError::Unavailable,
            )
            .await
    }

    async fn alert(&self, alert: &SchedulerAlert) -> Result<(), PublishError> {
        self.faults
            .call("bus.alert", Subject::NONE, true, self.inner.alert(alert), PublishError::Unavailable)
            .await
    }
}

/// The per-job topics, faulty.
#[derive(Debug)]
pub struct FaultyTopics {
    pub inner: Arc<MemoryTopics>,
    pub faults: Arc<Faults>,
}

#[async_trait]
impl JobTopics for FaultyTopics {
    async fn sync(&self, job: &Job) -> Result<(), TopicError> {
        self.faults
            .call("topics.sync", Subject::job(&job.id), true, self.inner.sync(job), TopicError::Unavailable)
            .await
    }

    async fn remove(&self, job_id: &JobId) -> Result<(), TopicError> {
        self.faults
            .call(
                "topics.remove",
                Subject::job(job_id),
                true,
                self.inner.remove(job_id),
                TopicError::Unavailable,
            )
            .await
    }

    async fn subscriptions(&self, job_id: &JobId) -> Result<Vec<Subscription>, TopicError> {
        self.faults
            .call(
                "topics.subscriptions",
                Subject::job(job_id),
                false,
                self.inner.subscriptions(job_id),
                TopicError::Unavailable,
            )
            .await
    }
}
