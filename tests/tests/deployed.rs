//! The deployed stack: `infra/template.yaml` and the four Lambda binaries, deployed by
//! `scripts/deploy-local` on an emulator that enforces IAM, driven only through its HTTP API,
//! its queues and its topics. Each flow runs the whole path a user's job takes in AWS:
//! EventBridge → tick → SQS → worker (event source mapping) → a loopback target, with the
//! watchdog and the dead-letter queue behind them.
//!
//! `scripts/test` deploys the stack, then runs this binary with `SUNDIAL_DEPLOYED` naming the
//! stack's description (`.deployed/stack.json`) and the SDK pointed at that emulator: the flows
//! first, then a scan of every function's log (no AccessDenied, no panic, no crash), then the
//! killed worker. Run without a deployed stack, each test fails and says how to deploy one.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use sundial_domain::target::headers;
use sundial_tests::{Answer, TargetServer};
use sundial_wiring::config::aws_sdk_config;

/// How long any one flow may take: EventBridge fires the tick and the watchdog once a minute.
const FLOW_LIMIT: Duration = Duration::from_secs(240);

/// The deployed stack, as `scripts/deploy-local` describes it.
struct Deployed {
    /// Where `scripts/deploy-local` described the stack (`.deployed/stack.json`).
    description: std::path::PathBuf,
    api: String,
    key: String,
    http: reqwest::Client,
    sqs: aws_sdk_sqs::Client,
    sns: aws_sdk_sns::Client,
    runs_queue_url: String,
    events_topic_arn: String,
    sfn: aws_sdk_sfn::Client,
    /// The worker's role, as an existing role a state machine can name (the emulator checks).
    worker_role_arn: String,
}

impl Deployed {
    async fn load() -> Deployed {
        let path = std::env::var("SUNDIAL_DEPLOYED").unwrap_or_else(|_| {
            panic!("SUNDIAL_DEPLOYED is not set: run scripts/test, or scripts/deploy-local --detach and point it at .deployed/stack.json")
        });
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let stack: Value = serde_json::from_str(&text).unwrap();
        let field = |name: &str| {
            stack[name].as_str().unwrap_or_else(|| panic!("{path} has no `{name}`: {stack}")).to_string()
        };
        let output = |name: &str| {
            stack["outputs"][name]
                .as_str()
                .unwrap_or_else(|| panic!("{path} has no output `{name}`"))
                .to_string()
        };
        let sdk = aws_sdk_config().await;
        Deployed {
            description: path.clone().into(),
            api: field("api_url").trim_end_matches('/').to_string(),
            key: field("api_key"),
            http: reqwest::Client::new(),
            sqs: aws_sdk_sqs::Client::new(&sdk),
            sns: aws_sdk_sns::Client::new(&sdk),
            runs_queue_url: output("RunsQueueUrl"),
            events_topic_arn: output("EventsTopicArn"),
            sfn: aws_sdk_sfn::Client::new(&sdk),
            worker_role_arn: {
                let account = output("EventsTopicArn").split(':').nth(4).unwrap().to_string();
                let role = stack["resources"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["logical_id"] == "WorkerRole")
                    .unwrap_or_else(|| panic!("{path} lists no WorkerRole"));
                format!("arn:aws:iam::{account}:role/{}", role["physical_id"].as_str().unwrap())
            },
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.call_as(&self.key, method, path, body).await
    }

    /// [`Deployed::call`] with another key.
    async fn call_as(
        &self,
        key: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.api)).bearer_auth(key);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// Creates a job; returns its id.
    async fn create(&self, job: &Value) -> String {
        let (status, body) = self.call(reqwest::Method::POST, "/v1/jobs", Some(job)).await;
        assert_eq!(status, 201, "creating {job}: {body}");
        body["id"].as_str().unwrap().to_string()
    }

