//! The SDK clients targets are called through send each call once (#32): an at-most-once attempt
//! of a Lambda, SQS or SNS target never reaches its target twice because the SDK retried a
//! timeout, a reset connection or a 5xx. Each case points the production clients
//! (`TargetClients`, as `Clients::new` builds them) at a loopback HTTP server that counts the requests it gets and answers as
//! AWS would when it may or may not have acted; an error that proves nothing was processed
//! (throttling, a refused connection) is `NotSent`, any other a retryable failure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use chrono::Utc;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use sundial_aws::metrics::{Ledger, TargetClients};
use sundial_aws::targets::Targets;
use sundial_domain::job::Job;
use sundial_domain::limits::TargetAllowList;
use sundial_domain::ports::targets::{Answer, Caller, Invocation};

/// A loopback server answering every request with `status` and `headers`, counting requests.
async fn answering(
    status: u16,
    headers: &'static [(&'static str, &'static str)],
) -> (String, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let app = axum::Router::new().fallback(move || {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            let mut answer = http::Response::builder().status(status);
            for (name, value) in headers {
                answer = answer.header(*name, *value);
            }
            answer.body(axum::body::Body::from("{}")).unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, count)
}

/// The production target clients, every service's endpoint at `endpoint` (set on each client,
/// so that an `AWS_ENDPOINT_URL` of the environment does not win).
async fn targets(endpoint: &str) -> Targets {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(sundial_wiring::config::aws_https_client())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new("id", "secret", None, None, "test"))
        .load()
        .await;
    let clients = TargetClients::at(&sdk, Ledger::new(), endpoint);
    let allow = TargetAllowList {
        lambda: vec!["*".into()],
        sqs: vec!["*".into()],
        sns: vec!["*".into()],
        state_machines: vec!["*".into()],
        ecs_clusters: vec!["*".into()],
        ecs_task_definitions: vec!["*".into()],
        event_buses: vec!["*".into()],
        own_prefix: String::new(),
        network: sundial_domain::egress::Egress::default(),
    };
    Targets::new(clients, allow)
}

fn job(target: serde_json::Value) -> Job {
    sundial_tests::stored_job(json!({"name": "once", "target": target, "delivery": "at_most_once"}))
}

fn kinds(endpoint: &str) -> [(&'static str, Job); 3] {
    [
        ("lambda", job(json!({"type": "lambda", "function": "fn"}))),
        ("sqs", job(json!({"type": "sqs", "queue_url": format!("{endpoint}/000000000000/q")}))),
        ("sns", job(json!({"type": "sns", "topic_arn": "arn:aws:sns:us-east-1:000000000000:t"}))),
    ]
}

async fn call(targets: &Targets, job: &Job) -> Answer {
    let invocation = Invocation {
        job,
        payload: job.document.payload.clone(),
        run_id: "run".into(),
        attempt: 1,
        scheduled_at: Utc::now(),
        callback_token: "token".into(),
        timeout: std::time::Duration::from_secs(20),
        sent_at: Utc::now(),
    };
    targets.call(&invocation).await
}

/// A 500 (the service may have acted) is one request, a retryable failure: the SDK's standard
/// retry would have sent it three times.
#[tokio::test]
async fn a_target_call_answered_500_is_sent_once() {
    let (endpoint, count) = answering(500, &[("x-amzn-errortype", "ServiceException")]).await;
    let targets = targets(&endpoint).await;
    for (kind, job) in kinds(&endpoint) {
        let before = count.load(Ordering::SeqCst);
        let answer = call(&targets, &job).await;
        assert_eq!(count.load(Ordering::SeqCst) - before, 1, "{kind}: requests sent for one call");
        assert!(matches!(answer, Answer::Failed { retryable: true, .. }), "{kind}: {answer:?}");
    }
}

/// Throttling (the service refused the request as such) is one request and `NotSent`: an
/// at-most-once run may try again.
#[tokio::test]
async fn a_throttled_target_call_is_sent_once_and_not_sent() {
    let (endpoint, count) = answering(429, &[("x-amzn-errortype", "TooManyRequestsException")]).await;
    let targets = targets(&endpoint).await;
    let (_, lambda) = kinds(&endpoint).into_iter().next().unwrap();
    let answer = call(&targets, &lambda).await;
    assert_eq!(count.load(Ordering::SeqCst), 1, "requests sent for one call");
    assert!(matches!(answer, Answer::NotSent { .. }), "{answer:?}");
}

/// A refused connection never left: `NotSent`, for every kind.
#[tokio::test]
async fn a_refused_connection_is_not_sent() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let targets = targets(&endpoint).await;
    for (kind, job) in kinds(&endpoint) {
        let answer = call(&targets, &job).await;
        assert!(matches!(answer, Answer::NotSent { .. }), "{kind}: {answer:?}");
    }
}
