//! Scenarios of the tick, the worker and the watchdog, over the ports in memory on a manual clock
//! (`sundial_testkit::world::World`): the emulator suites' scenarios (`tests/tests/{tick,worker,watchdog}.rs`
//! and some of `recovery.rs` in `sundial-tests`) without an emulator and without waiting. Time
//! moves only when a scenario moves it; each asserts what users and operators see: run states,
//! attempts, the calls targets received and the events published.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use chrono::Duration;
use serde_json::json;
use std::sync::Arc;
use sundial_app::claim::ClaimSettings;
use sundial_app::jobs::EditTerms;
use sundial_app::ports::Ports;
use sundial_app::run_control::{CallbackError, Completion};
use sundial_app::tick::TickSettings;
use sundial_app::watchdog::WatchdogReport;
use sundial_app::worker::Disposition;
use sundial_domain::group::GroupDocument;
use sundial_domain::job::{EventKind, Job, PauseNote};
use sundial_domain::ports::queue::{QueueError, RunInbox, RunQueue};
use sundial_domain::ports::store::{StoreError, TickStateStore};
use sundial_domain::ports::targets::Answer;
use sundial_domain::run::{Outcome, Run, RunKey, RunMessage, RunState};
use sundial_domain::run_queue::Dispatch;
use sundial_domain::watchdog::rules::WatchdogSettings;
use sundial_memory::bus::Destination;
use sundial_testkit::faults::{Faulty, Rule, Script, at_once};
use sundial_testkit::world::{Hanging, OWNER, Settings, WORKER, World, instants, job, t};

const START: &str = "2030-01-01T12:00:00Z";

fn owner() -> String {
    OWNER.to_string()
}

fn yearly(name: &str, extra: serde_json::Value) -> serde_json::Value {
    job(name, json!({"cron": "0 0 1 1 *"}), extra)
}

fn failed(status: u16) -> Answer {
    Answer::Failed { retryable: true, status: Some(status), error: format!("HTTP {status}") }
}

fn accepted() -> Answer {
    Answer::Accepted { status: 202 }
}

/// Creates `n` one-time jobs due at `at`, with the fields of `extra`.
async fn one_time_jobs_with(world: &World, n: usize, at: &str, extra: serde_json::Value) -> Vec<Job> {
    let mut jobs = Vec::with_capacity(n);
    for i in 0..n {
        jobs.push(world.create(job(&format!("job-{i:03}"), json!({"at": at}), extra.clone())).await);
    }
    jobs
}

/// Creates `n` one-time jobs due at `at`.
async fn one_time_jobs(world: &World, n: usize, at: &str) -> Vec<Job> {
    one_time_jobs_with(world, n, at, json!({})).await
}

/// Takes the one visible message off the queue and starts its attempt with a worker that dies
/// in the middle of the call; the message stays held as a dead consumer leaves it.
async fn start_and_die(world: &World) -> Arc<Hanging> {
    let hanging = Arc::new(Hanging::default());
    let doomed = world.worker_calling(hanging.clone());
    let mut received = world.queue.receive(10, 0).await.unwrap();
    assert_eq!(received.len(), 1, "one message to take");
    let message = received.remove(0);
    tokio::select! {
        _ = doomed.handle(&message.body, "doomed") => panic!("a hanging call never returns"),
        () = hanging.called.notified() => {}
    }
    assert_eq!(hanging.calls(), 1);
    hanging
}

fn attempts_of(run: &sundial_domain::run::Run) -> Vec<(u32, String, Option<Outcome>)> {
    run.attempts.iter().map(|a| (a.n, a.worker.clone(), a.outcome)).collect()
}

// The tick's scenarios written once for both harnesses (`sundial_testkit::scenarios::tick`).
sundial_testkit::tick_scenarios!(World);
sundial_testkit::worker_scenarios!(World);
sundial_testkit::watchdog_scenarios!(World);

// ---------------------------------------------------------------------------------------------
// The tick
// ---------------------------------------------------------------------------------------------

/// The tick's time budget is read on the clock port, so that a virtual clock runs it out too:
/// on a manual clock that only the aligned sends' waits move (from half past a second to just
/// after the next), a pass with a budget of half a second stops unfinished once the first send
/// has waited it out, and the next passes continue the burst without loss or duplicate.
#[tokio::test]
async fn the_budget_is_read_on_the_clock() {
    let world = World::with("2030-01-01T11:50:00Z", Settings::default().pauses_move_clock());
    let jobs = one_time_jobs(&world, 120, "2030-01-01T12:00:30Z").await;
    world.set("2030-01-01T12:00:00.500Z");
    let tick = world
        .rewired(&world.ports, |s| {
            s.tick = TickSettings {
                batch_jobs: 25,
                budget: std::time::Duration::from_millis(500),
                ..TickSettings::default()
            }
        })
        .tick;
    let first = tick.run().await.unwrap();
    assert!(first.unfinished, "the waits ran the budget out: {first:?}");
    assert!(first.claims.claimed < 120, "{first:?}");
    let (mut claimed, mut passes) = (first.claims.claimed, 1);
    while claimed < 120 && passes < 20 {
        claimed += tick.run().await.unwrap().claims.claimed;
        passes += 1;
    }
    assert_eq!(claimed, 120, "after {passes} passes");
    for job in &jobs {
        assert_eq!(instants(&world.runs_of(&job.id)), ["2030-01-01T12:00:30Z"]);
    }
}

/// The extra messages ticks racing over one burst send
/// (`sundial_testkit::scenarios::tick::racing_ticks_claim_each_instant_once`) start nothing twice:
/// each run's target is called once, and every run succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extra_messages_of_racing_ticks_start_nothing_twice() {
    let world = World::at("2030-01-01T11:50:00Z");
    one_time_jobs(&world, 200, "2030-01-01T12:00:30Z").await;
    world.set(START);
    let ticks: Vec<_> = (0..3)
        .map(|_| {
            let tick = world.use_cases.tick.clone();
            tokio::spawn(async move { tick.run().await })
        })
        .collect();
    let mut dispatched = 0;
    for tick in ticks {
        dispatched += tick.await.unwrap().unwrap().claims.dispatched;
    }
    assert!(dispatched >= 200, "{dispatched}");
    world.pass(30);
    world.deliver().await;
    assert_eq!(world.caller.calls().len(), 200, "each run's target called once");
    assert!(world.runs.all().iter().all(|r| r.state == RunState::Succeeded));
}

/// Two claimers that read the same due jobs before either wrote: the second finds every run
/// there, sends it again (its writer may have died before sending) and does not advance the
/// jobs a second time; the target is still called once per run.
#[tokio::test]
async fn claimers_racing_from_the_same_read_create_one_run_per_instant() {
    let world = World::at("2030-01-01T11:50:00Z");
    let jobs = one_time_jobs(&world, 20, "2030-01-01T12:00:30Z").await;
    world.set(START);
    let now = world.now();
    let first = world.use_cases.claimer.claim(jobs.clone(), None, now).await;
    let second = world.use_cases.claimer.claim(jobs, None, now).await;
    assert_eq!((first.claimed, first.dispatched, first.advanced), (20, 20, 20), "{first:?}");
    assert_eq!(
        (second.claimed, second.duplicates, second.resent, second.advance_conflicts),
        (0, 20, 20, 20),
        "{second:?}"
    );
    assert_eq!(world.runs.all().len(), 20);
    assert_eq!(world.queue.depth(), 40);

    world.pass(30);
    assert_eq!(world.deliver().await, 40);
    assert_eq!(world.caller.calls().len(), 20, "the start fence drops the copies");
}

