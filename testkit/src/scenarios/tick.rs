//! The tick over time, on a manual clock: the catch-up policies after an outage, pause, resume
//! and `end_at`, ticks racing over one burst, and cron jobs in a time zone across both DST
//! changes of a year.

use crate::api::{ALICE, BOB, Call};
use crate::faults::{Faulty, Rule, Script};
use crate::harness::Harness;
use crate::world::OWNER;
use chrono::{DateTime, Duration, Utc};
use http::{Method, StatusCode};
use serde_json::{Value, json};
use sundial_app::ports::Ports;
use sundial_app::tick::TickSettings;
use sundial_domain::due_index::format_instant;
use sundial_domain::job::CatchupPolicy;
use sundial_domain::job::{Job, JobId};
use sundial_domain::ports::queue::QueueError;
use sundial_domain::run::{Run, RunState};

fn t(s: &str) -> DateTime<Utc> {
    s.parse().expect("an RFC 3339 instant")
}

/// A job calling a loopback target that is never reached (the tick only claims).
fn job(name: &str, schedule: Value) -> Value {
    json!({"name": name, "schedule": schedule, "target": {"type": "http", "url": "http://127.0.0.1:9/"}})
}

/// The instants runs are scheduled at, as stored.
fn instants(runs: &[Run]) -> Vec<String> {
    runs.iter().map(|r| format_instant(r.scheduled_at())).collect()
}

/// A job every minute, the tick down for five minutes: `skip` runs none of the missed
/// instants, `latest` the latest one, `all` every one; the ledger says so, and a job run after
/// `skip` accounts for the instants its parent missed as `upstream_missing`.
pub async fn catchup_policies_after_downtime<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T11:58:00Z", &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let mut ids = Vec::new();
    for policy in ["skip", "latest", "all"] {
        let mut job = job(policy, json!({"cron": "* * * * *"}));
        job["catchup"] = json!(policy);
        ids.push(deployment.api().create_job(ALICE, &job).await);
    }
    // A job run after `skip`: its instants are its parent's.
    let child_document = json!({"name": "after-skip", "depends_on": [ids[0]], "target": {"type": "http", "url": "http://127.0.0.1:9/"}});
    let child = deployment.api().create_job(ALICE, &child_document).await;
    // Ticks run normally until 12:00, then nothing until 12:06.
    for minute in ["2030-01-01T11:59:00Z", "2030-01-01T12:00:00Z", "2030-01-01T12:06:00Z"] {
        deployment.set_clock(t(minute));
        deployment.use_cases().tick.run().await.unwrap();
    }

    // 11:58 was due at creation and claimed by the API; 12:01 by the 12:00 tick's lookahead.
    let before_outage =
        ["2030-01-01T11:58:00Z", "2030-01-01T11:59:00Z", "2030-01-01T12:00:00Z", "2030-01-01T12:01:00Z"];
    let after = ["2030-01-01T12:06:00Z", "2030-01-01T12:07:00Z"];
    let missed =
        ["2030-01-01T12:02:00Z", "2030-01-01T12:03:00Z", "2030-01-01T12:04:00Z", "2030-01-01T12:05:00Z"];
    let expect = |kept: &[&str]| -> Vec<String> {
        before_outage.iter().chain(kept).chain(after.iter()).map(|s| s.to_string()).collect()
    };
    assert_eq!(instants(&deployment.runs_of(&ids[0]).await), expect(&[]), "skip");
    assert_eq!(instants(&deployment.runs_of(&ids[1]).await), expect(&missed[3..]), "latest");
    assert_eq!(instants(&deployment.runs_of(&ids[2]).await), expect(&missed), "all");

    // The ledger accounts for every instant, the dropped ones with the catch-up's reason.
    let dropped = |n: usize| -> Vec<(String, String)> {
        let mut want: Vec<(String, String)> =
            before_outage.iter().map(|t| (t.to_string(), "ran".into())).collect();
        want.extend(missed.iter().take(n).map(|t| (t.to_string(), "missed catchup_dropped".into())));
        want.extend(missed.iter().skip(n).map(|t| (t.to_string(), "ran".into())));
        want.extend(after.iter().map(|t| (t.to_string(), "ran".into())));
        want
    };
    assert_eq!(ledger(&deployment, &ids[0]).await, dropped(4), "skip");
    assert_eq!(ledger(&deployment, &ids[1]).await, dropped(3), "latest");
    assert_eq!(ledger(&deployment, &ids[2]).await, dropped(0), "all");
    // The child's instants: those its parent has a run for wait for that run to end (none ran
    // here); those its parent missed were never handed on.
    let mut want: Vec<(String, String)> =
        before_outage.iter().map(|t| (t.to_string(), "pending".into())).collect();
    want.extend(missed.iter().map(|t| (t.to_string(), "missed upstream_missing".into())));
    want.extend(after.iter().map(|t| (t.to_string(), "pending".into())));
    assert_eq!(ledger(&deployment, &child).await, want, "the child of skip");

    // Told once per outage, not once per instant, with the numbers; and not again by a later pass.
    deployment.set_clock(t("2030-01-01T12:07:00Z"));
    deployment.use_cases().tick.run().await.unwrap();
    let told = deployment.told_about_job(&ids[0]).await;
    assert_eq!(told.len(), 1, "one `missed` for the outage: {told:?}");
    let notice = &told[0];
    assert_eq!(
        (&notice["event"], &notice["instants"], &notice["from"], &notice["to"], &notice["reason"]),
        (
            &json!("missed"),
            &json!(4),
            &json!("2030-01-01T12:02:00Z"),
            &json!("2030-01-01T12:05:00Z"),
            &json!("catchup_dropped")
        ),
        "{notice}"
    );
    assert!(
        notice["detail"].as_str().unwrap_or("").contains("`catchup: skip` dropped 4 instant(s)"),
        "{notice}"
    );
    assert_eq!(deployment.told_about_job(&ids[1]).await.len(), 1, "latest dropped three: one `missed`");
    assert!(deployment.told_about_job(&ids[2]).await.is_empty(), "all dropped none: nothing to tell");
}

