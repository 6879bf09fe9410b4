//! Claiming: turning a due job's instants into runs, exactly once each, and dispatching them.
//!
//! For each job: plan the instants, then for each instant put the run (`<instant>#s`,
//! conditional on absence: the fence), send the messages of all jobs in batches, and only then
//! advance each job whose messages all went out (conditional on the version and `next_run_at`
//! read). A job whose instant already has a run advances too, and the run is sent again if it
//! has not started: the claimer that wrote it may have died before sending it. (The watchdog also
//! re-sends every attempt that has not started in time.) A second message is harmless: an
//! attempt starts only under its fence. A job whose send or write failed is not advanced, and the report
//! names its due minute so that the tick comes back to it.
//!
//! Missed instants the job's catch-up policy drops are recorded on the job (a [`Gap`]) by the
//! advance that passes them, so that a gap is recorded exactly when the job moved past it, and
//! told (`missed`, once per gap) just before that advance; a gap whose telling failed is told
//! again before the job's next advance.
//!
//! Concurrency policies are not decided here: whether an earlier run is still active is known
//! only when a run is about to start, and the worker decides it then (invariant: policies decided under the start fence).

use crate::ports::Ports;
use crate::timer::Timer;
use chrono::{DateTime, Duration, Utc};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use sundial_domain::clock::Clock;
use sundial_domain::events::{self, JobNotice};
use sundial_domain::health::{Trouble, TroubleMark};
use sundial_domain::job::{EventKind, Gap, GapCause, Job};
use sundial_domain::ports::bus::EventBus;
use sundial_domain::ports::queue::{QueueError, RunQueue};
use sundial_domain::ports::store::{Advance, DueIndex, Inserted, RunHistory, RunWrites, StoreError};
use sundial_domain::run::transition;
use sundial_domain::run::{Run, RunKey};
use sundial_domain::run_limit::{RunCount, Tally, WRITTEN_AFTER_WITHIN};
use sundial_domain::run_queue::{Dispatch, MAX_DELAY_S, aligned_send};
use sundial_domain::schedule::Schedule;
use sundial_domain::tick::plan::{Plan, plan};
use tracing::Instrument;

/// The most runs one pass may find already claimed among the instants it drops: a claim ahead
/// spans at most 15 minutes (SQS's longest delay), 900 instants of a job every second.
const MAX_CLAIMED_AHEAD: u32 = 1000;

/// The runs one page of a count's read holds ([`Claimer::tally`]).
const COUNT_PAGE: u32 = 1000;

/// The most pages one pass reads to count runs: a job never counted reads its whole kept history
/// once, and an edit about twenty minutes of runs.
const MAX_COUNT_PAGES: usize = 20;

/// How claiming behaves; defaults from the design.
#[derive(Debug, Clone)]
pub struct ClaimSettings {
    /// Instants due within this of now are claimed by every tick (at least 60 s).
    pub lookahead: Duration,
    /// Instants are claimed this far ahead in one pass, so a frequent job is advanced once for
    /// several runs (at most SQS's 15-minute delay).
    pub claim_ahead: Duration,
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
    /// Runs another claimer had written and not seen started, sent again.
    pub resent: usize,
    /// Missed instants the catch-up policy dropped.
    pub missed_dropped: usize,
    /// Instants whose run another claimer had already created.
    pub duplicates: usize,
    pub send_failures: usize,
    pub advanced: usize,
    /// Jobs changed (paused, edited, deleted) or advanced by someone else since read.
    pub advance_conflicts: usize,
    /// Jobs not advanced because a write or a send failed; they stay due and are retried.
    pub failed: usize,
    /// The earliest due time among jobs to read again (failed, or changed since read): the
    /// tick's watermark stays before its minute.
    pub earliest_failure: Option<DateTime<Utc>>,
    /// Instants whose run item is there but does not decode (a defect, a manual edit, or a
    /// newer version's item): logged as errors and passed, so that the job goes on and never
    /// holds the watermark back for ever.
    pub unclaimable: usize,
}

