//! Every environment variable Sundial reads, declared once: its name, its default as a person
//! reads it, what it means, which process reads it, and whether a deployed function must have
//! it set. [`crate::config`] reads these (a test holds every name it asks for to this table);
//! the README's configuration table and the template's function environments are checked
//! against it, so that none of the three drifts from the others.

/// Which process reads a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every function and the local runtime, through [`crate::config::Config`].
    Functions,
    /// The API function (and the local runtime, which serves the API).
    Api,
    /// The local runtime or the scripts that start it only.
    Local,
    /// The CLI (`sundial`), documented with it.
    Cli,
}

/// One environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    pub name: &'static str,
    /// The default as the README states it (`—` for none).
    pub default: &'static str,
    pub meaning: &'static str,
    pub scope: Scope,
    /// A deployed function of its scope fails, or misbehaves, without it: the template sets it.
    pub required_in_lambda: bool,
}

const fn var(name: &'static str, default: &'static str, meaning: &'static str, scope: Scope) -> Variable {
    Variable { name, default, meaning, scope, required_in_lambda: false }
}

const fn required(
    name: &'static str,
    default: &'static str,
    meaning: &'static str,
    scope: Scope,
) -> Variable {
    Variable { name, default, meaning, scope, required_in_lambda: true }
}

const RESOURCE: &str = "resource names in Lambda";
const FROM_PROVISIONING: &str = "from provisioning (local)";
const ALLOWED: &str = "comma-separated patterns (`*` matches anything) of the targets jobs may call";

use Scope::{Api, Cli, Functions, Local};

