//! Metrics as CloudWatch Embedded Metric Format (EMF) records: one JSON log line per record,
//! which CloudWatch Logs turns into metrics without an API call from the function.
//!
//! Every record carries one dimension, `Function` (`tick`, `worker`, `watchdog`, `api`), so
//! cardinality stays bounded: job and run ids go in as properties (searchable in Logs Insights),
//! never as dimensions. The metric names are the constants of [`names`]; the template's alarms
//! and dashboard use the same names.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

/// The CloudWatch namespace of every Sundial metric.
pub const NAMESPACE: &str = "Sundial";

/// The metric names (the template's alarms and dashboard refer to these).
pub mod names {
    pub const RUNS_CLAIMED: &str = "RunsClaimed";
    pub const RUNS_DISPATCHED: &str = "RunsDispatched";
    pub const RUNS_SKIPPED: &str = "RunsSkipped";
    pub const RUNS_STARTED: &str = "RunsStarted";
    pub const RUNS_SUCCEEDED: &str = "RunsSucceeded";
    pub const RUNS_FAILED: &str = "RunsFailed";
    pub const RUNS_RETRIED: &str = "RunsRetried";
    pub const RUNS_TIMED_OUT: &str = "RunsTimedOut";
    pub const SLA_MISSED: &str = "SlaMissed";
    pub const LATE_STARTS: &str = "LateStarts";
    /// Runs still running far longer than their job's learned baseline.
    pub const DURATION_ANOMALIES: &str = "DurationAnomalies";
    pub const ATTEMPTS_LOST: &str = "AttemptsLost";
    pub const RUNS_REDISPATCHED: &str = "RunsRedispatched";
    pub const EVENTS_REPUBLISHED: &str = "EventsRepublished";
    /// Deliveries to an alert channel (Slack, PagerDuty) given up: refused, or out of tries.
    pub const ALERTS_UNDELIVERED: &str = "AlertsUndelivered";
    /// Messages the worker took from the dead-letter queue (the dead-letter alarm's input: the
    /// queue itself is drained by the worker, so its depth stays 0).
    pub const RUNS_DEAD_LETTERED: &str = "RunsDeadLettered";
    /// Actual start minus scheduled instant, per attempt started.
    pub const DISPATCH_LAG: &str = "DispatchLag";
    pub const RUN_DURATION: &str = "RunDuration";
    pub const TICK_DURATION: &str = "TickDuration";
    pub const JOBS_PER_TICK: &str = "JobsPerTick";
    /// Instants the tick's catch-up dropped (missed during an outage, not run by the policy).
    pub const INSTANTS_MISSED: &str = "InstantsMissed";
    /// Instants passed because their run item does not decode.
    pub const INSTANTS_UNCLAIMABLE: &str = "InstantsUnclaimable";
    /// Minutes the tick's watermark is behind the clock (0 when healthy).
    pub const SCHEDULER_MINUTES_BEHIND: &str = "SchedulerMinutesBehind";

    /// Every metric with its unit: the families `/metrics` names from the start, before any
    /// has a value.
    pub const ALL: [(&str, super::Unit); 23] = {
        use super::Unit::{Count, Milliseconds};
        [
            (RUNS_CLAIMED, Count),
            (RUNS_DISPATCHED, Count),
            (RUNS_SKIPPED, Count),
            (RUNS_STARTED, Count),
            (RUNS_SUCCEEDED, Count),
            (RUNS_FAILED, Count),
            (RUNS_RETRIED, Count),
            (RUNS_TIMED_OUT, Count),
            (SLA_MISSED, Count),
            (LATE_STARTS, Count),
            (DURATION_ANOMALIES, Count),
            (ATTEMPTS_LOST, Count),
            (RUNS_REDISPATCHED, Count),
            (EVENTS_REPUBLISHED, Count),
            (ALERTS_UNDELIVERED, Count),
            (RUNS_DEAD_LETTERED, Count),
            (DISPATCH_LAG, Milliseconds),
            (RUN_DURATION, Milliseconds),
            (TICK_DURATION, Milliseconds),
            (JOBS_PER_TICK, Count),
            (INSTANTS_MISSED, Count),
            (INSTANTS_UNCLAIMABLE, Count),
            (SCHEDULER_MINUTES_BEHIND, Count),
        ]
    };
}

