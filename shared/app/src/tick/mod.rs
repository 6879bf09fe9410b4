//! The scheduler's minute tick: find the jobs that are due and claim them.
//!
//! Each invocation reads the watermark (the last minute fully processed), then processes the
//! minute buckets from a trailing window behind it up to now + the lookahead: all shards of a
//! minute are queried in parallel (bounded), following pagination, and every job found is
//! claimed through [`crate::claim::Claimer`]. Claims are idempotent, so re-querying processed minutes
//! is safe, and it is what catches a job created, resumed or edited into a minute already
//! processed. The watermark only advances past minutes that are entirely in the past and were
//! processed, and never past the minute of a job whose claim failed (a write or a send), so the
//! next tick queries that job again: a transient error delays a job, never strands it. A long gap
//! (downtime) is processed in bounded chunks, and a burst one invocation cannot finish within its
//! time budget is continued by the next. When the shard count grew, the pass also re-reads the
//! 30 minutes behind the watermark, after the live minutes, until one pass reads them all.
//!
//! The tick's claimer sends runs due later just after a whole second
//! ([`Claimer::aligning_sends`]), so that SQS's whole-second delays make them visible within
//! 100 ms of their instants; a minute's jobs are claimed in batches two at a time, so that one
//! batch's wait for its second overlaps the next batch's work. Gaps and the look-back send
//! without waiting: their instants are late already.
//!
//! Instants in minutes no tick had reached when they fell due are the *missed* ones the jobs'
//! `catchup` policies act on. Before claiming minutes from the current one on, the tick records
//! that it has *reached* them (it is alive for them: a burst it cannot finish is a continuation,
//! not a miss). It never records minutes of a gap as reached: those count as processed only
//! through the watermark, once every job in them has been claimed, so a tick that dies halfway
//! through a gap leaves the rest of it missed for the next one.

use crate::claim::{ClaimReport, Claimer};
use crate::jobs::{Jobs, JobsError};
use crate::ports::Ports;
use chrono::{DateTime, Duration, Utc};
use futures::StreamExt;
use futures::stream::FuturesOrdered;
use std::collections::HashSet;
use std::sync::Arc;
use sundial_domain::clock::Clock;
use sundial_domain::due_index::{bucket, minute_of};
use sundial_domain::job::{Job, JobId};
use sundial_domain::ports::store::{Catalogue, DueIndex, StoreError, TickStateStore};
use sundial_domain::tick::minute_walk::{MinuteWalk, Segment};

/// Minutes behind the watermark a pass re-reads when the shard count grew: longer than a
/// deployment takes to replace every function.
const GROWTH_LOOKBACK_MINUTES: i64 = 30;

/// How the tick walks the minutes.
#[derive(Debug, Clone)]
pub struct TickSettings {
    /// Minutes behind the watermark re-queried every time (at least 1: the watermark minute).
    pub trailing_minutes: i64,
    /// Minutes processed per chunk of a long gap.
    pub chunk_minutes: i64,
    /// Bucket queries in flight at once.
    pub query_concurrency: usize,
    /// Jobs claimed per batch, two batches at a time; the time budget is checked as each batch
    /// ends, and the batch in flight then is finished before the pass stops.
    pub batch_jobs: usize,
    /// Stop starting new work after this long (a Lambda invocation's margin).
    pub budget: std::time::Duration,
}

impl Default for TickSettings {
    fn default() -> Self {
        TickSettings {
            trailing_minutes: 2,
            chunk_minutes: 30,
            query_concurrency: 16,
            batch_jobs: 500,
            budget: std::time::Duration::from_secs(45),
        }
    }
}

/// What one invocation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// The first and last minute queried.
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    /// Bucket queries made.
    pub queries: usize,
    /// Due jobs found.
    pub jobs: usize,
    pub claims: ClaimReport,
    /// The watermark after this invocation.
    pub watermark: Option<DateTime<Utc>>,
    /// True when the budget ran out before `to`: the next invocation continues.
    pub unfinished: bool,
}

impl TickReport {
    /// The tick's metrics: runs claimed, dispatched and skipped, jobs due, and how long it took.
    pub fn metrics(&self, at: DateTime<Utc>, took: std::time::Duration) -> crate::emf::Record {
        use crate::emf::{Record, Unit, names};
        Record::new("tick", at)
            .count(names::RUNS_CLAIMED, self.claims.claimed)
            .count(names::RUNS_DISPATCHED, self.claims.dispatched)
            .count(names::JOBS_PER_TICK, self.jobs)
            .count(names::INSTANTS_MISSED, self.claims.missed_dropped)
            .count(names::INSTANTS_UNCLAIMABLE, self.claims.unclaimable)
            .values(names::TICK_DURATION, Unit::Milliseconds, vec![took.as_secs_f64() * 1000.0])
    }
}

