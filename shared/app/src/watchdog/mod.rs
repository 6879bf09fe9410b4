//! The watchdog: Sundial's rescuer and its voice, run once a minute.
//!
//! It reads the in-flight runs through the runs table's in-flight index (never a table scan)
//! and, for each, applies what [`sundial_domain::watchdog::rules`] decides, one concern per module:
//! `publish` sends events a crash left unsent; `deadlines` flags `sla_missed` and
//! `late_start` (conditional flags: once per run); `rescue` ends an attempt whose lease
//! expired (`timed_out` or `lost`) and dispatches the next one, and cancels runs of deleted
//! jobs; `redispatch` re-sends a message that was never sent or whose retry vanished. `stall`
//! watches the tick's watermark and tells operators once when the scheduler stalls and once when
//! it recovers. Every change is a conditional write from what was read, so racing watchdogs,
//! workers and callbacks each take effect once. A pass works in batches within a time budget and
//! records where it stopped; the next resumes there.

mod deadlines;
mod publish;
mod redispatch;
mod rescue;
mod stall;

use crate::ports::Ports;
use crate::record::Recorder;
use chrono::{DateTime, Duration, Utc};
use futures::StreamExt;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use sundial_domain::clock::Clock;
use sundial_domain::job::{Job, JobId};
use sundial_domain::ports::queue::RunQueue;
use sundial_domain::ports::store::{
    Catalogue, InFlightIndex, RunHistory, RunOutbox, RunWrites, StoreError, TickStateStore,
};
use sundial_domain::run::{Run, RunId};
use sundial_domain::watchdog::rules::{WatchdogSettings, minutes_behind};
use tracing::Instrument;

/// What one pass did, for the function's result and its log line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WatchdogReport {
    /// Runs read from the in-flight index.
    pub inspected: usize,
    /// Events published again after a crash left them unsent.
    pub republished: usize,
    /// Ended runs removed from the in-flight index.
    pub settled: usize,
    pub sla_missed: usize,
    pub late_start: usize,
    /// Runs flagged running far longer than their job's baseline.
    pub duration_anomalies: usize,
    /// Attempts ended as `timed_out` past their timeout.
    pub timed_out: usize,
    /// Attempts ended as `lost` (lease expired).
    pub lost: usize,
    /// Messages sent for runs whose message was missing (or for the next attempt after a repair).
    pub dispatched: usize,
    /// In-flight runs of deleted jobs, cancelled.
    pub cancelled: usize,
    /// `scheduler_stalled` or `scheduler_recovered`, if one was published.
    pub alert: Option<String>,
    /// How many minutes the tick's watermark is behind the clock.
    pub minutes_behind: i64,
    /// Runs whose repair failed; they are looked at again next minute.
    pub errors: usize,
    /// True when the time budget ran out before every run was inspected: the next pass resumes
    /// after the last one.
    pub unfinished: bool,
}

impl WatchdogReport {
    /// The pass's metrics: the repairs by kind, and the scheduler's lag (the stall alarm's input).
    pub fn metrics(&self, at: DateTime<Utc>) -> crate::emf::Record {
        use crate::emf::{Record, Unit, names};
        Record::new("watchdog", at)
            .count(names::SLA_MISSED, self.sla_missed)
            .count(names::LATE_STARTS, self.late_start)
            .count(names::DURATION_ANOMALIES, self.duration_anomalies)
            .count(names::RUNS_TIMED_OUT, self.timed_out)
            .count(names::ATTEMPTS_LOST, self.lost)
            .count(names::RUNS_REDISPATCHED, self.dispatched)
            .count(names::EVENTS_REPUBLISHED, self.republished)
            .values(names::SCHEDULER_MINUTES_BEHIND, Unit::Count, vec![self.minutes_behind as f64])
    }

    fn add(&mut self, other: WatchdogReport) {
        self.republished += other.republished;
        self.settled += other.settled;
        self.sla_missed += other.sla_missed;
        self.late_start += other.late_start;
        self.duration_anomalies += other.duration_anomalies;
        self.timed_out += other.timed_out;
        self.lost += other.lost;
        self.dispatched += other.dispatched;
        self.cancelled += other.cancelled;
        self.errors += other.errors;
    }
}

/// The watchdog's parts.
#[derive(Debug, Clone)]
pub struct Watchdog {
    catalogue: Arc<dyn Catalogue>,
    history: Arc<dyn RunHistory>,
    writes: Arc<dyn RunWrites>,
    outbox: Arc<dyn RunOutbox>,
    in_flight_index: Arc<dyn InFlightIndex>,
    queue: Arc<dyn RunQueue>,
    recorder: Recorder,
    tick_state: Arc<dyn TickStateStore>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn sundial_domain::entropy::Entropy>,
    meter: Arc<crate::meter::Meter>,
    /// Stops the work of runs whose job was deleted.
    caller: Arc<dyn sundial_domain::ports::targets::Caller>,
    settings: WatchdogSettings,
}

impl Watchdog {
    pub fn new(ports: &Ports, recorder: Recorder, settings: WatchdogSettings) -> Self {
        let Ports { jobs, runs, queue, tick_state, clock, entropy, meter, caller, .. } = ports.clone();
        Watchdog {
            catalogue: jobs,
            history: runs.clone(),
            writes: runs.clone(),
            outbox: runs.clone(),
            in_flight_index: runs,
            queue,
            recorder,
            tick_state,
            clock,
            entropy,
            meter,
            caller,
            settings,
        }
    }

