//! The invariants, checked after every step (on the runs the step wrote) and once the quiet
//! period is over (on everything):
//!
//! - `one run per instant`: at most one run per (job, scheduled instant), and a target called
//!   for one instant of a job by one run only;
//! - `one run per trigger request`: the tries of one trigger request (one idempotency key) make
//!   one run, and an acknowledged request makes one;
//! - `no lost instant`: every instant the job's schedule had while it was active has a run,
//!   unless the scheduler missed its minute and the job's catch-up policy drops it, or it came
//!   after the scheduled runs the job's `max_runs` allowed;
//! - `skips as policy says`: a SKIPPED run names a pause, a concurrency policy, a catch-up
//!   policy or a skip asked for that applies;
//! - `late runs follow the catch-up policy`: a scheduled run of a `catchup: skip` job never
//!   starts past its catch-up window (a run claimed on time for the start its schedule gives it:
//!   far into a long flexible window, hours after its instant);
//! - `every instant accounted once`: each job's instant ledger, from its creation to the end,
//!   lists every instant of its schedule and every scheduled run once, in order, and explains
//!   each instant it calls missed; no instant the tick recorded as dropped by the catch-up had a
//!   run already when the drop was recorded (an instant both run and told missed); an instant
//!   asked to be skipped, or that fell in a pause, never starts a run after it was asked;
//! - `every run ends`: once faults stop, every run is terminal within the quiet period;
//! - `state moves forward`: a run's attempt never goes down, an ended run never changes nor
//!   leaves an attempt open, a run never goes back to QUEUED;
//! - `no stale write`: the store never accepts a transition over a run, nor an update over a job
//!   (its version and `next_run_at`), that its writer did not read (checked by the fault layer as
//!   it happens), and an attempt recorded as succeeded or failed with a status was answered so by
//!   its own call;
//! - `one key, calls only for attempts`: every call of a run carries the same idempotency key
//!   (the run id), each attempt is called at most once, and only for an attempt recorded;
//! - `each event told once`: every event recorded on a run is published, and more than once only
//!   in the documented window (a crash or a lost answer between publish and mark), counted apart;
//! - `dead letters end only what waits for them`: the dead-letter handler ends a run only while
//!   it waits (QUEUED or RETRYING) for the very attempt the letter carries;
//! - `policies hold`: under `forbid` no run of a job starts while another is active, under
//!   `replace` none while another is running, in every seed and however close together they
//!   were handled (no allowance for a race); the target never has two calls of such a job at
//!   once (a replaced run's call is stopped before the next starts); a policy's skip or cancel
//!   is decided when the run is due, not a claim ahead;
//! - `children follow their parents`: a job with parents starts a run only once its parents'
//!   runs for that key have ended, runs under `all_success` only after they all succeeded, has a
//!   run for every key all its parents ended (handed over after it existed), and every run's
//!   `downstream` hand-over is done;
//! - `at most once`: a run of an `at_most_once` job (a delivery no edit changes) makes at most one
//!   call that may have reached its target: every call but a refused connection counts;
//! - `group limit`: at no virtual instant do more synchronous calls of a concurrency group's jobs
//!   run at the target than the group's `max_running` (a call runs from its arrival until its
//!   answer, its 202, or its worker's crash; checked after every step);
//! - `waits spend nothing`: every attempt a run of a group's job started was called, unless its
//!   starter crashed or was told its start write failed: waiting for a slot never starts (and so
//!   never spends) an attempt;
//! - `scheduled runs within the limit`: a job's count of scheduled runs (what `schedule.max_runs`
//!   counts: the runs claims of the schedule wrote, not manual or backfilled runs) never passes
//!   the limit of the version it was counted under, ends exactly equal to the runs it says it
//!   holds (none counted twice, none missed), and a job that had a limit in every version has no
//!   more scheduled runs than the largest.

use crate::ledger::{Advanced, Answered, Observed, Told};
use crate::world::Simulation;
use chrono::{DateTime, Duration, Utc};
use futures::FutureExt;
use std::collections::{BTreeMap, BTreeSet};
use sundial_domain::job::{CatchupPolicy, ConcurrencyPolicy, Delivery, Job, JobId, TriggerRule};
use sundial_domain::ports::store::{Catalogue, RunHistory};
use sundial_domain::run::{Outcome, Run, RunEventKind, RunKey, RunState};

/// A broken promise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub detail: String,
    /// The job and the run (encoded key) it concerns, for the trace.
    pub job: Option<String>,
    pub run: Option<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

fn violation(invariant: &'static str, detail: String, run: Option<&Run>) -> Violation {
    Violation { invariant, detail, job: run.map(|r| r.job_id.to_string()), run: run.map(|r| r.key.encode()) }
}

/// A violation of `invariant`: `what` was at the target at once, at the peak's instant.
fn at_once(invariant: &'static str, what: String, peak: &crate::ledger::GroupPeak) -> Violation {
    let last = peak.calls.last().and_then(|(id, _)| sundial_domain::run::RunId::parse(id));
    let calls: Vec<String> = peak.calls.iter().map(|(id, attempt)| format!("{id} #{attempt}")).collect();
    Violation {
        invariant,
        detail: format!(
            "{what} at the target at once at {}: {}",
            peak.at.format("%H:%M:%S%.3f"),
            calls.join(", ")
        ),
        job: last.as_ref().map(|r| r.job_id.to_string()),
        run: last.map(|r| r.key.encode()),
    }
}

/// What the checker remembers of a run between steps.
#[derive(Debug, Clone)]
struct Seen {
    state: RunState,
    attempt: u32,
    attempts: usize,
}

/// Checks the invariants as the world moves.
#[derive(Debug, Default)]
pub struct Checker {
    seen: BTreeMap<(JobId, RunKey), Seen>,
    pub violations: Vec<Violation>,
    /// The peak of a group's calls already reported as a violation.
    group_peak_reported: usize,
    /// The `forbid` and `replace` jobs whose overlapping calls were already reported.
    fenced_reported: std::collections::BTreeSet<String>,
}

/// The figures of one simulation.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub runs: usize,
    pub by_state: BTreeMap<String, usize>,
    /// Scheduled instants the oracle expected a run for (outside pauses), with or without one.
    pub expected_instants: usize,
    pub calls: usize,
    /// Events told twice in the documented window between publish and mark.
    pub told_twice_in_window: usize,
    pub events: usize,
    /// The group's `max_running` and the most of its calls at the target at once.
    pub group: Option<(u32, usize)>,
    /// Calls refused before they left (the target never reached).
    pub refused_calls: usize,
    /// Work calls started elsewhere (followed by looks): how many, how many a look saw end, and
    /// how many were stopped.
    pub works: (usize, usize, usize),
    /// Runs of `at_most_once` jobs, and how many of them ended `at_most_once:` (not repeated).
    pub at_most_once_runs: (usize, usize),
    /// Jobs whose schedule an advance ended at their `max_runs`.
    pub ended_at_limit: usize,
    /// The workload's jobs with a union (`schedule.any`), with a DST policy (on the cron or on a
    /// cron of the union), and with a flexible window over 15 minutes, as created.
    pub unions: usize,
    pub dst_policies: usize,
    pub long_windows: usize,
    /// Jobs whose cron has a business calendar.
    pub calendars: usize,
    /// Of those, jobs whose calendar is the workload's named one, and the copies of its edits
    /// that reached them (job versions holding a newer copy).
    pub named_calendars: (usize, usize),
    /// Scheduled runs due more than 15 minutes after their instant (far into a long window),
    /// and how many of them started.
    pub far_in_window: (usize, usize),
}

