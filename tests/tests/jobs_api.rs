//! The jobs API end to end against the emulator: lifecycle, pagination, merge patch with
//! optimistic locking, pause/resume and the due index, delete, preview.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use http::StatusCode;
use serde_json::json;
use sundial_tests::{ALICE, Stack, job};

/// create → get → merge-patch → stale If-Match → pause (leaves the due index) → resume →
/// delete: each step answers as documented and leaves the stored state it promises.
#[tokio::test]
async fn job_lifecycle() {
    let stack = Stack::new().await;
    let api = &stack.api;

    let created = api
        .post(
            ALICE,
            "/v1/jobs",
            &json!({
                "name": "nightly-report",
                "schedule": {"cron": "30 2 * * *", "timezone": "America/New_York"},
                "target": {"type": "http", "url": "https://reports.example.test/run", "method": "post",
                           "headers": {"Authorization": {"value": "Bearer t0ps3cret", "secret": true}}},
                "payload": {"report": "daily"},
                "retry": {"max_attempts": 5},
                "sla_s": 600
            }),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_string();
    assert_eq!(created.headers["location"], format!("/v1/jobs/{id}").as_str());
    assert_eq!(created.etag(), "\"1\"");
    assert_eq!(created.body["owner"], "alice");
    assert_eq!(created.body["version"], 1);
    assert_eq!(created.body["target"]["method"], "POST");
    assert_eq!(created.body["retry"], json!({"max_attempts": 5, "backoff_s": 10, "max_backoff_s": 3600}));
    assert_eq!(created.body["target"]["headers"]["Authorization"], json!({"secret": true}));
    assert!(!created.body.to_string().contains("t0ps3cret"), "secret leaked: {}", created.body);
    let next = created.body["next_run_at"].as_str().unwrap();
    assert!(next.ends_with(":30:00Z"), "02:30 New York is a :30 in UTC: {next}");
    assert_eq!(stack.due_index_ids().await, vec![id.clone()]);

    // The signing secret is shown once, at creation, with its Standard Webhooks form.
    let secret = created.body["signing_secret"].as_str().unwrap().to_string();
    assert_eq!(secret.len(), 64);
    assert!(created.body["webhook_secret"].as_str().unwrap().starts_with("whsec_"));
    let got = api.get(ALICE, &format!("/v1/jobs/{id}")).await;
    assert_eq!(got.status, StatusCode::OK);
    let mut without_secret = created.body.clone();
    without_secret.as_object_mut().unwrap().remove("signing_secret");
    without_secret.as_object_mut().unwrap().remove("webhook_secret");
    assert_eq!(got.body, without_secret);

    // A merge patch changes only what it names; secrets survive edits they do not touch.
    let patched = stack
        .api
        .call(
            sundial_tests::Call::new(http::Method::PATCH, format!("/v1/jobs/{id}"))
                .key(ALICE)
                .header("if-match", "\"1\"")
                .json(&json!({"payload": {"report": "weekly"}, "sla_s": null, "retry": {"backoff_s": 30}})),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.etag(), "\"2\"");
    assert_eq!(patched.body["payload"], json!({"report": "weekly"}));
    assert!(patched.body.get("sla_s").is_none());
    assert_eq!(patched.body["retry"]["max_attempts"], 5);
    assert_eq!(patched.body["retry"]["backoff_s"], 30);
    assert_eq!(patched.body["next_run_at"], created.body["next_run_at"], "schedule untouched");
    let items = stack.jobs_table_items().await;
    assert!(
        items.iter().any(|i| {
            i.get("document").and_then(|d| d.as_s().ok()).is_some_and(|d| d.contains("t0ps3cret"))
        })
    );

    // A stale If-Match is refused and changes nothing.
    let stale = stack
        .api
        .call(
            sundial_tests::Call::new(http::Method::PATCH, format!("/v1/jobs/{id}"))
                .key(ALICE)
                .header("if-match", "\"1\"")
                .json(&json!({"payload": {"report": "never"}})),
        )
        .await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED, "{}", stale.body);
    assert_eq!(stale.body["error"]["code"], "version_mismatch");
    let after = api.get(ALICE, &format!("/v1/jobs/{id}")).await;
    assert_eq!(after.body["payload"], json!({"report": "weekly"}));
    assert!(!after.body.to_string().contains(&secret), "the signing secret is shown only at creation");
    assert_eq!(after.body["version"], 2);

    // Pause: out of the due index, next_run_at shown as null.
    let paused = api.post(ALICE, &format!("/v1/jobs/{id}/pause"), &json!({})).await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
    assert_eq!(paused.body["paused"], true);
    assert_eq!(paused.body["next_run_at"], json!(null));
    assert_eq!(paused.body["version"], 3);
    assert!(stack.due_index_ids().await.is_empty());

    // Preview works while paused, in UTC and in the job's zone.
    let preview = api.get(ALICE, &format!("/v1/jobs/{id}/preview?count=3")).await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.body);
    assert_eq!(preview.body["timezone"], "America/New_York");
    let instants = preview.body["instants"].as_array().unwrap();
    assert_eq!(instants.len(), 3);
    for instant in instants {
        let local = instant["local"].as_str().unwrap();
        assert!(local.contains("T02:30:00-0") || local.contains("T03:00:00-04:00"), "{local}");
        assert!(instant["utc"].as_str().unwrap().ends_with('Z'));
    }

    // Resume: back in the index with a next run.
    let resumed = api.post(ALICE, &format!("/v1/jobs/{id}/resume"), &json!({})).await;
    assert_eq!(resumed.status, StatusCode::OK);
    assert_eq!(resumed.body["paused"], false);
    assert!(resumed.body["next_run_at"].is_string());
    assert_eq!(stack.due_index_ids().await, vec![id.clone()]);

    // Delete: gone, name free again, history (runs) untouched by design.
    let deleted = api.delete(ALICE, &format!("/v1/jobs/{id}")).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(api.get(ALICE, &format!("/v1/jobs/{id}")).await.status, StatusCode::NOT_FOUND);
    assert!(stack.due_index_ids().await.is_empty());
    api.create_job(ALICE, &job("nightly-report")).await;
}

