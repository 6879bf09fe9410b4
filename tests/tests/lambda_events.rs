//! Every function's handler driven by its sample events in `events/`: the API by API Gateway
//! (HTTP API, v2) requests decoded by `lambda_http` exactly as in Lambda; the tick and the
//! watchdog by EventBridge scheduled events; the worker by SQS batches from the runs queue and
//! from its dead-letter queue.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use axum::body::Body;
use http::StatusCode;
use sundial_tests::Stack;

fn event(name: &str) -> http::Request<Body> {
    let path = format!("{}/../events/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let request = lambda_http::request::from_str(&text).unwrap();
    let (parts, body) = request.into_parts();
    http::Request::from_parts(parts, Body::from(body.to_vec()))
}

/// Create and list through API Gateway events with a Bearer key.
#[tokio::test]
async fn api_gateway_events_with_a_key() {
    let stack = Stack::new().await;
    let created = stack.api.send(event("api-create-job.json")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["owner"], "dev");
    let listed = stack.api.send(event("api-list-jobs.json")).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(listed.body["jobs"][0]["name"], "from-api-gateway");
}

/// Behind a JWT authorizer the verified `sub` claim is the owner, without an API key.
#[tokio::test]
async fn jwt_authorizer_subject_is_the_owner() {
    let stack = Stack::new().await;
    stack.api.send(event("api-create-job.json")).await;
    let listed = stack.api.send(event("api-list-jobs-jwt.json")).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(listed.body["jobs"], serde_json::json!([]), "the JWT subject is a different owner from `dev`");
}

fn sample<T: serde::de::DeserializeOwned>(name: &str) -> lambda_runtime::LambdaEvent<T> {
    let path = format!("{}/../events/{name}", env!("CARGO_MANIFEST_DIR"));
    let payload = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut context = lambda_runtime::Context::default();
    context.request_id = "sample-request".into();
    lambda_runtime::LambdaEvent::new(payload, context)
}

/// The tick's handler with the EventBridge scheduled event: one tick, its summary returned.
#[tokio::test]
async fn tick_handles_its_scheduled_event() {
    let stack = Stack::new().await;
    let summary =
        sundial_tick::handle(&stack.services.use_cases.tick, sample("tick-scheduled.json")).await.unwrap();
    assert!(summary.watermark.is_some(), "the tick recorded its progress");
    assert_eq!((summary.claimed, summary.failed), (0, 0));
}

/// The watchdog's handler with its scheduled event: one pass over an empty stack.
#[tokio::test]
async fn watchdog_handles_its_scheduled_event() {
    let stack = Stack::new().await;
    let report =
        sundial_watchdog::handle(&stack.services.use_cases.watchdog, sample("watchdog-scheduled.json"))
            .await
            .unwrap();
    assert_eq!(report, sundial_app::watchdog::WatchdogReport::default());
}

/// The worker's handler with an SQS batch from the runs queue: a message for a run that does
/// not exist is dropped, an undecodable one is forwarded to the dead-letter queue; neither is
/// reported as a failure (the event source deletes both). From the dead-letter queue, a message
/// naming an unknown run is handled without failure too.
#[tokio::test]
async fn worker_handles_sqs_batches_from_both_queues() {
    let stack = Stack::new().await;
    let s = &stack.services;
    let response = sundial_worker::handle(
        &s.use_cases.worker,
        s.ports.queue.as_ref(),
        s.inbox.as_ref(),
        sample("worker-sqs-batch.json"),
    )
    .await
    .unwrap();
    assert!(response.batch_item_failures.is_empty());
    let out = stack
        .sqs
        .receive_message()
        .queue_url(&stack.resources.dlq_url)
        .max_number_of_messages(10)
        .message_attribute_names("All")
        .send()
        .await
        .unwrap();
    let dead: Vec<_> = out.messages().iter().map(|m| m.body().unwrap_or_default().to_string()).collect();
    assert_eq!(dead, ["not a run message"]);
    let reason = out.messages()[0].message_attributes().unwrap()["sundial_reason"].string_value().unwrap();
    assert!(reason.contains("undecodable"), "{reason}");

    let response = sundial_worker::handle(
        &s.use_cases.worker,
        s.ports.queue.as_ref(),
        s.inbox.as_ref(),
        sample("worker-dlq-batch.json"),
    )
    .await
    .unwrap();
    assert!(response.batch_item_failures.is_empty());
}

/// The JWT event, as a request that names `owner` in `X-Sundial-Owner` and is `method path`.
fn jwt_event(owner: Option<&str>, method: &str, path: &str) -> http::Request<Body> {
    let file = format!("{}/../events/api-list-jobs-jwt.json", env!("CARGO_MANIFEST_DIR"));
    let mut event: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    if let Some(owner) = owner {
        event["headers"]["x-sundial-owner"] = serde_json::json!(owner);
    }
    event["rawPath"] = serde_json::json!(path);
    event["requestContext"]["http"]["method"] = serde_json::json!(method);
    event["requestContext"]["http"]["path"] = serde_json::json!(path);
    let request = lambda_http::request::from_str(&event.to_string()).unwrap();
    let (parts, body) = request.into_parts();
    http::Request::from_parts(parts, Body::from(body.to_vec()))
}

/// A JWT subject acts in another owner's name only with that owner's grant, with its role:
/// refused (403 naming `X-Sundial-Owner`) without one, a viewer's reads with one, refused again
/// once the grant is revoked; the grant's making is in dev's audit trail.
#[tokio::test]
async fn a_jwt_subject_acts_for_an_owner_only_by_its_grant() {
    use serde_json::json;
    let stack = Stack::new().await;
    stack.api.send(event("api-create-job.json")).await;
    let as_dev = || jwt_event(Some("dev"), "GET", "/v1/jobs");
    let refused = stack.api.send(as_dev()).await;
    assert_eq!(
        (refused.status, refused.error_field()),
        (StatusCode::FORBIDDEN, "X-Sundial-Owner"),
        "{}",
        refused.body
    );

    // dev grants the subject `viewer`: no secret is made.
    let grant = json!({"name": "jwt-42", "role": "viewer", "subject": "jwt-user-42"});
    let made = stack.api.post("sundial-dev-key", "/v1/keys", &grant).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    assert!(made.body.get("secret").is_none(), "{}", made.body);
    assert_eq!(made.body["subject"], "jwt-user-42");
    let again = stack.api.post("sundial-dev-key", "/v1/keys", &grant).await;
    assert_eq!((again.status, again.error_field()), (StatusCode::CONFLICT, "subject"), "{}", again.body);

    let listed = stack.api.send(as_dev()).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
    assert_eq!(listed.body["jobs"][0]["name"], "from-api-gateway", "dev's jobs, as dev's viewer");
    let own = stack.api.send(jwt_event(None, "GET", "/v1/jobs")).await;
    assert_eq!(own.body["jobs"], json!([]), "without the header, the subject is its own owner");
    let above = stack.api.send(jwt_event(Some("dev"), "GET", "/v1/keys")).await;
    assert_eq!((above.status, above.error_field()), (StatusCode::FORBIDDEN, "role"), "{}", above.body);

    // The grant's making is recorded; revoked, the subject is refused again.
    let trail = stack.api.get("sundial-dev-key", "/v1/audit?action=key.create").await;
    let record = &trail.body["records"][0];
    assert_eq!(record["target"]["name"], "jwt-42", "{}", trail.body);
    let id = made.body["id"].as_str().unwrap().to_string();
    assert_eq!(
        stack.api.delete("sundial-dev-key", &format!("/v1/keys/{id}")).await.status,
        StatusCode::NO_CONTENT
    );
    let revoked = stack.api.send(as_dev()).await;
    assert_eq!(revoked.status, StatusCode::FORBIDDEN, "revoked: {}", revoked.body);
    // Granted again after its revocation (its id is the owner's and the subject's).
    let regranted = stack.api.post("sundial-dev-key", "/v1/keys", &grant).await;
    assert_eq!(regranted.status, StatusCode::CREATED, "{}", regranted.body);
    assert_eq!(stack.api.send(as_dev()).await.status, StatusCode::OK);
    // Not to the owner itself, and the header is a JWT subject's only.
    let own_grant = json!({"name": "self", "role": "viewer", "subject": "dev"});
    let refused = stack.api.post("sundial-dev-key", "/v1/keys", &own_grant).await;
    assert_eq!(
        (refused.status, refused.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "subject"),
        "{}",
        refused.body
    );
    let keyed = sundial_tests::Call::new(http::Method::GET, "/v1/jobs")
        .key("sundial-dev-key")
        .header("x-sundial-owner", "alice");
    let crossed = stack.api.call(keyed).await;
    assert_eq!(
        (crossed.status, crossed.error_field()),
        (StatusCode::FORBIDDEN, "X-Sundial-Owner"),
        "{}",
        crossed.body
    );
    // A subject that is its own owner needs no grant.
    let itself = stack.api.send(jwt_event(Some("jwt-user-42"), "GET", "/v1/jobs")).await;
    assert_eq!(itself.status, StatusCode::OK, "{}", itself.body);
}
