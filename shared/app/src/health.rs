//! What a run's end says of its job's health, told once (invariant: one alert per event): a
//! failing streak reaching `alert_after_failures` (`failing`), too many failures among the latest
//! runs (`failure_rate`), the first success after either or after `missed` (`recovered`), and the
//! job's learned baseline kept up to date ([`sundial_domain::health`] holds the rules).
//!
//! Each is decided after the run's end is written, from a consistent read of the job's runs on
//! both sides of it (runs end out of order: of two ending at once, at least the later reader sees
//! both). What is told is fenced by a conditional flag of the job's (its told streak, its open
//! troubles): whoever sets the flag records the event on its run (still in the in-flight index
//! until its events are published) and the recorder tells it. A failure here is logged and never
//! fails the run's end: the next run's end sees the same history.

use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::events::failing_streak;
use sundial_domain::health::{self, Ended, FailureRate, Recovery, Trouble, TroubleMark};
use sundial_domain::job::{EventKind, Job, JobId};
use sundial_domain::ports::store::{Catalogue, RunHistory, RunOutbox, RunStore, RunWrites, StoreError};
use sundial_domain::run::event::EventDetail;
use sundial_domain::run::{Run, RunEvent, RunState};

/// Judges the job's health at each run's end.
#[derive(Debug, Clone)]
pub struct Health {
    /// Where a job's learned baseline is kept.
    catalogue: Arc<dyn Catalogue>,
    history: Arc<dyn RunHistory>,
    /// The job's flags: its told streak and open troubles.
    flags: Arc<dyn RunWrites>,
    outbox: Arc<dyn RunOutbox>,
}

/// The job's runs on both sides of one that just ended, read once for every rule that needs them.
struct Neighbours {
    /// Keyed before it, newest first.
    earlier: Vec<Run>,
    /// Keyed after it up to a minute past now, oldest first.
    later: Vec<Run>,
}

impl Neighbours {
    /// The newest instant among `run` and the failed runs keyed after it.
    fn newest_failure(&self, run: &Run) -> DateTime<Utc> {
        let failed = |r: &&Run| matches!(r.state, RunState::Failed | RunState::TimedOut);
        self.later.iter().filter(failed).map(Run::scheduled_at).fold(run.scheduled_at(), DateTime::max)
    }

    /// The job's failure rate over its latest ended runs, `run` among them.
    fn rate(&self, run: &Run) -> Option<FailureRate> {
        let ended = |r: &Run| match r.state {
            RunState::Succeeded => Some(Ended::Succeeded),
            RunState::Failed | RunState::TimedOut => Some(Ended::Failed),
            _ => None,
        };
        let newest_first = self.later.iter().rev().chain(std::iter::once(run)).chain(&self.earlier);
        FailureRate::of(newest_first.filter_map(ended))
    }
}

impl Health {
    pub fn new(catalogue: Arc<dyn Catalogue>, runs: Arc<dyn RunStore>) -> Self {
        Health { catalogue, history: runs.clone(), flags: runs.clone(), outbox: runs }
    }

    /// The events `after`, just written over `before`, tells of its job, each recorded on `after`
    /// (nothing unless this write ended the run).
    pub async fn judge(&self, job: &Job, before: &Run, after: &Run, now: DateTime<Utc>) -> Vec<RunEvent> {
        if before.state.is_terminal() || !after.state.is_terminal() {
            return Vec::new();
        }
        let mut told = Vec::new();
        match after.state {
            RunState::Failed | RunState::TimedOut => {
                let judged = self.judge_failure(job, after, now, &mut told).await;
                if let Err(e) = judged {
                    tracing::warn!(run_id = %after.id(), error = %e, "failure not judged; the next run's end is");
                }
            }
            RunState::Succeeded => {
                if let Err(e) = self.judge_success(job, after, now, &mut told).await {
                    tracing::warn!(run_id = %after.id(), error = %e, "recovery not judged; the next success is");
                }
                if health::due(job.baseline.as_ref(), now) {
                    self.learn(job, now).await;
                }
            }
            _ => {}
        }
        told
    }

    /// A failed end: `failing` when it completes a streak of `alert_after_failures` no one told
    /// yet; `failure_rate` when too many of the latest runs failed and no one told it since the
    /// job last recovered.
    async fn judge_failure(
        &self,
        job: &Job,
        after: &Run,
        now: DateTime<Utc>,
        told: &mut Vec<RunEvent>,
    ) -> Result<(), StoreError> {
        let threshold = job.document.failing_threshold();
        let rates = job.document.health_alerts != Some(false);
        if threshold.is_none() && !rates {
            return Ok(());
        }
        // Enough history to see a streak through interleaved skipped or cancelled runs, and a
        // rate's window.
        let limit = threshold.map_or(0, |t| t * 2 + 10).max(health::RATE_WINDOW as u32 * 2 + 10);
        let neighbours = self.neighbours(job, after, now, limit).await?;
        // Told as of the newest failure it counts (runs end out of order): only a success
        // scheduled after every one of them says the job works again.
        let mark = TroubleMark {
            as_of: neighbours.newest_failure(after),
            told_at: now,
            told_by: after.id().to_string(),
        };
        if let Some(threshold) = threshold {
            let streak = failing_streak(&neighbours.earlier, &neighbours.later);
            if streak.failures >= threshold as usize
                && self
                    .won(
                        &job.id,
                        Trouble::Failing,
                        &mark,
                        self.flags.flag_failing(&job.id, streak.after.as_ref(), &mark).await,
                    )
                    .await?
            {
                told.push(
                    self.record(after, told, RunEvent::new(EventKind::Failing, after.attempt, now)).await?,
                );
            }
        }
        if let Some(rate) = neighbours.rate(after).filter(|r| rates && r.alarming())
            && self
                .won(
                    &job.id,
                    Trouble::FailureRate,
                    &mark,
                    self.flags.open_trouble(&job.id, Trouble::FailureRate, &mark).await,
                )
                .await?
        {
            let event = RunEvent::new(EventKind::FailureRate, after.attempt, now)
                .with_detail(EventDetail::FailureRate(rate));
            told.push(self.record(after, told, event).await?);
        }
        Ok(())
    }