impl Checker {
    /// After a step: the runs it wrote.
    pub fn after_step(&mut self, world: &Simulation) {
        let (touched, stale) = {
            let mut ledger = world.ledger.get();
            (std::mem::take(&mut ledger.touched), std::mem::take(&mut ledger.violations))
        };
        for detail in stale {
            self.violations.push(violation("no stale write", detail, None));
        }
        self.group_limit(world);
        self.one_call_per_fenced_job(world);
        for (job_id, key) in touched {
            let Some(Ok(Some(run))) = world.stores.runs.get(&job_id, &key).now_or_never() else { continue };
            let before = self.seen.insert(
                (job_id.clone(), key.clone()),
                Seen { state: run.state, attempt: run.attempt, attempts: run.attempts.len() },
            );
            if let Some(before) = &before {
                self.forward(before, &run);
                self.decided_at_start(world, before, &run);
                self.dead_lettered(world, before, &run);
            }
            let started = run.state == RunState::Running
                && before.as_ref().is_none_or(|b| b.state != RunState::Running || b.attempt != run.attempt);
            if started {
                self.policy(world, &run);
                if run.attempt == 1 {
                    self.after_parents(world, &run);
                }
            }
        }
    }

    /// Never calls of two runs of one `forbid` or `replace` job at the target at once: a run
    /// starts only once the call of the run before it is over, a replaced one's included. (Two
    /// attempts of one run may overlap when a watchdog whose clock runs ahead judges a lease
    /// expired while its call goes on: the lease margin covers 30 s of skew, the simulator
    /// draws up to 60 s between two processes.)
    fn one_call_per_fenced_job(&mut self, world: &Simulation) {
        let peaks: Vec<(String, crate::ledger::GroupPeak)> = world
            .ledger
            .get()
            .group_peaks
            .iter()
            .filter(|(key, peak)| key.starts_with("job ") && peak.count > 1)
            .map(|(key, peak)| (key.clone(), peak.clone()))
            .collect();
        for (key, peak) in peaks {
            if self.fenced_reported.insert(key.clone()) {
                let what = format!("calls of {} runs of {key}", peak.count);
                self.violations.push(at_once("policies hold", what, &peak));
            }
        }
    }

    /// Never more calls of the group's jobs at the target at once than its `max_running`.
    fn group_limit(&mut self, world: &Simulation) {
        let Some((name, max_running)) = &world.workload.group else { return };
        let Some(peak) = world.ledger.get().group_peaks.get(name).cloned() else { return };
        if peak.count <= *max_running as usize || peak.count <= self.group_peak_reported {
            return;
        }
        self.group_peak_reported = peak.count;
        let what = format!("{} calls of group `{name}` (max_running {max_running})", peak.count);
        self.violations.push(at_once("group limit", what, &peak));
    }

    /// A run's state only moves forward.
    fn forward(&mut self, before: &Seen, run: &Run) {
        let broken = if run.attempt < before.attempt {
            Some(format!("attempt went from {} to {}", before.attempt, run.attempt))
        } else if before.state.is_terminal()
            && (run.state != before.state || run.attempts.len() != before.attempts)
        {
            Some(format!(
                "ended {} but changed to {} with {} attempts",
                before.state,
                run.state,
                run.attempts.len()
            ))
        } else if run.state.is_terminal() && run.attempts.last().is_some_and(|a| a.outcome.is_none()) {
            Some(format!("ended {} with attempt {} still open", run.state, run.attempt))
        } else if before.state != RunState::Queued && run.state == RunState::Queued {
            Some(format!("went back from {} to QUEUED", before.state))
        } else {
            None
        };
        if let Some(detail) = broken {
            self.violations.push(violation(
                "state moves forward",
                format!("run {}: {detail}", run.id()),
                Some(run),
            ));
        }
    }

    /// A concurrency policy is decided when a run is about to start (invariant: policies decided under the start fence), not ahead: a
    /// run skipped under `forbid` or `replace` is skipped once it is due, and a run cancelled to
    /// make way under `replace` is cancelled once the run replacing it is due (both give the
    /// deciding worker's clock its 30 s of skew, and as much again).
    fn decided_at_start(&mut self, world: &Simulation, before: &Seen, run: &Run) {
        if before.state == run.state {
            return;
        }
        let reason = run.reason.as_deref().unwrap_or_default();
        let due = match run.state {
            // Due at its start (its instant plus its window's or jitter's offset).
            RunState::Skipped if reason.starts_with("concurrency ") => Some(run.due_at),
            RunState::Cancelled => reason
                .strip_prefix("concurrency replace: replaced by run ")
                .and_then(sundial_domain::run::RunId::parse)
                .map(|by| by.key.instant),
            _ => None,
        };
        let now = world.sim.now();
        if let Some(due) = due.filter(|due| now < *due - Duration::seconds(60)) {
            self.violations.push(violation(
                "policies hold",
                format!(
                    "run {} {} at {now}, {} s before the run it concerns was due ({due}): `{reason}` decided ahead of the start",
                    run.id(),
                    run.state,
                    (due - now).num_seconds()
                ),
                Some(run),
            ));
        }
    }

    /// A run the dead-letter handler ended was waiting for the very attempt the dead letter carries
    /// (QUEUED or RETRYING, that attempt not started): a letter never ends a live or later attempt.
    fn dead_lettered(&mut self, world: &Simulation, before: &Seen, run: &Run) {
        if before.state == run.state || !run.reason.as_deref().is_some_and(|r| r.starts_with("dead-lettered"))
        {
            return;
        }
        let letter = world.ledger.get().dead_letter.clone();
        let waiting = matches!(before.state, RunState::Queued | RunState::Retrying);
        let fits = letter.as_ref().is_some_and(|(job, key, attempt)| {
            job == run.job_id.as_str() && *key == run.key.encode() && *attempt == before.attempt + 1
        });
        if !(waiting && fits) {
            self.violations.push(violation(
                "dead letters end only what waits for them",
                format!(
                    "run {} went from {} (attempt {}) to {} on a dead letter for attempt {:?}",
                    run.id(),
                    before.state,
                    before.attempt,
                    run.state,
                    letter.map(|l| l.2)
                ),
                Some(run),
            ));
        }
    }