/// Why a tick could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum TickError {
    #[error("reading or writing the tick's progress: {0}")]
    State(#[from] StoreError),
}

/// Why a pass stopped claiming before the end of a minute's jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// A claim failed in a gap: the pass ends without recording the gap's minutes reached.
    FailedInGap,
    /// The time budget ran out: the next invocation continues.
    OutOfBudget,
}

/// The time an invocation may take, read on the clock port (so that the simulator's virtual
/// clock runs it out too): spent once that much time has passed since it started.
struct Budget {
    clock: Arc<dyn Clock>,
    started: DateTime<Utc>,
    length: Duration,
}

impl Budget {
    fn spent(&self) -> bool {
        self.clock.now() - self.started >= self.length
    }
}

/// What the parts of one invocation share.
struct Pass {
    budget: Budget,
    /// Partitions per minute read.
    shards: u16,
    /// Minutes up to this one are not missed (see [`Claimer::claim`]).
    reached_before: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    /// The jobs claimed so far: a job advanced into a later minute is claimed once.
    seen: HashSet<String>,
    /// The last minute whose every job was claimed.
    processed_to: Option<DateTime<Utc>>,
    /// A due-index query failed: the look-back is not through.
    query_failed: bool,
}

/// The minute tick.
#[derive(Debug, Clone)]
pub struct Tick {
    catalogue: Arc<dyn Catalogue>,
    due: Arc<dyn DueIndex>,
    state: Arc<dyn TickStateStore>,
    claimer: Claimer,
    /// Resumes the jobs whose pause has run to its end.
    jobs: Jobs,
    clock: Arc<dyn Clock>,
    meter: Arc<crate::meter::Meter>,
    settings: TickSettings,
}

impl Tick {
    pub fn new(ports: &Ports, claimer: Claimer, jobs: Jobs, settings: TickSettings) -> Self {
        let Ports { jobs: store, tick_state: state, clock, meter, .. } = ports.clone();
        Tick { catalogue: store.clone(), due: store, state, claimer, jobs, clock, meter, settings }
    }

    /// Resumes those of `paused` (filed in the due index under the end of their pause) whose
    /// pause has run to its end by `now`; those read ahead of it wait for their minute. A job
    /// changed since read stays as it was changed; one that storage could not resume is reported
    /// failed, holding the watermark before `minute`; one its resume refuses stays paused.
    async fn wake(&self, paused: Vec<Job>, minute: DateTime<Utc>, now: DateTime<Utc>) -> ClaimReport {
        let mut report = ClaimReport::default();
        for job in paused.iter().filter(|j| j.open_pause().and_then(|p| p.until).is_some_and(|u| u <= now)) {
            match self.jobs.wake(job).await {
                Ok(Some(_)) => tracing::info!(job_id = %job.id, "the job's pause ended: resumed by itself"),
                Ok(None) => {}
                // A job its own resume refuses (a document this deployment no longer accepts)
                // stays paused for its owner to mend: it must not hold every other job back.
                Err(e)
                    if !matches!(&e, JobsError::Contended | JobsError::Store(StoreError::Unavailable(_))) =>
                {
                    tracing::error!(job_id = %job.id, error = %e, "a pause that ended could not be resumed; the job stays paused");
                }
                Err(e) => {
                    tracing::warn!(job_id = %job.id, error = %e, "a pause that ended was not resumed; tried again next tick");
                    report.add(ClaimReport {
                        failed: 1,
                        earliest_failure: Some(minute),
                        ..Default::default()
                    });
                }
            }
        }
        report
    }

    /// The ids of the jobs due in one minute: every one of `shards` partitions, in parallel.
    /// Ids only: the jobs themselves are read a batch at a time ([`Tick::claim_in_batches`]), so
    /// that a minute of many large jobs never sits in memory whole.
    async fn due_in(&self, minute: DateTime<Utc>, shards: u16) -> Result<Vec<JobId>, StoreError> {
        let buckets: Vec<String> = (0..shards).map(|shard| bucket(minute, shard)).collect();
        let results: Vec<Result<Vec<JobId>, StoreError>> = futures::stream::iter(buckets)
            .map(|b| async move { self.due.due_ids(&b).await })
            .buffer_unordered(self.settings.query_concurrency.max(1))
            .collect()
            .await;
        let mut jobs = Vec::new();
        for r in results {
            jobs.extend(r?);
        }
        Ok(jobs)
    }