/// A CloudWatch unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Milliseconds,
    None,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Count => "Count",
            Unit::Milliseconds => "Milliseconds",
            Unit::None => "None",
        }
    }
}

/// EMF allows at most this many values per metric in one record.
pub const MAX_VALUES: usize = 100;

/// One EMF record under construction.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    at: DateTime<Utc>,
    function: &'static str,
    metrics: Vec<(&'static str, Unit, Vec<f64>)>,
    properties: Map<String, Value>,
}

impl Record {
    pub fn new(function: &'static str, at: DateTime<Utc>) -> Self {
        Record { at, function, metrics: Vec::new(), properties: Map::new() }
    }

    /// Adds a count (kept even when zero, so alarms see a healthy zero rather than no data).
    pub fn count(self, name: &'static str, n: usize) -> Self {
        self.values(name, Unit::Count, vec![n as f64])
    }

    /// Adds a value, or up to [`MAX_VALUES`] of them (the rest are left out).
    pub fn values(mut self, name: &'static str, unit: Unit, mut values: Vec<f64>) -> Self {
        values.truncate(MAX_VALUES);
        if let Some(existing) = self.metrics.iter_mut().find(|(n, _, _)| *n == name) {
            existing.2.extend(values);
            existing.2.truncate(MAX_VALUES);
        } else {
            self.metrics.push((name, unit, values));
        }
        self
    }

    pub fn function(&self) -> &'static str {
        self.function
    }

    /// The metrics with their values, as added.
    pub fn metrics(&self) -> impl Iterator<Item = (&'static str, Unit, &[f64])> + '_ {
        self.metrics.iter().map(|(name, unit, values)| (*name, *unit, values.as_slice()))
    }

    /// A searchable property that is not a dimension (a run id, a job id).
    pub fn property(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.properties.insert(name.to_string(), value.into());
        self
    }

    /// The record as EMF JSON; a metric without values is left out.
    pub fn to_json(&self) -> Value {
        let metrics: Vec<&(&str, Unit, Vec<f64>)> = self.metrics.iter().filter(|m| !m.2.is_empty()).collect();
        let mut root = self.properties.clone();
        root.insert("Function".into(), json!(self.function));
        for (name, _, values) in &metrics {
            let value = if values.len() == 1 { json!(values[0]) } else { json!(values) };
            root.insert((*name).to_string(), value);
        }
        let definitions: Vec<Value> =
            metrics.iter().map(|(name, unit, _)| json!({"Name": name, "Unit": unit.as_str()})).collect();
        root.insert(
            "_aws".into(),
            json!({
                "Timestamp": self.at.timestamp_millis(),
                "CloudWatchMetrics": [{
                    "Namespace": NAMESPACE,
                    "Dimensions": [["Function"]],
                    "Metrics": definitions,
                }],
            }),
        );
        Value::Object(root)
    }

    /// Writes the record to stdout, where the Lambda runtime ships it to CloudWatch Logs.
    pub fn emit(&self) {
        println!("{}", self.to_json());
    }
}

/// The units CloudWatch accepts.
const UNITS: [&str; 27] = [
    "Seconds",
    "Microseconds",
    "Milliseconds",
    "Bytes",
    "Kilobytes",
    "Megabytes",
    "Gigabytes",
    "Terabytes",
    "Bits",
    "Kilobits",
    "Megabits",
    "Gigabits",
    "Terabits",
    "Percent",
    "Count",
    "Bytes/Second",
    "Kilobytes/Second",
    "Megabytes/Second",
    "Gigabytes/Second",
    "Terabytes/Second",
    "Bits/Second",
    "Kilobits/Second",
    "Megabits/Second",
    "Gigabits/Second",
    "Terabits/Second",
    "Count/Second",
    "None",
];

/// Checks a record against the EMF specification: the `_aws` metadata with a millisecond
/// `Timestamp` and `CloudWatchMetrics` directives, each with a `Namespace`, `Dimensions` whose
/// keys are top-level strings, and `Metrics` whose names are top-level numbers (or arrays of at
/// most 100 numbers) with a valid unit. Returns the first violation.
pub fn validate(record: &Value) -> Result<(), String> {
    let root = record.as_object().ok_or("a record is a JSON object")?;
    let aws = root.get("_aws").and_then(Value::as_object).ok_or("_aws missing")?;
    aws.get("Timestamp")
        .and_then(Value::as_i64)
        .filter(|t| *t > 0)
        .ok_or("_aws.Timestamp must be epoch ms")?;
    let directives =
        aws.get("CloudWatchMetrics").and_then(Value::as_array).ok_or("_aws.CloudWatchMetrics missing")?;
    if directives.is_empty() {
        return Err("_aws.CloudWatchMetrics is empty".into());
    }
    for directive in directives {
        validate_directive(root, directive)?;
    }
    Ok(())
}

