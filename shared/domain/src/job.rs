//! Jobs: the document a user writes, and the stored job around it.
//!
//! [`JobDocument`] is exactly what `POST /v1/jobs` accepts and what a JSON merge patch applies
//! to; it is checked by [`crate::validation`] before anything is written. [`Job`] adds what
//! Sundial owns (id, owner, version, times, `next_run_at`). Secret header values live in the
//! stored document and are removed by [`JobDocument::redacted`] before any response.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A job's id: a ULID, so ids sort by creation time and never collide.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(String);

impl JobId {
    pub fn generate() -> Self {
        JobId(ulid::Ulid::generate().to_string().to_ascii_lowercase())
    }

    /// A new id made at `at` from `entropy`'s bits: ids sort by creation time, as ULIDs do.
    pub fn drawn(at: DateTime<Utc>, entropy: &dyn crate::entropy::Entropy) -> Self {
        let ulid = ulid::Ulid::from_parts(at.timestamp_millis().max(0) as u64, entropy.bits());
        JobId(ulid.to_string().to_ascii_lowercase())
    }

    /// Parses a job id from a URL; `None` for anything that is not a ULID.
    pub fn parse(text: &str) -> Option<Self> {
        ulid::Ulid::from_string(text).ok().map(|u| JobId(u.to_string().to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The owner of a job: the API key's owner, or the JWT subject.
pub type Owner = String;

/// A job as the user defines it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JobDocument {
    /// Unique per owner: 1–128 letters, digits, `-`, `_`, `.`.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9._-]+$")
    )]
    pub name: String,
    /// What the job is for, in words (at most 1,000 characters); `q` searches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 1000))]
    pub description: Option<String>,
    /// Up to 20 `key: value` labels (`team: billing`) that listings filter by (`tag=team:billing`):
    /// keys 1-64 of `a-z`, `0-9`, `-`, `_`, `.`, `/`; values at most 256 characters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// When the job fires; absent: once, now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleDocument>,
    /// What a run calls.
    pub target: TargetDocument,
    /// JSON passed to the target with every run.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub payload: serde_json::Value,
    /// Fill placeholders (`{{scheduled_at}}`, `{{previous_scheduled_at}}`, `{{run_id}}`,
    /// `{{attempt}}`, `{{job.name}}`, `{{job.id}}`) in the payload's string values for each
    /// attempt; `{{{{` is a literal `{{`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub payload_template: bool,
    #[serde(default)]
    pub retry: RetryPolicy,
    /// Hard limit of one attempt, in seconds (at most 7 days).
    #[serde(default = "default_timeout_s")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 604_800, default = 300))]
    pub timeout_s: u32,
    /// From the scheduled instant to the end of the run; past it `sla_missed` is published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 2_592_000))]
    pub sla_s: Option<u32>,
    /// How late a first attempt may start before `late_start` is published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 2_592_000))]
    pub start_deadline_s: Option<u32>,
    /// Lets Sundial start each scheduled run anywhere in [T, T + flexible_window_s] to flatten
    /// peaks; the offset is a pure function of the job and the instant. Up to 4 hours; over 900 s
    /// shorter than the time between two instants, and not on a union. Not with
    /// `schedule.jitter_s`, nor on a job with `depends_on`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 14_400))]
    pub flexible_window_s: Option<u32>,
    #[serde(default)]
    pub concurrency: ConcurrencyPolicy,
    /// How often a run may call its target: at least once (retried after any failure) or at
    /// most once (an attempt that may have reached the target is never repeated).
    #[serde(default, skip_serializing_if = "Delivery::is_default")]
    pub delivery: Delivery,
    /// The concurrency group whose `max_running` limits this job's running attempts, shared
    /// with the owner's other jobs of the group (`PUT /v1/groups/{name}` creates it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9._-]+$"))]
    pub group: Option<String>,
    #[serde(default)]
    pub catchup: CatchupPolicy,
    /// How long after its due time a scheduled run may still start on time (default
    /// [`DEFAULT_CATCHUP_WINDOW_S`]). A run that would start later (its workers were down, its
    /// message was late) is decided by `catchup` at its start: `skip` skips it, `latest` runs it
    /// only if no later instant of the schedule is due too, `all` runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 2_592_000, default = 60))]
    pub catchup_window_s: Option<u32>,
    /// Tell `duration_anomaly` and `too_fast` from the job's learned baseline, and `failure_rate`
    /// from its latest outcomes (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_alerts: Option<bool>,
    /// Publish `failing` after this many failed runs in a row (unset: never, except for a job with
    /// a PagerDuty channel, which is told at the first failure so that its incident is resolved
    /// by `recovered`; see [`JobDocument::failing_threshold`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub alert_after_failures: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<NotifySettings>,
    #[serde(default)]
    pub paused: bool,
    /// The jobs this one runs after (ids or names of the same owner's jobs; stored as ids). A job
    /// with parents has no schedule of its own: its instants are its parents'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub depends_on: Vec<String>,
    /// When a job with parents runs for an instant once every parent's run for it has ended.
    #[serde(default, skip_serializing_if = "TriggerRule::is_default")]
    pub trigger_rule: TriggerRule,
}

pub const DEFAULT_TIMEOUT_S: u32 = 300;

fn default_timeout_s() -> u32 {
    DEFAULT_TIMEOUT_S
}

/// When a job fires: exactly one of `cron`, `rate`, `at`, or `any`: a union of up to 10 of
/// them, each with its own `timezone`, `start_at` and `end_at` (an instant two of them yield runs
/// once).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ScheduleDocument {
    /// The schedules whose instants this one has, 1 to 10 of them, each `cron`, `rate` or `at`
    /// (with its own `timezone`, `start_at`, `end_at`; no `any`, `jitter_s` or `max_runs`). Not
    /// with `cron`, `rate`, `at` or `timezone` beside it; `start_at`, `end_at`, `jitter_s` and
    /// `max_runs` beside it apply to the whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(no_recursion, min_items = 1, max_items = 10))]
    pub any: Option<Vec<ScheduleDocument>>,
    /// 5 fields, or 6 with a leading seconds field; macros such as `@daily`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// `"N seconds|minutes|hours|days"`, anchored at `start_at` (default: creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    /// One RFC 3339 instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// IANA zone name; default UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// What a `cron` does at a DST change in its zone: `gap` (a local time that does not exist)
    /// `shift` (fire at the end of the gap) or `skip`; `fold` (a local time that occurs twice)
    /// `first` or `both`. Each left out keeps the default rule: `shift`/`first` for a fixed hour,
    /// `skip`/`both` for a cron whose hour field is `*` or a step over all hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<crate::dst::DstPolicy>,
    /// No instant before this RFC 3339 instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// No instant after this RFC 3339 instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
    /// Spread each start over 0..=jitter_s seconds, the same offset for the same instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 900))]
    pub jitter_s: Option<u32>,
    /// End the schedule after this many scheduled runs (1-1,000,000); not with `at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000))]
    pub max_runs: Option<u64>,
    /// A `cron`'s business calendar: its business days and holidays, and what an instant on
    /// another date does (`on_holiday`). With it alone, the cron fires on business days only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calendar: Option<crate::calendar::CalendarDocument>,
    /// A `cron` fires on business days only: Monday to Friday, or those of `calendar`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_days_only: Option<bool>,
    /// A `cron` fires only on the N-th business day of each month: 1 the first, -1 the last (1 to
    /// 31, -1 to -31); business days as `calendar` has them, or Monday to Friday.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = -31, maximum = 31))]
    pub business_day: Option<i32>,
}

