//! The worker against the emulator's real queue and real HTTP targets on loopback: retries with
//! backoff, final failure, duplicates and stale messages, a worker lost mid-attempt, dead
//! letters and redrive, the 202 + callback flow, signatures, and runs of paused jobs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use http::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use sundial_app::worker::WorkerSettings;
use sundial_app::worker::poll::poll_once;
use sundial_aws::metrics::{Ledger, TargetClients};
use sundial_aws::targets::Targets;
use sundial_domain::run::RunState;
use sundial_domain::target::{headers, sign};
use sundial_tests::{ALICE, Answer, Options, Stack, TargetServer};

fn job(name: &str, url: &str, retry: Value) -> Value {
    json!({
        "name": name,
        "schedule": {"cron": "0 0 1 1 *"},
        "target": {"type": "http", "url": url},
        "payload": {"hello": "world"},
        "retry": retry,
        "timeout_s": 5
    })
}

/// What a real HTTP target receives on each attempt of a run retried twice: one idempotency key
/// for all of them (the run's id), the run's id and the attempt's number, and the job's payload
/// as the body. (What the run records of it: `sundial_testkit::scenarios::worker`.)
#[tokio::test]
async fn every_attempt_carries_the_runs_idempotency_key_its_number_and_the_payload() {
    let stack = Stack::new().await;
    let target = TargetServer::start(|n| if n < 2 { Answer::Status(503) } else { Answer::Status(200) }).await;
    let retry = json!({"max_attempts": 5, "backoff_s": 1, "max_backoff_s": 2});
    let id = stack.api.create_job(ALICE, &job("flaky", &target.url, retry)).await;
    let run_id = stack.trigger(&id).await;
    let done = stack.drive(&stack.services.use_cases.worker, &run_id, 60).await;
    assert_eq!(done.state, RunState::Succeeded);

    let hits = target.hits();
    assert_eq!(hits.len(), 3);
    let mut spans = std::collections::BTreeSet::new();
    for (i, hit) in hits.iter().enumerate() {
        assert_eq!(hit.headers[headers::IDEMPOTENCY_KEY], run_id.to_string().as_str());
        assert_eq!(hit.headers[headers::RUN_ID], run_id.to_string().as_str());
        assert_eq!(hit.headers[headers::ATTEMPT], (i + 1).to_string().as_str());
        assert_eq!(serde_json::from_slice::<Value>(&hit.body).unwrap(), json!({"hello": "world"}));
        // W3C Trace Context: the run's one trace, each attempt a span of its own.
        let traceparent = hit.headers[headers::TRACEPARENT].to_str().unwrap();
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts.len(), 4, "{traceparent}");
        assert_eq!((parts[0], parts[3]), ("00", "01"), "{traceparent}");
        assert_eq!(parts[1], sundial_domain::trace::trace_id(&run_id.to_string()), "{traceparent}");
        spans.insert(parts[2].to_string());
    }
    assert_eq!(spans.len(), 3, "a span per attempt");
    // The worker's log lines name the run's trace.
    let trace = sundial_domain::trace::trace_id(&run_id.to_string());
    let logs = sundial_testkit::logs::captured();
    assert!(logs.contains(&format!("\"trace_id\":\"{trace}\"")), "logs carry the trace id");
    // Fields read as values: `"outcome":"failed","status":503`, not Rust's `Some(Failed)`.
    let ended: Vec<&str> =
        logs.lines().filter(|l| l.contains("attempt ended") && l.contains(&run_id.to_string())).collect();
    assert!(
        ended.iter().any(|l| l.contains("\"outcome\":\"failed\"") && l.contains("\"status\":503")),
        "{ended:?}"
    );
    assert!(!logs.contains("Some("), "a log field in Rust's debug form");
}

