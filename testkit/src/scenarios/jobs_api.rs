//! The jobs API end to end against the emulator: lifecycle, pagination, merge patch with
//! optimistic locking, pause/resume and the due index, delete, preview.

use crate::api::{ALICE, job};
use crate::harness::Harness;
use http::StatusCode;
use serde_json::json;

/// create → get → merge-patch → stale If-Match → pause (leaves the due index) → resume →
/// delete: each step answers as documented and leaves the stored state it promises.
pub async fn job_lifecycle<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let api = deployment.api();

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
    assert_eq!(deployment.due_job_ids().await, vec![id.clone()]);

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
    let patched = deployment
        .api()
        .call(
            crate::api::Call::new(http::Method::PATCH, format!("/v1/jobs/{id}"))
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
    let stored = deployment.stored_job(&id).await.unwrap();
    let document = serde_json::to_string(&stored.document).unwrap();
    assert!(document.contains("t0ps3cret"), "the secret is kept for the target: {document}");

    // A stale If-Match is refused and changes nothing.
    let stale = deployment
        .api()
        .call(
            crate::api::Call::new(http::Method::PATCH, format!("/v1/jobs/{id}"))
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
    assert!(deployment.due_job_ids().await.is_empty());

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
    assert_eq!(deployment.due_job_ids().await, vec![id.clone()]);

    // Delete: gone, name free again, history (runs) untouched by design.
    let deleted = api.delete(ALICE, &format!("/v1/jobs/{id}")).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(api.get(ALICE, &format!("/v1/jobs/{id}")).await.status, StatusCode::NOT_FOUND);
    assert!(deployment.due_job_ids().await.is_empty());
    api.create_job(ALICE, &job("nightly-report")).await;
}

/// Listing pages through every job exactly once, in name order, with `next` null at the end.
pub async fn list_paginates<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let mut names: Vec<String> = (0..7).map(|i| format!("job-{i:02}")).collect();
    for name in &names {
        deployment.api().create_job(ALICE, &job(name)).await;
    }
    deployment.api().create_job(crate::api::BOB, &job("bobs-job")).await;

    let mut seen = Vec::new();
    let mut next: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &next {
            Some(token) => format!("/v1/jobs?limit=3&next={token}"),
            None => "/v1/jobs?limit=3".to_string(),
        };
        let page = deployment.api().get(ALICE, &path).await;
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

    let bad = deployment.api().get(ALICE, "/v1/jobs?next=garbage").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.error_field(), "next");
    let bad = deployment.api().get(ALICE, "/v1/jobs?limit=0").await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad.error_field(), "limit");
}

/// Names are unique per owner, not globally; renaming frees the old name.
pub async fn names_are_unique_per_owner<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id = deployment.api().create_job(ALICE, &job("shared-name")).await;
    let dup = deployment.api().post(ALICE, "/v1/jobs", &job("shared-name")).await;
    assert_eq!(dup.status, StatusCode::CONFLICT);
    assert_eq!(dup.error_field(), "name");
    deployment.api().create_job(crate::api::BOB, &job("shared-name")).await;

    let other = deployment.api().create_job(ALICE, &job("other")).await;
    let clash =
        deployment.api().patch(ALICE, &format!("/v1/jobs/{other}"), &json!({"name": "shared-name"})).await;
    assert_eq!(clash.status, StatusCode::CONFLICT, "{}", clash.body);
    let renamed = deployment.api().patch(ALICE, &format!("/v1/jobs/{id}"), &json!({"name": "renamed"})).await;
    assert_eq!(renamed.status, StatusCode::OK, "{}", renamed.body);
    deployment.api().create_job(ALICE, &job("shared-name")).await;
}

