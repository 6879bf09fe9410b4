//! `Idempotency-Key` on POST: replays return the first response, reuse with another body is 409.

use crate::api::{ALICE, BOB, Call, job};
use crate::harness::Harness;
use http::{Method, StatusCode};
use serde_json::json;

fn create<'a>(key: &'a str, idem: &str, body: &serde_json::Value) -> Call<'a> {
    Call::new(Method::POST, "/v1/jobs").key(key).header("idempotency-key", idem.to_string()).json(body)
}

/// The same request twice creates one job and answers the same both times.
pub async fn replay_returns_the_same_response<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let first = deployment.api().call(create(ALICE, "req-1", &job("once"))).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let second = deployment.api().call(create(ALICE, "req-1", &job("once"))).await;
    assert_eq!(second.status, StatusCode::CREATED, "{}", second.body);
    assert_eq!(second.body, first.body);
    assert_eq!(second.etag(), first.etag());
    assert_eq!(second.headers["location"], first.headers["location"]);
    assert_eq!(second.headers["idempotent-replayed"], "true");
    let list = deployment.api().get(ALICE, "/v1/jobs").await;
    assert_eq!(list.body["jobs"].as_array().unwrap().len(), 1);
}

/// The same key with a different body is a conflict and writes nothing.
pub async fn reuse_with_a_different_body_conflicts<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    deployment.api().call(create(ALICE, "req-2", &job("first"))).await;
    let reused = deployment.api().call(create(ALICE, "req-2", &job("second"))).await;
    assert_eq!(reused.status, StatusCode::CONFLICT, "{}", reused.body);
    assert_eq!(reused.body["error"]["code"], "idempotency_key_reused");
    assert_eq!(reused.error_field(), "Idempotency-Key");
    let list = deployment.api().get(ALICE, "/v1/jobs").await;
    assert_eq!(list.body["jobs"].as_array().unwrap().len(), 1);
}

/// Keys are per owner: Bob's request with Alice's key string is his own.
pub async fn keys_are_scoped_to_the_owner<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let a = deployment.api().call(create(ALICE, "same-key", &job("job"))).await;
    let b = deployment.api().call(create(BOB, "same-key", &job("job"))).await;
    assert_eq!(a.status, StatusCode::CREATED);
    assert_eq!(b.status, StatusCode::CREATED);
    assert_ne!(a.body["id"], b.body["id"]);
}

/// A rejected request is replayed as the same rejection; pause with a key is idempotent too.
pub async fn errors_replay_and_actions_are_covered<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let bad = json!({"name": "bad name", "target": {"type": "http", "url": "http://127.0.0.1:9/"}});
    let first = deployment.api().call(create(ALICE, "bad-1", &bad)).await;
    let second = deployment.api().call(create(ALICE, "bad-1", &bad)).await;
    assert_eq!(first.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(second.status, first.status);
    assert_eq!(second.body, first.body);

    let id = deployment.api().create_job(ALICE, &job("pausable")).await;
    let pause = |k: &'static str| {
        Call::new(Method::POST, format!("/v1/jobs/{id}/pause"))
            .key(ALICE)
            .header("idempotency-key", k)
            .json(&json!({}))
    };
    let p1 = deployment.api().call(pause("p-1")).await;
    let p2 = deployment.api().call(pause("p-1")).await;
    assert_eq!(p1.status, StatusCode::OK);
    assert_eq!(p2.body, p1.body);
    assert_eq!(p2.headers["idempotent-replayed"], "true");
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! idempotency_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => idempotency { replay_returns_the_same_response, reuse_with_a_different_body_conflicts, keys_are_scoped_to_the_owner, errors_replay_and_actions_are_covered });
    };
}
