//! What the watchdog should do about one run, decided without I/O.
//!
//! Each rule looks only at the run, its job and the time, so every repair is a unit test here;
//! the watchdog then applies them with conditional writes, so a rule that fires in two racing
//! watchdogs (or in a watchdog and a worker) takes effect once.

use crate::events::RunEvent;
use crate::job::{EventKind, Job};
use crate::queue::{Dispatch, delay_until};
use crate::run::{Run, RunKind, RunMessage, RunState};
use chrono::{DateTime, Duration, Utc};

/// The watchdog's patience.
#[derive(Debug, Clone)]
pub struct WatchdogSettings {
    /// A claimed run with no sign that its message was sent is dispatched after this long.
    pub dispatch_grace: Duration,
    /// A RETRYING run whose next attempt has not started this long after its longest backoff
    /// has lost its message: it is dispatched again.
    pub retry_margin: Duration,
    /// Events recorded this long ago and still unsent were left by a crash: published again.
    pub publish_grace: Duration,
    /// The tick's watermark this many minutes behind the clock is a stalled scheduler.
    pub stall_after_minutes: i64,
    /// Runs inspected at once.
    pub concurrency: usize,
}

impl Default for WatchdogSettings {
    fn default() -> Self {
        WatchdogSettings {
            dispatch_grace: Duration::seconds(120),
            retry_margin: Duration::seconds(120),
            publish_grace: Duration::seconds(60),
            stall_after_minutes: 3,
            concurrency: 16,
        }
    }
}

/// Events of `run` recorded at least `grace` ago and never marked sent.
pub fn unsent_events(run: &Run, now: DateTime<Utc>, grace: Duration) -> Vec<RunEvent> {
    run.events.iter().filter(|e| !e.sent && e.at + grace <= now).cloned().collect()
}

/// An ended run still in the in-flight index with every event published: the crash came
/// between publishing and leaving the index. It leaves now (after `grace`, so as not to race
/// the writer).
pub fn needs_settling(run: &Run, now: DateTime<Utc>, grace: Duration) -> bool {
    run.state.is_terminal() && run.events.iter().all(|e| e.sent) && run.updated_at + grace <= now
}

/// The flags due on an in-flight run: `sla_missed` past its SLA, `late_start` when still not
/// started past its start deadline; each once per run.
pub fn flags_due(job: &Job, run: &Run, now: DateTime<Utc>) -> Vec<EventKind> {
    let mut due = Vec::new();
    if !run.state.is_in_flight() {
        return due;
    }
    let has = |kind: EventKind| run.events.iter().any(|e| e.kind == kind);
    let past = |seconds: Option<u32>| {
        seconds.is_some_and(|s| now > run.scheduled_at() + Duration::seconds(i64::from(s)))
    };
    if past(job.document.sla_s) && !has(EventKind::SlaMissed) {
        due.push(EventKind::SlaMissed);
    }
    let unstarted = run.state == RunState::Queued && run.attempt == 0;
    if unstarted && past(job.document.start_deadline_s) && !has(EventKind::LateStart) {
        due.push(EventKind::LateStart);
    }
    due
}

/// Whether there is evidence that the message of a QUEUED run went out: the API marks the runs
/// it sends; the tick advances a job only after sending its claimed runs, so a scheduled run
/// behind the job's next instant was sent.
pub fn was_dispatched(job: &Job, run: &Run) -> bool {
    if run.dispatched_at.is_some() {
        return true;
    }
    run.key.kind() == RunKind::Scheduled && job.next_run_at.is_none_or(|next| next > run.scheduled_at())
}

/// The message to send for a run whose message is missing, if it is: a QUEUED run claimed
/// `dispatch_grace` ago without evidence of a send, or a RETRYING run whose retry has not
/// started long after its backoff. A QUEUED run that was sent and merely waits in a backlog is
/// left alone.
pub fn missing_dispatch(
    job: &Job,
    run: &Run,
    now: DateTime<Utc>,
    settings: &WatchdogSettings,
) -> Option<Dispatch> {
    let message =
        |attempt: u32| RunMessage { job_id: run.job_id.to_string(), run_key: run.key.encode(), attempt };
    match run.state {
        RunState::Queued if run.attempt == 0 => {
            let lost = !was_dispatched(job, run) && run.created_at + settings.dispatch_grace <= now;
            lost.then(|| Dispatch { message: message(1), delay_s: delay_until(run.due_at, now) })
        }
        RunState::Retrying => {
            let longest = Duration::seconds(i64::from(job.document.retry.max_backoff_s));
            let expected = run.retry_at.unwrap_or(run.updated_at).max(run.updated_at + longest);
            let since = run.dispatched_at.map_or(expected, |at| at.max(expected));
            (since + settings.retry_margin <= now).then(|| Dispatch {
                message: message(run.attempt + 1),
                delay_s: run.retry_at.map_or(0, |at| delay_until(at, now)),
            })
        }
        _ => None,
    }
}

