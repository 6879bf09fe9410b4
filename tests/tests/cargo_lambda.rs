//! Every function under the Lambda runtime emulator of `cargo lambda watch`, invoked through the
//! real Lambda Invoke API with its sample event from `events/`: the same binaries, runtime and
//! event decoding as in AWS, against the emulator's resources.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use aws_sdk_lambda::primitives::Blob;
use serde_json::Value;
use sundial_tests::{Stack, cargo_lambda_watch};

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../events/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[tokio::test]
async fn every_function_answers_its_sample_event_under_cargo_lambda() {
    let stack = Stack::new().await;
    let r = &stack.resources;
    let mut env: Vec<(String, String)> = [
        ("SUNDIAL_STACK", stack.name.as_str()),
        ("SUNDIAL_JOBS_TABLE", &r.jobs_table),
        ("SUNDIAL_RUNS_TABLE", &r.runs_table),
        ("SUNDIAL_IDEMPOTENCY_TABLE", &r.idempotency_table),
        ("SUNDIAL_RUNS_QUEUE_URL", &r.runs_queue_url),
        ("SUNDIAL_DLQ_URL", &r.dlq_url),
        ("SUNDIAL_EVENTS_TOPIC_ARN", &r.events_topic_arn),
        ("SUNDIAL_API_KEYS", "sundial-dev-key:dev"),
        ("SUNDIAL_PAGE_TOKEN_KEY", "page-token-key-of-the-cargo-lambda-test-0123456789"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for name in ["AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
        env.push((name.to_string(), std::env::var(name).unwrap()));
    }
    let (_watch, endpoint) = cargo_lambda_watch(&env).await;
    let sdk = sundial_wiring::config::aws_sdk_config().await;
    // A function's first invocation builds it: allow for a loaded machine.
    let timeouts = aws_sdk_lambda::config::timeout::TimeoutConfig::builder()
        .operation_timeout(std::time::Duration::from_secs(900))
        .read_timeout(std::time::Duration::from_secs(900))
        .build();
    let lambda = aws_sdk_lambda::Client::from_conf(
        aws_sdk_lambda::config::Builder::from(&sdk).endpoint_url(&endpoint).timeout_config(timeouts).build(),
    );
    let invoke = |function: &'static str, event: &'static str| {
        let lambda = lambda.clone();
        async move {
            let out = lambda
                .invoke()
                .function_name(function)
                .payload(Blob::new(sample(event)))
                .send()
                .await
                .unwrap();
            assert_eq!(out.function_error(), None, "{function}: {:?}", out.payload());
            serde_json::from_slice::<Value>(out.payload().unwrap().as_ref()).unwrap()
        }
    };

    let created = invoke("sundial-api", "api-create-job.json").await;
    assert_eq!(created["statusCode"], 201, "{created}");
    let listed = invoke("sundial-api", "api-list-jobs.json").await;
    assert_eq!(listed["statusCode"], 200, "{listed}");
    let body: Value = serde_json::from_str(listed["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["jobs"][0]["name"], "from-api-gateway");

    let tick = invoke("sundial-tick", "tick-scheduled.json").await;
    assert!(tick["watermark"].is_string(), "{tick}");

    let worker = invoke("sundial-worker", "worker-sqs-batch.json").await;
    assert_eq!(worker["batchItemFailures"], serde_json::json!([]), "{worker}");
    let dead_letters = invoke("sundial-worker", "worker-dlq-batch.json").await;
    assert_eq!(dead_letters["batchItemFailures"], serde_json::json!([]), "{dead_letters}");

    let watchdog = invoke("sundial-watchdog", "watchdog-scheduled.json").await;
    assert!(watchdog["inspected"].is_number(), "{watchdog}");
}
