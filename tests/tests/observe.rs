//! What operators see, on the emulator: the observability scenarios' smoke test
//! (`sundial_testkit::scenarios::observe`, every one of which runs in memory in
//! `functions/api/tests/scenarios.rs`), and the capacity log, which only DynamoDB's answers
//! fill.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::collections::HashMap;
use sundial_testkit::scenarios::observe;
use sundial_tests::{ALICE, Answer, Stack, TargetServer};

/// Metrics and logs: the worker, the tick and the watchdog counted, the run's lines tagged.
#[tokio::test]
async fn metrics_and_logs_show_what_happened() {
    observe::metrics_and_logs_show_what_happened::<Stack>().await;
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

    let lines: Vec<Value> = sundial_testkit::logs::captured()
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
