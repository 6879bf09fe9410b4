//! The slots of a concurrency group as the worker takes and gives them back: a run takes one
//! right before its start write, or waits its turn; the attempt's end gives it back. Every change
//! is decided on a consistent read of the group and written under its version; a lost race is
//! decided again on the fresh group.

use crate::timer::Timer;
use chrono::{DateTime, Duration, Utc};
use std::sync::Arc;
use sundial_domain::group::{Full, Group, Taken, slot_is_held};
use sundial_domain::job::Job;
use sundial_domain::ports::store::{GroupStore, RunStore, StoreError};
use sundial_domain::run::{Run, RunId};

/// How often a change of a contended group is decided again before the run waits instead.
const RACES: usize = 8;

/// Whether a run may start its attempt now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// It holds a slot (or its job has no group): start.
    Start,
    /// The group is full, or older runs wait first: look again later.
    Wait(Full),
}

/// Takes and gives back the slots of concurrency groups.
#[derive(Debug, Clone)]
pub struct Slots {
    groups: Arc<dyn GroupStore>,
    runs: Arc<dyn RunStore>,
    timer: Arc<dyn Timer>,
}

impl Slots {
    pub fn new(groups: Arc<dyn GroupStore>, runs: Arc<dyn RunStore>, timer: Arc<dyn Timer>) -> Self {
        Slots { groups, runs, timer }
    }

    /// Takes a slot of `job`'s group for `run`'s next attempt, whose call ends within `call`, or
    /// places the run among the group's waiters. A full group first gives back the slots whose
    /// attempts are over (their runs read consistently), unless older runs wait: they take what
    /// frees first.
    pub async fn admit(
        &self,
        job: &Job,
        run: &Run,
        call: Duration,
        now: DateTime<Utc>,
    ) -> Result<Admission, StoreError> {
        let Some(name) = job.document.group.as_deref() else { return Ok(Admission::Start) };
        let run_id = run.id().to_string();
        let mut last_full = None;
        for race in 0..RACES {
            let Some(mut group) = self.groups.get(&job.owner, name).await? else {
                // Deleted under a job that names it (a delete refuses while jobs name the group).
                tracing::warn!(group = %name, job_id = %job.id, "the job's group does not exist; the run starts unlimited");
                return Ok(Admission::Start);
            };
            let expected = group.version;
            let reclaimed = if group.is_full() && !older_waiters(&group, run, &run_id, now) {
                self.reclaim(&mut group, now).await?
            } else {
                false
            };
            let (admission, changed) = match group.take(&run_id, run, call, now) {
                Taken::Slot { changed } => (Admission::Start, changed),
                Taken::Wait { full, changed } => (Admission::Wait(full), changed),
            };
            if !(changed || reclaimed) {
                return Ok(admission);
            }
            if let Admission::Wait(full) = &admission {
                last_full = Some(full.clone());
            }
            match self.write(group, expected, now).await {
                Ok(()) => return Ok(admission),
                Err(StoreError::Conflict) => self.pause(race).await,
                Err(StoreError::NotFound) => return Ok(Admission::Start),
                Err(e) => return Err(e),
            }
        }
        // Contended throughout: wait and look again, rather than spend a receive on a retry.
        let full = last_full.unwrap_or(Full { running: 0, max_running: 0, ahead: 0 });
        Ok(Admission::Wait(full))
    }

    /// Gives back the slot `run` held for its attempt `attempt`. Best effort: a slot not given
    /// back is reclaimed once the group is full and its run shows the attempt is over.
    pub async fn release(&self, job: &Job, run: &Run, attempt: u32, now: DateTime<Utc>) {
        let Some(name) = job.document.group.as_deref() else { return };
        let run_id = run.id().to_string();
        for race in 0..RACES {
            let mut group = match self.groups.get(&job.owner, name).await {
                Ok(Some(group)) => group,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(group = %name, run_id = %run_id, error = %e, "slot not given back; reclaimed later");
                    return;
                }
            };
            let expected = group.version;
            if !group.release(&run_id, attempt) {
                return;
            }
            match self.write(group, expected, now).await {
                Ok(()) | Err(StoreError::NotFound) => return,
                Err(StoreError::Conflict) => self.pause(race).await,
                Err(e) => {
                    tracing::warn!(group = %name, run_id = %run_id, error = %e, "slot not given back; reclaimed later");
                    return;
                }
            }
        }
    }

    /// Removes from `group` the slots whose attempts are over; true if any was.
    async fn reclaim(&self, group: &mut Group, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let ids: Vec<RunId> = group.slots.keys().filter_map(|id| RunId::parse(id)).collect();
        let runs = self.runs.get_many(&ids).await?;
        let over: Vec<String> = group
            .slots
            .iter()
            .filter(|(id, slot)| {
                let run = runs.iter().find(|r| r.id().to_string() == **id);
                !slot_is_held(slot, run, now)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &over {
            group.slots.remove(id);
        }
        if !over.is_empty() {
            tracing::info!(group = %group.name, reclaimed = over.len(), "slots of ended attempts reclaimed");
        }
        Ok(!over.is_empty())
    }

    async fn write(&self, mut group: Group, expected: u64, now: DateTime<Utc>) -> Result<(), StoreError> {
        group.version = expected + 1;
        group.updated_at = now;
        self.groups.put(&group, Some(expected)).await
    }

    /// A short, growing pause after a lost race, so racing workers spread out.
    async fn pause(&self, race: usize) {
        let millis = 5u64 << race.min(6);
        self.timer.sleep(std::time::Duration::from_millis(millis)).await;
    }
}

/// Whether live waiters older than `run` are queued: they take the slots that free first.
fn older_waiters(group: &Group, run: &Run, run_id: &str, now: DateTime<Utc>) -> bool {
    let order = (run.scheduled_at(), run_id);
    group.live_waiters(now).any(|(id, w)| id.as_str() != run_id && (w.instant, id.as_str()) < order)
}
