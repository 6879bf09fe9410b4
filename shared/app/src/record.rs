//! Recording a run's state change together with the events it causes (invariant: one alert per event).
//!
//! The change and its new events go in one conditional write (from the state and attempt read);
//! whoever wins it publishes the events, then marks them sent. A conditional flag set meanwhile
//! without a state change (the watchdog's `sla_missed` or `late_start`) fails the write; the
//! change is then recomputed on the fresh run, so such an event is recorded, and told, once.
//!
//! What a run's end says of its job (`failing`, `failure_rate`, `recovered`, the learned
//! baseline) is decided after the write, by [`crate::health`], and told with the change's events.

use crate::announce::Announcer;
use crate::health::Health;
use crate::timer::Timer;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::audit::AuditRecord;
use sundial_domain::job::Job;
use sundial_domain::ports::store::{Catalogue, Race, RunHistory, RunStore, RunWrites, StoreError};
use sundial_domain::run::transition::{self, Change, Fence, Refused, Step};
use sundial_domain::run::{Run, RunEvent};

/// What became of a step the [`Recorder`] was asked to record.
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "returned once per write and taken apart at once, as `Result<Run, _>` was"
)]
pub enum Recorded {
    /// Written, and its events announced: the run as it now is.
    Written(Run),
    /// Another writer's change won: the run moved on under the write.
    Lost,
    /// The step does not apply to the run as it stands: the domain's refusal, as it gave it.
    Refused(Refused),
}

impl Recorded {
    /// The written run, if the step was written.
    pub fn written(self) -> Option<Run> {
        match self {
            Recorded::Written(run) => Some(run),
            Recorded::Lost | Recorded::Refused(_) => None,
        }
    }

    /// For a caller that acted on a run it read: a step that no longer applies was overtaken by
    /// whoever moved the run, exactly like a write that lost (their change tells it).
    pub fn race(self) -> Race<Run> {
        match self {
            Recorded::Written(run) => Race::Won(run),
            Recorded::Lost | Recorded::Refused(_) => Race::Lost,
        }
    }
}

/// Writes state changes and announces their events.
#[derive(Debug, Clone)]
pub struct Recorder {
    history: Arc<dyn RunHistory>,
    writes: Arc<dyn RunWrites>,
    /// What a run's end says of its job.
    health: Health,
    announcer: Announcer,
    timer: Arc<dyn Timer>,
}

/// How often a change is recomputed when only the run's events moved under it.
const EVENT_RACES: usize = 3;

/// The pauses before each retry of a write storage could not take (about 2 s in all).
const STORAGE_RETRIES: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(100),
    std::time::Duration::from_millis(400),
    std::time::Duration::from_millis(1600),
];

impl Recorder {
    pub fn new(
        catalogue: Arc<dyn Catalogue>,
        runs: Arc<dyn RunStore>,
        announcer: Announcer,
        timer: Arc<dyn Timer>,
    ) -> Self {
        let health = Health::new(catalogue, runs.clone());
        Recorder { history: runs.clone(), writes: runs, health, announcer, timer }
    }

    pub fn announcer(&self) -> &Announcer {
        &self.announcer
    }

    /// Applies `step` to `before` ([`transition::apply`]) and writes the run it makes, with the
    /// events it causes, under the fence the step names; then announces the events. A race that
    /// only added events to the run is decided again on the fresh run. [`Recorded::Lost`] if the
    /// run moved on meanwhile, [`Recorded::Refused`] if the step does not apply to it; an error
    /// only if storage failed.
    pub async fn apply(
        &self,
        job: &Job,
        before: &Run,
        step: &Step,
        now: DateTime<Utc>,
    ) -> Result<Recorded, StoreError> {
        self.apply_recorded(job, before, step, now, None).await
    }