/// What a run calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum TargetDocument {
    Http {
        /// An http(s) URL with a host and no credentials, outside the addresses the deployment
        /// refuses.
        #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 2048))]
        url: String,
        /// GET, POST, PUT, PATCH or DELETE, in any case.
        #[serde(default = "default_method")]
        #[cfg_attr(
            feature = "openapi",
            schema(
                default = "POST",
                pattern = r"^([Gg][Ee][Tt]|[Pp][Oo][Ss][Tt]|[Pp][Uu][Tt]|[Pp][Aa][Tt][Cc][Hh]|[Dd][Ee][Ll][Ee][Tt][Ee])$"
            )
        )]
        method: String,
        /// At most 50; not the headers Sundial sets or HTTP owns.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, HeaderValue>,
    },
    Lambda {
        /// Function name or ARN; must match the configured allow-list.
        #[cfg_attr(feature = "openapi", schema(min_length = 1))]
        function: String,
    },
    Sqs {
        /// An http(s) queue URL; must match the configured allow-list.
        #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 2048))]
        queue_url: String,
    },
    Sns {
        /// An ARN; must match the configured allow-list.
        #[cfg_attr(feature = "openapi", schema(pattern = "^arn:"))]
        topic_arn: String,
    },
    /// A Step Functions execution per attempt, named after the run and the attempt, followed to
    /// its end: the run is RUNNING while the execution runs and ends as it ends.
    #[serde(rename = "stepfunctions")]
    StepFunctions {
        /// `arn:<partition>:states:<region>:<account>:stateMachine:<name>`; must match the
        /// configured allow-list.
        #[cfg_attr(feature = "openapi", schema(pattern = "^arn:"))]
        state_machine_arn: String,
        /// What the execution receives: the run's envelope (run id, attempt, scheduled instant,
        /// job id, `traceparent` and the payload), or the payload alone.
        #[serde(default, skip_serializing_if = "ExecutionInput::is_envelope")]
        input: ExecutionInput,
    },
    /// An ECS task per attempt (RunTask with the run and attempt as its client token), followed
    /// to its end: succeeded when every container exits 0.
    Ecs {
        /// A cluster name or ARN; must match the configured allow-list.
        #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 2048))]
        cluster: String,
        /// A task definition: `family`, `family:revision` or its ARN.
        #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 2048))]
        task_definition: String,
        #[serde(default, skip_serializing_if = "LaunchType::is_fargate")]
        launch_type: LaunchType,
        /// Where an awsvpc task runs (required for FARGATE).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        network: Option<EcsNetwork>,
        /// The container that receives the run: its environment gains `SUNDIAL_RUN_ID`,
        /// `SUNDIAL_ATTEMPT`, `SUNDIAL_SCHEDULED_AT`, `SUNDIAL_JOB_ID`, `SUNDIAL_PAYLOAD` and
        /// `TRACEPARENT`, and its command is replaced when one is given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        overrides: Option<EcsOverrides>,
    },
    /// An event put on an EventBridge bus per attempt, its detail the run's envelope;
    /// fire-and-forget, as SQS and SNS are.
    #[serde(rename = "eventbridge")]
    EventBridge {
        /// `arn:<partition>:events:<region>:<account>:event-bus/<name>`; must match the
        /// configured allow-list.
        #[cfg_attr(feature = "openapi", schema(pattern = "^arn:"))]
        event_bus_arn: String,
        /// The event's `detail-type`: 1 to 128 characters.
        #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 128))]
        detail_type: String,
        /// The event's `source`: 1 to 256 characters, not starting with `aws.`.
        #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 256))]
        source: String,
    },
}

