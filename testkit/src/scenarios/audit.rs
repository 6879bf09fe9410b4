//! The audit trail through the HTTP API: an editor's edit is recorded with the fields it changed,
//! old and new, and the editor's key; a rollback, a trigger with its own payload, a pause, a
//! group's and a calendar's changes and a key's life are recorded too, each with its action and
//! request id; a refused call records nothing; a revoked key's use is recorded; the trail is
//! filtered by job, actor, action and time and paged to its end; no secret ever appears in it.
//! Racing edits each land with exactly their own record.

use crate::api::{ALICE, BOB, Call, job};
use crate::harness::Harness;
use http::{Method, StatusCode};
use serde_json::{Value, json};

/// A call with `secret` as its bearer key.
fn with(secret: &str, method: Method, path: &str) -> Call<'static> {
    Call::new(method, path.to_string()).header("authorization", format!("Bearer {secret}"))
}

/// Every record `query` (`job=…&actor=…`, or empty) finds in `key`'s trail, newest first, read a
/// page of two at a time to the end.
async fn trail<H: Harness>(deployment: &H, key: &str, query: &str) -> Vec<Value> {
    let mut records = Vec::new();
    let mut next: Option<String> = None;
    for _ in 0..200 {
        let mut path = format!("/v1/audit?limit=2&{query}");
        if let Some(token) = &next {
            path.push_str(&format!("&next={token}"));
        }
        let page = deployment.api().get(key, &path).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.body);
        records.extend(page.body["records"].as_array().cloned().unwrap_or_default());
        match page.body["next"].as_str() {
            Some(token) => next = Some(token.to_string()),
            None => return records,
        }
    }
    panic!("the trail of {query} did not end within 200 pages");
}

/// The actions of `records`, newest first.
fn actions(records: &[Value]) -> Vec<&str> {
    records.iter().map(|r| r["action"].as_str().unwrap_or_default()).collect()
}

