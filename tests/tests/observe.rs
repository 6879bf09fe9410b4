//! What operators see: `/metrics` (authenticated) parses as Prometheus text and counts what the
//! worker, the tick and the watchdog did; every log line written while a run is handled carries
//! its `run_id`, `job_id` and `attempt`; a run's local log lines come back from the API.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::http::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;
use sundial_domain::run::RunId;
use sundial_tests::{ALICE, Answer, Stack, TargetServer};

/// A strict reader of the Prometheus text format (0.0.4): every family declared by `# TYPE`
/// before its samples, sample names belonging to their family, labels well formed, values
/// numbers. Returns sample name with labels → value.
fn parse_prometheus(text: &str) -> Result<HashMap<String, f64>, String> {
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
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                let inner = labels
                    .strip_prefix('{')
                    .and_then(|l| l.strip_suffix('}'))
                    .ok_or_else(|| at("bad labels"))?;
                for pair in inner.split(',') {
                    let (k, v) = pair.split_once('=').ok_or_else(|| at("bad label"))?;
                    if k.is_empty() || !(v.starts_with('"') && v.ends_with('"') && v.len() >= 2) {
                        return Err(at("bad label"));
                    }
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

#[tokio::test]
async fn metrics_and_logs_show_what_happened() {
    let stack = Stack::new().await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let job = json!({"name": "observed", "schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": target.url}});
    let id = stack.api.create_job(ALICE, &job).await;
    let reply = stack.api.post(ALICE, &format!("/v1/jobs/{id}/trigger"), &json!({})).await;
    let run_id = RunId::parse(reply.body["id"].as_str().unwrap()).unwrap();
    let s = &stack.services;
    for _ in 0..50 {
        sundial_app::worker::poll::poll_once(
            &s.use_cases.worker,
            s.ports.queue.as_ref(),
            s.inbox.as_ref(),
            "observer",
            1,
        )
        .await
        .unwrap();
        let run = s.ports.runs.get(&run_id.job_id, &run_id.key).await.unwrap().unwrap();
        if run.state.is_terminal() {
            break;
        }
    }
    s.use_cases.tick.run().await.unwrap();
    s.use_cases.watchdog.run().await.unwrap();

    let refused = stack.api.get("", "/metrics").await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let server = stack.serve().await;
    let response =
        reqwest::Client::new().get(format!("{server}/metrics")).bearer_auth(ALICE).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    let text = response.text().await.unwrap();
    let samples = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(samples["sundial_runs_started_total{function=\"worker\"}"], 1.0, "{text}");
    assert_eq!(samples["sundial_runs_succeeded_total{function=\"worker\"}"], 1.0, "{text}");
    assert_eq!(samples["sundial_dispatch_lag_milliseconds_count{function=\"worker\"}"], 1.0, "{text}");
    assert_eq!(samples["sundial_run_duration_milliseconds_count{function=\"worker\"}"], 1.0, "{text}");
    assert!(samples.contains_key("sundial_tick_duration_milliseconds_sum{function=\"tick\"}"), "{text}");
    assert_eq!(samples["sundial_scheduler_minutes_behind{function=\"watchdog\"}"], 0.0, "{text}");

    // Every line about the run carries its run, job and attempt.
    let run_text = run_id.to_string();
    let lines: Vec<Value> = sundial_tests::logs()
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
    // The capacity log is off unless configured.
    assert!(!sundial_tests::logs().contains("dynamodb capacity"));
}

#[test]
fn the_prometheus_reader_rejects_malformed_text() {
    assert!(parse_prometheus("# TYPE a counter\na{x=\"1\"} 2\n").is_ok());
    assert!(parse_prometheus("a 1\n").is_err(), "no TYPE");
    assert!(parse_prometheus("# TYPE a counter\na{x=1} 2\n").is_err(), "unquoted label");
    assert!(parse_prometheus("# TYPE a counter\na two\n").is_err(), "value");
    assert!(parse_prometheus("# TYPE a counter\na_sum 1\n").is_err(), "suffix on a counter");
}

/// The dashboard's page and assets are public (the page asks for a key); `/` leads to it.
#[tokio::test]
async fn the_dashboard_is_public_and_the_api_behind_it_is_not() {
    let stack = Stack::new().await;
    for (path, kind) in [
        ("/ui/index.html", "text/html"),
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let reply = stack.api.get("", path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert!(reply.headers["content-type"].to_str().unwrap().starts_with(kind), "{path}");
    }
    let root = stack.api.get("", "/").await;
    assert_eq!(root.status, StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(root.headers["location"], "/ui/index.html");
    assert_eq!(stack.api.get("", "/v1/jobs").await.status, StatusCode::UNAUTHORIZED);
}

/// With `SUNDIAL_CAPACITY_LOG=1` every DynamoDB call logs the units DynamoDB reports, by table
/// and index, and the lines about a run carry its id, so a run's cost can be summed.
#[tokio::test]
async fn the_capacity_log_names_the_table_index_and_run_of_every_units_spent() {
    let stack = Stack::with(sundial_tests::Options {
        vars: HashMap::from([("SUNDIAL_CAPACITY_LOG", "1".to_string())]),
        clock: None,
    })
    .await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let job = json!({"name": "costed", "schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": target.url}});
    let id = stack.api.create_job(ALICE, &job).await;
    let run_id = stack.trigger(&id).await;
    let s = &stack.services;
    for _ in 0..50 {
        sundial_app::worker::poll::poll_once(
            &s.use_cases.worker,
            s.ports.queue.as_ref(),
            s.inbox.as_ref(),
            "costed",
            1,
        )
        .await
        .unwrap();
        if stack.run(&run_id).await.state.is_terminal() {
            break;
        }
    }
    assert_eq!(stack.run(&run_id).await.state, sundial_domain::run::RunState::Succeeded);

    let lines: Vec<Value> = sundial_tests::logs()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["fields"]["message"] == "dynamodb capacity")
        .collect();
    let field = |l: &Value, name: &str| l["fields"][name].as_str().unwrap_or_default().to_string();
    let units = |l: &Value| l["fields"]["units"].as_f64().unwrap_or_default();
    let jobs_table = &stack.resources.jobs_table;
    let runs_table = &stack.resources.runs_table;
    // Creating the job wrote the jobs table and its due index.
    assert!(
        lines
            .iter()
            .any(|l| field(l, "table") == *jobs_table && field(l, "kind") == "write" && units(l) >= 1.0),
        "no write to {jobs_table} in {lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| field(l, "table") == *jobs_table && !field(l, "index").is_empty() && units(l) > 0.0),
        "no index write on {jobs_table} in {lines:#?}"
    );
    // The worker's writes of the run name the run.
    let of_run: Vec<&Value> =
        lines.iter().filter(|l| l["span"]["run_id"] == run_id.to_string().as_str()).collect();
    assert!(
        of_run
            .iter()
            .any(|l| field(l, "table") == *runs_table && field(l, "kind") == "write" && units(l) >= 1.0),
        "no write of the run in {of_run:#?}"
    );
    assert!(of_run.iter().any(|l| field(l, "kind") == "read"), "no read of the run in {of_run:#?}");
    // Each line says which operation spent it; all of them were reported by the emulator.
    for line in &lines {
        assert!(!field(line, "operation").is_empty(), "{line}");
        assert_eq!(line["fields"]["reported"], true, "{line}");
    }
}
