//! API keys and roles through the HTTP API: an admin makes a key of each role, its secret shown
//! once and never again; a viewer reads and is refused a trigger (403 naming `operator`), which
//! changes nothing; an operator triggers; a revoked key is refused by the next request; an
//! expired key too; bad documents name their field; another owner cannot see or revoke a key.

use crate::api::{ALICE, BOB, Call, job};
use crate::harness::Harness;
use chrono::Duration;
use http::{Method, StatusCode};
use serde_json::{Value, json};

/// A call with `secret` as its bearer key.
fn with(secret: &str, method: Method, path: &str) -> Call<'static> {
    Call::new(method, path.to_string()).header("authorization", format!("Bearer {secret}"))
}

pub async fn keys_carry_roles_and_are_refused_once_revoked_or_expired<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T12:00:00Z", &[]).await;
    let api = deployment.api();
    let id = api.create_job(ALICE, &job("nightly")).await;
    let make = |name: &str, role: &str, expires: Option<&str>| {
        let mut body = json!({"name": name, "role": role});
        if let Some(at) = expires {
            body["expires_at"] = json!(at);
        }
        body
    };
    let made = api.post(ALICE, "/v1/keys", &make("ci-viewer", "viewer", None)).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let viewer = made.body["secret"].as_str().unwrap_or_default().to_string();
    let viewer_id = made.body["id"].as_str().unwrap_or_default().to_string();
    assert!(viewer.starts_with("sdl_"), "{}", made.body);
    assert_eq!((&made.body["role"], &made.body["created_by"]), (&json!("viewer"), &json!("alice")));

    // A viewer reads, and is refused what an operator may do: nothing changes.
    let read = api.call(with(&viewer, Method::GET, "/v1/jobs")).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.body);
    let before = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body;
    let runs_before = api.get(ALICE, &format!("/v1/jobs/{id}/runs")).await.body;
    let trigger = with(&viewer, Method::POST, &format!("/v1/jobs/{id}/trigger")).json(&json!({}));
    let refused = api.call(trigger).await;
    assert_eq!((refused.status, refused.error_field()), (StatusCode::FORBIDDEN, "role"), "{}", refused.body);
    let message = refused.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("needs the operator role") && message.contains("viewer"), "{message}");
    let runs = api.get(ALICE, &format!("/v1/jobs/{id}/runs")).await.body;
    assert_eq!(runs, runs_before, "a refused trigger makes no run");
    assert_eq!(api.get(ALICE, &format!("/v1/jobs/{id}")).await.body, before, "nor changes the job");
    let keys = api.call(with(&viewer, Method::GET, "/v1/keys")).await;
    assert_eq!((keys.status, keys.error_field()), (StatusCode::FORBIDDEN, "role"), "keys are an admin's");

    // An operator, made by the admin, triggers; the key that did is what lists name.
    let operator = api.post(ALICE, "/v1/keys", &make("on-call", "operator", None)).await.body;
    let operator = operator["secret"].as_str().unwrap_or_default().to_string();
    let triggered =
        api.call(with(&operator, Method::POST, &format!("/v1/jobs/{id}/trigger")).json(&json!({}))).await;
    assert_eq!(triggered.status, StatusCode::ACCEPTED, "{}", triggered.body);

    // The list shows every key, never a secret or a digest, with their last use.
    let listed = api.get(ALICE, "/v1/keys").await;
    let text = listed.body.to_string();
    assert!(!text.contains(&viewer) && !text.contains(&operator) && !text.contains("digest"), "{text}");
    let names: Vec<&Value> =
        listed.body["keys"].as_array().into_iter().flatten().map(|k| &k["name"]).collect();
    assert_eq!(names, [&json!("ci-viewer"), &json!("on-call")]);
    assert_eq!(listed.body["keys"][0]["last_used_at"], "2030-01-01T12:00:00Z", "{}", listed.body);
    assert_eq!(api.get(BOB, "/v1/keys").await.body["keys"], json!([]), "Bob's list is his own");
    let bobs = api.delete(BOB, &format!("/v1/keys/{viewer_id}")).await;
    assert_eq!(bobs.status, StatusCode::NOT_FOUND, "Bob cannot revoke Alice's key");

    // Revoked: the next request is refused.
    assert_eq!(api.delete(ALICE, &format!("/v1/keys/{viewer_id}")).await.status, StatusCode::NO_CONTENT);
    let after = api.call(with(&viewer, Method::GET, "/v1/jobs")).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED, "{}", after.body);
    assert_eq!(api.delete(ALICE, &format!("/v1/keys/{viewer_id}")).await.status, StatusCode::NOT_FOUND);

    // Expired: refused from its expiry on.
    let brief =
        api.post(ALICE, "/v1/keys", &make("brief", "viewer", Some("2030-01-01T13:00:00Z"))).await.body;
    let brief = brief["secret"].as_str().unwrap_or_default().to_string();
    assert_eq!(api.call(with(&brief, Method::GET, "/v1/jobs")).await.status, StatusCode::OK);
    deployment.set_clock(
        chrono::DateTime::parse_from_rfc3339("2030-01-01T13:00:00Z").unwrap().to_utc() + Duration::seconds(1),
    );
    assert_eq!(api.call(with(&brief, Method::GET, "/v1/jobs")).await.status, StatusCode::UNAUTHORIZED);
    // A secret of the right shape under a real key's id, but not its own.
    let forged =
        format!("{}{}", &operator[..operator.len() - 1], if operator.ends_with('0') { "1" } else { "0" });
    assert_eq!(api.call(with(&forged, Method::GET, "/v1/jobs")).await.status, StatusCode::UNAUTHORIZED);

    // A replay of a key's creation shows the key, never its secret again (the secret is stored
    // nowhere, not even with the replay).
    let keyed = || {
        Call::new(Method::POST, "/v1/keys")
            .key(ALICE)
            .json(&make("replayed", "viewer", None))
            .header("idempotency-key", "make-replayed")
    };
    let first = api.call(keyed()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert!(first.body["secret"].is_string());
    let again = api.call(keyed()).await;
    assert_eq!((again.status, &again.body["id"]), (StatusCode::CREATED, &first.body["id"]), "{}", again.body);
    assert!(again.body.get("secret").is_none(), "{}", again.body);
    let replayed_id = first.body["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(api.delete(ALICE, &format!("/v1/keys/{replayed_id}")).await.status, StatusCode::NO_CONTENT);

    // A key made by a key that expires expires no later.
    let temp =
        api.post(ALICE, "/v1/keys", &make("temp-admin", "admin", Some("2030-01-01T15:00:00Z"))).await.body;
    let temp_secret = temp["secret"].as_str().unwrap_or_default().to_string();
    let (temp_id, _) = (temp["id"].as_str().unwrap_or_default().to_string(), ());
    let made_by_temp =
        api.call(with(&temp_secret, Method::POST, "/v1/keys").json(&make("child", "viewer", None))).await;
    assert_eq!(made_by_temp.status, StatusCode::CREATED, "{}", made_by_temp.body);
    assert_eq!(made_by_temp.body["expires_at"], "2030-01-01T15:00:00Z", "capped at its maker's");
    assert_eq!(made_by_temp.body["created_by"], "temp-admin");
    let later = api
        .call(with(&temp_secret, Method::POST, "/v1/keys").json(&make(
            "later",
            "viewer",
            Some("2030-02-01T00:00:00Z"),
        )))
        .await;
    assert_eq!(
        (later.status, later.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "expires_at"),
        "{}",
        later.body
    );
    let child_id = made_by_temp.body["id"].as_str().unwrap_or_default().to_string();
    for id in [&child_id, &temp_id] {
        assert_eq!(api.delete(ALICE, &format!("/v1/keys/{id}")).await.status, StatusCode::NO_CONTENT);
    }

    // Bad documents name their field and make no key.
    let cases = [
        (json!({"name": "a b", "role": "viewer"}), StatusCode::UNPROCESSABLE_ENTITY, "name"),
        (json!({"name": "k", "role": "root"}), StatusCode::BAD_REQUEST, "role"),
        (
            json!({"name": "k", "role": "viewer", "expires_at": "2029-01-01T00:00:00Z"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "expires_at",
        ),
        (json!({"name": "k"}), StatusCode::BAD_REQUEST, "role"),
        (json!({"name": "k", "role": "viewer", "scopes": []}), StatusCode::BAD_REQUEST, "scopes"),
    ];
    for (body, status, field) in cases {
        let reply = api.post(ALICE, "/v1/keys", &body).await;
        assert_eq!((reply.status, reply.error_field()), (status, field), "{body}: {}", reply.body);
    }
    let count = api.get(ALICE, "/v1/keys").await.body["keys"].as_array().map_or(0, Vec::len);
    assert_eq!(count, 2, "on-call and brief only");
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! keys_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => keys { keys_carry_roles_and_are_refused_once_revoked_or_expired });
    };
}
