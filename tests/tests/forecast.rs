//! `GET /v1/forecast` against the emulator: an owner's runs per minute from the schedules (the
//! flexible window's offsets included) equal the domain's count of the same jobs, peaks name the
//! jobs, paused jobs count nothing; only an operator reads the whole stack.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use chrono::{DateTime, Duration, DurationRound, SecondsFormat, Utc};
use http::StatusCode;
use serde_json::json;
use sundial_domain::forecast::{Window, forecast};
use sundial_tests::{ALICE, BOB, Options, Stack, job};

fn text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn with(mut doc: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
    doc.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    doc
}

#[tokio::test]
async fn an_owners_forecast_counts_their_schedules_and_an_operator_reads_the_stack() {
    let stack = Stack::with(Options {
        vars: [("SUNDIAL_OPERATORS", "bob".to_string())].into(),
        ..Default::default()
    })
    .await;
    for k in 0..4 {
        let doc = with(job(&format!("hourly-{k}")), json!({"schedule": {"cron": "0 * * * *"}}));
        stack.api.create_job(ALICE, &doc).await;
    }
    let flexible = with(
        job("flexible"),
        json!({"schedule": {"cron": "0 * * * *", "timezone": "Europe/London"}, "flexible_window_s": 600}),
    );
    stack.api.create_job(ALICE, &flexible).await;
    let paused = with(job("paused"), json!({"schedule": {"cron": "* * * * *"}, "paused": true}));
    stack.api.create_job(ALICE, &paused).await;
    stack.api.create_job(BOB, &with(job("bobs"), json!({"schedule": {"cron": "30 * * * *"}}))).await;

    let from = (Utc::now() + Duration::hours(1)).duration_trunc(Duration::hours(1)).unwrap();
    let to = from + Duration::hours(3);
    let path = format!("/v1/forecast?from={}&to={}", text(from), text(to));
    let reply = stack.api.get(ALICE, &path).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let body = &reply.body;
    assert_eq!(body["scope"], "owner");
    assert_eq!(
        (body["from"].as_str(), body["to"].as_str()),
        (Some(text(from).as_str()), Some(text(to).as_str()))
    );
    assert_eq!(body["counts"].as_array().unwrap().len(), 180);
    // 4 hourly jobs and the flexible one, 3 hours; the paused job and Bob's count nothing.
    assert_eq!(body["total"], 15);
    assert!(body["busiest"].as_u64().unwrap() >= 4);
    // The busiest minute is one of the three hours' first: the flexible job's offset (drawn per
    // job and instant) lands it on one of them or on none, so which is not fixed.
    let peak = &body["peaks"][0];
    let hours: Vec<String> = (0..3).map(|h| text(from + Duration::hours(h))).collect();
    assert!(hours.iter().any(|h| peak["minute"] == h.as_str()), "{peak}");
    assert!(peak["jobs"].as_array().unwrap().iter().all(|j| j["owner"] == "alice"), "{peak}");

    // The same jobs counted by the domain, minute by minute.
    let alices = stack.services.ports.jobs.list("alice", 100, None).await.unwrap().items;
    let expected = forecast(&alices, &Window::new(from, to).unwrap()).unwrap();
    let counts: Vec<u32> =
        body["counts"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap() as u32).collect();
    assert_eq!(counts, expected.counts);

    // The whole stack: Bob is an operator, Alice is not.
    let refused = stack.api.get(ALICE, &format!("{path}&scope=stack")).await;
    assert_eq!((refused.status, refused.error_field()), (StatusCode::FORBIDDEN, "scope"));
    let all = stack.api.get(BOB, &format!("{path}&scope=stack")).await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.body);
    assert_eq!((all.body["scope"].as_str(), all.body["total"].as_u64()), (Some("stack"), Some(18)));
    let own = stack.api.get(BOB, &path).await;
    assert_eq!(own.body["total"], 3);

    // The default window: the next 24 hours.
    let default = stack.api.get(ALICE, "/v1/forecast").await;
    assert_eq!(default.status, StatusCode::OK, "{}", default.body);
    assert!(matches!(default.body["counts"].as_array().map(Vec::len), Some(1440 | 1441)));
}
