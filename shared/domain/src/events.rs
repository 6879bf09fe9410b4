//! Events: what is worth telling people about a run, when, and to whom.
//!
//! A change of a run causes events ([`crate::run::transition::caused`]); they are recorded on the run (see
//! [`crate::run::event`]) and published through the [`crate::ports::bus::EventBus`]: always to
//! the shared events topic, and to the job's own topic when its notification settings name an
//! endpoint and ask for the event ([`wants`]).

use crate::job::{EventKind, Job, NotifySettings};
use crate::run::event::EventDetail;
use crate::run::{Run, RunEvent, RunState};
use chrono::{DateTime, Utc};
use serde::Serialize;

/// A failing streak, as seen once a run has ended failed (or timed out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Streak {
    /// Ended runs in a row that failed, the one just ended included; skipped and cancelled runs
    /// neither count nor break the streak.
    pub failures: usize,
    /// The succeeded run the streak follows: what names the streak (`None` when no success is
    /// in view).
    pub after: Option<crate::run::RunKey>,
}

/// The streak a run just ended as a failure belongs to: `earlier` are the job's runs keyed
/// before it, newest first; `later` those keyed after it up to now, oldest first (runs ending out
/// of order: a later one may have failed first). Runs still in flight are passed over.
pub fn failing_streak(earlier: &[Run], later: &[Run]) -> Streak {
    let mut failures = 1;
    for run in later {
        match run.state {
            RunState::Failed | RunState::TimedOut => failures += 1,
            RunState::Succeeded => break,
            // In flight, skipped or cancelled.
            _ => {}
        }
    }
    for run in earlier {
        match run.state {
            RunState::Failed | RunState::TimedOut => failures += 1,
            RunState::Succeeded => return Streak { failures, after: Some(run.key.clone()) },
            _ => {}
        }
    }
    Streak { failures, after: None }
}

/// One message about one event of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notification {
    pub event: &'static str,
    pub job_id: String,
    /// The job's name, or its id once the job is deleted.
    pub job_name: String,
    pub owner: String,
    pub run_id: String,
    pub state: RunState,
    pub attempt: u32,
    pub scheduled_at: DateTime<Utc>,
    pub at: DateTime<Utc>,
    /// From the first attempt's start to the last one's end (or to `at` while running).
    pub duration_ms: Option<i64>,
    /// The last attempt's error, if any.
    pub error: Option<String>,
    /// The run's page in the dashboard, when a public URL is configured.
    pub link: Option<String>,
    /// The job's learned baseline, with `duration_anomaly` and `too_fast`: the numbers the run
    /// was judged by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<crate::health::Baseline>,
    /// With `failure_rate` and `recovered`: the numbers the event was decided on, as
    /// `"failure_rate": {...}` or `"recovered": {...}`.
    #[serde(flatten)]
    pub detail: Option<EventDetail>,
}

impl Notification {
    pub fn new(job: Option<&Job>, run: &Run, event: &RunEvent, public_url: Option<&str>) -> Self {
        let started = run.attempts.first().map(|a| a.started_at);
        let ended = run.attempts.last().and_then(|a| a.finished_at).unwrap_or(event.at);
        Notification {
            event: event.kind.as_str(),
            job_id: run.job_id.to_string(),
            job_name: job.map_or_else(|| run.job_id.to_string(), |j| j.document.name.clone()),
            owner: run.owner.clone(),
            run_id: run.id().to_string(),
            state: run.state,
            attempt: run.attempt,
            scheduled_at: run.scheduled_at(),
            at: event.at,
            duration_ms: started.map(|s| (ended - s).num_milliseconds().max(0)),
            error: run.attempts.last().and_then(|a| a.error.clone()),
            link: public_url.map(|base| dashboard_link(base, &run.id().to_string())),
            baseline: job.and_then(|j| j.baseline).filter(|_| {
                matches!(event.kind.told(), Some(EventKind::DurationAnomaly | EventKind::TooFast))
            }),
            detail: event.detail.clone(),
        }
    }

    /// The subject line of an email: `nightly-report: failed (attempt 3)`.
    pub fn subject(&self) -> String {
        let mut line = format!("{}: {} (attempt {})", self.job_name, self.event, self.attempt);
        truncate_chars(&mut line, 100);
        line
    }

