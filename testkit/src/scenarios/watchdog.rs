//! The watchdog over time, on a manual clock: attempts past their timeout, runs past their SLA,
//! runs not started within the grace period, and a stalled scheduler.

use crate::api::ALICE;
use crate::harness::Harness;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use sundial_domain::job::EventKind;
use sundial_domain::run::transition::{Ending, Step};
use sundial_domain::run::{Outcome, RunKey, RunState};

const START: &str = "2030-01-01T12:00:00Z";

fn t(s: &str) -> DateTime<Utc> {
    s.parse().expect("an RFC 3339 instant")
}

/// A job due once a year calling the deployment's target, with the fields of `extra`.
fn yearly<H: Harness>(deployment: &H, name: &str, extra: Value) -> Value {
    let mut job = json!({
        "name": name,
        "schedule": {"cron": "0 0 1 1 *"},
        "target": {"type": "http", "url": deployment.target_url()},
    });
    if let (Some(job), Some(extra)) = (job.as_object_mut(), extra.as_object()) {
        job.extend(extra.clone());
    }
    job
}

/// The attempt each message asks for.
fn attempts(bodies: &[String]) -> Vec<u64> {
    bodies.iter().map(|b| serde_json::from_str::<Value>(b).unwrap()["attempt"].as_u64().unwrap()).collect()
}

/// An accepted attempt that never reports back is `timed_out` by the watchdog at its timeout,
/// retried per the policy, then the run ends TIMED_OUT; one `retrying` and one `timed_out`.
pub async fn a_run_past_its_timeout_is_retried_then_ends<H: Harness>() {
    let deployment = H::deploy_at(START, &[]).await;
    let mut now = t(START);
    let mut pass = |seconds: i64| {
        now += Duration::seconds(seconds);
        deployment.set_clock(now);
    };
    let watchdog = &deployment.use_cases().watchdog;
    let retry = json!({"max_attempts": 2, "backoff_s": 1, "max_backoff_s": 1});
    let job = yearly(&deployment, "stuck", json!({"timeout_s": 5, "retry": retry}));
    let id = deployment.api().create_job(ALICE, &job).await;
    deployment.answer_next(&[202, 202]);
    let run_id = deployment.trigger(&id).await;

    assert_eq!(attempts(&deployment.work(1, "w1").await), [1]);
    assert_eq!(deployment.run(&run_id).await.state, RunState::Running);
    pass(4);
    assert_eq!(watchdog.run().await.unwrap().timed_out, 0, "not before the timeout");
    pass(2);
    let report = watchdog.run().await.unwrap();
    assert_eq!((report.timed_out, report.dispatched), (1, 1));
    let retrying = deployment.run(&run_id).await;
    assert_eq!(retrying.state, RunState::Retrying);
    assert_eq!(retrying.attempts[0].outcome, Some(Outcome::TimedOut));

    pass(2);
    assert_eq!(attempts(&deployment.work(1, "w2").await), [2], "the watchdog sent the next attempt");
    assert_eq!(deployment.run(&run_id).await.state, RunState::Running);
    pass(6);
    let report = watchdog.run().await.unwrap();
    assert_eq!((report.timed_out, report.dispatched), (1, 0), "no attempt left to dispatch");
    let ended = deployment.run(&run_id).await;
    assert_eq!(ended.state, RunState::TimedOut);
    let outcomes: Vec<_> = ended.attempts.iter().map(|a| (a.n, a.worker.as_str(), a.outcome)).collect();
    assert_eq!(outcomes, [(1, "w1", Some(Outcome::TimedOut)), (2, "w2", Some(Outcome::TimedOut))]);
    assert_eq!(watchdog.run().await.unwrap().timed_out, 0);
    assert_eq!(deployment.told_about(&run_id).await, ["retrying", "timed_out"]);
}

/// A run past its SLA gets one `sla_missed` however many passes see it; one that ends past its
/// SLA between two passes gets one from the worker; and when the watchdog flags a run the
/// worker is finishing from an older read, the worker's write is redone without a second
/// `sla_missed`.
pub async fn sla_missed_is_told_once<H: Harness>() {
    let deployment = H::deploy_at(START, &[("SUNDIAL_HEARTBEAT_WINDOW_S", "3600")]).await;
    let mut now = t(START);
    let mut pass = |seconds: i64| {
        now += Duration::seconds(seconds);
        deployment.set_clock(now);
        now
    };
    let watchdog = &deployment.use_cases().watchdog;
    let api = deployment.api();
    let with_sla = json!({"sla_s": 60, "retry": {"max_attempts": 1}, "timeout_s": 600});

    // Still running past its SLA (its target accepted): the watchdog flags it, once in five
    // passes.
    let slow = api.create_job(ALICE, &yearly(&deployment, "slow", with_sla.clone())).await;
    deployment.answer_next(&[202]);
    let slow_run = deployment.trigger(&slow).await;
    deployment.work(1, "w1").await;
    assert_eq!(deployment.run(&slow_run).await.state, RunState::Running);
    pass(30);
    assert_eq!(watchdog.run().await.unwrap().sla_missed, 0, "not before the SLA");
    let mut flagged = 0;
    for _ in 0..5 {
        pass(40);
        flagged += watchdog.run().await.unwrap().sla_missed;
    }
    assert_eq!(flagged, 1);
    let slow_state = deployment.run(&slow_run).await;
    assert_eq!(slow_state.state, RunState::Running, "an SLA miss does not stop the run");
    assert!(slow_state.events.iter().any(|e| e.kind == EventKind::SlaMissed && e.sent));

    // Ends past its SLA between two passes: the worker's write carries the flag.
    let late = api.create_job(ALICE, &yearly(&deployment, "late", with_sla.clone())).await;
    let late_run = deployment.trigger(&late).await;
    watchdog.run().await.unwrap();
    pass(90);
    deployment.work(1, "w2").await;
    assert_eq!(deployment.run(&late_run).await.state, RunState::Succeeded);
    pass(60);
    assert_eq!(watchdog.run().await.unwrap().sla_missed, 0);

    // The watchdog flags a run between the worker's read and its write.
    let raced = api.create_job(ALICE, &yearly(&deployment, "raced", with_sla)).await;
    deployment.answer_next(&[202]);
    let raced_run = deployment.trigger(&raced).await;
    deployment.work(1, "w3").await;
    let read_by_worker = deployment.run(&raced_run).await;
    let now = pass(61);
    assert_eq!(watchdog.run().await.unwrap().sla_missed, 1);
    let job = deployment.stored_job(&raced).await.unwrap();
    let finish = Step::Finish { ending: Ending::new(Outcome::Succeeded), jitter: 0.5 };
    let done = deployment
        .use_cases()
        .recorder
        .apply(&job, &read_by_worker, &finish, now)
        .await
        .unwrap()
        .written()
        .unwrap();
    assert_eq!(done.state, RunState::Succeeded);
    assert_eq!(done.events.iter().filter(|e| e.kind == EventKind::SlaMissed).count(), 1);

    for run in [&slow_run, &late_run, &raced_run] {
        assert_eq!(deployment.told_about(run).await, ["sla_missed"], "{run}");
    }
}

