//! What the watchdog should do about one run, decided without I/O.
//!
//! Each rule looks only at the run, its job and the time, so every repair is a unit test here;
//! the watchdog then applies them with conditional writes, so a rule that fires in two racing
//! watchdogs (or in a watchdog and a worker) takes effect once.

use crate::job::{EventKind, Job};
use crate::run::RunEvent;
use crate::run::transition::{sla_deadline, start_deadline};
use crate::run::{Run, RunState};
use crate::run_queue::Dispatch;
use chrono::{DateTime, Duration, Utc};

/// The watchdog's patience.
#[derive(Debug, Clone)]
pub struct WatchdogSettings {
    /// A QUEUED run whose first attempt has not started this long after its due time is sent
    /// again (and again after as long, until it starts).
    pub dispatch_grace: Duration,
    /// A RETRYING run whose next attempt has not started this long after its backoff ended is
    /// sent again.
    pub retry_margin: Duration,
    /// Events recorded this long ago and still unsent were left by a crash: published again. Their
    /// writer's 60 s, and 60 s more for two processes' clocks to disagree (the simulator's bound).
    pub publish_grace: Duration,
    /// The tick's watermark this many minutes behind the clock is a stalled scheduler.
    pub stall_after_minutes: i64,
    /// Runs inspected at once.
    pub concurrency: usize,
    /// Runs read per batch; the time budget is checked between batches.
    pub batch_runs: usize,
    /// Stop starting new batches after this long: the next pass resumes where this one stopped.
    pub budget: std::time::Duration,
}

impl Default for WatchdogSettings {
    fn default() -> Self {
        WatchdogSettings {
            dispatch_grace: Duration::seconds(120),
            retry_margin: Duration::seconds(120),
            publish_grace: Duration::seconds(120),
            stall_after_minutes: 3,
            concurrency: 16,
            batch_runs: 100,
            budget: std::time::Duration::from_secs(30),
        }
    }
}

/// Events of `run` never marked sent whose publisher took them on at least `grace` ago: its
/// recorder, or an earlier watchdog pass, crashed or failed to publish.
pub fn unsent_events(run: &Run, now: DateTime<Utc>, grace: Duration) -> Vec<RunEvent> {
    run.events.iter().filter(|e| !e.sent && e.last_taken() + grace <= now).cloned().collect()
}

/// An ended run still in the in-flight index with every event published: the crash came
/// between publishing and leaving the index. It leaves now (after `grace`, so as not to race
/// the writer).
pub fn needs_settling(run: &Run, now: DateTime<Utc>, grace: Duration) -> bool {
    run.state.is_terminal() && run.events.iter().all(|e| e.sent) && run.updated_at + grace <= now
}

/// The flags due on an in-flight run: `sla_missed` past its SLA, `late_start` when still not
/// started past its start deadline ([`sla_deadline`], [`start_deadline`]); each once per run.
pub fn flags_due(job: &Job, run: &Run, now: DateTime<Utc>) -> Vec<EventKind> {
    let mut due = Vec::new();
    if !run.state.is_in_flight() {
        return due;
    }
    let has = |kind: EventKind| run.events.iter().any(|e| e.kind == kind);
    let past = |deadline: Option<DateTime<Utc>>| deadline.is_some_and(|d| now > d);
    if past(sla_deadline(job, run)) && !has(EventKind::SlaMissed) {
        due.push(EventKind::SlaMissed);
    }
    if run.is_unstarted() && past(start_deadline(job, run)) && !has(EventKind::LateStart) {
        due.push(EventKind::LateStart);
    }
    let since = run.attempts.first().map(|a| a.started_at).filter(|_| run.state == RunState::Running);
    let anomalous = match (job.judged_by(), since) {
        (Some(baseline), Some(since)) => crate::health::running_too_long(baseline, since, now),
        _ => false,
    };
    if anomalous && !has(EventKind::DurationAnomaly) {
        due.push(EventKind::DurationAnomaly);
    }
    due
}

/// The message to send for a run whose next attempt has not started in time: a QUEUED run
/// `dispatch_grace` past its due time, or a RETRYING run `retry_margin` past the end of its
/// backoff; re-sent again after waiting as long as it had waited before (doubling). Whether its message was ever sent does not
/// matter: a second message is harmless (an attempt starts only under its fence, and a stale
/// message is dropped), while a missing one would strand the run. This covers a send that never
/// happened, a message a crashed consumer still holds, and one lost with the worker that held it.
pub fn missing_dispatch(run: &Run, now: DateTime<Utc>, settings: &WatchdogSettings) -> Option<Dispatch> {
    let waits_until = run.waits_until()?;
    let patience = match run.state {
        RunState::Queued => settings.dispatch_grace,
        _ => settings.retry_margin,
    };
    // Each re-send waits as long again as the run has waited so far (at least the patience):
    // a backlog gets a handful of extra messages per run, not one every grace period.
    let next = match run.resent_at {
        None => waits_until + patience,
        Some(at) => at + patience.max(at - waits_until),
    };
    (next <= now).then(|| Dispatch::next_attempt(run, now))
}

