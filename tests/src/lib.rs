//! The integration-test harness: a fresh stack of real resources on the emulator for each test,
//! and a client for the real API router.
//!
//! `scripts/test` starts the emulator and exports `AWS_ENDPOINT_URL`; every test provisions its
//! own stack (unique name) from `infra/template.yaml`, so tests run in parallel without sharing
//! state. The SDK talks to the emulator over HTTP: nothing of AWS is faked.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod contract;
pub mod runtime_process;
pub mod targets;

use async_trait::async_trait;
use http::{HeaderMap, StatusCode};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use sundial_api::AppState;
use sundial_aws::metrics::{Clients, Ledger};
use sundial_aws::provision::{Resources, provision};
use sundial_domain::clock::{Clock, SystemClock};
use sundial_testkit::harness::{Harness, TargetCall};
use sundial_wiring::config::{Config, aws_sdk_config};
use sundial_wiring::services::Services;

pub use sundial_testkit::api::{ALICE, API_KEYS, Api, BOB, Call, Reply, job};

/// A stored job of Alice's made of `document` (a job document as JSON) as of now, for calling a
/// target directly, without a stack.
pub fn stored_job(document: Value) -> sundial_domain::job::Job {
    let now = chrono::Utc::now();
    sundial_domain::job::Job {
        id: sundial_domain::job::JobId::generate(),
        owner: "alice".into(),
        document: serde_json::from_value(document).expect("a job document"),
        version: 1,
        created_at: now,
        updated_at: now,
        next_run_at: None,
        signing_secret: "secret".into(),
        pauses: Vec::new(),
        children: Vec::new(),
        gaps: Vec::new(),
        skips: Vec::new(),
        counted: Default::default(),
        baseline: None,
        versions: Vec::new(),
    }
}

/// One test's resources and the API over them.
#[derive(Debug)]
pub struct Stack {
    pub name: String,
    pub resources: Resources,
    pub config: Config,
    pub dynamo: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub sns: aws_sdk_sns::Client,
    /// The clients targets are called through (the SDK never repeats their requests).
    pub targets: sundial_aws::metrics::TargetClients,
    pub services: Services,
    pub api: Api,
    /// The stack's test target, which answers 200 unless told otherwise
    /// ([`TargetServer::answer_next`]).
    pub target: TargetServer,
    /// The clock a stack made by `Harness::deploy_at` reads.
    manual_clock: Option<Arc<sundial_domain::clock::ManualClock>>,
    /// The inbox subscribed to the shared topic by `Harness::deploy`, and what was read from it.
    events: Option<(String, std::sync::Mutex<Vec<Value>>)>,
}

/// Turns off the TTL of the stack's tables. The emulator's reaper deletes, once a minute, every
/// item whose expiry has passed by the real clock, while a stack on a clock of its own writes
/// expiries by that clock: a run claimed on 2026-03-08 expires 30 days later, months before
/// today, and the reaper took it halfway through a test whenever its minute came round (the
/// DST scenarios lost a claimed run about one run in fifteen). Expiry is AWS's to do, by the
/// real clock; what such a stack writes stays until the test ends.
async fn keep_expired_items(dynamo: &aws_sdk_dynamodb::Client, resources: &Resources) {
    use aws_sdk_dynamodb::types::{TimeToLiveSpecification, TimeToLiveStatus};
    for table in [&resources.jobs_table, &resources.runs_table, &resources.idempotency_table] {
        let described = dynamo.describe_time_to_live().table_name(table).send().await.unwrap();
        let Some(ttl) = described.time_to_live_description() else { continue };
        let (Some(TimeToLiveStatus::Enabled), Some(attribute)) =
            (ttl.time_to_live_status(), ttl.attribute_name())
        else {
            continue;
        };
        let off =
            TimeToLiveSpecification::builder().attribute_name(attribute).enabled(false).build().unwrap();
        dynamo.update_time_to_live().table_name(table).time_to_live_specification(off).send().await.unwrap();
    }
}