    /// Reads and claims the jobs `due` names for `minute` in batches of
    /// [`TickSettings::batch_jobs`], two at a time, so that one batch's aligned send waits (up
    /// to a second) while the next batch is read and prepared; `aligned` false sends without
    /// waiting. Each batch is read consistently as it comes: a job paused or finished since the
    /// index named it is not due. A batch that cannot be read fails as a whole, holding the
    /// watermark before `minute`. After each batch, `stop` reads its report; once it answers,
    /// the batch already started is finished (one dropped halfway would leave its runs unsent
    /// until the next pass) and no other starts.
    #[allow(clippy::too_many_arguments)] // one call per pass kind; a struct would only rename them
    async fn claim_in_batches(
        &self,
        due: &[JobId],
        minute: DateTime<Utc>,
        aligned: bool,
        reached_before: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        report: &mut ClaimReport,
        mut stop: impl FnMut(&ClaimReport) -> Option<Stop>,
    ) -> Option<Stop> {
        let claimer = if aligned { self.claimer.clone() } else { self.claimer.unaligned() };
        let mut batches = due.chunks(self.settings.batch_jobs.max(1));
        let claim = |batch: &[JobId]| {
            let claimer = claimer.clone();
            let batch = batch.to_vec();
            async move {
                match self.catalogue.get_many(&batch).await {
                    Ok(jobs) => {
                        let (paused, active): (Vec<Job>, Vec<Job>) =
                            in_order_due(jobs, &batch).into_iter().partition(|j| j.document.paused);
                        let mut report = self.wake(paused, minute, now).await;
                        report.add(claimer.claim(active, reached_before, now).await);
                        report
                    }
                    Err(e) => {
                        tracing::warn!(minute = %minute, error = %e, "due jobs not read; the minute is read again next tick");
                        ClaimReport {
                            failed: batch.len(),
                            earliest_failure: Some(minute),
                            ..ClaimReport::default()
                        }
                    }
                }
            }
        };
        let mut in_flight: FuturesOrdered<_> = batches.by_ref().take(2).map(claim).collect();
        let mut stopped = None;
        while let Some(claims) = in_flight.next().await {
            stopped = stopped.or_else(|| stop(&claims));
            report.add(claims);
            if stopped.is_none() {
                in_flight.extend(batches.next().map(claim));
            }
        }
        stopped
    }

    /// Runs one invocation: the segments of its [`MinuteWalk`], then the look-back a grown
    /// shard count asks for.
    pub async fn run(&self) -> Result<TickReport, TickError> {
        let started = std::time::Instant::now();
        let progress = self.state.get().await?;
        // Every partition any pass has read: jobs written while the count was higher are
        // still found after it shrinks. A count that grew (or was never recorded) is recorded
        // before its partitions are read, and passes look further back until one gets through
        // without an error, for jobs the API wrote into the new partitions while a tick with
        // the old count still ran.
        let own = self.due.shards();
        if progress.shards.is_none_or(|recorded| recorded < own) {
            self.state.note_shards(own).await?;
        }
        let grew = progress.looked_back.is_none_or(|done| done < own);
        let now = self.clock.now();
        let budget = Duration::from_std(self.settings.budget).unwrap_or(Duration::MAX);
        let mut pass = Pass {
            budget: Budget { clock: self.clock.clone(), started: now, length: budget },
            shards: own.max(progress.shards.unwrap_or(0)),
            // Minutes up to this one were reached by a live tick or fully processed: nothing
            // in them is missed any more.
            reached_before: progress.reached.max(progress.watermark),
            now,
            seen: HashSet::new(),
            processed_to: None,
            query_failed: false,
        };
        let (trailing, chunk) = (self.settings.trailing_minutes, self.settings.chunk_minutes);
        let walk = MinuteWalk::new(progress.watermark, pass.reached_before, minute_of(now), trailing, chunk);
        let mut report = TickReport { watermark: progress.watermark, ..Default::default() };
        let mut minute = walk.first;
        while let Some(segment) = walk.segment(minute, minute_of(pass.now + self.claimer.settings.lookahead))
        {
            if !self.claim_segment(&segment, &mut pass, &mut report).await? {
                break;
            }
            self.advance_watermark(pass.processed_to, pass.now, &mut report).await?;
            pass.now = self.clock.now();
            minute = segment.last + Duration::minutes(1);
        }
        self.advance_watermark(pass.processed_to, pass.now, &mut report).await?;
        if grew && !report.unfinished {
            let looked = self.look_back(walk.first, &mut pass, &mut report).await;
            let through = looked && !pass.query_failed && !report.unfinished && report.claims.failed == 0;
            if through {
                self.state.set_looked_back(own).await?;
            }
        }
        self.meter.observe(&report.metrics(self.clock.now(), started.elapsed()));
        Ok(report)
    }

