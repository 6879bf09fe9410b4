//! The watchdog against the emulator: SLA misses once, timeouts and lost workers repaired,
//! missing messages re-sent (and only those), unsent events published after a crash, per-job
//! topics and their filters, and the scheduler's stall and recovery told once each. The clock is
//! manual, so every deadline is crossed on purpose; an SQS queue subscribed to a topic stands in
//! for a person's inbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::http::StatusCode;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use std::sync::Arc;
use sundial_app::watchdog::WatchdogReport;
use sundial_domain::clock::{Clock, ManualClock};
use sundial_domain::job::EventKind;
use sundial_domain::run::RunEvent;
use sundial_domain::run::{Attempt, Outcome, Run, RunState};
use sundial_tests::{ALICE, Answer, Stack, TargetServer};

const START: &str = "2030-01-01T12:00:00Z";

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn job(name: &str, url: &str, extra: Value) -> Value {
    let mut job = json!({
        "name": name,
        "schedule": {"cron": "0 0 1 1 *"},
        "target": {"type": "http", "url": url},
        "retry": {"max_attempts": 1},
        "timeout_s": 600
    });
    job.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    job
}

async fn watchdog(stack: &Stack) -> WatchdogReport {
    stack.services.use_cases.watchdog.run().await.unwrap()
}