/// A job every minute with `catchup: skip`, and the whole runtime (tick and workers) stopped
/// from just after 12:01 to 12:06:30: the run claimed ahead for 12:01 starts six minutes late and
/// is skipped as too late, 12:02 to 12:05 (never claimed) are dropped and told `missed` once, and
/// the runs around the outage (12:00, 12:06) call the target, no other does. The ledger, read
/// through the HTTP API, accounts for each.
pub async fn the_runtime_stopped_for_five_minutes<H: Harness>() {
    // Created ten minutes before its schedule starts, so that the runs claimed are sent when due
    // (the emulator's queue delays are real).
    let deployment = H::deploy_at("2030-01-01T11:50:00Z", &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let api = deployment.api();
    let schedule =
        json!({"cron": "* * * * *", "start_at": "2030-01-01T12:00:00Z", "end_at": "2030-01-01T12:06:00Z"});
    let mut document = job("minutely", schedule);
    document["catchup"] = json!("skip");
    document["target"]["url"] = json!(deployment.target_url());
    let id = api.create_job(ALICE, &document).await;
    let run_at = |runs: &[Run], minute: &str| {
        runs.iter().find(|r| format_instant(r.scheduled_at()) == minute).map(Run::id)
    };

    // The last tick before the outage, within 12:00's window: it claims 12:00 and, ahead, 12:01.
    deployment.set_clock(t("2030-01-01T12:00:59.5Z"));
    deployment.use_cases().tick.run().await.unwrap();
    let runs = deployment.runs_of(&id).await;
    assert_eq!(instants(&runs), ["2030-01-01T12:00:00Z", "2030-01-01T12:01:00Z"]);
    let first = run_at(&runs, "2030-01-01T12:00:00Z").unwrap();
    assert_eq!(deployment.drive(&first, 30).await.state, RunState::Succeeded);

    // Nothing runs until 12:06:30: then the tick, then the workers.
    deployment.set_clock(t("2030-01-01T12:06:30Z"));
    deployment.use_cases().tick.run().await.unwrap();
    let runs = deployment.runs_of(&id).await;
    let claimed_ahead = run_at(&runs, "2030-01-01T12:01:00Z").unwrap();
    let late = deployment.drive(&claimed_ahead, 30).await;
    assert_eq!(late.state, RunState::Skipped, "started six minutes after its instant");
    let reason = late.reason.unwrap_or_default();
    assert!(reason.contains("past its catch-up window"), "{reason}");
    let last = run_at(&runs, "2030-01-01T12:06:00Z").expect("12:06 claimed, within its window");
    assert_eq!(deployment.drive(&last, 30).await.state, RunState::Succeeded);
    let called: Vec<String> = deployment.target_calls().into_iter().map(|c| c.run_id).collect();
    assert_eq!(
        called,
        [first.to_string(), last.to_string()],
        "only the runs around the outage call the target"
    );

    let path = format!("/v1/jobs/{id}/instants?from=2030-01-01T12:00:00Z&to=2030-01-01T12:06:00Z");
    let reply = api.get(ALICE, &path).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let entries: Vec<(String, String, String)> = reply.body["instants"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let field = |name: &str| e[name].as_str().unwrap_or("").to_string();
            (field("at")[11..16].to_string(), field("outcome"), field("reason"))
        })
        .collect();
    let want: Vec<(String, String, String)> = [
        ("12:00", "ran", ""),
        ("12:01", "skipped", ""),
        ("12:02", "missed", "catchup_dropped"),
        ("12:03", "missed", "catchup_dropped"),
        ("12:04", "missed", "catchup_dropped"),
        ("12:05", "missed", "catchup_dropped"),
        ("12:06", "ran", ""),
    ]
    .iter()
    .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    .collect();
    assert_eq!(entries, want, "{}", reply.body);

    let told = deployment.told_about_job(&id).await;
    let missed: Vec<&serde_json::Value> = told.iter().filter(|n| n["event"] == "missed").collect();
    assert_eq!(missed.len(), 1, "one `missed` for the outage: {told:?}");
    assert_eq!((&missed[0]["instants"], &missed[0]["from"]), (&json!(4), &json!("2030-01-01T12:02:00Z")));
}

/// A union of schedules (`schedule.any`): 07:00 New York and 12:00 UTC coincide in January, so
/// that instant runs once, beside the union's other instants; the preview and the description
/// show the union, and a bad entry is refused naming it.
pub async fn a_union_runs_once_where_its_schedules_coincide<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T11:50:00Z", &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let api = deployment.api();
    let any = json!([
        {"cron": "0 7 * * *", "timezone": "America/New_York"},
        {"cron": "0 12 * * *"},
        {"cron": "30 12 * * *"}
    ]);
    let id = api.create_job(ALICE, &job("union", json!({"any": any}))).await;
    let view = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body;
    let described = view["schedule_description"].as_str().unwrap_or("");
    let preview = api.get(ALICE, &format!("/v1/jobs/{id}/preview?count=3")).await.body;
    let utc: Vec<&str> =
        preview["instants"].as_array().into_iter().flatten().filter_map(|i| i["utc"].as_str()).collect();
    assert_eq!(utc, ["2030-01-01T12:00:00Z", "2030-01-01T12:30:00Z", "2030-01-02T12:00:00Z"], "{preview}");
    assert_eq!(preview["timezone"], "America/New_York", "a union's first zone: {preview}");
    assert_eq!(preview["instants"][0]["local"], "2030-01-01T07:00:00-05:00", "{preview}");
    assert_eq!(
        described, "every day at 07:00 America/New_York, every day at 12:00 UTC, and every day at 12:30 UTC",
        "{view}"
    );

    for minute in ["2030-01-01T12:00:30Z", "2030-01-01T12:30:30Z"] {
        deployment.set_clock(t(minute));
        deployment.use_cases().tick.run().await.unwrap();
    }
    assert_eq!(
        instants(&deployment.runs_of(&id).await),
        ["2030-01-01T12:00:00Z", "2030-01-01T12:30:00Z"],
        "the coinciding instant runs once"
    );

    let bad = json!({"any": [{"cron": "0 7 * * *"}, {"cron": "0 7 * * *", "timezone": "Mars/Olympus"}]});
    let reply = api.post(ALICE, "/v1/jobs", &job("bad-union", bad)).await;
    assert_eq!(
        (reply.status, reply.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "schedule.any[1].timezone")
    );
}