/// The jobs-per-owner limit is exact and freed by deletes.
pub async fn jobs_per_owner_limit<H: Harness>() {
    let deployment = H::deploy(&[("SUNDIAL_MAX_JOBS_PER_OWNER", "2")]).await;
    let first = deployment.api().create_job(ALICE, &job("a")).await;
    deployment.api().create_job(ALICE, &job("b")).await;
    let third = deployment.api().post(ALICE, "/v1/jobs", &job("c")).await;
    assert_eq!(third.status, StatusCode::FORBIDDEN, "{}", third.body);
    assert_eq!(third.body["error"]["code"], "quota_exceeded");
    deployment.api().create_job(crate::api::BOB, &job("c")).await;
    assert_eq!(
        deployment.api().delete(ALICE, &format!("/v1/jobs/{first}")).await.status,
        StatusCode::NO_CONTENT
    );
    deployment.api().create_job(ALICE, &job("c")).await;
}

/// Changing the schedule moves next_run_at; a job without a schedule is due at once; a paused
/// job created paused stays out of the index.
pub async fn next_run_follows_the_schedule<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id = deployment.api().create_job(ALICE, &job("moves")).await;
    let before = deployment.api().get(ALICE, &format!("/v1/jobs/{id}")).await.body["next_run_at"].clone();
    let at = (chrono::Utc::now() + chrono::Duration::days(3)).format("%Y-%m-%dT%H:%M:%SZ").to_string();
    let moved = deployment
        .api()
        .patch(ALICE, &format!("/v1/jobs/{id}"), &json!({"schedule": {"cron": null, "at": at}}))
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.body);
    assert_eq!(moved.body["next_run_at"], json!(at));
    assert_ne!(moved.body["next_run_at"], before);

    // A job without a schedule runs once, now: the API claims it at once and it leaves the index.
    let now_job = deployment
        .api()
        .post(
            ALICE,
            "/v1/jobs",
            &json!({"name": "once-now", "target": {"type": "http", "url": "http://127.0.0.1:9/"}}),
        )
        .await;
    assert_eq!(now_job.status, StatusCode::CREATED);
    assert_eq!(now_job.body["next_run_at"], json!(null), "{}", now_job.body);
    let now_id = now_job.body["id"].as_str().unwrap();
    let runs = deployment.runs_of(now_id).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].state, sundial_domain::run::RunState::Queued);
    assert!(!deployment.due_job_ids().await.contains(&now_id.to_string()));

    let mut paused = job("born-paused");
    paused["paused"] = json!(true);
    let paused_id = deployment.api().create_job(ALICE, &paused).await;
    assert!(!deployment.due_job_ids().await.contains(&paused_id));
}

/// Every page of a listing of `query`, followed to its end: the names, in order.
async fn names_of_every_page<H: Harness>(deployment: &H, query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut path = format!("/v1/jobs?{query}");
    for _ in 0..20 {
        let page = deployment.api().get(ALICE, &path).await;
        assert_eq!(page.status, StatusCode::OK, "{query}: {}", page.body);
        let jobs = page.body["jobs"].as_array().cloned().unwrap_or_default();
        names.extend(jobs.iter().map(|j| j["name"].as_str().unwrap_or_default().to_string()));
        match page.body["next"].as_str() {
            Some(next) => path = format!("/v1/jobs?{query}&next={next}"),
            None => return names,
        }
    }
    panic!("{query}: more than 20 pages");
}

