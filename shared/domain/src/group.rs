//! Concurrency groups: one owner's limit on how many attempts of the jobs that name the group
//! run at once, across every worker, and the ledger of slots and waiters that enforces it.
//!
//! A group is one stored record, written only under its version (optimistic concurrency), so
//! every change below is decided on a fresh read and lands only if nobody changed the group
//! meanwhile. A run takes a *slot* (its id and the attempt it is about to start) before its
//! start write and gives it back after the attempt ends. A slot not given back (its worker
//! crashed, or the release was lost) is reclaimed once both its run and the clock show the
//! attempt is over ([`slot_is_held`]): the run moved past the attempt, ended, or its lease
//! expired, and the attempt's call has certainly ended (its `until`, plus [`SKEW`] for clocks
//! that disagree), so a crashed worker's slot comes back with its lease. A slot taken by a
//! worker that crashed before its start write stays the run's, and the run's own message, when
//! it returns, starts the attempt with it.
//!
//! A run that finds the group full *waits*: it is listed among the group's waiters, keeps its
//! state (QUEUED or RETRYING) and its attempts, and looks again a few seconds later. A free slot
//! goes to the oldest instant first: a run takes one only while fewer older waiters are live
//! than slots are free. A waiter that stopped looking (its run ended or moved on) drops out of
//! the order after [`WAITER_TTL`].

use crate::run::{Run, RunState};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The most attempts a group may let run at once. The whole ledger is one item, written at each
/// take and give-back: 100 slots and their waiters keep it under [`LEDGER_BUDGET`].
pub const MAX_RUNNING: u32 = 100;
/// The most a group's ledger (its hot item: slots and placed waiters, nothing that grows with
/// the jobs naming it) may take as stored JSON; a unit test holds a full group to it. At most
/// 48 write units per write; a group of 5 stays near 2 KB.
pub const LEDGER_BUDGET: usize = 48 * 1024;
/// The fewest places a group keeps for waiters; it keeps twice `max_running` when that is more.
/// Runs beyond them wait without a place: younger than every placed waiter, they would not take
/// a slot before those anyway.
pub const MIN_WAITER_PLACES: usize = 20;
/// How long a link of a job that does not name the group (yet) keeps the group from being
/// deleted: the job's create or edit is under way.
pub const LINK_GRACE: Duration = Duration::seconds(120);
/// The longest a group name may be.
pub const MAX_NAME_LEN: usize = 64;
/// How long a waiter keeps its place in the order without looking again.
pub const WAITER_TTL: Duration = Duration::seconds(120);
/// How often a waiter's place is refreshed (a write), at most.
pub const WAITER_REFRESH: Duration = Duration::seconds(40);
/// How far two processes' clocks may disagree: a slot is reclaimed only this long after its
/// attempt's call has certainly ended by the clock of the worker that took it.
pub const SKEW: Duration = Duration::seconds(60);

/// What `PUT /v1/groups/{name}` accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GroupDocument {
    /// How many attempts of the group's jobs may run at once.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub max_running: u32,
}

/// A run's place in a group: an attempt about to start or running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    /// The attempt the slot is for: the run's attempt number once it starts.
    pub attempt: u32,
    #[serde(with = "chrono::serde::ts_milliseconds")]
    pub taken_at: DateTime<Utc>,
    /// When the attempt's call has certainly ended (its worker cuts it at its time limit): its
    /// lease as the start write sets it, by the taker's clock.
    #[serde(with = "chrono::serde::ts_milliseconds")]
    pub until: DateTime<Utc>,
}

/// A run waiting for a slot. Times are kept to the millisecond (the item stays small).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiter {
    /// The attempt the run waits to start (0: not recorded, by an earlier version): a slot
    /// freed for it is handed over for that attempt.
    #[serde(default)]
    pub attempt: u32,
    /// The run's order: its scheduled instant, then its id.
    #[serde(with = "chrono::serde::ts_milliseconds")]
    pub instant: DateTime<Utc>,
    #[serde(with = "chrono::serde::ts_milliseconds")]
    pub since: DateTime<Utc>,
    #[serde(with = "chrono::serde::ts_milliseconds")]
    pub seen_at: DateTime<Utc>,
}