/// A job at 02:30 New York meets the spring-forward night of 2030-03-10: creating it warns of
/// that night, its preview marks the moved instant (03:00) and says why; with `dst.gap: skip` the
/// instant is left out and the note says so; `dst` on a rate is refused naming it.
pub async fn dst_changes_are_warned_of_and_previewed<H: Harness>() {
    let deployment = H::deploy_at("2030-03-01T00:00:00Z", &[]).await;
    let api = deployment.api();
    let schedule = json!({"cron": "30 2 * * *", "timezone": "America/New_York"});
    let created = api.post(ALICE, "/v1/jobs", &job("half-past-two", schedule.clone())).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(
        created.body["warnings"],
        json!(["DST: 2030-03-10: 02:30 does not exist in America/New_York; runs at 03:00"]),
        "{}",
        created.body
    );
    let id = created.body["id"].as_str().unwrap_or_default().to_string();
    let preview = api.get(ALICE, &format!("/v1/jobs/{id}/preview?count=11")).await.body;
    let marked: Vec<(&str, &str)> = preview["instants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["dst"].is_string())
        .map(|i| (i["local"].as_str().unwrap_or(""), i["dst"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(marked, [("2030-03-10T03:00:00-04:00", "moved")], "{preview}");
    assert_eq!(preview["dst"][0]["effect"], "moved", "{preview}");

    let mut skipping = schedule.clone();
    skipping["dst"] = json!({"gap": "skip"});
    let skip_id = api.create_job(ALICE, &job("skips-the-gap", skipping)).await;
    let preview = api.get(ALICE, &format!("/v1/jobs/{skip_id}/preview?count=10")).await.body;
    let days: Vec<String> = preview["instants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["local"].as_str().map(|l| l[..10].to_string()))
        .collect();
    assert!(
        !days.contains(&"2030-03-10".to_string()) && days.contains(&"2030-03-11".to_string()),
        "{preview}"
    );
    assert_eq!(
        preview["dst"][0]["detail"],
        "2030-03-10: 02:30 does not exist in America/New_York; skipped (dst.gap: skip)",
        "{preview}"
    );

    let refused = api
        .post(ALICE, "/v1/jobs", &job("rate-dst", json!({"rate": "1 hour", "dst": {"fold": "both"}})))
        .await;
    assert_eq!((refused.status, refused.error_field()), (StatusCode::UNPROCESSABLE_ENTITY, "schedule.dst"));
    let unknown = api
        .post(ALICE, "/v1/jobs", &job("bad-dst", json!({"cron": "0 1 * * *", "dst": {"gap": "later"}})))
        .await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "{}", unknown.body);
    let noon = api
        .post(ALICE, "/v1/jobs", &job("noon", json!({"cron": "0 12 * * *", "timezone": "America/New_York"})))
        .await;
    assert!(noon.body.get("warnings").is_none(), "noon never meets a change: {}", noon.body);
    let single = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body;
    assert_eq!(single["warnings"].as_array().map(Vec::len), Some(1), "{single}");
    let listed = api.get(ALICE, "/v1/jobs").await.body;
    let jobs = listed["jobs"].as_array().cloned().unwrap_or_default();
    assert!(
        !jobs.is_empty() && jobs.iter().all(|j| j.get("warnings").is_none()),
        "a listing carries none: {listed}"
    );
}

/// The job's ledger from 11:58 to 12:07 through the API: each instant and its outcome (with
/// the reason where it was missed).
async fn ledger<H: Harness>(deployment: &H, id: &str) -> Vec<(String, String)> {
    let path = format!("/v1/jobs/{id}/instants?from=2030-01-01T11:58:00Z&to=2030-01-01T12:07:00Z");
    let reply = deployment.api().get(ALICE, &path).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let entries = reply.body["instants"].as_array().cloned().unwrap_or_default();
    entries
        .iter()
        .map(|e| {
            let outcome = match e["reason"].as_str() {
                Some(reason) => format!("{} {reason}", e["outcome"].as_str().unwrap_or("")),
                None => e["outcome"].as_str().unwrap_or("").to_string(),
            };
            (e["at"].as_str().unwrap_or("").to_string(), outcome)
        })
        .collect()
}

/// A paused job is not claimed; resumed, it is, from now on. `end_at` ends a job: it leaves the
/// due index after its last instant.
pub async fn pause_resume_and_end_at<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T11:58:30Z", &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let api = deployment.api();
    let paused = api.create_job(ALICE, &job("paused", json!({"cron": "* * * * *"}))).await;
    let schedule = json!({"cron": "* * * * *", "end_at": "2030-01-01T12:02:00Z"});
    let ending = api.create_job(ALICE, &job("ending", schedule)).await;
    assert_eq!(api.post(ALICE, &format!("/v1/jobs/{paused}/pause"), &json!({})).await.status, StatusCode::OK);
    let paused_runs = deployment.runs_of(&paused).await.len();

    for minute in 0..6 {
        deployment.set_clock(t("2030-01-01T11:59:00Z") + Duration::minutes(minute));
        deployment.use_cases().tick.run().await.unwrap();
    }
    assert_eq!(deployment.runs_of(&paused).await.len(), paused_runs, "paused: nothing claimed");
    assert_eq!(
        instants(&deployment.runs_of(&ending).await),
        ["2030-01-01T11:59:00Z", "2030-01-01T12:00:00Z", "2030-01-01T12:01:00Z", "2030-01-01T12:02:00Z"]
    );
    assert_eq!(api.get(ALICE, &format!("/v1/jobs/{ending}")).await.body["next_run_at"], json!(null));
    assert_eq!(deployment.stored_job(&ending).await.unwrap().next_run_at, None);
    assert!(!deployment.due_job_ids().await.contains(&ending));

    // Resumed at 12:04:00: from now on; due at once, so the API claims 12:04 and 12:05 itself.
    let resumed = api.post(ALICE, &format!("/v1/jobs/{paused}/resume"), &json!({})).await;
    assert_eq!(resumed.body["next_run_at"], "2030-01-01T12:06:00Z", "{}", resumed.body);
    deployment.set_clock(t("2030-01-01T12:05:00Z"));
    deployment.use_cases().tick.run().await.unwrap();
    let after = instants(&deployment.runs_of(&paused).await);
    assert_eq!(
        after[paused_runs..],
        ["2030-01-01T12:04:00Z", "2030-01-01T12:05:00Z", "2030-01-01T12:06:00Z"]
    );
}

/// A pause with `until` ends by itself: the job shows its pause (why, who, until when), the
/// tick resumes it in that minute, and the ledger says the instants it covered were paused, with
/// the reason. A resume may run the latest or all of the instants a pause covered.
pub async fn pauses_end_by_themselves_and_resumes_catch_up_as_asked<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T11:58:30Z", &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let api = deployment.api();
    let minutely = |name: &str| job(name, json!({"cron": "* * * * *"}));
    let until = api.create_job(ALICE, &minutely("until")).await;
    let latest = api.create_job(ALICE, &minutely("latest")).await;
    let all = api.create_job(ALICE, &minutely("all")).await;
    deployment.set_clock(t("2030-01-01T11:59:10Z"));
    let body = json!({"reason": "database maintenance", "until": "2030-01-01T12:02:00Z"});
    let paused = api.post(ALICE, &format!("/v1/jobs/{until}/pause"), &body).await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
    assert_eq!(
        (&paused.body["pause"]["reason"], &paused.body["pause"]["until"], &paused.body["pause"]["by"]),
        (&json!("database maintenance"), &json!("2030-01-01T12:02:00Z"), &json!(crate::world::OWNER)),
        "{}",
        paused.body
    );
    for id in [&latest, &all] {
        assert_eq!(api.post(ALICE, &format!("/v1/jobs/{id}/pause"), &json!({})).await.status, StatusCode::OK);
    }

    for minute in ["2030-01-01T12:00:00Z", "2030-01-01T12:01:00Z", "2030-01-01T12:02:00Z"] {
        deployment.set_clock(t(minute));
        deployment.use_cases().tick.run().await.unwrap();
    }
    let view = api.get(ALICE, &format!("/v1/jobs/{until}")).await.body;
    assert_eq!((&view["paused"], view.get("pause")), (&json!(false), None), "resumed by itself: {view}");
    assert_eq!(view["next_run_at"], "2030-01-01T12:04:00Z", "claimed a minute ahead as it resumed: {view}");
    let ran = instants(&deployment.runs_of(&until).await);
    assert!(ran.contains(&"2030-01-01T12:02:00Z".to_string()), "the instant it resumed at runs: {ran:?}");
    let ledger = api
        .get(ALICE, &format!("/v1/jobs/{until}/instants?from=2030-01-01T12:01:00Z&to=2030-01-01T12:02:00Z"))
        .await;
    let entries = ledger.body["instants"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 2, "{}", ledger.body);
    assert_eq!((&entries[0]["outcome"], &entries[0]["reason"]), (&json!("missed"), &json!("paused")));
    let detail = entries[0]["detail"].as_str().unwrap_or("");
    assert!(
        detail.ends_with("database maintenance") && detail.contains("to 2030-01-01T12:02:00"),
        "{detail}"
    );
    assert_eq!(entries[1]["outcome"], "ran");

    // Resumed at 12:03:10, asking for the paused instants: the latest of them, or each.
    deployment.set_clock(t("2030-01-01T12:03:10Z"));
    for (id, catchup) in [(&latest, "latest"), (&all, "all")] {
        let reply = api.post(ALICE, &format!("/v1/jobs/{id}/resume"), &json!({"catchup": catchup})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    let paused_minutes = ["2030-01-01T12:01:00Z", "2030-01-01T12:02:00Z", "2030-01-01T12:03:00Z"];
    let has = |runs: &[String], t: &str| runs.iter().any(|r| r == t);
    let latest_runs = instants(&deployment.runs_of(&latest).await);
    let all_runs = instants(&deployment.runs_of(&all).await);
    assert!(has(&latest_runs, paused_minutes[2]) && !has(&latest_runs, paused_minutes[1]), "{latest_runs:?}");
    assert!(paused_minutes.iter().all(|t| has(&all_runs, t)), "{all_runs:?}");

    // Bad pauses change nothing.
    for (body, status, field) in [
        (json!({"until": "2030-01-01T12:00:00Z"}), StatusCode::UNPROCESSABLE_ENTITY, "until"),
        (json!({"reason": "r".repeat(501)}), StatusCode::UNPROCESSABLE_ENTITY, "reason"),
        (json!({"until": "soon"}), StatusCode::BAD_REQUEST, "until"),
        (json!({"for": "ever"}), StatusCode::BAD_REQUEST, "for"),
    ] {
        let reply = api.post(ALICE, &format!("/v1/jobs/{until}/pause"), &body).await;
        assert_eq!((reply.status, reply.error_field()), (status, field), "{body}: {}", reply.body);
    }
    let reply = api.post(ALICE, &format!("/v1/jobs/{until}/resume"), &json!({"catchup": "some"})).await;
    assert_eq!((reply.status, reply.error_field()), (StatusCode::BAD_REQUEST, "catchup"));
    assert_eq!(api.get(ALICE, &format!("/v1/jobs/{until}")).await.body["paused"], false, "still running");
}

/// Skipping the next two instants without pausing: the job shows the skips and its preview
/// marks them; their runs (claimed ahead or not) are SKIPPED at their start, saying who asked,
/// and the target is never called for them; the ledger shows them skipped. A skip is taken back
/// before its instant is due, and bad skips change nothing.
pub async fn skipped_instants_never_run_and_can_be_taken_back<H: Harness>() {
    // Created ten minutes before its schedule starts: nothing is claimed ahead until the tick
    // finds it, and the runs it claims then are sent at once (no real wait on the emulator).
    let deployment = H::deploy_at("2030-01-01T11:50:00Z", &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let api = deployment.api();
    let mut document = job("skipping", json!({"cron": "* * * * *", "start_at": "2030-01-01T12:00:00Z"}));
    document["target"]["url"] = json!(deployment.target_url());
    let id = api.create_job(ALICE, &document).await;
    let path = format!("/v1/jobs/{id}/skip");
    let skipped = api.post(ALICE, &path, &json!({"next": 2})).await;
    assert_eq!(skipped.status, StatusCode::OK, "{}", skipped.body);
    let skips: Vec<&str> =
        skipped.body["skips"].as_array().into_iter().flatten().filter_map(|s| s["at"].as_str()).collect();
    assert_eq!(skips, ["2030-01-01T12:00:00Z", "2030-01-01T12:01:00Z"], "{}", skipped.body);
    let preview = api.get(ALICE, &format!("/v1/jobs/{id}/preview?count=3")).await.body;
    let marks: Vec<bool> =
        preview["instants"].as_array().into_iter().flatten().map(|i| i["skipped"] == true).collect();
    assert_eq!(marks, [true, true, false], "{preview}");

    // Another skip, taken back before it is due.
    let later = api.post(ALICE, &path, &json!({"instants": ["2030-01-01T12:03:00Z"]})).await;
    assert_eq!(later.body["skips"].as_array().map(Vec::len), Some(3), "{}", later.body);
    let back = api.delete(ALICE, &format!("{path}?instant=2030-01-01T12:03:00Z")).await;
    assert_eq!(back.status, StatusCode::OK, "{}", back.body);
    assert_eq!(back.body["skips"].as_array().map(Vec::len), Some(2), "{}", back.body);

    // Bad skips name the field and change nothing.
    for (body, status, field) in [
        (json!({"next": 0}), StatusCode::UNPROCESSABLE_ENTITY, "next"),
        (json!({"next": 101}), StatusCode::UNPROCESSABLE_ENTITY, "next"),
        (json!({"instants": ["2030-01-01T12:03:30Z"]}), StatusCode::UNPROCESSABLE_ENTITY, "instants[0]"),
        (json!({"instants": ["2030-01-01T11:00:00Z"]}), StatusCode::UNPROCESSABLE_ENTITY, "instants[0]"),
        (json!({}), StatusCode::BAD_REQUEST, "next"),
        (json!({"next": 1, "instants": []}), StatusCode::BAD_REQUEST, "next"),
        (json!({"skip": 1}), StatusCode::BAD_REQUEST, "skip"),
    ] {
        let reply = api.post(ALICE, &path, &body).await;
        assert_eq!((reply.status, reply.error_field()), (status, field), "{body}: {}", reply.body);
    }
    let reply = api.delete(ALICE, &format!("{path}?instant=2030-01-01T11:00:00Z")).await;
    assert_eq!((reply.status, reply.error_field()), (StatusCode::UNPROCESSABLE_ENTITY, "instant"));
    assert_eq!(
        api.get(ALICE, &format!("/v1/jobs/{id}")).await.body["skips"].as_array().map(Vec::len),
        Some(2)
    );

    deployment.set_clock(t("2030-01-01T12:02:10Z"));
    deployment.use_cases().tick.run().await.unwrap();
    let runs = deployment.runs_of(&id).await;
    let run_at = |minute: &str| runs.iter().find(|r| format_instant(r.scheduled_at()) == minute).map(Run::id);
    for minute in ["2030-01-01T12:00:00Z", "2030-01-01T12:01:00Z"] {
        let run = run_at(minute).unwrap_or_else(|| panic!("{minute} claimed"));
        let done = deployment.drive(&run, 30).await;
        assert_eq!(done.state, RunState::Skipped, "{minute}");
        let reason = done.reason.unwrap_or_default();
        assert!(reason.starts_with(&format!("skipped on request by {}", crate::world::OWNER)), "{reason}");
    }
    let ran = run_at("2030-01-01T12:02:00Z").expect("12:02 claimed");
    assert_eq!(deployment.drive(&ran, 30).await.state, RunState::Succeeded);
    let called: Vec<String> = deployment.target_calls().into_iter().map(|c| c.run_id).collect();
    assert_eq!(called, [ran.to_string()], "the target is called for the instant not skipped only");
    let range = "from=2030-01-01T12:00:00Z&to=2030-01-01T12:02:00Z";
    let ledger = api.get(ALICE, &format!("/v1/jobs/{id}/instants?{range}")).await;
    let outcomes: Vec<&str> = ledger.body["instants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, ["skipped", "skipped", "ran"], "{}", ledger.body);
}

/// `schedule.max_runs: 3`: three scheduled runs, then no more; the view says how many remain,
/// and raising the limit starts the schedule again. A limit out of bounds, or on a one-time
/// schedule, is refused naming it.
pub async fn a_run_limit_ends_the_schedule<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T11:50:00Z", &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let api = deployment.api();
    let schedule = json!({"cron": "* * * * *", "start_at": "2030-01-01T12:00:00Z", "max_runs": 3});
    let id = api.create_job(ALICE, &job("three", schedule)).await;
    assert_eq!(api.get(ALICE, &format!("/v1/jobs/{id}")).await.body["remaining_runs"], 3);
    for minute in 0..6 {
        deployment.set_clock(t("2030-01-01T12:00:00Z") + Duration::minutes(minute));
        deployment.use_cases().tick.run().await.unwrap();
    }
    let runs = instants(&deployment.runs_of(&id).await);
    assert_eq!(runs, ["2030-01-01T12:00:00Z", "2030-01-01T12:01:00Z", "2030-01-01T12:02:00Z"]);
    let view = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body;
    assert_eq!((&view["remaining_runs"], &view["next_run_at"]), (&json!(0), &json!(null)), "{view}");
    assert!(!deployment.due_job_ids().await.contains(&id), "it left the due index");

    let raised =
        json!({"schedule": {"cron": "* * * * *", "start_at": "2030-01-01T12:00:00Z", "max_runs": 4}});
    let reply = api.patch(ALICE, &format!("/v1/jobs/{id}"), &raised).await;
    // Due at once: the edit itself claims the one more run it allows.
    assert_eq!((reply.status, &reply.body["remaining_runs"]), (StatusCode::OK, &json!(0)), "{}", reply.body);
    deployment.set_clock(t("2030-01-01T12:07:00Z"));
    deployment.use_cases().tick.run().await.unwrap();
    let runs = instants(&deployment.runs_of(&id).await);
    assert_eq!(runs.len(), 4, "one more run, then none: {runs:?}");

    for (schedule, message) in [
        (json!({"cron": "* * * * *", "max_runs": 0}), "0 is outside"),
        (json!({"cron": "* * * * *", "max_runs": 1_000_001}), "outside"),
        (json!({"at": "2030-02-01T00:00:00Z", "max_runs": 2}), "one-time"),
    ] {
        let reply = api.post(ALICE, "/v1/jobs", &job("bad-limit", schedule.clone())).await;
        assert_eq!(
            (reply.status, reply.error_field()),
            (StatusCode::UNPROCESSABLE_ENTITY, "schedule.max_runs"),
            "{schedule}"
        );
        assert!(reply.body["error"]["message"].as_str().unwrap_or("").contains(message), "{}", reply.body);
    }
}

/// A resume re-arms a job before the instants it claimed ahead: their runs were counted once
/// and are not counted again, so the job still makes all of its `max_runs`.
pub async fn a_run_limit_counts_runs_claimed_ahead_once_across_a_resume<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T11:58:00Z", &[("SUNDIAL_CLAIM_AHEAD_S", "120")]).await;
    let api = deployment.api();
    let schedule = json!({"cron": "* * * * *", "start_at": "2030-01-01T12:00:00Z", "max_runs": 4});
    let id = api.create_job(ALICE, &job("four", schedule)).await;
    deployment.set_clock(t("2030-01-01T11:59:00Z"));
    deployment.use_cases().tick.run().await.unwrap();
    let ahead = instants(&deployment.runs_of(&id).await);
    assert_eq!(ahead, ["2030-01-01T12:00:00Z", "2030-01-01T12:01:00Z"], "claimed ahead");
    assert_eq!(api.get(ALICE, &format!("/v1/jobs/{id}")).await.body["remaining_runs"], 2);
    deployment.set_clock(t("2030-01-01T11:59:10Z"));
    assert_eq!(api.post(ALICE, &format!("/v1/jobs/{id}/pause"), &json!({})).await.status, StatusCode::OK);
    deployment.set_clock(t("2030-01-01T11:59:20Z"));
    // The resume re-arms at 12:00 and claims at once what is in reach: 12:00 and 12:01 again.
    let resumed = api.post(ALICE, &format!("/v1/jobs/{id}/resume"), &json!({})).await;
    let after_resume = (&resumed.body["next_run_at"], &resumed.body["remaining_runs"]);
    assert_eq!(after_resume, (&json!("2030-01-01T12:02:00Z"), &json!(2)), "counted once: {}", resumed.body);
    for minute in 0..6 {
        deployment.set_clock(t("2030-01-01T12:00:00Z") + Duration::minutes(minute));
        deployment.use_cases().tick.run().await.unwrap();
    }
    let runs = instants(&deployment.runs_of(&id).await);
    let want =
        ["2030-01-01T12:00:00Z", "2030-01-01T12:01:00Z", "2030-01-01T12:02:00Z", "2030-01-01T12:03:00Z"];
    assert_eq!(runs, want, "four runs, each counted once");
    let view = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body;
    assert_eq!((&view["remaining_runs"], &view["next_run_at"]), (&json!(0), &json!(null)), "{view}");
}

/// A daily job's count marks the day ahead; an edit to every five minutes claims from the
/// edit on, with and without a limit (the count's read starts before the pass that counted, not
/// before its mark, which lies a day ahead).
pub async fn an_edit_from_daily_to_minutes_claims_at_once<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T08:58:00Z", &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let api = deployment.api();
    let limited = api.create_job(ALICE, &job("limited", json!({"cron": "0 9 * * *", "max_runs": 5}))).await;
    let unlimited = api.create_job(ALICE, &job("unlimited", json!({"cron": "0 9 * * *"}))).await;
    for minute in ["2030-01-01T08:59:00Z", "2030-01-01T09:00:00Z"] {
        deployment.set_clock(t(minute));
        deployment.use_cases().tick.run().await.unwrap();
    }
    deployment.set_clock(t("2030-01-01T10:00:30Z"));
    for (id, schedule) in [
        (&limited, json!({"cron": "*/5 * * * *", "max_runs": 5})),
        (&unlimited, json!({"cron": "*/5 * * * *"})),
    ] {
        let reply = api.patch(ALICE, &format!("/v1/jobs/{id}"), &json!({"schedule": schedule})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    for minute in 1..12 {
        deployment.set_clock(t("2030-01-01T10:00:00Z") + Duration::minutes(minute));
        let report = deployment.use_cases().tick.run().await.unwrap();
        assert_eq!(report.claims.failed, 0, "no pass fails at 10:{minute:02}");
    }
    let want = ["2030-01-01T09:00:00Z", "2030-01-01T10:05:00Z", "2030-01-01T10:10:00Z"];
    for id in [&limited, &unlimited] {
        let runs = instants(&deployment.runs_of(id).await);
        assert_eq!(runs[..3], want, "{runs:?}");
    }
    let view = api.get(ALICE, &format!("/v1/jobs/{limited}")).await.body;
    assert_eq!(view["remaining_runs"], 5 - instants(&deployment.runs_of(&limited).await).len(), "{view}");
}

/// A preview's instants as local dates (the first ten characters of `local`).
fn preview_days(preview: &Value) -> Vec<String> {
    let instants = preview["instants"].as_array().into_iter().flatten();
    instants.filter_map(|i| i["local"].as_str().map(|l| l[..10].to_string())).collect()
}

/// Every day at 09:00 New York, holidays skipped, by a named calendar two jobs share: a holiday
/// tomorrow leaves tomorrow out of the preview; a job whose holiday instant moves to the next
/// business day runs once there, with the business day's own instant; an edit of the calendar
/// that drops a holiday reaches both jobs at once (their previews show it again), and the
/// calendar cannot be deleted while they name it.
pub async fn a_business_calendar_skips_or_moves_a_holiday<H: Harness>() {
    // Thursday 2030-12-19, 12:00 New York.
    let deployment = H::deploy_at("2030-12-19T17:00:00Z", &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let api = deployment.api();
    let (tomorrow, christmas_eve) = ("2030-12-20", "2030-12-24");
    let calendar = json!({"description": "desk holidays", "timezone": "America/New_York",
        "holidays": [tomorrow, christmas_eve]});
    let created = api.put(ALICE, "/v1/calendars/desk", &calendar).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["version"], 1, "{}", created.body);

    let schedule = json!({"cron": "0 9 * * *", "timezone": "America/New_York", "calendar": {"name": "desk"}});
    let created = api.post(ALICE, "/v1/jobs", &job("nine-on-business-days", schedule.clone())).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let description = created.body["schedule_description"].as_str().unwrap_or_default();
    assert!(description.contains("business days only"), "{description}");
    assert_eq!(created.body["schedule"], schedule, "shown as written, without the calendar's days");
    assert_eq!(created.body["calendars"], json!({"desk": 1}), "{}", created.body);
    let warned = |reply: &Value| {
        reply["warnings"].to_string().contains("calendar: `desk` lists dates of America/New_York")
    };
    assert!(!warned(&created.body), "the same zone: {}", created.body);
    let id = created.body["id"].as_str().unwrap_or_default().to_string();
    // A schedule in another zone judges the calendar's dates in its own: it is warned.
    let in_utc = api
        .post(
            ALICE,
            "/v1/jobs",
            &job("desk-in-utc", json!({"cron": "0 9 * * *", "calendar": {"name": "desk"}})),
        )
        .await;
    assert!(warned(&in_utc.body), "{}", in_utc.body);
    let in_utc = in_utc.body["id"].as_str().unwrap_or_default().to_string();
    assert_eq!(api.delete(ALICE, &format!("/v1/jobs/{in_utc}")).await.status, StatusCode::NO_CONTENT);
    let preview = api.get(ALICE, &format!("/v1/jobs/{id}/preview?count=3")).await.body;
    // Friday the 20th a holiday, then the weekend; the 24th a holiday.
    assert_eq!(preview_days(&preview), ["2030-12-23", "2030-12-25", "2030-12-26"], "{preview}");

    // Moved: Friday's 09:00 runs on Monday at 09:00, one run with Monday's own.
    let moved = json!({"cron": "0 9 * * *", "timezone": "America/New_York",
        "calendar": {"name": "desk", "on_holiday": "next_business_day"}});
    let moved_id = api.create_job(ALICE, &job("nine-moved", moved)).await;
    let preview = api.get(ALICE, &format!("/v1/jobs/{moved_id}/preview?count=2")).await.body;
    assert_eq!(preview_days(&preview), ["2030-12-23", "2030-12-25"], "{preview}");
    // Ticks around Friday's and Monday's 09:00 (14:00 UTC); none over the weekend, when no
    // instant falls.
    for at in [
        "2030-12-20T13:30:00Z",
        "2030-12-20T14:00:00Z",
        "2030-12-20T14:30:00Z",
        "2030-12-23T13:30:00Z",
        "2030-12-23T14:00:00Z",
        "2030-12-23T14:30:00Z",
    ] {
        deployment.set_clock(t(at));
        deployment.use_cases().tick.run().await.unwrap();
    }
    let runs = instants(&deployment.runs_of(&moved_id).await);
    assert_eq!(runs, ["2030-12-23T14:00:00Z"], "Friday's, Saturday's and Sunday's 09:00 are Monday's, once");
    assert_eq!(instants(&deployment.runs_of(&id).await), ["2030-12-23T14:00:00Z"]);

    // The calendar edited: the 24th is a business day again, for both jobs at once.
    let put_over = |version: &str| {
        Call::new(Method::PUT, "/v1/calendars/desk")
            .key(ALICE)
            .json(&json!({"holidays": [tomorrow]}))
            .header("if-match", format!("\"{version}\""))
    };
    let stale = api.call(put_over("7")).await;
    assert_eq!(
        (stale.status, stale.error_field()),
        (StatusCode::PRECONDITION_FAILED, "If-Match"),
        "{}",
        stale.body
    );
    let edited = api.call(put_over("1")).await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.body);
    let holds: Vec<(Value, Value)> = edited.body["jobs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| (j["name"].clone(), j["holds"].clone()))
        .collect();
    assert_eq!(
        holds,
        [(json!("nine-moved"), json!(2)), (json!("nine-on-business-days"), json!(2))],
        "{}",
        edited.body
    );
    for job_id in [&id, &moved_id] {
        let preview = api.get(ALICE, &format!("/v1/jobs/{job_id}/preview?count=2")).await.body;
        assert_eq!(preview_days(&preview), [christmas_eve, "2030-12-25"], "the holiday gone: {preview}");
    }
    let again = api.put(ALICE, "/v1/calendars/desk", &json!({"holidays": [tomorrow]})).await;
    assert_eq!(
        (again.status, &again.body["version"]),
        (StatusCode::OK, &json!(2)),
        "a replay writes nothing"
    );

    let in_use = api.delete(ALICE, "/v1/calendars/desk").await;
    assert_eq!(in_use.status, StatusCode::CONFLICT, "{}", in_use.body);
    assert_eq!(in_use.body["error"]["code"], "calendar_in_use");
    let message = in_use.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("nine-moved") && message.contains("nine-on-business-days"), "{message}");
    let listed = api.get(ALICE, "/v1/calendars").await.body;
    assert_eq!(listed["calendars"][0]["name"], "desk", "{listed}");
    assert_eq!(api.get(BOB, "/v1/calendars").await.body["calendars"], json!([]), "Bob's list is his own");

    let bad = json!({"cron": "0 9 * * *", "calendar": {"holidays": ["2030-02-30"]}});
    let reply = api.post(ALICE, "/v1/jobs", &job("bad-holiday", bad)).await;
    assert_eq!(
        (reply.status, reply.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "schedule.calendar.holidays[0]"),
        "{}",
        reply.body
    );
    let unknown = json!({"cron": "0 9 * * *", "calendar": {"name": "lse"}});
    let reply = api.post(ALICE, "/v1/jobs", &job("unknown-calendar", unknown)).await;
    assert_eq!(
        (reply.status, reply.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "schedule.calendar.name"),
        "{}",
        reply.body
    );

    for job_id in [&id, &moved_id] {
        assert_eq!(api.delete(ALICE, &format!("/v1/jobs/{job_id}")).await.status, StatusCode::NO_CONTENT);
    }
    assert_eq!(
        api.delete(ALICE, "/v1/calendars/desk").await.status,
        StatusCode::NO_CONTENT,
        "no job names it now"
    );
}

/// An edit of a calendar reaches its jobs from their next unclaimed instant on: an instant
/// overdue when the edit lands (the tick behind) keeps its run if the calendar still has it, and
/// an edit of the description alone moves nothing.
pub async fn a_calendar_edit_keeps_an_overdue_instant<H: Harness>() {
    // Thursday 2030-12-19, 08:00 New York.
    let deployment = H::deploy_at("2030-12-19T13:00:00Z", &[]).await;
    let api = deployment.api();
    let put = |body: Value| Call::new(Method::PUT, "/v1/calendars/desk").key(ALICE).json(&body);
    assert_eq!(api.call(put(json!({"holidays": ["2030-12-25"]}))).await.status, StatusCode::CREATED);
    let schedule = json!({"cron": "0 9 * * *", "timezone": "America/New_York", "calendar": {"name": "desk"}});
    let id = api.create_job(ALICE, &job("nine", schedule)).await;
    // 09:05 New York, and the tick has not come by since 08:00.
    deployment.set_clock(t("2030-12-19T14:05:00Z"));
    let edited = api.call(put(json!({"description": "desk holidays", "holidays": ["2030-12-25"]}))).await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.body);
    let view = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body;
    assert_eq!(view["calendars"], json!({"desk": 2}), "{view}");
    assert_eq!(view["next_run_at"], "2030-12-19T14:00:00Z", "the overdue instant is still the next: {view}");
    let edited = api.call(put(json!({"holidays": ["2030-12-20", "2030-12-25"]}))).await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.body);
    deployment.use_cases().tick.run().await.unwrap();
    assert_eq!(instants(&deployment.runs_of(&id).await), ["2030-12-19T14:00:00Z"], "run once, late");
    let view = api.get(ALICE, &format!("/v1/jobs/{id}")).await.body;
    assert_eq!(view["next_run_at"], "2030-12-23T14:00:00Z", "Friday the 20th a holiday now: {view}");
}

/// `n` one-time jobs due at `at`, as stored an hour before (imported: no API, no claim).
pub fn one_time_jobs(n: usize, at: DateTime<Utc>) -> Vec<Job> {
    (0..n)
        .map(|i| Job {
            id: JobId::generate(),
            owner: OWNER.into(),
            document: serde_json::from_value(job(&format!("job-{i:04}"), json!({"at": format_instant(at)})))
                .unwrap(),
            version: 1,
            created_at: at - Duration::hours(1),
            updated_at: at - Duration::hours(1),
            next_run_at: Some(at),
            signing_secret: "test-secret".into(),
            pauses: Vec::new(),
            children: Vec::new(),
            gaps: Vec::new(),
            skips: Vec::new(),
            counted: Default::default(),
            baseline: None,
            versions: Vec::new(),
        })
        .collect()
}

/// Three ticks racing over 500 due jobs create exactly one run per job, send each at least once
/// (a claimer that finds a run another wrote sends it too: its writer may have died before
/// sending; the start fence drops the extra messages), and every job leaves the due index;
/// another tick then finds nothing to do.
pub async fn racing_ticks_claim_each_instant_once<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T11:50:00Z", &[]).await;
    let jobs = one_time_jobs(500, t("2030-01-01T12:00:30Z"));
    deployment.import_jobs(&jobs).await;
    deployment.set_clock(t("2030-01-01T12:00:00Z"));

    // On threads of their own (the scenarios run on two), so that their writes really race.
    let tick = &deployment.use_cases().tick;
    let ticks: Vec<_> = (0..3)
        .map(|_| {
            let tick = tick.clone();
            tokio::spawn(async move { tick.run().await })
        })
        .collect();
    let mut reports = Vec::new();
    for tick in ticks {
        reports.push(tick.await.unwrap().unwrap());
    }
    let claimed: usize = reports.iter().map(|r| r.claims.claimed).sum();
    let dispatched: usize = reports.iter().map(|r| r.claims.dispatched).sum();
    assert_eq!(claimed, 500, "{reports:?}");
    assert!(dispatched >= 500, "{reports:?}");
    for job in &jobs {
        let runs = deployment.runs_of(&job.id.to_string()).await;
        assert_eq!(instants(&runs), ["2030-01-01T12:00:30Z"], "{}", job.id);
    }
    // Every run has its message (SQS counts are approximate: at least one each).
    assert!(deployment.queue_depth().await >= 500);
    assert!(deployment.due_job_ids().await.is_empty(), "one-time jobs leave the index once claimed");
    let again = tick.run().await.unwrap();
    assert_eq!(again.claims.claimed + again.claims.dispatched, 0);
}

/// A burst larger than one invocation can finish within its time budget is continued by the
/// next invocations, without loss or duplication, and none of it counts as missed (the jobs'
/// `catchup: skip` would drop it).
pub async fn a_burst_is_continued_by_the_next_invocation<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T12:00:00Z", &[]).await;
    let mut jobs = one_time_jobs(120, t("2030-01-01T12:00:30Z"));
    for job in &mut jobs {
        job.document.catchup = CatchupPolicy::Skip;
    }
    deployment.import_jobs(&jobs).await;
    // A budget of zero: each invocation does one step (a minute, or the two batches of 25 jobs
    // of a busy minute it has in flight when the budget is checked), then hands over.
    let tick = deployment
        .use_cases_over(deployment.ports(), |s| {
            s.tick =
                TickSettings { batch_jobs: 25, budget: std::time::Duration::ZERO, ..TickSettings::default() }
        })
        .tick;
    let (mut invocations, mut claimed, mut now) = (0, 0, t("2030-01-01T12:00:00Z"));
    while claimed < 120 && invocations <= 40 {
        let report = tick.run().await.unwrap();
        invocations += 1;
        claimed += report.claims.claimed;
        assert_eq!(report.claims.missed_dropped, 0);
        assert!(report.claims.claimed <= 50, "more than two batches: {report:?}");
        assert!(report.unfinished || claimed == 120, "{report:?}");
        // Time moves on between invocations, past the minute the burst was due in.
        now += Duration::seconds(50);
        deployment.set_clock(now);
    }
    assert!(invocations >= 3, "{invocations} invocations");
    assert_eq!(claimed, 120);
    for job in &jobs {
        assert_eq!(deployment.runs_of(&job.id.to_string()).await.len(), 1, "{}", job.id);
    }
    assert_eq!(deployment.queue_depth().await, 120);
}