pub async fn every_change_is_recorded_with_who_what_and_when<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T12:00:00Z", &[]).await;
    let api = deployment.api();
    let secret_header = "s3cr3t-header-value";
    let mut body = job("nightly");
    body["retry"] = json!({"max_attempts": 3});
    body["target"]["headers"] = json!({"x-token": {"value": secret_header, "secret": true}});
    let created = api.post(ALICE, "/v1/jobs", &body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let id = created.body["id"].as_str().unwrap_or_default().to_string();
    let signing = created.body["signing_secret"].clone();
    assert!(signing.is_string(), "shown once, at creation: {}", created.body);

    // An editor's edit: the fields it changed, old and new, under the editor's key.
    let made = api.post(ALICE, "/v1/keys", &json!({"name": "ed", "role": "editor"})).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let editor = made.body["secret"].as_str().unwrap_or_default().to_string();
    let editor_id = made.body["id"].as_str().unwrap_or_default().to_string();
    let patch = json!({"retry": {"max_attempts": 5}, "target": {"headers": {"x-token": {"value": "n3w-s3cr3t", "secret": true}}}});
    let patched = api
        .call(
            with(&editor, Method::PATCH, &format!("/v1/jobs/{id}"))
                .json(&patch)
                .header("x-request-id", "req-42"),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let records = trail(&deployment, ALICE, &format!("job={id}")).await;
    assert_eq!(actions(&records), ["job.update", "job.create"], "{records:?}");
    let edit = &records[0];
    assert_eq!((&edit["actor"]["name"], &edit["actor"]["key_id"]), (&json!("ed"), &json!(editor_id)));
    assert_eq!((&edit["actor"]["kind"], &edit["request_id"]), (&json!("key"), &json!("req-42")));
    assert_eq!(edit["route"], "PATCH /v1/jobs/{id}");
    assert_eq!((&edit["target"]["kind"], &edit["target"]["name"]), (&json!("job"), &json!("nightly")));
    assert_eq!(edit["at"], "2030-01-01T12:00:00Z");
    let retry = edit["changes"].as_array().into_iter().flatten().find(|c| c["field"] == "retry.max_attempts");
    assert_eq!(retry, Some(&json!({"field": "retry.max_attempts", "old": 3, "new": 5})), "{edit}");
    // The secret header's new value: named, never shown.
    let header = edit["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["field"] == "target.headers.x-token.value");
    assert_eq!(
        header,
        Some(&json!({"field": "target.headers.x-token.value", "old": "<secret>", "new": "<secret>"})),
        "{edit}"
    );
    assert_eq!(records[1]["actor"], json!({"kind": "configured_key", "name": "alice"}));

    // A rollback to version 1 restores the document, and is recorded.
    let rolled = api.post(ALICE, &format!("/v1/jobs/{id}/rollback"), &json!({"version": 1})).await;
    assert_eq!(rolled.status, StatusCode::OK, "{}", rolled.body);
    assert_eq!(rolled.body["retry"]["max_attempts"], 3, "{}", rolled.body);
    let records = trail(&deployment, ALICE, &format!("job={id}&action=job.rollback")).await;
    assert_eq!(records.len(), 1, "{records:?}");
    let back =
        records[0]["changes"].as_array().into_iter().flatten().find(|c| c["field"] == "retry.max_attempts");
    assert_eq!(back.map(|c| (&c["old"], &c["new"])), Some((&json!(5), &json!(3))));

    // A trigger with its own payload, a pause and a resume: each recorded with its action.
    let triggered = api.post(ALICE, &format!("/v1/jobs/{id}/trigger"), &json!({"payload": {"day": 7}})).await;
    assert_eq!(triggered.status, StatusCode::ACCEPTED, "{}", triggered.body);
    assert_eq!(api.post(ALICE, &format!("/v1/jobs/{id}/pause"), &json!({})).await.status, StatusCode::OK);
    assert_eq!(api.post(ALICE, &format!("/v1/jobs/{id}/resume"), &json!({})).await.status, StatusCode::OK);
    let records = trail(&deployment, ALICE, &format!("job={id}")).await;
    assert_eq!(actions(&records)[..3], ["job.resume", "job.pause", "job.trigger"], "{records:?}");
    assert_eq!(records[2]["target"]["kind"], "run");
    assert_eq!(records[2]["target"]["id"], triggered.body["id"]);
    // The run's own payload: that one was given, and its size, never its content.
    assert_eq!(
        records[2]["changes"],
        json!([{"field": "payload", "old": null, "new": {"given": true, "bytes": 9}}])
    );

    // A group's and a calendar's changes.
    assert_eq!(api.put(ALICE, "/v1/groups/etl", &json!({"max_running": 2})).await.status, StatusCode::OK);
    assert_eq!(api.put(ALICE, "/v1/groups/etl", &json!({"max_running": 4})).await.status, StatusCode::OK);
    let calendar = api.put(ALICE, "/v1/calendars/holidays", &json!({"holidays": ["2030-12-25"]})).await;
    assert_eq!(calendar.status, StatusCode::CREATED, "{}", calendar.body);
    assert_eq!(api.delete(ALICE, "/v1/calendars/holidays").await.status, StatusCode::NO_CONTENT);
    let groups = trail(&deployment, ALICE, "action=group.put").await;
    let limit = |r: &Value| (r["changes"][0]["old"].clone(), r["changes"][0]["new"].clone());
    assert_eq!(groups.iter().map(limit).collect::<Vec<_>>(), [(json!(2), json!(4)), (Value::Null, json!(2))]);
    let calendars = trail(&deployment, ALICE, "actor=alice").await;
    let calendar_actions: Vec<&str> =
        actions(&calendars).into_iter().filter(|a| a.starts_with("calendar.")).collect();
    assert_eq!(calendar_actions, ["calendar.delete", "calendar.put"]);

    // A refused call records nothing.
    let viewer = api.post(ALICE, "/v1/keys", &json!({"name": "watcher", "role": "viewer"})).await.body;
    let viewer_secret = viewer["secret"].as_str().unwrap_or_default().to_string();
    let viewer_id = viewer["id"].as_str().unwrap_or_default().to_string();
    // A viewer reads the trail, but not the life of keys (an admin's to read, as keys are).
    let seen = api.call(with(&viewer_secret, Method::GET, "/v1/audit?limit=50")).await;
    assert_eq!(seen.status, StatusCode::OK, "{}", seen.body);
    let seen_actions = actions(seen.body["records"].as_array().map_or(&[][..], Vec::as_slice));
    assert!(seen_actions.contains(&"job.update"), "{seen_actions:?}");
    assert!(!seen_actions.iter().any(|a| a.starts_with("key.")), "{seen_actions:?}");
    let before = trail(&deployment, ALICE, "").await.len();
    let refused = api
        .call(with(&viewer_secret, Method::POST, &format!("/v1/jobs/{id}/trigger")).json(&json!({})))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert_eq!(trail(&deployment, ALICE, "").await.len(), before, "a refused trigger is no change");

    // A revoked key: its revocation recorded, and its use after (refused, 401) too.
    assert_eq!(api.delete(ALICE, &format!("/v1/keys/{viewer_id}")).await.status, StatusCode::NO_CONTENT);
    let after = api.call(with(&viewer_secret, Method::GET, "/v1/jobs")).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED, "{}", after.body);
    let records = trail(&deployment, ALICE, &format!("actor={viewer_id}")).await;
    assert_eq!(actions(&records), ["key.refused"], "{records:?}");
    assert_eq!(records[0]["route"], "GET /v1/jobs");
    let revoked = trail(&deployment, ALICE, "action=key.revoke").await;
    assert_eq!(revoked[0]["target"]["name"], "watcher");
    assert_eq!(revoked[0]["changes"].as_array().map(Vec::len), Some(1), "revoked_at, from none: {revoked:?}");

    // Time bounds, another owner's trail, and bad queries.
    let none = trail(&deployment, ALICE, "from=2030-01-01T12:00:01Z").await;
    assert!(none.is_empty(), "{none:?}");
    let all = trail(&deployment, ALICE, "to=2030-01-01T12:00:01Z").await;
    assert_eq!(all.len(), trail(&deployment, ALICE, "").await.len());
    assert!(trail(&deployment, BOB, "").await.is_empty(), "Bob's trail is his own");
    let other_query = api.get(ALICE, "/v1/audit?limit=1&action=job.update").await.body["next"].clone();
    let carried = format!("next={}", other_query.as_str().unwrap_or("none"));
    let upside_down = "from=2030-01-01T12:00:00Z&to=2030-01-01T11:00:00Z";
    for (query, field) in [
        ("job=nope", "job"),
        ("from=yesterday", "from"),
        (upside_down, "to"),
        (carried.as_str(), "next"),
        ("limit=0", "limit"),
        ("next=forged", "next"),
        ("who=me", "who"),
    ] {
        let bad = api.get(ALICE, &format!("/v1/audit?{query}")).await;
        assert_eq!(
            (bad.status, bad.error_field()),
            (StatusCode::BAD_REQUEST, field),
            "{query}: {}",
            bad.body
        );
    }

    // No secret anywhere in the trail, nor in a log line: not a key's, a header's, nor the job's
    // signing secret; and none in a response after the one that made it.
    crate::logs::capture();
    let text = serde_json::to_string(&trail(&deployment, ALICE, "").await).unwrap_or_default();
    let logs = crate::logs::captured();
    let job = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body.to_string();
    let keys = api.get(ALICE, "/v1/keys").await.body.to_string();
    let mut secrets = vec![editor.as_str(), viewer_secret.as_str(), secret_header, "n3w-s3cr3t"];
    secrets.extend(signing.as_str());
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} in the trail");
        assert!(!logs.contains(secret), "{secret} in a log line");
        assert!(!job.contains(secret), "{secret} in the job");
        assert!(!keys.contains(secret), "{secret} in the keys' list");
    }
}

