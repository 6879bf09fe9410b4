//! The worker: one queue message in, at most one attempt of its run out.
//!
//! For a message (run, attempt) the worker re-reads the run and its job, decides whether an
//! attempt may start, starts it with a conditional write (the attempt number is the fencing
//! token, the lease lives in DynamoDB), calls the target and records the outcome the same way.
//! The job's concurrency policy is decided here, at the moment the first attempt would start,
//! by a conditional write on the job's start fence (invariant: policies decided under the start fence; [`fence`]), never by the
//! claimer ahead of time and never by a read of other runs. What happens to the message is the
//! [`Disposition`]: deleted, replaced by the message of what comes next (a wait never spends one
//! of the message's receives), kept for a backoff after a transient failure, or dead-lettered.
//!
//! A message never executes an attempt twice: a duplicate or stale one finds the run terminal,
//! already past its attempt, or leased by another live attempt, and is dropped. A live lease is
//! not watched through the queue: it ends by its worker, its callbacks, or the watchdog.

pub mod poll;

use crate::emf::{Record, Unit, names};
use crate::groups::slots::{Admission, Slots};
use crate::meter::Meter;
use crate::ports::Ports;
use crate::record::{Recorded, Recorder};
use crate::timer::Timer;
use crate::workflow::cascade::parents_readiness;
use chrono::{DateTime, Duration, Utc};
use std::ops::ControlFlow;
use std::sync::Arc;
use sundial_domain::catchup::late_reason;
use sundial_domain::clock::Clock;
use sundial_domain::entropy::Entropy;
use sundial_domain::fence::{self, Verdict};
use sundial_domain::follow;
use sundial_domain::job::{ConcurrencyPolicy, Job};
use sundial_domain::ports::store::{
    Catalogue, FenceStore, Race, Raced, RunHistory, RunWrites, StoreError, until_won,
};
use sundial_domain::ports::targets::{Answer, Caller, Invocation, Progress};
use sundial_domain::run::transition::{
    self, DEFAULT_HEARTBEAT_WINDOW, Ending, Step, paused_reason, skip_reason,
};
use sundial_domain::run::{Outcome, Run, RunKey, RunMessage, RunState};
use sundial_domain::run_queue::Dispatch;
use sundial_domain::workflow::Readiness;
use tracing::Instrument;

/// What to do with a message once handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Done with it: delete it.
    Delete,
    /// Done with it, and this message takes its place: the run's next attempt, or the same
    /// attempt once its wait is over (a backoff, or a message that arrived early).
    Replace(Dispatch),
    /// A transient failure (storage unavailable): look at it again after a backoff.
    Retry,
    /// Undecodable: move it to the dead-letter queue with the reason.
    DeadLetter(String),
}

/// Worker limits.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// The longest a call is waited on: a Lambda worker stops at 900 s, minus a margin.
    pub max_call: Duration,
    /// Added to the lease beyond the attempt's timeout.
    pub lease_margin: Duration,
    /// How long a 202 (and each heartbeat after it) keeps an attempt's lease alive.
    pub heartbeat_window: Duration,
    /// The longest from a run's admission by its group to its start write. Beyond it the run is
    /// looked at again instead of started: the group's slot (timed from its admission) must
    /// outlast the call, whose lease is timed from the start write. Keep it below
    /// `lease_margin`.
    pub max_pre_start: Duration,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            max_call: Duration::seconds(870),
            lease_margin: Duration::seconds(30),
            heartbeat_window: DEFAULT_HEARTBEAT_WINDOW,
            max_pre_start: Duration::seconds(10),
        }
    }
}

/// Consumes the runs queue.
#[derive(Debug, Clone)]
pub struct Worker {
    catalogue: Arc<dyn Catalogue>,
    history: Arc<dyn RunHistory>,
    writes: Arc<dyn RunWrites>,
    fences: Arc<dyn FenceStore>,
    timer: Arc<dyn Timer>,
    caller: Arc<dyn Caller>,
    /// Where each attempt's span goes.
    spans: Arc<dyn sundial_domain::ports::spans::Spans>,
    /// Where a look is sent to stop work again, outside a message's own disposition.
    queue: Arc<dyn sundial_domain::ports::queue::RunQueue>,
    recorder: Recorder,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    meter: Arc<Meter>,
    slots: Slots,
    settings: WorkerSettings,
}

/// How long a run waiting for its group's slot waits before it looks again, and the most a
/// random spread adds to it (so that waiters released together do not look together).
const GROUP_POLL_S: u32 = 3;
const GROUP_POLL_SPREAD_S: f64 = 2.0;
/// The same for a run without a place in the group's order (the places hold twice its slots).
const UNPLACED_POLL_S: u32 = 10;
const UNPLACED_POLL_SPREAD_S: f64 = 10.0;
/// How often a waiting run notes that its message is alive (`resent_at`), so that the watchdog's
/// re-dispatch of stranded messages leaves it alone.
const WAIT_NOTED_EVERY: Duration = Duration::seconds(30);
/// How often a run decides again on its job's start fence after losing the take to another run.
const FENCE_RACES: usize = 4;
/// The most pages of 100 of a job's runs read for its active ones at its fence's first take.
const FIRST_TAKE_PAGES: usize = 5;
/// How long a run that passed its job's start fence waits before it looks again whether the
/// call of the run before it has ended: every second for [`CALL_LOOK_OFTEN_FOR`] after that call
/// was cut short (its worker notices within [`WATCH_EVERY`]), then every 30 s.
const CALL_LOOK_AGAIN_S: u32 = 1;
const CALL_LOOK_LATER_S: u32 = 30;
const CALL_LOOK_OFTEN_FOR: Duration = Duration::seconds(15);
/// How often a worker calling the target of a `forbid` or `replace` job looks whether the
/// attempt was closed under it (a `replace` or an owner cancelled the run): it then stops the
/// call and records that it ended, so that the next run may start.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

impl Worker {
    pub fn new(ports: &Ports, recorder: Recorder, settings: WorkerSettings) -> Self {
        let Ports { jobs, runs, groups, fences, queue, caller, clock, entropy, meter, timer, spans, .. } =
            ports.clone();
        let slots = Slots::new(groups, runs.clone(), queue.clone(), timer.clone());
        Worker {
            catalogue: jobs,
            history: runs.clone(),
            writes: runs,
            fences,
            timer,
            caller,
            spans,
            queue,
            recorder,
            clock,
            entropy,
            meter,
            slots,
            settings,
        }
    }

