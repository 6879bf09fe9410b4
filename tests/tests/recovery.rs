//! Recovery paths: every run ends or is retried, whatever fails and whenever. One test per
//! defect a review found in the tick, the worker, the watchdog and the API, each driving the
//! interleaving that broke a promise of the design (see `docs/decisions.md`, recovery).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use http::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use sundial_app::ports::Ports;
use sundial_app::watchdog::Watchdog;
use sundial_app::worker::poll::poll_once;
use sundial_aws::metrics::{Clients, Ledger};
use sundial_domain::clock::{Clock, ManualClock};
use sundial_domain::events::{JobNotice, Notification, SchedulerAlert};
use sundial_domain::job::{EventKind, Job, JobId};
use sundial_domain::ports::bus::{EventBus, PublishError};
use sundial_domain::ports::queue::{QueueError, RunQueue};
use sundial_domain::ports::store::{RunStore, StoreError};
use sundial_domain::run::transition::{Ending, Step};
use sundial_domain::run::{Outcome, Run, RunEvent, RunId, RunKey, RunState};
use sundial_domain::run_queue::Dispatch;
use sundial_domain::watchdog::rules::WatchdogSettings;
use sundial_testkit::faults::{Action, Faulty, Rule, Script, unavailable};
use sundial_tests::{ALICE, Answer, Call, Stack, TargetServer};
use sundial_wiring::config::aws_sdk_config;
use sundial_wiring::services::Services;

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn http_job(name: &str, url: &str, schedule: Value) -> Value {
    json!({"name": name, "schedule": schedule, "target": {"type": "http", "url": url}})
}

fn job_id(id: &str) -> JobId {
    JobId::parse(id).unwrap()
}

/// A job of Alice's calling `url`, scheduled once a year (it runs when triggered); returns its id.
async fn yearly_job(stack: &Stack, name: &str, url: &str) -> String {
    stack.api.create_job(ALICE, &http_job(name, url, json!({"cron": "0 0 1 1 *"}))).await
}

/// The body of the message that asks for `attempt` of `run`.
fn message(run: &Run, attempt: u32) -> String {
    json!({"job_id": run.job_id.to_string(), "run_key": run.key.encode(), "attempt": attempt}).to_string()
}

/// The same stack's services with the runs queue pointing at a queue that does not exist:
/// every send fails, as in an SQS outage.
async fn services_without_queue(stack: &Stack, clock: Arc<ManualClock>) -> Services {
    let mut config = stack.config.clone();
    config.resources.runs_queue_url = format!("{}-gone", stack.resources.runs_queue_url);
    Services::new(config, &Clients::new(&aws_sdk_config().await, Ledger::new()), clock)
}

/// Hands every QUEUED run of `job` due by now to the worker, as the queue would.
async fn deliver_due(stack: &Stack, clock: &ManualClock, job: &str) {
    for run in stack.runs_of(job).await {
        if run.state == RunState::Queued && run.due_at <= clock.now() {
            stack.services.use_cases.worker.handle(&message(&run, 1), "w").await;
        }
    }
}

/// A runs queue that records what it is asked to send.
#[derive(Debug, Default)]
struct RecordingQueue(std::sync::Mutex<Vec<Dispatch>>);

#[async_trait]
impl RunQueue for RecordingQueue {
    async fn send(&self, batch: &[Dispatch]) -> Vec<Result<(), QueueError>> {
        self.0.lock().unwrap().extend(batch.iter().cloned());
        batch.iter().map(|_| Ok(())).collect()
    }
}

/// A 202 job whose target sends heartbeats: the attempt stays open for more receives than the
/// queue's `maxReceiveCount` would allow a parked message, nothing is dead-lettered, and the
/// completion then records SUCCEEDED (waiting never spends receives).
#[tokio::test]
async fn a_202_attempt_with_heartbeats_outlives_max_receive_count_then_succeeds() {
    let stack = Stack::with(sundial_tests::Options {
        vars: [("SUNDIAL_HEARTBEAT_WINDOW_S", "2".to_string())].into(),
        ..Default::default()
    })
    .await;
    let target = TargetServer::start(|_| Answer::Status(202)).await;
    let mut doc = http_job("long", &target.url, json!({"cron": "0 0 1 1 *"}));
    doc["timeout_s"] = json!(3600);
    doc["retry"] = json!({"max_attempts": 1});
    let id = stack.api.create_job(ALICE, &doc).await;
    let run_id = stack.trigger(&id).await;
    let s = &stack.services;
    poll_once(&s.use_cases.worker, s.ports.queue.as_ref(), s.inbox.as_ref(), "w", 2).await.unwrap();
    let token = target.hits()[0].headers[sundial_domain::target::headers::CALLBACK_TOKEN]
        .to_str()
        .unwrap()
        .to_string();
    let callback = |path: &str| {
        Call::new(Method::POST, format!("/v1/runs/{run_id}/{path}"))
            .header("x-sundial-callback-token", token.clone())
    };
    let redrive = stack
        .sqs
        .get_queue_attributes()
        .queue_url(&stack.resources.runs_queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy)
        .send()
        .await
        .unwrap();
    let policy: Value = serde_json::from_str(
        &redrive.attributes.unwrap()[&aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy],
    )
    .unwrap();
    let max_receives = policy["maxReceiveCount"].as_u64().unwrap();

    for _ in 0..max_receives + 3 {
        let beat = stack.api.call(callback("heartbeat")).await;
        assert_eq!(beat.status, StatusCode::OK, "{}", beat.body);
        // The worker polls as the event source would, and the DLQ handler takes what the
        // queue gives up on, as the Lambda function's second event source would.
        poll_once(&s.use_cases.worker, s.ports.queue.as_ref(), s.inbox.as_ref(), "w", 2).await.unwrap();
        let dead = stack
            .sqs
            .receive_message()
            .queue_url(&stack.resources.dlq_url)
            .max_number_of_messages(10)
            .send()
            .await
            .unwrap();
        for m in dead.messages.unwrap_or_default() {
            s.use_cases.worker.dead_lettered(m.body().unwrap(), "received too many times").await.unwrap();
        }
        assert_eq!(stack.run(&run_id).await.state, RunState::Running);
    }
    let done = stack.api.call(callback("complete").json(&json!({"succeeded": true}))).await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert_eq!(done.body["state"], "SUCCEEDED");
    assert_eq!(target.hits().len(), 1);
}

/// A dead-lettered message may end only the attempt it asked for, and only if that attempt
/// never started: not a live attempt, not a run that moved past it.
#[tokio::test]
async fn a_dead_letter_fails_only_a_run_waiting_for_its_attempt() {
    let stack = Stack::new().await;
    let target = TargetServer::start(|_| Answer::Status(202)).await;
    let mut doc = http_job("accepted", &target.url, json!({"cron": "0 0 1 1 *"}));
    doc["retry"] = json!({"max_attempts": 3, "backoff_s": 60});
    let id = stack.api.create_job(ALICE, &doc).await;
    let run_id = stack.trigger(&id).await;
    let queued = stack.run(&run_id).await;
    stack.services.use_cases.worker.handle(&message(&queued, 1), "w").await;
    let running = stack.run(&run_id).await;
    assert_eq!((running.state, running.attempt), (RunState::Running, 1));

    let w = &stack.services.use_cases.worker;
    w.dead_lettered(&message(&running, 1), "received 16 times").await.unwrap();
    assert_eq!(stack.run(&run_id).await.state, RunState::Running, "a live attempt is not failed");

    // The attempt fails through its callback: the run waits for attempt 2.
    let token = target.hits()[0].headers[sundial_domain::target::headers::CALLBACK_TOKEN]
        .to_str()
        .unwrap()
        .to_string();
    let failed = stack
        .api
        .call(
            Call::new(Method::POST, format!("/v1/runs/{run_id}/complete"))
                .header("x-sundial-callback-token", token)
                .json(&json!({"succeeded": false})),
        )
        .await;
    assert_eq!(failed.body["state"], "RETRYING", "{}", failed.body);
    w.dead_lettered(&message(&running, 1), "received 16 times").await.unwrap();
    assert_eq!(stack.run(&run_id).await.state, RunState::Retrying, "a stale message fails nothing");

    w.dead_lettered(&message(&running, 2), "received 16 times").await.unwrap();
    let dead = stack.run(&run_id).await;
    assert_eq!(dead.state, RunState::Failed, "the message the run waited for gave up");
    assert!(dead.reason.unwrap().contains("received 16 times"));
}

