//! The fault suite on the real processes (issue #15): the local runtime (`sundial-local`, the
//! binary `cargo build --workspace --bins` builds) runs a mix of 305 jobs (rates of 10 s, 20 s
//! and a minute, crons every minute and every 15 s in four time zones, one-time `at` jobs,
//! trigger-now runs, `forbid` jobs slower than their rate, jobs whose target fails with
//! retries, backoff and alerts) against the emulator for three to four minutes, while it is
//! killed with SIGKILL and restarted three times (mid-tick, mid-watchdog, after the pause), a
//! second runtime races it on the same stack for 40 s (then is killed too), and the emulator
//! itself is paused for 20 s (SIGSTOP, then SIGCONT, of the process listening on the port of
//! `AWS_ENDPOINT_URL`, or `SUNDIAL_EMULATOR_PID`). The runtimes run with the shipped defaults
//! but for four timings that keep the test short: instants are claimed one minute ahead instead
//! of five (so that every tick claims under the faults), and the watchdog re-sends unstarted
//! runs and late retries after 60 s and re-publishes unsent events after 30 s (defaults 120 s,
//! 120 s, 60 s); and `SUNDIAL_ALLOWED_SQS` lets the jobs' `notify` name the test's queue.
//!
//! Every schedule ends at a fixed instant (`end_at`), so the work stops by itself; the test then
//! waits (at most [`DRAIN`]) until every run has ended and every event has been published and
//! received, and reconciles three sources: the instants the schedules imply (the domain's
//! schedule maths over each job as stored, from its creation to the end), the runs in the
//! store, and the calls a loopback target recorded (run id, attempt, scheduled instant). Alerts
//! are counted on two SQS queues of the test's: one subscribed to the shared events topic (every
//! event) and one that the `notify` jobs name (their own topics, filtered). Definitions:
//!
//! - **expected**: every instant of every job's schedule (`catchup: all` on every job, so no
//!   downtime may drop one), plus one manual run per trigger the API accepted;
//! - **duplicates**: more than one run for a (job, instant) or for one trigger's
//!   `Idempotency-Key`; a target call for an attempt the run does not record; two calls for the
//!   same attempt; a call naming a run or an instant the store does not hold;
//! - **lost**: an expected instant (or accepted trigger) without a run; a run that `forbid`
//!   skipped is a run, SKIPPED with its reason;
//! - **stuck**: a run not terminal once the drain ends;
//! - **alerts**: each event recorded on a run is expected once on the shared topic's queue and,
//!   when the job's `notify` asks for it, once on the job's queue; a copy beyond the first is a
//!   duplicate, explained from the run's record and the fault timeline (the design allows one in
//!   a crash between publishing an event and marking it sent).
//!
//! It prints the report as Markdown and writes it to `target/fault-suite/report.md` (the
//! runtimes' logs next to it, in `target/fault-suite/<stack>/`). It asserts ≥ 300 jobs,
//! ≥ 2,000 runs, 0 duplicates, 0 lost, 0 stuck, 0 runs no schedule or trigger explains, no
//! `forbid` job with a run started while another was active, however close together they started
//! (the start fence leaves no race to excuse), and every recorded event received on each queue it goes to; lags are printed,
//! never asserted. Every process it starts is killed when it ends, panics included (the
//! emulator is resumed by the pause's own shell even if the test process dies). Its name
//! starts with `realtime_`, so `scripts/test` runs it in the serial real-time phase.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use chrono::{DateTime, Duration, DurationRound, SubsecRound, Utc};
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use sundial_aws::metrics::{Clients, Ledger};
use sundial_domain::job::{Job, JobId};
use sundial_domain::run::{Run, RunKey, RunState};
use sundial_domain::target::headers;
use sundial_tests::runtime_process::{
    EmulatorPause, Logs, RuntimeSpec, emulator_pid, free_loopback_port, wait_ready,
};
use sundial_wiring::config::{Config, aws_sdk_config};
use sundial_wiring::services::Services;
use tokio::sync::watch;

const KEY: &str = "faults-key";
const OWNER: &str = "faults";
/// Worker tasks per runtime (each with ten messages in hand).
const WORKERS: usize = 4;
/// One attempt's limit: a killed worker's attempt is lost (its lease, the limit plus 30 s, runs
/// out) 50 s after it started.
const TIMEOUT_S: u32 = 20;
/// How long the slow target (the `forbid` jobs') takes: longer than their 10 s rate.
const SLOW: std::time::Duration = std::time::Duration::from_secs(12);
/// How long the emulator is paused.
const PAUSE_S: u64 = 20;
/// How long after the last instant the test waits at most for every run to end and every event
/// to arrive: the last kill is 25 s before it, and its repairs take a lease (50 s), a watchdog
/// pass (every minute) and a re-send grace (60 s) at worst.
const DRAIN: Duration = Duration::seconds(200);
/// A trigger request is retried (same `Idempotency-Key`) this long at most: a claim left by a
/// killed request is taken over after 60 s.
const TRIGGER_RETRY: std::time::Duration = std::time::Duration::from_secs(120);
/// The least number of runs the suite must reconcile.
const MIN_RUNS: usize = 2_000;

// ---------------------------------------------------------------------------------------------
// The target

/// One call the target received.
#[derive(Debug, Clone)]
struct Hit {
    run_id: String,
    attempt: u32,
    scheduled_at: String,
    at: DateTime<Utc>,
}

