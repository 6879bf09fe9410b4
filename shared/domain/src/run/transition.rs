//! The run state machine: every change of a run, as one pure function of the job, the run, what
//! happened and when.
//!
//! The use cases decide *when* a step is taken (a message arrived, a target answered, a lease was
//! seen expired); [`apply`] alone decides what the run becomes, which events that tells, and
//! refuses a step the run's state does not allow. The store persists the result only under the
//! [`Fence`] it names, so a step decided on a stale read never lands (invariant: state moves forward).
//!
//! | from \ step        | start | accept, heartbeat, finish | expire       | skip, dead-letter | cancel |
//! |--------------------|-------|---------------------------|--------------|-------------------|--------|
//! | QUEUED, RETRYING   | once due | —                      | —            | yes               | yes    |
//! | RUNNING            | —     | yes                       | lease expired| —                 | yes    |
//! | terminal           | —     | —                         | —            | —                 | —      |
//!
//! A new run is [`claim`]ed QUEUED. Finishing (or expiring) an attempt makes the run RETRYING
//! while attempts remain and the failure is not permanent, else terminal.

use super::{Attempt, Outcome, Run, RunEvent, RunEventKind, RunKey, RunState};
use crate::job::{Delivery, EventKind, Job};
use crate::retry;
use chrono::{DateTime, Duration, Utc};

/// How long a heartbeat (or a 202) keeps an attempt's lease alive, by default.
pub const DEFAULT_HEARTBEAT_WINDOW: Duration = Duration::seconds(60);

/// Something that happens to a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A worker starts the next attempt: `callback` is the digest of the token the target calls
    /// back with, `lease` how long the attempt is the worker's before anyone may end it.
    Start { worker: String, callback: String, lease: Duration },
    /// The target answered 202: it reports back through callbacks, each keeping the lease alive
    /// for `window`, never past the attempt's timeout.
    Accept { status: u16, window: Duration },
    /// The open attempt's target started work elsewhere (`handle`, an execution or a task) and
    /// it was looked at, still running: the attempt follows it, its lease renewed for `window`
    /// (never past its deadline). `seen` is the number of looks the attempt had when this one was
    /// asked for: a look that is not the next one is refused ([`crate::follow`]).
    Track { handle: String, seen: u32, tag: String, window: Duration },
    /// The target of the open attempt says it is still working: the lease is extended by
    /// `window`, never past the attempt's timeout and never shortened.
    Heartbeat { window: Duration },
    /// The open attempt ended, as its worker saw it or as its target reported it. `jitter` is a
    /// number in `[0, 1)` for the backoff of a retry.
    Finish { ending: Ending, jitter: f64 },
    /// The open attempt's lease expired: its worker is gone (`lost`), or an accepted attempt
    /// ran past its timeout (`timed_out`).
    Expire { jitter: f64 },
    /// The run may not start (its job is paused, or its concurrency policy forbids it).
    Skip { reason: String },
    /// Nobody wants the run any more: an open attempt is closed as `cancelled`.
    Cancel { reason: String },
    /// The message of the attempt the run waits for was dead-lettered before it started.
    DeadLetter { reason: String },
}

impl Step {
    /// The step's name, for refusals and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Step::Start { .. } => "start",
            Step::Accept { .. } => "accept",
            Step::Track { .. } => "track",
            Step::Heartbeat { .. } => "heartbeat",
            Step::Finish { .. } => "finish",
            Step::Expire { .. } => "expire",
            Step::Skip { .. } => "skip",
            Step::Cancel { .. } => "cancel",
            Step::DeadLetter { .. } => "dead_letter",
        }
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    pub outcome: Outcome,
    pub status: Option<u16>,
    pub error: Option<String>,
    pub output: Option<String>,
    /// A failure retrying cannot fix: the run ends whatever attempts remain.
    pub permanent: bool,
    /// The request certainly never left (connection refused, a name that does not resolve): even
    /// an at-most-once run may try again.
    pub unsent: bool,
    /// Where the work's logs are (an ECS task's log stream in the console).
    pub logs_url: Option<String>,
}

impl Ending {
    pub fn new(outcome: Outcome) -> Self {
        Ending {
            outcome,
            status: None,
            error: None,
            output: None,
            permanent: false,
            unsent: false,
            logs_url: None,
        }
    }

    pub fn because(mut self, error: impl Into<String>) -> Self {
        self.error = Some(error.into());
        self
    }
}

/// What the store must still see for a change to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// The run's state and attempt as read (the attempt is the fencing token).
    StateAndAttempt,
    /// The run exactly as read, events aside (its `updated_at`): an expired lease is acted on
    /// only if no heartbeat extended it meanwhile.
    Unchanged,
}

