//! `Idempotency-Key` on POST: replays return the first response, reuse with another body is 409.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use http::{Method, StatusCode};
use serde_json::json;
use sundial_tests::{ALICE, BOB, Call, Stack, job};

fn create<'a>(key: &'a str, idem: &str, body: &serde_json::Value) -> Call<'a> {
    Call::new(Method::POST, "/v1/jobs").key(key).header("idempotency-key", idem.to_string()).json(body)
}

/// The same request twice creates one job and answers the same both times.
#[tokio::test]
async fn replay_returns_the_same_response() {
    let stack = Stack::new().await;
    let first = stack.api.call(create(ALICE, "req-1", &job("once"))).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let second = stack.api.call(create(ALICE, "req-1", &job("once"))).await;
    assert_eq!(second.status, StatusCode::CREATED, "{}", second.body);
    assert_eq!(second.body, first.body);
    assert_eq!(second.etag(), first.etag());
    assert_eq!(second.headers["location"], first.headers["location"]);
    assert_eq!(second.headers["idempotent-replayed"], "true");
    let list = stack.api.get(ALICE, "/v1/jobs").await;
    assert_eq!(list.body["jobs"].as_array().unwrap().len(), 1);
}

/// The same key with a different body is a conflict and writes nothing.
#[tokio::test]
async fn reuse_with_a_different_body_conflicts() {
    let stack = Stack::new().await;
    stack.api.call(create(ALICE, "req-2", &job("first"))).await;
    let reused = stack.api.call(create(ALICE, "req-2", &job("second"))).await;
    assert_eq!(reused.status, StatusCode::CONFLICT, "{}", reused.body);
    assert_eq!(reused.body["error"]["code"], "idempotency_key_reused");
    assert_eq!(reused.error_field(), "Idempotency-Key");
    let list = stack.api.get(ALICE, "/v1/jobs").await;
    assert_eq!(list.body["jobs"].as_array().unwrap().len(), 1);
}

/// Keys are per owner: Bob's request with Alice's key string is his own.
#[tokio::test]
async fn keys_are_scoped_to_the_owner() {
    let stack = Stack::new().await;
    let a = stack.api.call(create(ALICE, "same-key", &job("job"))).await;
    let b = stack.api.call(create(BOB, "same-key", &job("job"))).await;
    assert_eq!(a.status, StatusCode::CREATED);
    assert_eq!(b.status, StatusCode::CREATED);
    assert_ne!(a.body["id"], b.body["id"]);
}

/// A rejected request is replayed as the same rejection; pause with a key is idempotent too.
#[tokio::test]
async fn errors_replay_and_actions_are_covered() {
    let stack = Stack::new().await;
    let bad = json!({"name": "bad name", "target": {"type": "http", "url": "http://127.0.0.1:9/"}});
    let first = stack.api.call(create(ALICE, "bad-1", &bad)).await;
    let second = stack.api.call(create(ALICE, "bad-1", &bad)).await;
    assert_eq!(first.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(second.status, first.status);
    assert_eq!(second.body, first.body);

    let id = stack.api.create_job(ALICE, &job("pausable")).await;
    let pause = |k: &'static str| {
        Call::new(Method::POST, format!("/v1/jobs/{id}/pause"))
            .key(ALICE)
            .header("idempotency-key", k)
            .json(&json!({}))
    };
    let p1 = stack.api.call(pause("p-1")).await;
    let p2 = stack.api.call(pause("p-1")).await;
    assert_eq!(p1.status, StatusCode::OK);
    assert_eq!(p2.body, p1.body);
    assert_eq!(p2.headers["idempotent-replayed"], "true");
}
