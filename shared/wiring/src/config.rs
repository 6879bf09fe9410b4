//! Configuration, read once from the environment. A missing or malformed variable is named in
//! the error.

use chrono::Duration;
use std::collections::HashMap;
use sundial_app::claim::ClaimSettings;
use sundial_app::tick::TickSettings;
use sundial_aws::provision::Resources;
use sundial_domain::auth::ApiKeys;
use sundial_domain::limits::{Limits, TargetAllowList};
use sundial_domain::watchdog::rules::WatchdogSettings;

/// Why configuration could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required")]
    Missing(&'static str),
    #[error("environment variable {name}: {reason}")]
    Invalid { name: &'static str, reason: String },
}

/// Everything the functions are configured with.
#[derive(Debug, Clone)]
pub struct Config {
    /// Prefix of every resource name (the stack name).
    pub stack: String,
    pub resources: Resources,
    pub limits: Limits,
    pub targets: TargetAllowList,
    pub api_keys: ApiKeys,
    /// Owners whose keys also read the whole stack's forecast (`SUNDIAL_OPERATORS`).
    pub operators: sundial_domain::auth::Operators,
    /// Partitions of each minute of the `by-due` index.
    pub due_shards: u16,
    pub claim: ClaimSettings,
    pub tick: TickSettings,
    /// How long a 202 or a heartbeat keeps an attempt's lease alive.
    pub heartbeat_window: Duration,
    /// Base URL of the dashboard, for links in notifications.
    pub public_url: Option<String>,
    /// Where PagerDuty's events go: its Events API v2 unless `SUNDIAL_PAGERDUTY_URL` says
    /// otherwise (a stand-in, in tests).
    pub pagerduty_url: String,
    /// Where runs' spans are sent (an OTLP/HTTP collector's base URL); `None`: nowhere.
    pub otlp_endpoint: Option<String>,
    /// How long audit records are kept, in days (`SUNDIAL_AUDIT_RETENTION_DAYS`).
    pub audit_retention_days: u32,
    pub watchdog: WatchdogSettings,
    /// Write metrics as CloudWatch EMF lines: in Lambda (`AWS_LAMBDA_FUNCTION_NAME` is set), or
    /// when `SUNDIAL_EMF` is `1`.
    pub emf: bool,
    /// Log the capacity of every DynamoDB call ([`sundial_aws::capacity`]): `SUNDIAL_CAPACITY_LOG`.
    pub capacity_log: bool,
    /// Where run logs can be found.
    pub logs: crate::logs::LogLocation,
    /// Seals pagination tokens: under `SUNDIAL_PAGE_TOKEN_KEY` (shared by every instance of the
    /// API), or a random key of this process's when it is unset (one local process).
    pub page_tokens: sundial_domain::page_token::PageTokens,
}

/// The variable holding the key pagination tokens are sealed with.
pub const PAGE_TOKEN_KEY: &str = "SUNDIAL_PAGE_TOKEN_KEY";

/// A source of variables: the process environment, or a map in tests.
pub trait Vars {
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy)]
pub struct Env;

impl Vars for Env {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty())
    }
}

impl Vars for HashMap<&str, &str> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).map(|v| v.to_string())
    }
}

fn required(vars: &dyn Vars, name: &'static str) -> Result<String, ConfigError> {
    vars.var(name).ok_or(ConfigError::Missing(name))
}

fn number<T: std::str::FromStr>(vars: &dyn Vars, name: &'static str, default: T) -> Result<T, ConfigError> {
    match vars.var(name) {
        None => Ok(default),
        Some(text) => text
            .trim()
            .parse()
            .map_err(|_| ConfigError::Invalid { name, reason: format!("`{text}` is not a valid number") }),
    }
}

fn flag(vars: &dyn Vars, name: &'static str) -> Result<bool, ConfigError> {
    match vars.var(name).as_deref().map(str::trim) {
        None | Some("0" | "false") => Ok(false),
        Some("1" | "true") => Ok(true),
        Some(text) => {
            Err(ConfigError::Invalid { name, reason: format!("`{text}` is not one of 1, 0, true, false") })
        }
    }
}