/// The message for the next attempt of a run the watchdog just moved to RETRYING.
pub fn retry_dispatch(run: &Run, now: DateTime<Utc>) -> Dispatch {
    Dispatch {
        message: RunMessage {
            job_id: run.job_id.to_string(),
            run_key: run.key.encode(),
            attempt: run.attempt + 1,
        },
        delay_s: run.retry_at.map_or(0, |at| delay_until(at, now)),
    }
}

/// How far the tick's watermark is behind `now`, in whole minutes (0 when it has never run:
/// a fresh installation is not a stall).
pub fn minutes_behind(watermark: Option<DateTime<Utc>>, now: DateTime<Utc>) -> i64 {
    watermark.map_or(0, |w| ((crate::due::minute_of(now) - w).num_minutes() - 1).max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobDocument;
    use crate::run::RunKey;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn job(extra: serde_json::Value) -> Job {
        let mut doc = serde_json::json!({"name": "j", "target": {"type": "http", "url": "https://x.test/"}});
        doc.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let document: JobDocument = serde_json::from_value(doc).unwrap();
        Job {
            id: crate::job::JobId::generate(),
            owner: "o".into(),
            document,
            version: 1,
            created_at: at("2026-11-22T00:00:00Z"),
            updated_at: at("2026-11-22T00:00:00Z"),
            next_run_at: Some(at("2026-11-22T10:01:00Z")),
            signing_secret: "s".into(),
        }
    }

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
            dispatched_at: None,
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
    fn a_scheduled_run_behind_its_job_was_sent() {
        let j = job(serde_json::json!({}));
        let r = run(&j, RunKey::scheduled(at(T)), RunState::Queued);
        let late = at("2026-11-22T10:10:00Z");
        assert!(was_dispatched(&j, &r), "the job advanced past the instant");
        assert_eq!(missing_dispatch(&j, &r, late, &WatchdogSettings::default()), None);
        let stuck = Job { next_run_at: Some(at(T)), ..j.clone() };
        assert!(!was_dispatched(&stuck, &r));
        let d = missing_dispatch(&stuck, &r, late, &WatchdogSettings::default()).unwrap();
        assert_eq!(d.message.attempt, 1);
        assert_eq!(d.delay_s, 0);
    }

    #[test]
    fn a_manual_run_needs_its_mark_and_the_grace_period() {
        let j = job(serde_json::json!({}));
        let mut r = run(&j, RunKey::manual(at(T)), RunState::Queued);
        let settings = WatchdogSettings::default();
        let created = r.created_at;
        assert_eq!(missing_dispatch(&j, &r, created + Duration::seconds(119), &settings), None);
        assert!(missing_dispatch(&j, &r, created + Duration::seconds(120), &settings).is_some());
        r.dispatched_at = Some(created);
        assert_eq!(
            missing_dispatch(&j, &r, created + Duration::hours(2), &settings),
            None,
            "a sent run waiting in a backlog is not re-sent"
        );
    }

    #[test]
    fn a_retry_whose_message_is_gone_is_sent_again() {
        let j = job(serde_json::json!({"retry": {"max_attempts": 3, "backoff_s": 10, "max_backoff_s": 60}}));
        let mut r = run(&j, RunKey::scheduled(at(T)), RunState::Retrying);
        r.attempt = 1;
        r.updated_at = at(T);
        r.retry_at = Some(at("2026-11-22T10:00:10Z"));
        let settings = WatchdogSettings::default();
        // Longest backoff (60 s) plus the margin (120 s) after entering RETRYING.
        assert_eq!(missing_dispatch(&j, &r, at("2026-11-22T10:02:59Z"), &settings), None);
        let d = missing_dispatch(&j, &r, at("2026-11-22T10:03:00Z"), &settings).unwrap();
        assert_eq!((d.message.attempt, d.delay_s), (2, 0));
        r.dispatched_at = Some(at("2026-11-22T10:03:00Z"));
        assert_eq!(missing_dispatch(&j, &r, at("2026-11-22T10:04:00Z"), &settings), None, "once per margin");
    }

    #[test]
    fn unsent_events_wait_out_their_writer() {
        let j = job(serde_json::json!({}));
        let mut r = run(&j, RunKey::scheduled(at(T)), RunState::Failed);
        r.events.push(RunEvent::new(EventKind::Failed, 1, at(T)));
        let grace = Duration::seconds(60);
        assert!(unsent_events(&r, at("2026-11-22T10:00:59Z"), grace).is_empty());
        assert_eq!(unsent_events(&r, at("2026-11-22T10:01:00Z"), grace).len(), 1);
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
