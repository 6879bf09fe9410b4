//! A `kill -9` of the local runtime in the middle of a burst (issue #11): every run whose attempt
//! had not started when the process died runs within two minutes of the restart, and none runs
//! twice.
//!
//! The test drives the real `sundial-local` binary (built by `cargo build --workspace --bins`,
//! which `scripts/test` does first) against the emulator: N jobs all due at the same second call
//! a slow loopback target; once a part of them has been called, the runtime is killed with
//! SIGKILL. The runs still QUEUED with no attempt in the store at that moment are the ones whose
//! attempt had not started (their messages are on the queue, or held by the dead process until
//! their hold runs out). The runtime is restarted on the same stack, and the target's record of
//! calls shows when each of those runs was first called and that none was called again; no run
//! is called twice for the same attempt. It waits on the wall clock, so its name starts with
//! `realtime_` and `scripts/test` runs it in the serial real-time phase.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use chrono::{DateTime, Duration, SubsecRound, Utc};
use futures::StreamExt;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use sundial_aws::metrics::{Clients, Ledger};
use sundial_domain::run::{Run, RunId, RunKey, RunState};
use sundial_domain::target::headers;
use sundial_tests::runtime_process::{Logs, RuntimeSpec, wait_ready};
use sundial_wiring::config::{Config, aws_sdk_config};
use sundial_wiring::services::Services;

/// Jobs in the burst, all due at the same second.
const N: usize = 200;
/// Target calls seen before the kill: a quarter of the burst (the runtime has 40 in hand at once).
const KILL_AFTER: usize = 50;
/// How long the target takes to answer, so that the burst lasts and attempts are in flight.
const TARGET_DELAY: std::time::Duration = std::time::Duration::from_millis(2500);
/// The requirement: a run whose attempt had not started runs within this of the restart.
const WITHIN: Duration = Duration::seconds(120);
/// How long the test waits for them at most (past `WITHIN`, to report how late they were).
const WAIT: Duration = Duration::seconds(150);
/// How long calls are still watched for after the last expected one, to catch duplicates.
const QUIET: Duration = Duration::seconds(30);
/// Messages the dead process held come back within a minute (their hold); calls are watched at
/// least this long after the kill so that each of them has been received again.
const HELD_BACK: Duration = Duration::seconds(95);
const KEY: &str = "crash-key";

/// One call the target received.
#[derive(Debug, Clone)]
struct Hit {
    run_id: String,
    attempt: u32,
    at: DateTime<Utc>,
}