/// Receives `count` messages of the runs queue (waiting up to 20 s for delayed ones) and hands
/// each to the worker as Lambda would; returns the attempts they asked for.
async fn work(stack: &Stack, count: usize, worker: &str) -> Vec<u64> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut attempts = Vec::new();
    while attempts.len() < count && std::time::Instant::now() < deadline {
        for body in stack.drain_queue().await {
            attempts.push(body["attempt"].as_u64().unwrap());
            stack.services.use_cases.worker.handle(&body.to_string(), worker).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(attempts.len(), count, "messages on the runs queue");
    attempts
}

/// The `event` of each notification an inbox received (SNS envelopes), sorted.
fn events_of(messages: &[Value]) -> Vec<String> {
    let mut events: Vec<String> = messages
        .iter()
        .map(|m| m["MessageAttributes"]["event"]["Value"].as_str().unwrap().to_string())
        .collect();
    events.sort();
    events
}

/// A worker that died mid-attempt: the lease expires, the attempt is `lost`, the run is
/// dispatched again and completes; both attempts are in the run's record.
#[tokio::test]
async fn a_lost_worker_is_replaced() {
    let clock = Arc::new(ManualClock::new(t(START)));
    let stack = Stack::at(&clock, &[]).await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let retry = json!({"max_attempts": 3, "backoff_s": 1, "max_backoff_s": 1});
    let id =
        stack.api.create_job(ALICE, &job("job", &target.url, json!({"timeout_s": 30, "retry": retry}))).await;
    let run_id = stack.trigger(&id).await;

    // A worker takes the message, starts the attempt, and dies.
    assert_eq!(stack.drain_queue().await.len(), 1);
    let queued = stack.run(&run_id).await;
    let now = clock.now();
    let started = Run {
        state: RunState::Running,
        attempt: 1,
        attempts: vec![Attempt {
            n: 1,
            started_at: now,
            finished_at: None,
            worker: "doomed".into(),
            outcome: None,
            status_code: None,
            error: None,
            output: None,
            callback: None,
            call_until: None,
            handle: None,
            followed_at: None,
            looks: 0,
            look_tag: None,
            logs_url: None,
        }],
        lease_until: Some(now + Duration::seconds(60)),
        updated_at: now,
        ..queued.clone()
    };
    stack.services.ports.runs.transition(&queued, &started, None).await.unwrap();

    clock.advance(Duration::seconds(59));
    assert_eq!(watchdog(&stack).await.lost, 0, "the lease still holds");
    clock.advance(Duration::seconds(2));
    let report = watchdog(&stack).await;
    assert_eq!((report.lost, report.dispatched), (1, 1));
    clock.advance(Duration::seconds(2));
    assert_eq!(work(&stack, 1, "rescuer").await, [2]);
    let done = stack.run(&run_id).await;
    assert_eq!(done.state, RunState::Succeeded);
    let attempts: Vec<_> = done.attempts.iter().map(|a| (a.n, a.worker.as_str(), a.outcome)).collect();
    assert_eq!(attempts, [(1, "doomed", Some(Outcome::Lost)), (2, "rescuer", Some(Outcome::Succeeded))]);
    assert_eq!(target.hits().len(), 1);
}

/// An event recorded with its state change but never published (a crash between) is published
/// by the next pass after the grace period, once; then the run leaves the in-flight index.
#[tokio::test]
async fn an_event_left_unsent_is_published_once() {
    let clock = Arc::new(ManualClock::new(t(START)));
    let stack = Stack::at(&clock, &[]).await;
    let inbox = stack.subscribe_inbox().await;
    let id = stack.api.create_job(ALICE, &job("job", "http://127.0.0.1:9/", json!({}))).await;
    let run_id = stack.trigger(&id).await;
    stack.drain_queue().await;

    // The worker's final write lands with its `failed` event; then the worker crashes.
    let queued = stack.run(&run_id).await;
    let now = clock.now();
    let failed = Run {
        state: RunState::Failed,
        updated_at: now,
        events: vec![RunEvent::new(EventKind::Failed, 0, now)],
        ..queued.clone()
    };
    stack.services.ports.runs.transition(&queued, &failed, None).await.unwrap();
    let in_flight = stack.services.ports.runs.in_flight(now + Duration::hours(1), 8).await.unwrap();
    assert_eq!(in_flight.len(), 1, "an ended run stays in the index until its events are out");

    let grace = stack.config.watchdog.publish_grace;
    clock.advance(grace - Duration::seconds(1));
    assert_eq!(watchdog(&stack).await.republished, 0, "the writer may still be publishing");
    clock.advance(Duration::seconds(1));
    assert_eq!(watchdog(&stack).await.republished, 1);
    for _ in 0..3 {
        clock.advance(Duration::minutes(1));
        assert_eq!(watchdog(&stack).await, WatchdogReport::default(), "nothing left to do");
    }
    assert!(stack.run(&run_id).await.events.iter().all(|e| e.sent));
    assert!(stack.services.ports.runs.in_flight(clock.now(), 8).await.unwrap().is_empty());
    let messages = stack.read_inbox(&inbox, 2, 5).await;
    assert_eq!(events_of(&messages), ["failed"]);
}

/// Per-job topics: a subscriber of job A's `failed` gets A's failures, as JSON, and nothing of
/// job B nor of A's successes; email and SMS endpoints are subscribed with the job's filter
/// policy, shown with their status, follow edits, and vanish with the job.
#[tokio::test]
async fn job_topics_reach_only_their_subscribers() {
    let clock = Arc::new(ManualClock::new(t(START)));
    let stack = Stack::at(&clock, &[("SUNDIAL_PUBLIC_URL", "https://sundial.example.test")]).await;
    let failing = TargetServer::start(|_| Answer::Status(500)).await;
    let flaky = TargetServer::start(|n| if n == 0 { Answer::Status(500) } else { Answer::Status(200) }).await;
    let (a_inbox, a_arn) = stack.new_queue("a-inbox").await;

    let a = json!({"on": ["failed"], "sqs": [a_arn]});
    let a = stack.api.create_job(ALICE, &job("a", &flaky.url, json!({"notify": a}))).await;
    let b = json!({"on": ["failed", "succeeded"]});
    let b = stack.api.create_job(ALICE, &job("b", &failing.url, json!({"notify": b}))).await;
    let a_failed = stack.trigger(&a).await;
    let _b_failed = stack.trigger(&b).await;
    work(&stack, 2, "w").await;
    let _a_succeeded = stack.trigger(&a).await;
    work(&stack, 1, "w").await;

    let received = stack.read_inbox(&a_inbox, 2, 5).await;
    assert_eq!(received.len(), 1, "{received:?}");
    let body = &received[0];
    assert_eq!(body["event"], "failed");
    assert_eq!(body["job_id"], a.as_str());
    assert_eq!(body["run_id"], a_failed.to_string().as_str());
    assert_eq!(body["link"], format!("https://sundial.example.test/ui/index.html#/runs/{a_failed}").as_str());

    // Email and SMS: subscribed with the filter, shown, edited, removed.
    let notify =
        json!({"on": ["failed", "timed_out"], "email": ["ops@example.test"], "sms": ["+15555550100"]});
    let c = stack.api.create_job(ALICE, &job("c", &failing.url, json!({"notify": notify}))).await;
    let topic =
        format!("{}:{}-job-{c}", stack.resources.events_topic_arn.rsplit_once(':').unwrap().0, stack.name);
    let subscriptions = |stack: &Stack| {
        let (sns, topic) = (stack.sns.clone(), topic.clone());
        async move {
            let out = sns.list_subscriptions_by_topic().topic_arn(&topic).send().await?;
            let mut found = Vec::new();
            for s in out.subscriptions() {
                let attributes = sns
                    .get_subscription_attributes()
                    .subscription_arn(s.subscription_arn().unwrap())
                    .send()
                    .await
                    .unwrap()
                    .attributes
                    .unwrap();
                let policy: Value = serde_json::from_str(&attributes["FilterPolicy"]).unwrap();
                found.push((s.protocol().unwrap().to_string(), s.endpoint().unwrap().to_string(), policy));
            }
            found.sort_by(|x, y| x.0.cmp(&y.0));
            Ok::<_, aws_sdk_sns::Error>(found)
        }
    };
    let policy = json!({"event": ["failed", "timed_out"]});
    assert_eq!(
        subscriptions(&stack).await.unwrap(),
        [
            ("email".to_string(), "ops@example.test".to_string(), policy.clone()),
            ("sms".to_string(), "+15555550100".to_string(), policy)
        ]
    );
    let shown = stack.api.get(ALICE, &format!("/v1/jobs/{c}")).await;
    let mut shown: Vec<(String, String)> = shown.body["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["protocol"].as_str().unwrap().to_string(), s["status"].as_str().unwrap().to_string()))
        .collect();
    shown.sort();
    // The emulator confirms an email subscription at once (SNS keeps it pending until the mail's
    // link is followed); what SNS says of each is what is shown.
    assert_eq!(shown, [("email".into(), "confirmed".into()), ("sms".into(), "confirmed".into())]);

    let edit = json!({"notify": {"on": ["sla_missed"], "sms": null}});
    let edited = stack.api.patch(ALICE, &format!("/v1/jobs/{c}"), &edit).await;
    assert_eq!(edited.status, StatusCode::OK, "{}", edited.body);
    assert_eq!(
        subscriptions(&stack).await.unwrap(),
        [("email".to_string(), "ops@example.test".to_string(), json!({"event": ["sla_missed"]}))]
    );

    assert_eq!(stack.api.delete(ALICE, &format!("/v1/jobs/{c}")).await.status, StatusCode::NO_CONTENT);
    assert!(subscriptions(&stack).await.is_err(), "the topic is gone with the job");
    let topics = stack.sns.list_topics().send().await.unwrap();
    assert!(topics.topics().iter().all(|t| t.topic_arn() != Some(topic.as_str())));
}

/// `failing` is told when failed runs in a row reach `alert_after_failures`, once until a success
/// starts a new streak; `late_start` once for a run still queued past its start deadline.
#[tokio::test]
async fn failing_streaks_and_late_starts_are_told_once() {
    let clock = Arc::new(ManualClock::new(t(START)));
    let stack = Stack::at(&clock, &[]).await;
    let inbox = stack.subscribe_inbox().await;
    // Runs: failed, failed (streak of 2: failing), failed, succeeded, failed, failed (failing).
    let target =
        TargetServer::start(|n| if n == 3 { Answer::Status(200) } else { Answer::Status(500) }).await;
    let id =
        stack.api.create_job(ALICE, &job("flappy", &target.url, json!({"alert_after_failures": 2}))).await;
    let mut failing_runs = Vec::new();
    for _ in 0..6 {
        let run_id = stack.trigger(&id).await;
        work(&stack, 1, "w").await;
        let done = stack.run(&run_id).await;
        if done.events.iter().any(|e| e.kind == EventKind::Failing) {
            failing_runs.push(done.attempts[0].n);
        }
        clock.advance(Duration::seconds(1));
    }
    assert_eq!(failing_runs.len(), 2);

    let waiting =
        stack.api.create_job(ALICE, &job("waiting", &target.url, json!({"start_deadline_s": 30}))).await;
    let waiting_run = stack.trigger(&waiting).await;
    clock.advance(Duration::seconds(30));
    assert_eq!(watchdog(&stack).await.late_start, 0);
    clock.advance(Duration::seconds(2));
    assert_eq!(watchdog(&stack).await.late_start, 1);
    assert_eq!(watchdog(&stack).await.late_start, 0);
    assert_eq!(stack.run(&waiting_run).await.state, RunState::Queued, "a late start is only told");

    let messages = stack.read_inbox(&inbox, 8, 20).await;
    let events = events_of(&messages);
    assert_eq!(events.iter().filter(|e| *e == "failing").count(), 2, "{events:?}");
    assert_eq!(events.iter().filter(|e| *e == "failed").count(), 5, "{events:?}");
    assert_eq!(events.iter().filter(|e| *e == "late_start").count(), 1, "{events:?}");
}

// The watchdog's scenarios written once for both harnesses: also in memory (`shared/app/tests`).
sundial_testkit::watchdog_scenarios!(Stack);

/// A subscription is shown as SNS holds it: an HTTPS endpoint that never confirmed (here one the
/// emulator cannot reach) is `pending_confirmation`, even where the listing names it by its ARN.
#[tokio::test]
async fn an_https_subscription_never_confirmed_is_shown_pending() {
    let stack = Stack::new().await;
    let notify = json!({"on": ["failed"], "https": ["https://hooks.example.test/sundial"]});
    let id = stack
        .api
        .create_job(ALICE, &job("unconfirmed", "http://127.0.0.1:9/", json!({"notify": notify})))
        .await;
    let shown = stack.api.get(ALICE, &format!("/v1/jobs/{id}")).await;
    let subscriptions = shown.body["subscriptions"].as_array().cloned().unwrap_or_default();
    assert_eq!(subscriptions.len(), 1, "{}", shown.body);
    assert_eq!(subscriptions[0]["protocol"], "https");
    assert_eq!(subscriptions[0]["status"], "pending_confirmation", "{}", shown.body);
}
