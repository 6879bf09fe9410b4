//! Events: what is worth telling people about a run, and how each is told exactly once.
//!
//! Whoever wins a run's conditional state change records the events it causes *in that same
//! write* (unsent), then publishes them, then marks them sent (invariant 5). A crash between
//! publishing and marking can send an event twice; a crash before publishing leaves it unsent,
//! for the watchdog to publish. Messages go to the shared events topic with the attributes
//! `event`, `job_id`, `job_name` and `owner`, so operators filter with filter policies.

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
    pub sent: bool,
}

impl RunEvent {
    pub fn new(kind: EventKind, attempt: u32, at: DateTime<Utc>) -> Self {
        let name = kind_name(kind);
        let id = match kind {
            EventKind::Retrying => format!("{name}#{attempt}"),
            _ => name.to_string(),
        };
        RunEvent { id, kind, at, sent: false }
    }
}

/// The wire name of an event kind (`timed_out`).
pub fn kind_name(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Succeeded => "succeeded",
        EventKind::Failed => "failed",
        EventKind::Retrying => "retrying",
        EventKind::TimedOut => "timed_out",
        EventKind::SlaMissed => "sla_missed",
        EventKind::LateStart => "late_start",
        EventKind::Skipped => "skipped",
        EventKind::Failing => "failing",
    }
}

/// The events a change of `before` into `after` causes, `now` being when it happens.
/// `succeeded` only when the job's notification settings ask for it; `sla_missed` when the run
/// ends past its SLA and nobody recorded it yet.
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
    if after.state.is_terminal() && !already(EventKind::SlaMissed) {
        if let Some(sla) = job.document.sla_s {
            if now > after.scheduled_at() + Duration::seconds(i64::from(sla)) {
                events.push(RunEvent::new(EventKind::SlaMissed, after.attempt, now));
            }
        }
    }
    events
}

/// One message about one event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notification {
    pub event: &'static str,
    pub job_id: String,
    pub job_name: String,
    pub owner: String,
    pub run_id: String,
    pub state: RunState,
    pub attempt: u32,
    pub scheduled_at: DateTime<Utc>,
    pub at: DateTime<Utc>,
    /// The last attempt's error, if any.
    pub error: Option<String>,
}

impl Notification {
    pub fn new(job: &Job, run: &Run, event: &RunEvent) -> Self {
        Notification {
            event: kind_name(event.kind),
            job_id: job.id.to_string(),
            job_name: job.document.name.clone(),
            owner: job.owner.clone(),
            run_id: run.id().to_string(),
            state: run.state,
            attempt: run.attempt,
            scheduled_at: run.scheduled_at(),
            at: event.at,
            error: run.attempts.last().and_then(|a| a.error.clone()),
        }
    }

    /// A short human line: `nightly-report: failed (run …, attempt 3): HTTP 500`.
    pub fn subject(&self) -> String {
        let mut line = format!("{}: {} (attempt {})", self.job_name, self.event, self.attempt);
        line.truncate(100);
        line
    }
}

/// Why a message was not published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not publish: {0}")]
pub struct PublishError(pub String);

/// Where notifications go.
#[async_trait]
pub trait EventBus: Send + Sync + std::fmt::Debug {
    async fn publish(&self, notification: &Notification) -> Result<(), PublishError>;
}

/// The shared events topic in SNS.
#[derive(Debug, Clone)]
pub struct SnsEventBus {
    client: aws_sdk_sns::Client,
    topic_arn: String,
}

impl SnsEventBus {
    pub fn new(client: aws_sdk_sns::Client, topic_arn: impl Into<String>) -> Self {
        SnsEventBus { client, topic_arn: topic_arn.into() }
    }
}

#[async_trait]
impl EventBus for SnsEventBus {
    async fn publish(&self, n: &Notification) -> Result<(), PublishError> {
        use aws_sdk_sns::types::MessageAttributeValue;
        let attribute = |value: &str| {
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
                .map_err(|e| PublishError(e.to_string()))
        };
        let body = serde_json::to_string(n).map_err(|e| PublishError(e.to_string()))?;
        self.client
            .publish()
            .topic_arn(&self.topic_arn)
            .subject(n.subject())
            .message(body)
            .message_attributes("event", attribute(n.event)?)
            .message_attributes("job_id", attribute(&n.job_id)?)
            .message_attributes("job_name", attribute(&n.job_name)?)
            .message_attributes("owner", attribute(&n.owner)?)
            .send()
            .await
            .map_err(|e| PublishError(aws_sdk_sns::error::DisplayErrorContext(e).to_string()))?;
        Ok(())
    }
}

/// Publishes a run's unsent events and marks each sent.
#[derive(Debug, Clone)]
pub struct Announcer {
    bus: Arc<dyn EventBus>,
    runs: Arc<dyn RunStore>,
}

impl Announcer {
    pub fn new(bus: Arc<dyn EventBus>, runs: Arc<dyn RunStore>) -> Self {
        Announcer { bus, runs }
    }

    /// Publishes every unsent event of `run`; a failure leaves the event unsent (and is logged)
    /// for a later pass to publish. Returns how many were published.
    pub async fn announce(&self, job: &Job, run: &Run) -> usize {
        let mut published = 0;
        for event in run.events.iter().filter(|e| !e.sent) {
            if let Err(e) = self.bus.publish(&Notification::new(job, run, event)).await {
                tracing::warn!(run_id = %run.id(), event = %event.id, error = %e, "event left unsent");
                continue;
            }
            published += 1;
            if let Err(e) = self.runs.mark_event_sent(run, &event.id).await {
                tracing::warn!(run_id = %run.id(), event = %event.id, error = %e, "published event not marked sent");
            }
        }
        published
    }
}