    async fn runs(&self, job: &str) -> Vec<Value> {
        let (status, body) = self.call(reqwest::Method::GET, &format!("/v1/jobs/{job}/runs"), None).await;
        assert_eq!(status, 200, "{body}");
        body["runs"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until a run of `job` is in `state`; returns it.
    async fn run_in(&self, job: &str, state: &str, what: &str) -> Value {
        let started = Instant::now();
        loop {
            let runs = self.runs(job).await;
            if let Some(run) = runs.iter().find(|r| r["state"] == state) {
                return run.clone();
            }
            assert!(started.elapsed() < FLOW_LIMIT, "{what}: no {state} run within {FLOW_LIMIT:?}: {runs:?}");
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
}

/// A job named `name` and a suffix of its own (a stack outlives one stage: names stay unique).
fn job(name: &str, url: &str, extra: Value) -> Value {
    let name = format!("{name}-{}", ulid::Ulid::generate().to_string().to_ascii_lowercase());
    let mut job = json!({"name": name, "target": {"type": "http", "url": url}});
    job.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    job
}

/// A job with no schedule runs once, now, on a worker it names.
async fn runs_now(stack: &Deployed) {
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let id = stack.create(&job("now", &target.url, json!({}))).await;
    let run = stack.run_in(&id, "SUCCEEDED", "run now").await;
    assert!(run["attempts"][0]["worker"].as_str().is_some_and(|w| !w.is_empty()), "{run}");
    assert_eq!(target.hits().len(), 1);
}

/// A state machine job (the stage allows `e2e-machine-*`): the worker, under its role, starts an
/// execution, looks at it until it ends, and records its output.
async fn a_state_machine_job_follows_its_execution(stack: &Deployed) {
    let name = format!("e2e-machine-{}", ulid::Ulid::generate().to_string().to_ascii_lowercase());
    let definition =
        json!({"StartAt": "Only", "States": {"Only": {"Type": "Pass", "Result": {"rows": 7}, "End": true}}});
    let machine = stack
        .sfn
        .create_state_machine()
        .name(&name)
        .definition(definition.to_string())
        .role_arn(&stack.worker_role_arn)
        .send()
        .await
        .unwrap()
        .state_machine_arn;
    let mut document = job("machine", "http://127.0.0.1:9/unused", json!({}));
    document["target"] = json!({"type": "stepfunctions", "state_machine_arn": machine});
    let id = stack.create(&document).await;
    let run = stack.run_in(&id, "SUCCEEDED", "state machine job").await;
    let attempt = &run["attempts"][0];
    assert!(attempt["handle"].as_str().is_some_and(|h| h.contains(":execution:")), "{run}");
    assert_eq!(
        serde_json::from_str::<Value>(attempt["output"].as_str().unwrap()).unwrap(),
        json!({"rows": 7})
    );
}

/// A cron job fires at its minute through EventBridge and the tick.
async fn cron_fires(stack: &Deployed) {
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let id =
        stack.create(&job("every-minute", &target.url, json!({"schedule": {"cron": "* * * * *"}}))).await;
    let run = stack.run_in(&id, "SUCCEEDED", "cron").await;
    assert_eq!(run["kind"], "scheduled", "{run}");
    let (status, body) =
        stack.call(reqwest::Method::POST, &format!("/v1/jobs/{id}/pause"), Some(&json!({}))).await;
    assert_eq!(status, 200, "{body}");
}

/// A failing attempt is retried after its backoff, and the next one succeeds.
async fn retries_then_succeeds(stack: &Deployed) {
    let target =
        TargetServer::start(|n| if n == 0 { Answer::Status(500) } else { Answer::Status(200) }).await;
    let retry = json!({"retry": {"max_attempts": 3, "backoff_s": 1}});
    let id = stack.create(&job("flaky", &target.url, retry)).await;
    let run = stack.run_in(&id, "SUCCEEDED", "retry").await;
    assert_eq!(run["attempts"].as_array().unwrap().len(), 2, "{run}");
}

/// A run that fails for good is told on the events topic, to a queue subscribed with a filter.
async fn final_failure_is_told(stack: &Deployed) {
    let name = format!("stage-events-{}", ulid::Ulid::generate());
    let (queue, arn) = sundial_tests::create_queue(&stack.sqs, &name).await;
    // As in AWS, the queue lets the topic send to it.
    let policy = json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"Service": "sns.amazonaws.com"},
            "Action": "sqs:SendMessage",
            "Resource": arn,
            "Condition": {"ArnEquals": {"aws:SourceArn": stack.events_topic_arn}},
        }],
    });
    stack
        .sqs
        .set_queue_attributes()
        .queue_url(&queue)
        .attributes(aws_sdk_sqs::types::QueueAttributeName::Policy, policy.to_string())
        .send()
        .await
        .unwrap();
    stack
        .sns
        .subscribe()
        .topic_arn(&stack.events_topic_arn)
        .protocol("sqs")
        .endpoint(&arn)
        .attributes("FilterPolicy", json!({"event": ["failed"]}).to_string())
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .unwrap();
    let target = TargetServer::start(|_| Answer::Status(500)).await;
    let id = stack.create(&job("doomed", &target.url, json!({"retry": {"max_attempts": 1}}))).await;
    stack.run_in(&id, "FAILED", "final failure").await;
    let started = Instant::now();
    loop {
        let received =
            stack.sqs.receive_message().queue_url(&queue).wait_time_seconds(5).send().await.unwrap();
        let told = received.messages().iter().filter_map(|m| m.body()).any(|body| {
            let event: Value = serde_json::from_str(body).unwrap_or_default();
            event["event"] == "failed" && event["job_id"] == id.as_str()
        });
        if told {
            break;
        }
        assert!(started.elapsed() < FLOW_LIMIT, "no `failed` event for {id} on the events topic");
    }
}

