//! The worker over the runs queue: retries with backoff, failures that end a run, and runs whose
//! job was paused or deleted after the claim. Each scenario drives the queue to the worker
//! through the harness: in memory a simulated second at a time, on the emulator in real time.

use crate::api::{ALICE, BOB, Call};
use crate::harness::Harness;
use crate::world::Hanging;
use chrono::Duration;
use http::Method;
use http::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use sundial_app::ports::Ports;
use sundial_app::worker::Disposition;
use sundial_domain::job::EventKind;
use sundial_domain::run::{Outcome, Run, RunId, RunState};
use sundial_domain::target::headers::CALLBACK_TOKEN;

/// A job due once a year (never, in a test) calling the deployment's target with a payload.
fn yearly<H: Harness>(deployment: &H, name: &str, retry: Value) -> Value {
    json!({
        "name": name,
        "schedule": {"cron": "0 0 1 1 *"},
        "target": {"type": "http", "url": deployment.target_url()},
        "payload": {"hello": "world"},
        "retry": retry,
        "timeout_s": 5
    })
}

/// A target failing twice then succeeding: SUCCEEDED at attempt 3, every call naming the run,
/// the gaps between calls within the backoff's bounds, the attempts in the run's detail, a
/// `retrying` told per retry, the job showing it as its last run, the queue empty.
pub async fn fails_twice_then_succeeds<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let retry = json!({"max_attempts": 5, "backoff_s": 1, "max_backoff_s": 2});
    let id = deployment.api().create_job(ALICE, &yearly(&deployment, "flaky", retry)).await;
    deployment.answer_next(&[503, 503]);
    let run_id = deployment.trigger(&id).await;
    let done = deployment.drive(&run_id, 60).await;
    assert_eq!((done.state, done.attempt), (RunState::Succeeded, 3));

    let calls = deployment.target_calls();
    let attempts: Vec<u32> = calls.iter().map(|c| c.attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
    assert!(calls.iter().all(|c| c.run_id == run_id.to_string() && c.job_id == id));
    // Full jitter over [1 s, min(2 s, 1 s × 2^(n − 1))]: never sooner, never later than the
    // harness's own latency allows.
    let slack = deployment.latency();
    let gaps: Vec<Duration> = calls.windows(2).map(|p| p[1].at - p[0].at).collect();
    assert!(gaps[0] >= Duration::milliseconds(900) && gaps[0] <= Duration::seconds(1) + slack, "{gaps:?}");
    assert!(gaps[1] >= Duration::milliseconds(900) && gaps[1] <= Duration::seconds(2) + slack, "{gaps:?}");

    let detail = deployment.api().get(ALICE, &format!("/v1/runs/{run_id}")).await;
    assert_eq!(detail.status, StatusCode::OK, "{}", detail.body);
    assert_eq!(detail.body["state"], "SUCCEEDED");
    let attempts = detail.body["attempts"].as_array().unwrap();
    let outcomes: Vec<(&Value, &Value)> =
        attempts.iter().map(|a| (&a["outcome"], &a["status_code"])).collect();
    assert_eq!(
        outcomes,
        [
            (&json!("failed"), &json!(503)),
            (&json!("failed"), &json!(503)),
            (&json!("succeeded"), &json!(200))
        ]
    );
    assert_eq!(attempts[2]["worker"], "test-worker");
    assert!(attempts.iter().all(|a| a.get("callback").is_none()));
    assert_eq!(
        deployment.told_about(&run_id).await,
        ["retrying", "retrying"],
        "succeeded is told only when asked"
    );

    // The job shows its newest run, read from the runs store.
    let shown = deployment.api().get(ALICE, &format!("/v1/jobs/{id}")).await;
    assert_eq!(shown.body["last_run"]["id"], run_id.to_string().as_str());
    assert_eq!(shown.body["last_run"]["state"], "SUCCEEDED");
    assert_eq!(deployment.queue_depth().await, 0);
}

