//! Workflows (jobs with `depends_on`) over the ports in memory on a manual clock: the diamond
//! A → B, A → C, (B, C) → D on a schedule and by a manual trigger, parents ending at the same
//! moment, a parent's final failure under `all_success` and `all_done`, the graph checks made
//! before anything is written, and a crash between a parent's end and its children's claim.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use sundial_app::jobs::{EditTerms, JobsError};
use sundial_app::ports::Ports;
use sundial_app::worker::Worker;
use sundial_app::worker::poll::{Settled, handle_message};
use sundial_domain::job::{Job, JobId, PauseNote};
use sundial_domain::ports::queue::{Received, RunInbox};
use sundial_domain::ports::store::RunHistory;
use sundial_domain::ports::targets::{Answer, Caller, Invocation};
use sundial_domain::run::{RunKey, RunState};
use sundial_memory::bus::Destination;
use sundial_memory::queue::MemoryQueue;
use sundial_testkit::faults::{Faulty, Gate, Rule, Script};
use sundial_testkit::world::{OWNER, TARGET, World, job, t};

/// Whether no run is left in the in-flight index.
fn settled(world: &World) -> bool {
    world.runs.all().iter().all(|r| !world.runs.is_in_flight(&r.job_id, &r.key))
}

fn owner() -> String {
    OWNER.to_string()
}

/// A job after `parents` (by name), with the fields of `extra`.
fn after(name: &str, parents: &[&str], extra: serde_json::Value) -> serde_json::Value {
    let mut doc = json!({"name": name, "depends_on": parents, "target": {"type": "http", "url": TARGET}});
    doc.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    doc
}

/// A number per (job, scheduled instant) called.
type PerCall = BTreeMap<(JobId, DateTime<Utc>), usize>;

/// A target that records, per job, the instants it was called for and in which order, and fails
/// the jobs it is told to.
#[derive(Debug, Default)]
struct Recording {
    calls: Mutex<Vec<(JobId, DateTime<Utc>)>>,
    failing: Mutex<Vec<JobId>>,
}

impl Recording {
    fn fail(&self, job: &Job) {
        self.failing.lock().unwrap().push(job.id.clone());
    }

    /// The position of each (job, instant) call, and how many calls each had.
    fn order(&self) -> (PerCall, PerCall) {
        let calls = self.calls.lock().unwrap();
        let (mut first, mut count) = (BTreeMap::new(), BTreeMap::new());
        for (i, call) in calls.iter().enumerate() {
            first.entry(call.clone()).or_insert(i);
            *count.entry(call.clone()).or_insert(0) += 1;
        }
        (first, count)
    }
}

#[async_trait]
impl Caller for Recording {
    async fn call(&self, invocation: &Invocation<'_>) -> Answer {
        self.calls.lock().unwrap().push((invocation.job.id.clone(), invocation.scheduled_at));
        if self.failing.lock().unwrap().contains(&invocation.job.id) {
            Answer::Failed { retryable: false, status: Some(500), error: "HTTP 500".into() }
        } else {
            Answer::Succeeded { status: Some(200), output: None }
        }
    }
}

/// A world whose workers call `target`.
struct Flow {
    world: World,
    target: Arc<Recording>,
    worker: sundial_app::worker::Worker,
}

impl Flow {
    fn at(now: &str) -> Flow {
        let world = World::at(now);
        let target = Arc::new(Recording::default());
        let worker = world.worker_calling(target.clone());
        Flow { world, target, worker }
    }

    /// Hands every visible message to this flow's worker until none is visible.
    async fn deliver(&self) {
        for _ in 0..1_000 {
            let queue = self.world.queue.as_ref();
            let n = sundial_app::worker::poll::poll_once(&self.worker, queue, queue, "w", 0).await.unwrap();
            if n == 0 {
                return;
            }
        }
        panic!("messages kept coming back");
    }

    /// Delivers, a simulated second at a time, for `seconds`.
    async fn run_for(&self, seconds: i64) {
        for _ in 0..seconds {
            self.deliver().await;
            self.world.pass(1);
        }
    }

    async fn diamond(&self, extra_d: serde_json::Value) -> [Job; 4] {
        let w = &self.world;
        let a = w.create(job("extract", json!({"cron": "0 * * * *"}), json!({}))).await;
        let b = w.create(after("transform", &["extract"], json!({}))).await;
        let c = w.create(after("aggregate", &[a.id.as_str()], json!({}))).await;
        let d = w.create(after("report", &["transform", "aggregate"], extra_d)).await;
        [a, b, c, d]
    }