    /// When a run starts: under `forbid` no other run of the job is active (RUNNING or
    /// RETRYING), under `replace` no older run is RUNNING beside it, whoever handled them and
    /// however close together (every run of the job is looked at, not a window of them).
    fn policy(&mut self, world: &Simulation, run: &Run) {
        let Some(Ok(Some(job))) = world.stores.jobs.get(&run.job_id).now_or_never() else { return };
        let policy = job.document.concurrency;
        if policy == ConcurrencyPolicy::Allow {
            return;
        }
        let runs = world.stores.runs.all();
        let other = runs.iter().find(|other| {
            other.job_id == run.job_id
                && other.key != run.key
                && match policy {
                    ConcurrencyPolicy::Forbid => other.state.is_active(),
                    _ => other.state == RunState::Running,
                }
        });
        if let Some(other) = other {
            let detail = format!(
                "{policy:?}: run {} started (attempt {}) while run {} was {} (attempt {})",
                run.id(),
                run.attempt,
                other.id(),
                other.state,
                other.attempt
            );
            self.violations.push(violation("policies hold", detail, Some(run)));
        }
    }

    /// Once the quiet period is over: everything.
    pub fn at_quiescence(&mut self, world: &Simulation) -> Summary {
        let runs = world.stores.runs.all();
        let observed = world.ledger.get();
        let mut summary = Summary {
            runs: runs.len(),
            calls: observed.hits.len(),
            refused_calls: observed.hits.iter().filter(|h| h.answered == Answered::Refused).count(),
            works: (
                observed.works.len(),
                observed.works.values().filter(|w| w.reported.is_some()).count(),
                observed.works.values().filter(|w| w.stopped_at.is_some()).count(),
            ),
            ..Summary::default()
        };
        summary.group =
            world.workload.group.as_ref().map(|(name, max_running)| {
                (*max_running, observed.group_peaks.get(name).map_or(0, |p| p.count))
            });
        for run in &runs {
            if last_version(&observed, &run.job_id)
                .is_some_and(|j| j.document.delivery == Delivery::AtMostOnce)
            {
                summary.at_most_once_runs.0 += 1;
                if run.reason.as_deref().is_some_and(|r| r.starts_with("at_most_once:")) {
                    summary.at_most_once_runs.1 += 1;
                }
            }
        }
        for run in &runs {
            *summary.by_state.entry(run.state.to_string()).or_default() += 1;
            if !run.state.is_terminal() {
                self.violations.push(violation(
                    "every run ends",
                    format!(
                        "run {} is still {} (attempt {}) at the end of the quiet period",
                        run.id(),
                        run.state,
                        run.attempt
                    ),
                    Some(run),
                ));
            }
        }
        self.one_run_per_instant(&runs, &observed);
        summary.expected_instants = self.no_lost_instant(world, &runs, &observed);
        self.skips(&runs, &observed);
        self.late_starts(&runs, &observed);
        self.instants_accounted(world, &runs);
        self.calls(&runs, &observed);
        let (events, twice) = self.events(world, &runs, &observed);
        summary.events = events;
        summary.told_twice_in_window = twice;
        self.triggers(&runs, &observed);
        self.workflows(world, &runs);
        self.at_most_once(&runs, &observed);
        self.waits_spend_nothing(&runs, &observed);
        self.started_work_ends(&runs, &observed);
        self.within_max_runs(world, &runs, &observed);
        self.audited(world, &runs, &observed);
        for document in &world.workload.documents {
            let schedule = &document["schedule"];
            let entries = schedule.get("any").and_then(|a| a.as_array());
            summary.unions += usize::from(entries.is_some());
            let dst = schedule.get("dst").is_some()
                || entries.is_some_and(|e| e.iter().any(|e| e.get("dst").is_some()));
            summary.dst_policies += usize::from(dst);
            let long = document.get("flexible_window_s").and_then(|w| w.as_u64()).is_some_and(|w| w > 900);
            summary.long_windows += usize::from(long);
            summary.calendars += usize::from(schedule.get("calendar").is_some());
            summary.named_calendars.0 += usize::from(schedule.pointer("/calendar/name").is_some());
        }
        for versions in observed.versions.values() {
            let held = versions.iter().filter_map(|(_, job)| {
                let job = job.as_ref()?;
                sundial_domain::named_calendar::held_versions(&job.document)
                    .get(crate::workload::CALENDAR)
                    .copied()
            });
            let held: Vec<u64> = held.collect();
            summary.named_calendars.1 += held.windows(2).filter(|w| w[1] > w[0]).count();
        }
        // Claimed ahead of a start far into its window (not a backfill's or a catch-up's run, due
        // when made).
        let reach = Duration::seconds(i64::from(sundial_domain::limits::MAX_MESSAGE_DELAY_S));
        let far = |r: &&Run| {
            r.key.manual.is_none()
                && r.due_at - r.scheduled_at() > reach
                && r.due_at - r.created_at > Duration::seconds(60)
        };
        for run in runs.iter().filter(far) {
            summary.far_in_window.0 += 1;
            summary.far_in_window.1 += usize::from(!run.attempts.is_empty());
        }
        let ended = observed.advances.iter().filter(|a| a.ended_by_limit()).map(|a| &a.job_id);
        summary.ended_at_limit = ended.collect::<BTreeSet<_>>().len();
        summary
    }