/// A step applied: the run it makes, the events it tells, and the fence to write it under.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The run after the step, the new events included.
    pub run: Run,
    /// The events the step caused, unsent (also in `run.events`).
    pub events: Vec<RunEvent>,
    pub fence: Fence,
}

/// Why a step does not apply to a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a {state} run cannot {step}: {why}")]
pub struct Refused {
    pub state: RunState,
    pub step: &'static str,
    pub why: &'static str,
}

/// `run` after `step` at `now`, or why the step does not apply to it.
pub fn apply(job: &Job, run: &Run, step: &Step, now: DateTime<Utc>) -> Result<Change, Refused> {
    let after = decide(Some(job), run, step, now)?;
    let events = caused(job, run, &after, now);
    let mut after = after;
    after.events.extend(events.iter().cloned());
    // An expiry loses to a heartbeat written meanwhile; of two looks, one is written.
    let unchanged = matches!(step, Step::Expire { .. } | Step::Track { .. });
    let fence = if unchanged { Fence::Unchanged } else { Fence::StateAndAttempt };
    Ok(Change { run: after, events, fence })
}

/// `run`, whose job is deleted, after `step`: only a cancel or a dead-letter applies (the other
/// steps need the job), nothing is told (the job's topic is gone with it), and a running
/// attempt is cancelled only once its lease has expired, under [`Fence::Unchanged`], so that a
/// heartbeat meanwhile wins.
pub fn apply_orphan(run: &Run, step: &Step, now: DateTime<Utc>) -> Result<Change, Refused> {
    let refuse = |why| Refused { state: run.state, step: step.name(), why };
    if !matches!(step, Step::Cancel { .. } | Step::DeadLetter { .. }) {
        return Err(refuse("its job is deleted"));
    }
    if run.state == RunState::Running && run.lease_until.is_some_and(|lease| lease > now) {
        return Err(refuse("its lease is live"));
    }
    let after = decide(None, run, step, now)?;
    Ok(Change { run: after, events: Vec::new(), fence: Fence::Unchanged })
}

/// The run a step makes, or why the step does not apply; `job` is `None` once it is deleted.
fn decide(job: Option<&Job>, run: &Run, step: &Step, now: DateTime<Utc>) -> Result<Run, Refused> {
    let refuse = |why| Refused { state: run.state, step: step.name(), why };
    let job_of = || job.ok_or_else(|| refuse("its job is deleted"));
    let waiting = matches!(run.state, RunState::Queued | RunState::Retrying);
    let running = run.state == RunState::Running;
    let after = match step {
        Step::Start { worker, callback, lease } => {
            if !waiting {
                return Err(refuse("only a waiting run starts an attempt"));
            }
            if run.waits_until().is_some_and(|at| at > now) {
                return Err(refuse("not before its time"));
            }
            started(run, worker, callback, now + *lease, now)
        }
        Step::Accept { status, window } => {
            if !running {
                return Err(refuse("only a running attempt is accepted"));
            }
            accepted(run, *status, lease_for(job_of()?, run, *window, now), now)
        }
        Step::Track { handle, seen, tag, window } => {
            if !running {
                return Err(refuse("only a running attempt follows its work"));
            }
            let last = run.attempts.last();
            if last.is_none_or(|a| a.looks != *seen) {
                return Err(refuse("another look was recorded first"));
            }
            if last.and_then(|a| a.handle.as_ref()).is_some_and(|h| h != handle) {
                return Err(refuse("the attempt follows other work"));
            }
            tracked(run, handle, tag, lease_for(job_of()?, run, *window, now), now)
        }
        Step::Heartbeat { window } => {
            if !running {
                return Err(refuse("only a running attempt beats"));
            }
            let extended = lease_for(job_of()?, run, *window, now);
            let lease = run.lease_until.map_or(extended, |lease| lease.max(extended));
            Run { lease_until: Some(lease), updated_at: now, ..run.clone() }
        }
        Step::Finish { ending, jitter } => {
            if !running {
                return Err(refuse("only a running attempt finishes"));
            }
            // Its worker's answer, or the callback after its 202: the attempt's call is over.
            Run { call_ended: Some(run.attempt), ..finished(job_of()?, run, ending.clone(), now, *jitter) }
        }
        Step::Expire { jitter } => {
            if !running {
                return Err(refuse("only a running attempt has a lease"));
            }
            let job = job_of()?;
            let Some(ending) = abandoned(job, run, now) else {
                return Err(refuse("its lease is live"));
            };
            finished(job, run, ending, now, *jitter)
        }
        Step::Skip { reason } => {
            if !waiting {
                return Err(refuse("only a waiting run is skipped"));
            }
            ended(run, RunState::Skipped, reason, now)
        }
        Step::DeadLetter { reason } => {
            if !waiting {
                return Err(refuse("only a waiting run's message is dead-lettered"));
            }
            ended(run, RunState::Failed, &format!("dead-lettered: {reason}"), now)
        }
        Step::Cancel { reason } => {
            if run.state.is_terminal() {
                return Err(refuse("it has ended"));
            }
            cancelled(run, reason, now)
        }
    };
    Ok(after)
}