/// A job whose messages could not be sent stays due, and the ticks that follow, every minute,
/// send its run and keep it firing: the watermark never passes a job that was not advanced.
#[tokio::test]
async fn a_job_whose_send_failed_is_claimed_again_not_stranded() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:58:30Z")));
    let stack =
        Stack::at(&clock, &[("SUNDIAL_CLAIM_AHEAD_S", "60"), ("SUNDIAL_DISPATCH_GRACE_S", "300")]).await;
    let id = stack
        .api
        .create_job(ALICE, &http_job("minutely", "http://127.0.0.1:9/", json!({"cron": "* * * * *"})))
        .await;
    for minute in ["2030-01-01T11:59:00Z", "2030-01-01T12:00:00Z"] {
        clock.set(t(minute));
        stack.services.use_cases.tick.run().await.unwrap();
    }
    clock.set(t("2030-01-01T12:01:00Z"));
    let outage = services_without_queue(&stack, clock.clone()).await;
    let failed = outage.use_cases.tick.run().await.unwrap();
    assert!(failed.claims.send_failures > 0, "{failed:?}");

    for minute in 2..=10 {
        clock.set(t("2030-01-01T12:00:00Z") + Duration::minutes(minute));
        stack.services.use_cases.tick.run().await.unwrap();
    }
    let instants: Vec<DateTime<Utc>> = stack.runs_of(&id).await.iter().map(Run::scheduled_at).collect();
    for minute in 0..=11 {
        let instant = t("2030-01-01T12:00:00Z") + Duration::minutes(minute);
        assert!(instants.contains(&instant), "no run for {instant}: {instants:?}");
    }
    let job = stack.services.ports.jobs.get(&job_id(&id)).await.unwrap().unwrap();
    assert!(job.next_run_at.unwrap() > t("2030-01-01T12:11:00Z"), "{:?}", job.next_run_at);
}

/// A tick that dies inside a downtime gap must not turn the gap's instants into a
/// "continuation": the next tick still treats them as missed, and `catchup: skip` drops them.
#[tokio::test]
async fn a_tick_that_dies_inside_a_gap_leaves_the_gap_missed() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:58:30Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let mut doc = http_job("skipper", "http://127.0.0.1:9/", json!({"cron": "* * * * *"}));
    doc["catchup"] = json!("skip");
    let id = stack.api.create_job(ALICE, &doc).await;
    for minute in ["2030-01-01T11:59:00Z", "2030-01-01T12:00:00Z"] {
        clock.set(t(minute));
        stack.services.use_cases.tick.run().await.unwrap();
    }
    // Down until 12:10; the first tick back dies on its first query.
    clock.set(t("2030-01-01T12:10:00Z"));
    let s = &stack.services;
    let script = Script::new();
    script.add(Rule::every("DueIndex::due_ids").refuse(unavailable("the tick dies here")));
    let ports = Ports { jobs: Faulty::new(s.ports.jobs.clone(), &script), ..s.ports.clone() };
    let dying = stack.rewired(&ports, |_| {}).tick;
    let _ = dying.run().await;
    clock.set(t("2030-01-01T12:11:00Z"));
    stack.services.use_cases.tick.run().await.unwrap();

    let ran: Vec<DateTime<Utc>> = stack.runs_of(&id).await.iter().map(Run::scheduled_at).collect();
    for minute in 2..=10 {
        let missed = t("2030-01-01T12:00:00Z") + Duration::minutes(minute);
        assert!(!ran.contains(&missed), "missed {missed} ran under catchup skip: {ran:?}");
    }
    assert!(ran.contains(&t("2030-01-01T12:11:00Z")));
}

/// A job every minute whose run takes 40 s, with the tick firing at second 30 of each minute
/// (EventBridge fires at any second) while the run is active: under `replace` no run is
/// cancelled before the next instant and under `forbid` none is skipped; all succeed.
#[tokio::test]
async fn a_40_second_run_is_neither_replaced_nor_skips_the_next_minute() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:10Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    // The target takes "40 s": it moves the clock to second 30, lets the tick run, and answers
    // at second 40.
    let services = stack.services.clone();
    let target_clock = clock.clone();
    let app = axum::Router::new().fallback(move || {
        let (services, clock) = (services.clone(), target_clock.clone());
        async move {
            let minute = sundial_domain::due_index::minute_of(clock.now());
            clock.set(clock.now().max(minute + Duration::seconds(30)));
            services.use_cases.tick.run().await.unwrap();
            clock.advance(Duration::seconds(10));
            StatusCode::OK
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/work", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mut ids = Vec::new();
    for policy in ["replace", "forbid"] {
        let mut doc = http_job(policy, &url, json!({"cron": "* * * * *"}));
        doc["concurrency"] = json!(policy);
        ids.push(stack.api.create_job(ALICE, &doc).await);
    }
    for minute in 1..=3 {
        clock.set(t("2030-01-01T12:00:00Z") + Duration::minutes(minute));
        for id in &ids {
            deliver_due(&stack, &clock, id).await;
        }
    }
    for (id, policy) in ids.iter().zip(["replace", "forbid"]) {
        let runs: Vec<Run> = stack
            .runs_of(id)
            .await
            .into_iter()
            .filter(|r| r.scheduled_at() <= t("2030-01-01T12:03:00Z"))
            .collect();
        assert_eq!(runs.len(), 3, "{policy}: {runs:?}");
        for run in &runs {
            assert_eq!(run.state, RunState::Succeeded, "{policy}: {} {:?}", run.id(), run.reason);
        }
    }
}

/// A run claimed and never sent stays QUEUED no longer when its job is then edited past it: the
/// watchdog sends every attempt that has not started in time, whatever the job's next instant.
#[tokio::test]
async fn a_claimed_unsent_run_is_sent_after_its_job_moved_on() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:59:30Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let id = stack
        .api
        .create_job(ALICE, &http_job("edited", "http://127.0.0.1:9/", json!({"cron": "0 * * * *"})))
        .await;
    // 12:00 was due soon: the API claimed it; pretend that send failed by claiming 13:00 with
    // sends failing (the job stays at 13:00, the run is QUEUED and unsent).
    clock.set(t("2030-01-01T12:59:30Z"));
    let outage = services_without_queue(&stack, clock.clone()).await;
    outage.use_cases.tick.run().await.unwrap();
    let unsent =
        stack.runs_of(&id).await.into_iter().find(|r| r.scheduled_at() == t("2030-01-01T13:00:00Z")).unwrap();
    assert_eq!(unsent.state, RunState::Queued);
    // The schedule is edited: the job's next instant moves past the unsent run.
    let edited =
        stack.api.patch(ALICE, &format!("/v1/jobs/{id}"), &json!({"schedule": {"cron": "30 * * * *"}})).await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.body);

    clock.set(t("2030-01-01T13:02:00Z"));
    let report = stack.services.use_cases.watchdog.run().await.unwrap();
    assert!(report.dispatched >= 1, "{report:?}");
    let sent = stack.drain_queue().await;
    assert!(sent.iter().any(|m| m["run_key"] == unsent.key.encode().as_str()), "{sent:?}");
}