/// A loopback HTTP target that records every call and answers 200 after [`TARGET_DELAY`].
async fn start_target() -> (String, Arc<Mutex<Vec<Hit>>>) {
    let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
    let recorded = hits.clone();
    let app = axum::Router::new().fallback(move |request_headers: http::HeaderMap| {
        let hits = recorded.clone();
        async move {
            let header = |name: &str| {
                request_headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
            };
            let hit = Hit {
                run_id: header(headers::RUN_ID),
                attempt: header(headers::ATTEMPT).parse().unwrap_or(0),
                at: Utc::now(),
            };
            hits.lock().unwrap().push(hit);
            tokio::time::sleep(TARGET_DELAY).await;
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, hits)
}

/// The runtime on `stack`, serving its API on `listen`, with four workers.
fn runtime(stack: &str, listen: &str) -> RuntimeSpec {
    RuntimeSpec {
        stack: stack.to_string(),
        listen: listen.to_string(),
        api_keys: format!("{KEY}:crash"),
        workers: 4,
        env: Vec::new(),
    }
}

/// Starts the runtime (killed when dropped) and waits until it serves.
async fn start_runtime(spec: &RuntimeSpec, logs: &Logs) -> tokio::process::Child {
    let mut child = spec.spawn(logs);
    wait_ready(&mut child, &spec.api(), KEY, logs, std::time::Duration::from_secs(90)).await;
    child
}

/// Every run as stored now, by run id.
async fn read_runs(services: &Services, ids: &[RunId]) -> BTreeMap<String, Run> {
    futures::stream::iter(ids.iter().cloned())
        .map(|id| async move {
            let run = services.ports.runs.get(&id.job_id, &id.key).await.unwrap();
            (id.to_string(), run.unwrap_or_else(|| panic!("run {id} is not stored")))
        })
        .buffer_unordered(8)
        .collect()
        .await
}

fn count_by_state(runs: &BTreeMap<String, Run>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for run in runs.values() {
        *counts.entry(format!("{}@{}", run.state, run.attempt)).or_insert(0) += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realtime_kill_9_mid_burst_runs_every_unstarted_run_once_after_restart() {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL is not set: run the suite with scripts/test, which starts the emulator"
    );
    let began = Utc::now();
    let stack = format!("c{}", ulid::Ulid::generate().to_string().to_ascii_lowercase());
    // The test reads the same stack's runs table directly: provisioning is idempotent, the
    // runtime provisions it again at each start.
    let sdk = aws_sdk_config().await;
    let resources = sundial_aws::provision::provision(&sdk, &stack).await.expect("provisioning");
    let vars: HashMap<&str, &str> = HashMap::from([("SUNDIAL_STACK", stack.as_str())]);
    let config = Config::from_vars(&vars, Some(resources)).unwrap();
    let services = Services::new(
        config,
        &Clients::new(&sdk, Ledger::new()),
        Arc::new(sundial_domain::clock::SystemClock),
    );

    let (target_url, hits) = start_target().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let api = format!("http://{listen}");
    let base = std::env::temp_dir().join(format!("sundial-crash-{stack}"));
    let logs = Logs::at(&base);
    println!("stack {stack}, runtime log {}", logs.log.display());

    let spec = runtime(&stack, &listen);
    let mut runtime = start_runtime(&spec, &logs).await;

    // N jobs due at the same second, far enough ahead for all of them to be created first.
    let due = Utc::now().trunc_subsecs(0) + Duration::seconds(35);
    let client = reqwest::Client::new();
    let created_from = Utc::now();
    let job_ids: Vec<String> = futures::stream::iter(0..N)
        .map(|i| {
            let (client, api, target_url) = (client.clone(), api.clone(), target_url.clone());
            async move {
                let job = json!({
                    "name": format!("burst-{i:03}"),
                    "schedule": {"at": due.to_rfc3339()},
                    "target": {"type": "http", "url": target_url},
                    // A lost attempt's lease runs out a minute after it started.
                    "timeout_s": 30,
                });
                let reply =
                    client.post(format!("{api}/v1/jobs")).bearer_auth(KEY).json(&job).send().await.unwrap();
                let status = reply.status();
                let body: serde_json::Value = reply.json().await.unwrap();
                assert_eq!(status, reqwest::StatusCode::CREATED, "{body}");
                body["id"].as_str().unwrap().to_string()
            }
        })
        .buffered(8)
        .collect()
        .await;
    let created_in = Utc::now() - created_from;
    assert!(
        Utc::now() + Duration::seconds(2) < due,
        "creating {N} jobs took {created_in}: the burst's instant {due} was not ahead any more"
    );
    let run_ids: Vec<RunId> = job_ids
        .iter()
        .map(|id| RunId::new(sundial_domain::job::JobId::parse(id).unwrap(), RunKey::scheduled(due)))
        .collect();

    // The burst: kill -9 once a part of the runs have reached the target.
    let deadline = due + Duration::seconds(90);
    while hits.lock().unwrap().len() < KILL_AFTER {
        assert!(
            Utc::now() < deadline,
            "only {} of {N} runs were called 90 s after their instant",
            hits.lock().unwrap().len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    runtime.start_kill().unwrap(); // SIGKILL
    let killed_at = Utc::now();
    let status = runtime.wait().await.unwrap();
    let hits_before_kill = hits.lock().unwrap().clone();
    // Requests the process sent just before dying may still land in the emulator.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;

    // What had not started at the kill: QUEUED, attempt 0. A RUNNING run whose call never
    // reached the target is a started attempt (lost with the process), not one of these.
    let at_kill = read_runs(&services, &run_ids).await;
    let unstarted: Vec<String> = at_kill
        .iter()
        .filter(|(_, r)| r.state == RunState::Queued && r.attempt == 0)
        .map(|(id, _)| id.clone())
        .collect();
    let called_before_kill: HashMap<&str, usize> =
        hits_before_kill.iter().fold(HashMap::new(), |mut m, h| {
            *m.entry(h.run_id.as_str()).or_insert(0) += 1;
            m
        });
    for id in &unstarted {
        assert!(
            !called_before_kill.contains_key(id.as_str()),
            "run {id} was called but is QUEUED in the store"
        );
    }
    let started_uncalled = at_kill
        .iter()
        .filter(|(id, r)| r.attempt > 0 && !called_before_kill.contains_key(id.as_str()))
        .count();
    println!(
        "killed ({status}) {} s after the instant: {} calls, runs by state@attempt {:?}; {} unstarted, \
         {started_uncalled} started but not called",
        (killed_at - due).num_milliseconds() as f64 / 1000.0,
        hits_before_kill.len(),
        count_by_state(&at_kill),
        unstarted.len(),
    );
    assert!(!unstarted.is_empty(), "every run had started before the kill: nothing to show");

    // The restart, on the same stack and address.
    let restarted_at = Utc::now();
    let mut runtime = start_runtime(&spec, &logs).await;
    let ready_in = Utc::now() - restarted_at;

    let first_call = |hits: &[Hit], id: &str| hits.iter().filter(|h| h.run_id == id).map(|h| h.at).min();
    let give_up = restarted_at + WAIT;
    loop {
        let seen = hits.lock().unwrap().clone();
        if unstarted.iter().all(|id| first_call(&seen, id).is_some()) || Utc::now() > give_up {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let last_expected = {
        let seen = hits.lock().unwrap().clone();
        unstarted.iter().filter_map(|id| first_call(&seen, id)).max().unwrap_or(restarted_at)
    };
    // Duplicates: watch a while longer, and past the time the dead process's messages return.
    let watch_until = (last_expected + QUIET).max(killed_at + HELD_BACK).min(give_up + QUIET);
    while Utc::now() < watch_until {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let all_hits = hits.lock().unwrap().clone();
    let after = read_runs(&services, &run_ids).await;

    // Figures.
    let delays: Vec<(String, Option<Duration>)> = unstarted
        .iter()
        .map(|id| (id.clone(), first_call(&all_hits, id).map(|at| at - restarted_at)))
        .collect();
    let mut sorted: Vec<Duration> = delays.iter().filter_map(|(_, d)| *d).collect();
    sorted.sort();
    let max_delay = sorted.last().copied().unwrap_or_default();
    let median_delay = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    // Those whose message the dead process held: back only once its hold ran out.
    let held = sorted.iter().filter(|d| **d > Duration::seconds(30)).count();
    println!(
        "N {N} (created in {} s), calls before the kill {}, unstarted at the kill {}, restart ready in {} s, \
         delay after the restart median {} s max {} s ({held} over 30 s), calls in all {}, runs after by state@attempt {:?}, \
         took {} s",
        created_in.num_milliseconds() as f64 / 1000.0,
        hits_before_kill.len(),
        unstarted.len(),
        ready_in.num_milliseconds() as f64 / 1000.0,
        median_delay.num_milliseconds() as f64 / 1000.0,
        max_delay.num_milliseconds() as f64 / 1000.0,
        all_hits.len(),
        count_by_state(&after),
        (Utc::now() - began).num_seconds(),
    );

    // Explains a failed run: its state before and after, its calls and its log lines.
    let explain = |id: &str| {
        let calls: Vec<String> = all_hits
            .iter()
            .filter(|h| h.run_id == id)
            .map(|h| format!("attempt {} at {}", h.attempt, h.at))
            .collect();
        let state = |runs: &BTreeMap<String, Run>| {
            runs.get(id).map_or("unknown".to_string(), |r| format!("{} attempt {}", r.state, r.attempt))
        };
        format!(
            "run {id}: at the kill {}, now {} (attempts {:?}); calls {calls:?}; killed at {killed_at}, \
             restarted at {restarted_at}; log lines:\n{}",
            state(&at_kill),
            state(&after),
            after.get(id).map(|r| &r.attempts),
            logs.lines_with(id, 20).join("\n"),
        )
    };

    // Every unstarted run ran within two minutes of the restart...
    let late: Vec<String> = delays
        .iter()
        .filter(|(_, d)| d.is_none_or(|d| d > WITHIN))
        .map(|(id, _)| explain(id))
        .take(5)
        .collect();
    assert!(
        late.is_empty(),
        "{} of {} unstarted runs did not run within {WITHIN} of the restart; the first:\n{}",
        delays.iter().filter(|(_, d)| d.is_none_or(|d| d > WITHIN)).count(),
        unstarted.len(),
        late.join("\n\n")
    );
    // ...once...
    let twice: Vec<String> = unstarted
        .iter()
        .filter(|id| all_hits.iter().filter(|h| &h.run_id == *id).count() != 1)
        .map(|id| explain(id))
        .take(5)
        .collect();
    assert!(twice.is_empty(), "unstarted runs called more than once:\n{}", twice.join("\n\n"));
    // ...and succeeded with that one attempt.
    let unfinished: Vec<String> = unstarted
        .iter()
        .filter(|id| after[*id].state != RunState::Succeeded || after[*id].attempts.len() != 1)
        .map(|id| explain(id))
        .take(5)
        .collect();
    assert!(
        unfinished.is_empty(),
        "unstarted runs that did not succeed in one attempt:\n{}",
        unfinished.join("\n\n")
    );
    // No run of the whole burst was called twice for the same attempt.
    let mut per_attempt: BTreeMap<(&str, u32), usize> = BTreeMap::new();
    for h in &all_hits {
        *per_attempt.entry((h.run_id.as_str(), h.attempt)).or_insert(0) += 1;
    }
    let repeated: Vec<String> = per_attempt
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|((id, attempt), n)| format!("attempt {attempt} called {n} times; {}", explain(id)))
        .take(5)
        .collect();
    assert!(repeated.is_empty(), "attempts called more than once:\n{}", repeated.join("\n\n"));
    assert!(
        all_hits.iter().all(|h| !h.run_id.is_empty() && h.attempt > 0),
        "calls without a run id or attempt"
    );

    runtime.start_kill().unwrap();
    let _ = runtime.wait().await;
}