/// SQS delays are whole seconds, counted from the send: a tick that sends at 600 ms into a
/// second makes a run due on a whole second visible 600 ms late. The tick sends just after the
/// next whole second instead, so the burst is visible within 100 ms of its instant, and never
/// before it; the API, which answers a person, does not wait to send.
#[tokio::test]
async fn the_tick_sends_a_burst_just_after_a_whole_second() {
    let world = World::with("2030-01-01T11:50:00Z", Settings::default().pauses_move_clock());
    one_time_jobs(&world, 20, "2030-01-01T12:02:00Z").await;
    world.set("2030-01-01T12:01:00.600Z");
    let report = world.use_cases.tick.run().await.unwrap();
    assert_eq!(report.claims.dispatched, 20);

    world.set("2030-01-01T12:01:59.999Z");
    assert!(world.queue.receive(10, 0).await.unwrap().is_empty(), "visible before its instant");
    world.set("2030-01-01T12:02:00.050Z");
    let mut received = 0;
    for _ in 0..2 {
        received += world.queue.receive(10, 0).await.unwrap().len();
    }
    assert_eq!(received, 20, "the burst is visible 50 ms after its instant");

    // A job created through the API at 600 ms into a second, due before the next tick, is sent
    // by the request itself, without a pause.
    world.set("2030-01-01T12:03:00.600Z");
    world.create(job("soon", json!({"at": "2030-01-01T12:03:30Z"}), json!({}))).await;
    assert_eq!(world.now(), t("2030-01-01T12:03:00.600Z"), "the API paused");
    assert_eq!(world.queue.depth(), 21);
}

/// A tick catching up on a gap sends without waiting for a whole second: the gap's instants are
/// late already, and a wait for each of its minutes would hold the catch-up back.
#[tokio::test]
async fn a_tick_catching_up_a_gap_does_not_wait_for_a_second() {
    let world = World::with("2030-01-01T11:00:00Z", Settings::default().pauses_move_clock());
    world.create(job("every-minute", json!({"cron": "* * * * *"}), json!({"catchup": "all"}))).await;
    world.set("2030-01-01T11:00:30Z");
    world.use_cases.tick.run().await.unwrap();
    // An hour down: the job's next instant is in the gap, and its claim reaches past now.
    world.set("2030-01-01T12:00:00.600Z");
    let report = world.use_cases.tick.run().await.unwrap();
    assert!(report.claims.claimed > 50, "{report:?}");
    assert_eq!(world.now(), t("2030-01-01T12:00:00.600Z"), "the tick waited in a gap");
}

/// An aligning claimer sends the runs due now at once and the runs due later after its wait for
/// the next whole second, and answers for each run in its own place.
#[tokio::test]
async fn an_aligned_send_answers_for_each_run_in_its_place() {
    let world = World::with("2030-01-01T11:00:00Z", Settings::default().pauses_move_clock());
    let mut jobs = Vec::new();
    for name in ["now-sent", "later-refused", "now-refused", "later-sent"] {
        jobs.push(world.create(job(name, json!({"at": "2030-01-01T13:00:00Z"}), json!({}))).await);
    }
    world.set("2030-01-01T12:00:00.600Z");
    let now = world.now();
    let refused = vec![jobs[1].id.to_string(), jobs[2].id.to_string()];
    // The queue refuses the messages of two jobs and takes the others.
    let script = Script::new();
    script
        .add(Rule::every("RunQueue::send").for_jobs(&refused).refuse(QueueError::Refused("refused".into())));
    let ports = Ports { queue: Faulty::new(world.ports.queue.clone(), &script), ..world.ports.clone() };
    let claimer = world.rewired(&ports, |_| {}).claimer.aligning_sends();
    let later = t("2030-01-01T12:01:00Z");
    let runs: Vec<Run> = jobs
        .iter()
        .zip([now, later, now, later])
        .map(|(job, due)| claimer.new_run(job, RunKey::scheduled(due), due, now))
        .collect();

    let results = claimer.send(&runs).await;
    let sent: Vec<bool> = results.iter().map(Result::is_ok).collect();
    assert_eq!(sent, [true, false, false, true], "{results:?}");
    assert_eq!(world.now(), t("2030-01-01T12:00:01.020Z"), "the runs due later waited for the second");
    let visible: Vec<String> =
        world.queue.receive(10, 0).await.unwrap().into_iter().map(|m| m.body).collect();
    assert_eq!(visible.len(), 1, "{visible:?}");
    assert!(visible[0].contains(&jobs[0].id.to_string()), "the run due now went at once: {visible:?}");
    world.set("2030-01-01T12:01:00.020Z");
    let visible = world.queue.receive(10, 0).await.unwrap();
    assert_eq!(visible.len(), 1);
    assert!(visible[0].body.contains(&jobs[3].id.to_string()));
}

/// A throttled re-read of the look-back a grown shard count asks for does not keep the tick
/// from the live minutes (simulator seeds 184 and 233: every pass stopped at the first throttled
/// old minute, and instants were lost); the look-back is done again until one pass reads all of
/// it.
#[tokio::test]
async fn a_throttled_look_back_does_not_hold_the_live_minutes() {
    let world = World::at("2030-01-01T11:50:00Z");
    let jobs = one_time_jobs(&world, 3, "2030-01-01T12:00:30Z").await;
    world.set(START);
    // A fresh deployment looks back 30 minutes; its minutes 11:40 to 11:49 are throttled.
    world.job_store.fail_due_queries(Some("2030-01-01T11:4"));
    let first = world.use_cases.tick.run().await.unwrap();
    assert_eq!(first.claims.claimed, 3, "{first:?}");
    assert_eq!(world.tick_state.get().await.unwrap().looked_back, None, "the look-back is owed");

    world.job_store.fail_due_queries(None);
    world.set("2030-01-01T12:01:00Z");
    let second = world.use_cases.tick.run().await.unwrap();
    assert_eq!(second.claims.claimed, 0);
    assert!(world.tick_state.get().await.unwrap().looked_back.is_some(), "looked back once through");
    for job in &jobs {
        assert_eq!(instants(&world.runs_of(&job.id)), ["2030-01-01T12:00:30Z"]);
    }
}

/// A job edited from `allow` to `forbid` while a run of it calls its target: that run never
/// took the fence, and the edit removed any fence left from before, so the next run's take
/// reads the job's active runs and finds it: the next run is SKIPPED, not started beside it.
#[tokio::test]
async fn a_run_from_before_forbid_still_holds_the_fence() {
    let settings = Settings::default().claim_ahead_s(60).heartbeat_window_s(3600);
    let world = World::with("2030-01-01T12:00:10Z", settings);
    let job = world.create(job("edited", json!({"cron": "* * * * *"}), json!({}))).await;
    world.caller.push(accepted());
    world.set("2030-01-01T12:01:00Z");
    assert_eq!(world.deliver().await, 1);
    assert_eq!(world.runs_of(&job.id)[0].state, RunState::Running);
    world
        .use_cases
        .jobs
        .patch(&owner(), &job.id, &json!({"concurrency": "forbid"}), EditTerms::default())
        .await
        .unwrap();
    world.set("2030-01-01T12:01:30Z");
    world.use_cases.tick.run().await.unwrap();
    world.set("2030-01-01T12:02:00Z");
    world.deliver().await;
    let runs = world.runs_of(&job.id);
    assert_eq!(runs[0].state, RunState::Running);
    assert_eq!(runs[1].state, RunState::Skipped, "{:?}", runs[1].reason);
    assert!(runs[1].reason.as_deref().unwrap().contains(&runs[0].id().to_string()));
    assert_eq!(world.caller.calls().len(), 1);
}