    fn state(&self, job: &Job, key: &RunKey) -> Option<RunState> {
        self.world.runs_of(&job.id).into_iter().find(|r| &r.key == key).map(|r| r.state)
    }
}

/// Every instant of the diamond on its schedule: each child called after its parents, D once.
#[tokio::test]
async fn a_diamond_on_a_schedule_runs_in_order_once_per_instant() {
    let flow = Flow::at("2030-01-01T11:58:00Z");
    let [a, b, c, d] = flow.diamond(json!({})).await;
    for hour in ["12", "13", "14"] {
        flow.world.set(&format!("2030-01-01T{hour}:00:00Z"));
        flow.world.use_cases.tick.run().await.unwrap();
        flow.run_for(30).await;
    }
    let (first, count) = flow.target.order();
    for hour in ["12", "13", "14"] {
        let instant = t(&format!("2030-01-01T{hour}:00:00Z"));
        let at = |job: &Job| {
            *first
                .get(&(job.id.clone(), instant))
                .unwrap_or_else(|| panic!("{} at {hour}", job.document.name))
        };
        assert!(at(&a) < at(&b) && at(&a) < at(&c), "B and C after A at {hour}");
        assert!(at(&b) < at(&d) && at(&c) < at(&d), "D after B and C at {hour}");
        for job in [&a, &b, &c, &d] {
            assert_eq!(count[&(job.id.clone(), instant)], 1, "{} once at {hour}", job.document.name);
        }
    }
    assert_eq!(flow.world.runs_of(&d.id).len(), 3);
    assert!(flow.world.runs.all().iter().all(|r| r.state == RunState::Succeeded));
    assert!(settled(&flow.world), "every hand-over done and settled");
}

/// A manual trigger of A starts a workflow run: B, C and D follow it under its key, which no
/// scheduled instant shares.
#[tokio::test]
async fn a_manual_trigger_of_the_root_runs_the_whole_diamond() {
    let flow = Flow::at("2030-01-01T12:10:00Z");
    let [a, b, c, d] = flow.diamond(json!({})).await;
    let run = flow.world.trigger(&a).await;
    flow.run_for(30).await;
    for job in [&b, &c, &d] {
        let runs = flow.world.runs_of(&job.id);
        assert_eq!(runs.len(), 1, "{}", job.document.name);
        assert_eq!(runs[0].key, run.key, "{} follows the trigger's key", job.document.name);
        assert_eq!(runs[0].state, RunState::Succeeded);
        assert_eq!(runs[0].workflow.as_ref(), Some(&a.id));
    }
    let (first, _) = flow.target.order();
    let at = |job: &Job| first[&(job.id.clone(), run.key.instant)];
    assert!(at(&a) < at(&b) && at(&b) < at(&d) && at(&c) < at(&d));
}

/// Triggering a middle job runs it and what follows it, without waiting for the parents that
/// are not part of that workflow run.
#[tokio::test]
async fn a_trigger_of_a_middle_job_runs_its_descendants_only() {
    let flow = Flow::at("2030-01-01T12:10:00Z");
    let [a, b, c, d] = flow.diamond(json!({})).await;
    let run = flow.world.trigger(&b).await;
    flow.run_for(30).await;
    assert!(flow.world.runs_of(&a.id).is_empty() && flow.world.runs_of(&c.id).is_empty());
    assert_eq!(flow.state(&d, &run.key), Some(RunState::Succeeded), "D waits only for B here");
}

/// B fails finally: D is SKIPPED `upstream_failed` naming B, and told; under `all_done` D runs.
#[tokio::test]
async fn a_parents_final_failure_skips_the_child_unless_all_done() {
    for (rule, expected) in [("all_success", RunState::Skipped), ("all_done", RunState::Succeeded)] {
        let flow = Flow::at("2030-01-01T11:58:00Z");
        let [_, b, _, d] = flow.diamond(json!({"trigger_rule": rule})).await;
        flow.target.fail(&b);
        flow.world.set("2030-01-01T12:00:00Z");
        flow.world.use_cases.tick.run().await.unwrap();
        flow.run_for(30).await;
        let key = RunKey::scheduled(t("2030-01-01T12:00:00Z"));
        assert_eq!(flow.state(&b, &key), Some(RunState::Failed));
        let run = flow.world.runs_of(&d.id).into_iter().next().expect("D has its run");
        assert_eq!(run.state, expected, "{rule}");
        if expected == RunState::Skipped {
            let reason = run.reason.clone().unwrap();
            assert!(reason.starts_with("upstream_failed: parent transform"), "{reason}");
            assert!(flow.world.told_about(&run.id()).contains(&"skipped"));
        }
    }
}