/// A stored group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub owner: String,
    pub name: String,
    pub max_running: u32,
    /// Run id → its slot.
    #[serde(default)]
    pub slots: BTreeMap<String, Slot>,
    /// Run id → its place in the queue for a slot.
    #[serde(default)]
    pub waiting: BTreeMap<String, Waiter>,
    /// Links written into the ledger before links had their own record ([`Links`]): still read
    /// by a delete of the group, never added to, so that the ledger does not grow with its jobs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub jobs: BTreeMap<String, Link>,
    /// Bumped by every write; the fence of the next. A new group starts at its creation's Unix
    /// milliseconds, so a group deleted and made again never reuses a version a slow writer read.
    pub version: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The jobs that name a group, each with when it was linked, kept apart from the group's
/// ledger: written by job creates, edits and deletes, never by admissions. The group is deleted
/// only when none still names it (see [`Links::users`]); `version` moves with every link, and a
/// delete is fenced by it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Links {
    pub jobs: BTreeMap<String, Link>,
    /// 0 when no job was ever linked.
    pub version: u64,
}

impl Links {
    /// The jobs linked to the group that may still name it: among `named` (the linked jobs that
    /// exist and name it, as read), plus links of jobs not (yet) written or not naming it made
    /// within [`LINK_GRACE`] (a create or an edit under way).
    pub fn users(&self, named: &BTreeSet<String>, now: DateTime<Utc>) -> Vec<String> {
        self.jobs
            .iter()
            .filter(|(id, link)| named.contains(*id) || now - link.at < LINK_GRACE)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// When a job was linked to a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    #[serde(with = "chrono::serde::ts_milliseconds")]
    pub at: DateTime<Utc>,
}

/// Why a run may not take a slot now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Full {
    /// Slots taken.
    pub running: usize,
    pub max_running: u32,
    /// Live waiters with an earlier place than the run.
    pub ahead: usize,
}

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} of {} running", self.running, self.max_running)?;
        if self.ahead > 0 {
            write!(f, ", {} older run(s) waiting first", self.ahead)?;
        }
        Ok(())
    }
}

/// What [`Group::take`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The run holds a slot for the attempt; `changed`: the group must be written.
    Slot { changed: bool },
    /// The run waits; `changed`: its place was added or refreshed and must be written.
    Wait { full: Full, changed: bool },
}

impl Group {
    /// A new group, its version its creation's Unix milliseconds.
    pub fn new(owner: &str, name: &str, max_running: u32, now: DateTime<Utc>) -> Self {
        Group {
            owner: owner.to_string(),
            name: name.to_string(),
            max_running,
            slots: BTreeMap::new(),
            waiting: BTreeMap::new(),
            jobs: BTreeMap::new(),
            version: now.timestamp_millis().max(1) as u64,
            created_at: now,
            updated_at: now,
        }
    }

    /// Live waiters (seen within [`WAITER_TTL`]).
    pub fn live_waiters(&self, now: DateTime<Utc>) -> impl Iterator<Item = (&String, &Waiter)> {
        self.waiting.iter().filter(move |(_, w)| now - w.seen_at <= WAITER_TTL)
    }