/// A target that always fails: FAILED after max_attempts, one call per attempt, the message
/// gone, and `failed` told once after a `retrying` per retry.
pub async fn always_failing_ends_failed_and_the_message_is_gone<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let retry = json!({"max_attempts": 3, "backoff_s": 1, "max_backoff_s": 1});
    let id = deployment.api().create_job(ALICE, &yearly(&deployment, "broken", retry)).await;
    deployment.answer_next(&[500, 500, 500]);
    let run_id = deployment.trigger(&id).await;
    let done = deployment.drive(&run_id, 60).await;
    assert_eq!(done.state, RunState::Failed);
    assert_eq!(done.attempts.len(), 3);
    assert_eq!(deployment.target_calls().len(), 3);
    assert_eq!(deployment.queue_depth().await, 0);
    assert_eq!(deployment.told_about(&run_id).await, ["retrying", "retrying", "failed"]);
}

/// A permanent failure (404) ends the run at once, whatever attempts remain.
pub async fn permanent_failures_are_not_retried<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let retry = json!({"max_attempts": 5, "backoff_s": 1});
    let id = deployment.api().create_job(ALICE, &yearly(&deployment, "gone", retry)).await;
    deployment.answer_next(&[404]);
    let run_id = deployment.trigger(&id).await;
    let done = deployment.drive(&run_id, 30).await;
    assert_eq!(done.state, RunState::Failed);
    assert_eq!(done.attempts.len(), 1);
    assert_eq!(deployment.target_calls().len(), 1);
    assert_eq!(deployment.queue_depth().await, 0);
    assert_eq!(deployment.told_about(&run_id).await, ["failed"]);
}

/// A job paused after its run was claimed: the run ends SKIPPED (and says so); a deleted job's
/// run is CANCELLED, telling nobody; no target is called. The deleted job's history is still
/// its owner's to read, nobody else's.
pub async fn paused_and_deleted_jobs_do_not_execute<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let api = deployment.api();
    let paused = api.create_job(ALICE, &yearly(&deployment, "paused", json!({}))).await;
    let deleted = api.create_job(ALICE, &yearly(&deployment, "deleted", json!({}))).await;
    let paused_run = deployment.trigger(&paused).await;
    let deleted_run = deployment.trigger(&deleted).await;
    assert_eq!(api.post(ALICE, &format!("/v1/jobs/{paused}/pause"), &json!({})).await.status, StatusCode::OK);
    assert_eq!(api.delete(ALICE, &format!("/v1/jobs/{deleted}")).await.status, StatusCode::NO_CONTENT);

    assert_eq!(deployment.drive(&paused_run, 30).await.state, RunState::Skipped);
    assert_eq!(deployment.drive(&deleted_run, 30).await.state, RunState::Cancelled);
    assert!(deployment.target_calls().is_empty());
    assert_eq!(deployment.told_about(&paused_run).await, ["skipped"]);
    assert!(deployment.told_about(&deleted_run).await.is_empty());
    assert_eq!(api.get(ALICE, &format!("/v1/runs/{deleted_run}")).await.status, StatusCode::OK);
    assert_eq!(api.get(BOB, &format!("/v1/runs/{deleted_run}")).await.status, StatusCode::NOT_FOUND);
}

/// The message that asks for `attempt` of `run`, as the tick or a retry sends it.
pub fn message(run: &Run, attempt: u32) -> String {
    json!({"job_id": run.job_id.to_string(), "run_key": run.key.encode(), "attempt": attempt}).to_string()
}

/// The same message handled twice at once on two threads (five times over, to give a race its
/// chance), then a stale copy: the target is called once per attempt, one terminal record.
pub async fn duplicates_and_stale_messages_never_run_an_attempt_twice<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id = deployment.api().create_job(ALICE, &yearly(&deployment, "once", json!({}))).await;
    let worker = &deployment.use_cases().worker;
    for round in 1..=5 {
        let run_id = deployment.trigger(&id).await;
        let bodies = deployment.take_messages().await;
        assert_eq!(bodies.len(), 1, "one message per trigger: {bodies:?}");
        let body = bodies[0].clone();
        let handles: Vec<_> = ["worker-a", "worker-b"]
            .into_iter()
            .map(|name| {
                let (worker, body) = (worker.clone(), body.clone());
                tokio::spawn(async move { worker.handle(&body, name).await })
            })
            .collect();
        for handle in handles {
            assert_eq!(handle.await.unwrap(), Disposition::Delete);
        }
        assert_eq!(deployment.target_calls().len(), round, "round {round}: the target was called twice");
        let done = deployment.run(&run_id).await;
        assert_eq!((done.state, done.attempts.len()), (RunState::Succeeded, 1));

        // A late copy of the first attempt's message: dropped unread.
        assert_eq!(worker.handle(&body, "worker-c").await, Disposition::Delete);
        assert_eq!(deployment.target_calls().len(), round);
        assert_eq!(deployment.run(&run_id).await, done);
    }
}