/// A job paused, and one deleted, between the claimer's read and its advance are not re-armed;
/// the runs it claimed from the stale read do not call their targets.
pub async fn jobs_changed_between_read_and_advance_are_not_rearmed<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T11:50:00Z", &[]).await;
    let api = deployment.api();
    let paused = api.create_job(ALICE, &job("paused", json!({"cron": "0 * * * *"}))).await;
    let deleted = api.create_job(ALICE, &job("deleted", json!({"cron": "0 * * * *"}))).await;
    let (stale_paused, stale_deleted) =
        (deployment.stored_job(&paused).await.unwrap(), deployment.stored_job(&deleted).await.unwrap());
    assert_eq!(api.post(ALICE, &format!("/v1/jobs/{paused}/pause"), &json!({})).await.status, StatusCode::OK);
    assert_eq!(api.delete(ALICE, &format!("/v1/jobs/{deleted}")).await.status, StatusCode::NO_CONTENT);

    let now = t("2030-01-01T12:00:00Z");
    deployment.set_clock(now);
    let report = deployment.use_cases().claimer.claim(vec![stale_paused, stale_deleted], None, now).await;
    assert_eq!((report.advance_conflicts, report.advanced), (2, 0), "{report:?}");
    let stored = deployment.stored_job(&paused).await.unwrap();
    assert!(stored.document.paused);
    assert_eq!(stored.version, 2);
    assert_eq!(api.get(ALICE, &format!("/v1/jobs/{paused}")).await.body["paused"], true);
    assert!(deployment.due_job_ids().await.is_empty(), "neither job is back in the due index");
    assert!(deployment.stored_job(&deleted).await.is_none(), "the advance must not recreate a deleted job");
    assert_eq!(api.get(ALICE, &format!("/v1/jobs/{deleted}")).await.status, StatusCode::NOT_FOUND);

    let paused_run = deployment.runs_of(&paused).await[0].id();
    let deleted_run = deployment.runs_of(&deleted).await[0].id();
    assert_eq!(deployment.drive(&paused_run, 30).await.state, RunState::Skipped);
    assert_eq!(deployment.drive(&deleted_run, 30).await.state, RunState::Cancelled);
    assert!(deployment.target_calls().is_empty());
}