/// A backfill of the root cascades like its schedule: each backfilled instant runs the diamond.
#[tokio::test]
async fn a_backfill_of_the_root_runs_the_diamond_for_each_instant() {
    let flow = Flow::at("2030-01-01T08:30:00Z");
    let [a, _, _, d] = flow.diamond(json!({})).await;
    flow.world.set("2030-01-01T12:10:00Z");
    let (created, _) = flow
        .world
        .use_cases
        .jobs
        .backfill(&owner(), &a.id, t("2030-01-01T09:00:00Z"), t("2030-01-01T11:00:00Z"))
        .await
        .unwrap();
    assert_eq!(created.len(), 3);
    flow.run_for(30).await;
    let keys: Vec<String> = flow.world.runs_of(&d.id).iter().map(|r| r.key.encode()).collect();
    assert_eq!(keys, ["2030-01-01T09:00:00Z#s", "2030-01-01T10:00:00Z#s", "2030-01-01T11:00:00Z#s"]);
    assert!(flow.world.runs_of(&d.id).iter().all(|r| r.state == RunState::Succeeded));
    // Each child run is due when its root's backfilled run was (its deadlines count from there).
    for run in flow.world.runs_of(&d.id) {
        let root = flow.world.runs_of(&a.id).into_iter().find(|r| r.key == run.key).unwrap();
        assert_eq!(run.due_at, root.due_at);
    }
}

/// A target that, called for the first time, creates a job after the one it was called for:
/// the child is linked while the parent's attempt runs.
#[derive(Debug)]
struct Linking {
    jobs: sundial_app::jobs::Jobs,
    child: serde_json::Value,
    linked: Mutex<bool>,
}

#[async_trait]
impl Caller for Linking {
    async fn call(&self, _invocation: &Invocation<'_>) -> Answer {
        let first = !std::mem::replace(&mut *self.linked.lock().unwrap(), true);
        if first {
            let document = serde_json::from_value(self.child.clone()).unwrap();
            self.jobs.create(&owner(), document).await.unwrap();
        }
        Answer::Succeeded { status: Some(200), output: None }
    }
}

/// A child created while its parent's run is in its attempt gets that run's end: the worker
/// reads the job again before it records the end.
#[tokio::test]
async fn a_child_linked_during_the_parents_attempt_follows_that_run() {
    // Half an hour before the root's next instant: the trigger's run is the only one.
    let world = World::at("2030-01-01T11:30:00Z");
    let a = world.create(job("extract", json!({"cron": "0 * * * *"}), json!({}))).await;
    let caller = Arc::new(Linking {
        jobs: world.use_cases.jobs.clone(),
        child: after("report", &["extract"], json!({})),
        linked: Mutex::new(false),
    });
    let worker = world.worker_calling(caller);
    let run = world.trigger(&a).await;
    let queue = world.queue.clone();
    for message in queue.receive(10, 0).await.unwrap() {
        consume(&worker, &queue, &message, "w").await;
    }
    let report = world.job_store.all().into_iter().find(|j| j.document.name == "report").unwrap();
    let runs = world.runs_of(&report.id);
    assert_eq!(runs.len(), 1, "the child got the run's end");
    assert_eq!(runs[0].key, run.key);
}

/// A scheduled job turned into a child keeps the runs the tick had already claimed for it; they
/// do not run before (or despite) their parent: decided at the start, like the policies.
#[tokio::test]
async fn runs_claimed_before_a_job_got_parents_never_run_before_them() {
    let flow = Flow::at("2030-01-01T11:58:00Z");
    let w = &flow.world;
    let p = w.create(job("source", json!({"cron": "0 * * * *"}), json!({}))).await;
    let x = w.create(job("sink", json!({"cron": "0 * * * *"}), json!({}))).await;
    flow.target.fail(&p);
    w.set("2030-01-01T11:59:00Z");
    w.use_cases.tick.run().await.unwrap();
    assert_eq!(w.runs_of(&x.id).len(), 1, "the tick claimed the next instant ahead");
    w.use_cases
        .jobs
        .patch(&owner(), &x.id, &json!({"schedule": null, "depends_on": ["source"]}), EditTerms::default())
        .await
        .unwrap();
    w.set("2030-01-01T12:00:00Z");
    flow.run_for(30).await;
    let (_, count) = flow.target.order();
    assert!(!count.keys().any(|(job, _)| job == &x.id), "sink never ran: its parent failed");
    let run = &w.runs_of(&x.id)[0];
    assert_eq!(run.state, RunState::Skipped, "{run:?}");
}