/// What a Step Functions execution receives as its input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ExecutionInput {
    /// The run's envelope, as SQS, SNS and Lambda targets receive it.
    #[default]
    Envelope,
    /// The run's payload alone.
    Payload,
}

impl ExecutionInput {
    fn is_envelope(&self) -> bool {
        *self == ExecutionInput::Envelope
    }
}

/// How an ECS task is launched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "UPPERCASE")]
pub enum LaunchType {
    #[default]
    Fargate,
    Ec2,
}

impl LaunchType {
    fn is_fargate(&self) -> bool {
        *self == LaunchType::Fargate
    }

    /// As ECS spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            LaunchType::Fargate => "FARGATE",
            LaunchType::Ec2 => "EC2",
        }
    }
}

/// An awsvpc task's network: 1 to 16 subnets, at most 5 security groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EcsNetwork {
    pub subnets: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<String>,
    #[serde(default)]
    pub assign_public_ip: bool,
}

/// What the task's named container is given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EcsOverrides {
    /// The container's name in the task definition.
    #[cfg_attr(feature = "openapi", schema(min_length = 1, max_length = 255))]
    pub container: String,
    /// Replaces the container's command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Added to the container's environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub environment: BTreeMap<String, String>,
}

fn default_method() -> String {
    "POST".to_string()
}

/// A header value: plain text, or a secret that is stored but never shown again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum HeaderValue {
    Plain(String),
    Secret(SecretHeader),
}

/// A write-only header value: responses show `{"secret": true}` without the value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SecretHeader {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub secret: bool,
}

/// How failed attempts are retried: exponential backoff with full jitter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    #[serde(default = "default_max_attempts")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10, default = 3))]
    pub max_attempts: u32,
    /// The backoff before the second attempt, doubled for each next one.
    #[serde(default = "default_backoff_s")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 43_200, default = 10))]
    pub backoff_s: u32,
    /// The longest backoff, at least `backoff_s`.
    #[serde(default = "default_max_backoff_s")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 43_200, default = 3_600))]
    pub max_backoff_s: u32,
}

fn default_max_attempts() -> u32 {
    3
}
fn default_backoff_s() -> u32 {
    10
}
fn default_max_backoff_s() -> u32 {
    3_600
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: default_max_attempts(),
            backoff_s: default_backoff_s(),
            max_backoff_s: default_max_backoff_s(),
        }
    }
}

/// What happens when a run falls due while another run of the job is active.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum ConcurrencyPolicy {
    /// Both run.
    #[default]
    Allow,
    /// The new run is recorded SKIPPED.
    Forbid,
    /// The active run is cancelled.
    Replace,
}

/// How often a run may call its target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Delivery {
    /// Every failed attempt is retried per `retry`: the target may be called more than once for
    /// a run, and should be idempotent (each call carries the run's `Idempotency-Key`).
    #[default]
    AtLeastOnce,
    /// An attempt that may have reached the target (any answer, a timeout, a lost worker, a 202
    /// never completed) ends the run; only a failure certainly before the request left
    /// (connection refused, a name that does not resolve) is retried per `retry`.
    AtMostOnce,
}

impl Delivery {
    pub fn is_default(&self) -> bool {
        *self == Delivery::AtLeastOnce
    }
}

/// When a job with parents runs for an instant, once every parent's run for it has ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TriggerRule {
    /// Only if every parent's run succeeded; otherwise the run is SKIPPED `upstream_failed`.
    #[default]
    AllSuccess,
    /// Whatever the parents' runs ended as.
    AllDone,
}

impl TriggerRule {
    pub fn is_default(&self) -> bool {
        *self == TriggerRule::AllSuccess
    }
}

/// How long after its due time a scheduled run may still start on time, when the job does not
/// say (`catchup_window_s`): a minute.
pub const DEFAULT_CATCHUP_WINDOW_S: u32 = 60;

/// Which instants missed while the scheduler was down are run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum CatchupPolicy {
    /// None.
    Skip,
    /// The latest one, once.
    #[default]
    Latest,
    /// All, up to the configured maximum.
    All,
}

impl CatchupPolicy {
    /// The wire name (`latest`).
    pub fn as_str(self) -> &'static str {
        match self {
            CatchupPolicy::Skip => "skip",
            CatchupPolicy::Latest => "latest",
            CatchupPolicy::All => "all",
        }
    }
}

/// Events a person can be told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Succeeded,
    Failed,
    Retrying,
    TimedOut,
    SlaMissed,
    LateStart,
    Skipped,
    Failing,
    /// Instants of the schedule passed without a run (the tick's catch-up dropped them): told
    /// once per gap, not once per instant.
    Missed,
    /// A run still running far longer than its job's learned baseline: told once per run.
    DurationAnomaly,
    /// A run that succeeded in a small fraction of its job's usual time.
    TooFast,
    /// Too many of the job's latest ended runs failed ([`crate::health::FailureRate`]): told once
    /// until the job recovers from it.
    FailureRate,
    /// A success after `failing`, `failure_rate` or `missed` was told: once per trouble told.
    Recovered,
}