    /// One pass: the scheduler's health, then the in-flight runs due by now, a batch at a time
    /// until the time budget runs out (read on the clock port, as the tick's is); the next pass
    /// resumes after the last run inspected.
    pub async fn run(&self) -> Result<WatchdogReport, StoreError> {
        let now = self.clock.now();
        let budget = Duration::from_std(self.settings.budget).unwrap_or(Duration::MAX);
        let state = self.tick_state.get().await?;
        let behind = minutes_behind(state.watermark, now);
        let alert = self.alert_on(&state, behind, now).await?;
        let mut report = WatchdogReport { alert, minutes_behind: behind, ..Default::default() };
        // The index is written over its own partitions; every pass reads at least as many as any
        // pass has read (see `TickState::shards`), so runs written before a decrease are found.
        let own = self.in_flight_index.shards();
        if state.shards.is_none_or(|recorded| recorded < own) {
            self.tick_state.note_shards(own).await?;
        }
        let shards = own.max(state.shards.unwrap_or(0));
        let ids =
            resume_after(self.in_flight_index.in_flight(now, shards).await?, state.watchdog_cursor.as_ref());
        let mut cursor = None;
        let mut batches = ids.chunks(self.settings.batch_runs.max(1)).peekable();
        // The budget is checked after each batch, so that every pass makes progress.
        while let Some(batch) = batches.next() {
            if let Err(e) = self.inspect(batch, &mut report).await {
                // The next pass comes back to these runs; the pass goes on with the others.
                tracing::warn!(runs = batch.len(), error = %e, "a batch of in-flight runs could not be read; retried next pass");
                report.errors += batch.len();
            }
            if batches.peek().is_some() && self.clock.now() - now >= budget {
                report.unfinished = true;
                cursor = batch.last();
                break;
            }
        }
        if cursor.is_some() || state.watchdog_cursor.is_some() {
            self.tick_state.set_watchdog_cursor(cursor).await?;
        }
        self.meter.observe(&report.metrics(self.clock.now()));
        Ok(report)
    }

    /// Applies what each run of `batch` needs, as of when it is looked at (a pass takes a
    /// while: the times it records must not lag behind the clock).
    async fn inspect(&self, batch: &[RunId], report: &mut WatchdogReport) -> Result<(), StoreError> {
        let runs = self.history.get_many(batch).await?;
        report.inspected += runs.len();
        let jobs = self.jobs_of(&runs).await?;
        let jobs = &jobs;
        let results: Vec<WatchdogReport> = futures::stream::iter(runs)
            .map(|run| async move {
                let job = jobs.get(&run.job_id).and_then(Option::as_ref);
                let id = run.id();
                let span =
                    tracing::info_span!("run", run_id = %id, job_id = %run.job_id, attempt = run.attempt);
                match self.watch(run, job, self.clock.now()).instrument(span).await {
                    Ok(report) => report,
                    Err(e) => {
                        tracing::warn!(run_id = %id, error = %e, "watchdog repair failed; retried next pass");
                        WatchdogReport { errors: 1, ..Default::default() }
                    }
                }
            })
            .buffer_unordered(self.settings.concurrency.max(1))
            .collect()
            .await;
        for r in results {
            report.add(r);
        }
        Ok(())
    }

    /// The jobs of `runs`, read in batches; `None` for a deleted job.
    async fn jobs_of(&self, runs: &[Run]) -> Result<HashMap<JobId, Option<Job>>, StoreError> {
        let mut ids: Vec<JobId> = runs.iter().map(|r| r.job_id.clone()).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut jobs: HashMap<JobId, Option<Job>> = ids.into_iter().map(|id| (id, None)).collect();
        let ids: Vec<JobId> = jobs.keys().cloned().collect();
        for job in self.catalogue.get_many(&ids).await? {
            jobs.insert(job.id.clone(), Some(job));
        }
        Ok(jobs)
    }

    /// Applies every repair one run needs, each concern in its own module.
    async fn watch(
        &self,
        mut run: Run,
        job: Option<&Job>,
        now: DateTime<Utc>,
    ) -> Result<WatchdogReport, StoreError> {
        let mut report = WatchdogReport::default();
        self.publish_left_over(job, &run, now, &mut report).await?;
        if run.state.is_terminal() {
            return Ok(report);
        }
        let Some(job) = job else {
            self.cancel_orphan(&run, now, &mut report).await?;
            return Ok(report);
        };
        if !self.flag_deadlines(job, &mut run, now, &mut report).await? {
            return Ok(report);
        }
        if self.rescue(job, &run, now, &mut report).await? {
            return Ok(report);
        }
        self.redispatch_missing(&run, now, &mut report).await.map(|()| report)
    }
}

/// `ids` (in order) rotated to start after `cursor`: the runs a budget-stopped pass did not
/// reach come first, then the ones it did.
fn resume_after(mut ids: Vec<RunId>, cursor: Option<&RunId>) -> Vec<RunId> {
    if let Some(cursor) = cursor {
        let first_after = ids.partition_point(|id| id.chronological() <= cursor.chronological());
        ids.rotate_left(first_after);
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use sundial_domain::run::RunKey;

    #[test]
    fn a_pass_resumes_after_the_run_the_last_one_stopped_at() {
        let job = JobId::generate();
        let at = |minute: u32| {
            let instant = format!("2026-11-22T10:{minute:02}:00Z").parse().unwrap_or_default();
            RunId::new(job.clone(), RunKey::scheduled(instant))
        };
        let ids = vec![at(1), at(2), at(3), at(4)];
        assert_eq!(resume_after(ids.clone(), None), ids);
        assert_eq!(resume_after(ids.clone(), Some(&at(2))), [at(3), at(4), at(1), at(2)]);
        // The cursor's run has ended since: the next one still comes first.
        let without_2 = vec![at(1), at(3), at(4)];
        assert_eq!(resume_after(without_2, Some(&at(2))), [at(3), at(4), at(1)]);
        assert_eq!(resume_after(ids.clone(), Some(&at(4))), ids);
    }
}