/// The variables, in the README's order.
pub const VARIABLES: &[Variable] = &[
    var(
        "SUNDIAL_API_KEYS",
        "`sundial-dev-key:dev` (local)",
        "`key:owner,…`; keys are hashed at start-up; each is its owner's `admin`",
        Api,
    ),
    var(
        "SUNDIAL_API_KEY_HASHES",
        "—",
        "`sha256hex:owner,…`, for deployments that must not hold keys in clear",
        Api,
    ),
    var(
        "SUNDIAL_OPERATORS",
        "—",
        "`owner,…`: owners whose keys may also read the whole stack's forecast (`GET /v1/forecast?scope=stack`)",
        Api,
    ),
    required(
        "SUNDIAL_PAGE_TOKEN_KEY",
        "a random key per process (local)",
        "the key pagination tokens are sealed with, shared by every instance of the API (at least 32 bytes)",
        Api,
    ),
    required(
        "SUNDIAL_STACK",
        "`sundial-local` (local)",
        "prefix of every resource name; targets containing `<stack>-` are refused",
        Functions,
    ),
    required("SUNDIAL_JOBS_TABLE", FROM_PROVISIONING, RESOURCE, Functions),
    required("SUNDIAL_RUNS_TABLE", FROM_PROVISIONING, RESOURCE, Functions),
    required("SUNDIAL_IDEMPOTENCY_TABLE", FROM_PROVISIONING, RESOURCE, Functions),
    required("SUNDIAL_RUNS_QUEUE_URL", FROM_PROVISIONING, RESOURCE, Functions),
    required("SUNDIAL_DLQ_URL", FROM_PROVISIONING, RESOURCE, Functions),
    required("SUNDIAL_EVENTS_TOPIC_ARN", FROM_PROVISIONING, RESOURCE, Functions),
    var("SUNDIAL_ALLOWED_LAMBDA", "empty (none allowed)", ALLOWED, Functions),
    var("SUNDIAL_ALLOWED_SQS", "empty (none allowed)", ALLOWED, Functions),
    var("SUNDIAL_ALLOWED_SNS", "empty (none allowed)", ALLOWED, Functions),
    var("SUNDIAL_ALLOWED_STATE_MACHINES", "empty (none allowed)", ALLOWED, Functions),
    var("SUNDIAL_ALLOWED_ECS_CLUSTERS", "empty (none allowed)", ALLOWED, Functions),
    var("SUNDIAL_ALLOWED_ECS_TASK_DEFINITIONS", "empty (none allowed)", ALLOWED, Functions),
    var("SUNDIAL_ALLOWED_EVENT_BUSES", "empty (none allowed)", ALLOWED, Functions),
    var(
        "SUNDIAL_ALLOWED_NETWORKS",
        "public addresses only (loopback too, local)",
        "comma-separated networks (CIDRs, addresses or host names) HTTP targets may reach besides public addresses",
        Functions,
    ),
    var("SUNDIAL_MAX_PAYLOAD_BYTES", "65536", "largest payload", Functions),
    var("SUNDIAL_MIN_INTERVAL_S", "10", "shortest gap between two instants of a schedule", Functions),
    var(
        "SUNDIAL_MAX_ATTEMPTS",
        "10",
        "largest `retry.max_attempts` (the queue's `maxReceiveCount`, 15, is above it)",
        Functions,
    ),
    var(
        "SUNDIAL_MAX_JOBS_PER_OWNER",
        "1000",
        "jobs one owner may have (at most 5000: a group's links, one per job naming it, share one item)",
        Functions,
    ),
    required("SUNDIAL_DUE_SHARDS", "8", "partitions per minute of the due index", Functions),
    var("SUNDIAL_LOOKAHEAD_S", "60", "the tick claims instants due within this", Functions),
    var(
        "SUNDIAL_CLAIM_AHEAD_S",
        "300",
        "`allow` jobs have their instants claimed this far ahead in one pass (≤ 900)",
        Functions,
    ),
    var(
        "SUNDIAL_DISPATCH_GRACE_S",
        "120",
        "a run whose first attempt has not started this long after it was due is sent again (once per grace)",
        Functions,
    ),
    var("SUNDIAL_CATCHUP_MAX", "100", "most missed instants `catchup: all` runs", Functions),
    required("SUNDIAL_RETENTION_DAYS", "30", "runs are kept this long (DynamoDB TTL)", Functions),
    var("SUNDIAL_AUDIT_RETENTION_DAYS", "400", "audit records are kept this long (1-3650 days)", Functions),
    var(
        "SUNDIAL_HEARTBEAT_WINDOW_S",
        "60",
        "how long a 202 or a heartbeat keeps an attempt alive",
        Functions,
    ),
    var(
        "SUNDIAL_PUBLIC_URL",
        "API URL (local, template)",
        "base of the dashboard links in notifications",
        Functions,
    ),
    var(
        "SUNDIAL_PAGERDUTY_URL",
        "`https://events.pagerduty.com/v2/enqueue`",
        "where `notify.pagerduty` events are posted (through the egress guard)",
        Functions,
    ),
    var(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "unset (no spans sent)",
        "base URL of an OpenTelemetry collector (OTLP over HTTP, JSON) that runs' spans are sent to",
        Functions,
    ),
    var(
        "SUNDIAL_STALL_AFTER_MINUTES",
        "3",
        "the tick this many minutes behind is `scheduler_stalled`",
        Functions,
    ),
    var(
        "SUNDIAL_RETRY_MARGIN_S",
        "120",
        "a retry not started this long after its backoff ended is sent again",
        Functions,
    ),
    var(
        "SUNDIAL_PUBLISH_GRACE_S",
        "120",
        "events still unsent this long after they were recorded are re-published",
        Functions,
    ),
    var(
        "SUNDIAL_CAPACITY_LOG",
        "0",
        "`1`: log the DynamoDB capacity of every call (the cost tables read it)",
        Functions,
    ),
    var("SUNDIAL_EMF", "`1` in Lambda", "`1`: write metrics as CloudWatch EMF lines", Functions),
    var(
        "SUNDIAL_LOCAL_LOG",
        "—",
        "the local runtime's log file, where a run's logs are read from",
        Functions,
    ),
    var("SUNDIAL_LOCAL_WORKERS", "4", "local worker tasks polling the runs queue", Local),
    var("SUNDIAL_LISTEN", "`127.0.0.1:8080`", "local API address", Local),
    var(
        "SUNDIAL_SINK_LISTEN",
        "`127.0.0.1:8099`",
        "local sink (a target that logs what it receives); `off`: none",
        Local,
    ),
    var("SUNDIAL_EMULATOR_PORT", "4566", "local emulator port (`scripts/run`)", Local),
    var("SUNDIAL_URL", "—", "the API's URL, for the CLI", Cli),
    var("SUNDIAL_API_KEY", "—", "the API key, for the CLI", Cli),
    var("SUNDIAL_CONFIG", "`~/.config/sundial/config`", "the CLI's config file", Cli),
];

/// The declared variable `name`, if there is one.
pub fn declared(name: &str) -> Option<&'static Variable> {
    VARIABLES.iter().find(|v| v.name == name)
}