impl EventKind {
    /// Whether the event is trouble with one run's timing (`sla_missed`, `late_start`,
    /// `duration_anomaly`), as opposed to its job's health or its end.
    pub fn is_run_trouble(self) -> bool {
        matches!(self, EventKind::SlaMissed | EventKind::LateStart | EventKind::DurationAnomaly)
    }

    /// The wire name (`timed_out`), as serde writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Succeeded => "succeeded",
            EventKind::Failed => "failed",
            EventKind::Retrying => "retrying",
            EventKind::TimedOut => "timed_out",
            EventKind::SlaMissed => "sla_missed",
            EventKind::LateStart => "late_start",
            EventKind::Skipped => "skipped",
            EventKind::Failing => "failing",
            EventKind::Missed => "missed",
            EventKind::DurationAnomaly => "duration_anomaly",
            EventKind::TooFast => "too_fast",
            EventKind::FailureRate => "failure_rate",
            EventKind::Recovered => "recovered",
        }
    }
}

/// Who hears about which events of this job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NotifySettings {
    /// The events to send; default `failed`, `timed_out`, `sla_missed`, `failing`, `missed`,
    /// `duration_anomaly`, `too_fast`, `failure_rate`, `recovered`.
    #[serde(default = "default_notify_on")]
    #[cfg_attr(feature = "openapi", schema(min_items = 1))]
    pub on: Vec<EventKind>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 10))]
    pub email: Vec<String>,
    /// E.164 phone numbers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 10))]
    pub sms: Vec<String>,
    /// https URLs, outside the addresses the deployment refuses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 10))]
    pub https: Vec<String>,
    /// SQS queue ARNs the deployment allows (never Sundial's own queues).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 10))]
    pub sqs: Vec<String>,
    /// A Slack incoming webhook Sundial posts each event to, formatted for Slack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack: Option<SlackChannel>,
    /// A PagerDuty service (Events API v2) whose incidents Sundial opens and resolves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pagerduty: Option<PagerDutyChannel>,
}

/// A Slack incoming webhook. Its URL is write-only: responses show `{}` (a merge patch that leaves
/// `notify.slack.webhook_url` out keeps it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SlackChannel {
    /// `https://hooks.slack.com/services/...`; write-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
}

/// A PagerDuty service's Events API v2 integration. Its routing key is write-only: responses
/// leave it out (a merge patch that leaves it out keeps it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PagerDutyChannel {
    /// The integration's 32-character routing key; write-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    /// The severity of the incidents opened (default `error`).
    #[serde(default)]
    pub severity: Severity,
}

/// A PagerDuty event's severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Critical,
    #[default]
    Error,
    Warning,
    Info,
}

impl Severity {
    /// The wire name, as PagerDuty reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

fn default_notify_on() -> Vec<EventKind> {
    vec![
        EventKind::Failed,
        EventKind::TimedOut,
        EventKind::SlaMissed,
        EventKind::Failing,
        EventKind::Missed,
        EventKind::DurationAnomaly,
        EventKind::TooFast,
        EventKind::FailureRate,
        EventKind::Recovered,
    ]
}

impl JobDocument {
    /// The document as responses show it: secret header values, the Slack webhook's URL and the
    /// PagerDuty routing key removed.
    pub fn redacted(&self) -> JobDocument {
        let mut doc = self.clone();
        if let Some(notify) = &mut doc.notify {
            if let Some(slack) = &mut notify.slack {
                slack.webhook_url = None;
            }
            if let Some(pagerduty) = &mut notify.pagerduty {
                pagerduty.routing_key = None;
            }
        }
        if let TargetDocument::Http { headers, .. } = &mut doc.target {
            for value in headers.values_mut() {
                if let HeaderValue::Secret(secret) = value {
                    secret.value = None;
                }
            }
        }
        doc
    }

    /// After how many failed runs in a row `failing` is told: `alert_after_failures`, or 1 for a
    /// job with a PagerDuty channel (the incident a failure opens is resolved by the `recovered`
    /// that only a told `failing` leads to), or never.
    pub fn failing_threshold(&self) -> Option<u32> {
        let paged = self.notify.as_ref().is_some_and(|n| n.pagerduty.is_some());
        self.alert_after_failures.or(paged.then_some(1))
    }