/// A paused middle job: its runs are SKIPPED `paused`, and its child's `upstream_failed`.
#[tokio::test]
async fn a_paused_parent_skips_its_runs_and_fails_its_children_upstream() {
    let flow = Flow::at("2030-01-01T11:58:00Z");
    let [_, b, c, d] = flow.diamond(json!({})).await;
    flow.world.use_cases.jobs.pause(&owner(), &b.id, PauseNote::default()).await.unwrap();
    flow.world.set("2030-01-01T12:00:00Z");
    flow.world.use_cases.tick.run().await.unwrap();
    flow.run_for(30).await;
    let key = RunKey::scheduled(t("2030-01-01T12:00:00Z"));
    assert_eq!(flow.state(&b, &key), Some(RunState::Skipped));
    assert_eq!(flow.state(&c, &key), Some(RunState::Succeeded));
    let run = flow.world.runs_of(&d.id).into_iter().next().unwrap();
    assert_eq!(run.state, RunState::Skipped);
    assert!(run.reason.unwrap().contains("transform"));
}

/// A join of two roots with the same schedule, one of them paused: the other's run ends, the
/// join waits for the paused root's run while the watchdog hands the end over again each pass,
/// and an hour after the end its instant is SKIPPED `upstream_missing`, naming the missing
/// parent, and told; the join never stops in silence.
#[tokio::test]
async fn a_join_whose_other_parent_never_runs_the_instant_ends_skipped_upstream_missing() {
    let flow = Flow::at("2030-01-01T11:58:00Z");
    let w = &flow.world;
    let left = w.create(job("left", json!({"cron": "0 * * * *"}), json!({}))).await;
    let right = w.create(job("right", json!({"cron": "0 * * * *"}), json!({}))).await;
    let join = w.create(after("join", &["left", "right"], json!({}))).await;
    w.use_cases.jobs.pause(&owner(), &right.id, PauseNote::default()).await.unwrap();
    w.set("2030-01-01T12:00:00Z");
    w.use_cases.tick.run().await.unwrap();
    flow.run_for(30).await;
    let key = RunKey::scheduled(t("2030-01-01T12:00:00Z"));
    assert_eq!(flow.state(&left, &key), Some(RunState::Succeeded));
    assert_eq!(flow.state(&right, &key), None, "a paused root claims nothing");
    for _ in 0..50 {
        w.pass(60);
        w.use_cases.watchdog.run().await.unwrap();
    }
    assert_eq!(flow.state(&join, &key), None, "within the wait, the join waits");
    assert!(!settled(w), "the left run stays in flight while its hand-over is open");
    w.pass(15 * 60);
    w.use_cases.watchdog.run().await.unwrap();
    let run = w.runs.get(&join.id, &key).await.unwrap().expect("the join's instant is recorded");
    assert_eq!(run.state, RunState::Skipped);
    let reason = run.reason.clone().unwrap_or_default();
    assert!(reason.starts_with("upstream_missing: parent right"), "{reason}");
    assert!(w.told_about(&run.id()).contains(&"skipped"), "{:?}", w.told_about(&run.id()));
    assert!(settled(w), "every hand-over done and settled");
    let (_, count) = flow.target.order();
    assert!(!count.keys().any(|(job, _)| job == &join.id), "the join was never called");
}