/// A tick whose sends fail leaves its runs QUEUED and its jobs due; the next tick finds the
/// runs, sends each exactly once (their claimer is long gone) and advances the jobs; a tick
/// after that sends nothing more.
pub async fn a_crash_between_claim_and_send_heals_at_the_next_tick<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T11:50:00Z", &[]).await;
    let jobs = one_time_jobs(20, t("2030-01-01T12:00:30Z"));
    deployment.import_jobs(&jobs).await;
    deployment.set_clock(t("2030-01-01T12:00:00Z"));

    // Every send fails, as in an SQS outage.
    let script = Script::new();
    script.add(
        Rule::every("RunQueue::send").refuse(QueueError::Unavailable("injected: the queue is down".into())),
    );
    let down =
        Ports { queue: Faulty::new(deployment.ports().queue.clone(), &script), ..deployment.ports().clone() };
    let crashed = deployment.use_cases_over(&down, |_| {}).tick.run().await.unwrap();
    assert_eq!((crashed.claims.claimed, crashed.claims.send_failures, crashed.claims.failed), (20, 20, 20));
    for job in &jobs {
        assert_eq!(deployment.runs_of(&job.id.to_string()).await.len(), 1, "the crashed tick wrote its run");
    }
    assert_eq!(deployment.queue_depth().await, 0);
    assert_eq!(deployment.due_job_ids().await.len(), 20, "not advanced: the jobs are still due");

    deployment.set_clock(t("2030-01-01T12:01:00Z"));
    let healed = deployment.use_cases().tick.run().await.unwrap();
    assert_eq!(healed.claims.duplicates, 20);
    assert_eq!(healed.claims.resent, 20);
    assert_eq!(healed.claims.dispatched, 20);
    assert_eq!(healed.claims.claimed, 0, "no duplicate run");
    assert_eq!(deployment.queue_depth().await, 20);
    assert!(deployment.due_job_ids().await.is_empty());
    for job in &jobs {
        assert_eq!(instants(&deployment.runs_of(&job.id.to_string()).await), ["2030-01-01T12:00:30Z"]);
    }
    let later = deployment.use_cases().tick.run().await.unwrap();
    assert_eq!(later.claims.dispatched, 0);
    assert_eq!(deployment.queue_depth().await, 20);
}

