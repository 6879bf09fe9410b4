//! Limits only real AWS enforces, checked here because the emulator does not (#32): each test
//! knows the limit and measures Sundial against it.
//!
//! - File descriptors: a 256 MB Lambda has 1,024. A burst's sends to the runs queue hold at
//!   most `SENDS_IN_FLIGHT` `SendMessageBatch` requests (connections) at once, whatever the
//!   burst's size, measured by a loopback SQS stand-in counting requests in flight.
//! - Lambda's 6 MB response: every page of jobs (with 195 KB payloads full of quotes) and of
//!   runs (ten attempts with 4 KB outputs each), wrapped as API Gateway's proxy integration
//!   wraps it, stays under 6,291,456 bytes, and `next` reaches every item once.
//! - DynamoDB's 400 KB item: a backfill of 1,000 instants answers with a response that its
//!   idempotency record can hold, and a retry replays it; the largest run (its own payload, ten
//!   attempts of the most output and error) fits its item.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use http::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use sundial_aws::sqs::{SENDS_IN_FLIGHT, SqsRunQueue};
use sundial_domain::ports::queue::RunQueue;
use sundial_domain::run::RunMessage;
use sundial_domain::run_queue::Dispatch;
use sundial_tests::{ALICE, Call, Options, Stack};

/// Requests in flight at a loopback stand-in, and the most at once.
#[derive(Debug, Default)]
struct InFlight {
    now: AtomicUsize,
    most: AtomicUsize,
    requests: AtomicUsize,
}

