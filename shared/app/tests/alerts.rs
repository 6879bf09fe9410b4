//! Alert channels Sundial delivers to itself (Slack, PagerDuty), over the use cases in memory:
//! what each event sends where, one delivery per event and channel however the announcement is
//! retried, and a channel that keeps failing given up, counted and shown on the run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use sundial_app::ports::Ports;
use sundial_app::worker::poll::poll_once;
use sundial_domain::channels::{Channel, DeliveryError, DeliveryState, MAX_TRIES, PAGERDUTY_EVENTS_URL};
use sundial_domain::job::Job;
use sundial_domain::ports::targets::Answer;
use sundial_domain::run::RunId;
use sundial_testkit::faults::{Faulty, Rule, Script, unavailable};
use sundial_testkit::world::{Settings, World, job};

const START: &str = "2026-11-27T10:00:00Z";
const SLACK: &str = "https://hooks.slack.test/services/T000/B000/XXXX";
const ROUTING_KEY: &str = "R0UTINGKEY0123456789abcdefABCDEF";

fn failed() -> Answer {
    Answer::Failed { retryable: true, status: Some(500), error: "HTTP 500".into() }
}

fn succeeded() -> Answer {
    Answer::Succeeded { status: Some(200), output: None }
}

/// A yearly job whose alerts go to Slack and PagerDuty, one attempt per run.
async fn paged_job(world: &World) -> Job {
    let notify = json!({"slack": {"webhook_url": SLACK}, "pagerduty": {"routing_key": ROUTING_KEY}});
    let extra = json!({"retry": {"max_attempts": 1}, "notify": notify});
    world.create(job("nightly", json!({"cron": "0 0 1 1 *"}), extra)).await
}

/// One triggered run answering `answer`, delivered.
async fn run_answering(world: &World, job: &Job, answer: Answer) -> RunId {
    world.caller.push(answer);
    let id = world.trigger(job).await;
    world.deliver().await;
    world.pass(1);
    id
}

fn pagerduty_actions(world: &World) -> Vec<(String, String)> {
    let taken = world.channels.taken(PAGERDUTY_EVENTS_URL);
    taken
        .iter()
        .map(|e| (e["event_action"].as_str().unwrap().into(), e["dedup_key"].as_str().unwrap().into()))
        .collect()
}

fn slack_headers(world: &World) -> Vec<String> {
    let taken = world.channels.taken(SLACK);
    taken.iter().map(|m| m["blocks"][0]["text"]["text"].as_str().unwrap().to_string()).collect()
}

/// A failure opens the job's incident and tells Slack; the next success recovers: the incident
/// is resolved and Slack told, each once.
#[tokio::test]
async fn a_failure_and_its_recovery_reach_slack_and_pagerduty_once_each() {
    let world = World::with(START, Settings::default().pauses_move_clock());
    let job = paged_job(&world).await;
    let failing = run_answering(&world, &job, failed()).await;
    let incident = format!("sundial/job/{}", job.id);
    let trigger = ("trigger".to_string(), incident.clone());
    assert_eq!(
        pagerduty_actions(&world),
        [trigger.clone(), trigger.clone()],
        "failed, then failing: one incident"
    );
    let first = &world.channels.taken(PAGERDUTY_EVENTS_URL)[0];
    assert_eq!(first["routing_key"], ROUTING_KEY);
    assert_eq!(first["payload"]["custom_details"]["run_id"], failing.to_string());
    assert_eq!(slack_headers(&world), [":red_circle: nightly: failed", ":red_circle: nightly: failing"]);

    run_answering(&world, &job, succeeded()).await;
    assert_eq!(pagerduty_actions(&world).last(), Some(&("resolve".to_string(), incident)));
    assert_eq!(
        slack_headers(&world).last().map(String::as_str),
        Some(":large_green_circle: nightly: recovered")
    );
    assert_eq!(world.channels.taken(SLACK).len(), 3);
    let ended = world.run(&failing).await;
    for event in &ended.events {
        assert!(event.sent, "{event:?}");
        let marks: Vec<DeliveryState> = event.channels.values().map(|m| m.state).collect();
        assert!(marks.iter().all(|s| *s == DeliveryState::Delivered) && !marks.is_empty(), "{event:?}");
    }
}