    /// A success: `recovered` when it ends troubles told before its instant.
    async fn judge_success(
        &self,
        job: &Job,
        after: &Run,
        now: DateTime<Utc>,
        told: &mut Vec<RunEvent>,
    ) -> Result<(), StoreError> {
        let troubles = self.flags.troubles(&job.id).await?;
        if troubles.is_empty() {
            return Ok(());
        }
        // The rate only matters to an open `failure_rate`: read only then.
        let rate = match troubles.failure_rate {
            Some(_) => {
                self.neighbours(job, after, now, health::RATE_WINDOW as u32 * 2 + 10).await?.rate(after)
            }
            None => None,
        };
        let ended = troubles.ended_by(after.scheduled_at(), rate.as_ref());
        if ended.is_empty() {
            return Ok(());
        }
        let by = after.id().to_string();
        let closed = match self.flags.close_troubles(&job.id, &ended, &by).await {
            Ok(()) => true,
            // Another success closed them first, or this close was applied and its answer lost.
            Err(StoreError::Conflict) => {
                self.flags.troubles_closed_by(&job.id).await?.as_deref() == Some(by.as_str())
            }
            Err(e) => return Err(e),
        };
        if !closed {
            return Ok(());
        }
        let event = RunEvent::new(EventKind::Recovered, after.attempt, now)
            .with_detail(EventDetail::Recovered(Recovery { from: ended }));
        told.push(self.record(after, told, event).await?);
        Ok(())
    }

    /// Whether this writer set the trouble's flag: it did, or its write was applied and its
    /// answer lost (the SDK's retry then meets its own write as a failed condition), which the
    /// flag holding this very mark shows (its `told_by` is this writer's run).
    async fn won(
        &self,
        job_id: &JobId,
        trouble: Trouble,
        mark: &TroubleMark,
        written: Result<(), StoreError>,
    ) -> Result<bool, StoreError> {
        match written {
            Ok(()) => Ok(true),
            Err(StoreError::Conflict) => {
                Ok(self.flags.troubles(job_id).await?.get(trouble).as_ref() == Some(mark))
            }
            Err(e) => Err(e),
        }
    }

    async fn neighbours(
        &self,
        job: &Job,
        run: &Run,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Neighbours, StoreError> {
        let limit = limit.min(crate::jobs::MAX_PAGE);
        let earlier = self.history.before(&job.id, &run.key, limit).await?;
        // Up to a minute ahead: a triggered run is keyed at the next whole second; the later side
        // stops near now, so a frequent job's runs claimed ahead do not fill it.
        let later = self.history.after(&job.id, &run.key, now + chrono::Duration::minutes(1), limit).await?;
        Ok(Neighbours { earlier, later })
    }

    /// Records `event` on `run` (as it stands with the events `told` before it).
    async fn record(&self, run: &Run, told: &[RunEvent], event: RunEvent) -> Result<RunEvent, StoreError> {
        let mut run = run.clone();
        run.events.extend(told.iter().cloned());
        self.outbox.record_event(&run, &event).await?;
        Ok(event)
    }

    /// Learns the job's baseline again from its latest successful runs and keeps it when it
    /// moved. A failure is logged: the next success learns it again.
    async fn learn(&self, job: &Job, now: DateTime<Utc>) {
        let learned = async {
            let latest =
                self.history.list(&job.id, health::HISTORY as u32, None, Some(RunState::Succeeded)).await?;
            let durations: Vec<chrono::Duration> = latest.items.iter().filter_map(Run::duration).collect();
            let baseline = health::learn(&durations, now);
            let moved = |b: &health::Baseline| {
                job.baseline.is_none_or(|old| {
                    (old.typical_ms, old.p95_ms, old.runs) != (b.typical_ms, b.p95_ms, b.runs)
                })
            };
            match baseline.filter(moved) {
                Some(baseline) => self.catalogue.set_baseline(&job.id, &baseline).await,
                None => Ok(()),
            }
        };
        if let Err(e) = learned.await {
            tracing::warn!(job_id = %job.id, error = %e, "baseline not learned; learned at the next success");
        }
    }
}