/// An edit computed from a read taken before the tick advanced the job cannot put the old
/// `next_run_at` back (two writers of one field, one condition): the write is refused, and an
/// edit through the API applies to the advanced job.
#[tokio::test]
async fn an_edit_from_a_stale_read_never_undoes_the_ticks_advance() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:58:00Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let id = stack
        .api
        .create_job(ALICE, &http_job("racy", "http://127.0.0.1:9/", json!({"cron": "0 12 * * *"})))
        .await;
    let store = &stack.services.ports.jobs;
    let stale = store.get(&job_id(&id)).await.unwrap().unwrap();
    assert_eq!(stale.next_run_at, Some(t("2030-01-01T12:00:00Z")));

    clock.set(t("2030-01-01T11:59:30Z"));
    stack.services.use_cases.tick.run().await.unwrap();
    let advanced = store.get(&job_id(&id)).await.unwrap().unwrap();
    assert_eq!(advanced.next_run_at, Some(t("2030-01-02T12:00:00Z")));

    let mut edited = stale.clone();
    edited.document.payload = json!({"edited": true});
    edited.version += 1;
    let written = store.update(&stale, &edited, None).await;
    assert_eq!(written, Err(StoreError::Conflict));
    assert_eq!(store.get(&job_id(&id)).await.unwrap().unwrap().next_run_at, advanced.next_run_at);

    let patched = stack
        .api
        .call(
            Call::new(Method::PATCH, format!("/v1/jobs/{id}"))
                .key(ALICE)
                .header("if-match", format!("\"{}\"", advanced.version))
                .json(&json!({"payload": {"edited": true}})),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    assert_eq!(patched.body["next_run_at"], "2030-01-02T12:00:00Z");
}

/// A runs store that follows `script`.
fn faulty_runs(stack: &Stack, script: &Arc<Script>) -> Arc<dyn RunStore> {
    Faulty::new(stack.services.ports.runs.clone(), script)
}

/// The answer of a write DynamoDB applied whose answer was lost (a timeout after the fact).
fn lost() -> StoreError {
    unavailable("storage did not answer")
}

/// A heartbeat landing on the run `id`, if it is running: its lease renewed to 5 minutes after
/// `clock`'s now (a run already renewed since is left as it is).
fn heartbeat_on(stack: &Stack, id: RunId, clock: &Arc<ManualClock>) -> Action {
    let (runs, clock) = (stack.services.ports.runs.clone(), clock.clone());
    Arc::new(move || {
        let (runs, clock, id) = (runs.clone(), clock.clone(), id.clone());
        Box::pin(async move {
            let run = runs.get(&id.job_id, &id.key).await.unwrap().unwrap();
            if run.state == RunState::Running {
                let now = clock.now();
                let renewed =
                    Run { lease_until: Some(now + Duration::minutes(5)), updated_at: now, ..run.clone() };
                match runs.transition_unchanged(&run, &renewed).await {
                    Ok(()) | Err(StoreError::Conflict) => {}
                    Err(e) => panic!("the heartbeat failed: {e}"),
                }
            }
        })
    })
}

/// The run `id` cancelled by its owner, in the store behind any fault.
fn cancel(stack: &Stack, id: RunId) -> Action {
    let runs = stack.services.ports.runs.clone();
    Arc::new(move || {
        let (runs, id) = (runs.clone(), id.clone());
        Box::pin(async move {
            let run = runs.get(&id.job_id, &id.key).await.unwrap().unwrap();
            let cancelled =
                sundial_domain::run::transition::cancelled(&run, "cancelled by its owner", run.updated_at);
            runs.transition(&run, &cancelled, None).await.unwrap();
        })
    })
}

/// A trigger whose request failed with a 5xx after its run was written, retried with the same
/// Idempotency-Key, lands on that run: one run, one id.
#[tokio::test]
async fn a_trigger_retried_after_a_5xx_lands_on_the_same_run() {
    let stack = Stack::new().await;
    let id = yearly_job(&stack, "once", "http://127.0.0.1:9/").await;
    let mut services = stack.services.clone();
    let script = Script::new();
    script.add(Rule::once("RunWrites::insert").answer(lost()));
    let runs = faulty_runs(&stack, &script);
    services.use_cases = stack.rewired(&Ports { runs, ..services.ports.clone() }, |_| {});
    let api = sundial_tests::Api::over(&services);
    let call = || {
        Call::new(Method::POST, format!("/v1/jobs/{id}/trigger"))
            .key(ALICE)
            .header("idempotency-key", "nightly-rerun")
            .json(&json!({}))
    };
    let first = api.call(call()).await;
    assert!(first.status.is_server_error(), "{} {}", first.status, first.body);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let retried = api.call(call()).await;
    assert_eq!(retried.status, StatusCode::ACCEPTED, "{}", retried.body);
    let runs = stack.runs_of(&id).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(retried.body["id"], runs[0].id().to_string().as_str());
}

/// Instants that fell while the job was paused are skipped even when a worker reaches them
/// after the resume; instants before the pause and after the resume run.
#[tokio::test]
async fn an_instant_inside_a_pause_is_skipped_even_after_the_resume() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let id = stack.api.create_job(ALICE, &http_job("tens", &target.url, json!({"rate": "10 seconds"}))).await;
    clock.set(t("2030-01-01T12:00:15Z"));
    assert_eq!(
        stack.api.post(ALICE, &format!("/v1/jobs/{id}/pause"), &json!({})).await.status,
        StatusCode::OK
    );
    clock.set(t("2030-01-01T12:00:35Z"));
    assert_eq!(
        stack.api.post(ALICE, &format!("/v1/jobs/{id}/resume"), &json!({})).await.status,
        StatusCode::OK
    );

    clock.set(t("2030-01-01T12:00:45Z"));
    deliver_due(&stack, &clock, &id).await;
    let state_at = |runs: &[Run], s: &str| runs.iter().find(|r| r.scheduled_at() == t(s)).map(|r| r.state);
    let runs = stack.runs_of(&id).await;
    assert_eq!(state_at(&runs, "2030-01-01T12:00:10Z"), Some(RunState::Succeeded));
    assert_eq!(state_at(&runs, "2030-01-01T12:00:20Z"), Some(RunState::Skipped));
    assert_eq!(state_at(&runs, "2030-01-01T12:00:30Z"), Some(RunState::Skipped));
    assert_eq!(state_at(&runs, "2030-01-01T12:00:40Z"), Some(RunState::Succeeded));
}

/// Cancelling a run closes its open attempt: an end time and the outcome `cancelled`.
#[tokio::test]
async fn cancelling_a_run_closes_its_open_attempt() {
    let stack = Stack::new().await;
    let target = TargetServer::start(|_| Answer::Hang).await;
    let id = yearly_job(&stack, "hangs", &target.url).await;
    let run_id = stack.trigger(&id).await;
    let queued = stack.run(&run_id).await;
    let worker = stack.services.use_cases.worker.clone();
    let body = message(&queued, 1);
    let attempt = tokio::spawn(async move { worker.handle(&body, "w").await });
    while target.hits().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let cancelled = stack.api.post(ALICE, &format!("/v1/runs/{run_id}/cancel"), &json!({})).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    attempt.abort();
    let shown = stack.api.get(ALICE, &format!("/v1/runs/{run_id}")).await;
    assert_eq!(shown.body["state"], "CANCELLED");
    assert_eq!(shown.body["attempts"][0]["outcome"], "cancelled", "{}", shown.body);
    assert!(shown.body["attempts"][0]["finished_at"].is_string(), "{}", shown.body);
}