fn list(vars: &dyn Vars, name: &str) -> Vec<String> {
    vars.var(name)
        .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect())
        .unwrap_or_default()
}

impl Config {
    /// Reads the configuration of a deployed function: resource names come from variables.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(&Env, None)
    }

    /// Reads the configuration; `resources`, when given (the local stack provisions them), wins
    /// over the resource variables.
    pub fn from_vars(vars: &dyn Vars, resources: Option<Resources>) -> Result<Self, ConfigError> {
        let stack = vars.var("SUNDIAL_STACK").unwrap_or_else(|| "sundial".to_string());
        let resources = match resources {
            Some(r) => r,
            None => resources_of(vars)?,
        };
        let due_shards: u16 = number(vars, "SUNDIAL_DUE_SHARDS", 8)?;
        if !(1..=100).contains(&due_shards) {
            return Err(ConfigError::Invalid { name: "SUNDIAL_DUE_SHARDS", reason: "must be 1-100".into() });
        }
        let emf = match vars.var("SUNDIAL_EMF") {
            Some(v) => v == "1",
            None => vars.var("AWS_LAMBDA_FUNCTION_NAME").is_some(),
        };
        let logs = crate::logs::LogLocation::new(
            vars.var("SUNDIAL_LOCAL_LOG"),
            vars.var("AWS_REGION"),
            vars.var("AWS_LAMBDA_FUNCTION_NAME").is_some(),
            &stack,
        );
        Ok(Config {
            page_tokens: page_tokens(vars)?,
            logs,
            emf,
            capacity_log: flag(vars, "SUNDIAL_CAPACITY_LOG")?,
            watchdog: watchdog(vars)?,
            limits: limits(vars)?,
            targets: targets(vars, &stack)?,
            stack,
            resources,
            api_keys: api_keys(vars)?,
            operators: sundial_domain::auth::Operators::from_list(
                &vars.var("SUNDIAL_OPERATORS").unwrap_or_default(),
            ),
            due_shards,
            claim: claim(vars)?,
            tick: TickSettings::default(),
            heartbeat_window: seconds(
                vars,
                "SUNDIAL_HEARTBEAT_WINDOW_S",
                sundial_domain::run::transition::DEFAULT_HEARTBEAT_WINDOW,
            )?,
            public_url: vars.var("SUNDIAL_PUBLIC_URL"),
            pagerduty_url: vars
                .var("SUNDIAL_PAGERDUTY_URL")
                .unwrap_or_else(|| sundial_domain::channels::PAGERDUTY_EVENTS_URL.to_string()),
            otlp_endpoint: vars.var("OTEL_EXPORTER_OTLP_ENDPOINT"),
            audit_retention_days: audit_retention_days(vars)?,
        })
    }
}

/// How long audit records are kept: 1 to 3,650 days.
fn audit_retention_days(vars: &dyn Vars) -> Result<u32, ConfigError> {
    let name = "SUNDIAL_AUDIT_RETENTION_DAYS";
    let days: u32 = number(vars, name, sundial_domain::audit::DEFAULT_RETENTION_DAYS)?;
    if !(1..=3650).contains(&days) {
        return Err(ConfigError::Invalid { name, reason: "must be 1-3650".into() });
    }
    Ok(days)
}

/// A duration in whole seconds, `default` when unset.
fn seconds(vars: &dyn Vars, name: &'static str, default: Duration) -> Result<Duration, ConfigError> {
    number(vars, name, default.num_seconds()).map(Duration::seconds)
}

/// The stack's resources, named by the variables a deployed function has.
fn resources_of(vars: &dyn Vars) -> Result<Resources, ConfigError> {
    Ok(Resources {
        jobs_table: required(vars, "SUNDIAL_JOBS_TABLE")?,
        runs_table: required(vars, "SUNDIAL_RUNS_TABLE")?,
        idempotency_table: required(vars, "SUNDIAL_IDEMPOTENCY_TABLE")?,
        runs_queue_url: required(vars, "SUNDIAL_RUNS_QUEUE_URL")?,
        dlq_url: required(vars, "SUNDIAL_DLQ_URL")?,
        events_topic_arn: required(vars, "SUNDIAL_EVENTS_TOPIC_ARN")?,
    })
}