/// `run` whose attempt's call answered 202 with `status`: the call itself has ended, the work goes
/// on at the target under `lease`.
fn accepted(run: &Run, status: u16, lease: DateTime<Utc>, now: DateTime<Utc>) -> Run {
    let call_ended = Some(run.attempt);
    let mut after = Run { lease_until: Some(lease), updated_at: now, call_ended, ..run.clone() };
    if let Some(last) = after.attempts.last_mut() {
        last.status_code = Some(status);
    }
    after
}

/// `run` following `handle`, looked at `now`. The work runs on: the run after it in its job's
/// start fence waits for it until `lease` (the attempt's `call_until`), or until a look marks
/// its end (stopped after a cancel, or seen ended).
fn tracked(run: &Run, handle: &str, tag: &str, lease: DateTime<Utc>, now: DateTime<Utc>) -> Run {
    let mut after = Run { lease_until: Some(lease), updated_at: now, ..run.clone() };
    if let Some(last) = after.attempts.last_mut() {
        last.handle = Some(handle.to_string());
        last.followed_at = Some(now);
        last.looks += 1;
        last.look_tag = Some(tag.to_string());
        last.call_until = Some(lease);
    }
    after
}

/// The events a change of `before` into `after` causes, `now` being when it happens.
/// `succeeded` only when the job's notification settings ask for it, or its run's PagerDuty
/// incident needs resolving (see `channels::pagerduty`); `sla_missed` when the run
/// ends past its SLA and nobody recorded it yet; `downstream` when a run of a job with children
/// ends (its end is passed on to them, see [`crate::workflow`]); `too_fast` when it succeeds in a
/// small fraction of its job's learned time ([`crate::health::too_fast`]). Deadlines count from
/// the run's due time (see [`crate::watchdog::rules::flags_due`]).
pub fn caused(job: &Job, before: &Run, after: &Run, now: DateTime<Utc>) -> Vec<RunEvent> {
    let mut events = Vec::new();
    if after.state != before.state || after.attempt != before.attempt {
        let kind = match after.state {
            RunState::Succeeded => {
                let notify = job.document.notify.as_ref();
                let asked = notify.is_some_and(|n| n.on.contains(&EventKind::Succeeded));
                // The run's own PagerDuty incident is resolved by its success.
                let paged = notify.is_some_and(|n| n.pagerduty.is_some()) && before.told_run_trouble();
                (asked || paged).then_some(EventKind::Succeeded)
            }
            RunState::Retrying => Some(EventKind::Retrying),
            RunState::Failed => Some(EventKind::Failed),
            RunState::TimedOut => Some(EventKind::TimedOut),
            RunState::Skipped => Some(EventKind::Skipped),
            _ => None,
        };
        events.extend(kind.map(|k| RunEvent::new(k, after.attempt, now)));
    }
    if before.state.is_in_flight() && after.state.is_terminal() && !job.children.is_empty() {
        events.push(RunEvent::new(RunEventKind::DOWNSTREAM, after.attempt, now));
    }
    let already = |kind: EventKind| after.events.iter().chain(&before.events).any(|e| e.kind == kind);
    let first_start = before.attempt == 0 && after.attempt == 1;
    if first_start && !already(EventKind::LateStart) && start_deadline(job, after).is_some_and(|d| now > d) {
        events.push(RunEvent::new(EventKind::LateStart, after.attempt, now));
    }
    if after.state.is_terminal()
        && !already(EventKind::SlaMissed)
        && sla_deadline(job, after).is_some_and(|d| now > d)
    {
        events.push(RunEvent::new(EventKind::SlaMissed, after.attempt, now));
    }
    let took = after.duration().filter(|_| after.state == RunState::Succeeded && !before.state.is_terminal());
    let fast =
        job.judged_by().zip(took).is_some_and(|(baseline, took)| crate::health::too_fast(baseline, took));
    if fast && !already(EventKind::TooFast) {
        events.push(RunEvent::new(EventKind::TooFast, after.attempt, now));
    }
    events
}

