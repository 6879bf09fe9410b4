//! Workflows end to end against the emulator: the diamond A → B, A → C, (B, C) → D through the
//! HTTP API, on a schedule (the tick on a manual clock) and by a manual trigger, with a real
//! loopback target that records which job it was called for and for which scheduled instant;
//! and the graph checks, the graph endpoint and the refused deletion as the API answers them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use chrono::{DateTime, Utc};
use http::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use sundial_app::worker::poll::poll_once;
use sundial_domain::clock::ManualClock;
use sundial_tests::{ALICE, Answer, Stack, TargetServer};

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// Creates the diamond calling `url`, D naming its parents by name; returns the ids A, B, C, D.
async fn diamond(stack: &Stack, url: &str) -> [String; 4] {
    let target = json!({"type": "http", "url": url});
    let api = &stack.api;
    let a = api
        .create_job(ALICE, &json!({"name": "extract", "schedule": {"cron": "0 * * * *"}, "target": target}))
        .await;
    let b = api
        .create_job(ALICE, &json!({"name": "transform", "depends_on": ["extract"], "target": target}))
        .await;
    let c = api
        .create_job(ALICE, &json!({"name": "aggregate", "depends_on": [a.clone()], "target": target}))
        .await;
    let d = api
        .create_job(
            ALICE,
            &json!({"name": "report", "depends_on": ["transform", "aggregate"], "target": target}),
        )
        .await;
    [a, b, c, d]
}

/// The (job id, scheduled instant) of each call the target received, in the order received.
fn calls(target: &TargetServer) -> Vec<(String, String)> {
    target
        .hits()
        .iter()
        .map(|hit| {
            let header = |name: &str| hit.headers[name].to_str().unwrap().to_string();
            (header("x-sundial-job-id"), header("x-sundial-scheduled-at"))
        })
        .collect()
}

/// Polls the runs queue until `job`'s run for `instant` has ended (at most 60 s).
async fn until_ended(stack: &Stack, worker: &sundial_app::worker::Worker, job: &str, instant: DateTime<Utc>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (queue, inbox) = (stack.services.ports.queue.as_ref(), stack.services.inbox.as_ref());
        poll_once(worker, queue, inbox, "test-worker", 1).await.unwrap();
        let runs = stack.runs_of(job).await;
        if runs.iter().any(|r| r.scheduled_at() == instant && r.state.is_terminal()) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{job} has not ended its run for {instant}");
    }
}

/// Asserts the order of the calls for one instant: B and C after A, D after both, each once.
fn assert_order(calls: &[(String, String)], [a, b, c, d]: &[String; 4], instant: &str) {
    let at = |job: &str| {
        let positions: Vec<usize> = calls
            .iter()
            .enumerate()
            .filter(|(_, (j, s))| j == job && s.starts_with(instant))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(positions.len(), 1, "one call of {job} for {instant}: {calls:?}");
        positions[0]
    };
    assert!(at(a) < at(b) && at(a) < at(c), "B and C after A for {instant}");
    assert!(at(b) < at(d) && at(c) < at(d), "D after B and C for {instant}");
}

#[tokio::test]
async fn a_diamond_runs_in_order_on_its_schedule_and_by_a_trigger() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:58:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let ids = diamond(&stack, &target.url).await;
    let worker = &stack.services.use_cases.worker;

    for hour in ["12", "13"] {
        let instant = t(&format!("2030-01-01T{hour}:00:00Z"));
        clock.set(instant);
        stack.services.use_cases.tick.run().await.unwrap();
        until_ended(&stack, worker, &ids[3], instant).await;
        assert_order(&calls(&target), &ids, &format!("2030-01-01T{hour}:00:00"));
    }

    // A manual trigger of the root: the whole diamond follows under the trigger's key.
    clock.set(t("2030-01-01T13:20:00Z"));
    let run = stack.trigger(&ids[0]).await;
    until_ended(&stack, worker, &ids[3], run.key.instant).await;
    assert_order(&calls(&target), &ids, "2030-01-01T13:20:00");
    let reports = stack.runs_of(&ids[3]).await;
    assert_eq!(reports.len(), 3, "D once per instant and once for the trigger");
    assert!(reports.iter().all(|r| r.state == sundial_domain::run::RunState::Succeeded));
    assert_eq!(reports[2].key, run.key, "D's run for the trigger has its key");
}