/// The tick claims the next instant of `forbid` and `replace` jobs QUEUED whatever is active:
/// the policy is decided when the run is about to start. Then, with the earlier run still
/// active (its target accepted, 202, and keeps working), `forbid` records the new run SKIPPED
/// naming it (and tells it), and `replace` cancels the earlier run (its open attempt closed as
/// cancelled) and starts the new one. Messages are handed to the worker as the queue would
/// hand them at each instant of the manual clock.
pub async fn concurrency_forbid_and_replace_are_decided_at_the_start<H: Harness>() {
    let vars = [("SUNDIAL_CLAIM_AHEAD_S", "60"), ("SUNDIAL_HEARTBEAT_WINDOW_S", "3600")];
    let deployment = H::deploy_at("2030-01-01T12:00:10Z", &vars).await;
    let worker = &deployment.use_cases().worker;
    let mut ids = Vec::new();
    for policy in ["forbid", "replace"] {
        let mut job = yearly(&deployment, policy, json!({}));
        job["schedule"] = json!({"cron": "* * * * *"});
        job["concurrency"] = json!(policy);
        ids.push(deployment.api().create_job(ALICE, &job).await);
    }
    // Due soon: the API claimed 12:01 for both. Their targets accept and keep working.
    deployment.answer_next(&[202, 202]);
    deployment.set_clock("2030-01-01T12:01:00Z".parse().unwrap());
    for id in &ids {
        let runs = deployment.runs_of(id).await;
        assert_eq!(runs.len(), 1, "{runs:?}");
        assert_eq!(runs[0].scheduled_at().to_rfc3339(), "2030-01-01T12:01:00+00:00");
        worker.handle(&message(&runs[0], 1), "w").await;
        assert_eq!(deployment.run(&runs[0].id()).await.state, RunState::Running);
    }
    deployment.set_clock("2030-01-01T12:01:30Z".parse().unwrap());
    deployment.use_cases().tick.run().await.unwrap();
    for id in &ids {
        let runs = deployment.runs_of(id).await;
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert_eq!(runs[1].scheduled_at().to_rfc3339(), "2030-01-01T12:02:00+00:00");
        assert_eq!(runs[1].state, RunState::Queued, "the tick decides nothing");
        assert_eq!(runs[0].state, RunState::Running);
    }

    deployment.set_clock("2030-01-01T12:02:00Z".parse().unwrap());
    for id in &ids {
        worker.handle(&message(&deployment.runs_of(id).await[1], 1), "w").await;
    }
    let forbid = deployment.runs_of(&ids[0]).await;
    assert_eq!(forbid[0].state, RunState::Running);
    assert_eq!(forbid[1].state, RunState::Skipped);
    assert!(
        forbid[1].reason.as_deref().unwrap().contains(&forbid[0].id().to_string()),
        "{:?}",
        forbid[1].reason
    );
    assert_eq!(deployment.told_about(&forbid[1].id()).await, ["skipped"]);
    let events: Vec<_> = forbid[1].events.iter().map(|e| (e.kind.told(), e.sent)).collect();
    assert_eq!(events, [(Some(EventKind::Skipped), true)]);

    let replace = deployment.runs_of(&ids[1]).await;
    assert_eq!(replace[0].state, RunState::Cancelled);
    assert!(replace[0].reason.as_deref().unwrap().contains(&replace[1].id().to_string()));
    assert_eq!(replace[0].attempts[0].outcome, Some(Outcome::Cancelled));
    assert_eq!(replace[1].state, RunState::Succeeded);
    assert_eq!(deployment.target_calls().len(), 3, "two accepted, then only the replacing run");
}