/// The worker times an attempt's start (its lease, its late start) from the start write, not
/// from the message's read; an admission by the group that ran past its bound (here the group's
/// read took 15 s) starts nothing: its slot is given back, the message is replaced and the run
/// looked at again, since the slot, timed from the admission, could end before the call.
#[tokio::test]
async fn a_start_is_timed_from_its_write_and_a_long_admission_starts_nothing() {
    let world = World::at(START);
    world.use_cases.groups.put(&owner(), "etl", &GroupDocument { max_running: 1 }).await.unwrap();
    let job = world.create(yearly("slow-start", json!({"group": "etl", "timeout_s": 60}))).await;
    // The group's reads take `delay` of the clock: an admission slowed by storage.
    let delay = Arc::new(std::sync::Mutex::new(Duration::seconds(15)));
    let (clock, slowed) = (world.clock.clone(), delay.clone());
    let script = Script::new();
    script
        .add(Rule::every("GroupStore::get").before(at_once(move || clock.advance(*slowed.lock().unwrap()))));
    let slow = Faulty::new(world.ports.groups.clone(), &script);
    let worker = world.rewired(&Ports { groups: slow, ..world.ports.clone() }, |_| {}).worker;
    let id = world.trigger(&job).await;
    let message = world.queue.receive(1, 0).await.unwrap().remove(0);

    let disposition = worker.handle(&message.body, WORKER).await;
    assert!(matches!(&disposition, Disposition::Replace(d) if d.delay_s == 0), "{disposition:?}");
    let run = world.run(&id).await;
    assert_eq!((run.state, run.attempt), (RunState::Queued, 0), "nothing started");
    assert!(world.caller.calls().is_empty());
    assert_eq!(
        world.use_cases.groups.get(&owner(), "etl").await.unwrap().running,
        0,
        "the slot is given back"
    );

    *delay.lock().unwrap() = Duration::seconds(5);
    let read_at = world.now();
    assert_eq!(worker.handle(&message.body, WORKER).await, Disposition::Delete);
    let run = world.run(&id).await;
    assert_eq!(run.state, RunState::Succeeded);
    assert!(
        run.attempts[0].started_at >= read_at + Duration::seconds(5),
        "the start is timed from its write, after the slow admission: {} vs read at {read_at}",
        run.attempts[0].started_at
    );
}

// ---------------------------------------------------------------------------------------------
// The worker
// ---------------------------------------------------------------------------------------------

/// A message naming no run goes to the dead-letter queue with its reason and redrive brings it
/// back; a run whose message was dead-lettered is recorded FAILED, without a call.
#[tokio::test]
async fn malformed_messages_are_dead_lettered_and_dead_letters_fail_their_run() {
    let world = World::at(START);
    let bad = RunMessage {
        job_id: "not-a-job".into(),
        run_key: "not-a-key".into(),
        attempt: 1,
        look: None,
        tag: None,
    };
    let sent = world.queue.send(&[Dispatch { message: bad, delay_s: 0, tenant: "t".into() }]).await;
    assert!(sent.iter().all(Result::is_ok));
    assert_eq!(world.deliver().await, 1);
    assert_eq!(world.queue.depth(), 0);
    let dead = world.queue.dead_letters();
    assert_eq!(dead.len(), 1);
    assert!(dead[0].reason.as_deref().unwrap().contains("no valid run"), "{dead:?}");
    assert_eq!(world.queue.redrive().await.unwrap(), 1);
    assert_eq!(world.queue.depth(), 1);

    let job = world.create(yearly("dead", json!({}))).await;
    let run_id = world.trigger(&job).await;
    let body = RunMessage {
        job_id: job.id.to_string(),
        run_key: run_id.key.encode(),
        attempt: 1,
        look: None,
        tag: None,
    };
    let body = serde_json::to_string(&body).unwrap();
    let done = world.use_cases.worker.dead_lettered(&body, "received 16 times").await.unwrap();
    assert!(done.contains("FAILED"), "{done}");
    let metrics = world.ports.meter.prometheus();
    assert!(metrics.contains("sundial_runs_dead_lettered_total{function=\"worker\"} 1"), "{metrics}");
    let failed = world.run(&run_id).await;
    assert_eq!(failed.state, RunState::Failed);
    assert!(failed.reason.unwrap().contains("received 16 times"));
    assert!(world.caller.calls().is_empty());
    assert_eq!(world.told_about(&run_id), ["failed"]);
    // Its own message, delivered late, starts nothing.
    world.deliver().await;
    assert!(world.caller.calls().is_empty());
}

/// Work a target started (a Step Functions execution, an ECS task) is followed by one chain of
/// looks. A look delivered three times (SQS delivers at least once) is recorded once; each copy
/// finds it recorded under its own tag and sends its successor again (any of them may be the
/// message whose successor was lost), and the successors meet at the next look: one is recorded
/// and the others end. A look whose successor could not be sent comes back and sends it. The
/// attempt ends as the work ended, with its output, and nothing is stopped.
#[tokio::test]
async fn started_work_is_followed_by_one_chain_of_looks_to_its_end() {
    use sundial_domain::ports::targets::Progress;
    use sundial_domain::run::transition::Ending;
    let handle = "arn:aws:states:us-east-1:000000000000:execution:m:run-1";
    let world = World::with(START, Settings::default().answer(Answer::Started { handle: handle.into() }));
    let job = world.create(yearly("followed", json!({"retry": {"max_attempts": 1}, "timeout_s": 600}))).await;
    let run_id = world.trigger(&job).await;
    assert_eq!(world.deliver().await, 1);
    let run = world.run(&run_id).await;
    assert_eq!(run.state, RunState::Running);
    let attempt = &run.attempts[0];
    assert_eq!((attempt.handle.as_deref(), attempt.looks), (Some(handle), 1));
    let bodies = world.queue.bodies();
    assert_eq!(bodies.len(), 1, "the first look, and only it");
    let look: RunMessage = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!((look.attempt, look.look), (1, Some(1)));
    // Two more copies of the same look.
    let copy = Dispatch { message: look.clone(), delay_s: 2, tenant: OWNER.into() };
    world.queue.send(&[copy.clone(), copy]).await;
    world.pass(2);
    assert_eq!(world.deliver().await, 3);
    assert_eq!(world.caller.looks().len(), 1, "one look described the work");
    assert_eq!(world.run(&run_id).await.attempts[0].looks, 2, "and was recorded");
    assert_eq!(world.queue.depth(), 3, "each copy sent a successor");
    world.pass(3);
    assert_eq!(world.deliver().await, 3);
    assert_eq!((world.caller.looks().len(), world.run(&run_id).await.attempts[0].looks), (2, 3));
    assert_eq!(world.queue.depth(), 1, "the successors met: one chain goes on");
    // The next look is recorded but its successor cannot be sent: the look comes back later
    // and sends it.
    world.pass(5);
    world.queue.fail_sends(Some("the queue is down"));
    world.deliver().await;
    assert_eq!(world.run(&run_id).await.attempts[0].looks, 4);
    world.queue.fail_sends(None);
    let done = loop {
        world.pass(1);
        world.deliver().await;
        if world.run(&run_id).await.attempts[0].looks == 5 {
            break world.run(&run_id).await;
        }
        assert!(world.now() < t(START) + Duration::seconds(120), "the chain died");
    };
    assert_eq!(done.state, RunState::Running);
    // The work succeeds at the next look.
    world.caller.push_progress(Progress::Ended(Ending {
        output: Some("{\"rows\":42}".into()),
        ..Ending::new(Outcome::Succeeded)
    }));
    let done = world.drive(&run_id, 120).await;
    assert_eq!(done.state, RunState::Succeeded);
    assert_eq!(done.attempts[0].output.as_deref(), Some("{\"rows\":42}"));
    assert!(world.caller.stops().is_empty());
    world.pass(120);
    world.deliver().await;
    assert_eq!(world.queue.depth(), 0, "the chain ended with the attempt");
}