/// A loopback SQS that answers every `SendMessageBatch` with success after 50 ms.
async fn sqs_stand_in() -> (String, Arc<InFlight>) {
    let seen = Arc::new(InFlight::default());
    let counting = seen.clone();
    let app = axum::Router::new().fallback(move || {
        let c = counting.clone();
        async move {
            c.requests.fetch_add(1, Ordering::SeqCst);
            let now = c.now.fetch_add(1, Ordering::SeqCst) + 1;
            c.most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            c.now.fetch_sub(1, Ordering::SeqCst);
            http::Response::builder()
                .header("content-type", "application/x-amz-json-1.0")
                .body(axum::body::Body::from(r#"{"Successful":[],"Failed":[]}"#))
                .unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

/// A burst of 2,000 runs (200 batches of ten) is sent with at most `SENDS_IN_FLIGHT` requests
/// at once, every run answered: before the bound, all 200 went at once.
#[tokio::test]
async fn a_burst_is_sent_with_a_bounded_number_of_connections() {
    let (endpoint, seen) = sqs_stand_in().await;
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(sundial_wiring::config::aws_https_client())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new("id", "secret", None, None, "test"))
        .load()
        .await;
    let client = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&sdk).endpoint_url(&endpoint).build(),
    );
    let queue = SqsRunQueue::new(
        client,
        format!("{endpoint}/000000000000/runs"),
        format!("{endpoint}/000000000000/dlq"),
    );
    let burst: Vec<Dispatch> = (0..2_000)
        .map(|i| Dispatch {
            message: RunMessage {
                job_id: format!("job-{i}"),
                run_key: "20300101T120000Z.s".into(),
                attempt: 1,
                look: None,
                tag: None,
            },
            delay_s: 0,
            tenant: "alice".into(),
        })
        .collect();
    let results = queue.send(&burst).await;
    assert_eq!(results.len(), 2_000);
    assert!(results.iter().all(Result::is_ok), "every run sent");
    assert_eq!(seen.requests.load(Ordering::SeqCst), 200, "batches of ten");
    let most = seen.most.load(Ordering::SeqCst);
    println!("most SendMessageBatch requests in flight: {most} (bound {SENDS_IN_FLIGHT})");
    assert!(most <= SENDS_IN_FLIGHT, "{most} requests in flight at once");
    assert!(most > 1, "the sends still overlap");
}

/// Lambda's limit on a synchronous invocation's response.
const LAMBDA_RESPONSE_BYTES: usize = 6_291_456;
/// DynamoDB's limit on an item.
const DYNAMODB_ITEM_BYTES: usize = 400 * 1024;

/// The size of `body` as the api function returns it to API Gateway: a JSON string inside the
/// proxy integration's response (each quote and backslash of the body escaped again).
fn lambda_response_bytes(body: &Value) -> usize {
    let envelope = json!({
        "statusCode": 200,
        "headers": {"content-type": "application/json"},
        "body": body.to_string(),
        "isBase64Encoded": false,
    });
    envelope.to_string().len()
}

/// Follows `next` from `path` (which has a `?`), checking every page against Lambda's limit;
/// returns every item of `field` and the number of pages.
async fn every_page(stack: &Stack, path: &str, field: &str) -> (Vec<Value>, usize) {
    let (mut items, mut pages, mut next): (Vec<Value>, usize, Option<String>) = (Vec::new(), 0, None);
    loop {
        let url = match &next {
            Some(token) => format!("{path}&next={token}"),
            None => path.to_string(),
        };
        let page = stack.api.get(ALICE, &url).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        let bytes = lambda_response_bytes(&page.body);
        println!(
            "{path}: page {pages} of {} items, {bytes} bytes as a Lambda response",
            page.body[field].as_array().unwrap().len()
        );
        assert!(bytes <= LAMBDA_RESPONSE_BYTES, "a page of {bytes} bytes crosses Lambda's 6 MB response");
        items.extend(page.body[field].as_array().unwrap().iter().cloned());
        pages += 1;
        match page.body["next"].as_str() {
            Some(token) => next = Some(token.to_string()),
            None => return (items, pages),
        }
    }
}

/// A page of 30 jobs with 195 KB payloads would be about 12 MB as a Lambda response: pages are
/// cut by bytes, each under the limit, and `next` reaches every job once.
#[tokio::test]
async fn job_pages_stay_under_lambdas_response_limit() {
    let stack = Stack::with(Options {
        vars: [("SUNDIAL_MAX_PAYLOAD_BYTES", (200 * 1024).to_string())].into(),
        ..Default::default()
    })
    .await;
    // Quotes are what a Lambda response escapes twice: a payload of many short strings.
    let payload = json!({"lines": vec!["q\"x"; 195 * 1024 / 7]});
    assert!(payload.to_string().len() < 200 * 1024);
    for i in 0..30 {
        let job = json!({"name": format!("big-{i:02}"), "schedule": {"cron": "0 0 1 1 *"},
                         "target": {"type": "http", "url": "http://127.0.0.1:9/"}, "payload": payload});
        stack.api.create_job(ALICE, &job).await;
    }
    let (jobs, pages) = every_page(&stack, "/v1/jobs?limit=100", "jobs").await;
    let names: BTreeSet<&str> = jobs.iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert_eq!((jobs.len(), names.len()), (30, 30), "every job once");
    assert!(pages > 1, "cut by bytes, not by count");
}

/// 100 runs with ten attempts of 4 KB outputs each: run pages are cut by bytes too.
#[tokio::test]
async fn run_pages_stay_under_lambdas_response_limit() {
    use sundial_domain::run::{Attempt, Outcome, RunKey, RunState};
    let stack = Stack::new().await;
    // A yearly schedule: no instant of its own falls due while the test runs.
    let job = json!({"name": "attempts", "schedule": {"cron": "0 0 1 1 *"},
                     "target": {"type": "http", "url": "http://127.0.0.1:9/"}});
    let id = stack.api.create_job(ALICE, &job).await;
    let job_id = sundial_domain::job::JobId::parse(&id).unwrap();
    let job = stack.services.ports.jobs.get(&job_id).await.unwrap().unwrap();
    let base = chrono::Utc::now() - chrono::Duration::days(1);
    for i in 0..100 {
        let instant = base + chrono::Duration::minutes(i);
        let mut run =
            stack.services.use_cases.claimer.new_run(&job, RunKey::scheduled(instant), instant, instant);
        run.state = RunState::Failed;
        run.attempt = 10;
        run.attempts = (1..=10)
            .map(|n| Attempt {
                n,
                started_at: instant,
                finished_at: Some(instant),
                worker: "w".into(),
                outcome: Some(Outcome::Failed),
                status_code: Some(500),
                error: Some("\"".repeat(1000)),
                output: Some("\"".repeat(4096)),
                callback: None,
                call_until: None,
                handle: None,
                followed_at: None,
                looks: 0,
                look_tag: None,
                logs_url: None,
            })
            .collect();
        stack.services.ports.runs.insert(&run, None).await.unwrap();
    }
    let (runs, pages) = every_page(&stack, &format!("/v1/jobs/{id}/runs?limit=100"), "runs").await;
    let ids: BTreeSet<&str> = runs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!((runs.len(), ids.len()), (100, 100), "every run once");
    assert!(pages > 1, "cut by bytes, not by count");
}

/// An item's size as DynamoDB counts it: each attribute's name and value, in bytes.
fn item_bytes(item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>) -> usize {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    fn value(v: &A) -> usize {
        match v {
            A::S(s) | A::N(s) => s.len(),
            A::Bool(_) | A::Null(_) => 1,
            A::Ss(items) | A::Ns(items) => items.iter().map(String::len).sum(),
            A::M(map) => 3 + map.iter().map(|(k, v)| k.len() + value(v) + 1).sum::<usize>(),
            A::L(items) => 3 + items.iter().map(|v| value(v) + 1).sum::<usize>(),
            _ => 0,
        }
    }
    item.iter().map(|(k, v)| k.len() + value(v)).sum()
}

/// The largest run: its own payload at the most a run may carry, ten attempts each with the most
/// output and error a target's answer leaves, every event with both alert channels' marks at
/// their longest error, all of it quotes (escaped twice as JSON): its item stays under
/// DynamoDB's 400 KB.
#[tokio::test]
async fn the_largest_run_fits_dynamodbs_item() {
    use sundial_domain::limits::RUN_INPUT_BYTES;
    use sundial_domain::run::{Attempt, Outcome, RunKey, RunState};
    use sundial_domain::target::MAX_OUTPUT_BYTES;
    let stack = Stack::new().await;
    let job = json!({"name": "largest", "schedule": {"cron": "0 0 1 1 *"},
                     "target": {"type": "http", "url": "http://127.0.0.1:9/"}});
    let id = stack.api.create_job(ALICE, &job).await;
    let job_id = sundial_domain::job::JobId::parse(&id).unwrap();
    let job = stack.services.ports.jobs.get(&job_id).await.unwrap().unwrap();
    let instant = chrono::Utc::now() - chrono::Duration::hours(1);
    let mut run =
        stack.services.use_cases.claimer.new_run(&job, RunKey::scheduled(instant), instant, instant);
    // A string of quotes: each is two bytes as JSON, so the payload at its bound.
    run.input = Some(json!("\"".repeat(RUN_INPUT_BYTES / 2 - 2)));
    assert!(serde_json::to_vec(&run.input).unwrap().len() <= RUN_INPUT_BYTES);
    run.state = RunState::Failed;
    run.attempt = 10;
    run.attempts = (1..=10)
        .map(|n| Attempt {
            n,
            started_at: instant,
            finished_at: Some(instant),
            worker: "w".repeat(64),
            outcome: Some(Outcome::Failed),
            status_code: Some(500),
            error: Some("\"".repeat(MAX_OUTPUT_BYTES)),
            output: Some("\"".repeat(MAX_OUTPUT_BYTES)),
            callback: Some("c".repeat(64)),
            call_until: Some(instant),
            handle: Some("h".repeat(sundial_domain::target::MAX_HANDLE_BYTES)),
            followed_at: Some(instant),
            looks: u32::MAX,
            look_tag: Some(sundial_domain::follow::tag(0.999_999)),
            logs_url: None,
        })
        .collect();
    // Every event a run can carry (a `retrying` per attempt), each with both channels' marks at
    // their longest error.
    use sundial_domain::delivery::{Channel, ChannelMark, DeliveryError};
    use sundial_domain::job::EventKind;
    let longest = Err(DeliveryError::Refused("\"".repeat(10_000)));
    let kinds = [
        EventKind::Succeeded,
        EventKind::Failed,
        EventKind::TimedOut,
        EventKind::SlaMissed,
        EventKind::LateStart,
        EventKind::Skipped,
        EventKind::Failing,
        EventKind::DurationAnomaly,
        EventKind::TooFast,
        EventKind::FailureRate,
        EventKind::Recovered,
    ];
    let events = kinds.iter().map(|k| (*k, 1)).chain((1..=10).map(|n| (EventKind::Retrying, n)));
    run.events = events
        .map(|(kind, attempt)| {
            let mut event = sundial_domain::run::RunEvent::new(kind, attempt, instant);
            for channel in Channel::ALL {
                event.channels.insert(channel, ChannelMark::after(channel, u32::MAX, &longest, instant));
            }
            event
        })
        .collect();
    stack.services.ports.runs.insert(&run, None).await.unwrap();
    let key = std::collections::HashMap::from([
        ("job_id".to_string(), aws_sdk_dynamodb::types::AttributeValue::S(id.clone())),
        ("run_key".to_string(), aws_sdk_dynamodb::types::AttributeValue::S(run.key.encode())),
    ]);
    let out = stack
        .dynamo
        .get_item()
        .table_name(&stack.resources.runs_table)
        .set_key(Some(key))
        .send()
        .await
        .unwrap();
    let bytes = item_bytes(out.item.as_ref().expect("the run is stored"));
    println!("the largest run's item: {bytes} bytes");
    assert!(bytes < DYNAMODB_ITEM_BYTES, "{bytes} bytes crosses DynamoDB's 400 KB item");
}

/// A backfill of 1,000 instants with an `Idempotency-Key`: its answer fits the item that keeps
/// it for a replay, and the retry replays it.
#[tokio::test]
async fn a_large_backfills_answer_fits_its_idempotency_record() {
    let stack = Stack::new().await;
    let job = json!({"name": "every-minute", "schedule": {"cron": "* * * * *"},
                     "target": {"type": "http", "url": "http://127.0.0.1:9/"}});
    let id = stack.api.create_job(ALICE, &job).await;
    use chrono::DurationRound;
    let to = (chrono::Utc::now() - chrono::Duration::minutes(1))
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap();
    let range = json!({"from": (to - chrono::Duration::minutes(999)).to_rfc3339(), "to": to.to_rfc3339()});
    let backfill = || {
        Call::new(Method::POST, format!("/v1/jobs/{id}/backfill"))
            .key(ALICE)
            .header("idempotency-key", "backfill-1000")
            .json(&range)
    };
    let first = stack.api.call(backfill()).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.body);
    assert_eq!(first.body["created"], 1000);
    assert_eq!(first.body["runs"].as_array().unwrap().len(), 100, "the first hundred are listed");
    let stored = first.body.to_string().len();
    println!("backfill answer: {stored} bytes (item limit {DYNAMODB_ITEM_BYTES})");
    assert!(stored < DYNAMODB_ITEM_BYTES / 2, "{stored} bytes: the idempotency record must hold it");
    let replay = stack.api.call(backfill()).await;
    assert_eq!(replay.status, StatusCode::ACCEPTED, "{}", replay.body);
    assert_eq!(replay.headers.get("idempotent-replayed").map(|v| v.to_str().unwrap()), Some("true"));
    assert_eq!(replay.body, first.body);
}