    /// The parents' runs for `key` that a child's run waits for: all parents' for a scheduled
    /// instant; for a workflow run started by hand, those of the parents it reached.
    fn parent_runs<'a>(parents: &[JobId], key: &RunKey, runs: &'a [Run]) -> Option<Vec<&'a Run>> {
        let found: Vec<&Run> =
            parents.iter().filter_map(|p| runs.iter().find(|r| &r.job_id == p && &r.key == key)).collect();
        match key.manual {
            None if found.len() < parents.len() => None,
            _ if found.is_empty() => None,
            _ => Some(found),
        }
    }

    /// When a run of a job with parents starts its first attempt, each parent's run for its key
    /// has ended, and under `all_success` succeeded.
    fn after_parents(&mut self, world: &Simulation, run: &Run) {
        let Some(Ok(Some(job))) = world.stores.jobs.get(&run.job_id).now_or_never() else { return };
        if !job.has_parents() {
            return;
        }
        let runs = world.stores.runs.all();
        let parents = Self::parent_runs(&job.parents(), &run.key, &runs).unwrap_or_default();
        let unready = parents.iter().find(|p| {
            !p.state.is_terminal()
                || (job.document.trigger_rule == TriggerRule::AllSuccess && p.state != RunState::Succeeded)
        });
        let missing = run.key.manual.is_none() && parents.len() < job.parents().len();
        if let Some(detail) = unready
            .map(|p| format!("parent run {} is {}", p.id(), p.state))
            .or_else(|| missing.then(|| "a parent has no run for its instant".to_string()))
        {
            self.violations.push(violation(
                "children follow their parents",
                format!("run {} started its first attempt while {detail}", run.id()),
                Some(run),
            ));
        }
    }

    /// Every key all of a child's parents ended after the child existed has a run of the child,
    /// and every `downstream` hand-over is done.
    fn workflows(&mut self, world: &Simulation, runs: &[Run]) {
        for run in runs {
            if run.events.iter().any(|e| e.kind == RunEventKind::DOWNSTREAM && !e.sent) {
                self.violations.push(violation(
                    "children follow their parents",
                    format!("run {} ended, its end never handed to its children", run.id()),
                    Some(run),
                ));
            }
        }
        let children: Vec<Job> = world.stores.jobs.all().into_iter().filter(Job::has_parents).collect();
        for child in children {
            let parents = child.parents();
            let keys: BTreeSet<&RunKey> =
                runs.iter().filter(|r| parents.contains(&r.job_id)).map(|r| &r.key).collect();
            for key in keys {
                let Some(ended) = Self::parent_runs(&parents, key, runs) else { continue };
                // Handed over once the last parent's run ended, with the child linked by then
                // (clocks apart by up to 60 s).
                let last = ended.iter().map(|r| r.updated_at).max();
                let in_time = last.is_some_and(|at| at > child.created_at + Duration::seconds(61));
                if !in_time || ended.iter().any(|r| !r.state.is_terminal()) {
                    continue;
                }
                if !runs.iter().any(|r| r.job_id == child.id && &r.key == key) {
                    self.violations.push(Violation {
                        invariant: "children follow their parents",
                        detail: format!(
                            "job {} ({}) has no run for {} though its parents' runs ended",
                            child.document.name,
                            child.id,
                            key.encode()
                        ),
                        job: Some(child.id.to_string()),
                        run: Some(key.encode()),
                    });
                }
            }
        }
    }

    fn one_run_per_instant(&mut self, runs: &[Run], observed: &Observed) {
        let mut per_instant: BTreeMap<(&JobId, DateTime<Utc>), Vec<&Run>> = BTreeMap::new();
        for run in runs.iter().filter(|r| r.key.manual.is_none()) {
            per_instant.entry((&run.job_id, run.scheduled_at())).or_default().push(run);
        }
        for ((job, at), found) in per_instant.iter().filter(|(_, runs)| runs.len() > 1) {
            self.violations.push(violation(
                "one run per instant",
                format!("job {job} has {} runs for {at}", found.len()),
                found.first().copied(),
            ));
        }
        let mut called: BTreeMap<(&str, DateTime<Utc>), BTreeSet<&str>> = BTreeMap::new();
        for hit in observed.hits.iter().filter(|h| h.run_id.ends_with(".s")) {
            called.entry((&hit.job_id, hit.scheduled_at)).or_default().insert(&hit.run_id);
        }
        for ((job, at), ids) in called.iter().filter(|(_, ids)| ids.len() > 1) {
            self.violations.push(Violation {
                invariant: "one run per instant",
                detail: format!("job {job}'s target was called for {at} by {} runs: {ids:?}", ids.len()),
                job: Some(job.to_string()),
                run: None,
            });
        }
    }

    /// Every instant each version of each job had while active has a run; returns how many
    /// instants were expected.
    fn no_lost_instant(&mut self, world: &Simulation, runs: &[Run], observed: &Observed) -> usize {
        let have: BTreeSet<(&JobId, DateTime<Utc>)> =
            runs.iter().filter(|r| r.key.manual.is_none()).map(|r| (&r.job_id, r.scheduled_at())).collect();
        let horizon = world.workload.horizon;
        let mut expected = 0;
        for (job_id, versions) in &observed.versions {
            let last = versions.iter().rev().find_map(|(_, job)| job.as_ref());
            // Where the window of the version before began: a version that changes no instants
            // (a skip, a retry setting) keeps the allowance the change before it was given.
            let mut window_from: Option<DateTime<Utc>> = None;
            for (i, (written, job)) in versions.iter().enumerate() {
                let Some(job) = job else { continue };
                let previous = i.checked_sub(1).and_then(|p| versions[p].1.as_ref());
                let from = match previous {
                    None => job.created_at,
                    // No instant before the job's creation, as its own (skewed) clock read it.
                    Some(before) if !changes_instants(before, job) => {
                        (*written).max(job.created_at).max(window_from.unwrap_or(job.created_at))
                    }
                    Some(_) => *written + Duration::seconds(60),
                };
                window_from = Some(from);
                if job.document.paused {
                    continue;
                }
                let next = versions.get(i + 1);
                let until = match next {
                    Some((at, Some(after))) if !changes_instants(job, after) => *at,
                    Some((at, _)) => *at - Duration::seconds(60),
                    None => horizon,
                };
                let Ok(Some(schedule)) = sundial_domain::validation::stored_schedule(job) else { continue };
                let mut cursor = schedule.first_at_or_after(from);
                while let Some(t) = cursor.filter(|t| *t <= until.min(horizon)) {
                    cursor = schedule.next_after(t);
                    if last.is_some_and(|j| paused_near(j, t)) {
                        continue;
                    }
                    if past_limit(job, t, &observed.advances) {
                        continue;
                    }
                    expected += 1;
                    if have.contains(&(job_id, t)) {
                        continue;
                    }
                    // A change written before any tick had processed the minute the instant could
                    // first be claimed in (its own, or for a start far into a long flexible
                    // window, the minute its start came within reach) governs it: an edit of
                    // the schedule, a pause or a deletion takes effect when written, and a
                    // lagging tick's owed instants go with it.
                    let change = versions[i + 1..]
                        .iter()
                        .find(|(_, after)| after.as_ref().is_none_or(|after| changes_instants(job, after)));
                    let claimable = job.claimable_from(t);
                    let superseded = change.is_some_and(|(at, _)| {
                        processed_at(observed, claimable).is_none_or(|processed| processed > *at)
                    });
                    if superseded {
                        continue;
                    }
                    if missed(observed, t) {
                        let edited = versions.iter().any(|(at, v)| {
                            *at > t - Duration::seconds(30)
                                && *at <= reached_at(observed, t).unwrap_or(horizon + Duration::days(1))
                                && v.as_ref().is_none_or(|v| changes_instants(job, v))
                        });
                        if job.document.catchup != CatchupPolicy::All || edited {
                            continue;
                        }
                    }
                    self.violations.push(Violation {
                        invariant: "no lost instant",
                        detail: format!(
                            "job {job_id} ({}) has no run for {t} ({:?} catch-up)",
                            job.document.name, job.document.catchup
                        ),
                        job: Some(job_id.to_string()),
                        run: Some(RunKey::scheduled(t).encode()),
                    });
                }
            }
        }
        expected
    }

    /// Every job's ledger accounts for each instant once, and no dropped instant had a run when
    /// its drop was recorded (an allowance for the actors' clocks).
    fn instants_accounted(&mut self, world: &Simulation, runs: &[Run]) {
        use sundial_domain::ledger::{self, InstantOutcome as Seen};
        let skew = Duration::seconds(61);
        let now = world.sim.now();
        for job in world.stores.jobs.all() {
            let Ok(schedule) = sundial_domain::validation::stored_schedule(&job) else { continue };
            let own: Vec<Run> = runs.iter().filter(|r| r.job_id == job.id).cloned().collect();
            let wrong = |detail: String| Violation {
                invariant: "every instant accounted once",
                detail: format!("job {} ({}): {detail}", job.id, job.document.name),
                job: Some(job.id.to_string()),
                run: None,
            };
            let (from, to) = (job.created_at - Duration::hours(1), now);
            let (instants, more) = match &schedule {
                Some(s) => ledger::instants_in(s, from, to, usize::MAX),
                None => (Vec::new(), false),
            };
            let page = ledger::account(
                &job,
                schedule.as_ref(),
                &instants,
                more,
                &own,
                &ledger::UpstreamAt::new(),
                to,
                now,
            );
            let listed: Vec<DateTime<Utc>> = page.instants.iter().map(|e| e.at).collect();
            let mut want: BTreeSet<DateTime<Utc>> = instants.iter().copied().collect();
            want.extend(
                own.iter().filter(|r| r.key.manual.is_none() && r.key.instant >= from).map(|r| r.key.instant),
            );
            if listed.windows(2).any(|w| w[0] >= w[1])
                || listed.iter().copied().collect::<BTreeSet<_>>() != want
            {
                self.violations.push(wrong(format!(
                    "the ledger lists {} instants, not each of the {} once in order",
                    listed.len(),
                    want.len()
                )));
            }
            for entry in &page.instants {
                let has_run = own.iter().any(|r| r.key.manual.is_none() && r.key.instant == entry.at);
                let unexplained = entry.outcome == Seen::Missed && (has_run || entry.reason.is_none());
                if unexplained {
                    self.violations.push(wrong(format!("{} is missed with a run or no reason", entry.at)));
                }
            }
            let first_start = |at: DateTime<Utc>| {
                let run = own.iter().find(|r| r.key.manual.is_none() && r.key.instant == at)?;
                Some((run, run.attempts.first()?.started_at))
            };
            for skip in &job.skips {
                if let Some((run, started)) = first_start(skip.at).filter(|(_, s)| *s > skip.asked_at + skew)
                {
                    self.violations.push(wrong(format!(
                        "run {} started at {started}, though its instant was asked to be skipped at {}",
                        run.id(),
                        skip.asked_at
                    )));
                }
            }
            for pause in &job.pauses {
                let during = |r: &Run| {
                    r.key.manual.is_none()
                        && r.key.instant > pause.from + skew
                        && pause.to.is_none_or(|to| r.key.instant + skew < to && r.created_at < to)
                };
                let started = own.iter().filter(|r| during(r)).find_map(|r| {
                    r.attempts.first().map(|a| (r, a.started_at)).filter(|(_, s)| *s > pause.from + skew)
                });
                if let Some((run, at)) = started {
                    self.violations.push(wrong(format!(
                        "run {} of an instant in the pause from {} started at {at}",
                        run.id(),
                        pause.from
                    )));
                }
            }
            for gap in &job.gaps {
                if !matches!(gap.cause, sundial_domain::job::GapCause::CatchupDropped { .. }) {
                    continue;
                }
                let ran = own.iter().find(|r| {
                    r.key.manual.is_none()
                        && (gap.from..=gap.to).contains(&r.key.instant)
                        && r.created_at + skew < gap.at
                });
                if let Some(run) = ran {
                    self.violations.push(wrong(format!(
                        "run {} (claimed {}) is in the instants the catch-up dropped at {}, from {} to {}",
                        run.id(),
                        run.created_at,
                        gap.at,
                        gap.from,
                        gap.to
                    )));
                }
            }
        }
    }

    /// A scheduled run of a `catchup: skip` job never starts past its catch-up window (the
    /// policy in force from its due time to its start; an allowance for the actors' clocks).
    fn late_starts(&mut self, runs: &[Run], observed: &Observed) {
        let skew = Duration::seconds(61);
        for run in runs.iter().filter(|r| r.key.manual.is_none()) {
            let Some(started) = run.attempts.first().map(|a| a.started_at) else { continue };
            let Some(versions) = observed.versions.get(&run.job_id) else { continue };
            let from = run.due_at - skew;
            let in_force = versions.iter().rev().find(|(at, _)| *at <= from).into_iter();
            let during = versions.iter().filter(|(at, _)| *at > from && *at <= started);
            let mut policies = in_force.chain(during).map(|(_, job)| job.as_ref());
            let window = |job: &Job| {
                Duration::seconds(i64::from(
                    job.document.catchup_window_s.unwrap_or(sundial_domain::job::DEFAULT_CATCHUP_WINDOW_S),
                ))
            };
            // Claimed on time for the start its schedule gives it (its instant plus the offset of
            // its window or jitter: a run far into a long window is claimed hours after its
            // instant), not its own `due_at`, which a backfill sets when made.
            let scheduled_start = |job: &Job| run.scheduled_at() + job.start_offset(run.scheduled_at());
            let skipping = policies.all(|job| {
                job.is_some_and(|j| {
                    j.document.catchup == CatchupPolicy::Skip
                        && run.created_at <= scheduled_start(j) + window(j)
                        && started - run.due_at > window(j) + skew
                })
            });
            if skipping && versions.iter().any(|(at, _)| *at <= from) {
                self.violations.push(violation(
                    "late runs follow the catch-up policy",
                    format!(
                        "run {} of a catchup: skip job started at {started}, {} s after it was due",
                        run.id(),
                        (started - run.due_at).num_seconds()
                    ),
                    Some(run),
                ));
            }
        }
    }

    fn skips(&mut self, runs: &[Run], observed: &Observed) {
        for run in runs.iter().filter(|r| r.state == RunState::Skipped) {
            let reason = run.reason.clone().unwrap_or_default();
            if reason.starts_with("upstream_failed") {
                // A parent's run for the same key ended other than SUCCEEDED.
                let failed = runs.iter().any(|p| {
                    p.key == run.key
                        && p.job_id != run.job_id
                        && p.state.is_terminal()
                        && p.state != RunState::Succeeded
                        && reason.contains(p.job_id.as_str())
                });
                if !failed {
                    self.violations.push(violation(
                        "skips as policy says",
                        format!("run {} skipped: {reason}, but that parent's run did not fail", run.id()),
                        Some(run),
                    ));
                }
                continue;
            }
            if reason.starts_with("upstream_missing") {
                // The parent it names never had a run for the key: not by the skip, not after.
                let ran = runs.iter().any(|p| {
                    p.key == run.key && p.job_id != run.job_id && reason.contains(p.job_id.as_str())
                });
                if ran {
                    self.violations.push(violation(
                        "skips as policy says",
                        format!("run {} skipped: {reason}, but that parent has a run for it", run.id()),
                        Some(run),
                    ));
                }
                continue;
            }
            let job =
                observed.versions.get(&run.job_id).and_then(|v| v.iter().rev().find_map(|(_, j)| j.as_ref()));
            let fits = if reason.contains("paused") {
                job.is_none_or(|j| {
                    // Written by the API's clock, compared with a worker's: both off by up to 30 s.
                    let skew = Duration::seconds(61);
                    j.pauses.iter().any(|p| {
                        p.from <= run.updated_at + skew
                            && p.to.is_none_or(|to| to + skew >= run.scheduled_at())
                    })
                })
            } else if reason.starts_with("skipped on request") {
                // Asked for: some version of the job holds the skip of this instant.
                let versions = observed.versions.get(&run.job_id).into_iter().flatten();
                let mut jobs = versions.filter_map(|(_, j)| j.as_ref());
                jobs.any(|j| j.skip_at(run.scheduled_at()).is_some())
            } else if reason.starts_with("catchup ") {
                // Late past its window: only a job that does not run every late run skips one.
                job.is_none_or(|j| j.document.catchup != CatchupPolicy::All)
            } else {
                reason.starts_with("concurrency forbid") || reason.starts_with("concurrency replace")
            };
            if !fits {
                self.violations.push(violation(
                    "skips as policy says",
                    format!("run {} skipped: {reason}", run.id()),
                    Some(run),
                ));
            }
        }
    }

    fn calls(&mut self, runs: &[Run], observed: &Observed) {
        let by_id: BTreeMap<String, &Run> = runs.iter().map(|r| (r.id().to_string(), r)).collect();
        let mut per_attempt: BTreeMap<(&str, u32), Vec<Answered>> = BTreeMap::new();
        for hit in &observed.hits {
            per_attempt.entry((&hit.run_id, hit.attempt)).or_default().push(hit.answered);
            let run = by_id.get(&hit.run_id).copied();
            if hit.idempotency_key != hit.run_id {
                self.violations.push(violation(
                    "one key, calls only for attempts",
                    format!("run {} called with idempotency key {}", hit.run_id, hit.idempotency_key),
                    run,
                ));
            }
            let recorded = run.is_some_and(|r| r.attempts.iter().any(|a| a.n == hit.attempt));
            if !recorded {
                self.violations.push(violation(
                    "one key, calls only for attempts",
                    format!("run {} called for attempt {} that is not recorded", hit.run_id, hit.attempt),
                    run,
                ));
            }
        }
        for ((run_id, attempt), answers) in per_attempt.iter().filter(|(_, a)| a.len() > 1) {
            self.violations.push(violation(
                "one key, calls only for attempts",
                format!("run {run_id} attempt {attempt} called {} times", answers.len()),
                by_id.get(*run_id).copied(),
            ));
        }
        for run in runs {
            let id = run.id().to_string();
            for attempt in &run.attempts {
                let answers = per_attempt.get(&(id.as_str(), attempt.n)).cloned().unwrap_or_default();
                let completed = |ok: bool| {
                    observed.completed.iter().any(|(r, n, s)| r == &id && *n == attempt.n && *s == ok)
                };
                // Started work ends as the work ended, read by a look: succeeded only if the
                // work did, by itself.
                let work = attempt.handle.as_ref().and_then(|h| observed.works.get(h));
                if answers.contains(&Answered::Started) {
                    let consistent = match attempt.outcome {
                        Some(Outcome::Succeeded) => work.is_some_and(|w| w.reported == Some(true)),
                        _ => true,
                    };
                    if !consistent {
                        self.violations.push(violation(
                            "no stale write",
                            format!("run {id} attempt {} recorded SUCCEEDED but its work did not succeed: {work:?}", attempt.n),
                            Some(run),
                        ));
                    }
                    continue;
                }
                // A 202 is ended by its callback; any other call by its answer.
                let consistent = match (attempt.outcome, answers.contains(&Answered::Accepted)) {
                    (Some(Outcome::Succeeded), true) => completed(true),
                    (Some(Outcome::Failed), true) => completed(false),
                    (Some(Outcome::Succeeded), false) => answers.contains(&Answered::Ok),
                    (Some(Outcome::Failed), false) => match attempt.status_code {
                        Some(status) => answers.contains(&Answered::Failed(status)),
                        // A connection refused: no status.
                        None => answers.contains(&Answered::Refused),
                    },
                    _ => true,
                };
                if !consistent {
                    self.violations.push(violation(
                        "no stale write",
                        format!(
                            "run {id} attempt {} recorded {:?} (status {:?}) but its call answered {answers:?}",
                            attempt.n, attempt.outcome, attempt.status_code
                        ),
                        Some(run),
                    ));
                }
            }
        }
    }

    /// Returns the events recorded and how many were told twice in the documented window.
    fn events(&mut self, world: &Simulation, runs: &[Run], observed: &Observed) -> (usize, usize) {
        let mut told: BTreeMap<Told, usize> = BTreeMap::new();
        for n in world.stores.bus.published() {
            *told.entry(Told { run_id: n.run_id.clone(), event: n.event, at: n.at }).or_default() += 1;
        }
        let mut window: BTreeSet<&Told> = observed.window.iter().collect();
        window.extend(observed.unmarked.values().flatten());
        let (mut recorded_total, mut twice) = (0, 0);
        for run in runs {
            // `downstream` is handed to the children, not told (see `workflows`).
            for event in run.events.iter().filter(|e| e.kind != RunEventKind::DOWNSTREAM) {
                recorded_total += 1;
                let kind = event.kind.as_str();
                let key = Told { run_id: run.id().to_string(), event: kind, at: event.at };
                let published = told.remove(&key).unwrap_or(0);
                let when = event.at.format("%H:%M:%S%.3f");
                if published == 0 {
                    self.violations.push(violation(
                        "each event told once",
                        format!("run {}: `{}` recorded at {when}, never published", run.id(), event.id),
                        Some(run),
                    ));
                } else if published > 1 {
                    if window.contains(&key) {
                        twice += published - 1;
                    } else {
                        self.violations.push(violation(
                            "each event told once",
                            format!(
                                "run {}: `{}` recorded at {when} published {published} times, outside the crash window",
                                run.id(),
                                event.id
                            ),
                            Some(run),
                        ));
                    }
                }
            }
        }
        for (key, published) in told {
            self.violations.push(Violation {
                invariant: "each event told once",
                detail: format!(
                    "`{}` published {published} times for run {} that records none",
                    key.event, key.run_id
                ),
                job: None,
                run: None,
            });
        }
        (recorded_total, twice)
    }

    /// A run of an `at_most_once` job calls its target at most once, refused connections apart.
    fn at_most_once(&mut self, runs: &[Run], observed: &Observed) {
        let by_id: BTreeMap<String, &Run> = runs.iter().map(|r| (r.id().to_string(), r)).collect();
        let mut reached: BTreeMap<&str, Vec<(u32, Answered)>> = BTreeMap::new();
        for hit in observed.hits.iter().filter(|h| h.answered != Answered::Refused) {
            reached.entry(&hit.run_id).or_default().push((hit.attempt, hit.answered));
        }
        for (run_id, calls) in reached.iter().filter(|(_, calls)| calls.len() > 1) {
            let run = by_id.get(*run_id).copied();
            let job = run.and_then(|r| last_version(observed, &r.job_id));
            if job.is_none_or(|j| j.document.delivery != Delivery::AtMostOnce) {
                continue;
            }
            self.violations.push(violation(
                "at most once",
                format!(
                    "run {run_id} of an at_most_once job reached its target {} times: {calls:?}",
                    calls.len()
                ),
                run,
            ));
        }
    }

    /// Every attempt started for a run of a group's job was called, unless its starter crashed or
    /// was told its start failed: a wait for a slot never spends an attempt.
    fn waits_spend_nothing(&mut self, runs: &[Run], observed: &Observed) {
        let by_id: BTreeMap<String, &Run> = runs.iter().map(|r| (r.id().to_string(), r)).collect();
        let called: BTreeSet<(&str, u32)> =
            observed.hits.iter().map(|h| (h.run_id.as_str(), h.attempt)).collect();
        for start in &observed.starts {
            let grouped = last_version(observed, &start.job_id).is_some_and(|j| j.document.group.is_some());
            let explained = called.contains(&(start.run_id.as_str(), start.attempt))
                || observed.crashed.contains(&start.actor)
                || observed.unanswered_starts.contains(&(start.run_id.clone(), start.attempt));
            if grouped && !explained {
                self.violations.push(violation(
                    "waits spend nothing",
                    format!(
                        "run {} attempt {} was started by {} and never called",
                        start.run_id, start.attempt, start.actor
                    ),
                    by_id.get(&start.run_id).copied(),
                ));
            }
        }
    }

    /// Work a target started ends with its attempt: no work whose attempt was closed by someone
    /// else than the work (a cancel, the timeout, a lost lease) runs on unstopped for more than a
    /// few minutes after the close; an attempt that ended as its work ended did so on a look that saw it end. A work's own start crashing its worker before the attempt could
    /// record it is the documented gap: nothing knows that work but its service.
    fn started_work_ends(&mut self, runs: &[Run], observed: &Observed) {
        const NAME: &str = "started work ends with its attempt";
        const STOPPED_WITHIN: Duration = Duration::minutes(5);
        let by_id: BTreeMap<String, &Run> = runs.iter().map(|r| (r.id().to_string(), r)).collect();
        for (handle, work) in &observed.works {
            let Some(run) = by_id.get(&work.run_id) else { continue };
            let Some(attempt) = run.attempts.iter().find(|a| a.n == work.attempt) else { continue };
            if attempt.handle.as_deref() != Some(handle.as_str()) {
                // Never recorded: its start crashed its worker or lost its write.
                continue;
            }
            let Some(finished) = attempt.finished_at else { continue };
            let closed =
                matches!(attempt.outcome, Some(Outcome::Cancelled | Outcome::TimedOut | Outcome::Lost));
            // Stopped by the next look after the attempt was closed: within minutes of the close
            // (as the closer's clock wrote it, off by up to 30 s), whatever the faults.
            let stop_by = finished + Duration::seconds(30) + STOPPED_WITHIN;
            let detail = if closed && work.stopped_at.is_none_or(|s| s > stop_by) && work.ends_at > stop_by {
                Some(format!(
                    "work {handle} of attempt {} runs on unstopped (until {}) after its attempt was closed {:?} at {finished}",
                    work.attempt, work.ends_at, attempt.outcome
                ))
            } else if !closed && work.reported.is_none() {
                Some(format!(
                    "attempt {} ended {:?} at {finished} though no look saw its work {handle} end",
                    work.attempt, attempt.outcome
                ))
            } else {
                None
            };
            if let Some(detail) = detail {
                self.violations.push(violation(NAME, detail, Some(run)));
            }
        }
    }

    /// A job never has more scheduled runs than its `schedule.max_runs`, counted as the claimer
    /// counts them (`Job::counted`): the runs claims of the schedule wrote, neither manual runs
    /// nor a backfill's, each counted once by the pass that claims or reads it after it was
    /// written (a claim whose advance is lost is counted later). The count goes on across edits:
    /// raising the limit allows the difference, lowering it below the count ends the schedule
    /// (the runs already claimed stay). So no advance that claimed writes a count past the limit
    /// of the version it read; the count a job ends with is exactly the runs it says it holds (those of instants
    /// before its mark, claimed under its version or before: none counted twice, none missed);
    /// and a job that had a limit in every version has no more scheduled runs than the largest.
    /// Both allow for the known gap: runs a claimer of a superseded version wrote after the edit.
    fn within_max_runs(&mut self, world: &Simulation, runs: &[Run], observed: &Observed) {
        const NAME: &str = "scheduled runs within the limit";
        let wrong = |job_id: &JobId, detail: String, run: Option<&RunKey>| Violation {
            invariant: NAME,
            detail,
            job: Some(job_id.to_string()),
            run: run.map(RunKey::encode),
        };
        let counts = |run: &&Run| run.key.manual.is_none() && !run.backfill;
        // Written by a claimer that read the job before an edit, after the edit was written: the
        // count of the edited version may have read it or not (the known gap of
        // docs/decisions.md), so it may be held uncounted, and run past the limit.
        let stale = |r: &Run| {
            let created = observed.created_at.get(&(r.job_id.clone(), r.key.clone()));
            let superseded = observed.versions.get(&r.job_id).and_then(|versions| {
                versions
                    .iter()
                    .find_map(|(at, v)| v.as_ref().filter(|v| v.version > r.job_version).map(|_| *at))
            });
            created.zip(superseded).is_some_and(|(created, superseded)| *created > superseded)
        };
        for a in &observed.advances {
            // Runs found uncounted (written under a version with more room) may take the count
            // past a lowered limit; a claim may not.
            if a.max_runs.is_some_and(|max| a.counted.is_some_and(|c| c > max)) && !a.claimed.is_empty() {
                self.violations.push(wrong(
                    &a.job_id,
                    format!(
                        "job {} (version {}, max_runs {:?}) advanced at {} from {:?} to {:?}, its count of scheduled runs from {} to {:?}",
                        a.job_id, a.version, a.max_runs, a.at, a.from, a.next, a.scheduled_runs, a.counted,
                    ),
                    a.claimed.last(),
                ));
            }
        }
        for job in world.stores.jobs.all() {
            let Some(newest) = job.counted.marks.last() else { continue };
            let held: Vec<&Run> = runs
                .iter()
                .filter(|r| r.job_id == job.id)
                .filter(counts)
                .filter(|r| job.counted.holds(r.key.instant, r.job_version))
                .collect();
            // Written by a claimer that read the job before an edit, after the edit was written:
            // the count of the edited version may have read it or not (a known gap).
            let sure = held.iter().filter(|r| !stale(r)).count() as u64;
            if !(sure..=held.len() as u64).contains(&job.counted.runs) {
                let instants: Vec<String> = held
                    .iter()
                    .map(|r| format!("{}@v{}", r.key.instant.format("%H:%M:%S"), r.job_version))
                    .collect();
                self.violations.push(wrong(
                    &job.id,
                    format!(
                        "job {} ({}) counts {} scheduled runs (marks {:?}, newest before {} at version {}), and holds {} ({} written after their version was superseded): {}",
                        job.id,
                        job.document.name,
                        job.counted.runs,
                        job.counted.marks,
                        newest.until.format("%H:%M:%S"),
                        newest.version,
                        held.len(),
                        held.len() as u64 - sure,
                        instants.join(", ")
                    ),
                    held.last().map(|r| &r.key),
                ));
            }
        }
        let mut counted: BTreeMap<&JobId, BTreeSet<&RunKey>> = BTreeMap::new();
        for run in runs.iter().filter(counts).filter(|r| !stale(r)) {
            counted.entry(&run.job_id).or_default().insert(&run.key);
        }
        for (job_id, versions) in &observed.versions {
            let limits: Option<Vec<u64>> = versions
                .iter()
                .filter_map(|(_, job)| job.as_ref())
                .map(|job| job.document.schedule.as_ref().and_then(|s| s.max_runs))
                .collect();
            let Some(max) = limits.as_ref().and_then(|l| l.iter().copied().max()) else { continue };
            let Some(runs) = counted.get(job_id).filter(|runs| runs.len() as u64 > max) else { continue };
            let instants: Vec<String> =
                runs.iter().map(|k| k.instant.format("%H:%M:%S").to_string()).collect();
            let name =
                versions.iter().rev().find_map(|(_, job)| job.as_ref()).map(|j| j.document.name.clone());
            self.violations.push(wrong(
                job_id,
                format!(
                    "job {job_id} ({}) has {} scheduled runs, though no version allowed more than {max} (limits {limits:?}): {}",
                    name.unwrap_or_default(),
                    runs.len(),
                    instants.join(", ")
                ),
                runs.iter().nth(max as usize).copied(),
            ));
        }
    }

    /// Every audit record lands with its change and only with it, once: a job's record names a
    /// version of the job that was written (by the request's own write, faults and retries
    /// notwithstanding), no two records name one version, and a run's record names a run that
    /// exists.
    fn audited(&mut self, world: &Simulation, runs: &[Run], observed: &Observed) {
        use sundial_domain::audit::TargetKind;
        let mut seen: BTreeSet<(String, u64)> = BTreeSet::new();
        let records = world.stores.trail.all();
        // Each trigger request made its run once, with its record once: an acknowledged one has
        // exactly one record, any one at most one (a retry finds its run, and writes none).
        for (op, job, acknowledged) in &observed.triggers {
            let request = format!("op-{op}");
            let made = records.iter().filter(|r| r.request_id == request).count();
            if made > 1 || (*acknowledged && made == 0) {
                self.violations.push(Violation {
                    invariant: "audit records land with their changes",
                    detail: format!("trigger {request} (acknowledged: {acknowledged}) has {made} records"),
                    job: Some(job.to_string()),
                    run: None,
                });
            }
        }
        // A callback's completion is recorded once for the attempt it ended, at most.
        let mut completions: BTreeMap<&str, usize> = BTreeMap::new();
        for record in records.iter().filter(|r| r.action == "run.complete") {
            *completions.entry(record.request_id.as_str()).or_default() += 1;
        }
        for (request, count) in completions.into_iter().filter(|(_, n)| *n > 1) {
            self.violations.push(Violation {
                invariant: "audit records land with their changes",
                detail: format!("{request}: {count} records of one completion"),
                job: None,
                run: None,
            });
        }
        for record in records {
            let wrong = |why: String| Violation {
                invariant: "audit records land with their changes",
                detail: format!("{} ({}): {why}", record.request_id, record.action),
                job: record.job.as_ref().map(JobId::to_string),
                run: None,
            };
            match (record.target.kind, record.job.as_ref(), record.version) {
                (TargetKind::Job, Some(job), Some(version)) => {
                    let written = observed
                        .versions
                        .get(job)
                        .into_iter()
                        .flatten()
                        .any(|(_, j)| j.as_ref().is_some_and(|j| j.version == version));
                    if !written {
                        self.violations
                            .push(wrong(format!("version {version} of its job was never written")));
                    }
                    if !seen.insert((job.to_string(), version)) {
                        self.violations.push(wrong(format!("a second record of version {version}")));
                    }
                }
                (TargetKind::Run, _, _) if !runs.iter().any(|r| r.id().to_string() == record.target.id) => {
                    self.violations.push(wrong(format!("its run {} does not exist", record.target.id)));
                }
                _ => {}
            }
        }
    }

    fn triggers(&mut self, runs: &[Run], observed: &Observed) {
        let mut asked: BTreeMap<&JobId, (BTreeSet<usize>, BTreeSet<usize>)> = BTreeMap::new();
        for (op, job, acknowledged) in &observed.triggers {
            let entry = asked.entry(job).or_default();
            entry.0.insert(*op);
            if *acknowledged {
                entry.1.insert(*op);
            }
        }
        for (job, (tried, acknowledged)) in asked {
            let manual = runs.iter().filter(|r| &r.job_id == job && r.key.manual.is_some()).count();
            if manual > tried.len() || manual < acknowledged.len() {
                self.violations.push(Violation {
                    invariant: "one run per trigger request",
                    detail: format!(
                        "job {job}: {} trigger requests ({} acknowledged) made {manual} runs",
                        tried.len(),
                        acknowledged.len()
                    ),
                    job: Some(job.to_string()),
                    run: None,
                });
            }
        }
    }
}

