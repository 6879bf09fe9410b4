//! Delivery per job and concurrency groups, over the ports in memory on a manual clock: an
//! at-most-once run never calls its target a second time, whatever ends its attempt, but tries
//! again when the request certainly never left; a group's limit holds across workers, a waiting
//! run spends neither an attempt nor a receive, and a slot comes back when its attempt ends,
//! however it ends.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use serde_json::json;
use std::sync::Arc;
use sundial_app::groups::GroupsError;
use sundial_app::jobs::{EditTerms, JobsError};
use sundial_app::run_control::Completion;
use sundial_app::worker::Disposition;
use sundial_domain::group::GroupDocument;
use sundial_domain::job::Job;
use sundial_domain::ports::queue::RunInbox;
use sundial_domain::ports::targets::Answer;
use sundial_domain::run::{Outcome, RunId, RunState};
use sundial_domain::waiting::Wait;
use sundial_testkit::faults::{Faulty, Rule, Script, unavailable};
use sundial_testkit::world::{Hanging, OWNER, Settings, World, job};

const START: &str = "2030-01-01T12:00:00Z";

fn owner() -> String {
    OWNER.to_string()
}

fn yearly(name: &str, extra: serde_json::Value) -> serde_json::Value {
    job(name, json!({"cron": "0 0 1 1 *"}), extra)
}

async fn group(world: &World, name: &str, max_running: u32) {
    world.use_cases.groups.put(&owner(), name, &GroupDocument { max_running }).await.unwrap();
}

/// Takes the one visible message and starts its attempt with a worker whose call never returns
/// (a worker that dies mid-call, or a call still under way); the message stays held.
async fn start_and_hang(world: &World) -> (Arc<Hanging>, sundial_domain::ports::queue::Received) {
    let hanging = Arc::new(Hanging::default());
    let worker = world.worker_calling(hanging.clone());
    let message = world.queue.receive(10, 0).await.unwrap().remove(0);
    tokio::select! {
        _ = worker.handle(&message.body, "hanging") => panic!("a hanging call never returns"),
        () = hanging.called.notified() => {}
    }
    (hanging, message)
}

fn outcomes(world: &World, id: &RunId) -> Vec<Option<Outcome>> {
    let run = world.runs.all().into_iter().find(|r| r.id() == *id).unwrap();
    run.attempts.iter().map(|a| a.outcome).collect()
}

// ---------------------------------------------------------------------------------------------
// At-most-once
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn an_at_most_once_run_whose_attempt_timed_out_is_not_called_again() {
    let world = World::with(START, Settings::default().answer(Answer::TimedOut));
    let job =
        world.create(yearly("once", json!({"delivery": "at_most_once", "retry": {"max_attempts": 3}}))).await;
    let id = world.trigger(&job).await;
    let run = world.drive(&id, 120).await;
    assert_eq!(run.state, RunState::TimedOut);
    assert_eq!(world.caller.calls().len(), 1, "called exactly once with two attempts left");
    assert!(
        run.reason.as_deref().unwrap().starts_with("at_most_once: attempt 1 may have reached"),
        "{run:?}"
    );
}

#[tokio::test]
async fn an_at_least_once_run_whose_attempt_timed_out_is_called_again() {
    let world = World::with(START, Settings::default().answer(Answer::TimedOut));
    let job = world.create(yearly("again", json!({"retry": {"max_attempts": 3, "backoff_s": 1}}))).await;
    let id = world.trigger(&job).await;
    let run = world.drive(&id, 120).await;
    assert_eq!((run.state, world.caller.calls().len()), (RunState::TimedOut, 3));
}

#[tokio::test]
async fn a_lost_worker_of_an_at_most_once_run_causes_no_second_call() {
    let world = World::at(START);
    let job = world
        .create(yearly(
            "once",
            json!({"delivery": "at_most_once", "timeout_s": 5, "retry": {"max_attempts": 3}}),
        ))
        .await;
    let id = world.trigger(&job).await;
    let (hanging, message) = start_and_hang(&world).await;
    // The lease runs out; the watchdog ends the attempt as lost, and the run with it.
    world.pass(5 + 30 + 1);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().lost, 1);
    // The dead worker's message comes back too: it finds the run ended.
    assert_eq!(world.use_cases.worker.handle(&message.body, "w").await, Disposition::Delete);
    world.pass(120);
    world.deliver().await;
    let run = world.run(&id).await;
    assert_eq!(run.state, RunState::Failed);
    assert_eq!(outcomes(&world, &id), vec![Some(Outcome::Lost)]);
    assert_eq!((hanging.calls(), world.caller.calls().len()), (1, 0), "no second call");
}