/// A new run of `job` for `key`, QUEUED, due at `due_at`, kept for `retention`.
pub fn claim(job: &Job, key: RunKey, due_at: DateTime<Utc>, now: DateTime<Utc>, retention: Duration) -> Run {
    Run {
        job_id: job.id.clone(),
        owner: job.owner.clone(),
        key,
        state: RunState::Queued,
        due_at,
        attempt: 0,
        attempts: Vec::new(),
        job_version: job.version,
        created_at: now,
        updated_at: now,
        reason: None,
        lease_until: None,
        retry_at: None,
        resent_at: None,
        call_ended: None,
        workflow: None,
        backfill: false,
        input: None,
        expires_at: now + retention,
        events: Vec::new(),
    }
}

/// When `run` misses its job's SLA (`None`: the job has none). Deadlines count from the run's
/// due time (its instant plus the offset Sundial gave it: jitter, a backfill's pacing), so
/// neither a jitter larger than the deadline nor a backfill of old instants raises them. A run of
/// a job with parents is due when its workflow run was (see `workflow::cascade`), so its
/// deadlines count its parents' time too.
pub fn sla_deadline(job: &Job, run: &Run) -> Option<DateTime<Utc>> {
    job.document.sla_s.map(|s| run.due_at + Duration::seconds(i64::from(s)))
}

/// When `run`'s first attempt starts late (`None`: the job sets no start deadline).
pub fn start_deadline(job: &Job, run: &Run) -> Option<DateTime<Utc>> {
    job.document.start_deadline_s.map(|s| run.due_at + Duration::seconds(i64::from(s)))
}

/// When the open attempt of `run` must have ended: its start plus the job's timeout.
pub fn attempt_deadline(job: &Job, run: &Run) -> Option<DateTime<Utc>> {
    let started = run.attempts.last()?.started_at;
    Some(started + Duration::seconds(i64::from(job.document.timeout_s)))
}

/// The lease a 202 or a heartbeat at `now` gives: `window` from now, never past the deadline.
fn lease_for(job: &Job, run: &Run, window: Duration, now: DateTime<Utc>) -> DateTime<Utc> {
    let extended = now + window;
    attempt_deadline(job, run).map_or(extended, |deadline| extended.min(deadline))
}

fn started(run: &Run, worker: &str, callback: &str, lease_until: DateTime<Utc>, now: DateTime<Utc>) -> Run {
    let n = run.attempt + 1;
    let mut attempts = run.attempts.clone();
    attempts.push(Attempt {
        n,
        started_at: now,
        finished_at: None,
        worker: worker.to_string(),
        outcome: None,
        status_code: None,
        error: None,
        output: None,
        callback: Some(callback.to_string()),
        call_until: Some(lease_until),
        handle: None,
        followed_at: None,
        looks: 0,
        look_tag: None,
        logs_url: None,
    });
    Run {
        state: RunState::Running,
        attempt: n,
        attempts,
        lease_until: Some(lease_until),
        retry_at: None,
        updated_at: now,
        ..run.clone()
    }
}

/// A waiting run ended without an attempt: SKIPPED or FAILED, for `reason`.
fn ended(run: &Run, state: RunState, reason: &str, now: DateTime<Utc>) -> Run {
    Run {
        state,
        reason: Some(reason.to_string()),
        lease_until: None,
        retry_at: None,
        updated_at: now,
        ..run.clone()
    }
}

/// `run` cancelled at `now` for `reason`: an open attempt is closed, as `cancelled`.
pub fn cancelled(run: &Run, reason: &str, now: DateTime<Utc>) -> Run {
    let mut after = ended(run, RunState::Cancelled, reason, now);
    if let Some(open) = after.attempts.last_mut().filter(|a| a.outcome.is_none()) {
        open.finished_at = Some(now);
        open.outcome = Some(Outcome::Cancelled);
    }
    after
}

/// How the open attempt of a RUNNING `run` ended if its lease has expired (`None` while the
/// lease is live). A worker enforces its own calls' timeouts, so an expired lease of a plain
/// attempt means its worker died (`lost`); an accepted (202) attempt is `timed_out` once past
/// the job's timeout, and `lost` before (its heartbeats stopped).
pub fn abandoned(job: &Job, run: &Run, now: DateTime<Utc>) -> Option<Ending> {
    if run.state != RunState::Running || run.lease_until.is_some_and(|lease| lease > now) {
        return None;
    }
    // Its target answered 202, or it follows work it started: past its deadline it timed out.
    let accepted = run.attempts.last().is_some_and(|a| a.status_code == Some(202) || a.handle.is_some());
    let timed_out = accepted && attempt_deadline(job, run).is_some_and(|deadline| now >= deadline);
    Some(if timed_out {
        Ending::new(Outcome::TimedOut).because("no result within the attempt's timeout")
    } else {
        Ending::new(Outcome::Lost).because("the attempt's lease expired (worker lost or heartbeats missing)")
    })
}