/// How far the tick's watermark is behind `now`, in whole minutes (0 when it has never run:
/// a fresh installation is not a stall).
pub fn minutes_behind(watermark: Option<DateTime<Utc>>, now: DateTime<Utc>) -> i64 {
    watermark.map_or(0, |w| ((crate::due_index::minute_of(now) - w).num_minutes() - 1).max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::RunKey;

    use crate::fixtures::{at, job};

    fn run(job: &Job, key: RunKey, state: RunState) -> Run {
        let t = key.instant;
        Run {
            job_id: job.id.clone(),
            owner: "o".into(),
            key,
            state,
            due_at: t,
            attempt: 0,
            attempts: Vec::new(),
            job_version: 1,
            created_at: t - Duration::seconds(30),
            updated_at: t - Duration::seconds(30),
            reason: None,
            lease_until: None,
            retry_at: None,
            resent_at: None,
            call_ended: None,
            workflow: None,
            backfill: false,
            input: None,
            expires_at: t + Duration::days(30),
            events: Vec::new(),
        }
    }

    const T: &str = "2026-11-22T10:00:00Z";

    #[test]
    fn sla_and_late_start_are_flagged_once() {
        let j = job(serde_json::json!({"sla_s": 60, "start_deadline_s": 30}));
        let mut r = run(&j, RunKey::scheduled(at(T)), RunState::Queued);
        assert!(flags_due(&j, &r, at("2026-11-22T10:00:30Z")).is_empty());
        assert_eq!(flags_due(&j, &r, at("2026-11-22T10:00:31Z")), vec![EventKind::LateStart]);
        assert_eq!(
            flags_due(&j, &r, at("2026-11-22T10:01:01Z")),
            vec![EventKind::SlaMissed, EventKind::LateStart]
        );
        r.events.push(RunEvent::new(EventKind::SlaMissed, 0, at(T)));
        r.events.push(RunEvent::new(EventKind::LateStart, 0, at(T)));
        assert!(flags_due(&j, &r, at("2026-11-22T10:05:00Z")).is_empty());
        r.events.clear();
        r.state = RunState::Succeeded;
        assert!(flags_due(&j, &r, at("2026-11-22T10:05:00Z")).is_empty(), "an ended run is not flagged");
        r.state = RunState::Running;
        r.attempt = 1;
        assert_eq!(flags_due(&j, &r, at("2026-11-22T10:05:00Z")), vec![EventKind::SlaMissed]);
    }

    #[test]
    fn a_run_far_longer_than_usual_is_flagged_once_unless_its_job_opted_out() {
        let mut j = job(serde_json::json!({}));
        j.baseline = Some(crate::health::Baseline { typical_ms: 10_000, p95_ms: 12_000, runs: 5, at: at(T) });
        let mut r = run(&j, RunKey::scheduled(at(T)), RunState::Running);
        r.attempt = 1;
        r.attempts.push(
            serde_json::from_value(serde_json::json!({"n": 1, "started_at": T, "worker": "w"})).unwrap(),
        );
        assert!(flags_due(&j, &r, at("2026-11-22T10:01:12Z")).is_empty(), "p95 + 60 s: still usual");
        assert_eq!(flags_due(&j, &r, at("2026-11-22T10:01:13Z")), vec![EventKind::DurationAnomaly]);
        r.events.push(RunEvent::new(EventKind::DurationAnomaly, 1, at("2026-11-22T10:01:13Z")));
        assert!(flags_due(&j, &r, at("2026-11-22T10:30:00Z")).is_empty(), "once per run");
        r.events.clear();
        j.document.health_alerts = Some(false);
        assert!(flags_due(&j, &r, at("2026-11-22T10:30:00Z")).is_empty(), "opted out");
        j.document.health_alerts = None;
        j.baseline = None;
        assert!(flags_due(&j, &r, at("2026-11-22T10:30:00Z")).is_empty(), "nothing learned yet");
    }

    #[test]
    fn a_queued_run_not_started_after_its_grace_is_sent_again_sent_or_not() {
        let j = job(serde_json::json!({}));
        let settings = WatchdogSettings::default();
        for key in [RunKey::scheduled(at(T)), RunKey::manual(at(T))] {
            let mut r = run(&j, key, RunState::Queued);
            // Its job advanced past it (the old evidence of a send) or not: the same answer.
            assert_eq!(missing_dispatch(&r, at("2026-11-22T10:01:59Z"), &settings), None);
            let d = missing_dispatch(&r, at("2026-11-22T10:02:00Z"), &settings).unwrap();
            assert_eq!((d.message.attempt, d.delay_s), (1, 0));
            r.resent_at = Some(at("2026-11-22T10:02:00Z"));
            assert_eq!(missing_dispatch(&r, at("2026-11-22T10:03:59Z"), &settings), None, "once per grace");
            assert!(missing_dispatch(&r, at("2026-11-22T10:04:00Z"), &settings).is_some());
            r.resent_at = Some(at("2026-11-22T10:04:00Z"));
            assert_eq!(
                missing_dispatch(&r, at("2026-11-22T10:07:59Z"), &settings),
                None,
                "spaced out: doubling"
            );
            assert!(missing_dispatch(&r, at("2026-11-22T10:08:00Z"), &settings).is_some());
        }
    }

    #[test]
    fn a_run_claimed_ahead_is_left_alone_until_due() {
        let j = job(serde_json::json!({}));
        let r = run(&j, RunKey::scheduled(at("2026-11-22T10:05:00Z")), RunState::Queued);
        assert_eq!(missing_dispatch(&r, at("2026-11-22T10:06:59Z"), &WatchdogSettings::default()), None);
    }

    #[test]
    fn a_retry_not_started_after_its_backoff_is_sent_again() {
        let j =
            job(serde_json::json!({"retry": {"max_attempts": 3, "backoff_s": 10, "max_backoff_s": 3600}}));
        let mut r = run(&j, RunKey::scheduled(at(T)), RunState::Retrying);
        r.attempt = 1;
        r.updated_at = at(T);
        r.retry_at = Some(at("2026-11-22T10:00:10Z"));
        let settings = WatchdogSettings::default();
        // The end of this backoff plus the margin (120 s), not the longest backoff (an hour).
        assert_eq!(missing_dispatch(&r, at("2026-11-22T10:02:09Z"), &settings), None);
        let d = missing_dispatch(&r, at("2026-11-22T10:02:10Z"), &settings).unwrap();
        assert_eq!((d.message.attempt, d.delay_s), (2, 0));
        r.resent_at = Some(at("2026-11-22T10:02:10Z"));
        assert_eq!(missing_dispatch(&r, at("2026-11-22T10:04:00Z"), &settings), None, "once per margin");
        r.state = RunState::Running;
        assert_eq!(missing_dispatch(&r, at("2026-11-22T11:00:00Z"), &settings), None, "started");
    }

    #[test]
    fn unsent_events_wait_out_their_writer() {
        let j = job(serde_json::json!({}));
        let mut r = run(&j, RunKey::scheduled(at(T)), RunState::Failed);
        r.events.push(RunEvent::new(EventKind::Failed, 1, at(T)));
        let grace = Duration::seconds(60);
        assert!(unsent_events(&r, at("2026-11-22T10:00:59Z"), grace).is_empty());
        assert_eq!(unsent_events(&r, at("2026-11-22T10:01:00Z"), grace).len(), 1);
        // Taken over by a pass: the next waits out that pass too.
        r.events[0].taken_at = Some(at("2026-11-22T10:01:00Z"));
        assert!(unsent_events(&r, at("2026-11-22T10:01:59Z"), grace).is_empty());
        assert_eq!(unsent_events(&r, at("2026-11-22T10:02:00Z"), grace).len(), 1);
        assert!(!needs_settling(&r, at("2026-11-22T10:05:00Z"), grace));
        r.events[0].sent = true;
        assert!(needs_settling(&r, at("2026-11-22T10:05:00Z"), grace));
    }

    #[test]
    fn the_watermark_lag_counts_whole_minutes_past_the_current_one() {
        let now = at("2026-11-22T10:05:30Z");
        assert_eq!(minutes_behind(None, now), 0);
        assert_eq!(minutes_behind(Some(at("2026-11-22T10:05:00Z")), now), 0);
        assert_eq!(minutes_behind(Some(at("2026-11-22T10:04:00Z")), now), 0);
        assert_eq!(minutes_behind(Some(at("2026-11-22T10:02:00Z")), now), 2);
    }
}
