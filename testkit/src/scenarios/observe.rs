//! What operators see, over any harness: `/metrics` (authenticated) parses as Prometheus text
//! and counts what the worker, the tick and the watchdog did; every log line written while a
//! run is handled carries its `run_id`, `job_id` and `attempt`; the dashboard is public and the
//! API behind it is not.

use crate::api::ALICE;
use crate::harness::Harness;
use http::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;
use sundial_domain::run::RunState;

/// A strict reader of the Prometheus text format (0.0.4): every family declared by `# TYPE`
/// before its samples, sample names belonging to their family, labels well formed, values
/// numbers. Returns sample name with labels → value.
pub fn parse_prometheus(text: &str) -> Result<HashMap<String, f64>, String> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let at = |why: &str| format!("line {}: {why}: {line}", n + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("HELP"), Some(_), _) => {}
                (Some("TYPE"), Some(name), Some(kind)) => {
                    if !["counter", "gauge", "summary", "histogram", "untyped"].contains(&kind) {
                        return Err(at("unknown type"));
                    }
                    types.insert(name.to_string(), kind.to_string());
                }
                _ => return Err(at("malformed comment")),
            }
            continue;
        }
        let (series, value) = line.rsplit_once(' ').ok_or_else(|| at("no value"))?;
        let value: f64 = value.parse().map_err(|_| at("value is not a number"))?;
        let name = series.split('{').next().unwrap();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            return Err(at("bad metric name"));
        }
        if let Some(labels) = series.strip_prefix(name)
            && !labels.is_empty()
        {
            let inner =
                labels.strip_prefix('{').and_then(|l| l.strip_suffix('}')).ok_or_else(|| at("bad labels"))?;
            for pair in inner.split(',') {
                let (k, v) = pair.split_once('=').ok_or_else(|| at("bad label"))?;
                if k.is_empty() || !(v.starts_with('"') && v.ends_with('"') && v.len() >= 2) {
                    return Err(at("bad label"));
                }
            }
        }
        let family = types
            .keys()
            .find(|f| {
                name == f.as_str()
                    || name.strip_prefix(f.as_str()).is_some_and(|s| ["_sum", "_count"].contains(&s))
            })
            .ok_or_else(|| at("sample before its # TYPE"))?;
        if types[family] != "summary" && name != family {
            return Err(at("suffix on a non-summary"));
        }
        samples.insert(series.to_string(), value);
    }
    Ok(samples)
}

/// A run triggered and worked to its end; then a tick and a watchdog pass: the metrics count
/// each, and the run's log lines carry its identity.
pub async fn metrics_and_logs_show_what_happened<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let api = deployment.api();
    // Before anything happened, every family is named (a dashboard's queries find them).
    let fresh = api.get(ALICE, "/metrics").await;
    let fresh = fresh.body.as_str().unwrap_or_default().to_string();
    parse_prometheus(&fresh).unwrap_or_else(|e| panic!("{e}\n{fresh}"));
    for family in [
        "sundial_runs_claimed_total counter",
        "sundial_dispatch_lag_milliseconds summary",
        "sundial_scheduler_minutes_behind gauge",
    ] {
        assert!(fresh.contains(&format!("# TYPE {family}\n")), "{family}: {fresh}");
    }
    let job = json!({"name": "observed", "schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": deployment.target_url()}});
    let id = api.create_job(ALICE, &job).await;
    let run_id = deployment.trigger(&id).await;
    assert_eq!(deployment.drive(&run_id, 60).await.state, RunState::Succeeded);
    deployment.use_cases().tick.run().await.unwrap();
    deployment.use_cases().watchdog.run().await.unwrap();

    assert_eq!(api.get("", "/metrics").await.status, StatusCode::UNAUTHORIZED);
    let reply = api.get(ALICE, "/metrics").await;
    assert_eq!(reply.status, StatusCode::OK);
    let kind = reply.headers["content-type"].to_str().unwrap();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    let text = reply.body.as_str().unwrap();
    let samples = parse_prometheus(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(samples["sundial_runs_started_total{function=\"worker\"}"], 1.0, "{text}");
    assert_eq!(samples["sundial_runs_succeeded_total{function=\"worker\"}"], 1.0, "{text}");
    assert_eq!(samples["sundial_dispatch_lag_milliseconds_count{function=\"worker\"}"], 1.0, "{text}");
    assert_eq!(samples["sundial_run_duration_milliseconds_count{function=\"worker\"}"], 1.0, "{text}");
    assert!(samples.contains_key("sundial_tick_duration_milliseconds_sum{function=\"tick\"}"), "{text}");
    assert_eq!(samples["sundial_scheduler_minutes_behind{function=\"watchdog\"}"], 0.0, "{text}");

    // Every line about the run carries its run, job and attempt.
    let run_text = run_id.to_string();
    let lines: Vec<Value> = crate::logs::captured()
        .lines()
        .filter(|l| l.contains(&run_text))
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let started =
        lines.iter().find(|l| l["fields"]["message"] == "attempt started").expect("an attempt-started line");
    assert_eq!(started["span"]["run_id"], run_text.as_str());
    assert_eq!(started["span"]["job_id"], id.as_str());
    assert_eq!(started["span"]["attempt"], 1);
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "attempt ended" && l["fields"]["state"] == "SUCCEEDED")
    );
    // The capacity log (DynamoDB's answers only) is off unless configured.
    assert!(!lines.iter().any(|l| l["fields"]["message"] == "dynamodb capacity"), "{lines:?}");
}

/// The dashboard's page and assets are public (the page asks for a key); `/` leads to it.
pub async fn the_dashboard_is_public_and_the_api_behind_it_is_not<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let api = deployment.api();
    for (path, kind) in [
        ("/ui/index.html", "text/html"),
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let reply = api.get("", path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert!(reply.headers["content-type"].to_str().unwrap().starts_with(kind), "{path}");
    }
    let root = api.get("", "/").await;
    assert_eq!(root.status, StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(root.headers["location"], "/ui/index.html");
    assert_eq!(api.get("", "/v1/jobs").await.status, StatusCode::UNAUTHORIZED);
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! observe_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => observe {
            metrics_and_logs_show_what_happened,
            the_dashboard_is_public_and_the_api_behind_it_is_not,
        });
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prometheus_reader_rejects_malformed_text() {
        assert!(parse_prometheus("# TYPE a counter\na{x=\"1\"} 2\n").is_ok());
        assert!(parse_prometheus("a 1\n").is_err(), "no TYPE");
        assert!(parse_prometheus("# TYPE a counter\na{x=1} 2\n").is_err(), "unquoted label");
        assert!(parse_prometheus("# TYPE a counter\na two\n").is_err(), "value");
        assert!(parse_prometheus("# TYPE a counter\na_sum 1\n").is_err(), "suffix on a counter");
    }
}