    /// The fields holding write-only values that differ from `self` to `other` (set, changed or
    /// removed): `target.headers.<name>.value`, `notify.slack.webhook_url`,
    /// `notify.pagerduty.routing_key`. [`JobDocument::redacted`] documents cannot show them, so
    /// the audit trail names them without their values.
    pub fn secrets_changed(&self, other: &JobDocument) -> Vec<String> {
        let secrets = |doc: &JobDocument| -> BTreeMap<String, Option<String>> {
            let mut secrets = BTreeMap::new();
            if let TargetDocument::Http { headers, .. } = &doc.target {
                for (name, value) in headers {
                    if let HeaderValue::Secret(secret) = value {
                        secrets.insert(format!("target.headers.{name}.value"), secret.value.clone());
                    }
                }
            }
            if let Some(notify) = &doc.notify {
                let slack = notify.slack.as_ref().and_then(|c| c.webhook_url.clone());
                let pagerduty = notify.pagerduty.as_ref().and_then(|c| c.routing_key.clone());
                secrets.insert("notify.slack.webhook_url".to_string(), slack);
                secrets.insert("notify.pagerduty.routing_key".to_string(), pagerduty);
            }
            secrets
        };
        let (before, after) = (secrets(self), secrets(other));
        let fields: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
        fields
            .into_iter()
            .filter(|field| before.get(*field).cloned().flatten() != after.get(*field).cloned().flatten())
            .cloned()
            .collect()
    }
}

/// A stored job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: JobId,
    pub owner: Owner,
    pub document: JobDocument,
    /// Optimistic-locking version, the ETag; starts at 1.
    pub version: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The next instant the tick will claim; kept while paused so that resuming a run-once job
    /// that never ran still runs it, and shown as null while paused.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The key HTTP targets' bodies are signed with (HMAC-SHA256). Shown once, at creation (and
    /// on an idempotent replay of it), and when rotated; never otherwise, never logged.
    pub signing_secret: String,
    /// The job's recent pauses, newest last: a run whose instant fell inside one is skipped even
    /// when a worker reaches it after the resume.
    pub pauses: Vec<Pause>,
    /// Jobs that named this one in `depends_on`, linked before they were written: a link may
    /// outlive its child (a crash, a deletion), so each child is checked to still depend on it.
    pub children: Vec<JobId>,
    /// The instants of its schedule passed without a run, as recorded when they were passed,
    /// newest last (at most [`GAPS_KEPT`]): what the instant ledger explains them by.
    pub gaps: Vec<Gap>,
    /// Instants to skip, asked for before they were due, oldest first (at most [`MAX_SKIPS`]).
    pub skips: Vec<Skip>,
    /// Scheduled runs claimed so far (what `schedule.max_runs` counts) and which they are,
    /// written with each advance that changed it.
    pub counted: crate::run_limit::RunCount,
    /// The versions of the document kept ([`crate::versions`]), oldest first.
    pub versions: Vec<u64>,
    /// Its normal duration, learned from its latest successful runs (`None` until it has
    /// enough of them).
    pub baseline: Option<crate::health::Baseline>,
}

/// An instant of a job's schedule to skip without pausing, asked for before it was due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Skip {
    /// The instant.
    pub at: DateTime<Utc>,
    /// Who asked (the owner of the API key used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When it was asked for.
    pub asked_at: DateTime<Utc>,
}

/// Instants a job may have asked to skip at once.
pub const MAX_SKIPS: usize = 100;

/// How long a skip is kept after its instant: its run (SKIPPED, with the reason) says the rest.
pub const SKIPS_KEPT_FOR: chrono::Duration = chrono::Duration::days(1);

impl Skip {
    /// Why its instant's run does not start.
    pub fn explain(&self) -> String {
        let by = self.by.as_deref().map(|b| format!(" by {b}")).unwrap_or_default();
        format!(
            "skipped on request{by} at {}",
            self.asked_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    }
}

/// One pause of a job: from when it was paused to when it was resumed (`None`: still paused),
/// with what the person who paused it said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Pause {
    pub from: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<DateTime<Utc>>,
    /// Why, as the person who paused it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who paused it (the owner of the API key used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// When the job resumes by itself (the tick resumes it in that minute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
}

impl Pause {
    /// Whether the pause already says what `note` says.
    pub fn says(&self, note: &PauseNote) -> bool {
        self.reason == note.reason && self.by == note.by && self.until == note.until
    }
}

/// What a pause request says besides pausing: why, who, and until when.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PauseNote {
    pub reason: Option<String>,
    pub by: Option<String>,
    pub until: Option<DateTime<Utc>>,
}

/// The longest pause reason kept, in characters.
pub const MAX_PAUSE_REASON_CHARS: usize = 500;
/// How far ahead a pause may be set to end by itself.
pub const MAX_PAUSE_DAYS: i64 = 366;

/// Pauses kept on a job at most; older ones are older than any run still waiting to start.
pub const PAUSES_KEPT: usize = 10;

/// Instants of a job's schedule passed without a run, recorded by whoever passed them: the
/// tick's catch-up dropping instants missed during an outage, or an edit of the schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// The first and last instant passed (for an edit: the span the old schedule covered).
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// How many instants of the schedule were passed (0 for an edit: not counted).
    pub instants: u64,
    pub cause: GapCause,
    /// When it was recorded.
    pub at: DateTime<Utc>,
    /// Whether the `missed` event about it was published (an edit is never told).
    #[serde(default)]
    pub told: bool,
}

/// Why instants were passed without a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GapCause {
    /// The scheduler did not reach the minutes from `outage_from` to `outage_to` in time (it was
    /// down, or stalled), and the job's `catchup` policy did not run these instants.
    CatchupDropped { policy: CatchupPolicy, outage_from: DateTime<Utc>, outage_to: DateTime<Utc> },
    /// The schedule was changed at the gap's `at`: from `from` to then, the job ran on
    /// `previous` (`None`: it had none), so an instant of the new schedule in that span that
    /// was not one of `previous`'s was not an instant then.
    Edited { previous: Option<Box<ScheduleDocument>> },
}