/// A target that answers 202 reports back through the callback, which ends the run.
async fn accepted_work_completes_by_callback(stack: &Deployed) {
    let target = TargetServer::start(|_| Answer::Status(202)).await;
    let id = stack.create(&job("long", &target.url, json!({"timeout_s": 600}))).await;
    let run = stack.run_in(&id, "RUNNING", "202").await;
    let run_id = run["id"].as_str().unwrap().to_string();
    let started = Instant::now();
    while target.hits().is_empty() {
        assert!(started.elapsed() < FLOW_LIMIT, "the 202 target was never called");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let token = target.hits()[0].headers[headers::CALLBACK_TOKEN].to_str().unwrap().to_string();
    let done = stack
        .http
        .post(format!("{}/v1/runs/{run_id}/complete", stack.api))
        .header(headers::CALLBACK_TOKEN, token)
        .json(&json!({"succeeded": true, "output": "done"}))
        .send()
        .await
        .unwrap();
    assert_eq!(done.status().as_u16(), 200, "{}", done.text().await.unwrap());
    stack.run_in(&id, "SUCCEEDED", "callback").await;
}

/// The watchdog's pass reads the in-flight runs and their jobs: a run past its SLA is flagged
/// `sla_missed` while it still runs (the pass that does it reads the jobs in a batch).
async fn the_watchdog_flags_a_run_past_its_sla(stack: &Deployed) {
    let target = TargetServer::start(|_| Answer::Status(202)).await;
    let id = stack.create(&job("slow", &target.url, json!({"timeout_s": 600, "sla_s": 5}))).await;
    let started = Instant::now();
    let run = loop {
        let runs = stack.runs(&id).await;
        if let Some(run) = runs.iter().find(|r| r["sla_missed"] == true) {
            break run.clone();
        }
        assert!(started.elapsed() < FLOW_LIMIT, "no watchdog pass flagged the run past its SLA: {runs:?}");
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let run_id = run["id"].as_str().unwrap();
    let (status, body) =
        stack.call(reqwest::Method::POST, &format!("/v1/runs/{run_id}/cancel"), Some(&json!({}))).await;
    assert_eq!(status, 200, "{body}");
}

/// A message no worker can read goes to the dead-letter queue, whose handler records it (its
/// log line is checked by `scripts/test` after the stage) and lets it go.
async fn malformed_message_is_dead_lettered(stack: &Deployed) {
    let body = format!("not a run message {}", ulid::Ulid::generate());
    stack.sqs.send_message().queue_url(&stack.runs_queue_url).message_body(&body).send().await.unwrap();
    println!("dead-letter marker: {body}");
}

/// Jobs whose DynamoDB units `scripts/deployed.py capacity` sums per run from the capacity log:
/// one-time, every minute and every 10 s, each with a target that always answers 200 (happy
/// path) and one that fails every other call (a retry, then success). Waits until each job has
/// finished runs of the kind it stands for, pauses the periodic ones, and writes every job's
/// runs (id, state, attempts) to `capacity-runs.json` beside the stack's description.
async fn capacity_scenarios(stack: &Deployed) {
    let at = (chrono::Utc::now() + chrono::Duration::seconds(20)).to_rfc3339();
    let retry = json!({"max_attempts": 3, "backoff_s": 1, "max_backoff_s": 1});
    let mut scenarios = Vec::new();
    let mut targets = Vec::new();
    for (schedule, extra) in [
        ("one-time", json!({"schedule": {"at": at}})),
        ("every minute", json!({"schedule": {"cron": "* * * * *"}})),
        ("every 10 s", json!({"schedule": {"cron": "*/10 * * * * *"}})),
    ] {
        for (path, attempts) in [("happy path", 1), ("one retry", 2)] {
            // A target of its own: the flaky one fails the first call of each run (its runs
            // do not overlap).
            let target = TargetServer::start(move |n| {
                if attempts == 2 && n % 2 == 0 { Answer::Status(500) } else { Answer::Status(200) }
            })
            .await;
            let mut extra = extra.clone();
            extra["retry"] = retry.clone();
            let id = stack.create(&job("capacity", &target.url, extra)).await;
            scenarios.push((schedule, path, attempts, id));
            targets.push(target);
        }
    }
    let started = Instant::now();
    let mut done = vec![false; scenarios.len()];
    while done.iter().any(|d| !d) {
        for (i, (schedule, _, attempts, id)) in scenarios.iter().enumerate() {
            if done[i] {
                continue;
            }
            let runs = stack.runs(id).await;
            let finished = runs
                .iter()
                .filter(|r| {
                    r["state"] == "SUCCEEDED" && r["attempts"].as_array().map_or(0, Vec::len) == *attempts
                })
                .count();
            done[i] = finished >= if *schedule == "every 10 s" { 3 } else { 1 };
            if done[i] && *schedule != "one-time" {
                let (status, body) = stack
                    .call(reqwest::Method::POST, &format!("/v1/jobs/{id}/pause"), Some(&json!({})))
                    .await;
                assert_eq!(status, 200, "{body}");
            }
        }
        assert!(started.elapsed() < FLOW_LIMIT, "capacity jobs without their runs: {scenarios:?} {done:?}");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let mut jobs = Vec::new();
    for (schedule, path, _, id) in &scenarios {
        let runs: Vec<Value> = stack
            .runs(id)
            .await
            .iter()
            .map(|r| json!({"id": r["id"], "state": r["state"], "attempts": r["attempts"].as_array().map_or(0, Vec::len)}))
            .collect();
        jobs.push(json!({"schedule": schedule, "path": path, "job_id": id, "runs": runs}));
    }
    let out = stack.description.with_file_name("capacity-runs.json");
    std::fs::write(&out, serde_json::to_string_pretty(&json!({"jobs": jobs})).unwrap()).unwrap();
    println!("capacity runs: {}", out.display());
}

/// The worker process dies in the middle of an attempt (SIGKILL to the function's process):
/// the attempt is ended as lost once its lease expires, and the next attempt succeeds.
async fn a_killed_workers_attempt_is_repaired(stack: &Deployed) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let target = TargetServer::start(move |n| {
        counted.fetch_add(1, Ordering::SeqCst);
        if n == 0 { Answer::Hang } else { Answer::Status(200) }
    })
    .await;
    let id =
        stack.create(&job("killed", &target.url, json!({"timeout_s": 10, "retry": {"backoff_s": 1}}))).await;
    let started = Instant::now();
    while calls.load(Ordering::SeqCst) == 0 {
        assert!(started.elapsed() < FLOW_LIMIT, "the target was never called");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let killed = kill_function_processes("sundial-worker");
    assert!(killed > 0, "no process of sundial-worker was found to kill");
    let run = stack.run_in(&id, "SUCCEEDED", "killed worker").await;
    let first = &run["attempts"][0];
    assert!(["lost", "timed_out"].contains(&first["outcome"].as_str().unwrap_or("")), "{run}");
}

/// Sends SIGKILL to every process running the Lambda function `name` (its environment names
/// it); returns how many.
fn kill_function_processes(name: &str) -> usize {
    let marker = format!("AWS_LAMBDA_FUNCTION_NAME={name}");
    let mut killed = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        let ours = environ.split(|b| *b == 0).any(|var| var == marker.as_bytes());
        if ours
            && std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .is_ok_and(|s| s.success())
        {
            killed += 1;
        }
    }
    killed
}

/// A key made through the deployed API (its role read from the table by the api function under
/// its IAM role): it reads, is refused a trigger naming the role it needs, and is refused
/// altogether once revoked; the audit trail records it all.
async fn a_viewer_key_reads_and_is_refused_more(stack: &Deployed) {
    use reqwest::Method as M;
    let id =
        stack.create(&job("viewed", "http://127.0.0.1:9/", json!({"schedule": {"cron": "0 0 1 1 *"}}))).await;
    let (status, made) =
        stack.call(M::POST, "/v1/keys", Some(&json!({"name": "deployed-viewer", "role": "viewer"}))).await;
    assert_eq!(status, 201, "{made}");
    let (secret, key_id) =
        (made["secret"].as_str().unwrap().to_string(), made["id"].as_str().unwrap().to_string());
    let (status, body) = stack.call_as(&secret, M::GET, &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(status, 200, "the viewer reads: {body}");
    let (status, body) =
        stack.call_as(&secret, M::POST, &format!("/v1/jobs/{id}/trigger"), Some(&json!({}))).await;
    assert_eq!((status, &body["error"]["field"]), (403, &json!("role")), "{body}");
    assert!(body["error"]["message"].as_str().unwrap_or_default().contains("operator"), "{body}");
    assert!(stack.runs(&id).await.is_empty(), "a refused trigger makes no run");
    let (status, body) = stack.call(M::DELETE, &format!("/v1/keys/{key_id}"), None).await;
    assert_eq!(status, 204, "{body}");
    let (status, _) = stack.call_as(&secret, M::GET, &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(status, 401, "revoked: refused at once");
    // The audit trail, read through the deployed API: the job's creation, the key's life, and
    // the revoked key's use, each written with its change under the api function's role.
    let (status, trail) = stack.call(M::GET, &format!("/v1/audit?job={id}"), None).await;
    assert_eq!(status, 200, "{trail}");
    assert_eq!(trail["records"][0]["action"], "job.create", "{trail}");
    let (status, trail) = stack.call(M::GET, &format!("/v1/audit?actor={key_id}"), None).await;
    assert_eq!(status, 200, "{trail}");
    let actions: Vec<&str> =
        trail["records"].as_array().into_iter().flatten().filter_map(|r| r["action"].as_str()).collect();
    assert_eq!(actions, ["key.refused"], "{trail}");
    assert!(!trail.to_string().contains(&secret), "no secret in the trail");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployed_stack_runs_jobs_end_to_end() {
    let stack = Deployed::load().await;
    let started = Instant::now();
    tokio::join!(
        runs_now(&stack),
        cron_fires(&stack),
        retries_then_succeeds(&stack),
        final_failure_is_told(&stack),
        accepted_work_completes_by_callback(&stack),
        malformed_message_is_dead_lettered(&stack),
        the_watchdog_flags_a_run_past_its_sla(&stack),
        capacity_scenarios(&stack),
        a_viewer_key_reads_and_is_refused_more(&stack),
        a_state_machine_job_follows_its_execution(&stack),
    );
    println!("flows through the deployed stack took {:.0?}", started.elapsed());
}

/// Run on its own, after the logs are scanned: it kills the worker's processes (their exit is
/// logged as an error), which the other flows use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployed_stack_repairs_a_killed_worker() {
    let stack = Deployed::load().await;
    let started = Instant::now();
    a_killed_workers_attempt_is_repaired(&stack).await;
    println!("the killed worker's attempt was repaired in {:.0?}", started.elapsed());
}
