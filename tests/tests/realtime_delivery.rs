//! Concurrency groups and at-most-once delivery on the real processes: two `sundial-local`
//! runtimes on one stack (their ticks and workers racing on the same queue and tables) against
//! loopback HTTP targets that count what reaches them.
//!
//! - A group with `max_running: 2` and six runs of 4 s started together: the target never has
//!   more than two calls in flight, all six succeed with one attempt each (waiting spends none).
//! - An at-most-once job whose target hangs past `timeout_s`, with `max_attempts: 3`, is called
//!   exactly once; one whose target refuses connections is tried again, per `retry`.
//! - An at-most-once run whose runtime is killed (SIGKILL) in the middle of its call is not
//!   called again by the runtime that takes over: its attempt ends `lost`, the run FAILED.
//! - A `forbid` job and a `replace` job whose calls take 8 s, each backfilled over six past
//!   minutes (six runs sent at once, handled by eight workers of two runtimes): the target never
//!   has two calls of one job open at once (a replaced run's call is stopped before the next
//!   starts), and each job's runs end as its policy says.
//!
//! They wait on the wall clock, so their names start with `realtime_` and `scripts/test` runs
//! them in the serial real-time phase.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use sundial_domain::target::headers;
use sundial_tests::runtime_process::{Logs, RuntimeSpec, free_loopback_port, wait_ready};

const KEY: &str = "delivery-key";

/// A loopback target that answers 200 after a while, counting calls and the most in flight.
#[derive(Debug, Default)]
struct Counting {
    calls: AtomicUsize,
    in_flight: AtomicUsize,
    most: AtomicUsize,
    runs: std::sync::Mutex<Vec<String>>,
}

