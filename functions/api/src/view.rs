//! Response bodies: how jobs and previews look on the wire. Secret header values never appear.

use chrono::{DateTime, LocalResult, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;
use serde::Serialize;
use std::collections::BTreeMap;
use sundial_domain::health::Baseline;
use sundial_domain::job::{Job, JobDocument, Pause, Skip};
use sundial_domain::named_calendar;
use sundial_domain::ports::topics::Subscription;
use sundial_domain::run::{Attempt, Run, RunKind, RunState};
use sundial_domain::schedule::{DstEffectKind, DstNote};
use sundial_domain::waiting::Wait;
use sundial_wiring::logs::{LogLocation, LogsLink};
use utoipa::ToSchema;

/// A job as the API shows it: the document (secrets removed) and what Sundial adds.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobView {
    pub id: String,
    pub owner: String,
    /// The ETag: send it back in `If-Match` to edit only this version.
    pub version: u64,
    #[serde(flatten)]
    pub document: JobDocument,
    /// The schedule in words: "every day at 02:30 America/New_York".
    pub schedule_description: String,
    /// The named calendars the schedule uses, each with the version its instants are computed
    /// from (an edit of a calendar reaches the job at once).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub calendars: BTreeMap<String, u64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The next scheduled instant; null while paused or once a job has no more instants.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The newest run, read from the runs table; null before the first run.
    pub last_run: Option<LastRun>,
    /// The pause the job is in: since when, by whom, why, and until when (it resumes by
    /// itself then); absent while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pause: Option<Pause>,
    /// Its normal duration, learned from its latest successful runs (typical, p95, and how many
    /// runs it is based on); absent until it has enough of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Baseline>,
    /// How many scheduled runs the job may still make, when its schedule sets `max_runs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remaining_runs: Option<u64>,
    /// Instants asked to be skipped (those of the last day among them), oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<Skip>,
    /// The key HTTP targets' bodies are signed with: present only in the response that creates
    /// the job (and its idempotent replay) and in the one that rotates it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
    /// The same key as a Standard Webhooks verifier takes it (`whsec_` and its base64), shown
    /// with `signing_secret`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_secret: Option<String>,
    /// The subscriptions of the job's notification topic and whether each is confirmed (an
    /// email stays pending until its owner confirms it). Shown on single-job responses of jobs
    /// with endpoints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscriptions: Option<Vec<Subscription>>,
    /// What the owner should know of the schedule before it bites: each DST change in the next
    /// year that moves, skips or doubles an instant ("DST: 2027-03-14: 02:30 does not exist in
    /// America/New_York; runs at 03:00"). Shown on single-job responses, creation and edits
    /// among them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The newest run of a job, in brief.
#[derive(Debug, Serialize, ToSchema)]
pub struct LastRun {
    pub id: String,
    pub state: RunState,
    pub scheduled_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&Run> for LastRun {
    fn from(run: &Run) -> Self {
        LastRun {
            id: run.id().to_string(),
            state: run.state,
            scheduled_at: run.scheduled_at(),
            updated_at: run.updated_at,
        }
    }
}

impl JobView {
    pub fn with_last_run(mut self, run: Option<&Run>) -> Self {
        self.last_run = run.map(LastRun::from);
        self
    }

    /// The view of a job, with its signing secret shown (creation and rotation only).
    pub fn with_secret(job: &Job) -> Self {
        JobView {
            signing_secret: Some(job.signing_secret.clone()),
            webhook_secret: Some(sundial_domain::target::webhook_secret(&job.signing_secret)),
            ..JobView::from(job)
        }
    }
}

impl From<&Job> for JobView {
    fn from(job: &Job) -> Self {
        JobView {
            id: job.id.to_string(),
            owner: job.owner.clone(),
            version: job.version,
            // As its owner wrote it: a named calendar's days are the calendar's to show.
            document: named_calendar::written(&job.document.redacted()),
            calendars: named_calendar::held_versions(&job.document),
            schedule_description: sundial_domain::schedule::describe::describe(
                job.document.schedule.as_ref(),
            ),
            created_at: job.created_at,
            updated_at: job.updated_at,
            next_run_at: job.due_at(),
            last_run: None,
            pause: job.open_pause().cloned(),
            skips: job.skips.clone(),
            remaining_runs: job.remaining_runs(),
            baseline: job.baseline,
            signing_secret: None,
            webhook_secret: None,
            subscriptions: None,
            warnings: Vec::new(),
        }
    }
}

/// One page of jobs.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobList {
    pub jobs: Vec<JobView>,
    /// Pass back as `next` for the following page; null on the last page.
    pub next: Option<String>,
}

/// One instant of a preview, in UTC and in the job's zone.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreviewInstant {
    pub utc: String,
    pub local: String,
    /// Asked to be skipped: its run will not start.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
    /// A DST change touched it: `moved` (its local time did not exist; it runs at the end of
    /// the gap), `doubled` or `first_only` (its local time occurs twice); `dst` says more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst: Option<DstEffectKind>,
}

