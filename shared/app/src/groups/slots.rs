//! The slots of a concurrency group as the worker takes and gives them back: a run takes one
//! right before its start write, or waits its turn; the attempt's end gives it back, handing it
//! in the same write to the oldest waiter, which is woken at once (a message visible now) instead
//! of finding it on its next look seconds later. Every change is decided on a consistent read of
//! the group and written under its version; a lost race is decided again on the fresh group.
//! Before a run waits, slots and places whose runs show them over are dropped. Storage that
//! throttles or fails an admission makes the run wait like a full group: no receive is spent.

use crate::timer::Timer;
use chrono::{DateTime, Duration, Utc};
use std::sync::Arc;
use sundial_domain::group::{Full, Group, Taken, slot_is_held};
use sundial_domain::job::Job;
use sundial_domain::ports::queue::RunQueue;
use sundial_domain::ports::store::{GroupStore, RunHistory, StoreError};
use sundial_domain::run::{Run, RunId, RunState};
use sundial_domain::run_queue::Dispatch;

/// How often a change of a contended group is decided again before the run waits instead.
const RACES: usize = 8;
/// Older waiters read beyond the free slots' worth when they hold the places before a run.
const WAITERS_CHECKED_BEYOND_FREE: usize = 5;
/// How long a slot handed to a waiter is reserved before its start: the start extends it to the
/// call's end. A waiter that never starts keeps it only while it still waits (see
/// [`slot_is_held`]).
const HAND_OVER_RESERVE: Duration = Duration::seconds(60);

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
    history: Arc<dyn RunHistory>,
    /// Where a waiter handed a slot is woken.
    queue: Arc<dyn RunQueue>,
    timer: Arc<dyn Timer>,
}

impl Slots {
    pub fn new(
        groups: Arc<dyn GroupStore>,
        history: Arc<dyn RunHistory>,
        queue: Arc<dyn RunQueue>,
        timer: Arc<dyn Timer>,
    ) -> Self {
        Slots { groups, history, queue, timer }
    }

    /// Takes a slot of `job`'s group for `run`'s next attempt, whose call ends within `call`, or
    /// places the run among the group's waiters. Before a run waits, what is over is dropped and
    /// the decision taken again (see [`Slots::verify`]). Storage that throttles or fails makes the
    /// run wait too: it looks again later without spending a receive (a take applied under a
    /// lost answer is found on that look, as the run's own slot).
    pub async fn admit(
        &self,
        job: &Job,
        run: &Run,
        call: Duration,
        now: DateTime<Utc>,
    ) -> Result<Admission, StoreError> {
        match self.decide(job, run, call, now).await {
            Err(e) if e.is_retryable() => {
                tracing::warn!(group = job.document.group.as_deref().unwrap_or(""), error = %e, "the group could not be read or written; the run waits");
                Ok(Admission::Wait(Full { running: 0, max_running: 0, ahead: 0 }))
            }
            decided => decided,
        }
    }

    async fn decide(
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
            let mut taken = group.take(&run_id, run, call, now);
            let mut verified = false;
            if matches!(taken, Taken::Wait { .. }) && self.verify(&mut group, run, &run_id, now).await? {
                verified = true;
                taken = group.take(&run_id, run, call, now);
            }
            let (admission, changed) = match taken {
                Taken::Slot { changed } => (Admission::Start, changed),
                Taken::Wait { full, changed } => (Admission::Wait(full), changed),
            };
            if !(changed || verified) {
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

    /// Gives back the slot `run` held for its attempt `attempt`, handing it in the same write to
    /// the oldest waiter ([`Group::hand_over`]), which is then woken. Best effort: a slot not
    /// given back is reclaimed once the group is full and its run shows the attempt is over; a
    /// waiter whose wake is lost starts on its own next look.
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
            let handed = group.hand_over(now, HAND_OVER_RESERVE);
            match self.write(group, expected, now).await {
                Ok(()) => return self.wake(handed, &job.owner).await,
                Err(StoreError::NotFound) => return,
                Err(StoreError::Conflict) => self.pause(race).await,
                Err(e) => {
                    tracing::warn!(group = %name, run_id = %run_id, error = %e, "slot not given back; reclaimed later");
                    return;
                }
            }
        }
    }

    /// Wakes the waiter a slot was handed to: a message for the attempt it waits to start,
    /// visible now. A failed send leaves it to its own next look.
    async fn wake(&self, handed: Option<(String, u32)>, owner: &str) {
        let Some((id, attempt)) = handed else { return };
        let Some(run_id) = RunId::parse(&id) else { return };
        let sent = self.queue.send(&[Dispatch::wake(&run_id, attempt, owner)]).await;
        if let Some(Err(e)) = sent.into_iter().next() {
            tracing::warn!(run_id = %id, error = %e, "the waiter handed a slot was not woken; it starts on its next look");
        }
    }

    /// Drops from `group` what is over, as its runs (read consistently) show: when the group is
    /// full and no older run waits, the slots whose attempts are over; when slots are free but
    /// older runs hold the places before them, those of the oldest that no longer wait (ended,
    /// started elsewhere, gone). True if anything was dropped. The reads stay bounded: the
    /// slots, or the free slots' worth of older waiters and a few more.
    async fn verify(
        &self,
        group: &mut Group,
        run: &Run,
        run_id: &str,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let older = group.older_waiters(run, run_id, now);
        let free = (group.max_running as usize).saturating_sub(group.slots.len());
        let mut ids: Vec<String> = Vec::new();
        if free == 0 && older.is_empty() {
            ids.extend(group.slots.keys().cloned());
        }
        if free > 0 && older.len() >= free {
            let mut oldest = older.clone();
            oldest.sort_by_key(|id| group.waiting.get(id).map(|w| (w.instant, id.clone())));
            ids.extend(oldest.into_iter().take(free + WAITERS_CHECKED_BEYOND_FREE));
        }
        if ids.is_empty() {
            return Ok(false);
        }
        let parsed: Vec<RunId> = ids.iter().filter_map(|id| RunId::parse(id)).collect();
        let runs = self.history.get_many(&parsed).await?;
        let read = |id: &str| runs.iter().find(|r| r.id().to_string() == id);
        let over_slots: Vec<String> = group
            .slots
            .iter()
            .filter(|(id, slot)| ids.contains(id) && !slot_is_held(slot, read(id), now))
            .map(|(id, _)| id.clone())
            .collect();
        let gone_waiters: Vec<String> = ids
            .iter()
            .filter(|id| group.waiting.contains_key(*id))
            .filter(|id| !read(id).is_some_and(|r| matches!(r.state, RunState::Queued | RunState::Retrying)))
            .cloned()
            .collect();
        for id in &over_slots {
            group.slots.remove(id);
        }
        for id in &gone_waiters {
            group.waiting.remove(id);
        }
        if !over_slots.is_empty() || !gone_waiters.is_empty() {
            tracing::info!(group = %group.name, slots = over_slots.len(), waiters = gone_waiters.len(), "slots and places of ended attempts dropped");
        }
        Ok(!over_slots.is_empty() || !gone_waiters.is_empty())
    }

    async fn write(&self, mut group: Group, expected: u64, now: DateTime<Utc>) -> Result<(), StoreError> {
        group.version = expected + 1;
        group.updated_at = now;
        self.groups.put(&group, Some(expected), None).await
    }

    /// A short, growing pause after a lost race, so racing workers spread out.
    async fn pause(&self, race: usize) {
        let millis = 5u64 << race.min(6);
        self.timer.sleep(std::time::Duration::from_millis(millis)).await;
    }
}