/// Work still running at the attempt's deadline is stopped by the look due then, and the run
/// times out (its first look's message sent by the start's own message, back after the send
/// failed); a run cancelled while its work runs has the work stopped at once, by a look the
/// cancel sends, which records that the work's end is known.
#[tokio::test]
async fn started_work_is_stopped_at_the_timeout_and_by_a_cancel() {
    let handle = "arn:aws:ecs:us-east-1:000000000000:task/c/0123";
    let world = World::with(START, Settings::default().answer(Answer::Started { handle: handle.into() }));
    let slow = world.create(yearly("slow", json!({"retry": {"max_attempts": 1}, "timeout_s": 30}))).await;
    let run_id = world.trigger(&slow).await;
    // The start is recorded with its first look, whose message cannot be sent: the start's own
    // message comes back and sends it.
    world.queue.fail_sends(Some("the queue is down"));
    world.deliver().await;
    assert_eq!(world.run(&run_id).await.attempts[0].looks, 1);
    world.queue.fail_sends(None);
    let done = world.drive(&run_id, 60).await;
    assert_eq!(done.state, RunState::TimedOut);
    assert!(done.attempts[0].error.as_deref().unwrap().contains("the work was stopped"));
    assert_eq!(done.attempts[0].finished_at, Some(done.attempts[0].started_at + Duration::seconds(30)));
    assert_eq!(world.caller.stops().len(), 1);
    let looks = world.caller.looks().len();
    assert_eq!(
        looks, 1,
        "the start's message back after 10 s, then one look at 20 s; the deadline's stops it"
    );

    let cancelled = world.create(yearly("cancelled", json!({"timeout_s": 600}))).await;
    let run_id = world.trigger(&cancelled).await;
    world.deliver().await;
    world.use_cases.run_control.cancel(&owner(), &run_id).await.unwrap();
    assert_eq!(world.run(&run_id).await.state, RunState::Cancelled);
    // The cancel sends a look at once, which finds the attempt closed and stops its work.
    world.deliver().await;
    let stops = world.caller.stops();
    assert_eq!(stops.len(), 2);
    assert_eq!(stops[1].0, handle);
    assert_eq!(world.run(&run_id).await.call_ended, Some(1), "the next run of the job need not wait");
    // The chain's own next look does the same, harmlessly, and ends there.
    world.pass(2);
    world.deliver().await;
    assert_eq!(world.queue.depth(), 0, "the chain ends there");
}

// ---------------------------------------------------------------------------------------------
// The watchdog
// ---------------------------------------------------------------------------------------------

/// A 202 attempt kept alive by heartbeats every second (window 2 s) is still timed out by the
/// watchdog at its 8 s timeout: heartbeats never extend a lease past it, and once the attempt
/// has ended its heartbeats are refused.
#[tokio::test]
async fn heartbeats_never_keep_an_attempt_past_its_timeout() {
    let settings = Settings::default().heartbeat_window_s(2).answer(accepted());
    let world = World::with(START, settings);
    let job = world.create(yearly("beating", json!({"retry": {"max_attempts": 1}, "timeout_s": 8}))).await;
    let run_id = world.trigger(&job).await;
    assert_eq!(world.deliver().await, 1);
    let token = world.caller.calls()[0].callback_token.clone();
    let deadline = t(START) + Duration::seconds(8);

    let mut timed_out_at = None;
    for second in 1..=12 {
        world.pass(1);
        match world.use_cases.run_control.heartbeat(&run_id, &token).await {
            Ok(run) => assert!(run.lease_until.unwrap() <= deadline, "{:?}", run.lease_until),
            Err(e) => {
                assert!(timed_out_at.is_some(), "second {second}: {e}");
                assert_eq!(e, CallbackError::NotOpen(RunState::TimedOut));
            }
        }
        let report = world.use_cases.watchdog.run().await.unwrap();
        assert_eq!(report.lost, 0);
        if report.timed_out > 0 {
            assert_eq!((report.timed_out, timed_out_at), (1, None), "timed out once");
            timed_out_at = Some(world.now());
        }
    }
    assert_eq!(timed_out_at, Some(deadline));
    let ended = world.run(&run_id).await;
    assert_eq!(ended.state, RunState::TimedOut);
    assert_eq!(ended.attempts[0].outcome, Some(Outcome::TimedOut));
    assert_eq!(world.told_about(&run_id), ["timed_out"]);
}

/// A worker that died mid-attempt: its message, back after the hold, is dropped while the lease
/// lives; the watchdog ends the attempt `lost` once the lease expires and dispatches the next,
/// which completes; both attempts are in the run's record.
#[tokio::test]
async fn a_lost_worker_is_rescued_by_the_watchdog() {
    let world = World::at(START);
    let retry = json!({"max_attempts": 3, "backoff_s": 1, "max_backoff_s": 1});
    let job = world.create(yearly("job", json!({"timeout_s": 120, "retry": retry}))).await;
    let run_id = world.trigger(&job).await;
    start_and_die(&world).await;
    let held = world.run(&run_id).await;
    assert_eq!(held.lease_until, Some(t(START) + Duration::seconds(150)));

    world.pass(60);
    assert_eq!(world.deliver().await, 1, "the message is back after the dead consumer's hold");
    assert_eq!(world.run(&run_id).await, held, "a live lease is not the message's to end");
    assert_eq!(world.queue.depth(), 0);
    world.pass(89);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().lost, 0, "the lease still holds");
    world.pass(2);
    let report = world.use_cases.watchdog.run().await.unwrap();
    assert_eq!((report.lost, report.dispatched), (1, 1));
    let done = world.drive(&run_id, 30).await;
    assert_eq!(done.state, RunState::Succeeded);
    assert_eq!(
        attempts_of(&done),
        [(1, "doomed".into(), Some(Outcome::Lost)), (2, WORKER.into(), Some(Outcome::Succeeded))]
    );
    assert_eq!(world.caller.calls().len(), 1);
}

/// An event the bus would not take (the shared topic failing) stays recorded and unsent, the run
/// in the in-flight index; the watchdog takes it over after the grace period, fails while the
/// bus does, and publishes it once when it is back; then the run leaves the index.
#[tokio::test]
async fn events_left_unsent_by_a_bus_failure_are_published_once() {
    let world = World::with(START, Settings::default().answer(failed(500)));
    let job = world.create(yearly("job", json!({"retry": {"max_attempts": 1}}))).await;
    world.bus.fail(Destination::Shared, true);
    let run_id = world.trigger(&job).await;
    assert_eq!(world.deliver().await, 1);
    let ended = world.run(&run_id).await;
    assert_eq!(ended.state, RunState::Failed);
    let events: Vec<_> = ended.events.iter().map(|e| (e.kind.told(), e.sent)).collect();
    assert_eq!(events, [(Some(EventKind::Failed), false)]);
    assert!(world.bus.published().is_empty());
    assert!(world.runs.is_in_flight(&run_id.job_id, &run_id.key), "kept until its events are out");

    world.pass(61);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().republished, 0, "the bus still fails");
    assert!(world.bus.published().is_empty());
    world.bus.fail(Destination::Shared, false);
    world.pass(30);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().republished, 0, "a take-over has its grace too");
    world.pass(31);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().republished, 1);
    for _ in 0..3 {
        world.pass(60);
        assert_eq!(
            world.use_cases.watchdog.run().await.unwrap(),
            WatchdogReport::default(),
            "nothing left to do"
        );
    }
    let events: Vec<_> = world.run(&run_id).await.events.iter().map(|e| (e.kind.told(), e.sent)).collect();
    assert_eq!(events, [(Some(EventKind::Failed), true)]);
    assert!(!world.runs.is_in_flight(&run_id.job_id, &run_id.key));
    assert_eq!(world.told_about(&run_id), ["failed"]);
}

