//! Events: what is worth telling people about a run, and how each is told exactly once.
//!
//! Whoever wins a run's conditional state change records the events it causes *in that same
//! write* (unsent), then publishes them, then marks them sent (invariant 5). A crash between
//! publishing and marking can send an event twice; a crash before publishing leaves it unsent,
//! for the watchdog to publish: a pass takes an event over with a conditional write first, so
//! overlapping passes never both publish it, and a publish that reached the shared topic but not
//! the job's is marked so, so that a retry sends it to the job's topic only. Messages go to the shared events topic with the attributes
//! `event`, `job_id`, `job_name` and `owner`, so operators filter with filter policies, and,
//! when the job asked for the event, to the job's own topic (see [`crate::topics`]). Each
//! message carries a body per protocol: a short text for email and SMS, JSON for HTTPS and SQS.

use crate::job::{EventKind, Job};
use crate::run::{Run, RunState};
use crate::store::RunStore;
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// An event recorded on a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEvent {
    /// Unique within the run: `<event>` or `<event>#<attempt>` for per-attempt events.
    pub id: String,
    pub kind: EventKind,
    pub at: DateTime<Utc>,
    /// Published to every destination it goes to.
    pub sent: bool,
    /// Published to the shared topic while the job's topic still owes it (a partial publish).
    pub shared_sent: bool,
    /// When a watchdog pass last took the publishing of the event over (`None`: only its
    /// recorder, at `at`, has).
    pub taken_at: Option<DateTime<Utc>>,
}

impl RunEvent {
    pub fn new(kind: EventKind, attempt: u32, at: DateTime<Utc>) -> Self {
        let name = kind.as_str();
        let id = match kind {
            EventKind::Retrying => format!("{name}#{attempt}"),
            _ => name.to_string(),
        };
        RunEvent { id, kind, at, sent: false, shared_sent: false, taken_at: None }
    }

    /// When its publisher last took it on: a publisher has that long (the watchdog's
    /// `publish_grace`) before another may take it over.
    pub fn last_taken(&self) -> DateTime<Utc> {
        self.taken_at.unwrap_or(self.at)
    }
}

/// What one announcement published, to be marked in one write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    /// Events published everywhere they go.
    pub sent: Vec<String>,
    /// Events published to the shared topic only: the job's topic failed.
    pub shared_only: Vec<String>,
}

impl Published {
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty() && self.shared_only.is_empty()
    }
}

/// The events a change of `before` into `after` causes, `now` being when it happens.
/// `succeeded` only when the job's notification settings ask for it; `sla_missed` when the run
/// ends past its SLA and nobody recorded it yet. Deadlines count from the run's due time (see
/// [`crate::watchdog::inspect::flags_due`]).
pub fn caused(job: &Job, before: &Run, after: &Run, now: DateTime<Utc>) -> Vec<RunEvent> {
    let mut events = Vec::new();
    if after.state != before.state || after.attempt != before.attempt {
        let kind = match after.state {
            RunState::Succeeded => {
                let asked =
                    job.document.notify.as_ref().is_some_and(|n| n.on.contains(&EventKind::Succeeded));
                asked.then_some(EventKind::Succeeded)
            }
            RunState::Retrying => Some(EventKind::Retrying),
            RunState::Failed => Some(EventKind::Failed),
            RunState::TimedOut => Some(EventKind::TimedOut),
            RunState::Skipped => Some(EventKind::Skipped),
            _ => None,
        };
        events.extend(kind.map(|k| RunEvent::new(k, after.attempt, now)));
    }
    let already = |kind: EventKind| after.events.iter().chain(&before.events).any(|e| e.kind == kind);
    let first_start = before.attempt == 0 && after.attempt == 1;
    if first_start && !already(EventKind::LateStart) {
        if let Some(deadline) = job.document.start_deadline_s {
            if now > after.due_at + Duration::seconds(i64::from(deadline)) {
                events.push(RunEvent::new(EventKind::LateStart, after.attempt, now));
            }
        }
    }
    if after.state.is_terminal() && !already(EventKind::SlaMissed) {
        if let Some(sla) = job.document.sla_s {
            if now > after.due_at + Duration::seconds(i64::from(sla)) {
                events.push(RunEvent::new(EventKind::SlaMissed, after.attempt, now));
            }
        }
    }
    events
}

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
        if let Some(link) = &self.link {
            text.push_str(&format!("\n{link}"));
        }
        text
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