/// Listing pages through every job exactly once, in name order, with `next` null at the end.
#[tokio::test]
async fn list_paginates() {
    let stack = Stack::new().await;
    let mut names: Vec<String> = (0..7).map(|i| format!("job-{i:02}")).collect();
    for name in &names {
        stack.api.create_job(ALICE, &job(name)).await;
    }
    stack.api.create_job(sundial_tests::BOB, &job("bobs-job")).await;

    let mut seen = Vec::new();
    let mut next: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &next {
            Some(token) => format!("/v1/jobs?limit=3&next={token}"),
            None => "/v1/jobs?limit=3".to_string(),
        };
        let page = stack.api.get(ALICE, &path).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        let jobs = page.body["jobs"].as_array().unwrap();
        assert!(jobs.len() <= 3);
        seen.extend(jobs.iter().map(|j| j["name"].as_str().unwrap().to_string()));
        pages += 1;
        match page.body["next"].as_str() {
            Some(token) => next = Some(token.to_string()),
            None => break,
        }
    }
    names.sort();
    assert_eq!(seen, names);
    assert_eq!(pages, 3);

    let bad = stack.api.get(ALICE, "/v1/jobs?next=garbage").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.error_field(), "next");
    let bad = stack.api.get(ALICE, "/v1/jobs?limit=0").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.error_field(), "limit");
}

/// Names are unique per owner, not globally; renaming frees the old name.
#[tokio::test]
async fn names_are_unique_per_owner() {
    let stack = Stack::new().await;
    let id = stack.api.create_job(ALICE, &job("shared-name")).await;
    let dup = stack.api.post(ALICE, "/v1/jobs", &job("shared-name")).await;
    assert_eq!(dup.status, StatusCode::CONFLICT);
    assert_eq!(dup.error_field(), "name");
    stack.api.create_job(sundial_tests::BOB, &job("shared-name")).await;

    let other = stack.api.create_job(ALICE, &job("other")).await;
    let clash = stack.api.patch(ALICE, &format!("/v1/jobs/{other}"), &json!({"name": "shared-name"})).await;
    assert_eq!(clash.status, StatusCode::CONFLICT, "{}", clash.body);
    let renamed = stack.api.patch(ALICE, &format!("/v1/jobs/{id}"), &json!({"name": "renamed"})).await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    stack.api.create_job(ALICE, &job("shared-name")).await;
}

/// The jobs-per-owner limit is exact and freed by deletes.
#[tokio::test]
async fn jobs_per_owner_limit() {
    let stack = Stack::with(sundial_tests::Options {
        vars: [("SUNDIAL_MAX_JOBS_PER_OWNER", "2".to_string())].into(),
        ..Default::default()
    })
    .await;
    let first = stack.api.create_job(ALICE, &job("a")).await;
    stack.api.create_job(ALICE, &job("b")).await;
    let third = stack.api.post(ALICE, "/v1/jobs", &job("c")).await;
    assert_eq!(third.status, StatusCode::FORBIDDEN, "{}", third.body);
    assert_eq!(third.body["error"]["code"], "quota_exceeded");
    stack.api.create_job(sundial_tests::BOB, &job("c")).await;
    assert_eq!(stack.api.delete(ALICE, &format!("/v1/jobs/{first}")).await.status, StatusCode::NO_CONTENT);
    stack.api.create_job(ALICE, &job("c")).await;
}

/// Changing the schedule moves next_run_at; a job without a schedule is due at once; a paused
/// job created paused stays out of the index.
#[tokio::test]
async fn next_run_follows_the_schedule() {
    let stack = Stack::new().await;
    let id = stack.api.create_job(ALICE, &job("moves")).await;
    let before = stack.api.get(ALICE, &format!("/v1/jobs/{id}")).await.body["next_run_at"].clone();
    let at = (chrono::Utc::now() + chrono::Duration::days(3)).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let moved = stack
        .api
        .patch(ALICE, &format!("/v1/jobs/{id}"), &json!({"schedule": {"cron": null, "at": at}}))
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.body);
    assert_eq!(moved.body["next_run_at"], json!(at));
    assert_ne!(moved.body["next_run_at"], before);

    // A job without a schedule runs once, now: the API claims it at once and it leaves the index.
    let now_job = stack
        .api
        .post(
            ALICE,
            "/v1/jobs",
            &json!({"name": "once-now", "target": {"type": "http", "url": "http://127.0.0.1:9/"}}),
        )
        .await;
    assert_eq!(now_job.status, StatusCode::CREATED);
    assert_eq!(now_job.body["next_run_at"], json!(null), "{}", now_job.body);
    let now_id = now_job.body["id"].as_str().unwrap();
    let runs = stack.runs_of(now_id).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state, sundial_domain::run::RunState::Queued);
    assert!(!stack.due_index_ids().await.contains(&now_id.to_string()));

    let mut paused = job("born-paused");
    paused["paused"] = json!(true);
    let paused_id = stack.api.create_job(ALICE, &paused).await;
    assert!(!stack.due_index_ids().await.contains(&paused_id));
}