/// A heartbeat during a call the worker is still waiting on never shortens that attempt's
/// lease (which would let the watchdog declare it lost and start a second attempt).
#[tokio::test]
async fn a_heartbeat_never_shortens_an_attempts_lease() {
    let stack = Stack::new().await;
    let api = stack.serve().await;
    let runs = stack.services.ports.runs.clone();
    let leases: Arc<std::sync::Mutex<Vec<DateTime<Utc>>>> = Arc::default();
    let seen = leases.clone();
    let app = axum::Router::new().fallback(move |headers: http::HeaderMap| {
        let (api, runs, seen) = (api.clone(), runs.clone(), seen.clone());
        async move {
            let header = |name: &str| headers[name].to_str().unwrap().to_string();
            let id = RunId::parse(&header("x-sundial-run-id")).unwrap();
            let lease =
                || async { runs.get(&id.job_id, &id.key).await.unwrap().unwrap().lease_until.unwrap() };
            let before = lease().await;
            seen.lock().unwrap().push(before);
            let beat = reqwest::Client::new()
                .post(format!("{api}/v1/runs/{id}/heartbeat"))
                .header("x-sundial-callback-token", header("x-sundial-callback-token"))
                .send()
                .await
                .unwrap();
            assert_eq!(beat.status(), 200);
            let after = lease().await;
            seen.lock().unwrap().push(after);
            StatusCode::OK
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/work", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let id = yearly_job(&stack, "beats", &url).await;
    let run_id = stack.trigger(&id).await;
    let queued = stack.run(&run_id).await;
    stack.services.use_cases.worker.handle(&message(&queued, 1), "w").await;
    let leases = leases.lock().unwrap().clone();
    assert_eq!(leases.len(), 2);
    assert!(leases[1] >= leases[0], "the heartbeat cut the lease from {} to {}", leases[0], leases[1]);
    assert_eq!(stack.run(&run_id).await.state, RunState::Succeeded);
}

/// Deadlines count from when a run was due: a backfill of old instants raises no `sla_missed`
/// or `late_start`, and neither does a jitter longer than the start deadline.
#[tokio::test]
async fn backfills_and_jitter_raise_no_false_deadline_alerts() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:30:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let mut doc = http_job("hourly", "http://127.0.0.1:9/", json!({"cron": "0 * * * *"}));
    doc["sla_s"] = json!(60);
    doc["start_deadline_s"] = json!(30);
    let id = stack.api.create_job(ALICE, &doc).await;
    let range = json!({"from": "2030-01-01T07:00:00Z", "to": "2030-01-01T11:00:00Z"});
    let backfilled = stack.api.post(ALICE, &format!("/v1/jobs/{id}/backfill"), &range).await;
    assert_eq!(backfilled.body["runs"].as_array().unwrap().len(), 5);

    clock.set(t("2030-01-01T12:30:20Z"));
    let report = stack.services.use_cases.watchdog.run().await.unwrap();
    assert_eq!((report.sla_missed, report.late_start), (0, 0), "{report:?}");

    // A run whose jitter put it 300 s after its instant: not late 290 s after the instant.
    let job = stack.services.ports.jobs.get(&job_id(&id)).await.unwrap().unwrap();
    let instant = t("2030-01-01T13:00:00Z");
    let jittered = stack.services.use_cases.claimer.new_run(
        &job,
        RunKey::scheduled(instant),
        instant + Duration::seconds(300),
        instant,
    );
    stack.services.ports.runs.insert(&jittered, None).await.unwrap();
    clock.set(instant + Duration::seconds(290));
    stack.services.use_cases.watchdog.run().await.unwrap();
    let events =
        stack.services.ports.runs.get(&jittered.job_id, &jittered.key).await.unwrap().unwrap().events;
    assert!(events.is_empty(), "{events:?}");
}

/// A message's delay counts from when it is sent, not from when the tick started: a pass that
/// took 45 s still makes its runs visible at their instants.
#[tokio::test]
async fn message_delays_count_from_the_send() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:58:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let id = stack
        .api
        .create_job(ALICE, &http_job("later", "http://127.0.0.1:9/", json!({"at": "2030-01-01T12:01:30Z"})))
        .await;
    let job = stack.services.ports.jobs.get(&job_id(&id)).await.unwrap().unwrap();
    let queue = Arc::new(RecordingQueue::default());
    let s = &stack.services;
    let ports = Ports { queue: queue.clone(), clock: clock.clone(), ..s.ports.clone() };
    let claimer = stack.rewired(&ports, |_| {}).claimer;
    // The pass started at 12:00:45 - 45 s; its sends happen at 12:00:45.
    clock.set(t("2030-01-01T12:00:45Z"));
    claimer.claim(vec![job], None, t("2030-01-01T12:00:00Z")).await;
    let sent = queue.0.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].delay_s, 45);
}

/// A target that answers 200 and then streams a body that never ends: the worker reads what
/// it keeps of an output and stops, so the attempt succeeds instead of timing out.
#[tokio::test]
async fn an_endless_response_body_is_read_up_to_a_bound() {
    let stack = Stack::new().await;
    let app = axum::Router::new().fallback(|| async {
        let chunks = futures::stream::repeat_with(|| {
            Ok::<_, std::convert::Infallible>(axum::body::Bytes::from_static(&[b'x'; 1024]))
        });
        axum::body::Body::from_stream(chunks)
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/endless", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut doc = http_job("endless", &url, json!({"cron": "0 0 1 1 *"}));
    doc["timeout_s"] = json!(5);
    let id = stack.api.create_job(ALICE, &doc).await;
    let run_id = stack.trigger(&id).await;
    let queued = stack.run(&run_id).await;
    stack.services.use_cases.worker.handle(&message(&queued, 1), "w").await;
    let done = stack.run(&run_id).await;
    assert_eq!(done.state, RunState::Succeeded, "{:?}", done.attempts);
    // The first bytes are kept (not an empty output after the call timed out on the body).
    let output = done.attempts[0].output.clone().unwrap();
    assert!(output.len() >= 1024 && output.starts_with("xxxx"), "{output:?}");
    assert!(output.len() <= sundial_domain::target::MAX_OUTPUT_BYTES + 4, "{}", output.len());
}

/// A job every 10 s, claimed five minutes ahead, failing twice in a row with
/// `alert_after_failures: 2`: `failing` is told once, on the second failure (the runs claimed
/// ahead no longer hide the streak).
#[tokio::test]
async fn a_failing_streak_is_seen_through_runs_claimed_ahead() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let target = TargetServer::start(|_| Answer::Status(500)).await;
    let mut doc = http_job("flaky", &target.url, json!({"rate": "10 seconds"}));
    doc["alert_after_failures"] = json!(2);
    doc["retry"] = json!({"max_attempts": 1});
    let id = stack.api.create_job(ALICE, &doc).await;
    assert!(stack.runs_of(&id).await.len() > 20, "claimed ahead");
    for second in ["2030-01-01T12:00:00Z", "2030-01-01T12:00:10Z", "2030-01-01T12:00:20Z"] {
        clock.set(t(second));
        deliver_due(&stack, &clock, &id).await;
    }
    let failing: Vec<DateTime<Utc>> = stack
        .runs_of(&id)
        .await
        .iter()
        .filter(|r| r.events.iter().any(|e| e.kind == sundial_domain::job::EventKind::Failing))
        .map(Run::scheduled_at)
        .collect();
    assert_eq!(failing, [t("2030-01-01T12:00:10Z")]);
}

/// Rewrites the stored document of job `id` with `change`, behind the API's back.
async fn edit_stored_document(stack: &Stack, id: &str, change: impl FnOnce(&mut Value)) {
    use aws_sdk_dynamodb::types::AttributeValue::S;
    let item = stack
        .dynamo
        .get_item()
        .table_name(&stack.resources.jobs_table)
        .key("job_id", S(id.to_string()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    let mut document: Value = serde_json::from_str(item["document"].as_s().unwrap()).unwrap();
    change(&mut document);
    stack
        .dynamo
        .update_item()
        .table_name(&stack.resources.jobs_table)
        .key("job_id", S(id.to_string()))
        .update_expression("SET document = :d")
        .expression_attribute_values(":d", S(document.to_string()))
        .send()
        .await
        .unwrap();
}

/// One job whose stored document does not decode (a manual edit) is left out and reported, by
/// the tick and by every batch read (the watchdog's, a workflow's cascade): every other job read
/// with it is still claimed and read. A field written by a newer version is not such a defect: it
/// is ignored, and its job runs.
#[tokio::test]
async fn a_job_that_does_not_decode_never_stalls_the_others() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:59:00Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_DUE_SHARDS", "1")]).await;
    let mut ids = Vec::new();
    for name in ["good", "bad", "newer"] {
        let job = http_job(name, "http://127.0.0.1:9/", json!({"cron": "5 12 * * *"}));
        ids.push(stack.api.create_job(ALICE, &job).await);
    }
    let (good, bad, newer) = (&ids[0], &ids[1], &ids[2]);
    edit_stored_document(&stack, bad, |document| document["target"] = json!(7)).await;
    edit_stored_document(&stack, newer, |document| {
        document["field_from_the_future"] = json!(true);
        document["retry"]["strategy"] = json!("linear");
    })
    .await;

    let parsed: Vec<sundial_domain::job::JobId> =
        ids.iter().map(|id| sundial_domain::job::JobId::parse(id).unwrap()).collect();
    let read = stack.services.ports.jobs.get_many(&parsed).await.expect("a bad item fails no batch read");
    let mut read: Vec<String> = read.iter().map(|job| job.document.name.clone()).collect();
    read.sort();
    assert_eq!(read, ["good", "newer"]);

    clock.set(t("2030-01-01T12:04:30Z"));
    stack.services.use_cases.tick.run().await.unwrap();
    assert_eq!(stack.runs_of(good).await.len(), 1, "the good job is claimed");
    assert_eq!(stack.runs_of(newer).await.len(), 1, "a newer version's field is ignored");
    assert!(stack.runs_of(bad).await.is_empty());
    assert!(sundial_testkit::logs::captured().contains("does not decode"));
}

/// Backfilling the time a job was paused runs those instants: only runs claimed before the pause
/// ended are skipped for it.
#[tokio::test]
async fn a_backfill_of_a_paused_period_runs() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T10:30:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let id =
        stack.api.create_job(ALICE, &http_job("hourly", &target.url, json!({"cron": "0 * * * *"}))).await;
    clock.set(t("2030-01-01T10:45:00Z"));
    stack.api.post(ALICE, &format!("/v1/jobs/{id}/pause"), &json!({})).await;
    clock.set(t("2030-01-01T12:45:00Z"));
    stack.api.post(ALICE, &format!("/v1/jobs/{id}/resume"), &json!({})).await;
    let range = json!({"from": "2030-01-01T11:00:00Z", "to": "2030-01-01T12:00:00Z"});
    let backfilled = stack.api.post(ALICE, &format!("/v1/jobs/{id}/backfill"), &range).await;
    assert_eq!(backfilled.body["runs"].as_array().unwrap().len(), 2, "{}", backfilled.body);
    clock.set(t("2030-01-01T12:45:01Z"));
    deliver_due(&stack, &clock, &id).await;
    let states: Vec<RunState> = stack.runs_of(&id).await.iter().map(|r| r.state).collect();
    assert_eq!(states, [RunState::Succeeded, RunState::Succeeded], "{states:?}");
}

/// Under `replace` the newest run wins: an older run whose message arrives late (re-sent by the
/// watchdog) is skipped as superseded and never cancels the newer run that is running.
#[tokio::test]
async fn an_older_run_starting_late_never_replaces_a_newer_one() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:30Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_CLAIM_AHEAD_S", "120")]).await;
    let target = TargetServer::start(|_| Answer::Status(202)).await;
    let mut doc = http_job("replacer", &target.url, json!({"cron": "* * * * *"}));
    doc["concurrency"] = json!("replace");
    let id = stack.api.create_job(ALICE, &doc).await;
    let runs = stack.runs_of(&id).await;
    assert!(runs.len() >= 2, "{runs:?}");
    let (older, newer) = (runs[0].clone(), runs[1].clone());
    clock.set(newer.due_at);
    stack.services.use_cases.worker.handle(&message(&newer, 1), "w").await;
    assert_eq!(stack.run(&newer.id()).await.state, RunState::Running);

    stack.services.use_cases.worker.handle(&message(&older, 1), "w").await;
    let older = stack.run(&older.id()).await;
    assert_eq!(older.state, RunState::Skipped);
    assert!(older.reason.unwrap().contains("superseded"));
    assert_eq!(stack.run(&newer.id()).await.state, RunState::Running);
}