/// The next instants of a job.
#[derive(Debug, Serialize, ToSchema)]
pub struct Preview {
    pub job_id: String,
    pub timezone: String,
    pub paused: bool,
    pub instants: Vec<PreviewInstant>,
    /// The DST changes from now to the last instant that move, skip or double an instant of the
    /// schedule, in order, with the rule that applied.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dst: Vec<DstNote>,
}

/// How a DST change touched `instant`: it is where moved local times run, or one pass of a
/// repeated local time the change covers.
fn dst_mark(notes: &[DstNote], instant: DateTime<Utc>, tz: Tz) -> Option<DstEffectKind> {
    let local = instant.with_timezone(&tz).naive_local();
    notes.iter().find_map(|n| match n.effect {
        DstEffectKind::Moved if n.runs_at == Some(instant) => Some(n.effect),
        // A local time the zone writes twice, near the change.
        DstEffectKind::Doubled | DstEffectKind::FirstOnly
            if matches!(tz.from_local_datetime(&local), LocalResult::Ambiguous(..))
                && (instant - n.at).num_hours().abs() < 3 =>
        {
            Some(n.effect)
        }
        _ => None,
    })
}

impl Preview {
    pub fn new(job: &Job, instants: &[DateTime<Utc>], dst: Vec<DstNote>) -> Self {
        // A union has no zone of its own: its first schedule's zone is shown.
        let zone = job
            .document
            .schedule
            .as_ref()
            .and_then(|s| {
                s.timezone.clone().or_else(|| s.any.iter().flatten().find_map(|e| e.timezone.clone()))
            })
            .unwrap_or_else(|| "UTC".into());
        let tz: Tz = zone.parse().unwrap_or(Tz::UTC);
        Preview {
            job_id: job.id.to_string(),
            timezone: zone,
            paused: job.document.paused,
            instants: instants
                .iter()
                .map(|t| PreviewInstant {
                    utc: t.to_rfc3339_opts(SecondsFormat::Secs, true),
                    local: t.with_timezone(&tz).to_rfc3339_opts(SecondsFormat::Secs, false),
                    skipped: job.skip_at(*t).is_some(),
                    dst: dst_mark(&dst, *t, tz),
                })
                .collect(),
            dst,
        }
    }
}

/// A run as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunView {
    /// URL-safe; the idempotency key the target receives.
    pub id: String,
    pub job_id: String,
    pub scheduled_at: DateTime<Utc>,
    /// When its first attempt may start (the instant plus the job's jitter or flexible-window offset).
    pub due_at: DateTime<Utc>,
    pub kind: RunKind,
    pub state: RunState,
    /// Why the run was skipped or cancelled.
    pub reason: Option<String>,
    pub attempts: Vec<Attempt>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Whether the run went past its SLA (`sla_missed` was recorded).
    pub sla_missed: bool,
    /// Each delivery of the run's events to the job's alert channels (Slack, PagerDuty): where
    /// it stands, how many tries it took, why the last one failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alerts: Vec<AlertDelivery>,
    /// For a run of a workflow started by hand: the job whose trigger started it. Parents' and
    /// children's runs for the same instant have this run's key (`GET /v1/jobs/{id}/graph`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// Whether a backfill wrote the run (`POST /v1/jobs/{id}/backfill`), rather than the schedule.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub backfill: bool,
    /// The payload the run delivers instead of its job's (given to its trigger, re-run or
    /// backfill); absent: the job's.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub payload: Option<serde_json::Value>,
    /// Where the run's logs are: the local log, or a CloudWatch Logs Insights query in AWS.
    pub logs: LogsLink,
    /// Why a waiting run has not started yet (its flexible offset, a backoff, its group being
    /// full); shown by `GET /v1/runs/{id}`, absent from listings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Wait>,
}