/// A job as last written (before any deletion).
fn last_version<'a>(observed: &'a Observed, job: &JobId) -> Option<&'a Job> {
    observed.versions.get(job).and_then(|v| v.iter().rev().find_map(|(_, j)| j.as_ref()))
}

/// Whether going from `before` to `after` changes which instants the job has or whether they
/// run (a schedule edit, a pause, a resume, a deletion).
fn changes_instants(before: &Job, after: &Job) -> bool {
    before.document.schedule != after.document.schedule || before.document.paused != after.document.paused
}

/// Whether `t`, an instant of `job`'s version, comes after the scheduled runs its
/// `schedule.max_runs` allows, as the claimer counts them (`Job::scheduled_runs`): the version
/// was written with none left (a limit lowered to the count or below, an edit after the last
/// run), or an advance of this version or a later one ended the schedule at the limit, and `t`
/// is at or after the instant that advance's claim began at (no claim that was counted had
/// reached it, and none is after that advance until an edit re-arms the job, which is a version
/// of its own).
fn past_limit(job: &Job, t: DateTime<Utc>, advances: &[Advanced]) -> bool {
    job.remaining_runs() == Some(0)
        || advances.iter().any(|a| {
            a.job_id == job.id
                && a.version >= job.version
                && a.ended_by_limit()
                && a.from.is_some_and(|from| from <= t)
        })
}