/// An event bus that logs what it publishes (`shared:failed`, `job:failed`,
/// `alert:scheduler_stalled`), fails the next publish to the destinations it is told to, and can
/// run a second watchdog pass while it publishes its first message: an overlapping pass.
#[derive(Debug, Default)]
struct TestBus {
    log: Arc<std::sync::Mutex<Vec<String>>>,
    failing: std::sync::Mutex<Vec<&'static str>>,
    overlapping: tokio::sync::Mutex<Option<Watchdog>>,
}

impl TestBus {
    fn logging_to(log: &Arc<std::sync::Mutex<Vec<String>>>) -> TestBus {
        TestBus { log: log.clone(), ..TestBus::default() }
    }

    async fn deliver(&self, destination: &'static str, event: &str) -> Result<(), PublishError> {
        {
            let mut failing = self.failing.lock().unwrap();
            if let Some(i) = failing.iter().position(|d| *d == destination) {
                failing.remove(i);
                return Err(PublishError::Unavailable(format!("injected: {destination} unreachable")));
            }
        }
        self.log.lock().unwrap().push(format!("{destination}:{event}"));
        let overlapping = self.overlapping.lock().await.take();
        if let Some(pass) = overlapping {
            pass.run().await.unwrap();
        }
        Ok(())
    }
}

#[async_trait]
impl EventBus for TestBus {
    async fn publish(&self, n: &Notification) -> Result<(), PublishError> {
        self.deliver("shared", n.event).await
    }
    async fn publish_to_job(&self, n: &Notification) -> Result<(), PublishError> {
        self.deliver("job", n.event).await
    }
    async fn publish_notice(&self, notice: &JobNotice, _to_job: bool) -> Result<(), PublishError> {
        self.deliver("notice", notice.event).await
    }
    async fn alert(&self, alert: &SchedulerAlert) -> Result<(), PublishError> {
        self.deliver("alert", alert.event).await
    }
}

/// The stack's watchdog over `runs`, publishing through `bus`, with `settings`.
fn watchdog_of(
    stack: &Stack,
    runs: Arc<dyn RunStore>,
    bus: Arc<dyn EventBus>,
    settings: WatchdogSettings,
) -> Watchdog {
    let ports = Ports { runs, bus, ..stack.services.ports.clone() };
    stack.rewired(&ports, |s| s.watchdog = settings).watchdog
}

/// The stack's watchdog, publishing through `bus`.
/// Long enough after an event was recorded for the watchdog to take it over.
fn past_grace(stack: &Stack) -> Duration {
    stack.config.watchdog.publish_grace + Duration::seconds(1)
}

fn watchdog_with(stack: &Stack, bus: Arc<TestBus>) -> Watchdog {
    watchdog_of(stack, stack.services.ports.runs.clone(), bus, stack.config.watchdog.clone())
}

/// A watchdog pass publishing through its own bus, which runs `second` in the middle of its first
/// publish.
fn overlapped_by(stack: &Stack, log: &Arc<std::sync::Mutex<Vec<String>>>, second: Watchdog) -> Watchdog {
    let bus = TestBus { overlapping: tokio::sync::Mutex::new(Some(second)), ..TestBus::logging_to(log) };
    watchdog_with(stack, Arc::new(bus))
}

/// A triggered run of `job` ended FAILED by a writer that died before publishing: its `failed`
/// event is recorded and unsent.
async fn failed_unannounced(stack: &Stack, job: &str) -> Run {
    let queued = stack.run(&stack.trigger(job).await).await;
    let now = stack.services.ports.clock.now();
    let mut failed = Run { state: RunState::Failed, updated_at: now, ..queued.clone() };
    failed.events.push(RunEvent::new(EventKind::Failed, 0, now));
    stack.services.ports.runs.transition(&queued, &failed, None).await.unwrap();
    failed
}

/// Two watchdog passes that overlap (the second reads while the first publishes) publish an
/// event a crash left unsent once: the first takes it over with a conditional write.
#[tokio::test]
async fn overlapping_watchdog_passes_publish_a_left_over_event_once() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let id = yearly_job(&stack, "j", "http://127.0.0.1:9/").await;
    let run = failed_unannounced(&stack, &id).await;
    clock.advance(past_grace(&stack));
    let log = Arc::default();
    let second = watchdog_with(&stack, Arc::new(TestBus::logging_to(&log)));
    overlapped_by(&stack, &log, second).run().await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["shared:failed"]);
    assert!(stack.run(&run.id()).await.events.iter().all(|e| e.sent));
}