    /// Takes a slot for `run`'s next attempt, whose call ends within `call` (its lease), or
    /// places it among the waiters. A run that already holds the slot for that attempt keeps it
    /// (a duplicate message, or a retry of a start write whose answer was lost); a run whose slot
    /// of an earlier attempt may still be calling (its release was lost, or the attempt was
    /// ended early) waits for that slot's `until` first.
    pub fn take(&mut self, run_id: &str, run: &Run, call: Duration, now: DateTime<Utc>) -> Taken {
        let attempt = run.attempt + 1;
        let mut changed = false;
        if let Some(old) = self.slots.get_mut(run_id) {
            if old.attempt == attempt {
                // The attempt starts now, maybe long after the slot was taken (its taker died
                // before its start write): its call ends within `call` from now, not from then.
                let until = now + call;
                if until <= old.until {
                    return Taken::Slot { changed: false };
                }
                old.until = until;
                return Taken::Slot { changed: true };
            }
            if now < old.until + SKEW {
                let full = Full { running: self.slots.len(), max_running: self.max_running, ahead: 0 };
                return Taken::Wait { full, changed: false };
            }
            self.slots.remove(run_id);
            changed = true;
        }
        let expired: Vec<String> = self
            .waiting
            .iter()
            .filter(|(_, w)| now - w.seen_at > WAITER_TTL)
            .map(|(id, _)| id.clone())
            .collect();
        changed |= !expired.is_empty();
        for id in expired {
            self.waiting.remove(&id);
        }
        let order = (run.scheduled_at(), run_id);
        let ahead = self.older_waiters(run, run_id, now).len();
        let free = (self.max_running as usize).saturating_sub(self.slots.len());
        if ahead < free {
            self.waiting.remove(run_id);
            self.slots.insert(run_id.to_string(), Slot { attempt, taken_at: now, until: now + call });
            return Taken::Slot { changed: true };
        }
        let full = Full { running: self.slots.len(), max_running: self.max_running, ahead };
        match self.waiting.get_mut(run_id) {
            Some(waiter) if now - waiter.seen_at < WAITER_REFRESH => {}
            Some(waiter) => {
                waiter.seen_at = now;
                waiter.attempt = attempt;
                changed = true;
            }
            None => {
                let places = places(self.max_running);
                if self.waiting.len() >= places {
                    // Full of places: this run takes the youngest's place if it is older, else it
                    // waits without one (every placed waiter goes first anyway).
                    let youngest = self
                        .waiting
                        .iter()
                        .map(|(id, w)| (w.instant, id.clone()))
                        .max()
                        .filter(|(instant, id)| order < (*instant, id.as_str()));
                    let Some((_, youngest)) = youngest else { return Taken::Wait { full, changed } };
                    self.waiting.remove(&youngest);
                }
                let waiter = Waiter { attempt, instant: run.scheduled_at(), since: now, seen_at: now };
                self.waiting.insert(run_id.to_string(), waiter);
                changed = true;
            }
        }
        Taken::Wait { full, changed }
    }