    /// [`Recorder::apply`] of a step an API request asked for, its run written with `audit`,
    /// the request's record of it.
    pub async fn apply_recorded(
        &self,
        job: &Job,
        before: &Run,
        step: &Step,
        now: DateTime<Utc>,
        audit: Option<&AuditRecord>,
    ) -> Result<Recorded, StoreError> {
        let mut before = before.clone();
        let (mut races, mut outages) = (0, 0);
        // A write that timed out may have been applied: recognised by its own `updated_at`. A
        // start is always checked: the SDK's own retry of a start DynamoDB applied fails its
        // condition on that very change, and only a start carries a mark no other writer can
        // make (its attempt's random callback digest).
        let mut maybe_applied = matches!(step, Step::Start { .. });
        loop {
            let change = match transition::apply(job, &before, step, now) {
                Ok(change) => change,
                Err(refused) => return Ok(Recorded::Refused(refused)),
            };
            match persist(self.writes.as_ref(), &before, &change, audit).await {
                Ok(()) => {
                    return Ok(Recorded::Written(
                        self.written(job, &before, change.run, change.events, now).await,
                    ));
                }
                Err(StoreError::Conflict) => {
                    let fresh =
                        self.history.get(&before.job_id, &before.key).await?.ok_or(StoreError::NotFound)?;
                    if maybe_applied && is_write_of(&fresh, &change.run) {
                        return Ok(Recorded::Written(
                            self.written(job, &before, fresh, change.events, now).await,
                        ));
                    }
                    let moved = fresh.state != before.state || fresh.attempt != before.attempt;
                    let touched = change.fence == Fence::Unchanged && fresh.updated_at != before.updated_at;
                    races += 1;
                    if moved || touched || races >= EVENT_RACES {
                        return Ok(Recorded::Lost);
                    }
                    // Only its events changed: decide again on the fresh run.
                    before = fresh;
                }
                // Storage unavailable: try again in place a few times, so that an attempt's
                // outcome is not left to the lease's expiry by a short brownout.
                Err(e) if e.is_retryable() && outages < STORAGE_RETRIES.len() => {
                    self.timer.sleep(STORAGE_RETRIES[outages]).await;
                    outages += 1;
                    maybe_applied = true;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// After `candidate` was written over `before`: tells what its end says of the job's health
    /// ([`Health::judge`]), and announces the change's events.
    async fn written(
        &self,
        job: &Job,
        before: &Run,
        mut candidate: Run,
        mut new: Vec<RunEvent>,
        now: DateTime<Utc>,
    ) -> Run {
        let judged = self.health.judge(job, before, &candidate, now).await;
        candidate.events.extend(judged.iter().cloned());
        new.extend(judged);
        if !new.is_empty() {
            self.announcer.announce(Some(job), &candidate, &new).await;
        }
        candidate
    }
}

/// Writes `change` over `before` under the fence the change names, with `audit`, the record of
/// the request that made it, if any (a request's steps are fenced by state and attempt).
pub async fn persist(
    runs: &dyn RunWrites,
    before: &Run,
    change: &Change,
    audit: Option<&AuditRecord>,
) -> Result<(), StoreError> {
    match change.fence {
        // Only the watchdog's own rescues are so fenced: no request's step is.
        Fence::Unchanged => {
            debug_assert!(audit.is_none(), "a request's step fenced by `updated_at` would lose its record");
            runs.transition_unchanged(before, &change.run).await
        }
        Fence::StateAndAttempt => runs.transition(before, &change.run, audit).await,
    }
}

/// Whether `fresh` is the run as `candidate` wrote it: the same state, attempt and change time,
/// and the same last attempt (its worker, callback digest, outcome and end). Two writers of one
/// change would differ there: each start draws its own callback token, each end has its writer's
/// outcome and clock.
fn is_write_of(fresh: &Run, candidate: &Run) -> bool {
    let last = |run: &Run| {
        run.attempts.last().map(|a| (a.worker.clone(), a.callback.clone(), a.outcome, a.finished_at))
    };
    (fresh.state, fresh.attempt, fresh.updated_at)
        == (candidate.state, candidate.attempt, candidate.updated_at)
        && last(fresh) == last(candidate)
}