/// A publish that reached the shared topic but not the job's is completed to the job's topic
/// only: operators are not told twice.
#[tokio::test]
async fn a_publish_that_reached_only_the_shared_topic_is_completed_to_the_jobs_topic_only() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let mut doc = http_job("told", "http://127.0.0.1:9/", json!({"cron": "0 0 1 1 *"}));
    doc["notify"] = json!({"on": ["failed"], "email": ["ops@example.test"]});
    let id = stack.api.create_job(ALICE, &doc).await;
    let run = failed_unannounced(&stack, &id).await;
    let log = Arc::default();
    let bus = Arc::new(TestBus { failing: vec!["job"].into(), ..TestBus::logging_to(&log) });
    let watchdog = watchdog_with(&stack, bus);
    clock.advance(past_grace(&stack));
    watchdog.run().await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["shared:failed"]);
    assert!(!stack.run(&run.id()).await.events[0].sent, "the job's topic still owes it");
    clock.advance(past_grace(&stack));
    watchdog.run().await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["shared:failed", "job:failed"]);
    assert!(stack.run(&run.id()).await.events[0].sent);
}

/// A scheduler alert whose publish failed is published once by overlapping passes.
#[tokio::test]
async fn overlapping_watchdog_passes_publish_a_left_over_scheduler_alert_once() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:10:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    stack.services.ports.tick_state.set_watermark(t("2030-01-01T12:00:00Z")).await.unwrap();
    let log = Arc::default();
    let failing = TestBus { failing: vec!["alert"].into(), ..TestBus::logging_to(&log) };
    watchdog_with(&stack, Arc::new(failing)).run().await.unwrap();
    assert_eq!(
        stack.services.ports.tick_state.get().await.unwrap().unsent_alert.as_deref(),
        Some("scheduler_stalled")
    );
    clock.advance(past_grace(&stack));
    let second = watchdog_with(&stack, Arc::new(TestBus::logging_to(&log)));
    overlapped_by(&stack, &log, second).run().await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["alert:scheduler_stalled"]);
    assert_eq!(stack.services.ports.tick_state.get().await.unwrap().unsent_alert, None);
}

/// `failing` events recorded across the job's runs.
async fn failing_told(stack: &Stack, job: &str) -> usize {
    let runs = stack.runs_of(job).await;
    runs.iter().flat_map(|r| &r.events).filter(|e| e.kind == EventKind::Failing).count()
}

/// A job with `alert_after_failures` and `count` triggered runs, QUEUED.
async fn streak_job(stack: &Stack, threshold: u32, count: usize) -> (String, Job, Vec<Run>) {
    let mut doc = http_job(
        &format!("streaky-{threshold}-{count}"),
        "http://127.0.0.1:9/",
        json!({"cron": "0 0 1 1 *"}),
    );
    doc["alert_after_failures"] = json!(threshold);
    let id = stack.api.create_job(ALICE, &doc).await;
    let job = stack.services.ports.jobs.get(&job_id(&id)).await.unwrap().unwrap();
    for _ in 0..count {
        stack.trigger(&id).await;
    }
    let runs = stack.runs_of(&id).await;
    (id, job, runs)
}

/// The step that ends `run` FAILED: its running attempt fails for good, or a waiting run's
/// message is dead-lettered.
fn ends_failed(run: &Run) -> Step {
    match run.state {
        RunState::Running => Step::Finish {
            ending: Ending { permanent: true, ..Ending::new(Outcome::Failed).because("HTTP 500") },
            jitter: 0.5,
        },
        _ => Step::DeadLetter { reason: "poison".into() },
    }
}

/// Runs of one streak ending out of order (a newer run fails while an older one still runs,
/// which then fails too) tell `failing` once.
#[tokio::test]
async fn runs_ending_out_of_order_tell_failing_once_per_streak() {
    let stack = Stack::new().await;
    let (id, job, runs) = streak_job(&stack, 2, 3).await;
    let (recorder, now) = (&stack.services.use_cases.recorder, Utc::now());
    let running = Run {
        state: RunState::Running,
        attempt: 1,
        lease_until: Some(now + Duration::minutes(5)),
        ..runs[1].clone()
    };
    stack.services.ports.runs.transition(&runs[1], &running, None).await.unwrap();
    recorder.apply(&job, &runs[0], &ends_failed(&runs[0]), now).await.unwrap().written().unwrap();
    recorder.apply(&job, &runs[2], &ends_failed(&runs[2]), now).await.unwrap().written().unwrap();
    recorder.apply(&job, &running, &ends_failed(&running), now).await.unwrap().written().unwrap();
    assert_eq!(failing_told(&stack, &id).await, 1);

    // A newer run failing while an older one still runs, then the older one: both see only one
    // failure on their own side; the older one sees the newer one's after it.
    let (id, job, runs) = streak_job(&stack, 2, 2).await;
    let now = Utc::now();
    let running = Run {
        state: RunState::Running,
        attempt: 1,
        lease_until: Some(now + Duration::minutes(5)),
        ..runs[0].clone()
    };
    stack.services.ports.runs.transition(&runs[0], &running, None).await.unwrap();
    recorder.apply(&job, &runs[1], &ends_failed(&runs[1]), now).await.unwrap().written().unwrap();
    recorder.apply(&job, &running, &ends_failed(&running), now).await.unwrap().written().unwrap();
    assert_eq!(failing_told(&stack, &id).await, 1, "the newer run failing first");
}

/// Six runs failing at the same moment, with a threshold of three, tell `failing` once: each
/// reads after its own write, so the last reader sees them all, and one sets the streak's flag.
#[tokio::test]
async fn runs_failing_at_the_same_moment_tell_failing_once() {
    let stack = Stack::new().await;
    let (id, job, runs) = streak_job(&stack, 3, 6).await;
    let (recorder, now) = (&stack.services.use_cases.recorder, Utc::now());
    let steps: Vec<Step> = runs.iter().map(ends_failed).collect();
    let ends = runs.iter().zip(&steps).map(|(run, step)| recorder.apply(&job, run, step, now));
    for ended in futures::future::join_all(ends).await {
        ended.unwrap().written().unwrap();
    }
    assert_eq!(failing_told(&stack, &id).await, 1);
}

/// After the shard count shrinks from 8 to 1, the tick still claims the jobs and the watchdog
/// still inspects the runs written into the partitions that are no longer written to.
#[tokio::test]
async fn jobs_and_runs_written_with_more_shards_are_found_after_the_count_shrinks() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:58:00Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_DUE_SHARDS", "8")]).await;
    let mut jobs = Vec::new();
    for n in 0..8 {
        let doc = http_job(&format!("j{n}"), "http://127.0.0.1:9/", json!({"cron": "5 12 * * *"}));
        let id = stack.api.create_job(ALICE, &doc).await;
        stack.trigger(&id).await;
        jobs.push(id);
    }
    stack.services.use_cases.tick.run().await.unwrap();
    stack.services.use_cases.watchdog.run().await.unwrap();

    let mut config = stack.config.clone();
    config.due_shards = 1;
    let one_shard =
        Services::new(config, &Clients::new(&aws_sdk_config().await, Ledger::new()), clock.clone());
    clock.set(t("2030-01-01T12:05:00Z"));
    one_shard.use_cases.tick.run().await.unwrap();
    for id in &jobs {
        let scheduled: Vec<_> = stack.runs_of(id).await.iter().map(Run::scheduled_at).collect();
        assert!(scheduled.contains(&t("2030-01-01T12:05:00Z")), "job {id} was claimed: {scheduled:?}");
    }
    let in_flight = stack.services.ports.runs.in_flight(clock.now(), 8).await.unwrap();
    assert_eq!(one_shard.use_cases.watchdog.run().await.unwrap().inspected, in_flight.len());
}