/// A run's trace reaches an OpenTelemetry collector (a loopback one receiving OTLP/HTTP JSON):
/// the claim's span, the trace's root, and the attempt's span, its child, both in the run's
/// trace, with the run, the job and the attempt as attributes; the target received
/// `traceparent` naming that attempt span, so its own spans join the trace.
#[tokio::test]
async fn a_runs_trace_reaches_the_collector_from_claim_to_target() {
    let received: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let seen = received.clone();
    let collector = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null));
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, collector).await });
    let mut options = Options::default();
    options.vars.insert("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
    let stack = Stack::with(options).await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let id = stack.api.create_job(ALICE, &job("traced", &target.url, json!({"max_attempts": 1}))).await;
    let run_id = stack.trigger(&id).await;
    let done = stack.drive(&stack.services.use_cases.worker, &run_id, 60).await;
    assert_eq!(done.state, RunState::Succeeded);

    let run = run_id.to_string();
    let trace = sundial_domain::trace::trace_id(&run);
    let spans: Vec<Value> = received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|body| body["resourceSpans"].as_array().cloned().unwrap_or_default())
        .flat_map(|r| r["scopeSpans"].as_array().cloned().unwrap_or_default())
        .flat_map(|s| s["spans"].as_array().cloned().unwrap_or_default())
        .filter(|span| span["traceId"] == trace.as_str())
        .collect();
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} span in {spans:?}"))
    };
    let (claim, attempt) = (named("claim"), named("attempt"));
    assert_eq!(claim["spanId"], sundial_domain::trace::span_id(&run, 0));
    assert_eq!(attempt["parentSpanId"], claim["spanId"], "the attempt is the claim's child");
    let attribute = |span: &Value, key: &str| {
        span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| a["value"]["stringValue"].clone())
    };
    assert_eq!(attribute(&attempt, "sundial.run_id"), Some(json!(run)));
    assert_eq!(attribute(&attempt, "sundial.job_id"), Some(json!(id)));
    assert_eq!(attribute(&attempt, "sundial.attempt"), Some(json!("1")));
    assert_eq!(attribute(&attempt, "sundial.outcome"), Some(json!("succeeded")));
    // The target's own work joins: its parent is the exported attempt span.
    let traceparent = target.hits()[0].headers[headers::TRACEPARENT].to_str().unwrap().to_string();
    assert_eq!(traceparent, format!("00-{trace}-{}-01", attempt["spanId"].as_str().unwrap()));
}

/// A malformed message goes to the DLQ with its reason, without a panic; redrive brings it
/// back; a run whose message was dead-lettered is recorded FAILED.
#[tokio::test]
async fn malformed_messages_are_dead_lettered_and_redrive_works() {
    let stack = Stack::new().await;
    stack
        .sqs
        .send_message()
        .queue_url(&stack.resources.runs_queue_url)
        .message_body("{this is not a run")
        .send()
        .await
        .unwrap();
    poll_once(
        &stack.services.use_cases.worker,
        stack.services.ports.queue.as_ref(),
        stack.services.inbox.as_ref(),
        "w",
        1,
    )
    .await
    .unwrap();
    assert_eq!(stack.queue_depth().await, 0);
    let dlq = stack
        .sqs
        .receive_message()
        .queue_url(&stack.resources.dlq_url)
        .message_attribute_names("All")
        .visibility_timeout(0)
        .send()
        .await
        .unwrap();
    let messages = dlq.messages.unwrap_or_default();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].body(), Some("{this is not a run"));
    let reason = messages[0].message_attributes.as_ref().unwrap()["sundial_reason"]
        .string_value()
        .unwrap()
        .to_string();
    assert!(reason.contains("undecodable"), "{reason}");
    assert!(
        sundial_testkit::logs::captured().contains("{this is not a run"),
        "the dead letter is logged in full"
    );

    assert_eq!(stack.services.inbox.redrive().await.unwrap(), 1);
    assert_eq!(stack.queue_depth().await, 1);

    // The DLQ handler on a decodable message: its run is recorded FAILED with the reason.
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let id = stack.api.create_job(ALICE, &job("dead", &target.url, json!({}))).await;
    let run_id = stack.trigger(&id).await;
    let body = json!({"job_id": run_id.job_id.to_string(), "run_key": run_id.key.encode(), "attempt": 1});
    let done =
        stack.services.use_cases.worker.dead_lettered(&body.to_string(), "received 16 times").await.unwrap();
    assert!(done.contains("FAILED"), "{done}");
    let failed = stack.run(&run_id).await;
    assert_eq!(failed.state, RunState::Failed);
    assert!(failed.reason.unwrap().contains("received 16 times"));
    assert!(target.hits().is_empty());
}

/// The body's signature verifies with the secret returned at creation, and the secret shows in
/// no other response and no log line; rotating it changes the signature.
#[tokio::test]
async fn signatures_verify_and_the_secret_stays_secret() {
    let stack = Stack::new().await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let created = stack.api.post(ALICE, "/v1/jobs", &job("signed", &target.url, json!({}))).await;
    let id = created.body["id"].as_str().unwrap().to_string();
    let secret = created.body["signing_secret"].as_str().unwrap().to_string();
    let webhook_secret = created.body["webhook_secret"].as_str().unwrap().to_string();
    let run_id = stack.trigger(&id).await;
    stack.drive(&stack.services.use_cases.worker, &run_id, 30).await;
    let hit = &target.hits()[0];
    assert_eq!(hit.headers[headers::SIGNATURE], sign(&secret, &hit.body).as_str());

    for path in [
        format!("/v1/jobs/{id}"),
        "/v1/jobs".into(),
        format!("/v1/runs/{run_id}"),
        format!("/v1/jobs/{id}/runs"),
    ] {
        let reply = stack.api.get(ALICE, &path).await;
        assert!(!reply.body.to_string().contains(&secret), "{path} shows the secret");
        assert!(!reply.body.to_string().contains(&webhook_secret), "{path} shows the webhook secret");
    }
    assert!(!sundial_testkit::logs::captured().contains(&secret), "a log line holds the secret");
    assert!(
        !sundial_testkit::logs::captured().contains(&webhook_secret),
        "a log line holds the webhook secret"
    );

    let rotated = stack.api.post(ALICE, &format!("/v1/jobs/{id}/rotate-secret"), &json!({})).await;
    let new_secret = rotated.body["signing_secret"].as_str().unwrap().to_string();
    assert_ne!(new_secret, secret);
    let second = stack.trigger(&id).await;
    stack.drive(&stack.services.use_cases.worker, &second, 30).await;
    let hit = &target.hits()[1];
    assert_eq!(hit.headers[headers::SIGNATURE], sign(&new_secret, &hit.body).as_str());
}