    /// Handles one message body; `worker` names who runs the attempt.
    pub async fn handle(&self, body: &str, worker: &str) -> Disposition {
        let message: RunMessage = match serde_json::from_str(body) {
            Ok(m) => m,
            Err(e) => return Disposition::DeadLetter(format!("undecodable message: {e}")),
        };
        let (Some(job_id), Some(key)) =
            (sundial_domain::job::JobId::parse(&message.job_id), RunKey::decode(&message.run_key))
        else {
            return Disposition::DeadLetter("message names no valid run".into());
        };
        // Every log line about this message carries the run, its job and the attempt asked for.
        let run_id = sundial_domain::run::RunId::new(job_id.clone(), key.clone()).to_string();
        let span = tracing::info_span!(
            "run",
            run_id = %run_id,
            job_id = %job_id,
            attempt = message.attempt,
            trace_id = %sundial_domain::trace::trace_id(&run_id)
        );
        let processed = match message.look {
            Some(seen) => {
                let tag = message.tag.unwrap_or_default();
                self.look(&job_id, &key, message.attempt, seen, &tag).instrument(span).await
            }
            None => self.process(&job_id, &key, message.attempt, worker).instrument(span).await,
        };
        match processed {
            Ok(disposition) => disposition,
            Err(e) => {
                // Storage trouble: try the message again later; nothing was half-done.
                tracing::warn!(job_id = %job_id, run_key = %message.run_key, error = %e, "worker storage error");
                Disposition::Retry
            }
        }
    }

    async fn process(
        &self,
        job_id: &sundial_domain::job::JobId,
        key: &RunKey,
        asked: u32,
        worker: &str,
    ) -> Result<Disposition, StoreError> {
        let Some(mut run) = self.history.get(job_id, key).await? else {
            tracing::info!(job_id = %job_id, run_key = %key.encode(), "message for a run that does not exist; dropped");
            return Ok(Disposition::Delete);
        };
        if run.state == RunState::Running && run.attempt == asked + 1 {
            // The message of an attempt that just ended also starts the next: this one started
            // the open attempt, whose first look's message may never have been sent.
            let resent = self.resent_successor(&run, 0, follow::FIRST_LOOK_TAG, self.clock.now());
            return Ok(resent.unwrap_or(Disposition::Delete));
        }
        if !run.answers_to(asked) {
            // Terminal, or past the attempt this message asks for (invariant: state moves forward).
            // Work the attempt it started and nobody stopped (its looks' messages lost, this one
            // back after its first look's send failed) is stopped now; a stop that failed is
            // tried again with the message. A message asking for attempt n started n, or n + 1
            // (the message of an attempt that just ended also starts the next).
            let stopped =
                self.stop_if_closed(&run, asked).await && self.stop_if_closed(&run, asked + 1).await;
            return Ok(if stopped { Disposition::Delete } else { Disposition::Retry });
        }
        let now = self.clock.now();
        if run.state == RunState::Running {
            match self.expire(run, now).await? {
                ControlFlow::Continue(next) => run = next,
                ControlFlow::Break(disposition) => return Ok(disposition),
            }
        }
        if run.waits_until().is_some_and(|at| at > now) {
            // Not before its time: a message that arrived early, or a backoff to wait out.
            return Ok(Disposition::Replace(Dispatch::next_attempt(&run, now)));
        }
        let Some(job) = self.catalogue.get(&run.job_id).await? else {
            return self.cancel_for_deleted_job(&run, now).await;
        };
        if let Some(reason) = paused_reason(&job, &run).or_else(|| skip_reason(&job, &run)) {
            return self.skip(&job, &run, reason, now).await;
        }
        if let Some(reason) = late_reason(&job, &run, now) {
            return self.skip(&job, &run, reason, now).await;
        }
        if let Some(reason) = self.not_after_parents(&job, &run).await? {
            return self.skip(&job, &run, reason, now).await;
        }
        if run.attempt == 0
            && job.document.concurrency != ConcurrencyPolicy::Allow
            && let Some(disposition) = self.pass_fence(&job, &run, now).await?
        {
            return Ok(disposition);
        }
        match self.admit(&job, &run, now).await? {
            ControlFlow::Continue(start_at) => self.attempt(&job, run, worker, start_at).await,
            ControlFlow::Break(disposition) => Ok(disposition),
        }
    }

    /// A RUNNING `run` met by its message: left to its owner while its lease holds; else (its
    /// worker is gone, or its target stopped calling back) its attempt is ended as lost, and the
    /// run goes on (`Continue`) if that leaves it waiting for another attempt.
    async fn expire(
        &self,
        run: Run,
        now: DateTime<Utc>,
    ) -> Result<ControlFlow<Disposition, Run>, StoreError> {
        if run.lease_until.is_some_and(|lease| lease > now) {
            // The attempt is someone's: its worker, its callbacks, its looks or, once the lease
            // expires, the watchdog ends it. Nothing here to wait for, unless this is the start's
            // message back after it recorded the first look: that look's message may never have
            // been sent.
            let resent = self.resent_successor(&run, 0, follow::FIRST_LOOK_TAG, now);
            return Ok(ControlFlow::Break(resent.unwrap_or(Disposition::Delete)));
        }
        if let Some(followed) = run.attempts.last().filter(|a| a.handle.is_some()) {
            // Its looks went quiet (every message of the chain lost): a look, now, takes up the
            // chain and ends the attempt as its work stands.
            let look = Dispatch::look(&run, followed.looks, follow::tag(self.entropy.unit()), 0);
            return Ok(ControlFlow::Break(Disposition::Replace(look)));
        }
        let Some(job) = self.catalogue.get(&run.job_id).await? else {
            return self.cancel_for_deleted_job(&run, now).await.map(ControlFlow::Break);
        };
        // Only from what was read: a heartbeat meanwhile renewed the lease and wins.
        let expire = Step::Expire { jitter: self.entropy.unit() };
        Ok(match self.recorder.apply(&job, &run, &expire, now).await?.race() {
            Race::Won(next) if !next.state.is_terminal() => ControlFlow::Continue(next),
            Race::Won(_) | Race::Lost => ControlFlow::Break(Disposition::Delete),
        })
    }