/// A watchdog pass out of time stops between batches, and the next one resumes after the last
/// run inspected: every run is inspected although no pass inspects them all.
#[tokio::test]
async fn a_watchdog_pass_out_of_time_resumes_where_it_stopped() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let id = yearly_job(&stack, "j", "http://127.0.0.1:9/").await;
    for _ in 0..5 {
        stack.trigger(&id).await;
    }
    let settings = WatchdogSettings {
        batch_runs: 2,
        budget: std::time::Duration::ZERO,
        ..stack.config.watchdog.clone()
    };
    let watchdog = watchdog_of(
        &stack,
        stack.services.ports.runs.clone(),
        stack.services.use_cases.announcer.bus().clone(),
        settings,
    );
    clock.advance(Duration::minutes(3));
    let resent = |runs: Vec<Run>| runs.iter().filter(|r| r.resent_at.is_some()).count();
    let first = watchdog.run().await.unwrap();
    assert_eq!((first.inspected, first.unfinished), (2, true));
    assert_eq!(resent(stack.runs_of(&id).await), 2);
    let second = watchdog.run().await.unwrap();
    assert_eq!((second.inspected, second.unfinished), (2, true));
    assert_eq!(resent(stack.runs_of(&id).await), 4);
    watchdog.run().await.unwrap();
    assert_eq!(resent(stack.runs_of(&id).await), 5, "the third pass reaches the last run");
}

/// A heartbeat that renews an attempt's lease between the watchdog's read (lease expired) and
/// its write wins: the attempt is not ended as lost and no second attempt starts.
#[tokio::test]
async fn a_heartbeat_after_the_watchdogs_read_keeps_the_attempt() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let id = yearly_job(&stack, "slow", "http://127.0.0.1:9/").await;
    let queued = stack.run(&stack.trigger(&id).await).await;
    let lease = clock.now() + Duration::seconds(30);
    let running = Run { state: RunState::Running, attempt: 1, lease_until: Some(lease), ..queued.clone() };
    stack.services.ports.runs.transition(&queued, &running, None).await.unwrap();
    clock.advance(Duration::minutes(2));

    let s = &stack.services;
    let script = Script::new();
    script.add(Rule::every("RunHistory::get_many").after(heartbeat_on(&stack, queued.id(), &clock)));
    script.add(Rule::every("RunHistory::get").after(heartbeat_on(&stack, queued.id(), &clock)));
    let runs = faulty_runs(&stack, &script);
    let watchdog = watchdog_of(&stack, runs, s.use_cases.announcer.bus().clone(), s.config.watchdog.clone());
    let report = watchdog.run().await.unwrap();
    assert_eq!((report.lost, report.dispatched), (0, 0));
    let after = stack.run(&queued.id()).await;
    assert_eq!((after.state, after.attempt), (RunState::Running, 1));
}

/// An instant whose run item does not decode (a corrupt item where its run goes) is reported
/// and passed: the job goes on to its next instants, and the tick's watermark moves on instead
/// of holding every later minute back for ever.
#[tokio::test]
async fn an_instant_that_can_never_be_claimed_is_passed_not_held() {
    use aws_sdk_dynamodb::types::AttributeValue::S;
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let id = stack
        .api
        .create_job(ALICE, &http_job("broken", "http://127.0.0.1:9/", json!({"cron": "5 12 * * *"})))
        .await;
    stack
        .dynamo
        .put_item()
        .table_name(&stack.resources.runs_table)
        .item("job_id", S(id.clone()))
        .item("run_key", S(RunKey::scheduled(t("2030-01-01T12:05:00Z")).encode()))
        .item("state", S("EXPLODED".into()))
        .send()
        .await
        .unwrap();
    clock.set(t("2030-01-01T12:04:30Z"));
    let first = stack.services.use_cases.tick.run().await.unwrap();
    assert_eq!(first.claims.unclaimable, 1, "{first:?}");
    assert!(sundial_testkit::logs::captured().contains("a retry cannot help"));
    clock.set(t("2030-01-01T12:08:00Z"));
    let report = stack.services.use_cases.tick.run().await.unwrap();
    assert_eq!(report.watermark, Some(t("2030-01-01T12:07:00Z")));
    let job = stack.services.ports.jobs.get(&job_id(&id)).await.unwrap().unwrap();
    assert_eq!(job.next_run_at, Some(t("2030-01-02T12:05:00Z")), "the job goes on");
}

