//! The API function's handler driven by the sample API Gateway (HTTP API, v2) events in
//! `events/`, decoded by `lambda_http` exactly as in Lambda.

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