async fn start_counting(delay: std::time::Duration) -> (String, Arc<Counting>) {
    let counting = Arc::new(Counting::default());
    let seen = counting.clone();
    let app = axum::Router::new().fallback(move |request_headers: http::HeaderMap| {
        let c = seen.clone();
        async move {
            let run = request_headers.get(headers::RUN_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
            c.runs.lock().unwrap().push(run.to_string());
            c.calls.fetch_add(1, Ordering::SeqCst);
            let now = c.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            c.most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(delay).await;
            c.in_flight.fetch_sub(1, Ordering::SeqCst);
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, counting)
}

/// Two runtimes on one new stack, each with four workers; killed when dropped.
struct Pair {
    apis: [String; 2],
    children: Vec<tokio::process::Child>,
    client: reqwest::Client,
}

impl Pair {
    async fn start(name: &str) -> Pair {
        assert!(
            std::env::var("AWS_ENDPOINT_URL").is_ok(),
            "AWS_ENDPOINT_URL is not set: run the suite with scripts/test, which starts the emulator"
        );
        let stack = format!("d{}", ulid::Ulid::generate().to_string().to_ascii_lowercase());
        let mut children = Vec::new();
        let mut apis = Vec::new();
        for i in 0..2 {
            let listen = format!("127.0.0.1:{}", free_loopback_port());
            let logs = Logs::at(&std::env::temp_dir().join(format!("sundial-{name}-{stack}-{i}")));
            let spec = RuntimeSpec {
                stack: stack.clone(),
                listen,
                api_keys: format!("{KEY}:delivery"),
                workers: 4,
                env: Vec::new(),
            };
            let mut child = spec.spawn(&logs);
            wait_ready(&mut child, &spec.api(), KEY, &logs, std::time::Duration::from_secs(90)).await;
            println!("runtime {i}: {} (log {})", spec.api(), logs.log.display());
            apis.push(spec.api());
            children.push(child);
        }
        Pair { apis: [apis[0].clone(), apis[1].clone()], children, client: reqwest::Client::new() }
    }

    async fn send(
        &self,
        which: usize,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut request = self.client.request(method, format!("{}{path}", self.apis[which])).bearer_auth(KEY);
        if let Some(body) = body {
            request = request.json(body);
        }
        let reply = request.send().await.unwrap();
        let status = reply.status().as_u16();
        (status, reply.json().await.unwrap_or(Value::Null))
    }

    /// Polls the run through runtime `which` until it has ended, up to `within`.
    async fn ended(&self, which: usize, run: &str, within: std::time::Duration) -> Value {
        let deadline = std::time::Instant::now() + within;
        loop {
            let (_, body) = self.send(which, reqwest::Method::GET, &format!("/v1/runs/{run}"), None).await;
            let state = body["state"].as_str().unwrap_or("");
            if !["QUEUED", "RUNNING", "RETRYING", ""].contains(&state) {
                return body;
            }
            assert!(std::time::Instant::now() < deadline, "run {run} still {state} after {within:?}: {body}");
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realtime_a_group_limit_holds_across_two_runtimes() {
    let pair = Pair::start("groups").await;
    let (url, target) = start_counting(std::time::Duration::from_secs(4)).await;
    let (status, group) =
        pair.send(0, reqwest::Method::PUT, "/v1/groups/etl", Some(&json!({"max_running": 2}))).await;
    assert_eq!(status, 200, "{group}");
    let mut jobs = Vec::new();
    for i in 0..6 {
        let job = json!({"name": format!("grouped-{i}"), "schedule": {"cron": "0 0 1 1 *"}, "group": "etl",
                         "target": {"type": "http", "url": url}, "timeout_s": 60});
        let (status, body) = pair.send(i % 2, reqwest::Method::POST, "/v1/jobs", Some(&job)).await;
        assert_eq!(status, 201, "{body}");
        jobs.push(body["id"].as_str().unwrap().to_string());
    }
    // Started together: six triggers at once, through both runtimes.
    let runs: Vec<String> = futures::stream::iter(jobs.iter().enumerate())
        .map(|(i, id)| {
            let pair = &pair;
            async move {
                let (status, body) = pair
                    .send(i % 2, reqwest::Method::POST, &format!("/v1/jobs/{id}/trigger"), Some(&json!({})))
                    .await;
                assert_eq!(status, 202, "{body}");
                body["id"].as_str().unwrap().to_string()
            }
        })
        .buffer_unordered(6)
        .collect()
        .await;
    // While they run, the group says how many run and wait.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let (_, busy) = pair.send(1, reqwest::Method::GET, "/v1/groups/etl", None).await;
    println!("the group two seconds in: {busy}");
    assert!(busy["running"].as_u64().unwrap() <= 2, "{busy}");

    let mut workers = BTreeSet::new();
    for run in &runs {
        let ended = pair.ended(0, run, std::time::Duration::from_secs(150)).await;
        assert_eq!(ended["state"], "SUCCEEDED", "{ended}");
        let attempts = ended["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "waiting spent no attempt: {ended}");
        workers.insert(attempts[0]["worker"].as_str().unwrap().to_string());
    }
    let most = target.most.load(Ordering::SeqCst);
    println!("most calls in flight: {most}; workers: {workers:?}");
    assert_eq!(target.calls.load(Ordering::SeqCst), 6, "each run called once");
    assert!(most <= 2, "{most} calls were in flight at once in a group of 2");
    // The last slot is given back just after its run's end is written.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, idle) = pair.send(0, reqwest::Method::GET, "/v1/groups/etl", None).await;
        if idle["running"] == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "slots still taken after every run ended: {idle}");
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realtime_an_at_most_once_run_is_called_once_and_a_refused_one_is_tried_again() {
    let pair = Pair::start("delivery").await;
    // A target that hangs past the job's timeout.
    let (hanging_url, hanging) = start_counting(std::time::Duration::from_secs(60)).await;
    // A port nobody listens on: every connection is refused.
    let refused_url = format!("http://127.0.0.1:{}/hook", free_loopback_port());

    let retry = json!({"max_attempts": 3, "backoff_s": 1, "max_backoff_s": 1});
    let mut runs = Vec::new();
    for (name, url) in [("hangs", &hanging_url), ("refused", &refused_url)] {
        let job = json!({"name": name, "schedule": {"cron": "0 0 1 1 *"}, "delivery": "at_most_once",
                         "timeout_s": 2, "retry": retry, "target": {"type": "http", "url": url}});
        let (status, body) = pair.send(0, reqwest::Method::POST, "/v1/jobs", Some(&job)).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["delivery"], "at_most_once", "{body}");
        let id = body["id"].as_str().unwrap();
        let (status, run) =
            pair.send(1, reqwest::Method::POST, &format!("/v1/jobs/{id}/trigger"), Some(&json!({}))).await;
        assert_eq!(status, 202, "{run}");
        runs.push(run["id"].as_str().unwrap().to_string());
    }
    let hangs = pair.ended(0, &runs[0], std::time::Duration::from_secs(60)).await;
    assert_eq!(hangs["state"], "TIMED_OUT", "{hangs}");
    assert_eq!(hangs["attempts"].as_array().unwrap().len(), 1, "{hangs}");
    assert!(hangs["reason"].as_str().unwrap().starts_with("at_most_once"), "{hangs}");
    let refused = pair.ended(1, &runs[1], std::time::Duration::from_secs(60)).await;
    assert_eq!(refused["state"], "FAILED", "{refused}");
    assert_eq!(
        refused["attempts"].as_array().unwrap().len(),
        3,
        "a request that never left is tried again: {refused}"
    );
    // Watch a while longer: nothing calls the hanging target again.
    tokio::time::sleep(std::time::Duration::from_secs(8)).await;
    assert_eq!(hanging.calls.load(Ordering::SeqCst), 1, "the hanging target was called exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realtime_an_at_most_once_run_whose_runtime_is_killed_mid_call_is_not_called_again() {
    let mut pair = Pair::start("killed").await;
    // A target that takes 20 s: the call is under way when its runtime dies.
    let (url, target) = start_counting(std::time::Duration::from_secs(20)).await;
    let job = json!({"name": "fragile", "schedule": {"cron": "0 0 1 1 *"}, "delivery": "at_most_once",
                     "timeout_s": 25, "retry": {"max_attempts": 3, "backoff_s": 1, "max_backoff_s": 1},
                     "target": {"type": "http", "url": url}});
    let (status, body) = pair.send(1, reqwest::Method::POST, "/v1/jobs", Some(&job)).await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().unwrap().to_string();
    let (status, run) =
        pair.send(1, reqwest::Method::POST, &format!("/v1/jobs/{id}/trigger"), Some(&json!({}))).await;
    assert_eq!(status, 202, "{run}");
    let run = run["id"].as_str().unwrap().to_string();
    // Wait for the call, then kill the runtime whose worker made it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let worker = loop {
        let (_, body) = pair.send(0, reqwest::Method::GET, &format!("/v1/runs/{run}"), None).await;
        if let (1.., Some(worker)) =
            (target.calls.load(Ordering::SeqCst), body["attempts"][0]["worker"].as_str())
        {
            break worker.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "the run was not called: {body}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let pids: Vec<u32> = pair.children.iter().map(|c| c.id().unwrap()).collect();
    let caller = pids.iter().position(|pid| worker.starts_with(&format!("local:{pid}/"))).unwrap();
    pair.children[caller].start_kill().unwrap(); // SIGKILL
    pair.children[caller].wait().await.unwrap();
    let survivor = 1 - caller;
    println!("killed runtime {caller} (pid {}) mid-call; runtime {survivor} takes over", pids[caller]);
    // The lease (25 s + 30 s) runs out; the survivor's watchdog or the returning message ends
    // the attempt as lost, and the run with it.
    let ended = pair.ended(survivor, &run, std::time::Duration::from_secs(150)).await;
    assert_eq!(ended["state"], "FAILED", "{ended}");
    assert_eq!(ended["attempts"].as_array().unwrap().len(), 1, "{ended}");
    assert_eq!(ended["attempts"][0]["outcome"], "lost", "{ended}");
    assert!(ended["reason"].as_str().unwrap().starts_with("at_most_once"), "{ended}");
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    assert_eq!(target.calls.load(Ordering::SeqCst), 1, "no second call after the kill");
}

/// A loopback HTTP target that holds each call open for `delay`, answering 200, and counts per
/// job (its `x-sundial-job-id`) the calls open at once: a call is open from its request until
/// its answer or until its client closes the connection (a stopped call). Written on a bare
/// socket so that a closed connection is seen at once.
#[derive(Debug, Default)]
struct PerJob {
    open: std::sync::Mutex<std::collections::BTreeMap<String, (usize, usize)>>,
    calls: AtomicUsize,
}

impl PerJob {
    fn opened(&self, job: &str) {
        let mut open = self.open.lock().unwrap();
        let (now, most) = open.entry(job.to_string()).or_default();
        *now += 1;
        *most = (*most).max(*now);
    }

    fn closed(&self, job: &str) {
        if let Some((now, _)) = self.open.lock().unwrap().get_mut(job) {
            *now -= 1;
        }
    }

    fn most(&self, job: &str) -> usize {
        self.open.lock().unwrap().get(job).map_or(0, |(_, most)| *most)
    }
}

async fn start_per_job(delay: std::time::Duration) -> (String, Arc<PerJob>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let counting = Arc::new(PerJob::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen = counting.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let c = seen.clone();
            tokio::spawn(async move {
                // The request: its head, then as much body as it announces.
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                let head_end = loop {
                    let Ok(n) = socket.read(&mut buffer).await else { return };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buffer[..n]);
                    if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                        break at + 4;
                    }
                };
                let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
                let header = |name: &str| {
                    head.lines()
                        .find_map(|line| line.strip_prefix(&format!("{name}:")).map(|v| v.trim().to_string()))
                };
                let length: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
                while request.len() < head_end + length {
                    match socket.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let job = header(headers::JOB_ID).unwrap_or_default();
                c.calls.fetch_add(1, Ordering::SeqCst);
                c.opened(&job);
                // Open until the answer, or until the client closes the connection.
                let stopped = tokio::select! {
                    () = tokio::time::sleep(delay) => false,
                    read = socket.read(&mut buffer) => matches!(read, Ok(0) | Err(_)),
                };
                c.closed(&job);
                if !stopped {
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                    let _ = socket.write_all(answer).await;
                }
            });
        }
    });
    (url, counting)
}

impl Pair {
    /// Backfills job `id` over `[from, to]` through runtime `which`: the runs it created.
    async fn backfill(&self, which: usize, id: &str, from: &str, to: &str) -> Vec<String> {
        let range = json!({"from": from, "to": to});
        let (status, body) =
            self.send(which, reqwest::Method::POST, &format!("/v1/jobs/{id}/backfill"), Some(&range)).await;
        assert!(status == 200 || status == 202, "{status}: {body}");
        body["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()).collect()
    }

    /// Polls the run through runtime 0 until it is RUNNING, up to `within`.
    async fn running(&self, run: &str, within: std::time::Duration) {
        let deadline = std::time::Instant::now() + within;
        loop {
            let (_, body) = self.send(0, reqwest::Method::GET, &format!("/v1/runs/{run}"), None).await;
            if body["state"] == "RUNNING" {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "run {run} not RUNNING after {within:?}: {body}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
}

/// Under `forbid` and `replace`, runs that arrive together never call the target side by side.
/// Each job's schedule fires at six past minutes only (none within the next fifty). The `forbid`
/// job is backfilled over all six at once; the `replace` job over its oldest minute first and,
/// once that run calls its target, over the five others at once, so that the newer runs find an
/// older one calling: it is cancelled, its call stopped, and only then does the newest start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn realtime_forbid_and_replace_hold_when_a_backfill_sends_runs_together() {
    use chrono::{Duration, DurationRound, Timelike, Utc};
    let pair = Pair::start("policies").await;
    let (url, target) = start_per_job(std::time::Duration::from_secs(8)).await;
    let minute = Utc::now().duration_trunc(Duration::minutes(1)).unwrap();
    let past: Vec<String> = (1..=6).rev().map(|i| (minute - Duration::minutes(i)).to_rfc3339()).collect();
    let minutes: Vec<String> =
        (1..=6).map(|i| (minute - Duration::minutes(i)).minute().to_string()).collect();
    let cron = format!("{} * * * *", minutes.join(","));
    let mut jobs = Vec::new();
    for policy in ["forbid", "replace"] {
        let job = json!({"name": format!("policy-{policy}"), "schedule": {"cron": cron}, "concurrency": policy,
                         "target": {"type": "http", "url": url}, "timeout_s": 60, "retry": {"max_attempts": 1}});
        let (status, body) = pair.send(0, reqwest::Method::POST, "/v1/jobs", Some(&job)).await;
        assert_eq!(status, 201, "{body}");
        jobs.push(body["id"].as_str().unwrap().to_string());
    }
    let forbid = pair.backfill(1, &jobs[0], &past[0], &past[5]).await;
    assert_eq!(forbid.len(), 6, "six runs at once");
    let mut replace = pair.backfill(0, &jobs[1], &past[0], &past[0]).await;
    assert_eq!(replace.len(), 1);
    pair.running(&replace[0], std::time::Duration::from_secs(60)).await;
    replace.extend(pair.backfill(1, &jobs[1], &past[1], &past[5]).await);
    assert_eq!(replace.len(), 6, "five more at once");

    for (policy, (job, created)) in ["forbid", "replace"].iter().zip(jobs.iter().zip([&forbid, &replace])) {
        let mut ended = Vec::new();
        for run in created {
            ended.push(pair.ended(0, run, std::time::Duration::from_secs(240)).await);
        }
        let states: Vec<&str> = ended.iter().map(|r| r["state"].as_str().unwrap()).collect();
        let reasons: Vec<&str> = ended.iter().map(|r| r["reason"].as_str().unwrap_or("")).collect();
        println!("{policy}: {states:?} {reasons:?}; most calls open at once {}", target.most(job));
        assert_eq!(target.most(job), 1, "{policy}: two calls of the job were open at once");
        let kept_out = |r: &Value| match r["state"].as_str() {
            Some("SKIPPED") => r["reason"].as_str().unwrap().starts_with(&format!("concurrency {policy}")),
            Some("CANCELLED") => {
                r["reason"].as_str().unwrap().starts_with("concurrency replace: replaced by")
            }
            _ => false,
        };
        for run in &ended {
            assert!(run["state"] == "SUCCEEDED" || kept_out(run), "{policy}: a run ended otherwise: {run}");
        }
        assert!(states.contains(&"SUCCEEDED"), "{policy}: {states:?}");
        assert!(ended.iter().any(kept_out), "{policy}: no run was kept out: {states:?} {reasons:?}");
    }
    let replaced: Vec<Value> = {
        let mut ended = Vec::new();
        for run in &replace {
            ended.push(pair.ended(0, run, std::time::Duration::from_secs(10)).await);
        }
        ended
    };
    assert_eq!(replaced[0]["state"], "CANCELLED", "the run calling was replaced: {}", replaced[0]);
    assert_eq!(replaced[5]["state"], "SUCCEEDED", "the newest run is never replaced: {}", replaced[5]);
    println!("calls: {}", target.calls.load(Ordering::SeqCst));
}