/// A publish that reached the shared topic but not the job's (its topic failing) is completed to
/// the job's topic only: the shared topic hears of the event once.
#[tokio::test]
async fn a_publish_that_reached_only_the_shared_topic_is_completed_to_the_jobs_topic() {
    let world = World::with(START, Settings::default().answer(failed(500)));
    let notify = json!({"on": ["failed"], "email": ["ops@example.test"]});
    let job = world.create(yearly("job", json!({"retry": {"max_attempts": 1}, "notify": notify}))).await;
    assert!(world.topics.has_topic(&job.id), "the job's endpoints have a topic");
    world.bus.fail(Destination::Job, true);
    let run_id = world.trigger(&job).await;
    world.deliver().await;
    assert_eq!(world.told_about(&run_id), ["failed"]);
    assert!(world.bus.published_to_jobs().is_empty());
    let event = world.run(&run_id).await.events.remove(0);
    assert!(event.shared_sent && !event.sent, "{event:?}");

    world.bus.fail(Destination::Job, false);
    world.pass(WatchdogSettings::default().publish_grace.num_seconds() + 1);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().republished, 1);
    let to_job: Vec<_> = world.bus.published_to_jobs().into_iter().map(|n| (n.event, n.run_id)).collect();
    assert_eq!(to_job, [("failed", run_id.to_string())]);
    assert_eq!(world.told_about(&run_id), ["failed"], "the shared topic is not told twice");
}

/// A run still queued past its start deadline gets one `late_start` from the watchdog (it is
/// only told: the run stays queued), and none more when it finally starts.
#[tokio::test]
async fn a_late_start_is_told_once() {
    let world = World::at(START);
    let job = world.create(yearly("waiting", json!({"start_deadline_s": 30}))).await;
    let run_id = world.trigger(&job).await;
    world.pass(30);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().late_start, 0);
    world.pass(2);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().late_start, 1);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().late_start, 0);
    assert_eq!(world.run(&run_id).await.state, RunState::Queued, "a late start is only told");
    assert_eq!(world.deliver().await, 1);
    assert_eq!(world.run(&run_id).await.state, RunState::Succeeded);
    assert_eq!(world.told_about(&run_id), ["late_start"]);
}

/// `failing` is told when failed runs in a row reach `alert_after_failures`, once until a
/// success starts a new streak.
#[tokio::test]
async fn a_failing_streak_is_told_once_per_streak() {
    let world = World::at(START);
    // Runs: failed, failed (a streak of 2: failing), failed, succeeded, failed, failed (failing).
    for answer in [failed(500), failed(500), failed(500)] {
        world.caller.push(answer);
    }
    world.caller.push(Answer::Succeeded { status: Some(200), output: None });
    world.caller.push(failed(500));
    world.caller.push(failed(500));
    let extra = json!({"alert_after_failures": 2, "retry": {"max_attempts": 1}});
    let job = world.create(yearly("flappy", extra)).await;
    let mut failing = Vec::new();
    for n in 1..=6 {
        let run_id = world.trigger(&job).await;
        world.deliver().await;
        if world.run(&run_id).await.events.iter().any(|e| e.kind == EventKind::Failing) {
            failing.push(n);
        }
        world.pass(1);
    }
    assert_eq!(failing, [2, 6]);
    let told = world.told();
    assert_eq!(told.iter().filter(|e| **e == "failing").count(), 2, "{told:?}");
    assert_eq!(told.iter().filter(|e| **e == "failed").count(), 5, "{told:?}");
}

/// A stall alert the bus would not take stays recorded, unsent; a later pass takes it over once
/// its publisher's grace is out and publishes it when the bus is back: told once in all.
#[tokio::test]
async fn a_stall_alert_left_unsent_is_published_by_a_later_pass() {
    let world = World::at("2030-01-01T12:00:05Z");
    world.use_cases.tick.run().await.unwrap();
    world.bus.fail(Destination::Alerts, true);
    world.set("2030-01-01T12:04:30Z");
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().alert, None, "the bus refused it");
    let health = world.tick_state.get().await.unwrap();
    assert_eq!(health.unsent_alert.as_deref(), Some("scheduler_stalled"));
    world.pass(60);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().alert, None, "still refused");

    world.bus.fail(Destination::Alerts, false);
    world.pass(30);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().alert, None, "the last take-over's grace");
    world.pass(30);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().alert.as_deref(), Some("scheduler_stalled"));
    world.pass(60);
    assert_eq!(world.use_cases.watchdog.run().await.unwrap().alert, None);
    let told: Vec<&str> = world.bus.alerts().iter().map(|a| a.event).collect();
    assert_eq!(told, ["scheduler_stalled"]);
    assert_eq!(world.tick_state.get().await.unwrap().unsent_alert, None);
}

/// Jobs with a 900 s flexible window keep their claim-ahead: each instant is claimed at the
/// first tick that looks ahead to it and sees its own start (instant + offset) within a
/// message's 900 s, not only once its instant has come (as when the widest offset was taken off
/// the claim-ahead of every instant).
#[tokio::test]
async fn a_wide_flexible_window_claims_each_instant_by_its_own_start() {
    let world = World::at("2030-01-01T11:50:00Z");
    let mut jobs = Vec::new();
    for n in 0..5 {
        let document =
            job(&format!("spread-{n}"), json!({"cron": "0 12 * * *"}), json!({"flexible_window_s": 900}));
        jobs.push(world.create(document).await);
    }
    let instant = t("2030-01-01T12:00:00Z");
    let ahead = ClaimSettings::default().lookahead;
    let mut first_claims = std::collections::BTreeMap::new();
    for minute in 0..12 {
        world.set(&(t("2030-01-01T11:50:00Z") + Duration::minutes(minute)).to_rfc3339());
        world.use_cases.tick.run().await.unwrap();
        let now = world.now();
        for job in &jobs {
            let start = instant + job.start_offset(instant);
            let claimable = instant - now <= ahead && start - now <= Duration::seconds(900);
            let claimed = !world.runs_of(&job.id).is_empty();
            if claimed && !first_claims.contains_key(&job.id) {
                first_claims.insert(job.id.clone(), now);
                assert!(claimable, "{} claimed at {now}, starting at {start}", job.document.name);
            }
            assert!(claimed || !claimable, "{} not claimed at {now}, starting at {start}", job.document.name);
        }
    }
    assert_eq!(first_claims.len(), jobs.len(), "every instant claimed");
    assert!(first_claims.values().any(|at| *at < instant), "claimed ahead of the instant: {first_claims:?}");
}