/// The run after its current attempt ended: RETRYING with its backoff (`unit`: a random number
/// in `[0, 1)` for the jitter) while attempts remain and the failure is not permanent, else
/// terminal (TIMED_OUT when the last attempt timed out).
pub fn finished(job: &Job, run: &Run, ending: Ending, now: DateTime<Utc>, unit: f64) -> Run {
    let mut attempts = run.attempts.clone();
    if let Some(last) = attempts.last_mut() {
        last.finished_at = Some(now);
        last.outcome = Some(ending.outcome);
        last.status_code = ending.status.or(last.status_code);
        last.error = ending.error;
        last.output = ending.output;
        if ending.logs_url.is_some() {
            last.logs_url = ending.logs_url;
        }
    }
    let policy = &job.document.retry;
    let at_most_once = job.document.delivery == Delivery::AtMostOnce && !ending.unsent;
    let attempts_remain = retry::attempts_remain(run.attempt, policy);
    let (state, retry_at) = match ending.outcome {
        Outcome::Succeeded => (RunState::Succeeded, None),
        _ if !ending.permanent && !at_most_once && attempts_remain => {
            (RunState::Retrying, Some(now + retry::backoff(run.attempt, policy, unit)))
        }
        Outcome::TimedOut => (RunState::TimedOut, None),
        _ => (RunState::Failed, None),
    };
    // Say why a run with attempts left was not retried: the attempt may have reached its target.
    let reason = (at_most_once
        && attempts_remain
        && !ending.permanent
        && state.is_terminal()
        && state != RunState::Succeeded)
        .then(|| format!("at_most_once: attempt {} may have reached the target; not repeated", run.attempt))
        .or_else(|| run.reason.clone());
    Run { state, attempts, lease_until: None, retry_at, reason, updated_at: now, ..run.clone() }
}

/// Why a scheduled run may not start because its instant was asked to be skipped; only a first
/// start is judged.
pub fn skip_reason(job: &Job, run: &Run) -> Option<String> {
    if run.attempt > 0 || run.key.manual.is_some() {
        return None;
    }
    job.skip_at(run.scheduled_at()).map(crate::job::Skip::explain)
}

