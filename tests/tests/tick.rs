//! The minute tick against the emulator, on a simulated clock: the tick's scenarios written once
//! for both harnesses (`sundial_testkit::scenarios::tick`: racing ticks, a crash between claim
//! and send, changed jobs not re-armed, catch-up, pause and `end_at`, DST), and what only the
//! real tables show: the index read a batch at a time, trigger, backfill.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use chrono::{DateTime, Duration, Utc};
use http::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use sundial_domain::clock::ManualClock;
use sundial_domain::ports::store::DueIndex;
use sundial_domain::run::Run;
use sundial_testkit::harness::Harness;
use sundial_testkit::scenarios::tick::one_time_jobs;
use sundial_tests::{ALICE, Call, Stack};

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn http_job(name: &str, schedule: Value) -> Value {
    json!({"name": name, "schedule": schedule, "target": {"type": "http", "url": "http://127.0.0.1:9/"}})
}

/// Every run in the stack's runs table.
async fn all_runs(stack: &Stack) -> Vec<Value> {
    let mut count = Vec::new();
    let mut start = None;
    loop {
        let out = stack
            .dynamo
            .scan()
            .table_name(&stack.resources.runs_table)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        for item in out.items() {
            count.push(json!({
                "job_id": item["job_id"].as_s().unwrap(),
                "run_key": item["run_key"].as_s().unwrap(),
                "state": item["state"].as_s().unwrap(),
            }));
        }
        start = out.last_evaluated_key;
        if start.is_none() {
            return count;
        }
    }
}

/// Forces a run into RUNNING at attempt 1, as a worker would (the worker is not part of this).
async fn force_running(stack: &Stack, run: &Run) {
    use aws_sdk_dynamodb::types::AttributeValue::{N, S};
    stack
        .dynamo
        .update_item()
        .table_name(&stack.resources.runs_table)
        .key("job_id", S(run.job_id.to_string()))
        .key("run_key", S(run.key.encode()))
        .update_expression("SET #st = :r, attempt = :one")
        .expression_attribute_names("#st", "state")
        .expression_attribute_values(":r", S("RUNNING".into()))
        .expression_attribute_values(":one", N("1".into()))
        .send()
        .await
        .unwrap();
    // As its worker would have: the run passed its job's start fence first.
    let fences = &stack.services.ports.fences;
    let holder = fences.get(&run.job_id).await.unwrap().map(|fence| fence.holder);
    fences.take(&run.job_id, holder.as_ref(), &run.key, holder.as_ref()).await.unwrap();
}

/// The due index holds keys only, and the tick reads the jobs it names from the table a batch
/// at a time (a minute of many large jobs is never held whole): a partition of more than one
/// batch read (100 keys) is named whole, and a job whose item left the due set after its entry
/// was read (its next run gone, as a pause or its last instant takes it) is not claimed, though
/// the index still names it.
#[tokio::test]
async fn the_tick_reads_the_jobs_the_index_names_from_the_table() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:50:00Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_DUE_SHARDS", "1")]).await;
    let at = t("2030-01-01T12:00:00Z");
    stack.import_jobs(&one_time_jobs(101, at)).await;
    let store = sundial_aws::dynamo::DynamoJobStore::new(
        stack.dynamo.clone(),
        &stack.resources.jobs_table,
        &stack.resources.runs_table,
        1,
        sundial_aws::metrics::Ledger::new(),
    );
    let bucket = sundial_domain::due_index::due_bucket("any job", at, 1);
    let due = store.due_ids(&bucket).await.unwrap();
    assert_eq!(due.len(), 101, "every job of the partition");

    let gone = due[0].to_string();
    stack
        .dynamo
        .update_item()
        .table_name(&stack.resources.jobs_table)
        .key("job_id", aws_sdk_dynamodb::types::AttributeValue::S(gone.clone()))
        .update_expression("REMOVE next_run_at")
        .send()
        .await
        .unwrap();
    assert!(stack.due_index_ids().await.contains(&gone), "the index still names it");
    clock.set(at - Duration::seconds(30));
    let report = stack.services.use_cases.tick.run().await.unwrap();
    assert_eq!(report.claims.claimed, 100, "{report:?}");
    let runs = all_runs(&stack).await;
    assert_eq!(runs.len(), 100);
    assert!(
        runs.iter().all(|r| r["job_id"].as_str() != Some(gone.as_str())),
        "a job without a next run is not due"
    );
}

/// Trigger creates a manual run dispatched now; under `forbid` with an active run it is a 409
/// naming that run; a retried trigger with the same Idempotency-Key is the same run.
#[tokio::test]
async fn trigger_obeys_the_concurrency_policy() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let mut job = http_job("forbidden", json!({"cron": "0 0 * * *"}));
    job["concurrency"] = json!("forbid");
    let id = stack.api.create_job(ALICE, &job).await;

    let trigger = |key: &'static str| {
        Call::new(Method::POST, format!("/v1/jobs/{id}/trigger"))
            .key(ALICE)
            .header("idempotency-key", key)
            .json(&json!({}))
    };
    let first = stack.api.call(trigger("t-1")).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.body);
    assert_eq!(first.body["kind"], "manual");
    assert_eq!(first.body["state"], "QUEUED");
    let retried = stack.api.call(trigger("t-1")).await;
    assert_eq!(retried.body["id"], first.body["id"]);
    assert_eq!(stack.runs_of(&id).await.len(), 1);
    assert_eq!(stack.queue_depth().await, 1);

    let runs = stack.runs_of(&id).await;
    force_running(&stack, &runs[0]).await;
    let refused = stack.api.call(trigger("t-2")).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "run_active");
    assert!(refused.body["error"]["message"].as_str().unwrap().contains(first.body["id"].as_str().unwrap()));
    assert_eq!(stack.runs_of(&id).await.len(), 1);
}

/// Backfill claims every scheduled instant in the range without a run; a second backfill over
/// the same range runs nothing new.
#[tokio::test]
async fn backfill_runs_nothing_twice() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:30:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let id = stack.api.create_job(ALICE, &http_job("hourly", json!({"cron": "0 * * * *"}))).await;
    let range = json!({"from": "2030-01-01T07:00:00Z", "to": "2030-01-01T11:00:00Z"});
    let first = stack.api.post(ALICE, &format!("/v1/jobs/{id}/backfill"), &range).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.body);
    assert_eq!(first.body["runs"].as_array().unwrap().len(), 5);
    assert_eq!(first.body["existing"], 0);
    let second = stack.api.post(ALICE, &format!("/v1/jobs/{id}/backfill"), &range).await;
    assert_eq!(second.body["runs"], json!([]));
    assert_eq!(second.body["existing"], 5);
    assert_eq!(stack.runs_of(&id).await.len(), 5);
    assert_eq!(stack.queue_depth().await, 5);

    let bad = stack
        .api
        .post(
            ALICE,
            &format!("/v1/jobs/{id}/backfill"),
            &json!({"from": "2030-01-01T11:00:00Z", "to": "2030-01-01T07:00:00Z"}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad.error_field(), "to");
}

// The tick's scenarios written once for both harnesses: also in memory (`shared/app/tests`).
sundial_testkit::tick_scenarios!(Stack);
