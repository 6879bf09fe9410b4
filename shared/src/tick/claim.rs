//! Claiming: turning a due job's instants into runs, exactly once each, and dispatching them.
//!
//! For each job: plan the instants, then for each instant put the run (`<instant>#s`,
//! conditional on absence: the fence), send the messages of all jobs in batches, and only then
//! advance each job whose messages all went out (conditional on the version and `next_run_at`
//! read). Because the advance follows the send, a job that has advanced past an instant has
//! dispatched it; a crash anywhere leaves the job where it was, and the next claimer finds the
//! run already there:
//! - if the run is still QUEUED and older than the grace period, nobody is sending it any more:
//!   its message is sent again (a worker ignores a second message for a run already started)
//!   and the job advanced;
//! - if it is younger, another claimer may be sending it right now: the job is left alone.

use super::plan::plan;
use crate::events::{Announcer, RunEvent};
use crate::job::EventKind;
use crate::job::{ConcurrencyPolicy, Job};
use crate::jobs::Jobs;
use crate::queue::{Dispatch, MAX_DELAY_S, RunQueue, delay_until};
use crate::run::{Run, RunKey, RunMessage, RunState};
use crate::schedule::jitter_offset;
use crate::store::{Inserted, JobStore, RunStore, StoreError};
use chrono::{DateTime, Duration, Utc};
use futures::StreamExt;
use std::sync::Arc;

/// How claiming behaves; defaults from the design.
#[derive(Debug, Clone)]
pub struct ClaimSettings {
    /// Instants due within this of now are claimed by every tick (at least 60 s).
    pub lookahead: Duration,
    /// Jobs with `concurrency: allow` have their instants claimed this far ahead in one pass, so
    /// a frequent job is advanced once for several runs (at most SQS's 15-minute delay).
    pub claim_ahead: Duration,
    /// A QUEUED run younger than this may still be in another claimer's hands.
    pub grace: Duration,
    /// The most missed instants `catchup: all` runs.
    pub catchup_max: usize,
    /// How long run rows are kept (DynamoDB TTL).
    pub retention: Duration,
    /// Jobs prepared concurrently.
    pub concurrency: usize,
}

impl Default for ClaimSettings {
    fn default() -> Self {
        ClaimSettings {
            lookahead: Duration::seconds(60),
            claim_ahead: Duration::seconds(300),
            grace: Duration::seconds(120),
            catchup_max: 100,
            retention: Duration::days(30),
            concurrency: 32,
        }
    }
}

/// What a claim pass did, summed over its jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimReport {
    /// Runs created QUEUED.
    pub claimed: usize,
    /// Messages sent (new runs and healed ones).
    pub dispatched: usize,
    /// Runs found QUEUED past the grace period and sent again.
    pub resent: usize,
    /// Runs recorded SKIPPED under `forbid`.
    pub skipped: usize,
    /// Active runs cancelled under `replace`.
    pub replaced: usize,
    /// Missed instants the catch-up policy dropped.
    pub missed_dropped: usize,
    /// Instants whose run another claimer had already created.
    pub duplicates: usize,
    /// Jobs left to a claimer that may still be at work on them.
    pub deferred: usize,
    pub send_failures: usize,
    pub advanced: usize,
    /// Jobs changed (paused, edited, deleted) or advanced by someone else since read.
    pub advance_conflicts: usize,
    /// Jobs that failed on a storage error; they stay due and are retried.
    pub failed: usize,
    /// The earliest `next_run_at` among failed jobs: the tick's watermark stays before it.
    pub earliest_failure: Option<DateTime<Utc>>,
}