/// Settings a test may change before the stack is built.
#[derive(Debug, Default)]
pub struct Options {
    pub vars: HashMap<&'static str, String>,
    pub clock: Option<Arc<dyn Clock>>,
}

impl Stack {
    pub async fn new() -> Stack {
        Self::with(Options::default()).await
    }

    pub async fn with(options: Options) -> Stack {
        // Logs go to the test's captured output (shown when a test fails) and to a buffer the
        // test can search.
        sundial_testkit::logs::capture();
        assert!(
            std::env::var("AWS_ENDPOINT_URL").is_ok(),
            "AWS_ENDPOINT_URL is not set: run the suite with scripts/test, which starts the emulator"
        );
        let name = format!("t{}", ulid::Ulid::generate().to_string().to_ascii_lowercase());
        let sdk = aws_sdk_config().await;
        let resources = provision(&sdk, &name).await.expect("provisioning the test stack");
        let mut vars: HashMap<&str, &str> =
            HashMap::from([("SUNDIAL_STACK", name.as_str()), ("SUNDIAL_API_KEYS", API_KEYS)]);
        // Targets listen on loopback: the tests allow it (as the local runtime does); the
        // emulator stays refused as one of Sundial's own endpoints.
        let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_default();
        vars.insert("AWS_ENDPOINT_URL", endpoint.as_str());
        vars.insert("SUNDIAL_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128");
        // The tests' own queues (`Stack::new_queue`) may be targets and notification inboxes.
        let users_queues = format!("*/000000000000/*-of-{name}");
        vars.insert("SUNDIAL_ALLOWED_SQS", users_queues.as_str());
        for (k, v) in &options.vars {
            vars.insert(k, v.as_str());
        }
        let config = Config::from_vars(&vars, Some(resources.clone())).expect("test configuration");
        let clients = Clients::with_capacity_log(&sdk, Ledger::new(), config.capacity_log);
        if options.clock.is_some() {
            keep_expired_items(&clients.dynamo, &resources).await;
        }
        let clock = options.clock.unwrap_or_else(|| Arc::new(SystemClock));
        let services = Services::new(config.clone(), &clients, clock);
        let api = Api::over(&services);
        Stack {
            name,
            resources,
            config,
            dynamo: clients.dynamo,
            sqs: clients.sqs,
            sns: clients.sns,
            targets: clients.targets,
            services,
            api,
            target: TargetServer::start(|_| Answer::Status(200)).await,
            manual_clock: None,
            events: None,
        }
    }