impl ClaimReport {
    /// Adds another report's counts to this one.
    pub fn add(&mut self, other: ClaimReport) {
        self.claimed += other.claimed;
        self.dispatched += other.dispatched;
        self.resent += other.resent;
        self.missed_dropped += other.missed_dropped;
        self.duplicates += other.duplicates;
        self.send_failures += other.send_failures;
        self.advanced += other.advanced;
        self.advance_conflicts += other.advance_conflicts;
        self.failed += other.failed;
        self.unclaimable += other.unclaimable;
        self.earliest_failure = match (self.earliest_failure, other.earliest_failure) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    fn failure(job: &Job) -> ClaimReport {
        ClaimReport { failed: 1, earliest_failure: job.claimable_at(), ..Default::default() }
    }
}

/// One job after its runs were written, before their messages are sent.
#[derive(Debug)]
struct Prepared {
    job: Job,
    /// The runs whose first-attempt messages are to be sent.
    messages: Vec<Run>,
    next_run_at: Option<DateTime<Utc>>,
    /// The job's gaps to write with its advance, when this pass recorded one.
    gaps: Option<Vec<Gap>>,
    /// The job's count of scheduled runs, when this pass changed it.
    counted: Option<RunCount>,
    report: ClaimReport,
}

/// The claim path shared by the tick and the API.
#[derive(Debug, Clone)]
pub struct Claimer {
    due: Arc<dyn DueIndex>,
    writes: Arc<dyn RunWrites>,
    /// Read when instants are dropped: those an earlier pass claimed are not recorded dropped.
    history: Arc<dyn RunHistory>,
    queue: Arc<dyn RunQueue>,
    /// Where `missed` is told.
    bus: Arc<dyn EventBus>,
    /// Where links in notices point (the dashboard), if anywhere.
    public_url: Option<String>,
    /// Read just before each send: a delay counts from the send, not from the pass's start.
    clock: Arc<dyn Clock>,
    /// Waits for the instant an aligned send is made at.
    timer: Arc<dyn Timer>,
    /// Where each claimed run's first span goes.
    spans: Arc<dyn sundial_domain::ports::spans::Spans>,
    /// Whether runs due later are sent just after a whole second ([`aligned_send`]).
    aligned: bool,
    pub settings: ClaimSettings,
}

impl Claimer {
    pub fn new(ports: &Ports, settings: ClaimSettings, public_url: Option<String>) -> Self {
        let Ports { jobs, runs, queue, bus, clock, timer, spans, .. } = ports.clone();
        let (writes, history) = (runs.clone(), runs);
        Claimer {
            due: jobs,
            writes,
            history,
            queue,
            bus,
            public_url,
            clock,
            timer,
            spans,
            aligned: false,
            settings,
        }
    }

    /// The same claimer, sending the messages of runs due later just after a whole second, so
    /// that each is visible within [`ALIGNED_WITHIN_MS`] of its instant instead of up to a second
    /// after it. A send may then wait up to a second: the tick's passes take that; a request of
    /// the API, which answers a person and sends runs due now, does not.
    ///
    /// [`ALIGNED_WITHIN_MS`]: sundial_domain::run_queue::ALIGNED_WITHIN_MS
    pub fn aligning_sends(mut self) -> Self {
        self.aligned = true;
        self
    }

    /// The same claimer, sending every message as soon as it can ([`Claimer::new`]'s way).
    pub fn unaligned(&self) -> Self {
        Claimer { aligned: false, ..self.clone() }
    }

    /// Sends the spans that start the traces of `runs` (their claims), in one batch.
    pub async fn trace(&self, runs: &[Run]) {
        let spans: Vec<_> = runs
            .iter()
            .filter(|run| run.attempt == 0)
            .map(|run| {
                sundial_domain::trace::claim_span(
                    &run.id().to_string(),
                    &run.job_id.to_string(),
                    run.created_at,
                )
            })
            .collect();
        if !spans.is_empty() {
            self.spans.record(spans).await;
        }
    }