impl ClaimReport {
    /// Adds another report's counts to this one.
    pub fn add(&mut self, other: ClaimReport) {
        self.claimed += other.claimed;
        self.dispatched += other.dispatched;
        self.resent += other.resent;
        self.skipped += other.skipped;
        self.replaced += other.replaced;
        self.missed_dropped += other.missed_dropped;
        self.duplicates += other.duplicates;
        self.deferred += other.deferred;
        self.send_failures += other.send_failures;
        self.advanced += other.advanced;
        self.advance_conflicts += other.advance_conflicts;
        self.failed += other.failed;
        self.earliest_failure = match (self.earliest_failure, other.earliest_failure) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    fn failure(job: &Job) -> ClaimReport {
        ClaimReport { failed: 1, earliest_failure: job.next_run_at, ..Default::default() }
    }
}

/// One job after its runs were written, before its messages are sent.
#[derive(Debug)]
struct Prepared {
    job: Job,
    messages: Vec<Dispatch>,
    next_run_at: Option<DateTime<Utc>>,
    /// Another claimer may be sending this job's runs: do not advance it.
    deferred: bool,
    report: ClaimReport,
}

/// The claim path shared by the tick and the API.
#[derive(Debug, Clone)]
pub struct Claimer {
    jobs: Arc<dyn JobStore>,
    runs: Arc<dyn RunStore>,
    queue: Arc<dyn RunQueue>,
    /// Announces the `skipped` event of a run recorded SKIPPED under `forbid`.
    announcer: Announcer,
    pub settings: ClaimSettings,
}

/// The message that asks for a run's first attempt.
pub fn first_attempt(run: &Run) -> RunMessage {
    RunMessage { job_id: run.job_id.to_string(), run_key: run.key.encode(), attempt: 1 }
}

/// How far back a job's runs may still be active: all attempts at their longest.
pub fn active_window(job: &Job) -> Duration {
    let retry = &job.document.retry;
    let per_attempt = i64::from(job.document.timeout_s) + i64::from(retry.max_backoff_s);
    Duration::seconds(i64::from(retry.max_attempts) * per_attempt) + Duration::hours(1)
}

impl Claimer {
    pub fn new(
        jobs: Arc<dyn JobStore>,
        runs: Arc<dyn RunStore>,
        queue: Arc<dyn RunQueue>,
        announcer: Announcer,
        settings: ClaimSettings,
    ) -> Self {
        Claimer { jobs, runs, queue, announcer, settings }
    }

    pub fn runs(&self) -> &Arc<dyn RunStore> {
        &self.runs
    }

    pub fn queue(&self) -> &Arc<dyn RunQueue> {
        &self.queue
    }

    /// A new run of `job` for `key`, due at `due_at`.
    pub fn new_run(
        &self,
        job: &Job,
        key: RunKey,
        due_at: DateTime<Utc>,
        state: RunState,
        now: DateTime<Utc>,
    ) -> Run {
        Run {
            job_id: job.id.clone(),
            owner: job.owner.clone(),
            key,
            state,
            due_at,
            attempt: 0,
            attempts: Vec::new(),
            job_version: job.version,
            created_at: now,
            updated_at: now,
            reason: None,
            lease_until: None,
            retry_at: None,
            dispatched_at: None,
            expires_at: now + self.settings.retention,
            events: Vec::new(),
        }
    }