impl ScheduleDocument {
    /// Whether `other` has the same instants (what jitter and a run limit do not move).
    pub fn same_instants(&self, other: &ScheduleDocument) -> bool {
        // A named calendar's version moves with edits of its description too.
        fn unstamped(s: &ScheduleDocument) -> ScheduleDocument {
            let mut s = s.clone();
            if let Some(calendar) = s.calendar.as_mut() {
                calendar.version = None;
            }
            s.any = s.any.as_ref().map(|any| any.iter().map(unstamped).collect());
            s
        }
        let instants =
            |s: &ScheduleDocument| ScheduleDocument { jitter_s: None, max_runs: None, ..unstamped(s) };
        instants(self) == instants(other)
    }
}

/// Gaps kept on a job at most (each a few hundred bytes of its item).
pub const GAPS_KEPT: usize = 20;

/// The most bytes of gaps a job keeps (as JSON), the newest gap whatever its size.
pub const GAPS_BYTES: usize = 48 * 1024;

impl Gap {
    /// What the gap says about one instant in it, for people.
    pub fn explain(&self) -> String {
        let text = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match &self.cause {
            GapCause::CatchupDropped { policy, outage_from, outage_to } => format!(
                "the scheduler did not reach {} to {} in time; `catchup: {}` dropped {} instant(s) from {} to {}",
                text(*outage_from),
                text(*outage_to),
                policy.as_str(),
                self.instants,
                text(self.from),
                text(self.to)
            ),
            GapCause::Edited { .. } => {
                format!("the schedule was changed at {}; this instant was not on it before", text(self.at))
            }
        }
    }
}

impl Job {
    /// Records a change of the paused flag at `now` in the pause history.
    pub fn record_pause_change(&mut self, was_paused: bool, now: DateTime<Utc>) {
        match (was_paused, self.document.paused) {
            (false, true) => {
                self.pauses.push(Pause { from: now, to: None, reason: None, by: None, until: None })
            }
            (true, false) => match self.pauses.last_mut() {
                Some(open) if open.to.is_none() => open.to = Some(now),
                // Paused before pauses were recorded: the start of the pause is unknown.
                _ => {}
            },
            _ => {}
        }
        let excess = self.pauses.len().saturating_sub(PAUSES_KEPT);
        self.pauses.drain(..excess);
    }

    /// How far back this job's runs may still be active (RUNNING or RETRYING): all attempts at
    /// their longest, and an hour more.
    pub fn active_window(&self) -> chrono::Duration {
        let retry = &self.document.retry;
        let per_attempt = i64::from(self.document.timeout_s) + i64::from(retry.max_backoff_s);
        chrono::Duration::seconds(i64::from(retry.max_attempts) * per_attempt) + chrono::Duration::hours(1)
    }

    /// The job's gaps with `gap` recorded as the newest, the oldest beyond [`GAPS_KEPT`] or
    /// beyond [`GAPS_BYTES`] let go (the newest is always kept: an edit's gap holds the schedule
    /// before it, which a business calendar makes large).
    pub fn gaps_with(&self, gap: Gap) -> Vec<Gap> {
        let mut gaps = self.gaps.clone();
        gaps.push(gap);
        let excess = gaps.len().saturating_sub(GAPS_KEPT);
        gaps.drain(..excess);
        let size = |g: &Gap| serde_json::to_string(g).map_or(0, |text| text.len() + 1);
        let mut total: usize = gaps.iter().map(size).sum();
        while gaps.len() > 1 && total > GAPS_BYTES {
            total -= size(&gaps[0]);
            gaps.remove(0);
        }
        gaps
    }

    /// The baseline runs are judged against, unless the job opted out of health alerts.
    pub fn judged_by(&self) -> Option<&crate::health::Baseline> {
        self.baseline.as_ref().filter(|_| self.document.health_alerts != Some(false))
    }

    /// How many scheduled runs the job may still make, when its schedule sets `max_runs`.
    pub fn remaining_runs(&self) -> Option<u64> {
        let max = self.document.schedule.as_ref()?.max_runs?;
        Some(max.saturating_sub(self.counted.runs))
    }

    /// The skip asked for `instant`, if any.
    pub fn skip_at(&self, instant: DateTime<Utc>) -> Option<&Skip> {
        self.skips.iter().find(|s| s.at == instant)
    }

    /// The gaps that span `instant`, newest first.
    pub fn gaps_at(&self, instant: DateTime<Utc>) -> impl Iterator<Item = &Gap> {
        self.gaps.iter().rev().filter(move |g| g.from <= instant && instant <= g.to)
    }

    /// When the job's schedule last changed its instants: the end of its newest `edited` gap,
    /// or its creation.
    pub fn schedule_since(&self) -> DateTime<Utc> {
        let edited = self.gaps.iter().rev().find(|g| matches!(g.cause, GapCause::Edited { .. }));
        edited.map_or(self.created_at, |g| g.at)
    }

    /// The pause the job is in now, if it is paused (and the pause was recorded).
    pub fn open_pause(&self) -> Option<&Pause> {
        self.pauses.last().filter(|p| self.document.paused && p.to.is_none())
    }

    /// Writes `note` on the pause the job is in now; nothing if it is not paused.
    pub fn note_pause(&mut self, note: &PauseNote) {
        if !self.document.paused {
            return;
        }
        if let Some(open) = self.pauses.last_mut().filter(|p| p.to.is_none()) {
            open.reason = note.reason.clone();
            open.by = note.by.clone();
            open.until = note.until;
        }
    }