/// A parent's run fails, with its `failed` alert and its hand-over to publish; the hand-over
/// is slow, past the watchdog's publish grace, and the watchdog's pass comes meanwhile. The
/// event is told once: what was published is marked before the hand-over starts.
#[tokio::test]
async fn a_slow_hand_over_does_not_make_the_watchdog_tell_an_event_twice() {
    let flow = Flow::at("2030-01-01T11:58:00Z");
    let w = &flow.world;
    let parent = w.create(job("parent", json!({"cron": "0 * * * *"}), json!({}))).await;
    let child = w.create(after("child", &["parent"], json!({"trigger_rule": "all_done"}))).await;
    flow.target.fail(&parent);
    w.set("2030-01-01T12:00:00Z");
    w.use_cases.tick.run().await.unwrap();
    // The run ends with both events left unsent, as a crash right after its end leaves them.
    w.bus.fail(Destination::Shared, true);
    w.runs.fail_inserts_of(Some(&child.id));
    flow.deliver().await;
    w.bus.fail(Destination::Shared, false);
    w.runs.fail_inserts_of(None);
    let key = RunKey::scheduled(t("2030-01-01T12:00:00Z"));
    let run = w.runs.get(&parent.id, &key).await.unwrap().unwrap();
    assert_eq!(run.events.iter().filter(|e| !e.sent).count(), 2, "{:?}", run.events);

    // The children's batch read waits at a gate: a hand-over held up for as long as the test
    // likes.
    let (script, gate) = (Script::new(), Gate::new());
    script.add(Rule::every("Catalogue::get_many").before(gate.wait()));
    let gated = Faulty::new(w.ports.jobs.clone(), &script);
    let slow = w.rewired(&Ports { jobs: gated, ..w.ports.clone() }, |_| {}).announcer;
    let announcing = {
        // As stored: linked to its child.
        let (job, run) = (w.stored_job(&parent.id).await.unwrap(), run.clone());
        tokio::spawn(async move { slow.announce(Some(&job), &run, &run.events).await })
    };
    let held = tokio::time::timeout(std::time::Duration::from_secs(10), gate.entered());
    held.await.expect("the hand-over reads the children");
    w.pass(120);
    w.use_cases.watchdog.run().await.unwrap();
    gate.open();
    announcing.await.unwrap();
    flow.run_for(10).await;

    assert_eq!(w.told_about(&run.id()), ["failed"], "told once");
    assert_eq!(flow.state(&child, &key), Some(RunState::Succeeded), "the child ran once");
    assert!(settled(w));
}

/// Handles one received message as a worker does, and deletes it once handled.
async fn consume(worker: &Worker, queue: &Arc<MemoryQueue>, message: &Received, id: &str) {
    let settled = handle_message(worker, queue.as_ref(), queue.as_ref(), message, id).await;
    if settled == Settled::Done {
        queue.delete(&message.receipt).await.unwrap();
    }
}

/// B and C end at the same moment on two workers, 50 times over: D is claimed once each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parents_ending_together_on_two_workers_claim_the_child_once() {
    let flow = Flow::at("2030-01-01T11:58:00Z");
    let [a, b, c, d] = flow.diamond(json!({})).await;
    let other = flow.world.worker_calling(flow.target.clone());
    for round in 0..50 {
        // A's run for this instant ends, and B and C are claimed and sent.
        let instant = t("2030-01-01T12:00:00Z") + chrono::Duration::hours(round);
        flow.world.set(&instant.to_rfc3339());
        flow.world.use_cases.tick.run().await.unwrap();
        let queue = flow.world.queue.clone();
        let from_tick = queue.receive(10, 0).await.unwrap();
        assert_eq!(
            from_tick.len(),
            1,
            "A's message: {:?}",
            from_tick.iter().map(|m| &m.body).collect::<Vec<_>>()
        );
        consume(&flow.worker, &queue, &from_tick[0], "w0").await;
        let key = RunKey::scheduled(instant);
        assert_eq!(flow.state(&a, &key), Some(RunState::Succeeded));
        assert_eq!(flow.state(&b, &key), Some(RunState::Queued));
        assert_eq!(flow.state(&c, &key), Some(RunState::Queued));
        // One message each, handled at once by two workers.
        let messages = flow.world.queue.receive(10, 0).await.unwrap();
        assert_eq!(messages.len(), 2, "B's and C's messages");
        let (first, second) = (messages[0].clone(), messages[1].clone());
        let (w1, w2, q1, q2) = (flow.worker.clone(), other.clone(), queue.clone(), queue.clone());
        let one = tokio::spawn(async move { consume(&w1, &q1, &first, "w1").await });
        let two = tokio::spawn(async move { consume(&w2, &q2, &second, "w2").await });
        one.await.unwrap();
        two.await.unwrap();
        flow.deliver().await;
        let runs: Vec<_> = flow.world.runs_of(&d.id).into_iter().filter(|r| r.key == key).collect();
        assert_eq!(runs.len(), 1, "round {round}");
        assert_eq!(runs[0].state, RunState::Succeeded, "round {round}");
    }
    let (_, count) = flow.target.order();
    assert!(count.iter().filter(|((job, _), _)| job == &d.id).all(|(_, n)| *n == 1));
}