/// The bounds jobs are checked against.
fn limits(vars: &dyn Vars) -> Result<Limits, ConfigError> {
    let defaults = Limits::default();
    let limits = Limits {
        max_payload_bytes: number(vars, "SUNDIAL_MAX_PAYLOAD_BYTES", defaults.max_payload_bytes)?,
        min_interval_s: number(vars, "SUNDIAL_MIN_INTERVAL_S", defaults.min_interval_s)?,
        max_attempts: number(vars, "SUNDIAL_MAX_ATTEMPTS", defaults.max_attempts)?,
        max_jobs_per_owner: number(vars, "SUNDIAL_MAX_JOBS_PER_OWNER", defaults.max_jobs_per_owner)?,
    };
    if limits.max_jobs_per_owner > sundial_domain::limits::MOST_JOBS_PER_OWNER {
        return Err(ConfigError::Invalid {
            name: "SUNDIAL_MAX_JOBS_PER_OWNER",
            reason: format!(
                "at most {}: a group's links (one per job naming it) must fit one DynamoDB item",
                sundial_domain::limits::MOST_JOBS_PER_OWNER
            ),
        });
    }
    if limits.max_payload_bytes > 200 * 1024 {
        return Err(ConfigError::Invalid {
            name: "SUNDIAL_MAX_PAYLOAD_BYTES",
            reason: "must leave room in a 256 KiB SQS message (at most 204800)".into(),
        });
    }
    if !(1..=10).contains(&limits.max_attempts) {
        return Err(ConfigError::Invalid {
            name: "SUNDIAL_MAX_ATTEMPTS",
            reason: "must be 1-10, below the runs queue's maxReceiveCount".into(),
        });
    }
    Ok(limits)
}

/// Where jobs' targets may be: the allow-lists, the networks, and never Sundial's own endpoints
/// (its API, the AWS endpoint it is pointed at, which an emulator answers for anyone, the Lambda
/// Runtime API of its function) nor its own resources (`<stack>-`).
fn targets(vars: &dyn Vars, stack: &str) -> Result<TargetAllowList, ConfigError> {
    let own: Vec<String> = ["SUNDIAL_PUBLIC_URL", "AWS_ENDPOINT_URL", "AWS_LAMBDA_RUNTIME_API"]
        .iter()
        .filter_map(|name| vars.var(name))
        .collect();
    let network = sundial_domain::egress::Egress::new(&list(vars, "SUNDIAL_ALLOWED_NETWORKS"), &own)
        .map_err(|e| ConfigError::Invalid { name: "SUNDIAL_ALLOWED_NETWORKS", reason: e.to_string() })?;
    Ok(TargetAllowList {
        lambda: list(vars, "SUNDIAL_ALLOWED_LAMBDA"),
        sqs: list(vars, "SUNDIAL_ALLOWED_SQS"),
        sns: list(vars, "SUNDIAL_ALLOWED_SNS"),
        state_machines: list(vars, "SUNDIAL_ALLOWED_STATE_MACHINES"),
        ecs_clusters: list(vars, "SUNDIAL_ALLOWED_ECS_CLUSTERS"),
        ecs_task_definitions: list(vars, "SUNDIAL_ALLOWED_ECS_TASK_DEFINITIONS"),
        event_buses: list(vars, "SUNDIAL_ALLOWED_EVENT_BUSES"),
        own_prefix: format!("{stack}-"),
        network,
    })
}