/// A channel failing for now is retried by the watchdog's republish, which delivers only what
/// is owed: the channel that took the event gets it once.
#[tokio::test]
async fn a_retried_announcement_delivers_only_what_a_channel_still_owes() {
    let world = World::with(START, Settings::default().pauses_move_clock());
    let job = paged_job(&world).await;
    let busy = || Err(DeliveryError::Unavailable("HTTP 503".into()));
    // Both tries of the first announcement of `failed`.
    world.channels.answer(SLACK, [busy(), busy()]);
    let run = run_answering(&world, &job, failed()).await;
    let stored = world.run(&run).await;
    let failed_event = stored.events.iter().find(|e| e.id == "failed").unwrap();
    assert!(!failed_event.sent && failed_event.topics_sent, "{failed_event:?}");
    assert_eq!(failed_event.channels[&Channel::Slack].state, DeliveryState::Pending);
    assert_eq!(failed_event.channels[&Channel::Slack].tries, 2);
    assert_eq!(failed_event.channels[&Channel::PagerDuty].state, DeliveryState::Delivered);
    let published = world.bus.published().len();
    let paged = world.channels.taken(PAGERDUTY_EVENTS_URL).len();

    // Past the watchdog's publish grace.
    world.pass(121);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().republished, 1);
    let stored = world.run(&run).await;
    let failed_event = stored.events.iter().find(|e| e.id == "failed").unwrap();
    assert!(failed_event.sent);
    assert_eq!(failed_event.channels[&Channel::Slack].tries, 3);
    assert_eq!(world.bus.published().len(), published, "the topics are not told again");
    assert_eq!(world.channels.taken(PAGERDUTY_EVENTS_URL).len(), paged, "PagerDuty is not told again");
    let failed_messages = slack_headers(&world).iter().filter(|h| h.ends_with("failed")).count();
    assert_eq!(failed_messages, 1);
}

/// A channel that never takes an event is given up after its tries: marked failed on the run,
/// counted, and the run settles.
#[tokio::test]
async fn a_channel_failing_every_try_is_given_up_counted_and_shown() {
    let world = World::with(START, Settings::default().pauses_move_clock());
    let notify = json!({"on": ["failed"], "slack": {"webhook_url": SLACK}});
    let extra = json!({"retry": {"max_attempts": 1}, "notify": notify});
    let nightly = world.create(job("nightly", json!({"cron": "0 0 1 1 *"}), extra)).await;
    world
        .channels
        .answer(SLACK, (0..MAX_TRIES + 2).map(|_| Err(DeliveryError::Unavailable("HTTP 503".into()))));
    let run = run_answering(&world, &nightly, failed()).await;
    for _ in 0..4 {
        world.pass(121);
        world.use_cases.watchdog.run().await.unwrap();
    }
    assert_eq!(world.channels.tries(SLACK), MAX_TRIES as usize, "bounded");
    let stored = world.run(&run).await;
    let mark = &stored.events[0].channels[&Channel::Slack];
    assert_eq!(
        (mark.state, mark.tries, mark.error.as_deref()),
        (DeliveryState::Failed, MAX_TRIES, Some("HTTP 503"))
    );
    assert!(stored.events[0].sent, "given up: owed no more");
    assert!(!world.runs.is_in_flight(&run.job_id, &run.key), "the run settles");
    let metrics = world.ports.meter.prometheus();
    let line = metrics.lines().find(|l| l.starts_with("sundial_alerts_undelivered") && !l.starts_with('#'));
    assert!(line.is_some_and(|l| l.ends_with(" 1")), "{metrics}");

    // A refusal is final at once.
    let refused = json!({"on": ["failed"], "slack": {"webhook_url": "https://hooks.slack.test/gone"}});
    let other = world
        .create(sundial_testkit::world::job(
            "other",
            json!({"cron": "0 0 1 1 *"}),
            json!({"retry": {"max_attempts": 1}, "notify": refused}),
        ))
        .await;
    world.channels.answer(
        "https://hooks.slack.test/gone",
        [Err(DeliveryError::Refused("HTTP 404: no_service".into()))],
    );
    let run = run_answering(&world, &other, failed()).await;
    let mark = world.run(&run).await.events[0].channels[&Channel::Slack].clone();
    assert_eq!((mark.state, mark.tries), (DeliveryState::Failed, 1));
}