/// Ticks every minute across a DST change of New York (from `from` to `to`, UTC); returns each
/// job's run instants in UTC: 02:30, 01:30 and every hour at :30, local time.
async fn tick_across<H: Harness>(from: &str, to: &str) -> Vec<Vec<String>> {
    let start = t(from);
    let begin = (start - Duration::minutes(5)).to_rfc3339();
    let deployment =
        H::deploy_at(&begin, &[("SUNDIAL_CLAIM_AHEAD_S", "60"), ("SUNDIAL_DUE_SHARDS", "1")]).await;
    let mut ids = Vec::new();
    for (name, cron) in [("at-0230", "30 2 * * *"), ("at-0130", "30 1 * * *"), ("every-hour", "30 * * * *")] {
        let job = job(name, json!({"cron": cron, "timezone": "America/New_York"}));
        ids.push(deployment.api().create_job(ALICE, &job).await);
    }
    let mut now = start - Duration::minutes(4);
    while now < t(to) {
        deployment.set_clock(now);
        deployment.use_cases().tick.run().await.unwrap();
        now += Duration::minutes(1);
    }
    let mut out = Vec::new();
    for id in ids {
        out.push(instants(&deployment.runs_of(&id).await).into_iter().filter(|i| i.as_str() < to).collect());
    }
    out
}