/// Runs whose first attempt has not started a grace period after their due time are sent
/// again, whether their message was never sent (its claimer crashed) or waits in a backlog,
/// once per grace period; the extra messages start nothing twice.
pub async fn runs_not_started_in_time_are_sent_again_once_per_grace_period<H: Harness>() {
    let deployment = H::deploy_at(START, &[("SUNDIAL_DISPATCH_GRACE_S", "120")]).await;
    let watchdog = &deployment.use_cases().watchdog;
    let id = deployment.api().create_job(ALICE, &yearly(&deployment, "job", json!({}))).await;
    // A backlog: twenty runs sent and not yet consumed.
    for _ in 0..20 {
        deployment.trigger(&id).await;
    }
    // And one recorded and never sent.
    let now = t(START);
    let stored = deployment.stored_job(&id).await.unwrap();
    let claimer = &deployment.use_cases().claimer;
    let orphan = claimer.new_run(&stored, RunKey::manual(now), now, now);
    deployment.ports().runs.insert(&orphan, None).await.unwrap();

    deployment.set_clock(now + Duration::seconds(119));
    assert_eq!(watchdog.run().await.unwrap().dispatched, 0, "not before the grace period");
    deployment.set_clock(now + Duration::seconds(120));
    let report = watchdog.run().await.unwrap();
    assert_eq!((report.inspected, report.dispatched), (21, 21), "every run not started in time");
    assert!(deployment.run(&orphan.id()).await.resent_at.is_some());
    deployment.set_clock(now + Duration::seconds(239));
    assert_eq!(watchdog.run().await.unwrap().dispatched, 0, "once per grace period");

    let bodies = deployment.work(41, "w").await;
    let orphan_key = orphan.key.encode();
    let keys = bodies.iter().map(|b| serde_json::from_str::<Value>(b).unwrap()["run_key"].clone());
    assert_eq!(keys.filter(|k| *k == orphan_key.as_str()).count(), 1, "{bodies:?}");
    assert_eq!(deployment.target_calls().len(), 21, "each run once, duplicates dropped");
    let runs = deployment.runs_of(&id).await;
    assert!(runs.iter().all(|r| r.state == RunState::Succeeded), "{runs:?}");
    assert_eq!(runs.len(), 21);
}

/// The tick stopped for three minutes: one `scheduler_stalled` however many passes see it, then
/// one `scheduler_recovered` once the tick has caught up.
pub async fn a_stalled_scheduler_is_told_once_then_its_recovery<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T12:00:05Z", &[("SUNDIAL_STALL_AFTER_MINUTES", "3")]).await;
    let (tick, watchdog) = (&deployment.use_cases().tick, &deployment.use_cases().watchdog);
    tick.run().await.unwrap();
    deployment.set_clock(t("2030-01-01T12:00:30Z"));
    assert_eq!(watchdog.run().await.unwrap().alert, None);

    // No tick at 12:01, 12:02, 12:03.
    let mut alerts = Vec::new();
    for at in ["12:01:30", "12:02:30", "12:03:30", "12:04:30", "12:05:30"] {
        deployment.set_clock(t(&format!("2030-01-01T{at}Z")));
        alerts.extend(watchdog.run().await.unwrap().alert);
    }
    assert_eq!(alerts, ["scheduler_stalled"]);
    let health = deployment.ports().tick_state.get().await.unwrap();
    assert!(health.stalled_since.is_some() && health.unsent_alert.is_none(), "{health:?}");

    deployment.set_clock(t("2030-01-01T12:06:02Z"));
    tick.run().await.unwrap();
    deployment.set_clock(t("2030-01-01T12:06:30Z"));
    assert_eq!(watchdog.run().await.unwrap().alert.as_deref(), Some("scheduler_recovered"));
    deployment.set_clock(t("2030-01-01T12:07:30Z"));
    tick.run().await.unwrap();
    assert_eq!(watchdog.run().await.unwrap().alert, None);
    assert_eq!(deployment.told_alerts().await, ["scheduler_stalled", "scheduler_recovered"]);
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! watchdog_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => watchdog {
            a_run_past_its_timeout_is_retried_then_ends,
            sla_missed_is_told_once,
            runs_not_started_in_time_are_sent_again_once_per_grace_period,
            a_stalled_scheduler_is_told_once_then_its_recovery,
        });
    };
}