/// A crash between a parent's end and the claim of its children: the `downstream` event stays
/// unsent, and the watchdog hands it over.
#[tokio::test]
async fn a_crash_before_the_hand_over_is_repaired_by_the_watchdog() {
    let flow = Flow::at("2030-01-01T11:58:00Z");
    let [a, b, c, d] = flow.diamond(json!({})).await;
    flow.world.set("2030-01-01T12:00:00Z");
    flow.world.use_cases.tick.run().await.unwrap();
    // The children's runs cannot be written: the hand-over fails as a crash would leave it.
    flow.world.runs.fail_inserts_of(Some(&b.id));
    flow.deliver().await;
    let key = RunKey::scheduled(t("2030-01-01T12:00:00Z"));
    assert_eq!(flow.state(&a, &key), Some(RunState::Succeeded));
    assert_eq!(flow.state(&b, &key), None);
    let parent = flow.world.runs.get(&a.id, &key).await.unwrap().unwrap();
    assert!(parent.events.iter().any(|e| e.kind == sundial_domain::run::RunEventKind::DOWNSTREAM && !e.sent));
    flow.world.runs.fail_inserts_of(None);
    flow.world.pass(120);
    flow.world.use_cases.watchdog.run().await.unwrap();
    flow.run_for(30).await;
    assert_eq!(flow.state(&b, &key), Some(RunState::Succeeded), "the watchdog handed A's end over");
    assert_eq!(flow.state(&c, &key), Some(RunState::Succeeded), "C was claimed once, by the first hand-over");
    assert_eq!(flow.state(&d, &key), Some(RunState::Succeeded), "and the diamond went on to D");
    let (_, count) = flow.target.order();
    assert_eq!(count[&(c.id.clone(), key.instant)], 1, "the repeated hand-over did not run C again");
    assert!(settled(&flow.world));
}

/// Cycles, unknown parents, a schedule beside `depends_on` and parents that never coincide are
/// refused before anything is written, naming the field (and the cycle); deleting a parent is
/// refused naming its children.
#[tokio::test]
async fn the_graph_is_checked_before_anything_is_written() {
    let flow = Flow::at("2030-01-01T11:58:00Z");
    let w = &flow.world;
    let [a, b, _, d] = flow.diamond(json!({})).await;
    let field = |e: JobsError| match e {
        JobsError::Invalid(v) => (v.field, v.reason),
        other => panic!("{other:?}"),
    };
    let before = w.job_store.all().len();

    let alice = owner();
    let unknown =
        w.use_cases.jobs.create(&alice, serde_json::from_value(after("x", &["nope"], json!({}))).unwrap());
    assert_eq!(field(unknown.await.unwrap_err()).0, "depends_on");
    let itself =
        w.use_cases.jobs.create(&alice, serde_json::from_value(after("x", &["x"], json!({}))).unwrap());
    let (f, reason) = field(itself.await.unwrap_err());
    assert_eq!((f.as_str(), reason.as_str()), ("depends_on", "makes a cycle: x -> x"));
    let both = after("x", &["extract"], json!({"schedule": {"cron": "0 * * * *"}}));
    assert_eq!(
        field(w.use_cases.jobs.create(&owner(), serde_json::from_value(both).unwrap()).await.unwrap_err()).0,
        "schedule"
    );
    w.create(job("other", json!({"cron": "30 * * * *"}), json!({}))).await;
    let never = after("x", &["transform", "other"], json!({}));
    let (f, reason) =
        field(w.use_cases.jobs.create(&owner(), serde_json::from_value(never).unwrap()).await.unwrap_err());
    assert_eq!(f, "depends_on");
    assert!(reason.contains("transform") && reason.contains("other"), "{reason}");
    assert_eq!(w.job_store.all().len(), before + 1, "only `other` was written");

    let version = w.stored_job(&a.id).await.unwrap().version;
    let patch = json!({"schedule": null, "depends_on": ["report"]});
    let (f, reason) =
        field(w.use_cases.jobs.patch(&alice, &a.id, &patch, EditTerms::default()).await.unwrap_err());
    assert_eq!(f, "depends_on");
    assert!(reason.contains("extract -> report -> ") && reason.ends_with("-> extract"), "{reason}");
    assert_eq!(w.stored_job(&a.id).await.unwrap().version, version, "nothing written");

    match w.use_cases.jobs.delete(&owner(), &b.id).await {
        Err(JobsError::HasChildren(names)) => assert_eq!(names, ["report"]),
        other => panic!("{other:?}"),
    }
    w.use_cases.jobs.delete(&owner(), &d.id).await.unwrap();
    w.use_cases.jobs.delete(&owner(), &b.id).await.unwrap();
    assert!(!w.stored_job(&a.id).await.unwrap().children.contains(&b.id), "unlinked");
}

