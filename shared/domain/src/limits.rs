//! Limits and target allow-lists: the configurable bounds every job is checked against.

/// Configurable limits (defaults from the design).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest `payload`, serialized, in bytes (64 KiB: well under SQS's 256 KiB message).
    pub max_payload_bytes: usize,
    /// Shortest allowed gap between two instants of a schedule.
    pub min_interval_s: u64,
    /// Largest `retry.max_attempts`; the runs queue's `maxReceiveCount` sits above it.
    pub max_attempts: u32,
    /// Jobs one owner may have.
    pub max_jobs_per_owner: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_payload_bytes: 64 * 1024,
            min_interval_s: 10,
            max_attempts: 10,
            max_jobs_per_owner: 1_000,
        }
    }
}

/// The most jobs per owner the configuration may allow: every job naming a concurrency group is
/// one attribute (about 40 bytes) of the group's links item, which must stay well under
/// DynamoDB's 400 KB.
pub const MOST_JOBS_PER_OWNER: u32 = 5_000;

/// Largest run's own payload (a trigger's, re-run's or backfill's), in bytes, whatever a
/// deployment allows its jobs: it is kept on the run's item beside up to 10 attempts (each with
/// up to 4 KiB of output and error, escaped as JSON), which all stay under DynamoDB's 400 KB
/// (`shared/aws/src/dynamo/runs.rs` tests the largest run).
pub const RUN_INPUT_BYTES: usize = 64 * 1024;

/// Largest `timeout_s`: an HTTP target that answers 202 may keep an attempt open for 7 days.
pub const MAX_TIMEOUT_S: u32 = 7 * 86_400;
/// Largest backoff: SQS's longest visibility timeout (12 hours).
pub const MAX_BACKOFF_S: u32 = 12 * 3_600;
/// Largest `jitter_s`: SQS's longest message delay (15 minutes).
pub const MAX_JITTER_S: u32 = 900;
/// The most runs `schedule.max_runs` may allow.
pub const MAX_RUNS: u64 = 1_000_000;
/// The most schedules one union (`schedule.any`) holds.
pub const MAX_SCHEDULES: usize = 10;
/// Largest `flexible_window_s`: four hours. A run starting later in its window than SQS's
/// longest message delay (15 minutes) is claimed later, once its start is within reach.
pub const MAX_FLEXIBLE_WINDOW_S: u32 = 14_400;
/// SQS's longest message delay: a run whose start lies further ahead is not claimed yet.
pub const MAX_MESSAGE_DELAY_S: u32 = 900;
/// Largest `sla_s` and `start_deadline_s`: 30 days.
pub const MAX_DEADLINE_S: u32 = 30 * 86_400;
/// Largest `alert_after_failures`.
pub const MAX_ALERT_AFTER_FAILURES: u32 = 100;
/// Most endpoints of one kind in `notify`.
pub const MAX_ENDPOINTS_PER_KIND: usize = 10;

/// ECS's bound on a RunTask's overrides, as JSON (containers' names, commands and environment).
pub const MAX_ECS_OVERRIDES_BYTES: usize = 8192;

/// The size ECS counts of one container's overrides: its name, command and environment as the
/// RunTask request's JSON spells them.
pub fn ecs_overrides_bytes(
    container: &str,
    command: Option<&[String]>,
    environment: &[(String, String)],
) -> usize {
    let environment: Vec<serde_json::Value> =
        environment.iter().map(|(name, value)| serde_json::json!({"name": name, "value": value})).collect();
    let mut one = serde_json::json!({"name": container, "environment": environment});
    if let Some(command) = command {
        one["command"] = serde_json::json!(command);
    }
    serde_json::json!({"containerOverrides": [one]}).to_string().len()
}

/// Which Lambda functions, SQS queues, SNS topics, state machines, ECS clusters and event buses
/// jobs may target.
///
/// Patterns are matched against the whole identifier as written in the job; `*` matches any
/// run of characters. Anything containing Sundial's own resource prefix is refused whatever the
/// patterns say, so a job can never feed Sundial's own queues or functions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetAllowList {
    pub lambda: Vec<String>,
    pub sqs: Vec<String>,
    pub sns: Vec<String>,
    /// State machine ARNs (Step Functions targets).
    pub state_machines: Vec<String>,
    /// ECS clusters, by the name or ARN jobs write.
    pub ecs_clusters: Vec<String>,
    /// ECS task definitions, by the family, `family:revision` or ARN jobs write.
    pub ecs_task_definitions: Vec<String>,
    /// EventBridge bus ARNs.
    pub event_buses: Vec<String>,
    /// Names of Sundial's own resources start with this (the stack name and a dash).
    pub own_prefix: String,
    /// Where HTTP calls made for jobs may connect (targets, `notify.https`).
    pub network: crate::egress::Egress,
}

/// Why an identifier may not be a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    OwnResource,
    NotAllowed,
}

impl TargetAllowList {
    pub fn check(&self, patterns: &[String], identifier: &str) -> Result<(), Refusal> {
        if !self.own_prefix.is_empty() && identifier.contains(&self.own_prefix) {
            return Err(Refusal::OwnResource);
        }
        if patterns.iter().any(|p| glob_matches(p, identifier)) { Ok(()) } else { Err(Refusal::NotAllowed) }
    }
}

