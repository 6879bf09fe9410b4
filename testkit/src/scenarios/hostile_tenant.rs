//! What a hostile tenant's probe found (#32), each closed: a request that could be read two ways
//! is refused, and a caller without a run's callback token learns nothing about which runs
//! exist.

use crate::api::{ALICE, BOB, Call, job};
use crate::harness::Harness;
use http::{Method, StatusCode};
use serde_json::json;
use sundial_domain::target::headers::CALLBACK_TOKEN;

/// `If-Match` compares strongly (RFC 9110): a weak tag of the very version is 412, nothing
/// changes; the strong tag edits.
pub async fn a_weak_if_match_never_matches<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id = deployment.api().create_job(ALICE, &job("weak")).await;
    let patch = |tag: &str| {
        Call::new(Method::PATCH, format!("/v1/jobs/{id}"))
            .key(ALICE)
            .header("if-match", tag.to_string())
            .json(&json!({"payload": {"v": 2}}))
    };
    let weak = deployment.api().call(patch("W/\"1\"")).await;
    assert_eq!(weak.status, StatusCode::PRECONDITION_FAILED, "{}", weak.body);
    assert_eq!(weak.error_field(), "If-Match");
    assert_eq!(
        deployment.api().get(ALICE, &format!("/v1/jobs/{id}")).await.body["version"],
        1,
        "nothing changed"
    );
    let strong = deployment.api().call(patch("\"1\"")).await;
    assert_eq!(strong.status, StatusCode::OK, "{}", strong.body);
}

/// Two `Authorization` headers are refused, whichever comes first: which to believe would be a
/// guess (a proxy and the API could pick differently).
pub async fn two_authorization_headers_are_refused<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    for second in [BOB, ALICE] {
        let call =
            Call::new(Method::GET, "/v1/jobs").key(ALICE).header("authorization", format!("Bearer {second}"));
        let reply = deployment.api().call(call).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{}", reply.body);
        assert_eq!(reply.error_field(), "Authorization");
    }
}

/// A JSON merge patch may be sent as its registered media type (RFC 7396); other types are 415.
pub async fn a_merge_patch_is_taken_as_application_merge_patch_json<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id = deployment.api().create_job(ALICE, &job("merge")).await;
    let patch = |media: &str| {
        Call::new(Method::PATCH, format!("/v1/jobs/{id}"))
            .key(ALICE)
            .raw(media, serde_json::to_vec(&json!({"payload": {"v": media}})).unwrap())
    };
    let merged = deployment.api().call(patch("application/merge-patch+json")).await;
    assert_eq!(merged.status, StatusCode::OK, "{}", merged.body);
    assert_eq!(merged.body["payload"]["v"], "application/merge-patch+json");
    let text = deployment.api().call(patch("text/plain")).await;
    assert_eq!(text.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{}", text.body);
    assert_eq!(text.error_field(), "Content-Type");
}

/// Without the token of a run's open attempt, a callback gets one answer: for a run that
/// exists, one that does not, an id that names no run, and no token at all.
pub async fn callbacks_answer_alike_whether_the_run_exists_or_not<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id = deployment.api().create_job(ALICE, &job("callbacks")).await;
    let existing = deployment.trigger(&id).await.to_string();
    let missing = existing.replace(&id, "01jd0000000000000000000000");
    let mut answers = Vec::new();
    for (run, token) in [
        (existing.as_str(), Some("forged")),
        (missing.as_str(), Some("forged")),
        ("not-a-run", Some("forged")),
        (existing.as_str(), None),
    ] {
        for callback in ["heartbeat", "complete"] {
            let mut call = Call::new(Method::POST, format!("/v1/runs/{run}/{callback}"))
                .json(&json!({"succeeded": true}));
            if let Some(token) = token {
                call = call.header(CALLBACK_TOKEN, token);
            }
            let reply = deployment.api().call(call).await;
            answers.push((reply.status, reply.body.to_string()));
        }
    }
    assert_eq!(answers[0].0, StatusCode::UNAUTHORIZED, "{}", answers[0].1);
    assert!(answers.iter().all(|a| *a == answers[0]), "{answers:#?}");
}

/// A target URL names one host and a real port to every parser.
pub async fn a_target_url_that_reads_two_ways_is_refused<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    for url in ["http://a.example\\@10.0.0.1/", "http://user@a.example/", "https://a.example:0/hook"] {
        let mut body = job("two-ways");
        body["target"] = json!({"type": "http", "url": url});
        let reply = deployment.api().post(ALICE, "/v1/jobs", &body).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {}", reply.body);
        assert_eq!(reply.error_field(), "target.url", "{url}");
    }
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! hostile_tenant_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => hostile_tenant { a_weak_if_match_never_matches, two_authorization_headers_are_refused, a_merge_patch_is_taken_as_application_merge_patch_json, callbacks_answer_alike_whether_the_run_exists_or_not, a_target_url_that_reads_two_ways_is_refused });
    };
}