/// A run past its SLA opens an incident of its own, resolved by its success even though the job
/// never asked for `succeeded`.
#[tokio::test]
async fn a_runs_sla_incident_is_resolved_by_its_success() {
    let world = World::with(START, Settings::default().pauses_move_clock());
    let notify = json!({"pagerduty": {"routing_key": ROUTING_KEY, "severity": "warning"}});
    let extra = json!({"sla_s": 30, "notify": notify});
    let job = world.create(job("slow", json!({"cron": "0 0 1 1 *"}), extra)).await;
    world.caller.push(Answer::Accepted { status: 202 });
    let run = world.trigger(&job).await;
    world.deliver().await;
    world.pass(45);
    world.use_cases.watchdog.run().await.unwrap();
    let key = format!("sundial/run/{run}");
    assert_eq!(pagerduty_actions(&world), [("trigger".to_string(), key.clone())]);
    assert_eq!(world.channels.taken(PAGERDUTY_EVENTS_URL)[0]["payload"]["severity"], "warning");
    complete(&world, &run).await;
    assert_eq!(pagerduty_actions(&world).last(), Some(&("resolve".to_string(), key)));
    let told: Vec<Value> = world.bus.published().iter().map(|n| json!(n.event)).collect();
    assert!(told.contains(&json!("succeeded")), "recorded to resolve the incident: {told:?}");
}

async fn complete(world: &World, run: &RunId) {
    let token = world.caller.calls().last().map(|c| c.callback_token.clone()).expect("a call");
    let done =
        sundial_app::run_control::Completion { succeeded: true, output: None, error: None, permanent: false };
    world.use_cases.run_control.complete(run, &token, done).await.expect("completed");
}

/// A job with a threshold of its own is paged at `failing`, not at each failure; its next
/// success resolves the incident.
#[tokio::test]
async fn a_job_with_its_own_threshold_is_paged_at_failing() {
    let world = World::with(START, Settings::default().pauses_move_clock());
    let notify = json!({"pagerduty": {"routing_key": ROUTING_KEY}});
    let extra = json!({"retry": {"max_attempts": 1}, "alert_after_failures": 2, "notify": notify});
    let job = world.create(job("nightly", json!({"cron": "0 0 1 1 *"}), extra)).await;
    run_answering(&world, &job, failed()).await;
    assert!(pagerduty_actions(&world).is_empty(), "one failure of two: no page");
    run_answering(&world, &job, failed()).await;
    let incident = format!("sundial/job/{}", job.id);
    assert_eq!(pagerduty_actions(&world), [("trigger".to_string(), incident.clone())]);
    run_answering(&world, &job, succeeded()).await;
    assert_eq!(pagerduty_actions(&world).last(), Some(&("resolve".to_string(), incident)));
}

/// A parent whose end could not be handed to its children (the hand-over failed) still has its
/// deliveries' marks written: the watchdog's pass continues from them rather than starting over.
#[tokio::test]
async fn a_parents_channel_marks_are_kept_when_its_hand_over_fails() {
    let world = World::with(START, Settings::default().pauses_move_clock());
    let notify = json!({"on": ["succeeded"], "slack": {"webhook_url": SLACK}});
    let a = world.create(job("a", json!({"cron": "0 0 1 1 *"}), json!({"notify": notify}))).await;
    let child = json!({"name": "c", "depends_on": ["a"], "target": {"type": "http", "url": sundial_testkit::world::TARGET}});
    world.create(child).await;
    world.channels.answer(SLACK, (0..MAX_TRIES).map(|_| Err(DeliveryError::Unavailable("HTTP 503".into()))));
    // The worker's hand-over cannot read the children.
    let script = Script::new();
    script.add(Rule::every("Catalogue::get_many").refuse(unavailable("get_many")));
    let ports = Ports { jobs: Faulty::new(world.ports.jobs.clone(), &script), ..world.ports.clone() };
    let worker = world.rewired(&ports, |_| {}).worker;
    world.caller.push(succeeded());
    let run = world.trigger(&a).await;
    poll_once(&worker, world.queue.as_ref(), world.queue.as_ref(), "w", 0).await.unwrap();
    let events = world.run(&run).await.events;
    assert!(events.iter().any(|e| e.id == "downstream" && !e.sent), "not handed over: {events:?}");
    let mark =
        events.iter().find(|e| e.id == "succeeded").and_then(|e| e.channels.get(&Channel::Slack).cloned());
    assert_eq!(
        mark.map(|m| (m.state, m.tries)),
        Some((DeliveryState::Pending, 2)),
        "the first round's mark is kept"
    );
    world.pass(121);
    world.use_cases.watchdog.run().await.unwrap();
    assert_eq!(world.channels.tries(SLACK), 4, "the second round continues from the first");
    let events = world.run(&run).await.events;
    let mark =
        events.iter().find(|e| e.id == "succeeded").and_then(|e| e.channels.get(&Channel::Slack).cloned());
    assert_eq!(mark.map(|m| m.tries), Some(4));
}