/// The API keys: plain (`owner:key`) and as digests.
fn api_keys(vars: &dyn Vars) -> Result<ApiKeys, ConfigError> {
    let mut api_keys = match vars.var("SUNDIAL_API_KEYS") {
        Some(plain) => ApiKeys::from_plain_list(&plain)
            .map_err(|e| ConfigError::Invalid { name: "SUNDIAL_API_KEYS", reason: e.to_string() })?,
        None => ApiKeys::default(),
    };
    if let Some(digests) = vars.var("SUNDIAL_API_KEY_HASHES") {
        api_keys
            .add_digest_list(&digests)
            .map_err(|e| ConfigError::Invalid { name: "SUNDIAL_API_KEY_HASHES", reason: e.to_string() })?;
    }
    Ok(api_keys)
}

/// How far ahead the tick claims, how much it catches up, how long runs are kept.
fn claim(vars: &dyn Vars) -> Result<ClaimSettings, ConfigError> {
    let defaults = ClaimSettings::default();
    let claim = ClaimSettings {
        lookahead: seconds(vars, "SUNDIAL_LOOKAHEAD_S", defaults.lookahead)?,
        claim_ahead: seconds(vars, "SUNDIAL_CLAIM_AHEAD_S", defaults.claim_ahead)?,
        catchup_max: number(vars, "SUNDIAL_CATCHUP_MAX", defaults.catchup_max)?,
        retention: Duration::days(number(vars, "SUNDIAL_RETENTION_DAYS", defaults.retention.num_days())?),
        concurrency: defaults.concurrency,
    };
    if claim.lookahead < Duration::seconds(60) || claim.claim_ahead > Duration::seconds(900) {
        return Err(ConfigError::Invalid {
            name: "SUNDIAL_LOOKAHEAD_S",
            reason: "the lookahead must be at least 60 s and the claim-ahead at most 900 s".into(),
        });
    }
    Ok(claim)
}

/// The watchdog's graces and when it calls the scheduler stalled.
fn watchdog(vars: &dyn Vars) -> Result<WatchdogSettings, ConfigError> {
    let defaults = WatchdogSettings::default();
    let watchdog = WatchdogSettings {
        dispatch_grace: seconds(vars, "SUNDIAL_DISPATCH_GRACE_S", defaults.dispatch_grace)?,
        retry_margin: seconds(vars, "SUNDIAL_RETRY_MARGIN_S", defaults.retry_margin)?,
        publish_grace: seconds(vars, "SUNDIAL_PUBLISH_GRACE_S", defaults.publish_grace)?,
        stall_after_minutes: number(vars, "SUNDIAL_STALL_AFTER_MINUTES", defaults.stall_after_minutes)?,
        ..defaults
    };
    if watchdog.stall_after_minutes < 2 {
        return Err(ConfigError::Invalid {
            name: "SUNDIAL_STALL_AFTER_MINUTES",
            reason: "must be at least 2 (the current minute's tick may not have run yet)".into(),
        });
    }
    Ok(watchdog)
}

/// The key pagination tokens are sealed with: shared by every instance of the API, or a random
/// one of this process's when unset.
fn page_tokens(vars: &dyn Vars) -> Result<sundial_domain::page_token::PageTokens, ConfigError> {
    match vars.var(PAGE_TOKEN_KEY) {
        None => Ok(sundial_domain::page_token::PageTokens::random()),
        Some(key) => sundial_domain::page_token::PageTokens::new(key.as_bytes())
            .map_err(|e| ConfigError::Invalid { name: PAGE_TOKEN_KEY, reason: e.to_string() }),
    }
}

impl Config {
    /// What the use cases are configured with: the parts of this configuration they read.
    pub fn use_case_settings(&self) -> sundial_app::use_cases::Settings {
        sundial_app::use_cases::Settings {
            claim: self.claim.clone(),
            tick: self.tick.clone(),
            worker: sundial_app::worker::WorkerSettings {
                heartbeat_window: self.heartbeat_window,
                ..sundial_app::worker::WorkerSettings::default()
            },
            watchdog: self.watchdog.clone(),
            jobs: sundial_app::jobs::JobsSettings {
                limits: self.limits.clone(),
                targets: self.targets.clone(),
                page_tokens: self.page_tokens.clone(),
            },
            public_url: self.public_url.clone(),
            pagerduty_url: self.pagerduty_url.clone(),
            audit_retention_days: self.audit_retention_days,
        }
    }
}