/// The history API: newest first, paginated, filtered by state; cancel and re-run.
#[tokio::test]
async fn run_history_cancel_and_rerun() {
    let stack = Stack::new().await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let id = stack.api.create_job(ALICE, &job("history", &target.url, json!({}))).await;
    let first = stack.trigger(&id).await;
    stack.drive(&stack.services.use_cases.worker, &first, 30).await;
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let second = stack.trigger(&id).await;

    let page = stack.api.get(ALICE, &format!("/v1/jobs/{id}/runs?limit=1")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_eq!(page.body["runs"][0]["id"], second.to_string().as_str(), "newest first");
    let next = page.body["next"].as_str().unwrap();
    let rest = stack.api.get(ALICE, &format!("/v1/jobs/{id}/runs?limit=1&next={next}")).await;
    assert_eq!(rest.body["runs"][0]["id"], first.to_string().as_str());
    let succeeded = stack.api.get(ALICE, &format!("/v1/jobs/{id}/runs?state=SUCCEEDED")).await;
    assert_eq!(succeeded.body["runs"].as_array().unwrap().len(), 1);
    let bad = stack.api.get(ALICE, &format!("/v1/jobs/{id}/runs?state=EXPLODED")).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.error_field(), "state");

    let cancelled = stack.api.post(ALICE, &format!("/v1/runs/{second}/cancel"), &json!({})).await;
    assert_eq!(cancelled.body["state"], "CANCELLED", "{}", cancelled.body);
    let twice = stack.api.post(ALICE, &format!("/v1/runs/{second}/cancel"), &json!({})).await;
    assert_eq!(twice.status, StatusCode::CONFLICT);
    // The cancelled run's message is dropped without calling the target.
    stack.drive(&stack.services.use_cases.worker, &second, 10).await;
    assert_eq!(target.hits().len(), 1);

    let rerun = stack.api.post(ALICE, &format!("/v1/runs/{first}/rerun"), &json!({})).await;
    assert_eq!(rerun.status, StatusCode::ACCEPTED, "{}", rerun.body);
    assert_eq!(rerun.body["kind"], "manual");
    assert_ne!(rerun.body["id"], first.to_string().as_str());
    assert_eq!(
        stack.api.get(sundial_tests::BOB, &format!("/v1/runs/{first}")).await.status,
        StatusCode::NOT_FOUND
    );
}