    /// The live waiters placed before `run` (by instant, then id).
    pub fn older_waiters(&self, run: &Run, run_id: &str, now: DateTime<Utc>) -> Vec<String> {
        let order = (run.scheduled_at(), run_id);
        self.live_waiters(now)
            .filter(|(id, w)| id.as_str() != run_id && (w.instant, id.as_str()) < order)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Gives back `run_id`'s slot for `attempt`, if it still holds it; true if anything changed.
    pub fn release(&mut self, run_id: &str, attempt: u32) -> bool {
        if self.slots.get(run_id).is_some_and(|slot| slot.attempt == attempt) {
            self.slots.remove(run_id);
            return true;
        }
        false
    }

    /// Hands a free slot to the oldest live waiter whose attempt is known, in the same change:
    /// its slot is reserved until `reserve` from now (its start extends it to its call's end,
    /// [`Group::take`]), so the message that wakes it finds the slot its own and starts; if that
    /// message is lost, the run's own next look does. The waiter handed a slot: (run id,
    /// attempt). `None`: no free slot, or nobody to hand it to.
    pub fn hand_over(&mut self, now: DateTime<Utc>, reserve: Duration) -> Option<(String, u32)> {
        if self.slots.len() >= self.max_running as usize {
            return None;
        }
        let (_, next) = self
            .live_waiters(now)
            .filter(|(_, w)| w.attempt > 0)
            .map(|(id, w)| ((w.instant, id.clone()), id.clone()))
            .min()?;
        let waiter = self.waiting.remove(&next)?;
        let slot = Slot { attempt: waiter.attempt, taken_at: now, until: now + reserve };
        self.slots.insert(next.clone(), slot);
        Some((next, waiter.attempt))
    }
}

/// Whether the slot for `slot.attempt` is still its run's at `now`, from a fresh read of the run
/// (`None`: the run is gone): unless the run ended without ever starting that attempt, the
/// attempt's call may still be under way (`until` plus [`SKEW`] not passed), the run is about
/// to start that attempt (still waiting at the attempt before it), or runs it under a lease
/// live even by a clock [`SKEW`] ahead (an accepted attempt's heartbeats keep it).
pub fn slot_is_held(slot: &Slot, run: Option<&Run>, now: DateTime<Utc>) -> bool {
    let calling = now < slot.until + SKEW;
    let Some(run) = run else { return calling };
    if run.state.is_terminal() && run.attempt < slot.attempt {
        // It ended before the attempt started: no call was ever made with this slot.
        return false;
    }
    let waiting = matches!(run.state, RunState::Queued | RunState::Retrying);
    let about_to_start = waiting && run.attempt + 1 == slot.attempt;
    let running = run.state == RunState::Running
        && run.attempt == slot.attempt
        && run.lease_until.is_some_and(|lease| lease + SKEW > now);
    calling || about_to_start || running
}

/// How many waiters a group of `max_running` keeps places for, in order: twice its slots, and at
/// least [`MIN_WAITER_PLACES`].
pub fn places(max_running: u32) -> usize {
    (2 * max_running as usize).max(MIN_WAITER_PLACES)
}

impl Full {
    /// Whether the run that waits has a place in the group's order: one without is younger than
    /// every placed waiter, and cannot take a slot before a place frees for it.
    pub fn placed(&self) -> bool {
        self.ahead < places(self.max_running)
    }
}

/// Checks a group name: 1–64 letters, digits, `-`, `_`, `.`, not only dots.
pub fn valid_name(name: &str) -> bool {
    let ok_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    // Only dots (`.`, `..`) would be a path's dot segment: no URL could name the group.
    let only_dots = name.chars().all(|c| c == '.');
    !name.is_empty() && name.len() <= MAX_NAME_LEN && ok_chars && !only_dots
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::at;
    use crate::run::RunKey;
    use crate::run::transition::claim;

    const CALL: Duration = Duration::seconds(30);

    fn run(minute: u32) -> Run {
        let job = crate::fixtures::job(serde_json::json!({}));
        let instant = at(&format!("2026-01-01T00:{minute:02}:00Z"));
        claim(&job, RunKey::scheduled(instant), instant, instant, Duration::days(1))
    }

    /// A released slot is handed to the oldest live waiter at once, for the attempt it waits to
    /// start; its own look then finds the slot its own and starts.
    #[test]
    fn a_released_slot_is_handed_to_the_oldest_waiter() {
        let now = at("2026-01-01T01:00:00Z");
        let mut group = Group::new("o", "etl", 1, now);
        let (a, b, c) = (run(1), run(2), run(3));
        assert_eq!(group.take("a", &a, CALL, now), Taken::Slot { changed: true });
        assert!(matches!(group.take("c", &c, CALL, now), Taken::Wait { .. }));
        assert!(matches!(group.take("b", &b, CALL, now), Taken::Wait { .. }));
        assert_eq!(group.hand_over(now, CALL), None, "no free slot");
        assert!(group.release("a", 1));
        assert_eq!(group.hand_over(now, CALL), Some(("b".to_string(), 1)), "the oldest instant first");
        assert!(!group.waiting.contains_key("b"));
        assert_eq!(
            group.take("c", &c, CALL, now).clone(),
            Taken::Wait { full: Full { running: 1, max_running: 1, ahead: 0 }, changed: false }
        );
        assert_eq!(group.take("b", &b, CALL, now), Taken::Slot { changed: false }, "b's slot is its own");
        // A waiter an earlier version placed (its attempt unknown) is left to its own look.
        let mut old = Group::new("o", "old", 1, now);
        old.waiting.insert("x".into(), Waiter { attempt: 0, instant: now, since: now, seen_at: now });
        assert_eq!(old.hand_over(now, CALL), None);
        // A waiter that stopped looking is not handed a slot.
        let later = now + WAITER_TTL + Duration::seconds(1);
        let mut stale = Group::new("o", "stale", 1, now);
        stale.waiting.insert("y".into(), Waiter { attempt: 1, instant: now, since: now, seen_at: now });
        assert_eq!(stale.hand_over(later, CALL), None);
    }

    #[test]
    fn a_full_group_makes_runs_wait_and_frees_slots_to_the_oldest_first() {
        let now = at("2026-01-01T01:00:00Z");
        let mut group = Group::new("o", "etl", 1, now);
        let (a, b, c) = (run(1), run(2), run(3));
        assert_eq!(group.take("a", &a, CALL, now), Taken::Slot { changed: true });
        assert!(matches!(group.take("c", &c, CALL, now), Taken::Wait { changed: true, .. }));
        assert!(matches!(group.take("b", &b, CALL, now), Taken::Wait { changed: true, .. }));
        assert!(group.release("a", 1));
        // C looks first, but B's instant is older: C waits behind it.
        match group.take("c", &c, CALL, now) {
            Taken::Wait { full, changed } => {
                assert_eq!((full.running, full.ahead), (0, 1));
                assert!(!changed, "a place seen moments ago is not rewritten");
            }
            other => panic!("C took {other:?}"),
        }
        assert_eq!(group.take("b", &b, CALL, now), Taken::Slot { changed: true });
        assert!(group.waiting.contains_key("c") && !group.waiting.contains_key("b"));
    }

    #[test]
    fn a_waiter_that_stopped_looking_loses_its_place() {
        let now = at("2026-01-01T01:00:00Z");
        let mut group = Group::new("o", "etl", 1, now);
        group.take("a", &run(1), CALL, now);
        group.take("b", &run(2), CALL, now);
        group.release("a", 1);
        let later = now + WAITER_TTL + Duration::seconds(1);
        assert_eq!(group.take("c", &run(3), CALL, later), Taken::Slot { changed: true });
        assert!(group.waiting.is_empty());
    }

    #[test]
    fn a_slot_is_taken_once_per_attempt_and_released_only_by_its_attempt() {
        let now = at("2026-01-01T01:00:00Z");
        let mut group = Group::new("o", "etl", 1, now);
        let a = run(1);
        group.take("a", &a, CALL, now);
        assert_eq!(group.take("a", &a, CALL, now), Taken::Slot { changed: false });
        assert!(!group.release("a", 2));
        assert_eq!(group.slots.len(), 1);
        assert!(group.release("a", 1));
        assert!(group.slots.is_empty());
    }

    #[test]
    fn a_slot_taken_by_a_worker_that_died_is_timed_from_the_attempt_that_uses_it() {
        // Found by the simulator (seed 132 of `sim-groups`): a run started with a slot taken
        // minutes before kept that slot's `until`; cancelled by a `replace` run mid-call, its
        // slot was reclaimed while its call still ran, and a third call started.
        let now = at("2026-01-01T01:00:00Z");
        let mut group = Group::new("o", "etl", 1, now);
        let a = run(1);
        group.take("a", &a, CALL, now);
        let later = now + Duration::minutes(2);
        assert_eq!(group.take("a", &a, CALL, later), Taken::Slot { changed: true });
        assert_eq!(group.slots["a"].until, later + CALL);
        // It started attempt 1 with that slot, and was cancelled mid-call.
        let started = Run { state: RunState::Running, attempt: 1, ..a };
        let ended = crate::run::transition::cancelled(&started, "replaced", later);
        assert!(slot_is_held(&group.slots["a"], Some(&ended), later + CALL));
    }

    #[test]
    fn a_slot_is_held_while_its_call_may_run_its_attempt_is_about_to_start_or_its_lease_lives() {
        let now = at("2026-01-01T01:00:00Z");
        let slot = Slot { attempt: 1, taken_at: now, until: now + Duration::seconds(30) };
        let past_call = now + Duration::seconds(30) + SKEW;
        let queued = run(1);
        assert!(slot_is_held(&slot, Some(&queued), past_call), "about to start, however late");
        let running = Run {
            state: RunState::Running,
            attempt: 1,
            lease_until: Some(now + Duration::seconds(300)),
            ..queued.clone()
        };
        assert!(slot_is_held(&slot, Some(&running), past_call), "an accepted attempt's lease lives");
        let lease_over = now + Duration::seconds(300) + SKEW;
        assert!(!slot_is_held(&slot, Some(&running), lease_over), "lease expired, even for a fast clock");
        let retrying = Run { state: RunState::Retrying, ..running.clone() };
        assert!(slot_is_held(&slot, Some(&retrying), now + Duration::seconds(31)), "its call may still run");
        assert!(!slot_is_held(&slot, Some(&retrying), past_call), "the attempt is over");
        let ended = Run { state: RunState::Succeeded, ..running };
        assert!(!slot_is_held(&slot, Some(&ended), past_call));
        assert!(!slot_is_held(&slot, None, past_call));
        assert!(slot_is_held(&slot, None, now), "a run not read back yet still holds its call's slot");
    }

    #[test]
    fn a_slot_of_an_attempt_that_never_started_is_free_once_its_run_ended() {
        let now = at("2026-01-01T01:00:00Z");
        let slot = Slot { attempt: 1, taken_at: now, until: now + Duration::seconds(300) };
        let cancelled = Run { state: RunState::Cancelled, ..run(1) };
        assert!(!slot_is_held(&slot, Some(&cancelled), now), "cancelled before its start: no call");
        let ended_after = Run { state: RunState::Failed, attempt: 1, ..run(1) };
        assert!(slot_is_held(&slot, Some(&ended_after), now), "ended after its start: the call may run");
    }

    #[test]
    fn a_retry_waits_while_its_earlier_attempts_call_may_still_run() {
        let now = at("2026-01-01T01:00:00Z");
        let mut group = Group::new("o", "etl", 2, now);
        let first = run(1);
        assert_eq!(group.take("a", &first, CALL, now), Taken::Slot { changed: true });
        // Attempt 1 was ended early (a watchdog with a fast clock); its retry comes.
        let retry = Run { state: RunState::Retrying, attempt: 1, ..first };
        assert!(matches!(group.take("a", &retry, CALL, now + Duration::seconds(5)), Taken::Wait { .. }));
        let later = now + CALL + SKEW;
        assert_eq!(group.take("a", &retry, CALL, later), Taken::Slot { changed: true });
        assert_eq!(group.slots["a"].attempt, 2);
    }

    #[test]
    fn waiters_keep_a_bounded_number_of_places_for_the_oldest() {
        let now = at("2026-01-01T01:00:00Z");
        let mut group = Group::new("o", "etl", 1, now);
        group.take("holder", &run(0), CALL, now);
        for minute in 30..59 {
            group.take(&format!("r{minute}"), &run(minute), CALL, now);
        }
        assert_eq!(group.waiting.len(), MIN_WAITER_PLACES, "places are bounded");
        // An older run takes the youngest's place; a younger one waits without a place.
        assert!(matches!(group.take("old", &run(1), CALL, now), Taken::Wait { changed: true, .. }));
        assert!(group.waiting.contains_key("old") && !group.waiting.contains_key("r49"));
        assert!(matches!(group.take("young", &run(59), CALL, now), Taken::Wait { changed: false, .. }));
        assert!(!group.waiting.contains_key("young"));
    }

    #[test]
    fn a_group_is_used_by_the_jobs_naming_it_and_by_links_made_moments_ago() {
        let now = at("2026-01-01T01:00:00Z");
        let mut links = Links::default();
        links.jobs.insert("named".into(), Link { at: now - Duration::hours(1) });
        links.jobs.insert("being-created".into(), Link { at: now - Duration::seconds(5) });
        links.jobs.insert("failed-create".into(), Link { at: now - LINK_GRACE - Duration::seconds(1) });
        let named = BTreeSet::from(["named".to_string()]);
        assert_eq!(links.users(&named, now), vec!["being-created".to_string(), "named".to_string()]);
        assert!(Group::new("o", "etl", 1, now).version > 1, "versions start at the creation's milliseconds");
    }

    /// The ledger at its fullest — every slot taken and every waiter's place filled, by runs of
    /// long ids — stays within its budget, however many jobs name the group.
    #[test]
    fn a_full_ledger_stays_within_its_budget() {
        let now = at("2026-01-01T01:00:00Z");
        let mut group = Group::new(&"o".repeat(64), &"g".repeat(MAX_NAME_LEN), MAX_RUNNING, now);
        let id = |n: usize| format!("01jd{n:022}.20260101T010000Z.m.01jd{n:022}");
        for n in 0..MAX_RUNNING as usize {
            group.slots.insert(id(n), Slot { attempt: 99, taken_at: now, until: now + Duration::days(1) });
        }
        for n in 0..places(MAX_RUNNING) {
            let waiter = Waiter { attempt: 99, instant: now, since: now, seen_at: now };
            group.waiting.insert(id(1_000 + n), waiter);
        }
        let stored = serde_json::to_string(&group).unwrap().len();
        assert!(stored <= LEDGER_BUDGET, "{stored} bytes");
        assert!(stored > LEDGER_BUDGET / 2, "the budget is near what a full group takes: {stored}");
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("etl-nightly_1.a"));
        assert!(!valid_name(""));
        assert!(!valid_name("a b"));
        assert!(!valid_name(&"x".repeat(65)));
        assert!(!valid_name(".") && !valid_name(".."));
    }
}