    /// A slot of the job's concurrency group for the next attempt of `run`: the instant to start
    /// it at (`Continue`), or the message replaced to look again (the group is full, or the
    /// admission ran so long that its slot might end before a call started now).
    async fn admit(
        &self,
        job: &Job,
        run: &Run,
        now: DateTime<Utc>,
    ) -> Result<ControlFlow<Disposition, DateTime<Utc>>, StoreError> {
        // The slot is timed from its admission, the lease from the start write: the time between
        // them is bounded, so the slot outlasts every call it admits.
        let admitted_at = self.clock.now();
        if let Admission::Wait(full) = self.slots.admit(job, run, self.lease(job), admitted_at).await? {
            // A wait spends neither an attempt nor a receive: the message is replaced.
            tracing::info!(group = job.document.group.as_deref().unwrap_or(""), %full, "waiting for a slot of the group");
            self.note_waiting(run, now).await;
            // A placed waiter is woken when a slot is handed to it; its looks are a safety net.
            // One without a place looks less often still: it cannot take a slot before a place.
            let (base, spread) = match full.placed() {
                true => (GROUP_POLL_S, GROUP_POLL_SPREAD_S),
                false => (UNPLACED_POLL_S, UNPLACED_POLL_SPREAD_S),
            };
            let look_again = Dispatch::after(run, base + (self.entropy.unit() * spread) as u32);
            return Ok(ControlFlow::Break(Disposition::Replace(look_again)));
        }
        let start_at = self.clock.now();
        if start_at - admitted_at > self.settings.max_pre_start {
            // The admission ran long (throttling, a contended group): the slot it took may end
            // before a call started now would. Decide again on a fresh read, a moment later.
            tracing::warn!(
                admission_ms = (start_at - admitted_at).num_milliseconds(),
                "the group's admission ran long; the run is looked at again"
            );
            self.slots.release(job, run, run.attempt + 1, start_at).await;
            return Ok(ControlFlow::Break(Disposition::Replace(Dispatch::after(run, 0))));
        }
        Ok(ControlFlow::Continue(start_at))
    }

    /// Records `run` SKIPPED for `reason` (its event in the same write) instead of starting it.
    async fn skip(
        &self,
        job: &Job,
        run: &Run,
        reason: String,
        now: DateTime<Utc>,
    ) -> Result<Disposition, StoreError> {
        match self.recorder.apply(job, run, &Step::Skip { reason }, now).await?.race() {
            Race::Won(_) => {
                self.meter.observe(&Record::new("worker", now).count(names::RUNS_SKIPPED, 1));
                Ok(Disposition::Delete)
            }
            // Someone else moved the run on: their write tells it.
            Race::Lost => Ok(Disposition::Delete),
        }
    }

    /// Why a scheduled run of a job with parents may not start: claimed while the job still had
    /// a schedule of its own (or before a parent was added), its parents' runs for its instant
    /// have not all ended, or one failed under `all_success`. Decided at the start, like the
    /// concurrency policy; a run the cascade claimed always passes.
    async fn not_after_parents(&self, job: &Job, run: &Run) -> Result<Option<String>, StoreError> {
        if !job.has_parents() || run.attempt > 0 || run.key.manual.is_some() {
            return Ok(None);
        }
        let now = self.clock.now();
        let ready =
            parents_readiness(self.catalogue.as_ref(), self.history.as_ref(), job, &run.key, None, now)
                .await?;
        Ok(match ready {
            Readiness::Run => None,
            Readiness::Skip(reason) => Some(reason),
            Readiness::Wait | Readiness::Missing => {
                Some("not after its parents: their runs for this instant had not ended".into())
            }
        })
    }

    /// Passes `run`, about to start its first attempt, through its job's start fence
    /// ([`fence`]): under `forbid` a live holder makes this run SKIPPED; under `replace` an
    /// older holder is cancelled first and a newer one makes this run SKIPPED. The fence is
    /// taken with a write conditional on the holder read, so of two runs of the job handled at
    /// once one passes, and the other decides again on the fresh holder. A run that passed
    /// waits for the call of the holder before it to end. `None`: start it.
    async fn pass_fence(
        &self,
        job: &Job,
        run: &Run,
        now: DateTime<Utc>,
    ) -> Result<Option<Disposition>, StoreError> {
        let passed = until_won(FENCE_RACES, || self.fence_once(job, run, now)).await?;
        // Contended throughout: decide again when the message returns.
        Ok(passed.unwrap_or(Some(Disposition::Retry)))
    }