#[tokio::test]
async fn an_at_most_once_request_that_never_left_is_tried_again() {
    let world = World::at(START);
    world.caller.push(Answer::NotSent { error: "connection refused".into() });
    let job = world
        .create(yearly(
            "once",
            json!({"delivery": "at_most_once", "retry": {"max_attempts": 3, "backoff_s": 1}}),
        ))
        .await;
    let id = world.trigger(&job).await;
    let run = world.drive(&id, 60).await;
    assert_eq!(run.state, RunState::Succeeded);
    assert_eq!(outcomes(&world, &id), vec![Some(Outcome::Failed), Some(Outcome::Succeeded)]);
    assert_eq!(world.caller.calls().len(), 2);
}

#[tokio::test]
async fn an_accepted_at_most_once_attempt_never_completed_ends_the_run() {
    let world = World::with(START, Settings::default().answer(Answer::Accepted { status: 202 }));
    let job =
        world.create(yearly("once", json!({"delivery": "at_most_once", "retry": {"max_attempts": 3}}))).await;
    let id = world.trigger(&job).await;
    world.deliver().await;
    world.pass(61);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().lost, 1);
    world.pass(60);
    world.deliver().await;
    assert_eq!(world.run(&id).await.state, RunState::Failed);
    assert_eq!(world.caller.calls().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Concurrency groups
// ---------------------------------------------------------------------------------------------

/// Jobs `name-0`… of group `etl`, each triggered once; their runs, in trigger order.
async fn triggered_in_group(world: &World, n: usize) -> (Vec<Job>, Vec<RunId>) {
    let mut jobs = Vec::new();
    let mut ids = Vec::new();
    for i in 0..n {
        let job = world.create(yearly(&format!("job-{i}"), json!({"group": "etl"}))).await;
        ids.push(world.trigger(&job).await);
        jobs.push(job);
        world.pass(1);
    }
    (jobs, ids)
}

#[tokio::test]
async fn a_full_group_makes_runs_wait_without_spending_attempts_and_frees_its_slot_on_completion() {
    let world = World::with(START, Settings::default().answer(Answer::Accepted { status: 202 }));
    group(&world, "etl", 1).await;
    let (_, ids) = triggered_in_group(&world, 3).await;
    world.deliver().await;
    let states: Vec<RunState> = futures_states(&world, &ids).await;
    assert_eq!(states, vec![RunState::Running, RunState::Queued, RunState::Queued]);
    let second = world.run(&ids[1]).await;
    assert_eq!(second.attempt, 0, "waiting spends no attempt");
    let (_, job) = world.use_cases.run_control.get(&owner(), &ids[2]).await.unwrap();
    assert_eq!(
        world.use_cases.run_control.wait(&world.run(&ids[2]).await, job.as_ref()).await,
        Some(Wait::Group { group: "etl".into(), running: 1, max_running: 1, ahead: 1 })
    );
    let view = world.use_cases.groups.get(&owner(), "etl").await.unwrap();
    assert_eq!((view.running, view.waiting, view.jobs.len()), (1, 2, 3));

    // The holder completes through its callback; the oldest waiter takes the slot.
    let token = world.caller.calls()[0].callback_token.clone();
    let done = Completion { succeeded: true, output: None, error: None, permanent: false };
    world.use_cases.run_control.complete(&ids[0], &token, done).await.unwrap();
    world.pass(10);
    world.deliver().await;
    let states = futures_states(&world, &ids).await;
    assert_eq!(states, vec![RunState::Succeeded, RunState::Running, RunState::Queued]);
    // Every message the waits left behind is a fresh one: none was received twice.
    let receives = world.queue.receive_counts();
    assert!(receives.iter().all(|&n| n <= 1), "receives {receives:?}");
}

/// A slot given back is handed to the oldest waiter in the same write, and that waiter is woken
/// at once: it starts at the very instant the slot frees, not on its next look seconds later.
#[tokio::test]
async fn a_freed_slot_starts_the_oldest_waiter_at_once() {
    let world = World::with(START, Settings::default().answer(Answer::Accepted { status: 202 }));
    group(&world, "etl", 1).await;
    let (_, ids) = triggered_in_group(&world, 3).await;
    world.deliver().await;
    assert_eq!(futures_states(&world, &ids).await, [RunState::Running, RunState::Queued, RunState::Queued]);
    let token = world.caller.calls()[0].callback_token.clone();
    let done = Completion { succeeded: true, output: None, error: None, permanent: false };
    world.use_cases.run_control.complete(&ids[0], &token, done).await.unwrap();
    world.deliver().await;
    assert_eq!(
        futures_states(&world, &ids).await,
        [RunState::Succeeded, RunState::Running, RunState::Queued],
        "the oldest waiter started as the slot freed"
    );
    let view = world.use_cases.groups.get(&owner(), "etl").await.unwrap();
    assert_eq!((view.running, view.waiting), (1, 1));
    let receives = world.queue.receive_counts();
    assert!(receives.iter().all(|&n| n <= 1), "receives {receives:?}");
}

/// A throttled group makes its runs wait as a full one does: the message is replaced (no
/// receive spent, so throttling never walks a run to the dead-letter queue), nothing starts.
#[tokio::test]
async fn a_throttled_admission_waits_without_spending_a_receive() {
    let world = World::at(START);
    group(&world, "etl", 1).await;
    let (_, ids) = triggered_in_group(&world, 1).await;
    // Every call of the group store is refused, as DynamoDB refuses a hot item's.
    let script = Script::new();
    script.add(Rule::every("GroupStore::*").refuse(unavailable("ProvisionedThroughputExceededException")));
    let throttled = Faulty::new(world.ports.groups.clone(), &script);
    let ports = sundial_app::ports::Ports { groups: throttled, ..world.ports.clone() };
    let worker = world.rewired(&ports, |_| {}).worker;
    let message = world.queue.receive(1, 0).await.unwrap().remove(0);
    let disposition = worker.handle(&message.body, sundial_testkit::world::WORKER).await;
    assert!(matches!(disposition, Disposition::Replace(_)), "{disposition:?}");
    let run = world.run(&ids[0]).await;
    assert_eq!((run.state, run.attempt), (RunState::Queued, 0));
    assert!(world.caller.calls().is_empty());
}

async fn futures_states(world: &World, ids: &[RunId]) -> Vec<RunState> {
    let mut states = Vec::new();
    for id in ids {
        states.push(world.run(id).await.state);
    }
    states
}

#[tokio::test]
async fn a_slot_held_by_a_lost_worker_is_reclaimed_with_its_lease() {
    let world = World::at(START);
    group(&world, "etl", 1).await;
    let first = world.create(yearly("first", json!({"group": "etl", "timeout_s": 5}))).await;
    let first_run = world.trigger(&first).await;
    let (_hanging, _message) = start_and_hang(&world).await;
    let second = world.create(yearly("second", json!({"group": "etl"}))).await;
    let second_run = world.trigger(&second).await;
    world.deliver().await;
    assert_eq!(world.run(&second_run).await.state, RunState::Queued, "the group is full");
    // Past the lease (5 s + the 30 s margin), and the clock skew allowed (60 s), the slot is
    // free again, before any watchdog.
    world.pass(35);
    world.deliver().await;
    assert_eq!(world.run(&second_run).await.state, RunState::Queued, "not within the clock skew");
    world.pass(61);
    world.deliver().await;
    assert_eq!(world.run(&second_run).await.state, RunState::Succeeded);
    let first = world.run(&first_run).await;
    assert_eq!(
        first.attempts[0].outcome,
        Some(Outcome::Lost),
        "its returning message found the lease expired"
    );
}

#[tokio::test]
async fn a_job_names_only_an_existing_group_and_a_group_is_deleted_only_when_no_job_names_it() {
    let world = World::at(START);
    let missing = serde_json::from_value(yearly("orphan", json!({"group": "nope"}))).unwrap();
    match world.use_cases.jobs.create(&owner(), missing).await.unwrap_err() {
        JobsError::Invalid(e) => assert_eq!(e.field, "group"),
        other => panic!("{other:?}"),
    }
    assert!(world.job_store.all().is_empty(), "nothing written");
    group(&world, "etl", 2).await;
    let job = world.create(yearly("member", json!({"group": "etl"}))).await;
    match world.use_cases.groups.delete(&owner(), "etl").await.unwrap_err() {
        GroupsError::InUse(names) => assert_eq!(names, vec!["member".to_string()]),
        other => panic!("{other:?}"),
    }
    // Moving the job to another group frees this one.
    group(&world, "other", 1).await;
    world
        .use_cases
        .jobs
        .patch(&owner(), &job.id, &json!({"group": "other"}), EditTerms::default())
        .await
        .unwrap();
    world.use_cases.groups.delete(&owner(), "etl").await.unwrap();
    assert!(matches!(world.use_cases.groups.get(&owner(), "etl").await, Err(GroupsError::NotFound)));
    world.use_cases.jobs.delete(&owner(), &job.id).await.unwrap();
    world.use_cases.groups.delete(&owner(), "other").await.unwrap();
}

#[tokio::test]
async fn group_limits_are_checked() {
    let world = World::at(START);
    for (name, max) in [("etl", 0), ("etl", 1_001), ("bad name", 1)] {
        match world
            .use_cases
            .groups
            .put(&owner(), name, &GroupDocument { max_running: max })
            .await
            .unwrap_err()
        {
            GroupsError::Invalid(e) => assert!(["max_running", "name"].contains(&e.field.as_str()), "{e:?}"),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn cancelling_a_run_mid_call_keeps_its_slot_until_the_call_is_over() {
    let world = World::at(START);
    group(&world, "etl", 1).await;
    let first = world.create(yearly("first", json!({"group": "etl", "timeout_s": 5}))).await;
    let first_run = world.trigger(&first).await;
    let (_hanging, _message) = start_and_hang(&world).await;
    // Cancelled while its synchronous call still runs (a worker does not abort it).
    world.use_cases.run_control.cancel(&owner(), &first_run).await.unwrap();
    let second = world.create(yearly("second", json!({"group": "etl"}))).await;
    let second_run = world.trigger(&second).await;
    world.deliver().await;
    assert_eq!(
        world.run(&second_run).await.state,
        RunState::Queued,
        "the cancelled run's call may still run"
    );
    // Once that call has certainly ended (5 s + 30 s, and the clock skew), the slot is free.
    world.pass(5 + 30 + 61);
    world.deliver().await;
    assert_eq!(world.run(&second_run).await.state, RunState::Succeeded);
}

#[tokio::test]
async fn a_run_waiting_for_its_group_is_not_sent_again_by_the_watchdog() {
    let world = World::with(START, Settings::default().answer(Answer::Accepted { status: 202 }));
    group(&world, "etl", 1).await;
    let mut ids = Vec::new();
    for name in ["holder", "waiter"] {
        let job = world.create(yearly(name, json!({"group": "etl", "timeout_s": 3600}))).await;
        ids.push(world.trigger(&job).await);
        world.pass(1);
    }
    world.deliver().await;
    assert_eq!(world.run(&ids[1]).await.state, RunState::Queued);
    // Ten minutes of waiting (the holder's heartbeats keep its lease), a look every few seconds.
    let token = world.caller.calls()[0].callback_token.clone();
    let mut dispatched = 0;
    for _ in 0..120 {
        world.pass(5);
        world.use_cases.run_control.heartbeat(&ids[0], &token).await.unwrap();
        world.deliver().await;
        dispatched += world.use_cases.watchdog.run().await.unwrap().dispatched;
    }
    assert_eq!(world.run(&ids[1]).await.state, RunState::Queued);
    assert_eq!(dispatched, 0, "the waiting run's message is alive: no second one");
    assert_eq!(world.queue.depth(), 1, "one message looks for the waiting run");
}