#[tokio::test]
async fn the_api_checks_the_graph_and_shows_it() {
    let stack = Stack::new().await;
    let api = &stack.api;
    let [a, b, c, d] = diamond(&stack, "http://127.0.0.1:9/hook").await;

    let graph = api.get(ALICE, &format!("/v1/jobs/{b}/graph")).await;
    assert_eq!(graph.status, StatusCode::OK, "{}", graph.body);
    assert_eq!(graph.body["nodes"].as_array().unwrap().len(), 4);
    assert_eq!(graph.body["edges"].as_array().unwrap().len(), 4);
    let report = graph.body["nodes"].as_array().unwrap().iter().find(|n| n["id"] == json!(d)).unwrap();
    assert_eq!(report["schedule"], "after transform, aggregate");
    let got = api.get(ALICE, &format!("/v1/jobs/{d}")).await;
    assert_eq!(got.body["depends_on"], json!([b, c]), "stored as ids");
    assert_eq!(got.body["schedule_description"], "after transform, aggregate");
    assert_eq!(got.body["next_run_at"], Value::Null);

    // A cycle on PATCH: 422 naming it, nothing written.
    let before = api.get(ALICE, &format!("/v1/jobs/{a}")).await.etag().to_string();
    let cycle = api
        .patch(ALICE, &format!("/v1/jobs/{a}"), &json!({"schedule": null, "depends_on": ["report"]}))
        .await;
    assert_eq!(cycle.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", cycle.body);
    assert_eq!(cycle.error_field(), "depends_on");
    let message = cycle.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("extract -> report -> ") && message.ends_with("-> extract"), "{message}");
    assert_eq!(api.get(ALICE, &format!("/v1/jobs/{a}")).await.etag(), before, "nothing written");

    // A schedule beside depends_on, an unknown parent, another owner's job: 422.
    let both = json!({"name": "x", "depends_on": ["extract"], "schedule": {"cron": "0 * * * *"},
                      "target": {"type": "http", "url": "http://127.0.0.1:9/hook"}});
    let reply = api.post(ALICE, "/v1/jobs", &both).await;
    assert_eq!((reply.status, reply.error_field()), (StatusCode::UNPROCESSABLE_ENTITY, "schedule"));
    let unknown = json!({"name": "x", "depends_on": ["nope"], "target": {"type": "http", "url": "http://127.0.0.1:9/hook"}});
    let reply = api.post(ALICE, "/v1/jobs", &unknown).await;
    assert_eq!((reply.status, reply.error_field()), (StatusCode::UNPROCESSABLE_ENTITY, "depends_on"));
    let theirs =
        json!({"name": "x", "depends_on": [a], "target": {"type": "http", "url": "http://127.0.0.1:9/hook"}});
    let reply = api.post(sundial_tests::BOB, "/v1/jobs", &theirs).await;
    assert_eq!((reply.status, reply.error_field()), (StatusCode::UNPROCESSABLE_ENTITY, "depends_on"));

    // A parent with children is not deleted: 409 naming them.
    let refused = api.delete(ALICE, &format!("/v1/jobs/{b}")).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "has_children");
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("report"));
    assert_eq!(api.delete(ALICE, &format!("/v1/jobs/{d}")).await.status, StatusCode::NO_CONTENT);
    assert_eq!(api.delete(ALICE, &format!("/v1/jobs/{b}")).await.status, StatusCode::NO_CONTENT);
}

/// Two roots on the same schedule joined by a child: an edit of one root's schedule that would
/// leave the join waiting forever is 422 naming the join, and changes nothing, unless the
/// request says `?break_joins=true`.
#[tokio::test]
async fn an_edit_that_would_stop_a_join_is_refused_unless_asked_for() {
    let stack = Stack::new().await;
    let api = &stack.api;
    let target = json!({"type": "http", "url": "http://127.0.0.1:9/hook"});
    let hourly = |name: &str| json!({"name": name, "schedule": {"cron": "0 * * * *"}, "target": target});
    api.create_job(ALICE, &hourly("left")).await;
    let right = api.create_job(ALICE, &hourly("right")).await;
    api.create_job(ALICE, &json!({"name": "join", "depends_on": ["left", "right"], "target": target})).await;
    let path = format!("/v1/jobs/{right}");
    let before = api.get(ALICE, &path).await.etag().to_string();

    let edit = json!({"schedule": {"cron": "30 * * * *"}});
    let refused = api.patch(ALICE, &path, &edit).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    assert_eq!(refused.error_field(), "schedule");
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("`join` runs after left and right") && message.contains("break_joins"),
        "{message}"
    );
    let ended = api
        .patch(ALICE, &path, &json!({"schedule": {"cron": "0 * * * *", "end_at": "2031-01-01T00:00:00Z"}}))
        .await;
    assert_eq!(ended.status, StatusCode::UNPROCESSABLE_ENTITY, "an end on one root too: {}", ended.body);
    let unclear = api.patch(ALICE, &format!("{path}?break_joins=yes"), &edit).await;
    assert_eq!((unclear.status, unclear.error_field()), (StatusCode::BAD_REQUEST, "break_joins"));
    assert_eq!(api.get(ALICE, &path).await.etag(), before, "nothing written");

    let made = api.patch(ALICE, &format!("{path}?break_joins=true"), &edit).await;
    assert_eq!(made.status, StatusCode::OK, "{}", made.body);
    assert_eq!(made.body["schedule"]["cron"], "30 * * * *");
}