/// Listings filtered by tags, state, group and text, page after page: exactly the jobs they
/// select, in name order; a bad filter is a 400 naming it; a token continues only its own filter.
pub async fn listings_filter_by_tags_state_group_and_text<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let api = deployment.api();
    assert_eq!(api.put(ALICE, "/v1/groups/etl", &json!({"max_running": 2})).await.status, StatusCode::OK);
    let labelled = |name: &str, tags: serde_json::Value, description: &str| {
        let mut document = job(name);
        document["tags"] = tags;
        document["description"] = json!(description);
        document
    };
    for (name, tags, description) in [
        ("a-invoices", json!({"team": "billing", "env": "prod"}), "Sends the monthly invoices"),
        ("b-ledger", json!({"team": "billing"}), "Closes the ledger"),
        ("c-report", json!({"team": "growth"}), "Weekly signups REPORT"),
        ("d-dunning", json!({"team": "billing", "env": "staging"}), "Reminds late payers"),
        ("e-cleanup", json!({}), "Deletes old files"),
        ("f-refunds", json!({"team": "billing"}), "Refunds, nightly"),
    ] {
        api.create_job(ALICE, &labelled(name, tags, description)).await;
    }
    let mut grouped = labelled("g-export", json!({"team": "data"}), "Exports to the lake");
    grouped["group"] = json!("etl");
    api.create_job(ALICE, &grouped).await;
    let mut paused = labelled("h-archive", json!({"team": "billing"}), "Archives statements");
    paused["paused"] = json!(true);
    api.create_job(ALICE, &paused).await;
    api.create_job(crate::api::BOB, &labelled("bobs-billing", json!({"team": "billing"}), "not Alice's"))
        .await;

    let billing = ["a-invoices", "b-ledger", "d-dunning", "f-refunds", "h-archive"];
    assert_eq!(names_of_every_page(&deployment, "tag=team:billing&limit=2").await, billing, "across pages");
    assert_eq!(
        names_of_every_page(&deployment, "tag=team:billing&tag=env:prod").await,
        ["a-invoices"],
        "every tag"
    );
    assert_eq!(names_of_every_page(&deployment, "tag=team:billing&state=paused").await, ["h-archive"]);
    let active: Vec<&str> = billing.iter().copied().filter(|n| *n != "h-archive").collect();
    assert_eq!(names_of_every_page(&deployment, "tag=team:billing&state=active&limit=1").await, active);
    assert_eq!(names_of_every_page(&deployment, "group=etl").await, ["g-export"]);
    assert_eq!(
        names_of_every_page(&deployment, "q=report&limit=1").await,
        ["c-report"],
        "name or description, any case"
    );
    assert_eq!(names_of_every_page(&deployment, "q=nightly").await, ["f-refunds"]);
    assert_eq!(
        names_of_every_page(&deployment, "state=failing").await,
        Vec::<String>::new(),
        "none has failed"
    );
    // One whose newest run failed is failing.
    let mut failing = labelled("i-flaky", json!({"team": "billing"}), "Fails");
    failing["schedule"] = json!({"cron": "0 0 1 1 *"});
    failing["target"] = json!({"type": "http", "url": deployment.target_url()});
    failing["retry"] = json!({"max_attempts": 1});
    let flaky = api.create_job(ALICE, &failing).await;
    deployment.answer_next(&[500]);
    let run = deployment.trigger(&flaky).await;
    assert_eq!(deployment.drive(&run, 30).await.state, sundial_domain::run::RunState::Failed);
    assert_eq!(names_of_every_page(&deployment, "state=failing").await, ["i-flaky"]);
    assert_eq!(names_of_every_page(&deployment, "tag=team:billing&state=failing&limit=1").await, ["i-flaky"]);
    assert_eq!(names_of_every_page(&deployment, "tag=team:nobody").await, Vec::<String>::new());

    for (query, field) in [("tag=team", "tag"), ("tag=Team:x", "tag"), ("state=sleeping", "state")] {
        let reply = api.get(ALICE, &format!("/v1/jobs?{query}")).await;
        assert_eq!(
            (reply.status, reply.error_field()),
            (StatusCode::BAD_REQUEST, field),
            "{query}: {}",
            reply.body
        );
    }
    let first = api.get(ALICE, "/v1/jobs?tag=team:billing&limit=1").await.body;
    let next = first["next"].as_str().unwrap_or_default();
    let crossed = api.get(ALICE, &format!("/v1/jobs?tag=team:growth&next={next}")).await;
    assert_eq!(
        (crossed.status, crossed.error_field()),
        (StatusCode::BAD_REQUEST, "next"),
        "{}",
        crossed.body
    );

    let long = json!({"description": "d".repeat(1001)});
    let mut bad = job("too-long");
    bad["description"] = long["description"].clone();
    let reply = api.post(ALICE, "/v1/jobs", &bad).await;
    assert_eq!(
        (reply.status, reply.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "description"),
        "{}",
        reply.body
    );
    let mut bad = job("bad-tag");
    bad["tags"] = json!({"Team": "x"});
    let reply = api.post(ALICE, "/v1/jobs", &bad).await;
    assert_eq!(
        (reply.status, reply.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "tags.Team"),
        "{}",
        reply.body
    );
    let tags: serde_json::Map<String, serde_json::Value> =
        (0..21).map(|i| (format!("k{i}"), json!("v"))).collect();
    let mut bad = job("many-tags");
    bad["tags"] = serde_json::Value::Object(tags);
    let reply = api.post(ALICE, "/v1/jobs", &bad).await;
    assert_eq!(
        (reply.status, reply.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "tags"),
        "{}",
        reply.body
    );
}