/// A job deleted while a channel still owes one of its runs' events: the delivery is given up
/// (the channel is gone with the job), counted, and the run settles.
#[tokio::test]
async fn a_deleted_jobs_owed_deliveries_are_given_up() {
    let world = World::with(START, Settings::default().pauses_move_clock());
    let notify = json!({"on": ["failed"], "slack": {"webhook_url": SLACK}});
    let extra = json!({"retry": {"max_attempts": 1}, "notify": notify});
    let nightly = world.create(job("nightly", json!({"cron": "0 0 1 1 *"}), extra)).await;
    world.channels.answer(
        SLACK,
        [
            Err(DeliveryError::Unavailable("HTTP 503".into())),
            Err(DeliveryError::Unavailable("HTTP 503".into())),
        ],
    );
    let run = run_answering(&world, &nightly, failed()).await;
    world.use_cases.jobs.delete(&nightly.owner, &nightly.id).await.unwrap();
    world.pass(121);
    world.use_cases.watchdog.run().await.unwrap();
    let stored = world.run(&run).await;
    let mark = &stored.events[0].channels[&Channel::Slack];
    assert_eq!((mark.state, mark.error.as_deref()), (DeliveryState::Failed, Some("the job was deleted")));
    assert!(stored.events[0].sent);
    assert_eq!(world.channels.tries(SLACK), 2, "nothing posted for a deleted job");
    assert!(
        world
            .ports
            .meter
            .prometheus()
            .lines()
            .any(|l| l.starts_with("sundial_alerts_undelivered") && l.ends_with(" 1"))
    );
}

/// PagerDuty is tried within its announcement only: a delivery still failing at its end is given
/// up, never tried minutes later (when a later event may have moved the incident on).
#[tokio::test]
async fn pagerduty_is_given_up_at_the_end_of_its_announcement() {
    let world = World::with(START, Settings::default().pauses_move_clock());
    let job = paged_job(&world).await;
    let busy = || Err(DeliveryError::Unavailable("HTTP 503".into()));
    world.channels.answer(PAGERDUTY_EVENTS_URL, [busy(), busy()]);
    let run = run_answering(&world, &job, failed()).await;
    let stored = world.run(&run).await;
    let mark = &stored.events.iter().find(|e| e.id == "failed").unwrap().channels[&Channel::PagerDuty];
    assert_eq!((mark.state, mark.tries), (DeliveryState::Failed, 2));
    world.pass(121);
    world.use_cases.watchdog.run().await.unwrap();
    assert_eq!(
        world.channels.tries(PAGERDUTY_EVENTS_URL),
        3,
        "two for `failed`, one for `failing`; no retry later"
    );
}

/// A channel taken off the job while it still owed an event is given up at the next pass.
#[tokio::test]
async fn a_channel_taken_off_the_job_is_owed_nothing() {
    let world = World::with(START, Settings::default().pauses_move_clock());
    let notify = json!({"on": ["failed"], "slack": {"webhook_url": SLACK}});
    let extra = json!({"retry": {"max_attempts": 1}, "notify": notify});
    let nightly = world.create(job("nightly", json!({"cron": "0 0 1 1 *"}), extra)).await;
    let busy = || Err(DeliveryError::Unavailable("HTTP 503".into()));
    world.channels.answer(SLACK, [busy(), busy()]);
    let run = run_answering(&world, &nightly, failed()).await;
    let patch = json!({"notify": {"slack": null, "email": ["ops@example.com"]}});
    world.use_cases.jobs.patch(&nightly.owner, &nightly.id, &patch, Default::default()).await.unwrap();
    world.pass(121);
    world.use_cases.watchdog.run().await.unwrap();
    let stored = world.run(&run).await;
    let mark = &stored.events[0].channels[&Channel::Slack];
    assert_eq!(
        (mark.state, mark.error.as_deref()),
        (DeliveryState::Failed, Some("no longer among the job's channels"))
    );
    assert!(stored.events[0].sent);
    assert_eq!(world.channels.tries(SLACK), 2);
}