/// An edit of a root (its schedule, its end) or of a middle job's parents that would make a
/// join's parents stop coinciding is refused naming the join, and writes nothing, unless the
/// edit's terms accept it; edits that keep the instants coinciding pass.
#[tokio::test]
async fn an_edit_that_would_stop_a_join_is_refused_naming_it() {
    let flow = Flow::at("2030-01-01T11:58:00Z");
    let w = &flow.world;
    let left = w.create(job("left", json!({"cron": "0 * * * *"}), json!({}))).await;
    let right = w.create(job("right", json!({"cron": "0 * * * *"}), json!({}))).await;
    let middle = w.create(after("middle", &["right"], json!({}))).await;
    w.create(after("join", &["left", "middle"], json!({}))).await;
    let refused = |e: JobsError| match e {
        JobsError::Invalid(v) => (v.field, v.reason),
        other => panic!("{other:?}"),
    };
    let version = w.stored_job(&right.id).await.unwrap().version;
    for (edit, field) in [
        (json!({"schedule": {"cron": "30 * * * *"}}), "schedule"),
        (json!({"schedule": {"end_at": "2031-01-01T00:00:00Z"}}), "schedule"),
        (json!({"schedule": {"timezone": "Asia/Kolkata"}}), "schedule"),
    ] {
        let (f, reason) = refused(
            w.use_cases.jobs.patch(&owner(), &right.id, &edit, EditTerms::default()).await.unwrap_err(),
        );
        assert_eq!(f, field, "{edit}");
        assert!(reason.starts_with("`join` runs after left and middle"), "{reason}");
    }
    let other = w.create(job("other", json!({"cron": "15 * * * *"}), json!({}))).await;
    let moved = json!({"depends_on": [other.id.to_string()]});
    let (f, _) = refused(
        w.use_cases.jobs.patch(&owner(), &middle.id, &moved, EditTerms::default()).await.unwrap_err(),
    );
    assert_eq!(f, "depends_on");
    assert_eq!(w.stored_job(&right.id).await.unwrap().version, version, "nothing written");

    // A pause, a jitter or a payload edit keeps the instants; so does moving both roots together.
    let jitter = json!({"schedule": {"cron": "0 * * * *", "jitter_s": 30}});
    w.use_cases.jobs.patch(&owner(), &right.id, &jitter, EditTerms::default()).await.unwrap();
    w.use_cases.jobs.pause(&owner(), &right.id, PauseNote::default()).await.unwrap();
    w.use_cases
        .jobs
        .patch(&owner(), &right.id, &json!({"payload": {"a": 1}}), EditTerms::default())
        .await
        .unwrap();
    let accepted = EditTerms { break_joins: true, ..EditTerms::default() };
    let edit = json!({"schedule": {"cron": "30 * * * *"}});
    w.use_cases.jobs.patch(&owner(), &right.id, &edit, accepted).await.unwrap();
    w.use_cases.jobs.patch(&owner(), &left.id, &edit, EditTerms::default()).await.unwrap();
}

/// The graph around any job of the diamond: four nodes, four edges, children described by
/// their parents.
#[tokio::test]
async fn the_graph_shows_every_connected_job() {
    let flow = Flow::at("2030-01-01T11:58:00Z");
    let [a, _, _, d] = flow.diamond(json!({})).await;
    flow.world.create(job("alone", json!({"cron": "0 * * * *"}), json!({}))).await;
    let graph = flow.world.use_cases.jobs.graph(&owner(), &d.id).await.unwrap();
    assert_eq!(graph.nodes.len(), 4);
    assert_eq!(graph.edges.len(), 4);
    assert!(graph.edges.iter().filter(|(from, _)| from == &a.id).count() == 2);
    assert!(flow.world.stored_job(&d.id).await.unwrap().next_run_at.is_none(), "no schedule of its own");
}