/// Windows of hours (`flexible_window_s: 7200`): twenty daily jobs at 12:00 spread their starts
/// over two hours. A run starting further into its window than a message can wait (15 minutes) is
/// claimed once its start comes within reach, and starts on time: every run is claimed once, no
/// earlier than 15 minutes before its start, and starts inside its window; the next day's instant
/// is filed for its own start.
#[tokio::test]
async fn windows_of_hours_claim_each_run_within_reach_of_its_start() {
    let world = World::at("2030-01-01T11:50:00Z");
    let mut jobs = Vec::new();
    for n in 0..20 {
        let document =
            job(&format!("wide-{n}"), json!({"cron": "0 12 * * *"}), json!({"flexible_window_s": 7_200}));
        jobs.push(world.create(document).await);
    }
    let instant = t("2030-01-01T12:00:00Z");
    let reach = Duration::seconds(900);
    assert!(
        jobs.iter().any(|j| j.start_offset(instant) > Duration::hours(1)),
        "some start more than an hour in"
    );
    for minute in 0..=135 {
        world.set(&(t("2030-01-01T11:50:00Z") + Duration::minutes(minute)).to_rfc3339());
        world.use_cases.tick.run().await.unwrap();
        world.deliver().await;
        let now = world.now();
        for job in &jobs {
            let start = instant + job.start_offset(instant);
            let runs = world.runs_of(&job.id);
            assert!(runs.len() <= 1, "{}: claimed once", job.document.name);
            if start - now > reach {
                assert!(
                    runs.is_empty(),
                    "{} claimed at {now}, its start {start} out of reach",
                    job.document.name
                );
            }
        }
    }
    for job in &jobs {
        let start = instant + job.start_offset(instant);
        let runs = world.runs_of(&job.id);
        assert_eq!(runs.len(), 1, "{}", job.document.name);
        let run = &runs[0];
        assert_eq!(run.state, RunState::Succeeded, "{}: {:?}", job.document.name, run.reason);
        assert!(
            run.created_at >= start - reach - Duration::minutes(1),
            "{} claimed at {}",
            job.document.name,
            run.created_at
        );
        let started = run.attempts[0].started_at;
        assert!(
            started >= start && started < start + Duration::minutes(2),
            "{}: started {started}, due {start}",
            job.document.name
        );
        assert!(started <= instant + Duration::seconds(7_200) + Duration::minutes(2));
        let stored = world.job_store.all().into_iter().find(|j| j.id == job.id).unwrap();
        let tomorrow = t("2030-01-02T12:00:00Z");
        assert_eq!(stored.next_run_at, Some(tomorrow));
        assert_eq!(stored.index_at(), Some(stored.claimable_from(tomorrow)));
    }
}

/// An edit of a long window while an instant waits for its start: the job was filed for that
/// start (hours after the instant); narrowed to 10 minutes, its instant's filing falls in a
/// minute the tick has passed, so the edit claims it at once, and the next day runs as usual.
#[tokio::test]
async fn narrowing_a_long_window_while_an_instant_waits_claims_it() {
    let world = World::at("2030-01-01T11:50:00Z");
    let instant = t("2030-01-01T12:00:00Z");
    let mut waiting = None;
    for n in 0..10 {
        let document =
            job(&format!("wide-{n}"), json!({"cron": "0 12 * * *"}), json!({"flexible_window_s": 14_400}));
        let created = world.create(document).await;
        if created.start_offset(instant) > Duration::minutes(90) && waiting.is_none() {
            waiting = Some(created);
        }
    }
    let waiting = waiting.expect("one of ten starts more than 90 minutes in");
    for minute in 0..=70 {
        world.set(&(t("2030-01-01T11:50:00Z") + Duration::minutes(minute)).to_rfc3339());
        world.use_cases.tick.run().await.unwrap();
    }
    assert!(world.runs_of(&waiting.id).is_empty(), "13:00: its start is still out of reach");
    // An edit of its schedule that keeps the instant keeps it waiting.
    let terms = EditTerms { if_match: None, break_joins: false, pause: None };
    let limited = world
        .use_cases
        .jobs
        .patch(&owner(), &waiting.id, &json!({"schedule": {"max_runs": 100}}), terms)
        .await
        .unwrap();
    assert_eq!(limited.next_run_at, Some(instant), "the waiting instant is not dropped by the edit");
    let terms = EditTerms { if_match: None, break_joins: false, pause: None };
    let narrowed = world
        .use_cases
        .jobs
        .patch(&owner(), &waiting.id, &json!({"flexible_window_s": 600}), terms)
        .await
        .unwrap();
    assert_eq!(narrowed.next_run_at, Some(t("2030-01-02T12:00:00Z")), "its instant claimed by the edit");
    let runs = world.runs_of(&waiting.id);
    assert_eq!(runs.iter().map(|r| r.scheduled_at()).collect::<Vec<_>>(), [instant]);
    world.deliver().await;
    assert!(world.runs_of(&waiting.id)[0].state.is_terminal());

    for minute in 0..=20 {
        world.set(&(t("2030-01-02T11:55:00Z") + Duration::minutes(minute)).to_rfc3339());
        world.use_cases.tick.run().await.unwrap();
        world.deliver().await;
    }
    assert_eq!(world.runs_of(&waiting.id).len(), 2, "the next day runs as usual");
}

/// The recorder says which of its outcomes a step met: written; lost to another writer (the
/// run moved on under a stale read); refused by the domain (the step does not apply to the run
/// as it stands), which is not a storage conflict.
#[tokio::test]
async fn the_recorder_tells_a_refusal_from_a_lost_race() {
    use sundial_app::record::Recorded;
    use sundial_domain::run::transition::Step;
    let world = World::at("2030-01-01T12:00:00Z");
    let job = world.create(job("j", json!({"cron": "0 0 1 1 *"}), json!({}))).await;
    let queued = world.run(&world.trigger(&job).await).await;
    let recorder = &world.use_cases.recorder;
    let skip = || Step::Skip { reason: "by the test".into() };

    let skipped = recorder.apply(&job, &queued, &skip(), world.now()).await.unwrap();
    assert!(matches!(&skipped, Recorded::Written(run) if run.state == RunState::Skipped), "{skipped:?}");
    let stale = recorder.apply(&job, &queued, &skip(), world.now()).await.unwrap();
    assert_eq!(stale, Recorded::Lost, "read QUEUED, written over by another");
    let ended = world.run(&queued.id()).await;
    let refused = recorder.apply(&job, &ended, &skip(), world.now()).await.unwrap();
    assert!(matches!(refused, Recorded::Refused(_)), "an ended run cannot be skipped: {refused:?}");
}

/// Catch-up governs every late run, not only the instants no tick had claimed: a `catchup: skip`
/// job every minute whose runs were claimed minutes ahead, and whose workers were down for four
/// minutes, runs none of the instants it missed; each is SKIPPED, saying how late it was, and
/// the run due now runs. Under `latest`, only the latest of the late ones runs; under `all`,
/// each runs.
#[tokio::test]
async fn catch_up_governs_runs_claimed_ahead_that_start_late() {
    for (policy, ran) in [("skip", 1), ("latest", 2), ("all", 5)] {
        let world = World::at("2030-01-01T11:59:30Z");
        let job =
            world.create(job("minutely", json!({"cron": "* * * * *"}), json!({"catchup": policy}))).await;
        world.use_cases.tick.run().await.unwrap();
        let claimed = world.runs_of(&job.id);
        assert!(claimed.len() >= 5, "claimed minutes ahead: {}", claimed.len());
        // The workers come back at 12:04:10: the runs of 12:00 to 12:03 are minutes late, the one
        // of 12:04 on time.
        world.set("2030-01-01T12:04:10Z");
        world.deliver().await;
        let runs = world.runs_of(&job.id);
        let at = |hh_mm: &str| {
            runs.iter().find(|r| r.scheduled_at() == t(&format!("2030-01-01T{hh_mm}:00Z"))).unwrap()
        };
        let states: Vec<RunState> =
            ["12:00", "12:01", "12:02", "12:03", "12:04"].iter().map(|m| at(m).state).collect();
        let succeeded = states.iter().filter(|s| **s == RunState::Succeeded).count();
        assert_eq!(succeeded, ran, "{policy}: {states:?}");
        assert_eq!(at("12:04").state, RunState::Succeeded, "{policy}: the run due now runs");
        if policy == "latest" {
            assert_eq!(at("12:03").state, RunState::Succeeded, "the latest late one runs");
        }
        if policy != "all" {
            let reason = at("12:00").reason.clone().unwrap_or_default();
            assert_eq!(at("12:00").state, RunState::Skipped);
            assert!(reason.starts_with(&format!("catchup {policy}:")), "{reason}");
        }
        assert_eq!(world.caller.calls().len(), ran, "{policy}: no call for a skipped instant");
    }
}

