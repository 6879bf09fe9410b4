//! The worker over the runs queue: retries with backoff, failures that end a run, and runs whose
//! job was paused or deleted after the claim. Each scenario drives the queue to the worker
//! through the harness: in memory a simulated second at a time, on the emulator in real time.

use crate::api::{ALICE, BOB};
use crate::harness::Harness;
use chrono::Duration;
use http::StatusCode;
use serde_json::{Value, json};
use sundial_domain::run::RunState;

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
    assert!(calls.iter().all(|c| c.run_id == run_id.to_string()));
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

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! worker_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => worker {
            fails_twice_then_succeeds,
            always_failing_ends_failed_and_the_message_is_gone,
            permanent_failures_are_not_retried,
            paused_and_deleted_jobs_do_not_execute,
        });
    };
}