/// The AWS SDK configuration: region, credentials and endpoint (`AWS_ENDPOINT_URL` points it at
/// the emulator) from the standard variables, over [`aws_https_client`].
pub async fn aws_sdk_config() -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest()).http_client(aws_https_client()).load().await
}

/// The HTTP client of every AWS SDK client: the SDK's own (hyper 1, HTTP and HTTPS), with rustls
/// over ring instead of the SDK's default aws-lc, a megabyte more in every function.
pub fn aws_https_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    use aws_smithy_http_client::tls::{Provider, rustls_provider::CryptoMode};
    aws_smithy_http_client::Builder::new().tls_provider(Provider::Rustls(CryptoMode::Ring)).build_https()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> HashMap<&'static str, &'static str> {
        HashMap::from([
            ("SUNDIAL_JOBS_TABLE", "j"),
            ("SUNDIAL_RUNS_TABLE", "r"),
            ("SUNDIAL_IDEMPOTENCY_TABLE", "i"),
            ("SUNDIAL_RUNS_QUEUE_URL", "q"),
            ("SUNDIAL_DLQ_URL", "d"),
            ("SUNDIAL_EVENTS_TOPIC_ARN", "t"),
        ])
    }

    #[test]
    fn names_the_missing_variable() {
        let mut vars = base();
        vars.remove("SUNDIAL_RUNS_TABLE");
        assert_eq!(Config::from_vars(&vars, None).err(), Some(ConfigError::Missing("SUNDIAL_RUNS_TABLE")));
    }

    #[test]
    fn names_the_malformed_variable() {
        let mut vars = base();
        vars.insert("SUNDIAL_DUE_SHARDS", "many");
        assert!(matches!(
            Config::from_vars(&vars, None),
            Err(ConfigError::Invalid { name: "SUNDIAL_DUE_SHARDS", .. })
        ));
        let mut vars = base();
        vars.insert("SUNDIAL_API_KEYS", "keywithoutowner");
        assert!(matches!(
            Config::from_vars(&vars, None),
            Err(ConfigError::Invalid { name: "SUNDIAL_API_KEYS", .. })
        ));
    }

    /// A group's links are one item: the jobs an owner may have are capped so that they fit.
    #[test]
    fn jobs_per_owner_are_capped_where_a_groups_links_fit_one_item() {
        let mut vars = base();
        vars.insert("SUNDIAL_MAX_JOBS_PER_OWNER", "5000");
        assert_eq!(Config::from_vars(&vars, None).map(|c| c.limits.max_jobs_per_owner), Ok(5_000));
        vars.insert("SUNDIAL_MAX_JOBS_PER_OWNER", "5001");
        assert!(matches!(
            Config::from_vars(&vars, None),
            Err(ConfigError::Invalid { name: "SUNDIAL_MAX_JOBS_PER_OWNER", .. })
        ));
    }

    #[test]
    fn defaults_apply() {
        let config = Config::from_vars(&base(), None).unwrap();
        assert_eq!(config.limits, Limits::default());
        assert_eq!(config.due_shards, 8);
        assert_eq!(config.targets.own_prefix, "sundial-");
        assert!(!config.capacity_log);
    }

    #[test]
    fn the_capacity_log_is_a_flag() {
        for (text, on) in [("1", true), ("true", true), ("0", false), ("false", false)] {
            let mut vars = base();
            vars.insert("SUNDIAL_CAPACITY_LOG", text);
            assert_eq!(Config::from_vars(&vars, None).map(|c| c.capacity_log), Ok(on), "{text}");
        }
        let mut vars = base();
        vars.insert("SUNDIAL_CAPACITY_LOG", "yes");
        assert!(matches!(
            Config::from_vars(&vars, None),
            Err(ConfigError::Invalid { name: "SUNDIAL_CAPACITY_LOG", .. })
        ));
    }
}
