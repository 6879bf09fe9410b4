//! Real-time dispatch: a run's message becomes visible at its second, never before. These tests
//! wait on the wall clock, so `scripts/test` runs them in a phase of their own, one at a time,
//! after the rest of the suite (nothing else loads the machine or the emulator meanwhile).
//! Their names start with `realtime_`, which is how that phase selects them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use chrono::{DateTime, Duration, SubsecRound, Utc};
use serde_json::{Value, json};
use sundial_domain::run::RunKey;
use sundial_tests::{ALICE, Options, Stack};

/// Lateness tolerated between a message's instant and its receipt: polling every 100 ms plus the
/// emulator's own latency on a loaded two-core machine.
const LATE: Duration = Duration::seconds(2);

/// Receives messages for `window`, returning each body with the time it was first seen.
async fn watch_queue(stack: &Stack, window: std::time::Duration) -> Vec<(DateTime<Utc>, Value)> {
    let deadline = std::time::Instant::now() + window;
    let mut seen = Vec::new();
    while std::time::Instant::now() < deadline {
        let out = stack
            .sqs
            .receive_message()
            .queue_url(&stack.resources.runs_queue_url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        let at = Utc::now();
        for m in out.messages.unwrap_or_default() {
            seen.push((at, serde_json::from_str(m.body().unwrap()).unwrap()));
            stack
                .sqs
                .delete_message()
                .queue_url(&stack.resources.runs_queue_url)
                .receipt_handle(m.receipt_handle().unwrap())
                .send()
                .await
                .unwrap();
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    seen
}

fn instant_of(body: &Value) -> DateTime<Utc> {
    RunKey::decode(body["run_key"].as_str().unwrap()).unwrap().instant
}

/// A job created with `at` 20 s ahead, after the tick already processed this minute, fires at
/// its second: the API claims it (due soon) and its message is visible at that second.
#[tokio::test]
async fn realtime_at_20s_ahead_fires_at_its_second() {
    let stack = Stack::new().await;
    stack.services.use_cases.tick.run().await.unwrap();
    let at = Utc::now().trunc_subsecs(0) + Duration::seconds(20);
    let job = json!({"name": "soon", "schedule": {"at": at.to_rfc3339()}, "target": {"type": "http", "url": "http://127.0.0.1:9/"}});
    stack.api.create_job(ALICE, &job).await;
    stack.services.use_cases.tick.run().await.unwrap();

    let seen = watch_queue(&stack, std::time::Duration::from_secs(25)).await;
    assert_eq!(seen.len(), 1, "exactly one message: {seen:?}");
    let (received, body) = &seen[0];
    assert_eq!(instant_of(body), at);
    assert!(*received >= at, "visible {} before its instant {at}", at - *received);
    assert!(*received <= at + LATE, "visible {} late", *received - at);
}

/// A schedule with seconds: every instant is claimed with its own delay and is visible at its
/// second, not before.
#[tokio::test]
async fn realtime_seconds_schedule_is_visible_at_each_second() {
    let stack = Stack::with(Options {
        vars: [("SUNDIAL_CLAIM_AHEAD_S", "60".to_string())].into(),
        ..Default::default()
    })
    .await;
    let job = json!({"name": "every-10s", "schedule": {"cron": "*/10 * * * * *"}, "target": {"type": "http", "url": "http://127.0.0.1:9/"}});
    stack.api.create_job(ALICE, &job).await;

    let seen = watch_queue(&stack, std::time::Duration::from_secs(25)).await;
    assert!(seen.len() >= 2, "{seen:?}");
    for (received, body) in &seen {
        let instant = instant_of(body);
        assert_eq!(instant.timestamp() % 10, 0);
        assert!(*received >= instant, "visible {} before its instant {instant}", instant - *received);
        assert!(*received <= instant + LATE, "{instant} visible {} late", *received - instant);
    }
}

/// A hanging target: each attempt is abandoned at `timeout_s` (± 1 s), the run goes RETRYING,
/// then TIMED_OUT after the last attempt.
#[tokio::test]
async fn realtime_hanging_target_times_out_at_its_timeout() {
    use sundial_domain::run::{Outcome, RunId, RunState};
    let stack = Stack::new().await;
    let target = sundial_tests::TargetServer::start(|_| sundial_tests::Answer::Hang).await;
    let job = json!({
        "name": "hangs", "target": {"type": "http", "url": target.url}, "timeout_s": 3,
        "schedule": {"cron": "0 0 1 1 *"}, "retry": {"max_attempts": 2, "backoff_s": 1, "max_backoff_s": 1}
    });
    let id = stack.api.create_job(ALICE, &job).await;
    let reply = stack.api.post(ALICE, &format!("/v1/jobs/{id}/trigger"), &json!({})).await;
    let run_id = RunId::parse(reply.body["id"].as_str().unwrap()).unwrap();

    let mut states = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    let run = loop {
        sundial_app::worker::poll::poll_once(
            &stack.services.use_cases.worker,
            stack.services.ports.queue.as_ref(),
            stack.services.inbox.as_ref(),
            "w",
            1,
        )
        .await
        .unwrap();
        let run = stack.services.ports.runs.get(&run_id.job_id, &run_id.key).await.unwrap().unwrap();
        states.push(run.state);
        if run.state.is_terminal() || std::time::Instant::now() > deadline {
            break run;
        }
    };
    assert_eq!(run.state, RunState::TimedOut);
    assert!(states.contains(&RunState::Retrying), "{states:?}");
    assert_eq!(run.attempts.len(), 2);
    for attempt in &run.attempts {
        assert_eq!(attempt.outcome, Some(Outcome::TimedOut));
        let took = attempt.finished_at.unwrap() - attempt.started_at;
        assert!((Duration::seconds(2)..=Duration::seconds(4)).contains(&took), "attempt took {took}");
    }
    assert_eq!(target.hits().len(), 2);
}