/// Checks one `CloudWatchMetrics` directive of the record `root`.
fn validate_directive(root: &serde_json::Map<String, Value>, d: &Value) -> Result<(), String> {
    let namespace = d.get("Namespace").and_then(Value::as_str).ok_or("Namespace missing")?;
    if namespace.is_empty() || namespace.len() > 255 {
        return Err("Namespace must be 1-255 characters".into());
    }
    let dimensions = d.get("Dimensions").and_then(Value::as_array).ok_or("Dimensions missing")?;
    for set in dimensions {
        let set = set.as_array().ok_or("a dimension set is an array")?;
        if set.len() > 30 {
            return Err("at most 30 dimensions per set".into());
        }
        for key in set {
            let key = key.as_str().ok_or("a dimension is a name")?;
            root.get(key)
                .and_then(Value::as_str)
                .ok_or(format!("dimension {key} is not a top-level string"))?;
        }
    }
    let metrics = d.get("Metrics").and_then(Value::as_array).ok_or("Metrics missing")?;
    if metrics.len() > 100 {
        return Err("at most 100 metrics per directive".into());
    }
    for m in metrics {
        let name = m.get("Name").and_then(Value::as_str).ok_or("a metric has no Name")?;
        if let Some(unit) = m.get("Unit") {
            let unit = unit.as_str().ok_or("Unit is text")?;
            if !UNITS.contains(&unit) {
                return Err(format!("{name}: unit {unit} is not a CloudWatch unit"));
            }
        }
        match root.get(name) {
            Some(Value::Number(_)) => {}
            Some(Value::Array(values))
                if values.len() <= MAX_VALUES && values.iter().all(Value::is_number) => {}
            _ => return Err(format!("metric {name} has no top-level number (or array of at most 100)")),
        }
    }

    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_follow_the_specification() {
        let at: DateTime<Utc> = "2026-11-22T10:00:00Z".parse().unwrap();
        let record = Record::new("worker", at)
            .count(names::RUNS_STARTED, 2)
            .values(names::DISPATCH_LAG, Unit::Milliseconds, vec![120.0, 80.0])
            .values(names::RUN_DURATION, Unit::Milliseconds, Vec::new())
            .property("run_id", "x")
            .to_json();
        validate(&record).unwrap();
        assert_eq!(record["_aws"]["Timestamp"], at.timestamp_millis());
        assert_eq!(record["Function"], "worker");
        assert_eq!(record[names::RUNS_STARTED], 2.0);
        assert_eq!(record[names::DISPATCH_LAG], json!([120.0, 80.0]));
        assert!(record.get(names::RUN_DURATION).is_none(), "a metric without values is left out");
        let defined: Vec<&str> = record["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["Name"].as_str().unwrap())
            .collect();
        assert_eq!(defined, [names::RUNS_STARTED, names::DISPATCH_LAG]);
    }

    #[test]
    fn values_are_capped_at_a_hundred() {
        let record = Record::new("tick", Utc::now()).values("X", Unit::Count, vec![1.0; 250]).to_json();
        assert_eq!(record["X"].as_array().unwrap().len(), MAX_VALUES);
        validate(&record).unwrap();
    }

    #[test]
    fn the_validator_rejects_what_cloudwatch_would() {
        let good = Record::new("tick", Utc::now()).count("A", 1).to_json();
        let mut no_aws = good.clone();
        no_aws.as_object_mut().unwrap().remove("_aws");
        assert!(validate(&no_aws).is_err());
        let mut no_value = good.clone();
        no_value.as_object_mut().unwrap().remove("A");
        assert!(validate(&no_value).is_err());
        let mut bad_unit = good.clone();
        bad_unit["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Unit"] = json!("Minutes");
        assert!(validate(&bad_unit).is_err());
        let mut no_dimension = good;
        no_dimension.as_object_mut().unwrap().remove("Function");
        assert!(validate(&no_dimension).is_err());
    }
}
