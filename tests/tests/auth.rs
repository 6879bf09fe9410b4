//! Authentication and owner isolation on every route, and the exempt OpenAPI document.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use http::{Method, StatusCode};
use serde_json::json;
use sundial_tests::{ALICE, BOB, Call, Stack, job};

/// Every job route, with the method and a body where it takes one.
fn routes(id: &str) -> Vec<(Method, String, Option<serde_json::Value>)> {
    vec![
        (Method::GET, "/v1/jobs".into(), None),
        (Method::POST, "/v1/jobs".into(), Some(job("x"))),
        (Method::GET, format!("/v1/jobs/{id}"), None),
        (Method::PATCH, format!("/v1/jobs/{id}"), Some(json!({"payload": 1}))),
        (Method::DELETE, format!("/v1/jobs/{id}"), None),
        (Method::POST, format!("/v1/jobs/{id}/pause"), Some(json!({}))),
        (Method::POST, format!("/v1/jobs/{id}/resume"), Some(json!({}))),
        (Method::GET, format!("/v1/jobs/{id}/preview"), None),
    ]
}

fn call<'a>(method: Method, path: String, body: &Option<serde_json::Value>) -> Call<'a> {
    let call = Call::new(method, path);
    match body {
        Some(b) => call.json(b),
        None => call,
    }
}

/// No key, a wrong key or a malformed header → 401 with `WWW-Authenticate`, on every route.
#[tokio::test]
async fn every_route_needs_a_key() {
    let stack = Stack::new().await;
    let id = stack.api.create_job(ALICE, &job("mine")).await;
    for (method, path, body) in routes(&id) {
        for auth in [None, Some("Bearer wrong-key"), Some("Basic YWxpY2U6eA=="), Some("alice-key")] {
            let mut c = call(method.clone(), path.clone(), &body);
            if let Some(value) = auth {
                c = c.header("authorization", value);
            }
            let reply = stack.api.call(c).await;
            assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{method} {path} with {auth:?}");
            assert_eq!(reply.headers["www-authenticate"], "Bearer");
            assert_eq!(reply.error_field(), "Authorization");
        }
    }
    assert_eq!(stack.api.get(ALICE, &format!("/v1/jobs/{id}")).await.body["version"], 1);
}

/// Bob sees none of Alice's jobs: every route on her job is a 404, and her list is not his.
#[tokio::test]
async fn another_owners_job_is_not_found() {
    let stack = Stack::new().await;
    let id = stack.api.create_job(ALICE, &job("alices")).await;
    for (method, path, body) in routes(&id) {
        if path == "/v1/jobs" {
            continue;
        }
        let reply = stack.api.call(call(method.clone(), path.clone(), &body).key(BOB)).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{method} {path}: {}", reply.body);
    }
    let bobs_list = stack.api.get(BOB, "/v1/jobs").await;
    assert_eq!(bobs_list.body["jobs"], json!([]));
    let alice = stack.api.get(ALICE, &format!("/v1/jobs/{id}")).await;
    assert_eq!(alice.status, StatusCode::OK);
    assert_eq!(alice.body["version"], 1, "Bob's attempts changed Alice's job");
    assert_eq!(alice.body["paused"], false);
}

/// The OpenAPI document is public.
#[tokio::test]
async fn openapi_is_public() {
    let stack = Stack::new().await;
    let reply = stack.api.call(Call::new(Method::GET, "/v1/openapi.json")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(reply.body["paths"]["/v1/jobs"].is_object());
}
