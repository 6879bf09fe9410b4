//! The tick and the forecast agree: runs of jobs with a flexible window are dispatched at the
//! instant plus `Job::start_offset`, keep the instant as their scheduled time, and start in the
//! minutes the forecast counted them in. Over the ports in memory, on a manual clock.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use chrono::Duration;
use serde_json::json;
use sundial_app::forecast::{Forecasts, Scope};
use sundial_testkit::world::{OWNER, World, job, t};

#[tokio::test]
async fn flexible_runs_start_where_the_forecast_counts_them() {
    let world = World::at("2030-01-01T11:58:00Z");
    let mut jobs = Vec::new();
    for k in 0..40 {
        let extra = json!({"flexible_window_s": 600});
        jobs.push(world.create(job(&format!("hourly-{k}"), json!({"cron": "0 * * * *"}), extra)).await);
    }
    let plain = world.create(job("plain", json!({"cron": "0 * * * *"}), json!({}))).await;

    let forecasts = Forecasts::new(world.job_store.clone());
    let noon = t("2030-01-01T12:00:00Z");
    let scope = Scope::Owner(OWNER.to_string());
    let forecast = forecasts.forecast(&scope, noon, noon + Duration::minutes(15)).await.unwrap();
    assert_eq!(forecast.total, 41);

    // The tick a little before noon claims 12:00 (a run's delay, offset included, stays within
    // SQS's 15 minutes).
    world.set("2030-01-01T11:59:30Z");
    world.use_cases.tick.run().await.unwrap();
    let mut started = vec![0u32; 15];
    for j in jobs.iter().chain([&plain]) {
        let runs = world.runs_of(&j.id);
        assert_eq!(runs.len(), 1, "{}", j.document.name);
        let run = &runs[0];
        assert_eq!(run.scheduled_at(), noon, "the run keeps its instant");
        assert_eq!(run.due_at, noon + j.start_offset(noon), "dispatched at the instant plus its offset");
        assert!(run.due_at - noon <= Duration::seconds(600));
        started[((run.due_at - noon).num_seconds() / 60) as usize] += 1;
    }
    assert_eq!(forecast.counts, started, "the forecast counts each run in the minute it starts");
    assert!(started.iter().filter(|c| **c > 0).count() > 5, "the window spreads them: {started:?}");

    // Another owner's forecast counts none of them; the whole stack's counts them all.
    let bob = forecasts.forecast(&Scope::Owner("bob".into()), noon, noon + Duration::hours(1)).await.unwrap();
    assert_eq!(bob.total, 0);
    let stack = forecasts.forecast(&Scope::Stack, noon, noon + Duration::minutes(15)).await.unwrap();
    assert_eq!(stack.counts, forecast.counts);

    // A window the domain refuses names its field.
    let refused = forecasts.forecast(&scope, noon, noon).await.unwrap_err();
    assert!(
        matches!(refused, sundial_app::jobs::JobsError::Malformed(ref e) if e.field == "to"),
        "{refused:?}"
    );
}