    /// A stack whose services read `clock`, with extra configuration.
    pub async fn at(clock: &Arc<sundial_domain::clock::ManualClock>, vars: &[(&'static str, &str)]) -> Stack {
        Stack::with(Options {
            vars: vars.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            clock: Some(clock.clone() as Arc<dyn Clock>),
        })
        .await
    }

    /// The use cases over `ports` (this stack's, with one swapped: a fault, a recorder),
    /// configured as this stack's are, then as `change` says: built by `UseCases::new`, as every
    /// process builds them.
    pub fn rewired(
        &self,
        ports: &sundial_app::ports::Ports,
        change: impl FnOnce(&mut sundial_app::use_cases::Settings),
    ) -> sundial_app::use_cases::UseCases {
        let mut settings = self.config.use_case_settings();
        change(&mut settings);
        sundial_app::use_cases::UseCases::new(ports, settings)
    }

    /// A worker over this stack's stores and recorder, on the real clock, calling targets
    /// through `caller`.
    pub fn worker_with(
        &self,
        caller: Arc<dyn sundial_domain::ports::targets::Caller>,
        settings: sundial_app::worker::WorkerSettings,
    ) -> sundial_app::worker::Worker {
        let ports =
            sundial_app::ports::Ports { caller, clock: Arc::new(SystemClock), ..self.services.ports.clone() };
        self.rewired(&ports, |s| s.worker = settings).worker
    }

    /// Every notification the shared topic has told this stack's inbox so far (the messages'
    /// bodies), oldest first.
    async fn told(&self) -> Vec<Value> {
        let (inbox, read) =
            self.events.as_ref().expect("a stack deployed through the Harness watches its events");
        let fresh = self.read_inbox(inbox, usize::MAX, 1).await;
        let mut read = read.lock().unwrap();
        read.extend(fresh);
        read.iter().map(|m| serde_json::from_str(m["Message"].as_str().unwrap()).unwrap()).collect()
    }

    /// This stack, its shared topic's events read into an inbox of its own (`Harness::told_about`).
    async fn watching_events(mut self) -> Stack {
        let inbox = self.subscribe_inbox().await;
        self.events = Some((inbox, std::sync::Mutex::default()));
        self
    }

    /// Triggers a run of `job_id` through the API as Alice; panics unless it is accepted.
    pub async fn trigger(&self, job_id: &str) -> sundial_domain::run::RunId {
        Harness::trigger(self, job_id).await
    }

    /// The run `id` as stored; panics if it does not exist.
    pub async fn run(&self, id: &sundial_domain::run::RunId) -> sundial_domain::run::Run {
        self.services.ports.runs.get(&id.job_id, &id.key).await.unwrap().unwrap()
    }

    /// Polls the runs queue with `worker` until run `id` has ended; fails after `limit_s` seconds.
    pub async fn drive(
        &self,
        worker: &sundial_app::worker::Worker,
        id: &sundial_domain::run::RunId,
        limit_s: u64,
    ) -> sundial_domain::run::Run {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(limit_s);
        loop {
            let (queue, inbox) = (self.services.ports.queue.as_ref(), self.services.inbox.as_ref());
            sundial_app::worker::poll::poll_once(worker, queue, inbox, "test-worker", 1).await.unwrap();
            let current = self.run(id).await;
            if current.state.is_terminal() {
                return current;
            }
            assert!(std::time::Instant::now() < deadline, "run still {} after {limit_s} s", current.state);
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Every run of a job, oldest first.
    pub async fn runs_of(&self, job_id: &str) -> Vec<sundial_domain::run::Run> {
        let id = sundial_domain::job::JobId::parse(job_id).unwrap();
        let mut runs = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.services.ports.runs.list(&id, 100, cursor.as_deref(), None).await.unwrap();
            runs.extend(page.items);
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        runs.reverse();
        runs
    }

    /// Serves this stack's API over real HTTP on a free loopback port, until the test ends;
    /// returns its base URL.
    pub async fn serve(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let router = sundial_api::router(AppState::new(&self.services));
        tokio::spawn(async move { axum::serve(listener, router).await });
        url
    }

    /// A new SQS queue of a user's, as (URL, ARN): `<suffix>-of-<stack>`, allowed as a target
    /// and a notification inbox, and not named like one of the stack's own resources.
    pub async fn new_queue(&self, suffix: &str) -> (String, String) {
        create_queue(&self.sqs, &format!("{suffix}-of-{}", self.name)).await
    }

    /// Subscribes a new SQS queue to the shared events topic (it stands in for an operator's
    /// inbox); returns its URL.
    pub async fn subscribe_inbox(&self) -> String {
        let (url, arn) = self.new_queue("inbox").await;
        self.sns
            .subscribe()
            .topic_arn(&self.resources.events_topic_arn)
            .protocol("sqs")
            .endpoint(arn)
            .send()
            .await
            .unwrap();
        url
    }

    /// Reads up to `count` messages from a queue (deleting them), waiting up to `wait_s` seconds
    /// for them: each body as JSON (an SNS envelope, or the raw notification).
    pub async fn read_inbox(&self, url: &str, count: usize, wait_s: u64) -> Vec<Value> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(wait_s);
        let mut seen = Vec::new();
        while seen.len() < count && std::time::Instant::now() < deadline {
            let out = self
                .sqs
                .receive_message()
                .queue_url(url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .unwrap();
            for m in out.messages.unwrap_or_default() {
                seen.push(serde_json::from_str(m.body().unwrap()).unwrap());
                self.sqs
                    .delete_message()
                    .queue_url(url)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
            }
        }
        seen
    }

    /// Every message now visible on the runs queue (received and deleted), as JSON bodies.
    pub async fn drain_queue(&self) -> Vec<Value> {
        let mut bodies = Vec::new();
        loop {
            let out = self
                .sqs
                .receive_message()
                .queue_url(&self.resources.runs_queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(0)
                .send()
                .await
                .unwrap();
            let messages = out.messages.unwrap_or_default();
            if messages.is_empty() {
                return bodies;
            }
            for m in messages {
                bodies.push(serde_json::from_str(m.body().unwrap()).unwrap());
                self.sqs
                    .delete_message()
                    .queue_url(&self.resources.runs_queue_url)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
            }
        }
    }

    /// How many messages the runs queue holds, visible, delayed or in flight.
    pub async fn queue_depth(&self) -> u64 {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let names = [
            A::ApproximateNumberOfMessages,
            A::ApproximateNumberOfMessagesDelayed,
            A::ApproximateNumberOfMessagesNotVisible,
        ];
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.resources.runs_queue_url)
            .set_attribute_names(Some(names.to_vec()))
            .send()
            .await
            .unwrap();
        let attrs = out.attributes.unwrap_or_default();
        names.iter().map(|a| attrs.get(a).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)).sum()
    }

    /// Every item of the jobs table (jobs, name locks, owner counters).
    pub async fn jobs_table_items(&self) -> Vec<HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
        let out = self.dynamo.scan().table_name(&self.resources.jobs_table).send().await.unwrap();
        out.items.unwrap_or_default()
    }

    /// The jobs of the `by-due` index (sparse: active jobs with a next run).
    pub async fn due_index_ids(&self) -> Vec<String> {
        let out = self
            .dynamo
            .scan()
            .table_name(&self.resources.jobs_table)
            .index_name(sundial_aws::dynamo::jobs::BY_DUE_INDEX)
            .send()
            .await
            .unwrap();
        out.items().iter().filter_map(|i| i.get("job_id").and_then(|v| v.as_s().ok()).cloned()).collect()
    }
}

#[async_trait]
impl Harness for Stack {
    async fn deploy(vars: &[(&'static str, &str)]) -> Self {
        let vars = vars.iter().map(|(k, v)| (*k, v.to_string())).collect();
        Stack::with(Options { vars, clock: None }).await.watching_events().await
    }

    fn use_cases_over(
        &self,
        ports: &sundial_app::ports::Ports,
        change: impl FnOnce(&mut sundial_app::use_cases::Settings) + Send,
    ) -> sundial_app::use_cases::UseCases {
        self.rewired(ports, change)
    }

    fn api(&self) -> &Api {
        &self.api
    }

    async fn deploy_at(now: &str, vars: &[(&'static str, &str)]) -> Self {
        let clock = Arc::new(sundial_domain::clock::ManualClock::new(now.parse().unwrap()));
        let mut stack = Stack::at(&clock, vars).await.watching_events().await;
        stack.manual_clock = Some(clock);
        stack
    }

    fn set_clock(&self, now: chrono::DateTime<chrono::Utc>) {
        self.manual_clock.as_ref().expect("a stack deployed on a manual clock (deploy_at)").set(now);
    }

    fn use_cases(&self) -> &sundial_app::use_cases::UseCases {
        &self.services.use_cases
    }

    fn ports(&self) -> &sundial_app::ports::Ports {
        &self.services.ports
    }

    fn target_url(&self) -> String {
        self.target.url.clone()
    }

    fn answer_next(&self, statuses: &[u16]) {
        self.target.answer_next(statuses);
    }

    fn target_calls(&self) -> Vec<TargetCall> {
        use sundial_domain::target::headers;
        let header = |hit: &Hit, name: &str| hit.headers[name].to_str().unwrap().to_string();
        let calls = self.target.hits().into_iter();
        calls
            .map(|hit| TargetCall {
                job_id: header(&hit, headers::JOB_ID),
                run_id: header(&hit, headers::RUN_ID),
                attempt: header(&hit, headers::ATTEMPT).parse().unwrap(),
                callback_token: header(&hit, headers::CALLBACK_TOKEN),
                at: hit.at,
                payload: serde_json::from_slice(&hit.body).unwrap_or(serde_json::Value::Null),
            })
            .collect()
    }

    async fn drive(&self, id: &sundial_domain::run::RunId, limit_s: u32) -> sundial_domain::run::Run {
        Stack::drive(self, &self.services.use_cases.worker, id, u64::from(limit_s)).await
    }

    /// The emulator's latency and the test's polling (every 100 ms) on a loaded two-core machine.
    fn latency(&self) -> chrono::Duration {
        chrono::Duration::seconds(10)
    }

    async fn queue_depth(&self) -> usize {
        usize::try_from(Stack::queue_depth(self).await).unwrap()
    }

    async fn work(&self, count: usize, worker: &str) -> Vec<String> {
        let (queue, inbox) = (self.services.ports.queue.as_ref(), self.services.inbox.as_ref());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut bodies = Vec::new();
        while bodies.len() < count && std::time::Instant::now() < deadline {
            let worker_uc = &self.services.use_cases.worker;
            // Exactly `count`: on the emulator a retry sent meanwhile becomes visible in real time.
            let most = count - bodies.len();
            bodies.extend(
                sundial_testkit::harness::consume_visible(worker_uc, queue, inbox, worker, most).await,
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        assert_eq!(bodies.len(), count, "messages on the runs queue");
        bodies
    }

    async fn take_messages(&self) -> Vec<String> {
        self.drain_queue().await.iter().map(Value::to_string).collect()
    }

    async fn told_alerts(&self) -> Vec<String> {
        let bodies = self.told().await;
        bodies
            .iter()
            .filter(|b| b.get("run_id").is_none() && b.get("job_id").is_none())
            .map(|b| b["event"].as_str().unwrap().to_string())
            .collect()
    }

    async fn told_about_job(&self, job_id: &str) -> Vec<serde_json::Value> {
        let bodies = self.told().await;
        bodies.into_iter().filter(|b| b.get("run_id").is_none() && b["job_id"] == job_id).collect()
    }

    async fn told_about(&self, run: &sundial_domain::run::RunId) -> Vec<String> {
        let run = run.to_string();
        let bodies = self.told().await;
        bodies
            .iter()
            .filter(|b| b["run_id"] == run.as_str())
            .map(|b| b["event"].as_str().unwrap().to_string())
            .collect()
    }

    async fn import_jobs(&self, jobs: &[sundial_domain::job::Job]) {
        let store = sundial_aws::dynamo::DynamoJobStore::new(
            self.dynamo.clone(),
            &self.resources.jobs_table,
            &self.resources.runs_table,
            self.config.due_shards,
            Ledger::new(),
        );
        store.import(jobs).await.unwrap();
    }

    async fn stored_job(&self, id: &str) -> Option<sundial_domain::job::Job> {
        let id = sundial_domain::job::JobId::parse(id).unwrap();
        self.services.ports.jobs.get(&id).await.unwrap()
    }

    async fn run(&self, id: &sundial_domain::run::RunId) -> sundial_domain::run::Run {
        Stack::run(self, id).await
    }

    async fn runs_of(&self, job_id: &str) -> Vec<sundial_domain::run::Run> {
        Stack::runs_of(self, job_id).await
    }

    async fn stores_nothing(&self) -> bool {
        let runs = self.dynamo.scan().table_name(&self.resources.runs_table).limit(1).send().await.unwrap();
        self.jobs_table_items().await.is_empty() && runs.items().is_empty()
    }

    async fn due_job_ids(&self) -> Vec<String> {
        self.due_index_ids().await
    }
}

/// Creates the SQS queue `name`; returns its URL and ARN.
pub async fn create_queue(sqs: &aws_sdk_sqs::Client, name: &str) -> (String, String) {
    let url = sqs.create_queue().queue_name(name).send().await.unwrap().queue_url.unwrap();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()[&aws_sdk_sqs::types::QueueAttributeName::QueueArn]
        .clone();
    (url, arn)
}

/// One request a target server received.
#[derive(Debug, Clone)]
pub struct Hit {
    pub at: chrono::DateTime<chrono::Utc>,
    pub method: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// What a target server does with its n-th request (counting from 0).
#[derive(Debug, Clone, Copy)]
pub enum Answer {
    Status(u16),
    /// Never answers.
    Hang,
}

/// A real HTTP target on loopback that records what it receives and answers by script: the
/// statuses queued by [`TargetServer::answer_next`] first, then the script's answer.
#[derive(Debug, Clone)]
pub struct TargetServer {
    pub url: String,
    hits: Arc<std::sync::Mutex<Vec<Hit>>>,
    next: Arc<std::sync::Mutex<std::collections::VecDeque<u16>>>,
}

impl TargetServer {
    pub async fn start(script: impl Fn(usize) -> Answer + Send + Sync + 'static) -> TargetServer {
        use axum::response::IntoResponse;
        let hits: Arc<std::sync::Mutex<Vec<Hit>>> = Arc::default();
        let next: Arc<std::sync::Mutex<std::collections::VecDeque<u16>>> = Arc::default();
        let script = Arc::new(script);
        let (recorded, queued) = (hits.clone(), next.clone());
        let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
            let (hits, script, queued) = (recorded.clone(), script.clone(), queued.clone());
            async move {
                let (parts, body) = request.into_parts();
                let body = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default().to_vec();
                let n = {
                    let mut hits = hits.lock().unwrap();
                    hits.push(Hit {
                        at: chrono::Utc::now(),
                        method: parts.method.to_string(),
                        headers: parts.headers,
                        body,
                    });
                    hits.len() - 1
                };
                let answer =
                    queued.lock().unwrap().pop_front().map(Answer::Status).unwrap_or_else(|| script(n));
                match answer {
                    Answer::Status(code) => {
                        (StatusCode::from_u16(code).unwrap(), format!("answer {n}")).into_response()
                    }
                    Answer::Hang => {
                        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                        StatusCode::OK.into_response()
                    }
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        TargetServer { url, hits, next }
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// The next calls answer `statuses`, in order, before the script answers again.
    pub fn answer_next(&self, statuses: &[u16]) {
        self.next.lock().unwrap().extend(statuses);
    }
}

/// Serves the workspace's functions through `cargo lambda watch` (installed into the project
/// venv by the test scripts) on a free loopback port, with `env` in their environment; each
/// function is built on its first invocation. The process ends with the returned guard.
pub async fn cargo_lambda_watch(env: &[(String, String)]) -> (tokio::process::Child, String) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    // Logs and the env file go outside the workspace: cargo lambda watch rebuilds when its
    // folder changes.
    let log = std::fs::File::create(std::env::temp_dir().join(format!("cargo-lambda-{port}.log"))).unwrap();
    let env_file = std::env::temp_dir().join(format!("cargo-lambda-{port}.env"));
    let lines: String = env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(&env_file, lines).unwrap();
    let child = tokio::process::Command::new(root.join(".venv/bin/cargo-lambda"))
        .args(["lambda", "watch", "--invoke-address", "127.0.0.1", "--invoke-port", &port.to_string()])
        .arg("--env-file")
        .arg(&env_file)
        .current_dir(&root)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("cargo-lambda is installed into .venv by scripts/test");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "cargo lambda watch did not listen on {port}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    (child, format!("http://127.0.0.1:{port}"))
}