    /// The body for people (email): what happened, to which run, and where to look.
    pub fn text(&self) -> String {
        let mut text = format!(
            "Job {job} ({job_id}): {event}.\nRun {run}, scheduled {scheduled}, is {state} after attempt {attempt}.",
            job = self.job_name,
            job_id = self.job_id,
            event = self.event,
            run = self.run_id,
            scheduled = self.scheduled_at.to_rfc3339(),
            state = self.state,
            attempt = self.attempt,
        );
        if let Some(ms) = self.duration_ms {
            text.push_str(&format!("\nDuration: {}.", human_duration(ms)));
        }
        if let Some(error) = &self.error {
            text.push_str(&format!("\nError: {error}"));
        }
        if let Some(detail) = self.detail_text() {
            text.push_str(&format!("\n{detail}"));
        }
        if let Some(link) = &self.link {
            text.push_str(&format!("\n{link}"));
        }
        text
    }

    /// The numbers the event was decided on, in words (`failure_rate`, `recovered`).
    pub fn detail_text(&self) -> Option<String> {
        match &self.detail {
            Some(EventDetail::FailureRate(rate)) => Some(format!(
                "Failure rate: {} of the latest {} ended runs failed ({} %; told at {} %).",
                rate.failed, rate.ended, rate.percent, rate.threshold_percent
            )),
            Some(EventDetail::Recovered(recovery)) => {
                let from: Vec<String> = recovery
                    .from
                    .open()
                    .map(|(trouble, mark)| {
                        format!("{} (told {})", trouble.as_str(), mark.told_at.to_rfc3339())
                    })
                    .collect();
                Some(format!("Recovered from: {}.", from.join(", ")))
            }
            None => None,
        }
    }

    /// The body for a phone (SMS): one short line.
    pub fn short_text(&self) -> String {
        let mut line = format!("Sundial {}: {} ({})", self.job_name, self.event, self.state);
        if let Some(link) = &self.link {
            line.push(' ');
            line.push_str(link);
        }
        truncate_chars(&mut line, 140);
        line
    }
}

/// The dashboard's page of a run.
pub fn dashboard_link(base: &str, run_id: &str) -> String {
    format!("{}/ui/index.html#/runs/{run_id}", base.trim_end_matches('/'))
}

/// A duration in words: `850 ms`, `4.2 s`, `3 min 5 s`.
pub fn human_duration(ms: i64) -> String {
    match ms {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        ms => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

/// Cuts `text` to at most `max` characters.
pub fn truncate_chars(text: &mut String, max: usize) {
    if let Some((cut, _)) = text.char_indices().nth(max) {
        text.truncate(cut);
    }
}

/// One message about a job as a whole rather than one of its runs: instants of its schedule
/// passed without a run (`missed`). Published to the shared events topic, and to the job's own
/// topic when it asked for the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobNotice {
    pub event: &'static str,
    pub job_id: String,
    pub job_name: String,
    pub owner: String,
    pub at: DateTime<Utc>,
    /// What happened, with the numbers that made it worth telling.
    #[serde(flatten)]
    pub about: NoticeAbout,
    /// The job's page in the dashboard, when a public URL is configured.
    pub link: Option<String>,
}

/// What a [`JobNotice`] tells.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum NoticeAbout {
    /// Instants from `from` to `to` (`instants` of them) were passed without a run, for
    /// `reason` (`catchup_dropped`), as `detail` says.
    Missed { from: DateTime<Utc>, to: DateTime<Utc>, instants: u64, reason: &'static str, detail: String },
}

impl JobNotice {
    pub const MISSED: &'static str = "missed";

    /// The `missed` notice of `gap` of `job`.
    pub fn missed(job: &Job, gap: &crate::job::Gap, public_url: Option<&str>) -> Self {
        JobNotice {
            event: Self::MISSED,
            job_id: job.id.to_string(),
            job_name: job.document.name.clone(),
            owner: job.owner.clone(),
            at: gap.at,
            about: NoticeAbout::Missed {
                from: gap.from,
                to: gap.to,
                instants: gap.instants,
                reason: "catchup_dropped",
                detail: gap.explain(),
            },
            link: public_url.map(|base| job_link(base, job.id.as_str())),
        }
    }

    /// The subject line of an email: `nightly-report: missed 180 instants`.
    pub fn subject(&self) -> String {
        let mut line = match &self.about {
            NoticeAbout::Missed { instants, .. } => {
                format!("{}: missed {instants} instant(s)", self.job_name)
            }
        };
        truncate_chars(&mut line, 100);
        line
    }

    /// The body for people (email).
    pub fn text(&self) -> String {
        let mut text = match &self.about {
            NoticeAbout::Missed { from, to, instants, detail, .. } => format!(
                "Job {} ({}): {instants} instant(s) from {} to {} did not run.\n{detail}.",
                self.job_name,
                self.job_id,
                from.to_rfc3339(),
                to.to_rfc3339()
            ),
        };
        if let Some(link) = &self.link {
            text.push_str(&format!("\n{link}"));
        }
        text
    }

    /// The body for a phone (SMS): one short line.
    pub fn short_text(&self) -> String {
        let mut line = format!("Sundial {}", self.subject());
        if let Some(link) = &self.link {
            line.push(' ');
            line.push_str(link);
        }
        truncate_chars(&mut line, 140);
        line
    }
}

/// The dashboard's page of a job.
pub fn job_link(base: &str, job_id: &str) -> String {
    format!("{}/ui/index.html#/jobs/{job_id}", base.trim_end_matches('/'))
}

/// The scheduler's own health, told to operators on the shared topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchedulerAlert {
    /// `scheduler_stalled` or `scheduler_recovered`.
    pub event: &'static str,
    /// The last minute the tick fully processed.
    pub watermark: Option<DateTime<Utc>>,
    pub at: DateTime<Utc>,
}