/// The worker publishes the events it wins on the shared topic, once each, with the `event`,
/// `job_id`, `job_name` and `owner` attributes: `retrying` and `succeeded` (asked for) of a flaky
/// job, `failed` of a broken one, `timed_out` and `sla_missed` of a slow one; each is marked sent.
#[tokio::test]
async fn events_are_published_once_with_their_attributes() {
    let stack = Stack::new().await;
    let inbox = stack.subscribe_inbox().await;
    let flaky = TargetServer::start(|n| if n == 0 { Answer::Status(500) } else { Answer::Status(200) }).await;
    let broken = TargetServer::start(|_| Answer::Status(500)).await;
    let slow = TargetServer::start(|_| Answer::Hang).await;

    let mut a = job("flaky", &flaky.url, json!({"max_attempts": 2, "backoff_s": 1, "max_backoff_s": 1}));
    a["notify"] = json!({"on": ["succeeded", "failed"]});
    let a = stack.api.create_job(ALICE, &a).await;
    let b = stack.api.create_job(ALICE, &job("broken", &broken.url, json!({"max_attempts": 1}))).await;
    let mut c = job("slow", &slow.url, json!({"max_attempts": 1}));
    c["timeout_s"] = json!(2);
    c["sla_s"] = json!(1);
    let c = stack.api.create_job(ALICE, &c).await;

    let runs = [stack.trigger(&a).await, stack.trigger(&b).await, stack.trigger(&c).await];
    for id in &runs {
        stack.drive(&stack.services.use_cases.worker, id, 60).await;
    }
    let messages = stack.read_inbox(&inbox, 5, 20).await;
    let mut seen: Vec<(String, String)> = messages
        .iter()
        .map(|m| {
            let attrs = &m["MessageAttributes"];
            let body: Value = serde_json::from_str(m["Message"].as_str().unwrap()).unwrap();
            assert_eq!(attrs["owner"]["Value"], "alice");
            assert_eq!(attrs["job_id"]["Value"], body["job_id"]);
            assert_eq!(attrs["event"]["Value"], body["event"]);
            (
                attrs["job_name"]["Value"].as_str().unwrap().to_string(),
                body["event"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    seen.sort();
    let expected: Vec<(String, String)> = [
        ("broken", "failed"),
        ("flaky", "retrying"),
        ("flaky", "succeeded"),
        ("slow", "sla_missed"),
        ("slow", "timed_out"),
    ]
    .iter()
    .map(|(j, e)| (j.to_string(), e.to_string()))
    .collect();
    assert_eq!(seen, expected);
    assert!(stack.read_inbox(&inbox, 1, 3).await.is_empty(), "one message per event");
    for id in &runs {
        let events = stack.run(id).await.events;
        assert!(!events.is_empty() && events.iter().all(|e| e.sent), "{events:?}");
    }
}

/// A Lambda target through the real Lambda Invoke API of `cargo lambda watch`: a success (the
/// function's answer is the attempt's output), and a function error (retried, then FAILED).
#[tokio::test]
async fn lambda_targets_through_cargo_lambda_watch() {
    let (_watch, endpoint) = sundial_tests::cargo_lambda_watch(&[]).await;
    let stack = Stack::with(Options {
        vars: [("SUNDIAL_ALLOWED_LAMBDA", "sundial-test-lambda".to_string())].into(),
        ..Default::default()
    })
    .await;
    let sdk = sundial_wiring::config::aws_sdk_config().await;
    let clients = TargetClients::at(&sdk, Ledger::new(), &endpoint);
    let s = &stack.services;
    let caller = Arc::new(Targets::new(clients, s.config.targets.clone()));
    let worker = stack.worker_with(caller, WorkerSettings::default());
    let lambda_job = |name: &str, payload: Value| {
        json!({
            "name": name, "schedule": {"cron": "0 0 1 1 *"},
            "target": {"type": "lambda", "function": "sundial-test-lambda"},
            "payload": payload, "timeout_s": 300,
            "retry": {"max_attempts": 2, "backoff_s": 1, "max_backoff_s": 1}
        })
    };
    let ok = stack.api.create_job(ALICE, &lambda_job("lambda-ok", json!({}))).await;
    let failing = stack.api.create_job(ALICE, &lambda_job("lambda-fails", json!({"fail": true}))).await;

    let ok_run = stack.trigger(&ok).await;
    let done = stack.drive(&worker, &ok_run, 180).await;
    assert_eq!(done.state, RunState::Succeeded, "{done:?}");
    let output = done.attempts[0].output.clone().unwrap();
    assert!(output.contains(&ok_run.to_string()), "{output}");

    let failing_run = stack.trigger(&failing).await;
    let failed = stack.drive(&worker, &failing_run, 120).await;
    assert_eq!(failed.state, RunState::Failed);
    assert_eq!(failed.attempts.len(), 2);
    assert!(
        failed.attempts[0].error.as_deref().unwrap_or("").contains("asked to fail"),
        "{:?}",
        failed.attempts[0]
    );
}

/// Fair sharing: a run message carries its owner as its SQS `MessageGroupId` (the tenant of a
/// fair queue). Here the API's claim of a triggered run; the tick, the worker and the watchdog
/// build their messages through the same `Dispatch`.
#[tokio::test]
async fn run_messages_carry_their_owner_as_the_fair_share_tenant() {
    use aws_sdk_sqs::types::MessageSystemAttributeName as Attr;
    let stack = Stack::new().await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let id = stack.api.create_job(ALICE, &job("tenant", &target.url, json!({"max_attempts": 1}))).await;
    stack.trigger(&id).await;
    let out = stack
        .sqs
        .receive_message()
        .queue_url(&stack.resources.runs_queue_url)
        .max_number_of_messages(10)
        .message_system_attribute_names(Attr::MessageGroupId)
        .send()
        .await
        .unwrap();
    let messages = out.messages.unwrap_or_default();
    assert_eq!(messages.len(), 1);
    let tenant = messages[0].attributes.as_ref().and_then(|a| a.get(&Attr::MessageGroupId));
    assert_eq!(tenant.map(String::as_str), Some("alice"), "{:?}", messages[0]);
}

// The worker's scenarios written once for both harnesses: also in memory (`shared/app/tests`).
sundial_testkit::worker_scenarios!(Stack);