/// Whether a pause of the job (as last written) covers `t`, or begins or ends within a minute of it.
fn paused_near(job: &Job, t: DateTime<Utc>) -> bool {
    let margin = Duration::seconds(60);
    job.pauses.iter().any(|p| p.from - margin <= t && p.to.is_none_or(|to| t < to + margin))
}

/// When the scheduler first marked `t`'s minute reached (or processed).
fn reached_at(observed: &Observed, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    first_mark_at_or_past(&observed.reached, t)
}

/// When a tick first wrote a watermark at or past `t`'s minute (every job due in it claimed).
fn processed_at(observed: &Observed, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    first_mark_at_or_past(&observed.processed, t)
}

/// The earliest of `marks` (global time, minute) at or past `t`'s minute.
fn first_mark_at_or_past(
    marks: &[(DateTime<Utc>, DateTime<Utc>)],
    t: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let minute = sundial_domain::due_index::minute_of(t);
    marks.iter().filter(|(_, m)| *m >= minute).map(|(at, _)| *at).min()
}

/// Whether `t`'s minute may have been missed: a healthy tick marks a minute reached during the
/// minute before it; one not marked 30 s (the largest clock skew) before it began may be judged
/// missed by a later tick, with the progress that tick read.
fn missed(observed: &Observed, t: DateTime<Utc>) -> bool {
    let minute = sundial_domain::due_index::minute_of(t);
    reached_at(observed, t).is_none_or(|at| at > minute - Duration::seconds(30))
}