fn human_duration(ms: i64) -> String {
    match ms {
        ms if ms < 1_000 => format!("{ms} ms"),
        ms if ms < 60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        ms => format!("{} min {} s", ms / 60_000, (ms % 60_000) / 1000),
    }
}

fn truncate_chars(text: &mut String, max: usize) {
    if let Some((cut, _)) = text.char_indices().nth(max) {
        text.truncate(cut);
    }
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

/// Why a message was not published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not publish: {0}")]
pub struct PublishError(pub String);

/// Where notifications go.
#[async_trait]
pub trait EventBus: Send + Sync + std::fmt::Debug {
    /// To the shared events topic (operators).
    async fn publish(&self, notification: &Notification) -> Result<(), PublishError>;
    /// To the topic of the job `notification` is about (the people its settings name).
    async fn publish_to_job(&self, notification: &Notification) -> Result<(), PublishError>;
    /// A scheduler alert, to the shared events topic.
    async fn alert(&self, alert: &SchedulerAlert) -> Result<(), PublishError>;
}

/// SNS: the shared events topic, and the per-job topics named by [`crate::topics::TopicNames`].
#[derive(Debug, Clone)]
pub struct SnsEventBus {
    client: aws_sdk_sns::Client,
    topic_arn: String,
    names: crate::topics::TopicNames,
}

impl SnsEventBus {
    pub fn new(
        client: aws_sdk_sns::Client,
        topic_arn: impl Into<String>,
        names: crate::topics::TopicNames,
    ) -> Self {
        SnsEventBus { client, topic_arn: topic_arn.into(), names }
    }

    async fn send(
        &self,
        topic: &str,
        subject: String,
        bodies: serde_json::Value,
        attributes: &[(&str, &str)],
    ) -> Result<(), PublishError> {
        use aws_sdk_sns::types::MessageAttributeValue;
        let mut request = self
            .client
            .publish()
            .topic_arn(topic)
            .subject(subject)
            .message_structure("json")
            .message(bodies.to_string());
        for (name, value) in attributes {
            let value = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(*value)
                .build()
                .map_err(|e| PublishError(e.to_string()))?;
            request = request.message_attributes(*name, value);
        }
        request
            .send()
            .await
            .map_err(|e| PublishError(aws_sdk_sns::error::DisplayErrorContext(e).to_string()))?;
        Ok(())
    }

    async fn publish_at(&self, topic: &str, n: &Notification) -> Result<(), PublishError> {
        let json = serde_json::to_string(n).map_err(|e| PublishError(e.to_string()))?;
        let bodies = protocol_bodies(&json, &n.text(), &n.short_text());
        let attributes =
            [("event", n.event), ("job_id", &n.job_id), ("job_name", &n.job_name), ("owner", &n.owner)];
        self.send(topic, n.subject(), bodies, &attributes).await
    }
}

/// SNS's per-protocol message (`MessageStructure: json`): JSON for machines, text for people.
pub fn protocol_bodies(json: &str, text: &str, short: &str) -> serde_json::Value {
    serde_json::json!({
        "default": json,
        "sqs": json,
        "https": json,
        "http": json,
        "lambda": json,
        "email": text,
        "email-json": json,
        "sms": short,
    })
}

#[async_trait]
impl EventBus for SnsEventBus {
    async fn publish(&self, n: &Notification) -> Result<(), PublishError> {
        self.publish_at(&self.topic_arn, n).await
    }

    async fn publish_to_job(&self, n: &Notification) -> Result<(), PublishError> {
        self.publish_at(&self.names.arn(&n.job_id), n).await
    }

    async fn alert(&self, alert: &SchedulerAlert) -> Result<(), PublishError> {
        let json = serde_json::to_string(alert).map_err(|e| PublishError(e.to_string()))?;
        let text = alert.text();
        let bodies = protocol_bodies(&json, &text, &text);
        self.send(&self.topic_arn, format!("Sundial: {}", alert.event), bodies, &[("event", alert.event)])
            .await
    }
}

/// Publishes the events of runs and marks them sent.
#[derive(Debug, Clone)]
pub struct Announcer {
    bus: Arc<dyn EventBus>,
    runs: Arc<dyn RunStore>,
    public_url: Option<String>,
}

impl Announcer {
    pub fn new(bus: Arc<dyn EventBus>, runs: Arc<dyn RunStore>, public_url: Option<String>) -> Self {
        Announcer { bus, runs, public_url }
    }

    pub fn bus(&self) -> &Arc<dyn EventBus> {
        &self.bus
    }

    /// Publishes `events` of `run` (those not yet sent) to the shared topic, unless a partial
    /// publish already reached it, and, when the job asked for them, to the job's topic; marks
    /// what was published in one write, and lets an ended run whose events are all published
    /// leave the in-flight index. A failure leaves the event unsent (and is logged) for the
    /// watchdog to publish. `job` is `None` once the job is deleted. Returns how many events
    /// were published everywhere they go.
    pub async fn announce(&self, job: Option<&Job>, run: &Run, events: &[RunEvent]) -> usize {
        if events.iter().all(|e| e.sent) {
            return 0;
        }
        let mut published = Published::default();
        for event in events.iter().filter(|e| !e.sent) {
            let notification = Notification::new(job, run, event, self.public_url.as_deref());
            if !event.shared_sent {
                if let Err(e) = self.bus.publish(&notification).await {
                    tracing::warn!(run_id = %run.id(), event = %event.id, error = %e, "event left unsent");
                    continue;
                }
            }
            if job.is_some_and(|j| crate::topics::wants(j, event.kind)) {
                if let Err(e) = self.bus.publish_to_job(&notification).await {
                    tracing::warn!(run_id = %run.id(), event = %event.id, error = %e, "event left unsent to the job's topic");
                    if !event.shared_sent {
                        published.shared_only.push(event.id.clone());
                    }
                    continue;
                }
            }
            published.sent.push(event.id.clone());
        }
        let all_sent = run.events.iter().all(|e| e.sent || published.sent.contains(&e.id));
        let settle = run.state.is_terminal() && all_sent;
        if let Err(e) = self.runs.mark_events_sent(run, &published, settle).await {
            tracing::warn!(run_id = %run.id(), error = %e, "published events not marked sent");
        }
        published.sent.len()
    }

    /// Publishes events a crash or a failed publish left unsent, each taken over first with a
    /// conditional write so that of overlapping passes only one publishes it (`now` is the
    /// take-over's time). Returns how many were published everywhere they go.
    pub async fn republish(
        &self,
        job: Option<&Job>,
        run: &Run,
        stale: &[RunEvent],
        now: DateTime<Utc>,
    ) -> Result<usize, crate::store::StoreError> {
        let mut taken = Vec::with_capacity(stale.len());
        for event in stale {
            match self.runs.take_event(run, event, now).await {
                Ok(()) => taken.push(RunEvent { taken_at: Some(now), ..event.clone() }),
                // Another pass took it (or it was sent meanwhile): that pass publishes it.
                Err(crate::store::StoreError::Conflict) => {}
                Err(e) => return Err(e),
            }
        }
        if taken.is_empty() {
            return Ok(0);
        }
        Ok(self.announce(job, run, &taken).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{JobDocument, JobId};
    use crate::run::{Attempt, RunKey};

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap()
    }

    fn job(extra: serde_json::Value) -> Job {
        let mut doc =
            serde_json::json!({"name": "nightly", "target": {"type": "http", "url": "https://x.test/"}});
        doc.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let document: JobDocument = serde_json::from_value(doc).unwrap();
        Job {
            id: JobId::generate(),
            owner: "alice".into(),
            document,
            version: 1,
            created_at: at("2026-11-22T00:00:00Z"),
            updated_at: at("2026-11-22T00:00:00Z"),
            next_run_at: None,
            signing_secret: "s".into(),
            pauses: Vec::new(),
        }
    }

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
    fn people_get_text_and_machines_get_json() {
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
        let json = serde_json::to_string(&n).unwrap();
        let bodies = protocol_bodies(&json, &text, &n.short_text());
        for machine in ["default", "sqs", "https"] {
            let parsed: serde_json::Value = serde_json::from_str(bodies[machine].as_str().unwrap()).unwrap();
            assert_eq!(parsed["event"], "failed");
            assert_eq!(parsed["run_id"], r.id().to_string());
        }
        assert_eq!(bodies["email"], text.as_str());
        // A deleted job is named by its id.
        assert_eq!(Notification::new(None, &r, &event, None).job_name, j.id.to_string());
    }
}