/// Edits racing each other each land with exactly their own record: as many `job.update`
/// records as edits won, each naming the version its edit made, none twice.
pub async fn racing_edits_each_land_with_their_own_record<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T12:00:00Z", &[]).await;
    let api = deployment.api();
    let id = api.create_job(ALICE, &job("raced")).await;
    let edits = (1..=6).map(|n| {
        let path = format!("/v1/jobs/{id}");
        async move { api.patch(ALICE, &path, &json!({"description": format!("edit {n}")})).await }
    });
    let replies = futures::future::join_all(edits).await;
    let won = replies.iter().filter(|r| r.status == StatusCode::OK).count();
    let statuses: Vec<StatusCode> = replies.iter().map(|r| r.status).collect();
    assert!(won > 0, "{statuses:?}");
    let records = trail(&deployment, ALICE, &format!("job={id}&action=job.update")).await;
    assert_eq!(records.len(), won, "{records:?}");
    let mut versions: Vec<u64> = records.iter().filter_map(|r| r["version"].as_u64()).collect();
    versions.sort_unstable();
    let expected: Vec<u64> = (2..2 + won as u64).collect();
    assert_eq!(versions, expected, "each record names the version its edit made");
    let job = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body;
    assert_eq!(job["version"], 1 + won as u64, "{job}");
}