/// A callback of run `run_id` (`heartbeat` or `complete`) carrying `token`.
fn callback<'a>(run_id: &RunId, path: &str, token: &str) -> Call<'a> {
    Call::new(Method::POST, format!("/v1/runs/{run_id}/{path}")).header(CALLBACK_TOKEN, token.to_string())
}

/// The 202 flow, through the API's callbacks: heartbeats keep a long attempt alive past the
/// heartbeat window and a completion with the callback token ends it; a wrong token is refused,
/// and copies of the attempt's message delivered meanwhile change nothing.
pub async fn accepted_work_reports_back_with_heartbeats_and_completion<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T12:00:00Z", &[("SUNDIAL_HEARTBEAT_WINDOW_S", "2")]).await;
    let (api, worker) = (deployment.api(), &deployment.use_cases().worker);
    let mut job = yearly(&deployment, "long", json!({"max_attempts": 1}));
    job["timeout_s"] = json!(600);
    let id = api.create_job(ALICE, &job).await;
    deployment.answer_next(&[202]);
    let run_id = deployment.trigger(&id).await;
    let body = deployment.work(1, "w").await.remove(0);
    let token = deployment.target_calls()[0].callback_token.clone();
    assert_eq!(deployment.run(&run_id).await.state, RunState::Running);
    let wrong = api.call(callback(&run_id, "heartbeat", "not-the-token")).await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "{}", wrong.body);

    // Five seconds of heartbeats, past the 2 s window: the attempt stays open.
    let mut now: chrono::DateTime<chrono::Utc> = "2030-01-01T12:00:00Z".parse().unwrap();
    for _ in 0..5 {
        now += Duration::seconds(1);
        deployment.set_clock(now);
        let beat = api.call(callback(&run_id, "heartbeat", &token)).await;
        assert_eq!(beat.status, StatusCode::OK, "{}", beat.body);
        assert_eq!(deployment.run(&run_id).await.lease_until, Some(now + Duration::seconds(2)));
        let redelivered = worker.handle(&body, "w").await;
        assert_eq!(redelivered, Disposition::Delete, "a live lease is its worker's, not the message's");
        let report = deployment.use_cases().watchdog.run().await.unwrap();
        assert_eq!((report.lost, report.timed_out), (0, 0));
    }
    assert_eq!(deployment.run(&run_id).await.state, RunState::Running);

    let completion = json!({"succeeded": true, "output": "42 rows"});
    let done = api.call(callback(&run_id, "complete", &token).json(&completion)).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert_eq!(done.body["state"], "SUCCEEDED");
    assert_eq!(done.body["attempts"][0]["output"], "42 rows");
    assert_eq!(done.body["attempts"][0]["status_code"], 202);
    let again = api.call(callback(&run_id, "complete", &token).json(&completion)).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.body);
    assert_eq!(deployment.target_calls().len(), 1);
}

/// A 202 without heartbeats: once the window passes, the watchdog records the attempt lost and
/// sends the next one, which succeeds.
pub async fn accepted_work_without_heartbeats_is_lost<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T12:00:00Z", &[("SUNDIAL_HEARTBEAT_WINDOW_S", "1")]).await;
    let watchdog = &deployment.use_cases().watchdog;
    let mut job =
        yearly(&deployment, "silent", json!({"max_attempts": 2, "backoff_s": 1, "max_backoff_s": 1}));
    job["timeout_s"] = json!(600);
    let id = deployment.api().create_job(ALICE, &job).await;
    deployment.answer_next(&[202]);
    let run_id = deployment.trigger(&id).await;
    deployment.work(1, "w").await;
    assert_eq!(watchdog.run().await.unwrap().lost, 0, "within the window");
    deployment.set_clock("2030-01-01T12:00:01Z".parse().unwrap());
    let report = watchdog.run().await.unwrap();
    assert_eq!((report.lost, report.timed_out, report.dispatched), (1, 0, 1));
    deployment.set_clock("2030-01-01T12:00:02Z".parse().unwrap());
    let done = deployment.drive(&run_id, 30).await;
    assert_eq!(done.state, RunState::Succeeded);
    let outcomes: Vec<_> = done.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [Some(Outcome::Lost), Some(Outcome::Succeeded)]);
    assert_eq!(deployment.target_calls().len(), 2);
}