    /// The minute the due index files the job under: its next instant while it is active, the
    /// end of its pause while it is paused until a set time (the tick resumes it then), else
    /// none.
    pub fn index_at(&self) -> Option<DateTime<Utc>> {
        if self.document.paused {
            self.open_pause().and_then(|p| p.until)
        } else {
            self.next_run_at.map(|n| self.claimable_from(n))
        }
    }

    /// When the run of `instant` can first be claimed: its instant, or for a start further
    /// into its flexible window than a message can wait, the minute its start comes within
    /// reach (the due index files the job then, so no tick reads it sooner for nothing).
    pub fn claimable_from(&self, instant: DateTime<Utc>) -> DateTime<Utc> {
        let reach = chrono::Duration::seconds(i64::from(crate::limits::MAX_MESSAGE_DELAY_S));
        instant.max(instant + self.start_offset(instant) - reach)
    }

    /// The pause `instant` fell in, if any.
    pub fn pause_at(&self, instant: DateTime<Utc>) -> Option<&Pause> {
        self.pauses.iter().find(|p| p.from <= instant && p.to.is_none_or(|to| instant < to))
    }
}

/// A new signing secret: 256 bits, hex.
pub fn new_signing_secret(entropy: &dyn crate::entropy::Entropy) -> String {
    crate::entropy::secret(entropy)
}

impl Job {
    /// The parents this job runs after, as stored (ids).
    pub fn parents(&self) -> Vec<JobId> {
        self.document.depends_on.iter().filter_map(|p| JobId::parse(p)).collect()
    }

    /// Whether the job runs after other jobs instead of on a schedule of its own.
    pub fn has_parents(&self) -> bool {
        !self.document.depends_on.is_empty()
    }

    /// How long after a scheduled instant its run may start: the flexible window, or the
    /// schedule's jitter (a document has at most one of them).
    pub fn max_start_offset_s(&self) -> u32 {
        match (self.document.flexible_window_s, self.document.schedule.as_ref().and_then(|s| s.jitter_s)) {
            (Some(window), _) => window,
            (None, jitter) => jitter.unwrap_or(0),
        }
    }

    /// When the run of the scheduled `instant` may first start, after the instant: the one
    /// answer the tick (which dispatches the run) and the forecast (which counts it) share. A
    /// pure function of the job's id and the instant, so racing claimers agree: a flexible
    /// window's [`crate::offset::spread_offset`], else the schedule's
    /// [`crate::offset::jitter_offset`], else none.
    pub fn start_offset(&self, instant: DateTime<Utc>) -> chrono::Duration {
        match (self.document.flexible_window_s, self.document.schedule.as_ref().and_then(|s| s.jitter_s)) {
            (Some(window), _) => crate::offset::spread_offset(self.id.as_str(), instant, window),
            (None, Some(jitter)) => crate::offset::jitter_offset(self.id.as_str(), instant, jitter),
            (None, None) => chrono::Duration::zero(),
        }
    }

    /// Whether the job belongs in the due index: active and with a next run.
    pub fn due_at(&self) -> Option<DateTime<Utc>> {
        if self.document.paused { None } else { self.next_run_at }
    }