/// Why `run` may not start because of its job's pauses: the job is paused now, or the run's
/// instant fell while it was paused (instants missed while paused are skipped, even when a
/// worker reaches them after the resume), unless the run was created after that pause ended (a
/// backfill of the paused period). Attempts already under way are not affected.
pub fn paused_reason(job: &Job, run: &Run) -> Option<String> {
    if job.document.paused {
        return Some("the job was paused after the run was claimed".into());
    }
    if run.attempt > 0 {
        return None;
    }
    // A run created after the pause ended (a backfill of the paused period) was asked for since.
    let pause = job.pause_at(run.scheduled_at()).filter(|p| p.to.is_none_or(|to| run.created_at < to));
    pause.map(|pause| {
        let until = pause.to.map_or_else(|| "now".to_string(), |to| to.to_rfc3339());
        format!("the job was paused at the run's instant (paused {} to {until})", pause.from.to_rfc3339())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::fixtures::at;
    use serde_json::json;

    /// A job with a 60 s timeout and three attempts 10 to 60 s apart, `extra` merged in.
    fn job(extra: serde_json::Value) -> Job {
        let mut doc = serde_json::json!({
            "timeout_s": 60, "retry": {"max_attempts": 3, "backoff_s": 10, "max_backoff_s": 60}
        });
        doc.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        crate::fixtures::job(doc)
    }

    const DUE: &str = "2026-11-22T10:00:00Z";

    #[test]
    fn an_end_is_handed_down_only_when_the_job_has_children() {
        let mut job = job(json!({}));
        let run = queued(&job);
        let ended = |j: &Job| {
            let skipped = apply(j, &run, &Step::Skip { reason: "r".into() }, at(DUE)).unwrap();
            skipped.events.iter().map(|e| e.kind).collect::<Vec<_>>()
        };
        assert!(!ended(&job).contains(&RunEventKind::DOWNSTREAM), "no children, nothing to hand down");
        job.children = vec![crate::job::JobId::generate()];
        assert!(ended(&job).contains(&RunEventKind::DOWNSTREAM), "an end is handed to the children");
        let started = apply(
            &job,
            &run,
            &Step::Start { worker: "w".into(), callback: "c".into(), lease: Duration::seconds(60) },
            at(DUE),
        )
        .unwrap();
        assert!(!started.events.iter().any(|e| e.kind == RunEventKind::DOWNSTREAM), "only an end is");
    }

    fn queued(job: &Job) -> Run {
        claim(job, RunKey::scheduled(at(DUE)), at(DUE), at("2026-11-22T09:59:00Z"), Duration::days(30))
    }

    fn start() -> Step {
        Step::Start { worker: "w1".into(), callback: "digest".into(), lease: Duration::seconds(90) }
    }

    fn fail() -> Step {
        Step::Finish { ending: Ending::new(Outcome::Failed).because("HTTP 500"), jitter: 0.5 }
    }

    /// A run of `job` in `state`, as the machine makes it (RUNNING with a live lease at `now`).
    fn in_state(job: &Job, state: RunState, now: DateTime<Utc>) -> Run {
        let fresh = queued(job);
        let running = |run: &Run| apply(job, run, &start(), now).unwrap().run;
        let step = |run: &Run, step: Step| apply(job, run, &step, now).unwrap().run;
        match state {
            RunState::Queued => fresh,
            RunState::Running => running(&fresh),
            RunState::Retrying => step(&running(&fresh), fail()),
            RunState::Succeeded => {
                step(&running(&fresh), Step::Finish { ending: Ending::new(Outcome::Succeeded), jitter: 0.0 })
            }
            RunState::Failed => step(&fresh, Step::DeadLetter { reason: "poison".into() }),
            RunState::TimedOut => {
                let once = job_with_one_attempt(job);
                let run = running(&fresh);
                apply(&once, &run, &Step::Finish { ending: Ending::new(Outcome::TimedOut), jitter: 0.0 }, now)
                    .unwrap()
                    .run
            }
            RunState::Cancelled => step(&fresh, Step::Cancel { reason: "by its owner".into() }),
            RunState::Skipped => step(&fresh, Step::Skip { reason: "paused".into() }),
        }
    }

    fn job_with_one_attempt(job: &Job) -> Job {
        let mut once = job.clone();
        once.document.retry.max_attempts = 1;
        once
    }

    fn every_step() -> Vec<Step> {
        vec![
            start(),
            Step::Accept { status: 202, window: Duration::seconds(60) },
            Step::Track {
                handle: "arn:execution".into(),
                seen: 0,
                tag: "t".into(),
                window: Duration::seconds(60),
            },
            Step::Heartbeat { window: Duration::seconds(60) },
            fail(),
            Step::Expire { jitter: 0.5 },
            Step::Skip { reason: "paused".into() },
            Step::Cancel { reason: "by its owner".into() },
            Step::DeadLetter { reason: "poison".into() },
        ]
    }

    /// The design's state table: which steps each state allows (`expire` once the lease has
    /// expired); every other pair is refused and changes nothing.
    fn allowed(state: RunState, step: &Step) -> bool {
        use RunState::*;
        match step {
            Step::Start { .. } | Step::Skip { .. } | Step::DeadLetter { .. } => {
                matches!(state, Queued | Retrying)
            }
            Step::Accept { .. }
            | Step::Track { .. }
            | Step::Heartbeat { .. }
            | Step::Finish { .. }
            | Step::Expire { .. } => state == Running,
            Step::Cancel { .. } => !state.is_terminal(),
        }
    }

    #[test]
    fn every_state_and_step_follows_the_state_table() {
        let j = job(serde_json::json!({}));
        // Past the backoff of a retry and the lease of a start, so time never refuses a step.
        let now = at("2026-11-22T10:00:00Z");
        let later = now + Duration::minutes(10);
        for state in RunState::ALL {
            let run = in_state(&j, state, now);
            assert_eq!(run.state, state, "the fixture for {state}");
            for step in every_step() {
                let result = apply(&j, &run, &step, later);
                match (allowed(state, &step), &result) {
                    (true, Ok(change)) => {
                        assert_ne!(change.run, run, "{state} + {} changed nothing", step.name());
                        assert_eq!(change.run.updated_at, later);
                    }
                    (false, Err(refused)) => {
                        assert_eq!((refused.state, refused.step), (state, step.name()));
                    }
                    (want, got) => panic!("{state} + {}: allowed {want}, got {got:?}", step.name()),
                }
            }
        }
    }

    #[test]
    fn where_each_step_leads() {
        let j = job(serde_json::json!({}));
        let now = at("2026-11-22T10:00:00Z");
        let later = now + Duration::minutes(10);
        let lands = |state, step: Step| apply(&j, &in_state(&j, state, now), &step, later).unwrap().run.state;
        assert_eq!(lands(RunState::Queued, start()), RunState::Running);
        assert_eq!(lands(RunState::Retrying, start()), RunState::Running);
        assert_eq!(lands(RunState::Running, fail()), RunState::Retrying);
        assert_eq!(lands(RunState::Running, Step::Expire { jitter: 0.5 }), RunState::Retrying);
        assert_eq!(
            lands(RunState::Running, Step::Accept { status: 202, window: Duration::seconds(5) }),
            RunState::Running
        );
        assert_eq!(lands(RunState::Running, Step::Cancel { reason: "x".into() }), RunState::Cancelled);
        assert_eq!(lands(RunState::Retrying, Step::Skip { reason: "x".into() }), RunState::Skipped);
        assert_eq!(lands(RunState::Queued, Step::DeadLetter { reason: "x".into() }), RunState::Failed);
        // The last attempt's failure ends the run; a permanent one ends it at once.
        let once = job_with_one_attempt(&j);
        let running = in_state(&j, RunState::Running, now);
        assert_eq!(apply(&once, &running, &fail(), later).unwrap().run.state, RunState::Failed);
        let permanent =
            Step::Finish { ending: Ending { permanent: true, ..Ending::new(Outcome::Failed) }, jitter: 0.5 };
        assert_eq!(apply(&j, &running, &permanent, later).unwrap().run.state, RunState::Failed);
    }

    #[test]
    fn time_refuses_an_early_start_and_a_live_lease() {
        let j = job(serde_json::json!({}));
        let now = at("2026-11-22T10:00:00Z");
        let early = apply(&j, &queued(&j), &start(), now - Duration::seconds(1));
        assert_eq!(early.map_err(|r| r.why), Err("not before its time"));
        let running = in_state(&j, RunState::Running, now);
        let live = apply(&j, &running, &Step::Expire { jitter: 0.5 }, now + Duration::seconds(89));
        assert_eq!(live.map_err(|r| r.why), Err("its lease is live"));
        let expired =
            apply(&j, &running, &Step::Expire { jitter: 0.5 }, now + Duration::seconds(90)).unwrap();
        assert_eq!(expired.fence, Fence::Unchanged, "an expiry loses to a heartbeat written meanwhile");
        assert_eq!(expired.run.attempts[0].outcome, Some(Outcome::Lost));
    }

    #[test]
    fn leases_of_accepted_attempts_stop_at_the_timeout_and_never_shrink() {
        let j = job(serde_json::json!({}));
        let now = at("2026-11-22T10:00:00Z");
        let running = in_state(&j, RunState::Running, now);
        let window = Duration::seconds(30);
        let accepted = apply(&j, &running, &Step::Accept { status: 202, window }, now).unwrap().run;
        assert_eq!(accepted.lease_until, Some(now + window), "a 202 may shorten the call's lease");
        assert_eq!(accepted.attempts[0].status_code, Some(202));
        let late = now + Duration::seconds(50);
        let beat = apply(&j, &accepted, &Step::Heartbeat { window }, late).unwrap().run;
        assert_eq!(beat.lease_until, Some(now + Duration::seconds(60)), "capped at the 60 s timeout");
        let long = apply(&j, &running, &Step::Heartbeat { window: Duration::seconds(1) }, now).unwrap().run;
        assert_eq!(long.lease_until, running.lease_until, "a heartbeat never cuts a call's lease");
        // Past the deadline an accepted attempt times out; before it, it was lost.
        let past = apply(&j, &beat, &Step::Expire { jitter: 0.5 }, now + Duration::seconds(61)).unwrap();
        assert_eq!(past.run.attempts[0].outcome, Some(Outcome::TimedOut));
    }

    #[test]
    fn each_look_at_started_work_is_recorded_once_and_renews_the_lease_up_to_the_timeout() {
        let j = job(serde_json::json!({}));
        let now = at("2026-11-22T10:00:00Z");
        let running = in_state(&j, RunState::Running, now);
        let window = Duration::seconds(30);
        let look =
            |seen| Step::Track { handle: "arn:aws:states:x".into(), seen, tag: format!("t{seen}"), window };
        let first = apply(&j, &running, &look(0), now).unwrap();
        assert_eq!(first.fence, Fence::Unchanged, "of two looks at once, one is written");
        let first = first.run;
        let attempt = &first.attempts[0];
        assert_eq!((attempt.handle.as_deref(), attempt.looks), (Some("arn:aws:states:x"), 1));
        assert_eq!(attempt.look_tag.as_deref(), Some("t0"), "recorded with its tag");
        assert_eq!((attempt.followed_at, first.lease_until), (Some(now), Some(now + window)));
        assert_eq!(first.call_ended, None, "the work runs on: the next run of a forbid job waits for it");
        assert_eq!(first.attempts[0].call_until, Some(now + window), "for as long as the lease");
        let stale = apply(&j, &first, &look(0), now + Duration::seconds(5));
        assert_eq!(stale.map_err(|r| r.why), Err("another look was recorded first"));
        let other = Step::Track { handle: "arn:aws:states:y".into(), seen: 1, tag: "t".into(), window };
        assert_eq!(apply(&j, &first, &other, now).map_err(|r| r.why), Err("the attempt follows other work"));
        let late = apply(&j, &first, &look(1), now + Duration::seconds(50)).unwrap().run;
        assert_eq!(late.lease_until, Some(now + Duration::seconds(60)), "capped at the 60 s timeout");
        assert_eq!(late.attempts[0].looks, 2);
        let past = apply(&j, &late, &Step::Expire { jitter: 0.5 }, now + Duration::seconds(61)).unwrap();
        assert_eq!(
            past.run.attempts[0].outcome,
            Some(Outcome::TimedOut),
            "followed work past its deadline timed out"
        );
    }

    #[test]
    fn a_cancel_closes_the_open_attempt_and_tells_a_missed_sla() {
        let j = job(serde_json::json!({"sla_s": 60}));
        let now = at("2026-11-22T10:00:00Z");
        let running = in_state(&j, RunState::Running, now);
        let change =
            apply(&j, &running, &Step::Cancel { reason: "by its owner".into() }, now + Duration::minutes(5))
                .unwrap();
        assert_eq!(change.run.attempts[0].outcome, Some(Outcome::Cancelled));
        assert_eq!(change.run.lease_until, None);
        let kinds: Vec<RunEventKind> = change.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [RunEventKind::Told(EventKind::SlaMissed)]);
        assert!(change.run.events.iter().any(|e| e.kind == EventKind::SlaMissed));
    }

    fn any_step() -> impl Strategy<Value = Step> {
        let outcome = prop_oneof![
            Just(Outcome::Succeeded),
            Just(Outcome::Failed),
            Just(Outcome::TimedOut),
            Just(Outcome::Lost)
        ];
        prop_oneof![
            (1i64..600).prop_map(|s| Step::Start {
                worker: "w".into(),
                callback: "d".into(),
                lease: Duration::seconds(s)
            }),
            (1i64..120).prop_map(|s| Step::Accept { status: 202, window: Duration::seconds(s) }),
            (1i64..120).prop_map(|s| Step::Heartbeat { window: Duration::seconds(s) }),
            (0u32..3, 1i64..120).prop_map(|(seen, s)| Step::Track {
                handle: "arn:execution".into(),
                seen,
                tag: "t".into(),
                window: Duration::seconds(s)
            }),
            (outcome, any::<bool>(), 0.0f64..1.0).prop_map(|(o, permanent, jitter)| Step::Finish {
                ending: Ending { permanent, ..Ending::new(o) },
                jitter
            }),
            (0.0f64..1.0).prop_map(|jitter| Step::Expire { jitter }),
            Just(Step::Skip { reason: "r".into() }),
            Just(Step::Cancel { reason: "r".into() }),
            Just(Step::DeadLetter { reason: "r".into() }),
        ]
    }

    proptest! {
        /// Whatever happens, in any order: a lease only while RUNNING, an ended run has no open
        /// attempt and never changes again, and the attempt number only grows.
        #[test]
        fn any_sequence_of_steps_keeps_the_invariants(
            steps in proptest::collection::vec((any_step(), 0i64..400), 1..40)
        ) {
            let j = job(serde_json::json!({}));
            let mut now = at(DUE);
            let mut run = queued(&j);
            for (step, wait) in steps {
                now += Duration::seconds(wait);
                let Ok(change) = apply(&j, &run, &step, now) else { continue };
                let after = change.run;
                prop_assert!(!run.state.is_terminal(), "{} changed an ended run", step.name());
                prop_assert!(after.attempt >= run.attempt);
                prop_assert_eq!(after.lease_until.is_some(), after.state == RunState::Running);
                let open = after.attempts.last().is_some_and(|a| a.outcome.is_none());
                prop_assert_eq!(open, after.state == RunState::Running);
                prop_assert_eq!(after.attempts.len() as u32, after.attempt);
                run = after;
            }
        }
    }
}