/// A run item or a job item that does not decode is left out of the reads of many and reported:
/// a job's history still lists its other runs, and the operators' scan of every job its other
/// jobs, instead of failing whole.
#[tokio::test]
async fn a_run_or_job_that_does_not_decode_fails_no_listing() {
    use aws_sdk_dynamodb::types::AttributeValue::S;
    let stack = Stack::new().await;
    let id = yearly_job(&stack, "history", "http://127.0.0.1:9/").await;
    let triggered = stack.trigger(&id).await;
    stack
        .dynamo
        .put_item()
        .table_name(&stack.resources.runs_table)
        .item("job_id", S(id.clone()))
        .item("run_key", S(RunKey::scheduled(t("2030-01-01T12:05:00Z")).encode()))
        .item("state", S("EXPLODED".into()))
        .send()
        .await
        .unwrap();
    let history = stack.api.get(ALICE, &format!("/v1/jobs/{id}/runs")).await;
    assert_eq!(history.status, StatusCode::OK, "{}", history.body);
    let listed: Vec<&str> =
        history.body["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(listed, [triggered.to_string().as_str()], "the good run, and only it");

    let broken = yearly_job(&stack, "broken", "http://127.0.0.1:9/").await;
    stack
        .dynamo
        .update_item()
        .table_name(&stack.resources.jobs_table)
        .key("job_id", S(broken.clone()))
        .update_expression("SET document = :d")
        .expression_attribute_values(":d", S("{not json".into()))
        .send()
        .await
        .unwrap();
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page =
            stack.services.ports.jobs.list_all(100, cursor.as_deref()).await.expect("the scan goes on");
        ids.extend(page.items.into_iter().map(|job| job.id.to_string()));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert!(ids.contains(&id) && !ids.contains(&broken), "{ids:?}");
    assert!(sundial_testkit::logs::captured().contains("does not decode"));
}

/// A local worker refills each slot as soon as its message is done: a target that never
/// answers holds one slot, and runs triggered after it still go through the others.
#[tokio::test]
async fn one_hanging_target_holds_one_slot_not_the_poller() {
    let stack = Stack::new().await;
    let hanging = TargetServer::start(|_| Answer::Hang).await;
    let fast = TargetServer::start(|_| Answer::Status(200)).await;
    let mut slow_doc = http_job("hangs", &hanging.url, json!({"cron": "0 0 1 1 *"}));
    slow_doc["timeout_s"] = json!(600);
    let slow = stack.api.create_job(ALICE, &slow_doc).await;
    let quick = yearly_job(&stack, "quick", &fast.url).await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let s = &stack.services;
    let poller = tokio::spawn(sundial_app::worker::poll::consume(
        s.use_cases.worker.clone(),
        s.ports.queue.clone(),
        s.inbox.clone(),
        "w".into(),
        4,
        stopped,
    ));
    let slow_run = stack.trigger(&slow).await;
    let waited = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while hanging.hits().is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "the hanging target was never called");
    for _ in 0..8 {
        stack.trigger(&quick).await;
    }
    // Generous for a loaded machine; the hanging call lasts ten minutes.
    let all_done = tokio::time::timeout(std::time::Duration::from_secs(90), async {
        loop {
            let runs = stack.runs_of(&quick).await;
            if runs.len() == 8 && runs.iter().all(|r| r.state == RunState::Succeeded) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
    .await;
    let _ = stop.send(true);
    poller.abort();
    assert!(
        all_done.is_ok(),
        "runs behind a hanging one did not go through: {:?}",
        stack.runs_of(&quick).await
    );
    assert_eq!(stack.run(&slow_run).await.state, RunState::Running, "the hanging attempt is still going");
}

/// The stack's worker over the runs store `runs`.
fn worker_over(stack: &Stack, runs: Arc<dyn RunStore>) -> sundial_app::worker::Worker {
    use sundial_aws::targets::Targets;
    use sundial_domain::ports::targets::Caller;
    let caller: Arc<dyn Caller> = Arc::new(Targets::new(stack.targets.clone(), stack.config.targets.clone()));
    stack.rewired(&Ports { runs, caller, ..stack.services.ports.clone() }, |_| {}).worker
}

/// A run's first attempt, handled by a worker whose first transition meets `fault`: the target
/// must be called once and the run succeed.
async fn start_made_despite(fault: Rule) {
    let stack = Stack::new().await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let id = yearly_job(&stack, "j", &target.url).await;
    let queued = stack.run(&stack.trigger(&id).await).await;
    let script = Script::new();
    script.add(fault);
    worker_over(&stack, faulty_runs(&stack, &script)).handle(&message(&queued, 1), "w").await;
    assert_eq!(target.hits().len(), 1);
    let run = stack.run(&queued.id()).await;
    assert_eq!((run.state, run.attempt), (RunState::Succeeded, 1));
}

/// A start write that DynamoDB applied but whose answer was lost: the worker finds its own
/// attempt and makes it, instead of leaving it to wait out its lease as lost.
#[tokio::test]
async fn an_attempt_whose_start_write_answer_was_lost_is_still_made() {
    start_made_despite(Rule::once("RunWrites::transition").answer(lost())).await;
}

/// A start write the SDK retried after DynamoDB applied it (the first answer lost, the retry's
/// condition failing on the change it made) is the worker's own: the attempt is made, not
/// taken for a lost race and left to wait out its lease.
#[tokio::test]
async fn an_attempt_whose_start_write_the_sdk_retried_is_still_made() {
    start_made_despite(Rule::once("RunWrites::transition").answer(StoreError::Conflict)).await;
}

/// An end write storage refuses once is tried again in place: the attempt's outcome is recorded
/// now, not left to the lease's expiry (and a second call of the target).
#[tokio::test]
async fn an_attempts_end_survives_a_brief_storage_outage() {
    let stack = Stack::new().await;
    let script = Script::new();
    let arm = script.clone();
    // The target arms the fault while it is being called: it hits the end write.
    let target = TargetServer::start(move |_| {
        arm.add(Rule::once("RunWrites::transition").refuse(unavailable("storage did not answer")));
        Answer::Status(200)
    })
    .await;
    let id = yearly_job(&stack, "j", &target.url).await;
    let queued = stack.run(&stack.trigger(&id).await).await;
    worker_over(&stack, faulty_runs(&stack, &script)).handle(&message(&queued, 1), "w").await;
    let run = stack.run(&queued.id()).await;
    assert_eq!((run.state, run.attempt), (RunState::Succeeded, 1));
}

/// A run whose claimer died between writing it and sending it is sent by the next claimer that
/// finds it, however young it is: it does not wait for the watchdog.
#[tokio::test]
async fn a_run_whose_claimer_died_before_sending_is_sent_by_the_next_claimer() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:50:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let id = stack
        .api
        .create_job(ALICE, &http_job("j", "http://127.0.0.1:9/", json!({"cron": "0 12 * * *"})))
        .await;
    clock.set(t("2030-01-01T11:59:50Z"));
    let died = services_without_queue(&stack, clock.clone()).await.use_cases.tick.run().await.unwrap();
    assert_eq!((died.claims.claimed, died.claims.dispatched), (1, 0));
    clock.advance(Duration::seconds(5));
    let next = stack.services.use_cases.tick.run().await.unwrap();
    assert_eq!((next.claims.resent, next.claims.dispatched), (1, 1), "{next:?}");
    assert_eq!(stack.queue_depth().await, 1);
    assert_eq!(stack.runs_of(&id).await.len(), 1);
}

/// One in-flight run whose item does not decode is left out and reported; the watchdog's pass
/// still repairs every other run.
#[tokio::test]
async fn a_run_that_does_not_decode_never_stalls_the_watchdog() {
    use aws_sdk_dynamodb::types::AttributeValue::S;
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:00Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_DUE_SHARDS", "1")]).await;
    let id = yearly_job(&stack, "j", "http://127.0.0.1:9/").await;
    let good = stack.trigger(&id).await;
    let bad_key = RunKey::scheduled(t("2030-01-01T11:00:00Z")).encode();
    stack
        .dynamo
        .put_item()
        .table_name(&stack.resources.runs_table)
        .item("job_id", S(id.clone()))
        .item("run_key", S(bad_key))
        .item("state", S("FROM_THE_FUTURE".into()))
        .item("inflight_shard", S("00".into()))
        .item("inflight_at", S(format!("2030-01-01T11:00:00Z#{id}")))
        .send()
        .await
        .unwrap();
    clock.advance(Duration::minutes(3));
    let report = stack.services.use_cases.watchdog.run().await.unwrap();
    assert_eq!((report.inspected, report.dispatched), (1, 1), "{report:?}");
    assert!(stack.run(&good).await.resent_at.is_some(), "the good run was re-sent");
    assert!(sundial_testkit::logs::captured().contains("does not decode"));
}

/// After the shard count grows, the first tick with the larger count looks back past its
/// trailing window for jobs the API wrote into the new partitions while a tick with the old
/// count still ran, even when the watchdog recorded the larger count first.
#[tokio::test]
async fn jobs_written_into_new_shards_while_old_ticks_ran_are_claimed_after_the_count_grows() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T11:50:00Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_DUE_SHARDS", "1")]).await;
    stack.services.use_cases.tick.run().await.unwrap();
    let mut config = stack.config.clone();
    config.due_shards = 8;
    let eight = Services::new(config, &Clients::new(&aws_sdk_config().await, Ledger::new()), clock.clone());
    let api = sundial_tests::Api::over(&eight);
    let mut jobs = Vec::new();
    for n in 0..8 {
        jobs.push(
            api.create_job(
                ALICE,
                &http_job(&format!("j{n}"), "http://127.0.0.1:9/", json!({"cron": "52 11 * * *"})),
            )
            .await,
        );
    }
    for minute in ["11:53", "11:54", "11:55", "11:56"] {
        clock.set(t(&format!("2030-01-01T{minute}:00Z")));
        stack.services.use_cases.tick.run().await.unwrap();
    }
    eight.use_cases.watchdog.run().await.unwrap();
    clock.set(t("2030-01-01T11:57:00Z"));
    eight.use_cases.tick.run().await.unwrap();
    for id in &jobs {
        let scheduled: Vec<_> = stack.runs_of(id).await.iter().map(Run::scheduled_at).collect();
        assert_eq!(scheduled, [t("2030-01-01T11:52:00Z")], "job {id}");
    }
}

/// A heartbeat that renews an attempt's lease between a redelivered message's read (lease
/// expired) and the worker's rescue wins there too: the attempt goes on.
#[tokio::test]
async fn a_heartbeat_after_the_workers_read_keeps_the_attempt() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:00Z")));
    let stack = Stack::at(&clock, &[]).await;
    let id = yearly_job(&stack, "slow", "http://127.0.0.1:9/").await;
    let queued = stack.run(&stack.trigger(&id).await).await;
    let lease = clock.now() + Duration::seconds(30);
    let running = Run { state: RunState::Running, attempt: 1, lease_until: Some(lease), ..queued.clone() };
    stack.services.ports.runs.transition(&queued, &running, None).await.unwrap();
    clock.advance(Duration::minutes(2));
    let script = Script::new();
    script.add(Rule::every("RunHistory::get_many").after(heartbeat_on(&stack, queued.id(), &clock)));
    script.add(Rule::every("RunHistory::get").after(heartbeat_on(&stack, queued.id(), &clock)));
    worker_over(&stack, faulty_runs(&stack, &script)).handle(&message(&queued, 1), "w").await;
    let after = stack.run(&queued.id()).await;
    assert_eq!((after.state, after.attempt), (RunState::Running, 1));
}

/// A start write whose answer was lost, and a cancel that lands before the read-back: the worker
/// does not call the target of the cancelled run.
#[tokio::test]
async fn an_ambiguous_start_cancelled_before_the_read_back_is_not_made() {
    let stack = Stack::new().await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let id = yearly_job(&stack, "j", &target.url).await;
    let run_id = stack.trigger(&id).await;
    let queued = stack.run(&run_id).await;
    // The start is written, the run is then cancelled (by the API, say), and the start's answer
    // is lost.
    let script = Script::new();
    script.add(Rule::once("RunWrites::transition").after(cancel(&stack, run_id.clone())).answer(lost()));
    worker_over(&stack, faulty_runs(&stack, &script)).handle(&message(&queued, 1), "w").await;
    assert!(target.hits().is_empty(), "a cancelled run's target is not called");
    assert_eq!(stack.run(&run_id).await.state, RunState::Cancelled);
}