/// A loopback HTTP target recording every call: `/ok` answers 200 after 20-400 ms (fixed per
/// run), `/slow` 200 after [`SLOW`], `/fail` 500 at once.
async fn start_target() -> (String, Arc<Mutex<Vec<Hit>>>) {
    let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
    let recorded = hits.clone();
    let app = axum::Router::new().fallback(move |uri: http::Uri, request_headers: http::HeaderMap| {
        let hits = recorded.clone();
        async move {
            let header = |name: &str| {
                request_headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
            };
            let hit = Hit {
                run_id: header(headers::RUN_ID),
                attempt: header(headers::ATTEMPT).parse().unwrap_or(0),
                scheduled_at: header(headers::SCHEDULED_AT),
                at: Utc::now(),
            };
            let spread = hit.run_id.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
            hits.lock().unwrap().push(hit);
            match uri.path() {
                "/slow" => {
                    tokio::time::sleep(SLOW).await;
                    (http::StatusCode::OK, "slow and done")
                }
                "/fail" => (http::StatusCode::INTERNAL_SERVER_ERROR, "failing on purpose"),
                _ => {
                    tokio::time::sleep(std::time::Duration::from_millis(20 + spread % 380)).await;
                    (http::StatusCode::OK, "ok")
                }
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, hits)
}

// ---------------------------------------------------------------------------------------------
// The job mix

/// The groups of the mix: (label, job name prefix, jobs).
const GROUPS: [(&str, &str, usize); 10] = [
    ("rate 10 s", "r10", 55),
    ("rate 20 s", "r20", 45),
    ("rate 20 s, start deadline", "late", 10),
    (TRIGGERED, "r60", 30),
    ("cron every minute", "cron", 20),
    ("cron every minute, zoned", "zoned", 40),
    ("cron every 15 s (6 fields)", "cron15s", 20),
    ("at, one instant", "at", 60),
    ("rate 10 s, forbid, slow", "forbid", 15),
    ("rate 1 min, failing", "failing", 10),
];

/// The group whose jobs are also triggered by hand.
const TRIGGERED: &str = "rate 1 min, triggered";

const ZONES: [&str; 4] = ["America/New_York", "Asia/Kathmandu", "Australia/Lord_Howe", "Europe/Berlin"];

/// The job documents of the mix: (group, document). Recurring schedules end at `end`; the `at`
/// instants are spread over `[at_from, end]`; `alerts` is the queue ARN the `notify` jobs name.
fn job_mix(
    target: &str,
    end: DateTime<Utc>,
    at_from: DateTime<Utc>,
    alerts: &str,
) -> Vec<(&'static str, Value)> {
    let mut jobs = Vec::new();
    let end_at = end.to_rfc3339();
    let ok = format!("{target}/ok");
    for (group, prefix, count) in GROUPS {
        for i in 0..count {
            let name = format!("{prefix}-{i:03}");
            let schedule = |extra: Value| {
                let mut s = json!({"end_at": end_at});
                s.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
                s
            };
            let mut job = json!({
                "name": name,
                "target": {"type": "http", "url": ok},
                "timeout_s": TIMEOUT_S,
                "catchup": "all",
            });
            let fields = match group {
                "rate 10 s" => json!({"schedule": schedule(json!({"rate": "10 seconds"}))}),
                "rate 20 s" => json!({"schedule": schedule(json!({"rate": "20 seconds"}))}),
                "rate 20 s, start deadline" => json!({
                    "schedule": schedule(json!({"rate": "20 seconds"})),
                    "start_deadline_s": 15,
                    "notify": {"on": ["late_start", "failed"], "sqs": [alerts]},
                }),
                TRIGGERED => json!({"schedule": schedule(json!({"rate": "1 minute"}))}),
                "cron every minute" => json!({"schedule": schedule(json!({"cron": "* * * * *"}))}),
                "cron every minute, zoned" => {
                    json!({"schedule": schedule(json!({"cron": "* * * * *", "timezone": ZONES[i % ZONES.len()]}))})
                }
                "cron every 15 s (6 fields)" => {
                    let zone = if i % 2 == 0 { "UTC" } else { "Asia/Kolkata" };
                    json!({"schedule": schedule(json!({"cron": "*/15 * * * * *", "timezone": zone}))})
                }
                "at, one instant" => {
                    let span = (end - at_from).num_seconds().max(1);
                    let at = at_from + Duration::seconds(span * i as i64 / count as i64);
                    json!({"schedule": {"at": at.to_rfc3339()}})
                }
                "rate 10 s, forbid, slow" => json!({
                    "schedule": schedule(json!({"rate": "10 seconds"})),
                    "concurrency": "forbid",
                    "target": {"type": "http", "url": format!("{target}/slow")},
                }),
                "rate 1 min, failing" => json!({
                    "schedule": schedule(json!({"rate": "1 minute"})),
                    "target": {"type": "http", "url": format!("{target}/fail")},
                    "retry": {"max_attempts": 3, "backoff_s": 5, "max_backoff_s": 10},
                    "alert_after_failures": 2,
                    "notify": {"on": ["retrying", "failed", "failing"], "sqs": [alerts]},
                }),
                other => unreachable!("group {other}"),
            };
            job.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
            jobs.push((group, job));
        }
    }
    jobs
}

// ---------------------------------------------------------------------------------------------
// The runtimes and the fault timeline

/// One `sundial-local` process (an incarnation: `a1`, `a2`, … `b1`).
#[derive(Debug)]
struct Runtime {
    name: String,
    spec: RuntimeSpec,
    child: tokio::process::Child,
    started: DateTime<Utc>,
}

/// What happened when, for the report and to explain duplicated alerts.
#[derive(Debug, Clone)]
struct Fault {
    at: DateTime<Utc>,
    until: Option<DateTime<Utc>>,
    what: String,
}

/// Starts the runtimes (each killed when its [`Runtime`] is dropped, a panic's unwinding
/// included: the child is `kill_on_drop`), keeps their logs in one folder and the faults in
/// order.
#[derive(Debug)]
struct Fleet {
    stack: String,
    dir: PathBuf,
    env: Vec<(String, String)>,
    started: usize,
    faults: Vec<Fault>,
}

impl Fleet {
    fn logs(&self, name: &str) -> Logs {
        Logs::at(&self.dir.join(name))
    }

    async fn start(&mut self, name: &str, listen: &str) -> Runtime {
        let spec = RuntimeSpec {
            stack: self.stack.clone(),
            listen: listen.to_string(),
            api_keys: format!("{KEY}:{OWNER}"),
            workers: WORKERS,
            env: self.env.clone(),
        };
        let logs = self.logs(name);
        let started = Utc::now();
        let mut child = spec.spawn(&logs);
        wait_ready(&mut child, &spec.api(), KEY, &logs, std::time::Duration::from_secs(90)).await;
        self.started += 1;
        println!(
            "{} {name} serving on {listen} (ready in {} ms)",
            stamp(Utc::now()),
            (Utc::now() - started).num_milliseconds()
        );
        Runtime { name: name.to_string(), spec, child, started }
    }

    /// SIGKILL, and waits for the process to be gone.
    async fn kill(&mut self, mut runtime: Runtime, why: &str) -> RuntimeSpec {
        runtime.child.start_kill().unwrap();
        let at = Utc::now();
        let status = runtime.child.wait().await.unwrap();
        println!("{} {} killed ({status}): {why}", stamp(at), runtime.name);
        self.faults.push(Fault {
            at,
            until: None,
            what: format!("SIGKILL {} ({why}; up {} s)", runtime.name, (at - runtime.started).num_seconds()),
        });
        runtime.spec
    }
}

fn stamp(t: DateTime<Utc>) -> String {
    t.format("%H:%M:%S%.3f").to_string()
}

async fn sleep_until(t: DateTime<Utc>) {
    if let Ok(wait) = (t - Utc::now()).to_std() {
        tokio::time::sleep(wait).await;
    }
}

/// When each fault falls. The first kill comes 2 s after a minute starts (mid-tick: with one
/// minute of claim-ahead, every tick claims the next minute of every job), the second at half
/// past (mid-watchdog) while a second runtime races the first; the emulator pause starts 5 s
/// into the next minute (ticks and workers of the runtime stall on it); the instants end 25 s
/// after the third kill. The first kill is 35-95 s after `start` (the minute's phase), so the
/// instants span 170-230 s.
#[derive(Debug, Clone, Copy)]
struct Timeline {
    kill_1: DateTime<Utc>,
    race_from: DateTime<Utc>,
    kill_2: DateTime<Utc>,
    race_to: DateTime<Utc>,
    pause_at: DateTime<Utc>,
    kill_3: DateTime<Utc>,
    /// The last instant of every schedule.
    end: DateTime<Utc>,
}

impl Timeline {
    fn from(start: DateTime<Utc>) -> Timeline {
        let minute = Duration::minutes(1);
        let first_minute = (start + Duration::seconds(35)).duration_trunc(minute).unwrap() + minute;
        let kill_1 = first_minute + Duration::seconds(2);
        let pause_at = first_minute + minute + Duration::seconds(5);
        let kill_3 = pause_at + Duration::seconds(PAUSE_S as i64 + 25);
        Timeline {
            kill_1,
            race_from: kill_1 + Duration::seconds(15),
            kill_2: first_minute + Duration::seconds(31),
            race_to: first_minute + Duration::seconds(55),
            pause_at,
            kill_3,
            end: (kill_3 + Duration::seconds(25)).trunc_subsecs(0),
        }
    }
}

/// Runs the faults of `timeline` on runtime `a` (restarted on its address after each kill), a
/// second runtime on `listen_b` and the emulator (`emulator`, its pid); returns the runtime
/// left serving once the last instant has come.
async fn inflict_faults(
    fleet: &mut Fleet,
    a: Runtime,
    listen_b: &str,
    emulator: u32,
    timeline: &Timeline,
) -> Runtime {
    sleep_until(timeline.kill_1).await;
    let spec = fleet.kill(a, "mid-tick").await;
    let a = fleet.start("a2", &spec.listen).await;
    sleep_until(timeline.race_from).await;
    let b = fleet.start("b1", listen_b).await;
    let race_started = Utc::now();
    sleep_until(timeline.kill_2).await;
    let spec = fleet.kill(a, "mid-watchdog, while b1 races").await;
    let a = fleet.start("a3", &spec.listen).await;
    sleep_until(timeline.race_to).await;
    fleet.kill(b, "the race's end").await;
    fleet.faults.push(Fault {
        at: race_started,
        until: Some(Utc::now()),
        what: "two runtimes on the stack (b1 beside a2, then a3)".into(),
    });

    sleep_until(timeline.pause_at).await;
    let pause = EmulatorPause::start(emulator, PAUSE_S);
    let paused_at = Utc::now();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !pause.is_stopped() {
        assert!(std::time::Instant::now() < deadline, "the emulator (pid {emulator}) did not stop");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    println!("{} emulator paused", stamp(paused_at));
    pause.finish().await;
    let resumed_at = Utc::now();
    println!("{} emulator resumed", stamp(resumed_at));
    fleet.faults.push(Fault {
        at: paused_at,
        until: Some(resumed_at),
        what: format!("emulator paused (SIGSTOP pid {emulator}, SIGCONT after {PAUSE_S} s)"),
    });

    sleep_until(timeline.kill_3).await;
    let spec = fleet.kill(a, "after the pause").await;
    let a = fleet.start("a4", &spec.listen).await;
    sleep_until(timeline.end).await;
    println!("{} the last instant; draining (at most {} s)", stamp(Utc::now()), DRAIN.num_seconds());
    a
}

/// Waits until every run of `created` has ended, every event recorded on them is marked sent
/// and both inboxes have received it, reading the store every 10 s, up to `until`; returns
/// when that was (`None`: not by `until`).
async fn drain(
    services: &Services,
    created: &[Created],
    alerts: &Mutex<Vec<Alert>>,
    until: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    loop {
        let ledger = read_ledger(services, created).await;
        let runs: Vec<&Run> = ledger.iter().flat_map(|(_, _, runs)| runs.iter()).collect();
        let in_flight = runs.iter().filter(|r| !r.state.is_terminal()).count();
        let unsent = runs.iter().flat_map(|r| r.events.iter()).filter(|e| !e.sent).count();
        let received: HashSet<(&str, EventKey)> = alerts
            .lock()
            .unwrap()
            .iter()
            .filter_map(|a| Some((a.inbox, notification_key(&a.notification)?)))
            .collect();
        let mut unreceived = 0;
        for (_, job, runs) in &ledger {
            for run in runs {
                for event in &run.events {
                    let key =
                        (run.id().to_string(), event.kind.as_str().to_string(), event.at.timestamp_micros());
                    unreceived += usize::from(!received.contains(&("shared", key.clone())));
                    let to_job =
                        event.kind.told().is_some_and(|kind| sundial_domain::events::wants(job, kind));
                    unreceived += usize::from(to_job && !received.contains(&("job", key)));
                }
            }
        }
        println!(
            "{} drain: {} runs, {in_flight} in flight, {unsent} events unsent, {unreceived} not received yet",
            stamp(Utc::now()),
            runs.len()
        );
        if in_flight == 0 && unsent == 0 && unreceived == 0 {
            return Some(Utc::now());
        }
        if Utc::now() > until {
            return None;
        }
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Triggers

/// One trigger-now request, retried with its `Idempotency-Key` until the API accepts it.
#[derive(Debug, Clone)]
struct Trigger {
    key: String,
    job_id: String,
    /// The run id of the 202.
    run_id: Option<String>,
    tries: usize,
    last_error: Option<String>,
}

/// Triggers `job_id` through whichever API answers, retrying with the same key.
async fn trigger(client: reqwest::Client, apis: Vec<String>, job_id: String, key: String) -> Trigger {
    let mut outcome =
        Trigger { key: key.clone(), job_id: job_id.clone(), run_id: None, tries: 0, last_error: None };
    let give_up = std::time::Instant::now() + TRIGGER_RETRY;
    'tries: while std::time::Instant::now() < give_up {
        for api in &apis {
            outcome.tries += 1;
            let reply = client
                .post(format!("{api}/v1/jobs/{job_id}/trigger"))
                .bearer_auth(KEY)
                .header("idempotency-key", &key)
                .json(&json!({}))
                .timeout(std::time::Duration::from_secs(40))
                .send()
                .await;
            match reply {
                Ok(r) if r.status() == reqwest::StatusCode::ACCEPTED => {
                    let body: Value = r.json().await.unwrap_or_default();
                    outcome.run_id = body["id"].as_str().map(str::to_string);
                    if outcome.run_id.is_some() {
                        break 'tries;
                    }
                }
                Ok(r) => {
                    outcome.last_error =
                        Some(format!("{}: {}", r.status(), r.text().await.unwrap_or_default()))
                }
                Err(e) => outcome.last_error = Some(e.to_string()),
            }
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    outcome
}

/// Triggers the jobs of `jobs` in turn, one every 5 s until `until`, each request retried
/// (same key) until accepted; returns every request's outcome once all are done.
async fn trigger_until(apis: Vec<String>, jobs: Vec<String>, until: DateTime<Utc>) -> Vec<Trigger> {
    let client = reqwest::Client::new();
    let mut pending = Vec::new();
    let mut n = 0;
    while Utc::now() < until {
        let job = jobs[n % jobs.len()].clone();
        let key = format!("fault-trigger-{n:03}");
        pending.push(tokio::spawn(trigger(client.clone(), apis.clone(), job, key)));
        n += 1;
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
    let mut done = Vec::new();
    for p in pending {
        done.push(p.await.unwrap());
    }
    done
}

// ---------------------------------------------------------------------------------------------
// The alert inboxes

/// One message received on an inbox.
#[derive(Debug, Clone)]
struct Alert {
    /// `shared` (the events topic) or `job` (the jobs' own topics).
    inbox: &'static str,
    /// The notification (the SNS envelope's `Message` on the shared inbox, raw on the job one).
    notification: Value,
    received_at: DateTime<Utc>,
}

/// Reads an inbox until `stop`, deleting what it reads; each SQS message once (by id), so that
/// a message this reader failed to delete is not counted twice.
async fn read_inbox(
    sqs: aws_sdk_sqs::Client,
    inbox: &'static str,
    url: String,
    into: Arc<Mutex<Vec<Alert>>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut seen: HashSet<String> = HashSet::new();
    loop {
        if *stop.borrow() {
            return;
        }
        let received = tokio::select! {
            r = sqs.receive_message().queue_url(&url).max_number_of_messages(10).wait_time_seconds(1).send() => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        let Ok(out) = received else {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            continue;
        };
        for m in out.messages.unwrap_or_default() {
            let id = m.message_id().unwrap_or_default().to_string();
            if seen.insert(id) {
                let body: Value = serde_json::from_str(m.body().unwrap_or("null")).unwrap_or(Value::Null);
                let notification = match inbox {
                    "shared" => body["Message"]
                        .as_str()
                        .and_then(|t| serde_json::from_str(t).ok())
                        .unwrap_or(Value::Null),
                    _ => body,
                };
                into.lock().unwrap().push(Alert { inbox, notification, received_at: Utc::now() });
            }
            if let Some(receipt) = m.receipt_handle() {
                let _ = sqs.delete_message().queue_url(&url).receipt_handle(receipt).send().await;
            }
        }
    }
}

/// An event's identity across the run record and the notification: (run id, kind, time).
type EventKey = (String, String, i64);

fn notification_key(n: &Value) -> Option<EventKey> {
    let at: DateTime<Utc> = n["at"].as_str()?.parse().ok()?;
    Some((n["run_id"].as_str()?.to_string(), n["event"].as_str()?.to_string(), at.timestamp_micros()))
}

// ---------------------------------------------------------------------------------------------
// The ledger

/// A job as created: its group, its id, and (read back from the store) the job itself.
#[derive(Debug, Clone)]
struct Created {
    group: &'static str,
    id: JobId,
}

/// Creates the jobs of `mix` through the API at `api`, eight at a time.
async fn create_jobs(api: &str, mix: Vec<(&'static str, Value)>) -> Vec<Created> {
    let client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(60)).build().unwrap();
    futures::stream::iter(mix)
        .map(|(group, doc)| {
            let client = client.clone();
            async move {
                let reply =
                    client.post(format!("{api}/v1/jobs")).bearer_auth(KEY).json(&doc).send().await.unwrap();
                let status = reply.status();
                let body: Value = reply.json().await.unwrap();
                assert_eq!(status, reqwest::StatusCode::CREATED, "{doc}: {body}");
                Created { group, id: JobId::parse(body["id"].as_str().unwrap()).unwrap() }
            }
        })
        .buffered(8)
        .collect()
        .await
}

/// Every run of `job`, oldest first.
async fn runs_of(services: &Services, job: &JobId) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = services.ports.runs.list(job, 100, cursor.as_deref(), None).await.unwrap();
        runs.extend(page.items);
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    runs.reverse();
    runs
}

/// Every job's stored definition and runs.
async fn read_ledger(services: &Services, jobs: &[Created]) -> Vec<(Created, Job, Vec<Run>)> {
    futures::stream::iter(jobs.iter().cloned())
        .map(|created| async move {
            let job = services.ports.jobs.get(&created.id).await.unwrap().expect("a created job is stored");
            let runs = runs_of(services, &created.id).await;
            (created, job, runs)
        })
        .buffered(12)
        .collect()
        .await
}

/// The instants `job`'s schedule implies from its creation on (its schedules all end).
fn expected_instants(job: &Job) -> Vec<DateTime<Utc>> {
    let schedule =
        sundial_domain::validation::stored_schedule(job).unwrap().expect("every job has a schedule");
    let mut instants = Vec::new();
    let mut next = schedule.first_at_or_after(job.created_at);
    while let Some(t) = next {
        instants.push(t);
        assert!(instants.len() < 10_000, "job {} has an unbounded schedule", job.id);
        next = schedule.next_after(t);
    }
    instants
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn seconds(ms: i64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// Where the report goes: `target/fault-suite/`.
fn suite_dir() -> PathBuf {
    let profile = sundial_tests::runtime_process::profile_dir();
    profile.parent().unwrap_or(&profile).join("fault-suite")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realtime_fault_suite_kills_races_and_pauses_without_duplicates_losses_or_stuck_runs() {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL is not set: run the suite with scripts/test, which starts the emulator"
    );
    // Found first: a suite that cannot pause the emulator fails before it starts anything.
    let emulator = emulator_pid().unwrap_or_else(|e| panic!("the emulator's process: {e}"));
    let began = Utc::now();
    let stack = format!("f{}", ulid::Ulid::generate().to_string().to_ascii_lowercase());
    // Only the last run's logs are kept.
    for old in std::fs::read_dir(suite_dir()).into_iter().flatten().flatten() {
        if old.path().is_dir() {
            let _ = std::fs::remove_dir_all(old.path());
        }
    }
    let dir = suite_dir().join(&stack);
    std::fs::create_dir_all(&dir).unwrap();
    println!("stack {stack}, emulator pid {emulator}, logs in {}", dir.display());

    // The stack, read directly by the test (provisioning is idempotent; each runtime does it
    // again when it starts), and the two inboxes.
    let sdk = aws_sdk_config().await;
    let resources = sundial_aws::provision::provision(&sdk, &stack).await.expect("provisioning");
    let vars: HashMap<&str, &str> = HashMap::from([("SUNDIAL_STACK", stack.as_str())]);
    let config = Config::from_vars(&vars, Some(resources.clone())).unwrap();
    let clients = Clients::new(&sdk, Ledger::new());
    let services = Services::new(config, &clients, Arc::new(sundial_domain::clock::SystemClock));
    let (shared_url, shared_arn) =
        sundial_tests::create_queue(&clients.sqs, &format!("ops-of-{stack}")).await;
    clients
        .sns
        .subscribe()
        .topic_arn(&resources.events_topic_arn)
        .protocol("sqs")
        .endpoint(&shared_arn)
        .send()
        .await
        .unwrap();
    let (job_inbox_url, job_inbox_arn) =
        sundial_tests::create_queue(&clients.sqs, &format!("alerts-of-{stack}")).await;
    let alerts: Arc<Mutex<Vec<Alert>>> = Arc::default();
    let (stop_inboxes, inboxes_stopped) = watch::channel(false);
    let readers = [("shared", shared_url), ("job", job_inbox_url)].map(|(inbox, url)| {
        tokio::spawn(read_inbox(clients.sqs.clone(), inbox, url, alerts.clone(), inboxes_stopped.clone()))
    });

    let (target, hits) = start_target().await;
    let mut fleet = Fleet {
        stack: stack.clone(),
        dir: dir.clone(),
        env: vec![
            ("SUNDIAL_CLAIM_AHEAD_S".into(), "60".into()),
            ("SUNDIAL_DISPATCH_GRACE_S".into(), "60".into()),
            ("SUNDIAL_RETRY_MARGIN_S".into(), "60".into()),
            ("SUNDIAL_PUBLISH_GRACE_S".into(), "30".into()),
            ("SUNDIAL_ALLOWED_SQS".into(), format!("arn:aws:sqs:*:*:*-of-{stack}")),
        ],
        started: 0,
        faults: Vec::new(),
    };
    let listen_a = format!("127.0.0.1:{}", free_loopback_port());
    let listen_b = format!("127.0.0.1:{}", free_loopback_port());
    let a = fleet.start("a1", &listen_a).await;

    let start = Utc::now();
    let timeline = Timeline::from(start);
    let end = timeline.end;

    let mix = job_mix(&target, end, start + Duration::seconds(45), &job_inbox_arn);
    let created = create_jobs(&a.spec.api(), mix).await;
    println!(
        "{} {} jobs created in {} s; instants end at {}",
        stamp(Utc::now()),
        created.len(),
        (Utc::now() - start).num_seconds(),
        stamp(end)
    );
    // Triggers every 5 s until 10 s before the end, through whichever runtime answers.
    let triggered: Vec<String> =
        created.iter().filter(|c| c.group == TRIGGERED).map(|c| c.id.to_string()).collect();
    let apis = vec![a.spec.api(), format!("http://{listen_b}")];
    let triggers = tokio::spawn(trigger_until(apis, triggered, end - Duration::seconds(10)));

    let a = inflict_faults(&mut fleet, a, &listen_b, emulator, &timeline).await;

    // The drain: every trigger answered, every run ended, every event published and received.
    let triggers = triggers.await.unwrap();
    let drained_at = drain(&services, &created, &alerts, end + DRAIN).await;
    // Late copies of events (a re-publish) and calls still arriving would show now.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let read_at = Utc::now();
    let ledger = read_ledger(&services, &created).await;
    let _ = stop_inboxes.send(true);
    for reader in readers {
        reader.await.unwrap();
    }
    let hits = hits.lock().unwrap().clone();
    let alerts = alerts.lock().unwrap().clone();
    drop(a); // SIGKILL: the runtime stops with the test.

    let mut findings = reconcile_runs(&ledger, &triggers, &hits);
    reconcile_alerts(&mut findings, &ledger, &alerts, &fleet.faults);
    let logs: Vec<Logs> = ["a1", "a2", "a3", "a4", "b1"].iter().map(|name| fleet.logs(name)).collect();
    let context = Context {
        stack: &stack,
        jobs: created.len(),
        start,
        end,
        runtimes: fleet.started,
        faults: &fleet.faults,
        drained_at,
        read_at,
        wall: Utc::now() - began,
    };
    let report = render(&findings, &context, &logs);
    println!("\n{report}");
    let path = suite_dir().join("report.md");
    std::fs::write(&path, &report).unwrap();
    println!("report written to {}", path.display());

    let f = &findings;
    assert!(created.len() >= 300, "{} jobs", created.len());
    assert!(f.created >= MIN_RUNS, "only {} runs: the suite must reconcile at least {MIN_RUNS}", f.created);
    assert_eq!(f.duplicates(), 0, "duplicates: see the report");
    assert!(f.lost.is_empty(), "lost instants: see the report");
    assert!(f.stuck.is_empty(), "stuck runs: see the report");
    assert!(f.unexpected.is_empty(), "runs no schedule or trigger explains: see the report");
    assert!(f.forbid_violations.is_empty(), "forbid jobs with two runs active at once: see the report");
    assert!(f.missing_alerts.is_empty(), "events recorded on runs never received: see the report");
}

// ---------------------------------------------------------------------------------------------
// Reconciliation

/// One group's runs: jobs, expected, created, and the runs by state.
#[derive(Debug, Default)]
struct GroupTally {
    jobs: usize,
    expected: usize,
    created: usize,
    states: BTreeMap<String, usize>,
}

/// One inbox's alerts: expected and received copies by event kind.
#[derive(Debug, Default)]
struct AlertTally {
    expected: usize,
    copies: usize,
    duplicated: usize,
    missing: usize,
    by_kind: BTreeMap<String, (usize, usize)>,
}

/// What the three sources (schedules and triggers, the store, the target's calls) and the two
/// inboxes say once reconciled; each list holds the evidence of one kind of finding.
#[derive(Debug, Default)]
struct Findings {
    expected: usize,
    created: usize,
    triggers_accepted: usize,
    triggers_unanswered: usize,
    duplicate_runs: Vec<String>,
    unrecorded_calls: Vec<String>,
    repeated_calls: Vec<String>,
    unknown_calls: Vec<String>,
    lost: Vec<String>,
    stuck: Vec<String>,
    unexpected: Vec<String>,
    by_state: BTreeMap<String, usize>,
    skip_reasons: BTreeMap<String, usize>,
    outcomes: BTreeMap<String, usize>,
    resent: usize,
    executions: BTreeMap<usize, usize>,
    calls: usize,
    lags_ms: Vec<i64>,
    forbid_violations: Vec<String>,
    groups: BTreeMap<&'static str, GroupTally>,
    alerts: BTreeMap<&'static str, AlertTally>,
    missing_alerts: Vec<String>,
    duplicated_alerts: Vec<String>,
    unknown_alerts: Vec<String>,
    operator_events: BTreeMap<String, usize>,
}

impl Findings {
    fn duplicates(&self) -> usize {
        self.duplicate_runs.len()
            + self.unrecorded_calls.len()
            + self.repeated_calls.len()
            + self.unknown_calls.len()
    }
}

/// A run of a `forbid` job that started: from its first attempt's start to its last one's end,
/// and the times the target was called for it.
#[derive(Debug)]
struct Active<'a> {
    run: &'a Run,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    calls: Vec<DateTime<Utc>>,
}

/// Counts a run's skip reason by its wording (the active run it names left out).
fn reason_wording(reason: &str) -> String {
    reason
        .split(' ')
        .map(|w| if sundial_domain::run::RunId::parse(w).is_some() { "<run>" } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs against instants and triggers, calls against runs, and `forbid` against both.
fn reconcile_runs(ledger: &[(Created, Job, Vec<Run>)], triggers: &[Trigger], hits: &[Hit]) -> Findings {
    let mut f = Findings { calls: hits.len(), ..Findings::default() };
    let mut hits_by_run: HashMap<&str, Vec<&Hit>> = HashMap::new();
    for h in hits {
        hits_by_run.entry(h.run_id.as_str()).or_default().push(h);
    }
    // A manual run's ULID ends with the digest of its request's key (RunKey::manual_for): a
    // manual run is matched to the trigger request that made it.
    let key_suffix = |job_id: &str, key: &str| {
        let seed = format!("{OWNER}\n{job_id}\n{key}");
        RunKey::manual_for(Utc::now(), seed.as_bytes()).manual.unwrap()[10..].to_string()
    };
    let suffixes: HashMap<(String, String), &Trigger> =
        triggers.iter().map(|t| ((t.job_id.clone(), key_suffix(&t.job_id, &t.key)), t)).collect();
    f.triggers_accepted = triggers.iter().filter(|t| t.run_id.is_some()).count();
    f.triggers_unanswered = triggers.len() - f.triggers_accepted;

    let mut stored: HashSet<String> = HashSet::new();
    for (c, job, runs) in ledger {
        let instants = expected_instants(job);
        let accepted = triggers.iter().filter(|t| t.job_id == job.id.as_str() && t.run_id.is_some()).count();
        let mut scheduled: BTreeMap<DateTime<Utc>, usize> = BTreeMap::new();
        let mut by_trigger: HashMap<String, Vec<String>> = HashMap::new();
        let group = f.groups.entry(c.group).or_default();
        group.jobs += 1;
        group.expected += instants.len() + accepted;
        group.created += runs.len();
        for run in runs {
            let id = run.id().to_string();
            stored.insert(id.clone());
            *group.states.entry(run.state.to_string()).or_insert(0) += 1;
            *f.by_state.entry(run.state.to_string()).or_insert(0) += 1;
            match &run.key.manual {
                None => *scheduled.entry(run.key.instant).or_insert(0) += 1,
                Some(ulid) => {
                    let suffix = ulid.get(10..).unwrap_or_default().to_string();
                    match suffixes.get(&(job.id.to_string(), suffix)) {
                        Some(t) => by_trigger.entry(t.key.clone()).or_default().push(id.clone()),
                        None => f.unexpected.push(format!("{id}: a manual run no trigger of the test made")),
                    }
                }
            }
            if !run.state.is_terminal() {
                let attempts: Vec<String> =
                    run.attempts.iter().map(|a| format!("{} {:?} by {}", a.n, a.outcome, a.worker)).collect();
                f.stuck.push(format!(
                    "{id}: {} at attempt {} (due {}; attempts {attempts:?})",
                    run.state, run.attempt, run.due_at
                ));
            }
            if run.state == RunState::Skipped {
                *f.skip_reasons.entry(reason_wording(run.reason.as_deref().unwrap_or(""))).or_insert(0) += 1;
            }
            for attempt in &run.attempts {
                let outcome = attempt.outcome.map_or("open".to_string(), |o| format!("{o:?}").to_lowercase());
                *f.outcomes.entry(outcome).or_insert(0) += 1;
            }
            f.resent += usize::from(run.resent_at.is_some());

            // Its calls: each of a recorded attempt, once, for its own instant.
            let calls = hits_by_run.get(id.as_str()).cloned().unwrap_or_default();
            *f.executions.entry(calls.len()).or_insert(0) += 1;
            let mut per_attempt: BTreeMap<u32, usize> = BTreeMap::new();
            for h in &calls {
                *per_attempt.entry(h.attempt).or_insert(0) += 1;
                if !run.attempts.iter().any(|a| a.n == h.attempt) {
                    f.unrecorded_calls.push(format!(
                        "{id}: attempt {} called at {} is not recorded",
                        h.attempt,
                        stamp(h.at)
                    ));
                }
                if h.scheduled_at.parse::<DateTime<Utc>>().ok() != Some(run.key.instant) {
                    f.unknown_calls
                        .push(format!("{id}: called with the scheduled instant `{}`", h.scheduled_at));
                }
            }
            for (attempt, n) in per_attempt.into_iter().filter(|(_, n)| *n > 1) {
                f.repeated_calls.push(format!("{id}: attempt {attempt} called {n} times"));
            }
            if let Some(first) = calls.iter().map(|h| h.at).min() {
                f.lags_ms.push((first - run.due_at).num_milliseconds());
            }
        }
        f.expected += instants.len() + accepted;
        f.created += runs.len();

        for t in &instants {
            if !scheduled.contains_key(t) {
                f.lost.push(format!("{} ({}): instant {t} has no run", job.id, c.group));
            }
        }
        let implied: HashSet<&DateTime<Utc>> = instants.iter().collect();
        for (t, n) in &scheduled {
            if *n > 1 {
                f.duplicate_runs.push(format!("{} instant {t}: {n} runs", job.id));
            }
            if !implied.contains(t) {
                f.unexpected.push(format!(
                    "{} ({}): a run at {t}, which the schedule does not imply",
                    job.id, c.group
                ));
            }
        }
        for t in triggers.iter().filter(|t| t.job_id == job.id.as_str()) {
            let found = by_trigger.get(&t.key).cloned().unwrap_or_default();
            if found.len() > 1 {
                f.duplicate_runs.push(format!("trigger {} of {}: runs {found:?}", t.key, job.id));
            }
            if let Some(id) = t.run_id.as_ref().filter(|id| !found.contains(id)) {
                f.lost.push(format!("{id}: accepted for trigger {}, not in the store", t.key));
            }
        }
        if job.document.concurrency == sundial_domain::job::ConcurrencyPolicy::Forbid {
            check_forbid(&mut f, runs, &hits_by_run);
        }
    }
    for h in hits.iter().filter(|h| !stored.contains(&h.run_id)) {
        f.unknown_calls
            .push(format!("a call for run `{}` (attempt {}) the store does not hold", h.run_id, h.attempt));
    }
    f.lags_ms.sort_unstable();
    f
}

/// Under `forbid` no two runs of a job are active at once: neither in the store (from a run's
/// first attempt's start to its last one's end) nor at the target. Every overlap is a violation,
/// however close together the two first attempts started.
fn check_forbid(f: &mut Findings, runs: &[Run], hits_by_run: &HashMap<&str, Vec<&Hit>>) {
    let slow = Duration::from_std(SLOW).unwrap();
    let started: Vec<Active> = runs
        .iter()
        .filter_map(|run| {
            let from = run.attempts.first()?.started_at;
            let to = run.attempts.last()?.finished_at.unwrap_or(DateTime::<Utc>::MAX_UTC);
            let calls =
                hits_by_run.get(run.id().to_string().as_str()).into_iter().flatten().map(|h| h.at).collect();
            Some(Active { run, from, to, calls })
        })
        .collect();
    for (i, one) in started.iter().enumerate() {
        for other in &started[i + 1..] {
            let in_store = one.from < other.to && other.from < one.to;
            let at_target =
                one.calls.iter().any(|c1| other.calls.iter().any(|c2| *c1 < *c2 + slow && *c2 < *c1 + slow));
            if !in_store && !at_target {
                continue;
            }
            let gap = (one.from - other.from).abs();
            let line = format!(
                "{} and {}: first attempts started at {} and {} ({} ms apart), ended at {} and {}{}",
                one.run.id(),
                other.run.id(),
                stamp(one.from),
                stamp(other.from),
                gap.num_milliseconds(),
                stamp(one.to),
                stamp(other.to),
                if at_target { "; the target ran both at once" } else { "" },
            );
            f.forbid_violations.push(line);
        }
    }
}

/// The events recorded on runs against the copies the two inboxes received.
fn reconcile_alerts(
    f: &mut Findings,
    ledger: &[(Created, Job, Vec<Run>)],
    alerts: &[Alert],
    faults: &[Fault],
) {
    type Expected<'a> = HashMap<EventKey, (&'a Run, &'a sundial_domain::run::RunEvent)>;
    let mut expected: BTreeMap<&'static str, Expected> = BTreeMap::new();
    for (_, job, runs) in ledger {
        for run in runs {
            for event in &run.events {
                let key =
                    (run.id().to_string(), event.kind.as_str().to_string(), event.at.timestamp_micros());
                expected.entry("shared").or_default().insert(key.clone(), (run, event));
                if event.kind.told().is_some_and(|kind| sundial_domain::events::wants(job, kind)) {
                    expected.entry("job").or_default().insert(key, (run, event));
                }
            }
        }
    }
    let mut received: BTreeMap<&'static str, HashMap<EventKey, Vec<DateTime<Utc>>>> = BTreeMap::new();
    for alert in alerts {
        match notification_key(&alert.notification) {
            Some(key) => {
                received.entry(alert.inbox).or_default().entry(key).or_default().push(alert.received_at)
            }
            None => {
                let name = alert.notification["event"].as_str().unwrap_or("unreadable").to_string();
                *f.operator_events.entry(format!("{name} ({})", alert.inbox)).or_insert(0) += 1;
            }
        }
    }
    for inbox in ["shared", "job"] {
        let wanted = expected.remove(inbox).unwrap_or_default();
        let got = received.remove(inbox).unwrap_or_default();
        let mut tally = AlertTally { expected: wanted.len(), ..AlertTally::default() };
        for key in wanted.keys() {
            tally.by_kind.entry(key.1.clone()).or_default().0 += 1;
        }
        for (key, copies) in &got {
            tally.copies += copies.len();
            tally.by_kind.entry(key.1.clone()).or_default().1 += copies.len();
            if !wanted.contains_key(key) {
                f.unknown_alerts
                    .push(format!("{inbox} topic: {} `{}` at {}: on no run record", key.0, key.1, key.2));
            }
        }
        for (key, (run, event)) in &wanted {
            match got.get(key) {
                None => {
                    tally.missing += 1;
                    f.missing_alerts
                        .push(format!("{inbox} topic: {} `{}` (marked sent: {})", key.0, key.1, event.sent));
                }
                Some(copies) if copies.len() > 1 => {
                    tally.duplicated += 1;
                    f.duplicated_alerts.push(explain_duplicate(inbox, run, event, copies, faults));
                }
                Some(_) => {}
            }
        }
        f.alerts.insert(inbox, tally);
    }
}

/// Why an event reached an inbox more than once: who published it and which fault came between
/// its publication and the mark that it was sent.
fn explain_duplicate(
    inbox: &str,
    run: &Run,
    event: &sundial_domain::run::RunEvent,
    copies: &[DateTime<Utc>],
    faults: &[Fault],
) -> String {
    let first = copies.iter().min().copied().unwrap_or(event.at);
    let last = copies.iter().max().copied().unwrap_or(event.at);
    let window_end = event.taken_at.unwrap_or(last);
    let between: Vec<String> = faults
        .iter()
        .filter(|f| f.until.unwrap_or(f.at) >= event.at - Duration::seconds(1) && f.at <= window_end)
        .map(|f| format!("{} at {}", f.what, stamp(f.at)))
        .collect();
    let why = match (event.taken_at, between.is_empty()) {
        (Some(taken), false) => format!(
            "published at {} by the process that recorded it, then {}: that process was gone (or stalled) before it marked the event sent, so a watchdog pass took it over at {} and published it again — the crash window between publish and mark that the invariant `one alert per event` allows",
            stamp(event.at),
            between.join("; "),
            stamp(taken)
        ),
        (Some(taken), true) => format!(
            "re-published by a watchdog pass at {} with no fault in between: the first publisher's mark did not land within the publish grace (UNEXPLAINED by a fault)",
            stamp(taken)
        ),
        (None, _) => "no watchdog take-over on the record: a second publish by the same publisher or a redelivery by SNS or SQS (UNEXPLAINED by the run record)".to_string(),
    };
    format!(
        "{inbox} topic: `{}` `{}` recorded at {}, {} copies received ({} … {}): {why}",
        run.id(),
        event.kind.as_str(),
        stamp(event.at),
        copies.len(),
        stamp(first),
        stamp(last)
    )
}

// ---------------------------------------------------------------------------------------------
// The report

/// What the report says about the run itself.
#[derive(Debug)]
struct Context<'a> {
    stack: &'a str,
    jobs: usize,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    runtimes: usize,
    faults: &'a [Fault],
    drained_at: Option<DateTime<Utc>>,
    /// When the store was read for the last time (the "stuck" cut-off).
    read_at: DateTime<Utc>,
    wall: Duration,
}

fn joined<K: std::fmt::Display, V: std::fmt::Display>(map: &BTreeMap<K, V>, sep: &str) -> String {
    if map.is_empty() {
        return "none".into();
    }
    map.iter().map(|(k, v)| format!("{k}{sep}{v}")).collect::<Vec<_>>().join(", ")
}

/// The report in Markdown: the figures, the faults, the groups, then the evidence of every
/// finding (with the runtimes' log lines that name the run).
fn render(f: &Findings, c: &Context, logs: &[Logs]) -> String {
    let mut r = String::new();
    let lags = &f.lags_ms;
    let executed: usize = f.executions.iter().filter(|(n, _)| **n > 0).map(|(_, runs)| runs).sum();
    let lines = [
        "# Fault suite: `sundial-local` under kill -9, a race and an emulator pause\n".to_string(),
        format!(
            "Stack `{}`, {} jobs, instants from {} to {} UTC ({} s), {} runtime processes started.\n",
            c.stack,
            c.jobs,
            stamp(c.start),
            stamp(c.end),
            (c.end - c.start).num_seconds(),
            c.runtimes
        ),
        "| measure | value |\n|---|---|".to_string(),
        format!(
            "| expected (instants + accepted triggers) | {} ({} triggers accepted, {} unanswered) |",
            f.expected, f.triggers_accepted, f.triggers_unanswered
        ),
        format!("| created (runs in the store) | {} |", f.created),
        format!(
            "| duplicates | {} (runs per instant or per trigger > 1: {}; calls of unrecorded attempts: {}; attempts called twice: {}; calls of unknown runs or instants: {}) |",
            f.duplicates(),
            f.duplicate_runs.len(),
            f.unrecorded_calls.len(),
            f.repeated_calls.len(),
            f.unknown_calls.len()
        ),
        format!("| lost | {} |", f.lost.len()),
        format!(
            "| stuck (not terminal {} s after the last instant) | {} |",
            (c.read_at - c.end).num_seconds(),
            f.stuck.len()
        ),
        format!("| unexpected runs | {} |", f.unexpected.len()),
        format!("| runs by state | {} |", joined(&f.by_state, " ")),
        format!("| skipped, by reason | {} |", joined(&f.skip_reasons, ": ")),
        format!(
            "| attempts by outcome | {}; {} runs re-sent by the watchdog |",
            joined(&f.outcomes, " "),
            f.resent
        ),
        format!(
            "| executions per run (calls: runs) | {}; {} calls for {executed} runs |",
            joined(&f.executions, ": "),
            f.calls
        ),
        format!("| `forbid`: two runs active at once | {} violations |", f.forbid_violations.len()),
    ];
    for line in lines {
        writeln!(r, "{line}").unwrap();
    }
    for (inbox, t) in &f.alerts {
        let by_kind =
            t.by_kind.iter().map(|(k, (e, g))| format!("{k} {e}/{g}")).collect::<Vec<_>>().join(", ");
        writeln!(
            r,
            "| alerts, {inbox} topic: expected / received | {} / {} ({} duplicated, {} missing); by event {by_kind} |",
            t.expected, t.copies, t.duplicated, t.missing
        )
        .unwrap();
    }
    writeln!(r, "| alerts on no run record | {} |", f.unknown_alerts.len()).unwrap();
    writeln!(r, "| operator events (no run) | {} |", joined(&f.operator_events, ": ")).unwrap();
    writeln!(
        r,
        "| start lag, first call − due (p50 / p95 / p99 / max) | {} / {} / {} / {} over {} runs |",
        seconds(percentile(lags, 50.0)),
        seconds(percentile(lags, 95.0)),
        seconds(percentile(lags, 99.0)),
        seconds(lags.last().copied().unwrap_or(0)),
        lags.len()
    )
    .unwrap();
    let drained = match c.drained_at {
        Some(t) => format!("{} s after the last instant", (t - c.end).num_seconds()),
        None => format!("not within {} s", DRAIN.num_seconds()),
    };
    writeln!(r, "| drained | {drained} |").unwrap();
    writeln!(r, "| wall time | {} s |", c.wall.num_seconds()).unwrap();

    writeln!(r, "\n## Faults\n\n| at | until | fault |\n|---|---|---|").unwrap();
    let mut faults = c.faults.to_vec();
    faults.sort_by_key(|f| f.at);
    for fault in &faults {
        writeln!(
            r,
            "| {} | {} | {} |",
            stamp(fault.at),
            fault.until.map(stamp).unwrap_or_default(),
            fault.what
        )
        .unwrap();
    }
    writeln!(
        r,
        "\n## By group\n\n| group | jobs | expected | created | runs by state |\n|---|---|---|---|---|"
    )
    .unwrap();
    for (group, g) in &f.groups {
        writeln!(r, "| {group} | {} | {} | {} | {} |", g.jobs, g.expected, g.created, joined(&g.states, " "))
            .unwrap();
    }
    writeln!(r, "\n## Duplicated alerts\n").unwrap();
    if f.duplicated_alerts.is_empty() {
        writeln!(r, "None.").unwrap();
    }
    for d in &f.duplicated_alerts {
        writeln!(r, "- {d}").unwrap();
    }
    let evidence: [(&str, &Vec<String>); 10] = [
        ("Duplicate runs", &f.duplicate_runs),
        ("Calls of unrecorded attempts", &f.unrecorded_calls),
        ("Attempts called twice", &f.repeated_calls),
        ("Calls of unknown runs or instants", &f.unknown_calls),
        ("Lost", &f.lost),
        ("Stuck", &f.stuck),
        ("Unexpected runs", &f.unexpected),
        ("`forbid` violations", &f.forbid_violations),
        ("Missing alerts", &f.missing_alerts),
        ("Alerts on no run record", &f.unknown_alerts),
    ];
    for (what, items) in evidence.iter().filter(|(_, items)| !items.is_empty()) {
        writeln!(r, "\n## {what} (the first 20 of {})\n", items.len()).unwrap();
        for item in items.iter().take(20) {
            writeln!(r, "- {item}").unwrap();
            let run_id = item.split([' ', ':']).next().unwrap_or_default();
            if sundial_domain::run::RunId::parse(run_id).is_some() {
                for line in logs.iter().flat_map(|l| l.lines_with(run_id, 3)) {
                    writeln!(r, "    - log: {line}").unwrap();
                }
            }
        }
    }
    r
}