    /// One read of the fence, decision and conditional take of [`Worker::pass_fence`]: `Lost`
    /// when another run took the fence under it.
    async fn fence_once(
        &self,
        job: &Job,
        run: &Run,
        now: DateTime<Utc>,
    ) -> Result<Race<Option<Disposition>>, StoreError> {
        let fence = self.fences.get(&job.id).await?;
        let holder_run = match &fence {
            Some(f) if f.holder != run.key => self.history.get(&job.id, &f.holder).await?,
            Some(_) => None,
            // Never taken (a job just made `forbid` or `replace`, or runs from before the
            // fence): an active run that never took it still holds it.
            None => self.active_unfenced(job, run).await?,
        };
        let holder =
            fence.as_ref().map(|f| f.holder.clone()).or_else(|| holder_run.as_ref().map(|r| r.key.clone()));
        let before_it = fence.as_ref().and_then(|f| f.previous.as_ref());
        let previous =
            match fence::decide(job.document.concurrency, run, holder.as_ref(), holder_run.as_ref()) {
                Verdict::Held => {
                    // Passed before: this message is handled again, or its run waits for the
                    // call before it.
                    return self.after_previous_call(job, run, before_it, now).await.map(Race::Won);
                }
                Verdict::Skip(reason) => {
                    return self.skip(job, run, reason, now).await.map(|d| Race::Won(Some(d)));
                }
                Verdict::Take { .. } => fence::previous_for(holder.as_ref(), before_it, holder_run.as_ref()),
                Verdict::Replace { holder } => {
                    let cancel =
                        Step::Cancel { reason: format!("concurrency replace: replaced by run {}", run.id()) };
                    let Some(ended) = self.cancel_to_make_way(job, &holder, &cancel, now).await? else {
                        // It kept moving under every cancel: decide again when the message returns.
                        return Ok(Race::Won(Some(Disposition::Retry)));
                    };
                    // As it ended, not as read: it may have started its call meanwhile.
                    fence::previous_for(Some(&holder.key), before_it, Some(&ended))
                }
            };
        let expected = fence.as_ref().map(|f| &f.holder);
        let taken = self.fences.take(&job.id, expected, &run.key, previous.as_ref()).await;
        match taken.raced()? {
            // Taken over no fence: the job may have been deleted since this run read it, and its
            // fence with it (a delete removes the job, then its fence), while a run that held
            // that fence still calls. The job read again says so: this run is cancelled, and the
            // fence it took goes with the job.
            Race::Won(()) if expected.is_none() && self.catalogue.get(&job.id).await?.is_none() => {
                if let Err(e) = self.fences.remove(&job.id).await {
                    tracing::warn!(job_id = %job.id, error = %e, "the fence of a deleted job was left");
                }
                self.cancel_for_deleted_job(run, now).await.map(|d| Race::Won(Some(d)))
            }
            Race::Won(()) => self.after_previous_call(job, run, previous.as_ref(), now).await.map(Race::Won),
            // Another run took it first, or this run did and the answer was lost: decide again
            // on the fence as it is now.
            Race::Lost => Ok(Race::Lost),
        }
    }