/// 2026-03-08, New York springs forward 02:00 EST → 03:00 EDT: 02:30 fires once at 03:00,
/// 01:30 is unaffected, the `*` hour has no 02:30.
pub async fn dst_spring_forward<H: Harness>() {
    let fired = tick_across::<H>("2026-03-08T05:00:00Z", "2026-03-08T08:00:00Z").await;
    assert_eq!(fired[0], ["2026-03-08T07:00:00Z"], "02:30 → 03:00 EDT");
    assert_eq!(fired[1], ["2026-03-08T06:30:00Z"], "01:30 EST");
    assert_eq!(fired[2], ["2026-03-08T05:30:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z"], "* hour");
}

/// 2026-11-01, New York falls back 02:00 EDT → 01:00 EST: 01:30 fires once (EDT), 02:30 once
/// (EST), the `*` hour fires in both passes of 01:30.
pub async fn dst_fall_back<H: Harness>() {
    let fired = tick_across::<H>("2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z").await;
    assert_eq!(fired[0], ["2026-11-01T07:30:00Z"], "02:30 EST");
    assert_eq!(fired[1], ["2026-11-01T05:30:00Z"], "01:30 EDT only");
    assert_eq!(
        fired[2],
        ["2026-11-01T04:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:30:00Z"],
        "* hour, both passes"
    );
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! tick_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => tick {
            catchup_policies_after_downtime,
            the_runtime_stopped_for_five_minutes,
            a_union_runs_once_where_its_schedules_coincide,
            a_business_calendar_skips_or_moves_a_holiday,
            a_calendar_edit_keeps_an_overdue_instant,
            dst_changes_are_warned_of_and_previewed,
            pause_resume_and_end_at,
            pauses_end_by_themselves_and_resumes_catch_up_as_asked,
            skipped_instants_never_run_and_can_be_taken_back,
            a_run_limit_ends_the_schedule,
            a_run_limit_counts_runs_claimed_ahead_once_across_a_resume,
            an_edit_from_daily_to_minutes_claims_at_once,
            racing_ticks_claim_each_instant_once,
            a_burst_is_continued_by_the_next_invocation,
            a_crash_between_claim_and_send_heals_at_the_next_tick,
            jobs_changed_between_read_and_advance_are_not_rearmed,
            dst_spring_forward,
            dst_fall_back,
        });
    };
}