/// A worker killed mid-attempt (its call never returns; the test drops it): a copy of the
/// message handed to a worker before the attempt's lease ends changes nothing; once the lease
/// has expired, the message records the attempt lost and the run is attempted again.
pub async fn a_worker_killed_mid_attempt_is_replaced_after_its_lease<H: Harness>() {
    let start: chrono::DateTime<chrono::Utc> = "2030-01-01T12:00:00Z".parse().unwrap();
    let deployment = H::deploy_at("2030-01-01T12:00:00Z", &[]).await;
    let retry = json!({"max_attempts": 3, "backoff_s": 1, "max_backoff_s": 1});
    let mut job = yearly(&deployment, "killed", retry);
    job["timeout_s"] = json!(30);
    let id = deployment.api().create_job(ALICE, &job).await;
    let run_id = deployment.trigger(&id).await;
    let body = message(&deployment.run(&run_id).await, 1);

    let hanging = Arc::new(Hanging::default());
    let ports = Ports { caller: hanging.clone(), ..deployment.ports().clone() };
    let doomed = deployment.use_cases_over(&ports, |_| {}).worker;
    tokio::select! {
        _ = doomed.handle(&body, "doomed") => panic!("a hanging call never returns"),
        () = hanging.called.notified() => {}
    }
    let held = deployment.run(&run_id).await;
    assert_eq!((held.state, held.attempt), (RunState::Running, 1));
    // The lease: the 30 s timeout and the worker's 30 s margin.
    assert_eq!(held.lease_until, Some(start + Duration::seconds(60)));

    let worker = &deployment.use_cases().worker;
    deployment.set_clock(start + Duration::seconds(59));
    worker.handle(&body, "early").await;
    assert_eq!(deployment.run(&run_id).await, held, "the lease is still the doomed worker's");
    // The message itself (the dead consumer never received it here) is handled at the lease's
    // end, and what its handling asks of the queue is done: the next attempt is sent.
    deployment.set_clock(start + Duration::seconds(60));
    deployment.work(1, "test-worker").await;
    // Past the retry's backoff (1 s) on the manual clock, which only the test moves.
    deployment.set_clock(start + Duration::seconds(62));
    let done = deployment.drive(&run_id, 30).await;
    assert_eq!(done.state, RunState::Succeeded);
    let attempts: Vec<_> = done.attempts.iter().map(|a| (a.n, a.worker.as_str(), a.outcome)).collect();
    assert_eq!(attempts, [(1, "doomed", Some(Outcome::Lost)), (2, "test-worker", Some(Outcome::Succeeded))]);
    assert!(done.attempts[1].started_at >= held.lease_until.unwrap());
    assert_eq!(hanging.calls(), 1);
    assert_eq!(deployment.target_calls().len(), 1, "the second attempt reached the target");
    assert_eq!(deployment.told_about(&run_id).await, ["retrying"]);
}