/// An SQS queue named by its ARN: `arn:<partition>:sqs:<region>:<12-digit account>:<name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueArn<'a> {
    pub region: &'a str,
    pub account: &'a str,
    pub name: &'a str,
}

impl<'a> QueueArn<'a> {
    /// The parts of `arn`, if it is a queue ARN of an AWS partition (`aws`, `aws-cn`,
    /// `aws-us-gov`, …) with a region, a 12-digit account and a name.
    pub fn parse(arn: &'a str) -> Option<Self> {
        let parsed = crate::arn::Arn::parse(arn, "sqs")?;
        let name = parsed.resource;
        (!name.contains(':')).then_some(QueueArn { region: parsed.region, account: parsed.account, name })
    }
}

impl TargetAllowList {
    /// Checks a queue named by its ARN (`notify.sqs`) against the SQS allow-list, whose patterns
    /// are queue URLs: the ARN names the same queue when its account and name match the
    /// pattern's last two path segments and, where the pattern's host names a region
    /// (`sqs.<region>.…`), its region too. A pattern that matches the ARN itself
    /// (`arn:aws:sqs:*:123456789012:reports-*`, `*`) allows it as well.
    pub fn check_queue_arn(&self, arn: &str) -> Result<(), Refusal> {
        if !self.own_prefix.is_empty() && arn.contains(&self.own_prefix) {
            return Err(Refusal::OwnResource);
        }
        let queue = QueueArn::parse(arn).ok_or(Refusal::NotAllowed)?;
        let matches = |pattern: &String| {
            if glob_matches(pattern, arn) {
                return true;
            }
            let mut segments = pattern.rsplitn(3, '/');
            let (Some(name), Some(account), Some(endpoint)) =
                (segments.next(), segments.next(), segments.next())
            else {
                return false;
            };
            let host = endpoint.rsplit('/').next().unwrap_or_default();
            let region_ok = match host.strip_prefix("sqs.").and_then(|rest| rest.split('.').next()) {
                Some(region) => glob_matches(region, queue.region),
                None => true,
            };
            region_ok && glob_matches(account, queue.account) && glob_matches(name, queue.name)
        };
        if self.sqs.iter().any(matches) { Ok(()) } else { Err(Refusal::NotAllowed) }
    }
}

/// `*` matches any run of characters (also none); everything else matches itself.
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_matches(
            "arn:aws:lambda:*:123:function:team-*",
            "arn:aws:lambda:eu-west-1:123:function:team-a"
        ));
        assert!(!glob_matches(
            "arn:aws:lambda:*:123:function:team-*",
            "arn:aws:lambda:eu-west-1:999:function:team-a"
        ));
        assert!(glob_matches("exact", "exact"));
        assert!(!glob_matches("exact", "exactly"));
        assert!(glob_matches("*", "anything"));
        assert!(glob_matches("a*b*c", "aXXbYYc"));
        assert!(!glob_matches("a*b*c", "aXXcYYb"));
        assert!(!glob_matches("ab*ba", "aba"));
    }

    #[test]
    fn own_resources_are_refused_even_when_allowed() {
        let list = TargetAllowList {
            sqs: vec!["*".into()],
            own_prefix: "sundial-prod-".into(),
            ..Default::default()
        };
        assert_eq!(list.check(&list.sqs, "http://q/123/sundial-prod-runs"), Err(Refusal::OwnResource));
        assert_eq!(list.check(&list.sqs, "http://q/123/reports"), Ok(()));
        assert_eq!(list.check(&list.lambda, "fn"), Err(Refusal::NotAllowed));
    }

    #[test]
    fn a_queue_arn_is_checked_by_region_account_and_name() {
        let list = TargetAllowList {
            sqs: vec![
                "https://sqs.eu-west-1.amazonaws.com/123456789012/reports-*".into(),
                "http://127.0.0.1:4566/000000000000/local-*".into(),
                "arn:aws:sqs:*:456456456456:audit".into(),
            ],
            own_prefix: "sundial-prod-".into(),
            ..Default::default()
        };
        for allowed in [
            "arn:aws:sqs:eu-west-1:123456789012:reports-daily",
            "arn:aws:sqs:us-east-1:456456456456:audit",
            "arn:aws:sqs:us-east-1:000000000000:local-q",
        ] {
            assert_eq!(list.check_queue_arn(allowed), Ok(()), "{allowed}");
        }
        for refused in [
            "arn:aws:sqs:us-east-1:123456789012:reports-daily", // another region than the pattern's
            "arn:aws:sqs:eu-west-1:999999999999:reports-daily",
            "arn:aws:sqs:eu-west-1:123456789012:other",
            "arn:aws:sqs:eu-west-1:123456789012",
            "arn:aws:sqs:eu-west-1:123456789012:",
            "arn:aws:sqs:eu-west-1:123:reports-daily",
            "arn:aws:sqs::123456789012:reports-daily",
            "arn:aws:sns:eu-west-1:123456789012:reports-daily",
        ] {
            assert_eq!(list.check_queue_arn(refused), Err(Refusal::NotAllowed), "{refused}");
        }
        let everything = TargetAllowList { sqs: vec!["*".into()], ..list };
        assert_eq!(everything.check_queue_arn("arn:aws-cn:sqs:cn-north-1:123456789012:q"), Ok(()));
        assert_eq!(
            everything.check_queue_arn("arn:aws:sqs:eu-west-1:123456789012:sundial-prod-runs"),
            Err(Refusal::OwnResource)
        );
    }
}