/// One event's delivery to one alert channel.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertDelivery {
    /// The event (`failed`, `recovered`, ...).
    pub event: &'static str,
    pub channel: sundial_domain::delivery::Channel,
    #[serde(flatten)]
    pub mark: sundial_domain::delivery::ChannelMark,
}

/// One page of runs.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    pub runs: Vec<RunView>,
    pub next: Option<String>,
}

impl RunView {
    pub fn new(run: &Run, logs: &LogLocation) -> Self {
        RunView {
            id: run.id().to_string(),
            job_id: run.job_id.to_string(),
            scheduled_at: run.scheduled_at(),
            due_at: run.due_at,
            kind: run.key.kind(),
            state: run.state,
            reason: run.reason.clone(),
            attempts: run
                .attempts
                .iter()
                .map(|a| Attempt { callback: None, call_until: None, looks: 0, look_tag: None, ..a.clone() })
                .collect(),
            created_at: run.created_at,
            updated_at: run.updated_at,
            sla_missed: run.events.iter().any(|e| e.kind == sundial_domain::job::EventKind::SlaMissed),
            alerts: run
                .events
                .iter()
                .flat_map(|e| {
                    e.channels.iter().map(|(channel, mark)| AlertDelivery {
                        event: e.kind.as_str(),
                        channel: *channel,
                        mark: mark.clone(),
                    })
                })
                .collect(),
            workflow: run.workflow.as_ref().map(|root| root.to_string()),
            backfill: run.backfill,
            payload: run.input.clone(),
            logs: logs.link(&run.id().to_string()),
            waiting: None,
        }
    }
}

/// The most runs a backfill's answer lists: a backfill creates up to 1,000, and its answer is kept
/// for an idempotent replay in one DynamoDB item (400 KB); the rest are in the job's history.
pub const BACKFILL_RUNS_SHOWN: usize = 100;

/// What a backfill did.
#[derive(Debug, Serialize, ToSchema)]
pub struct BackfillView {
    /// Runs created, oldest instant first: the first 100 (`created` counts them all; the job's
    /// runs list shows every one).
    pub runs: Vec<RunView>,
    /// How many runs the backfill created.
    pub created: usize,
    /// Instants in the range that already had a run (nothing runs twice).
    pub existing: usize,
}

/// The graph of jobs connected to one through `depends_on`.
#[derive(Debug, Serialize, ToSchema)]
pub struct GraphResponse {
    /// The job asked about.
    pub job_id: String,
    pub nodes: Vec<GraphNode>,
    /// From parent to child: the child runs after the parent.
    pub edges: Vec<GraphEdge>,
}

/// One job of a graph.
#[derive(Debug, Serialize, ToSchema)]
pub struct GraphNode {
    pub id: String,
    pub name: String,
    /// The schedule in words, or "after extract, transform" for a job with parents.
    pub schedule: String,
    pub paused: bool,
    pub trigger_rule: sundial_domain::job::TriggerRule,
    /// The newest run; null before the first.
    pub latest_run: Option<LastRun>,
}

/// An edge of a graph.
#[derive(Debug, Serialize, ToSchema)]
pub struct GraphEdge {
    pub from: String,
    pub to: String,
}

/// "after a, b": how a job with parents is scheduled, naming them.
pub fn after_parents(names: &[String]) -> String {
    format!("after {}", names.join(", "))
}

impl GraphResponse {
    pub fn new(job_id: &sundial_domain::job::JobId, graph: &sundial_app::workflow::GraphView) -> Self {
        let name_of = |id: &sundial_domain::job::JobId| {
            graph
                .nodes
                .iter()
                .find(|(j, _)| &j.id == id)
                .map_or_else(|| id.to_string(), |(j, _)| j.document.name.clone())
        };
        let nodes = graph
            .nodes
            .iter()
            .map(|(node, latest)| GraphNode {
                id: node.id.to_string(),
                name: node.document.name.clone(),
                schedule: if node.has_parents() {
                    after_parents(&node.parents().iter().map(name_of).collect::<Vec<_>>())
                } else {
                    sundial_domain::schedule::describe::describe(node.document.schedule.as_ref())
                },
                paused: node.document.paused,
                trigger_rule: node.document.trigger_rule,
                latest_run: latest.as_ref().map(LastRun::from),
            })
            .collect();
        let edges = graph
            .edges
            .iter()
            .map(|(from, to)| GraphEdge { from: from.to_string(), to: to.to_string() })
            .collect();
        GraphResponse { job_id: job_id.to_string(), nodes, edges }
    }
}