    /// Claims the minutes of `segment` one by one, after recording it reached when it is live.
    /// Returns false when the pass must stop: a due-index query failed, a claim failed in the
    /// gap (recording the live minutes reached would make the failed job's missed instants look
    /// like a continuation to the next tick), or the budget ran out (the next invocation
    /// continues).
    async fn claim_segment(
        &self,
        segment: &Segment,
        pass: &mut Pass,
        report: &mut TickReport,
    ) -> Result<bool, StoreError> {
        if let Some(reached) = segment.reached() {
            self.state.set_reached(reached).await?;
        }
        report.from.get_or_insert(segment.first);
        for minute in segment.minutes() {
            report.queries += usize::from(pass.shards);
            let due = match self.due_in(minute, pass.shards).await {
                Ok(jobs) => unseen(jobs, &mut pass.seen),
                Err(e) => {
                    tracing::warn!(minute = %minute, error = %e, "due-index query failed; retried next tick");
                    pass.query_failed = true;
                    return Ok(false);
                }
            };
            report.jobs += due.len();
            report.to = Some(minute);
            // Failed jobs do not stop the pass (they hold the watermark back instead), except in
            // the gap; the budget leaves the rest of this minute to the next invocation.
            let (in_gap, budget) = (segment.in_gap, &pass.budget);
            let stop = |claims: &ClaimReport| {
                if in_gap && claims.failed > 0 {
                    Some(Stop::FailedInGap)
                } else if budget.spent() {
                    Some(Stop::OutOfBudget)
                } else {
                    None
                }
            };
            let (aligned, reached_before) = (segment.aligned(), pass.reached_before);
            let claims = &mut report.claims;
            match self.claim_in_batches(&due, minute, aligned, reached_before, pass.now, claims, stop).await {
                Some(Stop::FailedInGap) => return Ok(false),
                Some(Stop::OutOfBudget) => {
                    report.unfinished = true;
                    return Ok(false);
                }
                None => {}
            }
            pass.processed_to = Some(minute);
            // The budget is checked after work only: empty minutes (the trailing window among
            // them) cost a few queries, and stopping on them could starve progress.
            if !due.is_empty() && pass.budget.spent() {
                report.unfinished = true;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Re-reads the [`GROWTH_LOOKBACK_MINUTES`] before `before` (the first trailing minute),
    /// after the live minutes: a throttled re-read of an old minute must not keep a pass from
    /// the current ones. A failed query does not stop the look-back; it returns false, and the
    /// next pass looks back again (a minute stays in the window for as many passes as it has
    /// minutes). Returns true when every query succeeded and nothing was left for the budget.
    async fn look_back(&self, before: DateTime<Utc>, pass: &mut Pass, report: &mut TickReport) -> bool {
        let mut clean = true;
        let mut minute = before - Duration::minutes(GROWTH_LOOKBACK_MINUTES);
        while minute < before {
            if pass.budget.spent() {
                report.unfinished = true;
                return false;
            }
            report.queries += usize::from(pass.shards);
            match self.due_in(minute, pass.shards).await {
                Ok(due) => {
                    let due = unseen(due, &mut pass.seen);
                    report.jobs += due.len();
                    // Old minutes, as in a gap: sent without waiting for a whole second.
                    self.claim_in_batches(
                        &due,
                        minute,
                        false,
                        pass.reached_before,
                        pass.now,
                        &mut report.claims,
                        |_| None,
                    )
                    .await;
                }
                Err(e) => {
                    tracing::warn!(minute = %minute, error = %e, "look-back query failed; looked at again next tick");
                    clean = false;
                }
            }
            minute += Duration::minutes(1);
        }
        clean
    }

    /// Moves the watermark to the last processed minute that is entirely in the past and
    /// before the minute of every job whose claim failed.
    async fn advance_watermark(
        &self,
        processed_to: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        report: &mut TickReport,
    ) -> Result<(), StoreError> {
        let Some(processed) = processed_to else { return Ok(()) };
        let mut candidate = processed.min(minute_of(now) - Duration::minutes(1));
        if let Some(failed) = report.claims.earliest_failure {
            candidate = candidate.min(minute_of(failed) - Duration::minutes(1));
        }
        if report.watermark.is_none_or(|w| candidate > w) {
            self.state.set_watermark(candidate).await?;
            report.watermark = Some(candidate);
        }
        Ok(())
    }
}

/// The jobs of `due` this pass has not claimed yet: a job it advanced may show up again in a
/// later bucket, and is claimed once.
fn unseen(due: Vec<JobId>, seen: &mut HashSet<String>) -> Vec<JobId> {
    due.into_iter().filter(|id| seen.insert(id.to_string())).collect()
}

/// The `read` jobs still due (the index is eventually consistent: a job paused or without a
/// next run since it was read is not), in the order of `ids` (the index's due order).
fn in_order_due(read: Vec<Job>, ids: &[JobId]) -> Vec<Job> {
    let mut by_id: std::collections::HashMap<JobId, Job> =
        read.into_iter().filter(|job| job.index_at().is_some()).map(|job| (job.id.clone(), job)).collect();
    ids.iter().filter_map(|id| by_id.remove(id)).collect()
}