/// An instant is never both run and told missed: a pass that claimed five minutes ahead and
/// never advanced the job (its advance lost) left runs for them; after an outage, the pass whose
/// `catchup: skip` drops the missed minutes records only those without a run, and the ledger
/// and the `missed` notice agree.
#[tokio::test]
async fn instants_claimed_by_a_pass_that_never_advanced_are_not_told_missed() {
    let world = World::at("2030-01-01T11:59:30Z");
    // Every advance is lost: the creation's claim and the tick's claim five minutes ahead.
    let script = Script::new();
    script.add(Rule::every("DueIndex::advance").refuse(StoreError::Unavailable("lost".into())));
    let ports = Ports { jobs: Faulty::new(world.ports.jobs.clone(), &script), ..world.ports.clone() };
    let losing = world.rewired(&ports, |_| {});
    let document = job("minutely", json!({"cron": "* * * * *"}), json!({"catchup": "skip"}));
    let job =
        losing.jobs.create(&OWNER.to_string(), serde_json::from_value(document).unwrap()).await.unwrap();
    losing.tick.run().await.unwrap();
    let stored = |world: &World| world.job_store.all().into_iter().find(|j| j.id == job.id).unwrap();
    assert_eq!(stored(&world).next_run_at, Some(t("2030-01-01T12:00:00Z")), "never advanced");
    let claimed: Vec<String> =
        world.runs_of(&job.id).iter().map(|r| r.scheduled_at().format("%H:%M").to_string()).collect();
    assert_eq!(claimed, ["12:00", "12:01", "12:02", "12:03", "12:04"], "claimed ahead");

    world.set("2030-01-01T12:10:10Z");
    world.use_cases.tick.run().await.unwrap();
    let recorded: Vec<(String, String, u64)> = stored(&world)
        .gaps
        .iter()
        .map(|g| (g.from.format("%H:%M").to_string(), g.to.format("%H:%M").to_string(), g.instants))
        .collect();
    assert_eq!(recorded, [("12:05".to_string(), "12:09".to_string(), 5)], "only the instants without a run");
    let notices = world.bus.notices();
    assert_eq!(notices.len(), 1);
    assert_eq!(serde_json::to_value(&notices[0].0).unwrap()["instants"], 5);
}

/// Runs one triggered run of `job` per answer, in order (one attempt each), a second apart; the
/// runs' ids.
async fn runs_answering(world: &World, job: &Job, answers: &str) -> Vec<sundial_domain::run::RunId> {
    let mut ids = Vec::new();
    for answer in answers.chars() {
        world.caller.push(match answer {
            'F' => failed(500),
            _ => Answer::Succeeded { status: Some(200), output: None },
        });
        let id = world.trigger(job).await;
        world.deliver().await;
        world.pass(1);
        ids.push(id);
    }
    ids
}

/// A flaky job that never fails twice in a row until late: `failure_rate` is told once, at the
/// tenth run (4 of 10 failed), with its numbers; the streak of two that follows is told
/// `failing`, and the next success `recovered` from it; the failure rate is recovered from only
/// once a success brings it down to 15 % (3 of the latest 20), and then once.
#[tokio::test]
async fn a_flaky_job_is_told_its_failure_rate_once_and_recovers_once_per_trouble() {
    let world = World::at(START);
    let extra = json!({"alert_after_failures": 2, "retry": {"max_attempts": 1}});
    let job = world.create(yearly("flaky", extra)).await;
    //                   runs:  1234567890123456789012345
    let ids = runs_answering(&world, &job, "SFSSFSSFSFFSSSSSSSSSSSSSS").await;
    let told_at = |event: &str| -> Vec<usize> {
        let told = world.bus.published();
        let on = |id: &sundial_domain::run::RunId| {
            told.iter().any(|n| n.event == event && n.run_id == id.to_string())
        };
        ids.iter().enumerate().filter(|(_, id)| on(id)).map(|(n, _)| n + 1).collect()
    };
    assert_eq!(told_at("failure_rate"), [10]);
    assert_eq!(told_at("failing"), [11]);
    assert_eq!(told_at("recovered"), [12, 25]);

    let told = world.bus.published();
    let detail = |event: &str| {
        let notification = told.iter().find(|n| n.event == event).unwrap();
        serde_json::to_value(notification).unwrap()
    };
    let rate = detail("failure_rate");
    assert_eq!(
        rate["failure_rate"],
        json!({"failed": 4, "ended": 10, "percent": 40, "threshold_percent": 30})
    );
    let recovered: Vec<serde_json::Value> = told
        .iter()
        .filter(|n| n.event == "recovered")
        .map(|n| serde_json::to_value(n).unwrap()["recovered"]["from"].clone())
        .collect();
    let kinds = |from: &serde_json::Value| from.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(kinds(&recovered[0]), ["failing"]);
    assert_eq!(kinds(&recovered[1]), ["failure_rate"]);
    assert!(recovered[1]["failure_rate"]["told_at"].is_string(), "when it was told: {recovered:?}");
    assert_eq!(told.iter().filter(|n| n.event == "recovered").count(), 2, "recovered once per trouble");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// Whatever a job's runs answer, one after another, what is told follows the rules: `failing`
    /// once per streak of two, `failure_rate` once until recovered from, and `recovered` by the
    /// first success that ends an open trouble, once per trouble told (a model of the rules in a
    /// few lines, against the use cases over memory).
    #[test]
    fn health_events_follow_the_rules_for_any_outcomes(answers in "[SF]{1,45}") {
        use sundial_domain::health::{Ended, FailureRate};
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (told, expected) = runtime.block_on(async {
            let world = World::at(START);
            let extra = json!({"alert_after_failures": 2, "retry": {"max_attempts": 1}});
            let job = world.create(yearly("random", extra)).await;
            let ids = runs_answering(&world, &job, &answers).await;
            let published = world.bus.published();
            let told: Vec<Vec<&str>> = ids
                .iter()
                .map(|id| {
                    let mut on: Vec<&str> = published
                        .iter()
                        .filter(|n| n.run_id == id.to_string() && !matches!(n.event, "failed" | "succeeded"))
                        .map(|n| n.event)
                        .collect();
                    on.sort_unstable();
                    on
                })
                .collect();
            // The model.
            let (mut streak, mut streak_told, mut failing, mut rate_open) = (0, false, false, false);
            let mut ended = Vec::new();
            let mut expected = Vec::new();
            for answer in answers.chars() {
                let mut now = Vec::new();
                ended.insert(0, if answer == 'F' { Ended::Failed } else { Ended::Succeeded });
                let rate = FailureRate::of(ended.iter().copied());
                if answer == 'F' {
                    streak += 1;
                    if streak >= 2 && !streak_told {
                        (streak_told, failing) = (true, true);
                        now.push("failing");
                    }
                    if rate.is_some_and(|r| r.alarming()) && !rate_open {
                        rate_open = true;
                        now.push("failure_rate");
                    }
                } else {
                    (streak, streak_told) = (0, false);
                    let rate_ends = rate_open && rate.is_some_and(|r| r.recovered());
                    if failing || rate_ends {
                        now.push("recovered");
                        failing = false;
                        rate_open &= !rate_ends;
                    }
                }
                now.sort_unstable();
                expected.push(now);
            }
            (told, expected)
        });
        proptest::prop_assert_eq!(told, expected);
    }
}