/// A job's Slack webhook and PagerDuty routing key are write-only: no response shows them, a
/// merge patch that leaves them out keeps them, a document without them is refused naming the field,
/// and the trail names a changed one without its value.
pub async fn alert_channel_secrets_are_write_only<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T12:00:00Z", &[]).await;
    let api = deployment.api();
    let (hook, key) = ("https://hooks.slack.test/services/T0/B0/w3bh00k", "r0ut1ngk3y000000000000000000000a");
    let mut body = job("paged");
    body["notify"] = json!({"slack": {"webhook_url": hook}, "pagerduty": {"routing_key": key}});
    let created = api.post(ALICE, "/v1/jobs", &body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let id = created.body["id"].as_str().unwrap_or_default().to_string();
    let shown = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body;
    assert_eq!(shown["notify"]["slack"], json!({}), "{shown}");
    assert_eq!(shown["notify"]["pagerduty"], json!({"severity": "error"}), "{shown}");
    for reply in [&created.body, &shown] {
        let text = reply.to_string();
        assert!(!text.contains("w3bh00k") && !text.contains("r0ut1ngk3y"), "{text}");
    }

    // A merge patch of `notify.on` keeps both secrets; one of a new webhook changes it.
    let patched = api.patch(ALICE, &format!("/v1/jobs/{id}"), &json!({"notify": {"on": ["failed"]}})).await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let new_hook = "https://hooks.slack.test/services/T0/B0/n3wh00k";
    let patch = json!({"notify": {"slack": {"webhook_url": new_hook}}});
    assert_eq!(api.patch(ALICE, &format!("/v1/jobs/{id}"), &patch).await.status, StatusCode::OK);
    let stored = deployment.stored_job(&id).await.and_then(|j| j.document.notify).unwrap_or_default();
    assert_eq!(stored.slack.and_then(|s| s.webhook_url).as_deref(), Some(new_hook));
    assert_eq!(stored.pagerduty.and_then(|p| p.routing_key).as_deref(), Some(key));
    assert_eq!(stored.on, [sundial_domain::job::EventKind::Failed]);

    // What a GET showed, created anew, lacks the secrets: refused, naming the field; so is a
    // patch that removes one. Nothing changes.
    let mut copy = job("copy");
    copy["notify"] = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body["notify"].clone();
    let refused = api.post(ALICE, "/v1/jobs", &copy).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    assert_eq!(refused.body["error"]["field"], "notify.slack.webhook_url", "{}", refused.body);
    let removing = json!({"notify": {"pagerduty": {"routing_key": null}}});
    let refused = api.patch(ALICE, &format!("/v1/jobs/{id}"), &removing).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
    assert_eq!(refused.body["error"]["field"], "notify.pagerduty.routing_key", "{}", refused.body);
    let kept = deployment.stored_job(&id).await.and_then(|j| j.document.notify).unwrap_or_default();
    assert_eq!(kept.pagerduty.and_then(|p| p.routing_key).as_deref(), Some(key));

    let records = trail(&deployment, ALICE, &format!("job={id}")).await;
    let text = serde_json::to_string(&records).unwrap_or_default();
    assert!(!text.contains("h00k") && !text.contains("r0ut1ngk3y"), "no secret in the trail: {text}");
    let named = records[0]["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["field"] == "notify.slack.webhook_url");
    assert_eq!(
        named.map(|c| (&c["old"], &c["new"])),
        Some((&json!("<secret>"), &json!("<secret>"))),
        "{records:?}"
    );
}

#[macro_export]
macro_rules! audit_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => audit {
            alert_channel_secrets_are_write_only,
            every_change_is_recorded_with_who_what_and_when,
            racing_edits_each_land_with_their_own_record
        });
    };
}