impl SchedulerAlert {
    pub const STALLED: &'static str = "scheduler_stalled";
    pub const RECOVERED: &'static str = "scheduler_recovered";

    pub fn text(&self) -> String {
        let mark = self.watermark.map_or_else(|| "never".to_string(), |w| w.to_rfc3339());
        match self.event {
            Self::STALLED => format!("Sundial's scheduler is stalled: the last minute processed is {mark}."),
            _ => format!("Sundial's scheduler has recovered: it has processed up to {mark}."),
        }
    }
}

/// Whether `job` has a topic of its own: its notification settings name an endpoint.
pub fn has_endpoints(job: &Job) -> bool {
    job.document.notify.as_ref().is_some_and(|n| !endpoints(n).is_empty())
}

/// Whether `job` sends `kind` to its own topic: it has endpoints and asked for the event.
pub fn wants(job: &Job, kind: EventKind) -> bool {
    has_endpoints(job) && job.document.notify.as_ref().is_some_and(|n| n.on.contains(&kind))
}

/// One endpoint of a job's settings: (SNS protocol, endpoint, the settings' field).
pub fn endpoints(notify: &NotifySettings) -> Vec<(&'static str, String, String)> {
    let lists =
        [("email", &notify.email), ("sms", &notify.sms), ("https", &notify.https), ("sqs", &notify.sqs)];
    lists
        .into_iter()
        .flat_map(|(protocol, list)| {
            list.iter()
                .enumerate()
                .map(move |(i, e)| (protocol, e.clone(), format!("notify.{protocol}[{i}]")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::transition::caused;
    use crate::run::{Attempt, RunKey};

    use crate::fixtures::{at, job};

    fn run(job: &Job, instant: &str, state: RunState) -> Run {
        let t = at(instant);
        Run {
            job_id: job.id.clone(),
            owner: job.owner.clone(),
            key: RunKey::scheduled(t),
            state,
            due_at: t,
            attempt: 0,
            attempts: Vec::new(),
            job_version: 1,
            created_at: t,
            updated_at: t,
            reason: None,
            lease_until: None,
            retry_at: None,
            resent_at: None,
            call_ended: None,
            workflow: None,
            backfill: false,
            input: None,
            expires_at: t,
            events: Vec::new(),
        }
    }

    #[test]
    fn a_failing_streak_counts_ended_failures_back_to_the_last_success() {
        let j = job(serde_json::json!({}));
        let r = |minute: u32, state| run(&j, &format!("2026-11-22T10:{minute:02}:00Z"), state);
        use RunState::*;
        // Newest first.
        // Earlier runs newest first, later runs oldest first.
        let streak = failing_streak(&[r(5, Failed), r(4, TimedOut), r(3, Succeeded), r(2, Failed)], &[]);
        assert_eq!(streak, Streak { failures: 3, after: Some(r(3, Succeeded).key) });
        let through = failing_streak(&[r(5, Running), r(4, Skipped), r(3, Cancelled), r(2, Failed)], &[]);
        assert_eq!(through, Streak { failures: 2, after: None }, "in flight, skipped and cancelled pass");
        assert_eq!(failing_streak(&[], &[]), Streak { failures: 1, after: None });
        assert_eq!(failing_streak(&[r(1, Succeeded)], &[]).failures, 1);
        // A later run that failed first counts; a later success ends the streak's reach.
        let both =
            failing_streak(&[r(3, Succeeded)], &[r(5, Running), r(6, Failed), r(7, Succeeded), r(8, Failed)]);
        assert_eq!(both, Streak { failures: 2, after: Some(r(3, Succeeded).key) });
    }

    #[test]
    fn the_first_attempt_starting_past_its_deadline_is_a_late_start() {
        let j = job(serde_json::json!({"start_deadline_s": 30}));
        let before = run(&j, "2026-11-22T10:00:00Z", RunState::Queued);
        let started = Run { state: RunState::Running, attempt: 1, ..before.clone() };
        assert!(caused(&j, &before, &started, at("2026-11-22T10:00:30Z")).is_empty());
        let late = caused(&j, &before, &started, at("2026-11-22T10:00:31Z"));
        assert_eq!(late.iter().map(|e| e.kind).collect::<Vec<_>>(), [EventKind::LateStart]);
        let mut flagged = before.clone();
        flagged.events.push(RunEvent::new(EventKind::LateStart, 0, at("2026-11-22T10:00:31Z")));
        assert!(caused(&j, &flagged, &started, at("2026-11-22T10:01:00Z")).is_empty(), "once per run");
    }

    #[test]
    fn succeeded_is_told_only_when_asked_for() {
        let quiet = job(serde_json::json!({}));
        let before = run(&quiet, "2026-11-22T10:00:00Z", RunState::Running);
        let after = Run { state: RunState::Succeeded, ..before.clone() };
        assert!(caused(&quiet, &before, &after, at("2026-11-22T10:00:01Z")).is_empty());
        let asking = job(serde_json::json!({"notify": {"on": ["succeeded"]}}));
        let kinds: Vec<_> =
            caused(&asking, &before, &after, at("2026-11-22T10:00:01Z")).iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EventKind::Succeeded]);
    }

    #[test]
    fn notifications_read_well_and_link_to_the_run() {
        let j = job(serde_json::json!({}));
        let mut r = run(&j, "2026-11-22T10:00:00Z", RunState::Failed);
        r.attempt = 2;
        r.attempts = vec![Attempt {
            n: 2,
            started_at: at("2026-11-22T10:00:01Z"),
            finished_at: Some(at("2026-11-22T10:01:31Z")),
            worker: "w".into(),
            outcome: Some(crate::run::Outcome::Failed),
            status_code: Some(500),
            error: Some("HTTP 500".into()),
            output: None,
            callback: None,
            call_until: None,
            handle: None,
            followed_at: None,
            looks: 0,
            look_tag: None,
            logs_url: None,
        }];
        let event = RunEvent::new(EventKind::Failed, 2, at("2026-11-22T10:01:31Z"));
        let n = Notification::new(Some(&j), &r, &event, Some("https://sundial.test/"));
        assert_eq!(n.subject(), "nightly: failed (attempt 2)");
        assert_eq!(n.duration_ms, Some(90_000));
        let link = format!("https://sundial.test/ui/index.html#/runs/{}", r.id());
        assert_eq!(n.link.as_deref(), Some(link.as_str()));
        let text = n.text();
        for part in ["Job nightly", "failed", "FAILED", "1 min 30 s", "Error: HTTP 500", link.as_str()] {
            assert!(text.contains(part), "{part} missing from {text}");
        }
        assert!(n.short_text().chars().count() <= 140);
        // A deleted job is named by its id.
        assert_eq!(Notification::new(None, &r, &event, None).job_name, j.id.to_string());
    }
}