/// A run's own payload and a job's templated one: a trigger given `{"payload": …}` delivers it
/// (the run view shows it) and a re-run given another delivers that; a job that fills
/// placeholders delivers its run's scheduled time, run id and attempt; an unknown placeholder
/// or a payload over the limit is refused (422 naming `payload`) and makes no run.
pub async fn runs_deliver_their_own_or_a_templated_payload<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let api = deployment.api();
    let id = api.create_job(ALICE, &yearly(&deployment, "reports", json!({"max_attempts": 1}))).await;
    let trigger =
        |body: Value| Call::new(Method::POST, format!("/v1/jobs/{id}/trigger")).key(ALICE).json(&body);
    let own = json!({"month": "2030-01", "dry_run": true});
    let triggered = api.call(trigger(json!({"payload": own}))).await;
    assert_eq!(triggered.status, StatusCode::ACCEPTED, "{}", triggered.body);
    assert_eq!(triggered.body["payload"], own, "{}", triggered.body);
    let run_id = RunId::parse(triggered.body["id"].as_str().unwrap()).unwrap();
    assert_eq!(deployment.drive(&run_id, 30).await.state, RunState::Succeeded);
    let shown = api.get(ALICE, &format!("/v1/runs/{run_id}")).await.body;
    assert_eq!(shown["payload"], own, "the run view shows it: {shown}");
    let rerun = Call::new(Method::POST, format!("/v1/runs/{run_id}/rerun"))
        .key(ALICE)
        .json(&json!({"payload": {"month": "2030-02"}}));
    let rerun = api.call(rerun).await;
    assert_eq!(rerun.status, StatusCode::ACCEPTED, "{}", rerun.body);
    let rerun_id = RunId::parse(rerun.body["id"].as_str().unwrap()).unwrap();
    assert_eq!(deployment.drive(&rerun_id, 30).await.state, RunState::Succeeded);
    let plain = deployment.trigger(&id).await;
    assert_eq!(deployment.drive(&plain, 30).await.state, RunState::Succeeded);
    let delivered: Vec<Value> = deployment.target_calls().into_iter().map(|c| c.payload).collect();
    assert_eq!(
        delivered,
        [own, json!({"month": "2030-02"}), json!({"hello": "world"})],
        "then the job's own"
    );

    // Refused: no run is made.
    let before = deployment.target_calls().len();
    let runs_before = deployment.runs_of(&id).await.len();
    let big = "x".repeat(70 * 1024);
    let refused = api.call(trigger(json!({"payload": {"blob": big}}))).await;
    assert_eq!(
        (refused.status, refused.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "payload"),
        "{}",
        refused.body
    );
    let unknown = api.call(trigger(json!({"payload": "{{scheduled_at}}", "extra": 1}))).await;
    assert_eq!(
        (unknown.status, unknown.error_field()),
        (StatusCode::BAD_REQUEST, "extra"),
        "{}",
        unknown.body
    );
    assert_eq!(deployment.runs_of(&id).await.len(), runs_before, "no run was made");

    // Templated: the job fills its placeholders per attempt.
    let mut templated =
        yearly(&deployment, "templated", json!({"max_attempts": 2, "backoff_s": 1, "max_backoff_s": 1}));
    templated["payload_template"] = json!(true);
    templated["payload"] = json!({"for": "{{scheduled_at}}", "run": "{{run_id}}#{{ attempt }}", "job": "{{job.name}}", "raw": "{{{{x}}"});
    let templated_id = api.create_job(ALICE, &templated).await;
    deployment.answer_next(&[503]);
    let run = deployment.trigger(&templated_id).await;
    let done = deployment.drive(&run, 60).await;
    assert_eq!((done.state, done.attempt), (RunState::Succeeded, 2));
    let scheduled = done.scheduled_at().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let calls: Vec<Value> = deployment.target_calls().into_iter().skip(before).map(|c| c.payload).collect();
    let want = |attempt: u32| json!({"for": scheduled, "run": format!("{run}#{attempt}"), "job": "templated", "raw": "{{x}}"});
    assert_eq!(calls, [want(1), want(2)], "each attempt's own");
    let mut bad = yearly(&deployment, "bad-template", json!({"max_attempts": 1}));
    bad["payload_template"] = json!(true);
    bad["payload"] = json!({"when": "{{now}}"});
    let reply = api.post(ALICE, "/v1/jobs", &bad).await;
    assert_eq!(
        (reply.status, reply.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "payload.when"),
        "{}",
        reply.body
    );
    let override_unknown = api
        .call(
            Call::new(Method::POST, format!("/v1/jobs/{templated_id}/trigger"))
                .key(ALICE)
                .json(&json!({"payload": {"x": "{{nope}}"}})),
        )
        .await;
    assert_eq!(
        (override_unknown.status, override_unknown.error_field()),
        (StatusCode::UNPROCESSABLE_ENTITY, "payload.x"),
        "{}",
        override_unknown.body
    );
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! worker_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => worker {
            fails_twice_then_succeeds,
            always_failing_ends_failed_and_the_message_is_gone,
            permanent_failures_are_not_retried,
            paused_and_deleted_jobs_do_not_execute,
            duplicates_and_stale_messages_never_run_an_attempt_twice,
            concurrency_forbid_and_replace_are_decided_at_the_start,
            accepted_work_reports_back_with_heartbeats_and_completion,
            accepted_work_without_heartbeats_is_lost,
            a_worker_killed_mid_attempt_is_replaced_after_its_lease,
            runs_deliver_their_own_or_a_templated_payload,
        });
    };
}