    /// Sends the first-attempt messages of `runs`, each delayed until its run is due as of the
    /// moment of its sending; the result at index i is that of `runs[i]`. An aligning claimer
    /// sends each run at its [`aligned_send`] instant, the groups side by side.
    pub async fn send(&self, runs: &[Run]) -> Vec<Result<(), QueueError>> {
        let now = self.clock.now();
        let mut groups: BTreeMap<DateTime<Utc>, Vec<usize>> = BTreeMap::new();
        for (i, run) in runs.iter().enumerate() {
            let due = run.waits_until().unwrap_or(now);
            let at = if self.aligned { aligned_send(due, now) } else { now };
            groups.entry(at).or_default().push(i);
        }
        let sends = groups.into_iter().map(|(at, indices)| async move {
            if let Ok(wait) = (at - now).to_std()
                && !wait.is_zero()
            {
                self.timer.sleep(wait).await;
            }
            let now = self.clock.now();
            let batch: Vec<Dispatch> =
                indices.iter().map(|&i| Dispatch::next_attempt(&runs[i], now)).collect();
            indices.into_iter().zip(self.queue.send(&batch).await).collect::<Vec<_>>()
        });
        let mut results: Vec<Option<Result<(), QueueError>>> = runs.iter().map(|_| None).collect();
        for (i, result) in futures::future::join_all(sends).await.into_iter().flatten() {
            results[i] = Some(result);
        }
        // A queue answers every message it was given; one it did not is not sent.
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(QueueError::Unavailable("the queue gave no answer".into()))))
            .collect()
    }

    /// A new run of `job` for `key`, QUEUED, due at `due_at`, kept for the retention period.
    pub fn new_run(&self, job: &Job, key: RunKey, due_at: DateTime<Utc>, now: DateTime<Utc>) -> Run {
        transition::claim(job, key, due_at, now, self.settings.retention)
    }

    /// Claims and dispatches the due instants of `jobs`. `reached` is the last minute a previous
    /// tick had reached (what counts as missed); `now` the tick's time.
    pub async fn claim(
        &self,
        jobs: Vec<Job>,
        reached: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> ClaimReport {
        let mut report = ClaimReport::default();
        let ready = self.prepare_all(jobs, reached, now, &mut report).await;
        let sent = self.send_all(ready, &mut report).await;
        // Each run sent starts its trace: one batch of claim spans for the pass.
        let claimed: Vec<Run> = sent.iter().flat_map(|p| p.messages.iter().cloned()).collect();
        self.trace(&claimed).await;
        let advanced: Vec<ClaimReport> = futures::stream::iter(sent)
            .map(|p| self.advance(p))
            .buffer_unordered(self.settings.concurrency.max(1))
            .collect()
            .await;
        for r in advanced {
            report.add(r);
        }
        report
    }

    /// Each job's runs written and its next instant decided, several jobs at a time; a job whose
    /// writes failed is counted in `report` and stays due.
    async fn prepare_all(
        &self,
        jobs: Vec<Job>,
        reached: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
        report: &mut ClaimReport,
    ) -> Vec<Prepared> {
        let prepared: Vec<Result<Prepared, (Job, StoreError)>> = futures::stream::iter(jobs)
            .map(|job| async move {
                let span = tracing::info_span!("claim", job_id = %job.id);
                self.prepare(&job, reached, now).instrument(span).await.map_err(|e| (job, e))
            })
            .buffer_unordered(self.settings.concurrency.max(1))
            .collect()
            .await;
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
        ready
    }

    /// Sends the messages of every prepared job in one go; the jobs whose messages all went, to
    /// be advanced. A job with a failed send is counted in `report` and stays due: the next tick
    /// finds its runs and sends them.
    async fn send_all(&self, ready: Vec<Prepared>, report: &mut ClaimReport) -> Vec<Prepared> {
        let runs: Vec<Run> = ready.iter().flat_map(|p| p.messages.iter().cloned()).collect();
        let mut results = self.send(&runs).await.into_iter();
        let mut sent_all = Vec::new();
        for mut p in ready {
            let sent: Vec<_> = results.by_ref().take(p.messages.len()).collect();
            let failures = sent.iter().filter(|r| r.is_err()).count();
            p.report.dispatched += sent.len() - failures;
            p.report.send_failures += failures;
            if let Some(Err(e)) = sent.iter().find(|r| r.is_err()) {
                tracing::warn!(job_id = %p.job.id, error = %e, "send failed; the job stays due and is claimed again");
            }
            if failures > 0 {
                p.report.add(ClaimReport::failure(&p.job));
                report.add(p.report);
            } else {
                sent_all.push(p);
            }
        }
        sent_all
    }

    /// Moves a job whose runs all went to its next instant; its report.
    async fn advance(&self, mut p: Prepared) -> ClaimReport {
        if p.next_run_at == p.job.next_run_at {
            return p.report;
        }
        let span = tracing::info_span!("advance", job_id = %p.job.id);
        let gaps = self.tell_gaps(&p.job, p.gaps.take()).instrument(span.clone()).await;
        let to = Advance { next: p.next_run_at, gaps, counted: p.counted };
        match self.due.advance(&p.job, &to).instrument(span).await {
            Ok(()) => p.report.advanced += 1,
            Err(StoreError::Conflict) => {
                // Changed since read (edited, paused, advanced by another claimer): the next pass
                // reads it again as it stands. Until then the watermark stays before the minute it
                // was read in, which an edit of anything but the schedule keeps as its
                // `next_run_at`.
                p.report.advance_conflicts += 1;
                p.report.earliest_failure = p.job.claimable_at();
            }
            Err(e) => {
                tracing::warn!(job_id = %p.job.id, error = %e, "advance failed; healed by the next tick");
                p.report.add(ClaimReport::failure(&p.job));
            }
        }
        p.report
    }

    /// Of the `count` instants from `from` to `to` a plan drops, those no earlier pass claimed:
    /// a pass that claimed ahead and never advanced the job (a crash, a lost advance) left runs
    /// for the first of them, which run (or are judged late by the worker), so they are not
    /// dropped. Those runs are the first instants from the job's cursor; the rest of the range
    /// follows the last of them (`None`: every instant has a run).
    async fn unclaimed(
        &self,
        job: &Job,
        schedule: &Schedule,
        (from, to): (DateTime<Utc>, DateTime<Utc>),
        count: u64,
        tally: &mut Tally,
    ) -> Result<Option<(DateTime<Utc>, DateTime<Utc>, u64)>, StoreError> {
        let before = RunKey::scheduled(from - Duration::seconds(1));
        let runs = self.history.after(&job.id, &before, to, MAX_CLAIMED_AHEAD).await?;
        // Runs found here run, though their instants are dropped: counted.
        tally.read(counted(&runs));
        let claimed: Vec<DateTime<Utc>> =
            runs.iter().filter(|r| r.key.manual.is_none()).map(|r| r.key.instant).collect();
        let Some(last) = claimed.last() else { return Ok(Some((from, to, count))) };
        let rest = count.saturating_sub(claimed.len() as u64);
        Ok(schedule.next_after(*last).filter(|first| *first <= to && rest > 0).map(|first| (first, to, rest)))
    }

    /// Tells each gap of the job not yet told (`gaps`: the job's with this pass's new one, if
    /// any), marking those told; the gaps to write with the advance (`None`: nothing changed). A
    /// gap whose publish failed stays untold, to be told before the job's next advance.
    async fn tell_gaps(&self, job: &Job, gaps: Option<Vec<Gap>>) -> Option<Vec<Gap>> {
        let changed = gaps.is_some();
        let mut gaps = gaps.unwrap_or_else(|| job.gaps.clone());
        let mut told_any = false;
        for gap in gaps.iter_mut().filter(|g| !g.told && matches!(g.cause, GapCause::CatchupDropped { .. })) {
            // Open first, then tell: the job's next success after the gap tells `recovered`.
            let mark = TroubleMark {
                as_of: gap.to,
                told_at: self.clock.now(),
                told_by: format!("gap:{}", gap.from.to_rfc3339()),
            };
            match self.writes.open_trouble(&job.id, Trouble::Missed, &mark).await {
                // Open already, since an earlier gap: the next success ends both.
                Ok(()) | Err(StoreError::Conflict) => {}
                Err(e) => {
                    tracing::warn!(job_id = %job.id, error = %e, "`missed` not opened; told at the job's next advance");
                    continue;
                }
            }
            let notice = JobNotice::missed(job, gap, self.public_url.as_deref());
            match self.bus.publish_notice(&notice, events::wants(job, EventKind::Missed)).await {
                Ok(()) => {
                    gap.told = true;
                    told_any = true;
                }
                // Refused for good (a topic gone, a message it cannot take): not tried again.
                Err(e) if !e.is_retryable() => {
                    tracing::error!(job_id = %job.id, error = %e, "`missed` refused by the bus; not told");
                    gap.told = true;
                    told_any = true;
                }
                Err(e) => {
                    tracing::warn!(job_id = %job.id, error = %e, "`missed` not published; told again at the job's next advance");
                }
            }
        }
        (changed || told_any).then_some(gaps)
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
            gaps: None,
            counted: None,
            report: ClaimReport::default(),
        };
        let Some(first) = job.next_run_at else { return Ok(prepared) };
        let schedule = match sundial_domain::validation::stored_schedule(job) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(job_id = %job.id, error = %e, "stored schedule does not parse; job left as is");
                return Ok(prepared);
            }
        };
        let ahead = self.settings.claim_ahead.max(self.settings.lookahead);
        let max_delay = Duration::seconds(i64::from(MAX_DELAY_S));
        let horizon = now + ahead.min(max_delay);
        // A run's start may be offset (jitter, flexible window) past its instant: each instant
        // is claimed once its own start is within a message's longest delay.
        let plan = plan(
            first,
            schedule.as_ref(),
            job.document.catchup,
            now,
            horizon,
            reached,
            self.settings.catchup_max,
        )
        .within_delay(now, max_delay, |instant| job.start_offset(instant));
        let mut tally = self.tally(job, first, &plan, now).await?;
        prepared.report.missed_dropped = plan.skipped_missed;
        prepared.next_run_at = plan.next_run_at;
        if let (Some(dropped), Some(reached), Some(schedule)) = (plan.dropped, reached, schedule.as_ref()) {
            let unclaimed =
                self.unclaimed(job, schedule, dropped, plan.skipped_missed as u64, &mut tally).await?;
            if let Some((from, to, instants)) = unclaimed {
                let cause = GapCause::CatchupDropped {
                    policy: job.document.catchup,
                    outage_from: reached + Duration::minutes(1),
                    outage_to: now,
                };
                let gap = Gap { from, to, instants, cause, at: now, told: false };
                tracing::info!(job_id = %job.id, from = %from, to = %to, instants, "missed instants dropped by the catch-up policy");
                prepared.gaps = Some(job.gaps_with(gap));
            }
        }

        for instant in plan.claim {
            // The limit reached, the schedule ends: no instant after is claimed.
            if !tally.has_room() {
                prepared.next_run_at = None;
                break;
            }
            let due = instant + job.start_offset(instant);
            let run = self.new_run(job, RunKey::scheduled(instant), due, now);
            // Its log lines (the capacity of the insert among them) name the run.
            let run_id = run.id().to_string();
            // The claim starts the run's trace (derived from its id: every later part continues it).
            let trace_id = sundial_domain::trace::trace_id(&run_id);
            let span = tracing::info_span!("run", run_id = %run_id, job_id = %job.id, trace_id = %trace_id);
            let inserted = match self.writes.insert(&run, None).instrument(span).await {
                // The instant's item is there but does not decode: no retry mends it, so the
                // instant is left to it and the job goes on (holding it would strand the job).
                Err(e @ StoreError::Corrupt(_)) => {
                    tracing::error!(job_id = %job.id, instant = %instant, error = %e, "the run item of this instant does not decode: a retry cannot help, the instant is passed");
                    prepared.report.unclaimable += 1;
                    continue;
                }
                other => other?,
            };
            match inserted {
                Inserted::Created => {
                    tally.claimed(instant, None);
                    prepared.report.claimed += 1;
                    prepared.messages.push(run);
                }
                Inserted::Exists(existing) => {
                    // A backfill's run is not the schedule's: the limit does not count it.
                    if existing.backfill {
                        tally.passed(instant);
                    } else {
                        tally.claimed(instant, Some(existing.job_version));
                    }
                    prepared.report.duplicates += 1;
                    let unstarted = existing.is_unstarted();
                    if unstarted {
                        prepared.report.resent += 1;
                        prepared.messages.push(*existing);
                    }
                }
            }
        }
        if !tally.has_room() {
            prepared.next_run_at = None;
        }
        let count = tally.into_count(prepared.next_run_at, job.version, now);
        prepared.counted = (count != job.counted).then_some(count);
        Ok(prepared)
    }

    /// The job's count of scheduled runs as the pass from `cursor` that claims by `plan` takes
    /// it, against its `max_runs`: when the job was edited or its cursor moved since the count,
    /// the runs written before its claims that its new mark will hold are read and counted first
    /// (see [`sundial_domain::run_limit`]).
    async fn tally(
        &self,
        job: &Job,
        cursor: DateTime<Utc>,
        plan: &Plan,
        now: DateTime<Utc>,
    ) -> Result<Tally, StoreError> {
        let limit = job.document.schedule.as_ref().and_then(|s| s.max_runs);
        let mut tally = Tally::new(limit, job.counted.clone());
        // Kept exact without a limit too: an edit may add one.
        let Some(from) = job.counted.read_from(cursor, job.version) else { return Ok(tally) };
        // Up to where the new mark will reach: the next instant, or past the last claimed.
        let reach =
            [Some(cursor), plan.next_run_at, plan.claim.last().map(|last| *last + Duration::seconds(1))];
        let through = reach.into_iter().flatten().max().unwrap_or(cursor) - Duration::seconds(1);
        let from = from.unwrap_or(DateTime::UNIX_EPOCH);
        // Edited since the count (or never counted): the older versions' claimers may have
        // written past where this pass claims, as far as a message's longest delay past their
        // clocks.
        let edited = job.counted.marks.last().is_none_or(|m| job.version > m.version);
        let beyond = if edited { now + WRITTEN_AFTER_WITHIN } else { through };
        if from > through.max(beyond) {
            return Ok(tally);
        }
        // A page may end short of its limit (a query stops at 1 MB): paged until one comes back
        // empty, at most `MAX_COUNT_PAGES`.
        let mut after = RunKey::scheduled(from - Duration::seconds(1));
        for _ in 0..MAX_COUNT_PAGES {
            let page = self.history.after(&job.id, &after, through.max(beyond), COUNT_PAGE).await?;
            tally.read(counted(&page).filter(|(instant, _)| *instant <= through));
            tally.read_older(counted(&page).filter(|(instant, _)| *instant > through), job.version);
            let Some(last) = page.last() else { return Ok(tally) };
            after = last.key.clone();
        }
        tracing::warn!(job_id = %job.id, from = %from, through = %through, "more runs than a pass reads to count; the rest are taken as counted");
        Ok(tally)
    }
}

/// Of `runs`, those `schedule.max_runs` counts (scheduled, not a backfill's): each one's instant
/// and the job version it was claimed under.
fn counted(runs: &[Run]) -> impl Iterator<Item = (DateTime<Utc>, u64)> + '_ {
    runs.iter().filter(|r| r.key.manual.is_none() && !r.backfill).map(|r| (r.key.instant, r.job_version))
}