/// A flag write applied whose answer is lost (the SDK's retry meets the write as a failed
/// condition) is recognised by its writer: `failing` is still told once, and so is the
/// `recovered` whose close lost its answer.
#[tokio::test]
async fn a_flag_whose_answer_was_lost_still_tells_its_event() {
    let world = World::at(START);
    let script = Script::new();
    script.add(Rule::once("RunWrites::flag_failing").answer(StoreError::Conflict));
    script.add(Rule::once("RunWrites::close_troubles").answer(StoreError::Conflict));
    let ports = Ports { runs: Faulty::new(world.ports.runs.clone(), &script), ..world.ports.clone() };
    let losing = world.rewired(&ports, |_| {});
    let extra = json!({"alert_after_failures": 2, "retry": {"max_attempts": 1}});
    let job = world.create(yearly("unlucky", extra)).await;
    for answer in ["F", "F", "S"] {
        world.caller.push(match answer {
            "F" => failed(500),
            _ => Answer::Succeeded { status: Some(200), output: None },
        });
        world.trigger(&job).await;
        let queue = world.queue.as_ref();
        sundial_app::worker::poll::poll_once(&losing.worker, queue, queue, "worker", 0).await.unwrap();
        world.pass(1);
    }
    let told = world.told();
    assert_eq!(told.iter().filter(|e| **e == "failing").count(), 1, "{told:?}");
    assert_eq!(told.iter().filter(|e| **e == "recovered").count(), 1, "{told:?}");
}

/// A job whose instants were dropped after an outage is told `missed`, and its next successful
/// run `recovered`, once; a success scheduled before the gap recovers nothing.
#[tokio::test]
async fn a_success_after_missed_instants_tells_recovered_once() {
    let world = World::at("2030-01-01T11:59:30Z");
    let job = world.create(job("minutely", json!({"cron": "* * * * *"}), json!({"catchup": "skip"}))).await;
    world.use_cases.tick.run().await.unwrap();
    world.set("2030-01-01T12:00:05Z");
    world.deliver().await;
    assert!(!world.told().contains(&"recovered"), "nothing to recover from");

    // The tick is down until 12:10: the instants it never claimed are dropped and told missed.
    world.set("2030-01-01T12:10:10Z");
    world.use_cases.tick.run().await.unwrap();
    assert_eq!(world.bus.notices().len(), 1, "one missed notice");
    world.deliver().await;
    world.set("2030-01-01T12:11:05Z");
    world.use_cases.tick.run().await.unwrap();
    world.deliver().await;
    let recovered: Vec<Run> = world
        .runs_of(&job.id)
        .into_iter()
        .filter(|r| r.events.iter().any(|e| e.kind == EventKind::Recovered))
        .collect();
    assert_eq!(recovered.len(), 1, "{:?}", world.told());
    let gap_end = world.job_store.all()[0].gaps[0].to;
    assert!(recovered[0].scheduled_at() > gap_end, "told by a run after the gap");
    assert_eq!(world.told().iter().filter(|e| **e == "recovered").count(), 1);
}

/// Health learned from history: a job whose runs take 10 s learns that baseline after five of
/// them; a run still going well past it is told `duration_anomaly` once (with the numbers), a
/// success in half a second is told `too_fast`; as its runs drift to 60 s the baseline follows,
/// and a 90 s run is no longer an anomaly.
#[tokio::test]
async fn the_baseline_follows_the_runs_and_the_events_follow_the_baseline() {
    let world = World::with(START, Settings::default().answer(accepted()));
    let job = world.create(yearly("drifting", json!({"timeout_s": 600}))).await;
    // Runs one triggered run taking `seconds`, completed through its callback; the run id.
    let run_for = |seconds: f64| {
        let world = &world;
        let job = &job;
        async move {
            let id = world.trigger(job).await;
            world.deliver().await;
            let token = world.caller.calls().last().map(|c| c.callback_token.clone()).unwrap_or_default();
            world.clock.advance(Duration::milliseconds((seconds * 1000.0) as i64));
            let done = Completion { succeeded: true, output: None, error: None, permanent: false };
            world.use_cases.run_control.complete(&id, &token, done).await.unwrap();
            world.pass(5);
            id
        }
    };
    let baseline =
        |world: &World| world.job_store.all().into_iter().find(|j| j.id == job.id).and_then(|j| j.baseline);
    for _ in 0..4 {
        run_for(10.0).await;
    }
    assert_eq!(baseline(&world), None, "four runs: nothing learned yet");
    run_for(10.0).await;
    let learned = baseline(&world).unwrap();
    assert_eq!((learned.typical_ms, learned.p95_ms, learned.runs), (10_000, 10_000, 5));

    // A run still going 69 s in is usual enough (p95 + 60 s = 70 s); at 72 s it is told, once.
    // Its target keeps its lease with heartbeats meanwhile.
    let slow = world.trigger(&job).await;
    world.deliver().await;
    let token = world.caller.calls().last().map(|c| c.callback_token.clone()).unwrap_or_default();
    let beat = |seconds: i64| {
        world.pass(seconds);
        world.use_cases.run_control.heartbeat(&slow, &token)
    };
    beat(30).await.unwrap();
    beat(30).await.unwrap();
    beat(9).await.unwrap();
    assert_eq!(anomalies(&world).await, 0);
    beat(3).await.unwrap();
    assert_eq!(anomalies(&world).await, 1);
    beat(30).await.unwrap();
    assert_eq!(anomalies(&world).await, 0, "once per run");
    let told =
        world.bus.published().into_iter().filter(|n| n.event == "duration_anomaly").collect::<Vec<_>>();
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].run_id, slow.to_string());
    assert_eq!(told[0].baseline.map(|b| b.p95_ms), Some(10_000), "the numbers it was judged by");
    let done = Completion { succeeded: true, output: None, error: None, permanent: false };
    world.use_cases.run_control.complete(&slow, &token, done).await.unwrap();

    let fast = run_for(0.5).await;
    assert!(world.told_about(&fast).contains(&"too_fast"), "{:?}", world.told_about(&fast));

    // Twenty runs of 60 s: the baseline moves, and a 90 s run is usual now.
    for _ in 0..20 {
        run_for(60.0).await;
    }
    let moved = baseline(&world).unwrap();
    assert_eq!((moved.typical_ms, moved.p95_ms, moved.runs), (60_000, 60_000, 20));
    world.trigger(&job).await;
    world.deliver().await;
    world.pass(90);
    assert_eq!(anomalies(&world).await, 0, "within p95 + 60 s");
}

/// Runs flagged `duration_anomaly` by two watchdog passes (a pass resumes where the one before
/// stopped, so two see every in-flight run).
async fn anomalies(world: &World) -> usize {
    let mut flagged = 0;
    for _ in 0..2 {
        flagged +=
            world.use_cases.watchdog.run().await.map(|r| r.duration_anomalies).unwrap_or(usize::MAX / 4);
    }
    flagged
}

/// A pause that ended on a job its own resume now refuses (a document stored before a limit
/// tightened) leaves that job paused and holds no other job back: the tick's watermark moves on.
#[tokio::test]
async fn a_pause_its_resume_refuses_holds_nothing_back() {
    let world = World::at("2030-01-01T11:58:00Z");
    let job = world.create(job("stale", json!({"cron": "* * * * *"}), json!({}))).await;
    let note = PauseNote { reason: None, by: None, until: Some(t("2030-01-01T12:00:00Z")) };
    let paused = world.use_cases.jobs.pause(&owner(), &job.id, note).await.unwrap();
    // Stored as an older version allowed it: a timeout this deployment refuses.
    let mut stale = paused.clone();
    stale.document.timeout_s = 0;
    world.job_store.import(&[stale]).unwrap();

    world.set("2030-01-01T12:00:30Z");
    let report = world.use_cases.tick.run().await.unwrap();
    assert_eq!(report.claims.failed, 0, "{report:?}");
    world.set("2030-01-01T12:02:30Z");
    let report = world.use_cases.tick.run().await.unwrap();
    assert!(report.watermark >= Some(t("2030-01-01T12:01:00Z")), "the watermark moves on: {report:?}");
    let stored = world.job_store.all().into_iter().find(|j| j.id == job.id).unwrap();
    assert!(stored.document.paused, "it stays paused for its owner to mend");
}
