//! Limits only real AWS enforces, checked here because the emulator does not (#32): each test
//! knows the limit and measures Sundial against it.
//!
//! - File descriptors: a 256 MB Lambda has 1,024. A burst's sends to the runs queue hold at
//!   most `SENDS_IN_FLIGHT` `SendMessageBatch` requests (connections) at once, whatever the
//!   burst's size, measured by a loopback SQS stand-in counting requests in flight.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use sundial_adapters::sqs::{SENDS_IN_FLIGHT, SqsRunQueue};
use sundial_domain::dispatch::Dispatch;
use sundial_domain::ports::queue::RunQueue;
use sundial_domain::run::RunMessage;

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
        .http_client(sundial_shared::config::aws_https_client())
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