    /// When an active job's next instant can first be claimed ([`Job::claimable_from`]): the
    /// minute a tick that failed to claim it must come back to.
    pub fn claimable_at(&self) -> Option<DateTime<Utc>> {
        self.due_at().map(|next| self.claimable_from(next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What a job keeps besides its document (gaps, skips, pauses, its baseline), each at its
    /// most and largest, leaves the item room under DynamoDB's 400 KB for the largest document a
    /// deployment allows (a 200 KiB payload, `SUNDIAL_MAX_PAYLOAD_BYTES` at most).
    #[test]
    fn the_records_a_job_keeps_fit_its_item_beside_the_largest_payload() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let long = || Some("x".repeat(200));
        let previous = ScheduleDocument {
            cron: Some("0,5,10,15,20,25,30,35,40,45,50,55 0-23 1-31 1-12 MON-SUN".into()),
            timezone: Some("America/Argentina/ComodRivadavia".into()),
            start_at: Some("2026-01-01T00:00:00.123456789+00:00".into()),
            end_at: Some("2036-01-01T00:00:00.123456789+00:00".into()),
            ..ScheduleDocument::default()
        };
        let gap = Gap {
            from: t("2026-01-01T00:00:00Z"),
            to: t("2026-01-01T00:00:00Z"),
            instants: u64::MAX,
            cause: GapCause::Edited { previous: Some(Box::new(previous)) },
            at: t("2026-01-01T00:00:00Z"),
            told: true,
        };
        let skip = Skip { at: t("2026-01-01T00:00:00Z"), by: long(), asked_at: t("2026-01-01T00:00:00Z") };
        let pause = Pause {
            from: t("2026-01-01T00:00:00Z"),
            to: Some(t("2026-01-01T00:00:00Z")),
            reason: Some("é".repeat(MAX_PAUSE_REASON_CHARS)),
            by: long(),
            until: Some(t("2026-01-01T00:00:00Z")),
        };
        // The largest schedule a gap can hold: a business calendar of 1,000 holiday ranges.
        let range =
            || crate::calendar::HolidayEntry::Range { from: "2026-01-01".into(), to: "2026-01-01".into() };
        let calendar = crate::calendar::CalendarDocument {
            business_days: Some(["mon", "tue", "wed", "thu", "fri", "sat", "sun"].map(String::from).to_vec()),
            holidays: vec![range(); crate::calendar::MAX_HOLIDAYS],
            on_holiday: Some(crate::calendar::OnHoliday::PreviousBusinessDay),
            name: Some("n".repeat(64)),
            version: Some(u64::MAX),
        };
        let with_calendar = ScheduleDocument { calendar: Some(calendar), ..ScheduleDocument::default() };
        let big = Gap { cause: GapCause::Edited { previous: Some(Box::new(with_calendar)) }, ..gap.clone() };
        let mut job = crate::fixtures::job(json!({"schedule": {"cron": "* * * * *"}}));
        for _ in 0..GAPS_KEPT {
            job.gaps = job.gaps_with(gap.clone());
        }
        for _ in 0..GAPS_KEPT {
            job.gaps = job.gaps_with(big.clone());
        }
        let bytes = |v: serde_json::Value| v.to_string().len();
        let largest_gap = bytes(json!(big));
        assert!(bytes(json!(job.gaps)) <= GAPS_BYTES + largest_gap, "the gaps kept stay within their budget");
        let kept = bytes(json!(job.gaps)).max(bytes(json!(vec![gap; GAPS_KEPT])))
            + bytes(json!(vec![skip; MAX_SKIPS]))
            + bytes(json!(vec![pause; PAUSES_KEPT]))
            + 200;
        assert!(kept < 128 * 1024, "{kept} bytes of records");
        // The document's own calendar at its largest, beside the payload.
        let room = 400 * 1024 - 200 * 1024 - kept - largest_gap;
        assert!(room > 64 * 1024, "{room} bytes left for the rest of the document");
    }

    #[test]
    fn an_event_kinds_name_is_its_wire_name() {
        use EventKind::*;
        for kind in [
            Succeeded,
            Failed,
            Retrying,
            TimedOut,
            SlaMissed,
            LateStart,
            Skipped,
            Failing,
            Missed,
            DurationAnomaly,
            TooFast,
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(kind.as_str()));
        }
    }

    #[test]
    fn defaults_fill_a_minimal_document() {
        let doc: JobDocument = serde_json::from_value(json!({
            "name": "n", "target": {"type": "http", "url": "https://example.test/"}
        }))
        .unwrap();
        assert_eq!(doc.timeout_s, DEFAULT_TIMEOUT_S);
        assert_eq!(doc.retry, RetryPolicy::default());
        assert_eq!(doc.concurrency, ConcurrencyPolicy::Allow);
        assert_eq!(doc.catchup, CatchupPolicy::Latest);
        assert!(matches!(doc.target, TargetDocument::Http { ref method, .. } if method == "POST"));
    }

    #[test]
    fn unknown_fields_are_rejected_at_every_level() {
        for bad in [
            json!({"name": "n", "target": {"type": "http", "url": "u"}, "extra": 1}),
            json!({"name": "n", "target": {"type": "http", "url": "u", "extra": 1}}),
            json!({"name": "n", "target": {"type": "http", "url": "u"}, "retry": {"tries": 1}}),
            json!({"name": "n", "target": {"type": "http", "url": "u"}, "schedule": {"every": 1}}),
        ] {
            assert!(serde_json::from_value::<JobDocument>(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn secret_headers_are_redacted() {
        let doc: JobDocument = serde_json::from_value(json!({
            "name": "n",
            "target": {"type": "http", "url": "https://x.test/", "headers": {
                "Authorization": {"value": "Bearer s3cret", "secret": true},
                "X-Plain": "visible"
            }}
        }))
        .unwrap();
        let shown = serde_json::to_string(&doc.redacted()).unwrap();
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("visible"));
        assert!(serde_json::to_string(&doc).unwrap().contains("s3cret"));
    }

    #[test]
    fn channel_secrets_are_redacted_and_named_when_changed() {
        let doc = |hook: &str, key: &str| -> JobDocument {
            serde_json::from_value(json!({
                "name": "n",
                "target": {"type": "http", "url": "https://x.test/"},
                "notify": {"slack": {"webhook_url": hook}, "pagerduty": {"routing_key": key}},
            }))
            .unwrap()
        };
        let before = doc("https://hooks.slack.test/T/B/s3cret", "k3y0000000000000000000000000000a");
        let shown = serde_json::to_value(before.redacted()).unwrap();
        assert_eq!(shown["notify"]["slack"], json!({}));
        assert_eq!(shown["notify"]["pagerduty"], json!({"severity": "error"}));
        let after = doc("https://hooks.slack.test/T/B/other", "k3y0000000000000000000000000000a");
        assert_eq!(before.secrets_changed(&after), ["notify.slack.webhook_url"]);
        assert!(before.secrets_changed(&before).is_empty());
        assert_eq!(before.failing_threshold(), Some(1), "paged: told at the first failure");
        let quiet: JobDocument = serde_json::from_value(
            json!({"name": "n", "target": {"type": "http", "url": "https://x.test/"}}),
        )
        .unwrap();
        assert_eq!(quiet.failing_threshold(), None);
    }

    #[test]
    fn job_ids_are_ulids() {
        let id = JobId::generate();
        assert_eq!(JobId::parse(id.as_str()), Some(id.clone()));
        assert_eq!(JobId::parse(&id.as_str().to_ascii_uppercase()), Some(id));
        assert_eq!(JobId::parse("not-an-id"), None);
    }
}