    /// An active run (RUNNING, RETRYING) of a job that has no fence yet: read once, at the
    /// fence's first take, among the job's runs of its active window (newest first, a bounded
    /// number of pages). A run of a job edited to `forbid` or `replace` (the edit removes the
    /// fence), or one that started before the fence existed, never took the fence.
    async fn active_unfenced(&self, job: &Job, run: &Run) -> Result<Option<Run>, StoreError> {
        let since = run.scheduled_at() - job.active_window();
        let mut cursor: Option<String> = None;
        for _ in 0..FIRST_TAKE_PAGES {
            let page = self.history.list(&job.id, 100, cursor.as_deref(), None).await?;
            if let Some(active) = page.items.iter().find(|r| r.key != run.key && r.state.is_active()) {
                return Ok(Some(active.clone()));
            }
            let past_window = page.items.last().is_none_or(|r| r.scheduled_at() < since);
            match page.next {
                Some(next) if !past_window => cursor = Some(next),
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    /// `None` once the call of `previous` (the run before `run` that called the job's target)
    /// is over: `run` may call the same target. Otherwise `run` looks again a moment later,
    /// without spending an attempt or a receive.
    async fn after_previous_call(
        &self,
        job: &Job,
        run: &Run,
        previous: Option<&RunKey>,
        now: DateTime<Utc>,
    ) -> Result<Option<Disposition>, StoreError> {
        let previous = match previous {
            Some(key) => self.history.get(&job.id, key).await?,
            None => None,
        };
        // For an attempt an earlier version wrote (no recorded lease): the longest any call lasts,
        // since the job's timeout may have been lowered after it started.
        let bound = self.settings.max_call + self.settings.lease_margin;
        if fence::call_over(previous.as_ref(), bound, now) {
            return Ok(None);
        }
        // Its worker records the call's end within moments of the cancel; past that it is likely
        // dead, and the bound is what ends the wait: look less often.
        let cancelled_at = previous.as_ref().and_then(|p| p.attempts.last()).and_then(|a| a.finished_at);
        let soon = cancelled_at.is_none_or(|at| now - at < CALL_LOOK_OFTEN_FOR);
        let look_again = if soon { CALL_LOOK_AGAIN_S } else { CALL_LOOK_LATER_S };
        let previous = previous.map(|p| p.id().to_string()).unwrap_or_default();
        tracing::info!(%previous, "waiting for the call of the run before it to end");
        self.note_waiting(run, now).await;
        Ok(Some(Disposition::Replace(Dispatch::after(run, look_again))))
    }

    /// Notes, at most every [`WAIT_NOTED_EVERY`], that a waiting run's message is alive, so that
    /// the watchdog need not send another (each would start a second chain of looks).
    async fn note_waiting(&self, run: &Run, now: DateTime<Utc>) {
        if run.resent_at.is_none_or(|at| now - at > WAIT_NOTED_EVERY)
            && let Err(e) = self.writes.mark_resent(run, now).await
        {
            tracing::warn!(error = %e, "the wait was not noted; the watchdog may send another message");
        }
    }

    /// Cancels `other` so that a `replace` run can start: the run as it ended (by this cancel or
    /// by itself; as last read if it is gone), or `None` if it kept moving. A cancel that lost
    /// its race to the run moving on (a retry scheduled, an attempt started) is tried again on
    /// the fresh run, a few times: an older run that only moved to its next attempt must not
    /// outlive the run replacing it. The run as it ended says whether a call was made, whose end
    /// the replacing run waits for.
    async fn cancel_to_make_way(
        &self,
        job: &Job,
        other: &Run,
        cancel: &Step,
        now: DateTime<Utc>,
    ) -> Result<Option<Run>, StoreError> {
        let mut other = other.clone();
        for _ in 0..3 {
            if let Race::Won(cancelled) = self.recorder.apply(job, &other, cancel, now).await?.race() {
                // Work its attempt started is stopped now: this run waits for it to end. Should
                // the stop fail, a look tries it again (the attempt's own looks may be gone).
                if !self.stop_if_closed(&cancelled, cancelled.attempt).await {
                    self.send_look(&cancelled).await;
                }
                return Ok(Some(cancelled));
            }
            match self.history.get(&other.job_id, &other.key).await? {
                Some(fresh) if !fresh.state.is_terminal() => other = fresh,
                Some(ended) => return Ok(Some(ended)),
                None => return Ok(Some(other)),
            }
        }
        Ok(None)
    }

    /// Handles a message from the dead-letter queue. The message's attempt fences what it may
    /// do (invariant: policies decided under the start fence): only a run still waiting for exactly that attempt (QUEUED or RETRYING,
    /// the attempt never started) is recorded FAILED with the reason. A run that moved on, or
    /// whose attempt started (its lease, callbacks or the watchdog end it), is left alone; an
    /// undecodable message is logged in full. Returns what was done, for the caller to report.
    pub async fn dead_lettered(&self, body: &str, reason: &str) -> Result<String, StoreError> {
        // Counted as received, whatever it turns out to be: the dead-letter alarm watches this.
        let counted = Record::new("worker", self.clock.now()).count(names::RUNS_DEAD_LETTERED, 1);
        self.meter.observe(&counted);
        let message: Option<RunMessage> = serde_json::from_str(body).ok();
        let ids = message.as_ref().and_then(|m| {
            Some((sundial_domain::job::JobId::parse(&m.job_id)?, RunKey::decode(&m.run_key)?, m.attempt))
        });
        let Some((job_id, key, asked)) = ids else {
            tracing::error!(body = %body, reason = %reason, "undecodable message in the dead-letter queue");
            return Ok(format!("undecodable message logged: {reason}"));
        };
        let (job_id, key) = (&job_id, &key);
        // Each attempt ends in what was done (the run failed, or left alone), or loses to a
        // change of the run and reads it again.
        let handled = until_won(3, || async move {
            let Some(run) = self.history.get(job_id, key).await? else {
                return Ok(Race::Won("no such run".to_string()));
            };
            let waiting_for_it = run.waits_until().is_some() && asked == run.attempt + 1;
            if !waiting_for_it {
                let (id, state, attempt) = (run.id(), run.state, run.attempt);
                return Ok(Race::Won(format!(
                    "run {id} is {state} at attempt {attempt}: not this message's to end"
                )));
            }
            let now = self.clock.now();
            let dead_letter = Step::DeadLetter { reason: reason.to_string() };
            let changed = match self.catalogue.get(job_id).await? {
                Some(job) => self.recorder.apply(&job, &run, &dead_letter, now).await?.race().map(drop),
                None => self.orphan(&run, &dead_letter, now).await?,
            };
            Ok::<_, StoreError>(changed.map(|()| format!("run {} recorded FAILED", run.id())))
        });
        handled.await?.ok_or_else(|| StoreError::Unavailable("the run kept changing".into()))
    }

    async fn cancel_for_deleted_job(&self, run: &Run, now: DateTime<Utc>) -> Result<Disposition, StoreError> {
        let cancel = Step::Cancel { reason: "the job was deleted".into() };
        self.orphan(run, &cancel, now).await?;
        Ok(Disposition::Delete)
    }

    /// Applies `step` to a run whose job is gone (nobody to tell), under the step's fence. A
    /// step that no longer applies was overtaken by whoever moved the run, like a lost write.
    async fn orphan(&self, run: &Run, step: &Step, now: DateTime<Utc>) -> Result<Race<()>, StoreError> {
        match transition::apply_orphan(run, step, now) {
            Ok(change) => crate::record::persist(self.writes.as_ref(), run, &change, None).await.raced(),
            Err(_refused) => Ok(Race::Lost),
        }
    }

    /// How long an attempt's call may last (its time limit), and the lease its start gives.
    fn call_limit(&self, job: &Job) -> Duration {
        Duration::seconds(i64::from(job.document.timeout_s)).min(self.settings.max_call)
    }

    fn lease(&self, job: &Job) -> Duration {
        self.call_limit(job) + self.settings.lease_margin
    }

    /// Starts the next attempt, calls the target, records the outcome.
    async fn attempt(
        &self,
        job: &Job,
        run: Run,
        worker: &str,
        now: DateTime<Utc>,
    ) -> Result<Disposition, StoreError> {
        let n = run.attempt + 1;
        let call_limit = self.call_limit(job);
        let Some((started, token)) = self.start(job, &run, worker, now).await? else {
            return Ok(Disposition::Delete);
        };
        let span = tracing::info_span!("attempt", run_id = %started.id(), job_id = %job.id, attempt = n);
        let invocation = Invocation {
            job,
            payload: delivered_payload(job, &started, n),
            run_id: started.id().to_string(),
            attempt: n,
            scheduled_at: started.scheduled_at(),
            callback_token: token,
            timeout: call_limit.to_std().unwrap_or_default(),
            sent_at: now,
        };
        let call = self.caller.call(&invocation).instrument(span);
        let watched = job.document.concurrency != ConcurrencyPolicy::Allow;
        let answer = if watched { self.unless_closed(call, &started).await } else { Some(call.await) };
        let now = self.clock.now();
        self.record_attempt(job, &started, answer.as_ref(), now).await;
        let Some(answer) = answer else {
            // Closed under the call (cancelled): the call is stopped; the next run may start.
            tracing::info!("the attempt was closed under its call; the call is stopped");
            self.note_call_ended(&started).await;
            self.slots.release(job, &started, n, now).await;
            return Ok(Disposition::Delete);
        };
        match answered(answer, call_limit) {
            Answered::Accepted(status) => {
                // The target reports back through the callbacks; heartbeats keep the lease
                // alive up to the attempt's timeout, and the watchdog ends it if they stop. The
                // message has nothing left to do.
                let accept = Step::Accept { status, window: self.settings.heartbeat_window };
                self.recorder.apply(job, &started, &accept, now).await?;
                Ok(Disposition::Delete)
            }
            Answered::Started(handle) => self.follow(job, &started, handle, now).await,
            Answered::Ended(ending) => self.end(job, &started, ending, watched, now).await,
        }
    }

    /// The attempt `started` started work `handle` (an execution, a task): it follows it, the
    /// first look a moment later. If the run moved on meanwhile (cancelled), nobody will follow
    /// the work: it is stopped.
    async fn follow(
        &self,
        job: &Job,
        started: &Run,
        handle: String,
        now: DateTime<Utc>,
    ) -> Result<Disposition, StoreError> {
        if handle.len() > sundial_domain::target::MAX_HANDLE_BYTES {
            self.stop_work(&handle, "its ARN is too long to follow").await;
            let error =
                format!("the started work's ARN is {} bytes, longer than can be followed", handle.len());
            return self.end(job, started, Ending::new(Outcome::Failed).because(error), false, now).await;
        }
        tracing::info!(%handle, "the target started work; the attempt follows it");
        let tag = follow::FIRST_LOOK_TAG.to_string();
        let track = Step::Track { handle: handle.clone(), seen: 0, tag, window: follow::LEASE };
        match self.recorder.apply(job, started, &track, now).await?.race() {
            Race::Won(tracked) => Ok(Disposition::Replace(self.next_look(Some(job), &tracked, 1, now))),
            Race::Lost => {
                if self.stop_work(&handle, "the run moved on before its work was followed").await {
                    self.note_call_ended(started).await;
                }
                Ok(Disposition::Delete)
            }
        }
    }

    /// The message of look `seen` at the work of `run`'s open attempt, with a tag of its own, on
    /// the grid of looks and never later than the attempt's deadline (when `job` is at hand).
    fn next_look(&self, job: Option<&Job>, run: &Run, seen: u32, now: DateTime<Utc>) -> Dispatch {
        let started_at = run.attempts.last().map_or(now, |a| a.started_at);
        let deadline = job.and_then(|job| transition::attempt_deadline(job, run));
        let tag = follow::tag(self.entropy.unit());
        Dispatch::look(run, seen, tag, follow::next_look(started_at, now, deadline))
    }

    /// A look at the work attempt `asked` of a run started, asked for when the attempt had
    /// recorded `seen` looks ([`sundial_domain::follow`]): the attempt ends as the work ended,
    /// or at its deadline (the work stopped); else the look is recorded and the next one sent.
    /// An attempt closed meanwhile by a cancel, its timeout or its lost lease has its work
    /// stopped. A stale look (another chain's, or one already recorded) does nothing, unless the
    /// chain that recorded the later look has gone quiet: it then takes that chain's place.
    async fn look(
        &self,
        job_id: &sundial_domain::job::JobId,
        key: &RunKey,
        asked: u32,
        seen: u32,
        tag: &str,
    ) -> Result<Disposition, StoreError> {
        let Some(run) = self.history.get(job_id, key).await? else {
            return Ok(Disposition::Delete);
        };
        let Some(attempt) = run.attempts.iter().find(|a| a.n == asked) else {
            return Ok(Disposition::Delete);
        };
        let Some(handle) = attempt.handle.clone() else {
            return Ok(Disposition::Delete);
        };
        if run.state != RunState::Running || run.attempt != asked {
            // A stop that failed is tried again with this message.
            return Ok(match self.stop_if_closed(&run, asked).await {
                true => Disposition::Delete,
                false => Disposition::Retry,
            });
        }
        let now = self.clock.now();
        if attempt.looks != seen {
            return Ok(self.resent_successor(&run, seen, tag, now).unwrap_or(Disposition::Delete));
        }
        let Some(job) = self.catalogue.get(&run.job_id).await? else {
            // Its lease ends the attempt; nobody wants the work.
            self.stop_work(&handle, "the job was deleted").await;
            return Ok(Disposition::Delete);
        };
        if let Some(deadline) = transition::attempt_deadline(&job, &run).filter(|deadline| now >= *deadline) {
            let limit = job.document.timeout_s;
            let error = match self
                .caller
                .stop(&handle, &format!("no result within timeout_s ({limit} s)"))
                .await
            {
                Ok(()) => format!("no result within {limit} s; the work was stopped"),
                // The attempt stays open and its work is stopped again with this message, for a
                // while: a retry must not start beside work still running.
                Err(e) if now < deadline + follow::STOP_GRACE => {
                    tracing::warn!(%handle, error = %e, "the work past its timeout was not stopped; trying again");
                    return Ok(Disposition::Retry);
                }
                Err(e) => format!("no result within {limit} s; stopping the work failed: {e}"),
            };
            return self.end(&job, &run, Ending::new(Outcome::TimedOut).because(error), false, now).await;
        }
        let progress = match self.caller.follow(&handle).await {
            // Just started, the work may not be readable yet (its service reads its own writes
            // eventually): looked at again.
            Progress::Missing(why) if now - attempt.started_at < follow::MISSING_GRACE => {
                Progress::Unknown(why)
            }
            Progress::Missing(why) => Progress::Ended(Ending::new(Outcome::Failed).because(why)),
            progress => progress,
        };
        match progress {
            Progress::Ended(ending) => self.end(&job, &run, ending, false, now).await,
            Progress::Running | Progress::Unknown(_) | Progress::Missing(_) => {
                if let Progress::Unknown(why) = progress {
                    tracing::warn!(%handle, %why, "the work could not be looked at; looking again later");
                }
                let track = Step::Track { handle, seen, tag: tag.to_string(), window: follow::LEASE };
                match self.recorder.apply(&job, &run, &track, now).await?.race() {
                    Race::Won(tracked) => {
                        Ok(Disposition::Replace(self.next_look(Some(&job), &tracked, seen + 1, now)))
                    }
                    // Another look was recorded first (its chain goes on), or the attempt was
                    // closed meanwhile (a cancel, the watchdog): its work is stopped.
                    Race::Lost => match self.history.get(job_id, key).await? {
                        Some(fresh) if !self.stop_if_closed(&fresh, asked).await => Ok(Disposition::Retry),
                        _ => Ok(Disposition::Delete),
                    },
                }
            }
        }
    }

    /// The successor of the look `seen` tagged `tag`, sent again, if the look recorded last at
    /// `run`'s open attempt is that very look: it is back because its successor may never have
    /// been sent (a send that failed after its write, a worker that died between the two). The
    /// two successors, if both exist, meet at the next write. `None` for any other stale look.
    fn resent_successor(&self, run: &Run, seen: u32, tag: &str, now: DateTime<Utc>) -> Option<Disposition> {
        let attempt = run.attempts.last().filter(|a| a.finished_at.is_none())?;
        let mine =
            attempt.handle.is_some() && attempt.looks == seen + 1 && attempt.look_tag.as_deref() == Some(tag);
        if !mine {
            return None;
        }
        tracing::info!(looks = attempt.looks, "a recorded look is back: its successor is sent again");
        Some(Disposition::Replace(self.next_look(None, run, attempt.looks, now)))
    }

    /// Sends a look at the work of `run`'s last attempt now, best effort: it stops the work of a
    /// closed attempt, trying again until it can.
    async fn send_look(&self, run: &Run) {
        let Some(attempt) = run.attempts.last().filter(|a| a.handle.is_some()) else { return };
        let look = Dispatch::look(run, attempt.looks, follow::tag(self.entropy.unit()), 0);
        if let Some(Err(e)) = self.queue.send(std::slice::from_ref(&look)).await.into_iter().next() {
            tracing::warn!(error = %e, "no look sent to stop the work again");
        }
    }

    /// Stops the work attempt `asked` of `run` started, if the attempt was closed by someone else
    /// than its work (cancelled, timed out, lost), and records that the work's end is known, so
    /// that the next run of a `forbid` or `replace` job need not wait for its lease, and gives
    /// its group's slot back. `false` only when a stop was asked for and failed.
    async fn stop_if_closed(&self, run: &Run, asked: u32) -> bool {
        let Some(attempt) = run.attempts.iter().find(|a| a.n == asked) else { return true };
        let Some(handle) = attempt.handle.as_deref() else { return true };
        if !matches!(attempt.outcome, Some(Outcome::Cancelled | Outcome::TimedOut | Outcome::Lost)) {
            return true;
        }
        let why = attempt
            .error
            .clone()
            .or_else(|| run.reason.clone())
            .unwrap_or_else(|| "the attempt was closed".into());
        if !self.stop_work(handle, &why).await {
            return false;
        }
        if run.attempt == asked {
            self.note_call_ended(run).await;
        }
        // The work is over: its group's slot is free again (held until now, so that no run of
        // the group started beside work still running).
        if let Ok(Some(job)) = self.catalogue.get(&run.job_id).await {
            self.slots.release(&job, run, asked, self.clock.now()).await;
        }
        true
    }

    /// Sends the span of `started`'s attempt, from its start to the target's `answer` (`None`:
    /// closed under the call).
    async fn record_attempt(&self, job: &Job, started: &Run, answer: Option<&Answer>, now: DateTime<Utc>) {
        let start = started.attempts.last().map_or(now, |a| a.started_at);
        let (outcome, error) = match answer {
            None => ("cancelled", Some("closed under its call".to_string())),
            Some(Answer::Succeeded { .. }) => ("succeeded", None),
            Some(Answer::Accepted { .. }) => ("accepted", None),
            Some(Answer::Started { .. }) => ("started", None),
            Some(Answer::TimedOut) => ("timed_out", Some("no answer within the attempt's limit".to_string())),
            Some(Answer::NotSent { error }) => ("not_sent", Some(error.clone())),
            Some(Answer::Failed { error, .. }) => ("failed", Some(error.clone())),
        };
        let run_id = started.id().to_string();
        let span = sundial_domain::trace::attempt_span(
            &run_id,
            &job.id.to_string(),
            started.attempt,
            (start, now),
            outcome,
            error,
        );
        self.spans.record(vec![span]).await;
    }

    /// Stops the work `handle` names, best effort: whether it is stopped (a failure is logged;
    /// the work ends by itself or by its own timeout).
    async fn stop_work(&self, handle: &str, reason: &str) -> bool {
        match self.caller.stop(handle, reason).await {
            Ok(()) => {
                tracing::info!(%handle, %reason, "the work was stopped");
                true
            }
            Err(e) => {
                tracing::warn!(%handle, %reason, error = %e, "the work could not be stopped");
                false
            }
        }
    }

    /// Writes the start of `run`'s next attempt by `worker`, with the digest of a new callback
    /// token: the run started and the token, or `None` if another worker started this attempt
    /// first (or the run moved on), in which case a slot taken for it is given back.
    async fn start(
        &self,
        job: &Job,
        run: &Run,
        worker: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<(Run, String)>, StoreError> {
        let n = run.attempt + 1;
        let token = sundial_domain::entropy::secret(self.entropy.as_ref());
        let start = Step::Start {
            worker: worker.to_string(),
            callback: sundial_domain::auth::digest(&token),
            lease: self.lease(job),
        };
        let Race::Won(started) = self.recorder.apply(job, run, &start, now).await?.race() else {
            let fresh = self.history.get(&run.job_id, &run.key).await?;
            if fresh.is_none_or(|r| r.attempt < n) {
                // Nobody started this attempt (the run ended or moved on first): the slot taken
                // for it is free again. Once started, its starter gives it back after the call,
                // whatever the run became meanwhile (a cancel does not stop a call).
                self.slots.release(job, run, n, now).await;
            }
            return Ok(None);
        };
        self.meter.observe(&started_metrics(&started, now));
        tracing::info!(worker = %worker, scheduled_at = %started.scheduled_at(), "attempt started");
        Ok(Some((started, token)))
    }

    /// Records how the attempt of `started` ended, frees its group's slot, and says what becomes
    /// of the message. `watched`: the job's policy closes attempts under their calls.
    async fn end(
        &self,
        job: &Job,
        started: &Run,
        ending: Ending,
        watched: bool,
        now: DateTime<Utc>,
    ) -> Result<Disposition, StoreError> {
        let ended = self.finish(job, started, ending, now).await.map(Recorded::race);
        if watched && matches!(ended, Ok(Race::Lost)) {
            // Closed under the call, which has ended now: the next run need not wait for it.
            self.note_call_ended(started).await;
        }
        // The attempt is over, however its end was recorded: its group's slot is free again.
        self.slots.release(job, started, started.attempt, now).await;
        if let Ok(Race::Won(run)) = &ended {
            let last = run.attempts.last();
            tracing::info!(
                state = %run.state,
                // Values, as the API spells them (absent when there is none).
                outcome = last.and_then(|a| a.outcome).map(Outcome::as_str),
                status = last.and_then(|a| a.status_code),
                error = last.and_then(|a| a.error.as_deref()).unwrap_or(""),
                "attempt ended"
            );
            self.meter.observe(&ended_metrics(run, now));
        }
        Self::after_end(ended, now)
    }

    /// The answer of `call`, or `None` if `run`'s attempt is closed under it first (looked at
    /// every [`WATCH_EVERY`]): the call is then dropped, which stops it.
    async fn unless_closed(&self, call: impl Future<Output = Answer>, run: &Run) -> Option<Answer> {
        let watch = async {
            loop {
                self.timer.sleep(WATCH_EVERY).await;
                match self.history.get(&run.job_id, &run.key).await {
                    Ok(Some(fresh)) if fresh.state == RunState::Running && fresh.attempt == run.attempt => {}
                    Ok(_) => return,
                    // Cannot tell: keep calling; the next look may.
                    Err(_) => {}
                }
            }
        };
        match futures::future::select(std::pin::pin!(call), std::pin::pin!(watch)).await {
            futures::future::Either::Left((answer, _)) => Some(answer),
            futures::future::Either::Right(((), _)) => None,
        }
    }

    /// Records that the call of `run`'s current attempt has ended (best effort: without it the
    /// next run of the job waits for the attempt's lease instead).
    async fn note_call_ended(&self, run: &Run) {
        match self.writes.mark_call_ended(run, run.attempt).await {
            Ok(()) | Err(StoreError::Conflict) => {}
            Err(e) => {
                tracing::warn!(error = %e, "the call's end was not recorded; the next run waits for its lease")
            }
        }
    }

    fn after_end(
        ended: Result<Race<Run>, StoreError>,
        now: DateTime<Utc>,
    ) -> Result<Disposition, StoreError> {
        match ended? {
            Race::Won(run) if run.state == RunState::Retrying => {
                Ok(Disposition::Replace(Dispatch::next_attempt(&run, now)))
            }
            // Lost: the attempt was taken from us (cancelled, completed by callback, lease lost).
            Race::Won(_) | Race::Lost => Ok(Disposition::Delete),
        }
    }

    /// Records how the current attempt of `run` (RUNNING) ended and where the run goes next.
    /// The job is read again first: the copy read before the call may be minutes old, and a
    /// child linked since must still be handed this run's end. A failed read falls back on that
    /// copy rather than leave the attempt's outcome unrecorded.
    async fn finish(
        &self,
        job: &Job,
        run: &Run,
        ending: Ending,
        now: DateTime<Utc>,
    ) -> Result<Recorded, StoreError> {
        let fresh = match self.catalogue.get(&job.id).await {
            Ok(fresh) => fresh,
            Err(e) => {
                tracing::warn!(job_id = %job.id, error = %e, "job not read again; its children as read before the call");
                None
            }
        };
        let job = fresh.as_ref().unwrap_or(job);
        self.recorder.apply(job, run, &Step::Finish { ending, jitter: self.entropy.unit() }, now).await
    }
}

/// What a target's answer makes of an attempt.
enum Answered {
    /// 202: the attempt stays open until the target calls back.
    Accepted(u16),
    /// The target started work the attempt follows to its end.
    Started(String),
    Ended(Ending),
}

/// The attempt's end as the target's `answer` (within `call_limit`) tells it.
fn answered(answer: Answer, call_limit: Duration) -> Answered {
    Answered::Ended(match answer {
        Answer::Accepted { status } => return Answered::Accepted(status),
        Answer::Started { handle } => return Answered::Started(handle),
        Answer::Succeeded { status, output } => Ending { status, output, ..Ending::new(Outcome::Succeeded) },
        Answer::TimedOut => {
            Ending::new(Outcome::TimedOut).because(format!("no answer within {} s", call_limit.num_seconds()))
        }
        Answer::NotSent { error } => Ending { unsent: true, ..Ending::new(Outcome::Failed).because(error) },
        Answer::Failed { retryable, status, error } => {
            // A permanent failure ends the run whatever attempts remain.
            Ending { status, permanent: !retryable, ..Ending::new(Outcome::Failed).because(error) }
        }
    })
}

/// The metrics of an attempt that started: the dispatch lag (start − scheduled instant) of a
/// run's first attempt.
pub fn started_metrics(run: &Run, at: DateTime<Utc>) -> Record {
    let record = Record::new("worker", at).count(names::RUNS_STARTED, 1);
    match run.attempts.last() {
        Some(a) if a.n == 1 => {
            let lag = (a.started_at - run.scheduled_at()).num_milliseconds().max(0) as f64;
            record.values(names::DISPATCH_LAG, Unit::Milliseconds, vec![lag])
        }
        _ => record,
    }
}

/// The metrics of an attempt that ended: how (by the run's new state) and how long it took.
pub fn ended_metrics(run: &Run, at: DateTime<Utc>) -> Record {
    let outcome = match run.state {
        RunState::Succeeded => names::RUNS_SUCCEEDED,
        RunState::Retrying => names::RUNS_RETRIED,
        RunState::TimedOut => names::RUNS_TIMED_OUT,
        _ => names::RUNS_FAILED,
    };
    let duration = run
        .attempts
        .last()
        .and_then(|a| Some((a.finished_at? - a.started_at).num_milliseconds().max(0) as f64));
    Record::new("worker", at)
        .count(outcome, 1)
        .values(names::RUN_DURATION, Unit::Milliseconds, duration.into_iter().collect())
        .property("run_id", run.id().to_string())
}

/// What attempt `attempt` of `run` delivers: the run's own payload, or its job's; with the job's
/// placeholders filled when it asks ([`sundial_domain::payload_template`]).
fn delivered_payload(job: &Job, run: &Run, attempt: u32) -> serde_json::Value {
    use sundial_domain::payload_template::{self, Context};
    let payload = run.input.as_ref().unwrap_or(&job.document.payload);
    if !job.document.payload_template {
        return payload.clone();
    }
    let scheduled_at = run.scheduled_at();
    // Looked for only when asked for, and within a year.
    let previous_scheduled_at = payload_template::uses(payload, "previous_scheduled_at")
        .then(|| sundial_domain::validation::stored_schedule(job).ok().flatten())
        .flatten()
        .and_then(|schedule| {
            schedule.latest_before(scheduled_at - chrono::Duration::days(366), scheduled_at)
        });
    let context = Context {
        scheduled_at,
        previous_scheduled_at,
        run_id: run.id().to_string(),
        attempt,
        job_name: job.document.name.clone(),
        job_id: job.id.to_string(),
    };
    payload_template::render(payload, &context)
}