/// A job's history: every edit of its document is a version kept, listed newest first with the
/// fields it changed; a version's document reads back (secrets as secret); two versions compare
/// field by field, old and new; a rollback makes a new version equal to an old one (its secret
/// header restored), under `If-Match`; a version not kept, or not a number, is refused.
pub async fn versions_are_kept_compared_and_rolled_back_to<H: Harness>() {
    use crate::api::Call;
    use http::Method;
    let deployment = H::deploy(&[]).await;
    let api = deployment.api();
    let mut document = job("versioned");
    document["target"]["headers"] = json!({"x-token": {"value": "s3cret", "secret": true}});
    document["retry"] = json!({"max_attempts": 3});
    let id = api.create_job(ALICE, &document).await;
    let patch =
        |body: serde_json::Value| Call::new(Method::PATCH, format!("/v1/jobs/{id}")).key(ALICE).json(&body);
    assert_eq!(api.call(patch(json!({"retry": {"max_attempts": 5}}))).await.status, StatusCode::OK);
    let edited = json!({"schedule": {"cron": "0 * * * *"}, "target": {"headers": {"x-token": "plain"}}, "description": "hourly now"});
    assert_eq!(api.call(patch(edited)).await.status, StatusCode::OK);

    let listed = api.get(ALICE, &format!("/v1/jobs/{id}/versions")).await.body;
    let versions: Vec<(u64, Vec<String>)> = listed["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            let changed = v["changed"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| f.as_str().unwrap_or_default().to_string());
            (v["version"].as_u64().unwrap_or(0), changed.collect())
        })
        .collect();
    assert_eq!(
        versions,
        [
            (3, vec!["description".to_string(), "schedule.cron".into(), "target.headers.x-token".into()]),
            (2, vec!["retry.max_attempts".to_string()]),
            (1, vec![]),
        ],
        "{listed}"
    );
    let page = api.get(ALICE, &format!("/v1/jobs/{id}/versions?limit=2")).await.body;
    assert_eq!((page["versions"].as_array().map(Vec::len), &page["before"]), (Some(2), &json!(2)), "{page}");
    let older = api.get(ALICE, &format!("/v1/jobs/{id}/versions?limit=2&before=2")).await.body;
    assert_eq!((&older["versions"][0]["version"], &older["before"]), (&json!(1), &json!(null)), "{older}");

    let first = api.get(ALICE, &format!("/v1/jobs/{id}/versions/1")).await.body;
    assert_eq!(first["document"]["retry"]["max_attempts"], 3, "{first}");
    assert!(!first.to_string().contains("s3cret"), "a secret is never shown: {first}");
    let diff = api.get(ALICE, &format!("/v1/jobs/{id}/diff?from=1")).await.body;
    assert_eq!(diff["to"], 3, "{diff}");
    let retry = diff["changes"].as_array().into_iter().flatten().find(|c| c["field"] == "retry.max_attempts");
    assert_eq!(retry.map(|c| (&c["old"], &c["new"])), Some((&json!(3), &json!(5))), "{diff}");
    assert!(!diff.to_string().contains("s3cret"), "{diff}");

    // Rolled back to version 1: a version 4 equal to it.
    let stale = Call::new(Method::POST, format!("/v1/jobs/{id}/rollback"))
        .key(ALICE)
        .json(&json!({"version": 1}))
        .header("if-match", "\"2\"");
    let refused = api.call(stale).await;
    assert_eq!(
        (refused.status, refused.error_field()),
        (StatusCode::PRECONDITION_FAILED, "If-Match"),
        "{}",
        refused.body
    );
    let rolled = Call::new(Method::POST, format!("/v1/jobs/{id}/rollback"))
        .key(ALICE)
        .json(&json!({"version": 1}))
        .header("if-match", "\"3\"");
    let rolled = api.call(rolled).await;
    assert_eq!(rolled.status, StatusCode::OK, "{}", rolled.body);
    assert_eq!(
        (&rolled.body["version"], &rolled.body["retry"]["max_attempts"]),
        (&json!(4), &json!(3)),
        "{}",
        rolled.body
    );
    assert_eq!(rolled.body["schedule"], json!({"cron": "*/5 * * * *"}));
    let same = api.get(ALICE, &format!("/v1/jobs/{id}/diff?from=1&to=4")).await.body;
    assert_eq!(same["changes"], json!([]), "{same}");
    let stored = deployment.stored_job(&id).await.expect("the job is stored");
    let restored = match &stored.document.target {
        sundial_domain::job::TargetDocument::Http { headers, .. } => headers.get("x-token").cloned(),
        _ => None,
    };
    let secret = sundial_domain::job::HeaderValue::Secret(sundial_domain::job::SecretHeader {
        value: Some("s3cret".into()),
        secret: true,
    });
    assert_eq!(restored, Some(secret), "the secret header's value restored");

    // A pause is not a version of what the owner wrote, and a rollback leaves a pause alone.
    assert_eq!(api.post(ALICE, &format!("/v1/jobs/{id}/pause"), &json!({})).await.status, StatusCode::OK);
    let top = api.get(ALICE, &format!("/v1/jobs/{id}/versions?limit=1")).await.body;
    assert_eq!(top["versions"][0]["version"], 4, "{top}");
    let back = api.post(ALICE, &format!("/v1/jobs/{id}/rollback"), &json!({"version": 2})).await;
    assert_eq!(back.status, StatusCode::OK, "{}", back.body);
    assert_eq!(
        (&back.body["paused"], &back.body["retry"]["max_attempts"]),
        (&json!(true), &json!(5)),
        "{}",
        back.body
    );

    for (path, status, field) in [
        (format!("/v1/jobs/{id}/versions/9"), StatusCode::NOT_FOUND, "version"),
        (format!("/v1/jobs/{id}/versions/one"), StatusCode::BAD_REQUEST, "version"),
        (format!("/v1/jobs/{id}/diff"), StatusCode::BAD_REQUEST, "from"),
        (format!("/v1/jobs/{id}/diff?from=1&to=0"), StatusCode::BAD_REQUEST, "to"),
    ] {
        let reply = api.get(ALICE, &path).await;
        assert_eq!((reply.status, reply.error_field()), (status, field), "{path}: {}", reply.body);
    }
    let not_kept = api.post(ALICE, &format!("/v1/jobs/{id}/rollback"), &json!({"version": 9})).await;
    assert_eq!(
        (not_kept.status, not_kept.error_field()),
        (StatusCode::NOT_FOUND, "version"),
        "{}",
        not_kept.body
    );
    let bob = api.get(crate::api::BOB, &format!("/v1/jobs/{id}/versions")).await;
    assert_eq!(bob.status, StatusCode::NOT_FOUND, "another owner's job is not found");
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! jobs_api_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => jobs_api { job_lifecycle, list_paginates, names_are_unique_per_owner, jobs_per_owner_limit, next_run_follows_the_schedule, listings_filter_by_tags_state_group_and_text, versions_are_kept_compared_and_rolled_back_to });
    };
}