    /// Claims and dispatches the due instants of `jobs`. `reached` is the last minute a previous
    /// tick had reached (what counts as missed); `now` the tick's time.
    pub async fn claim(
        &self,
        jobs: Vec<Job>,
        reached: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> ClaimReport {
        let prepared: Vec<Result<Prepared, (Job, StoreError)>> = futures::stream::iter(jobs)
            .map(|job| async move {
                match self.prepare(&job, reached, now).await {
                    Ok(p) => Ok(p),
                    Err(e) => Err((job, e)),
                }
            })
            .buffer_unordered(self.settings.concurrency.max(1))
            .collect()
            .await;

        let mut report = ClaimReport::default();
        let mut ready = Vec::new();
        for p in prepared {
            match p {
                Ok(p) => ready.push(p),
                Err((job, e)) => {
                    tracing::warn!(job_id = %job.id, error = %e, "claim failed; the job stays due");
                    report.add(ClaimReport::failure(&job));
                }
            }
        }

        let messages: Vec<Dispatch> = ready.iter().flat_map(|p| p.messages.iter().cloned()).collect();
        let mut results = self.queue.send(&messages).await.into_iter();
        let mut to_advance = Vec::new();
        for mut p in ready {
            let sent: Vec<_> = results.by_ref().take(p.messages.len()).collect();
            let failures = sent.iter().filter(|r| r.is_err()).count();
            p.report.dispatched += sent.len() - failures;
            p.report.send_failures += failures;
            if let Some(Err(e)) = sent.iter().find(|r| r.is_err()) {
                tracing::warn!(job_id = %p.job.id, error = %e, "send failed; re-sent after the grace period");
            }
            if p.deferred || failures > 0 {
                report.add(p.report);
            } else {
                to_advance.push(p);
            }
        }

        let advanced: Vec<ClaimReport> = futures::stream::iter(to_advance)
            .map(|mut p| async move {
                if p.next_run_at == p.job.next_run_at {
                    return p.report;
                }
                match self.jobs.advance(&p.job, p.next_run_at).await {
                    Ok(()) => p.report.advanced += 1,
                    Err(StoreError::Conflict) => p.report.advance_conflicts += 1,
                    Err(e) => {
                        tracing::warn!(job_id = %p.job.id, error = %e, "advance failed; healed by the next tick");
                        p.report.add(ClaimReport::failure(&p.job));
                    }
                }
                p.report
            })
            .buffer_unordered(self.settings.concurrency.max(1))
            .collect()
            .await;
        for r in advanced {
            report.add(r);
        }
        report
    }

    async fn prepare(
        &self,
        job: &Job,
        reached: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<Prepared, StoreError> {
        let mut prepared = Prepared {
            job: job.clone(),
            messages: Vec::new(),
            next_run_at: job.next_run_at,
            deferred: false,
            report: ClaimReport::default(),
        };
        let Some(first) = job.next_run_at else { return Ok(prepared) };
        let schedule = match Jobs::schedule_of(job) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(job_id = %job.id, error = %e, "stored schedule does not parse; job left as is");
                return Ok(prepared);
            }
        };
        let jitter_s = job.document.schedule.as_ref().and_then(|s| s.jitter_s).unwrap_or(0);
        let ahead = if job.document.concurrency == ConcurrencyPolicy::Allow {
            self.settings.claim_ahead.max(self.settings.lookahead)
        } else {
            // Whether an earlier run is active is only known close to the instant.
            self.settings.lookahead
        };
        let max_ahead = Duration::seconds(i64::from(MAX_DELAY_S.saturating_sub(jitter_s)));
        let horizon = now + ahead.min(max_ahead);
        let plan = plan(
            first,
            schedule.as_ref(),
            job.document.catchup,
            now,
            horizon,
            reached,
            self.settings.catchup_max,
        );
        prepared.report.missed_dropped = plan.skipped_missed;
        prepared.next_run_at = plan.next_run_at;

        let mut active: Option<Vec<Run>> = None;
        for instant in plan.claim {
            let due = instant + jitter_offset(job.id.as_str(), instant, jitter_s);
            let mut state = RunState::Queued;
            let mut reason = None;
            if job.document.concurrency != ConcurrencyPolicy::Allow {
                if active.is_none() {
                    active = Some(self.runs.active(&job.id, now - active_window(job)).await?);
                }
                let others: Vec<&Run> =
                    active.iter().flatten().filter(|r| r.key.instant != instant).collect();
                if let Some(first_active) = others.first() {
                    match job.document.concurrency {
                        ConcurrencyPolicy::Forbid => {
                            state = RunState::Skipped;
                            reason = Some(format!("concurrency forbid: run {} is active", first_active.id()));
                        }
                        _ => {
                            let replacing =
                                crate::run::RunId::new(job.id.clone(), RunKey::scheduled(instant));
                            for run in &others {
                                let why = format!("concurrency replace: replaced by run {replacing}");
                                match self
                                    .runs
                                    .finish_without_attempt(run, RunState::Cancelled, &why, now)
                                    .await
                                {
                                    Ok(()) => prepared.report.replaced += 1,
                                    // It ended (or moved on) by itself meanwhile.
                                    Err(StoreError::Conflict) => {}
                                    Err(e) => return Err(e),
                                }
                            }
                            active = Some(Vec::new());
                        }
                    }
                }
            }
            let mut run = self.new_run(job, RunKey::scheduled(instant), due, state, now);
            run.reason = reason;
            if state == RunState::Skipped {
                // Whoever writes the SKIPPED run records its event in that write (invariant 5).
                run.events.push(RunEvent::new(EventKind::Skipped, 0, now));
            }
            match self.runs.insert(&run).await? {
                Inserted::Created if state == RunState::Queued => {
                    prepared.report.claimed += 1;
                    prepared
                        .messages
                        .push(Dispatch { message: first_attempt(&run), delay_s: delay_until(due, now) });
                }
                Inserted::Created => {
                    prepared.report.skipped += 1;
                    self.announcer.announce(Some(job), &run, &run.events).await;
                }
                Inserted::Exists(existing) => {
                    prepared.report.duplicates += 1;
                    let unstarted = existing.state == RunState::Queued && existing.attempt == 0;
                    if unstarted && existing.created_at + self.settings.grace <= now {
                        prepared.report.resent += 1;
                        prepared.messages.push(Dispatch {
                            message: first_attempt(&existing),
                            delay_s: delay_until(existing.due_at, now),
                        });
                    } else if unstarted {
                        prepared.deferred = true;
                        prepared.report.deferred = 1;
                        break;
                    }
                }
            }
        }
        Ok(prepared)
    }
}
