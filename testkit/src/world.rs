//! The in-memory deployment: the use cases and the API wired exactly as
//! `sundial_wiring::services::Services` wires them, from the same configuration
//! (`Config::from_vars`), over the in-memory ports of `sundial-memory` on a [`ManualClock`]; and
//! the helpers that deliver the runs queue to the worker as the local poller does ([`poll_once`]:
//! receive, handle, settle the disposition, delete). Time moves only when a test moves it: the
//! queue's delays and holds, leases, backoffs and deadlines all follow the manual clock.

use crate::api::{API_KEYS, Api};
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use sundial_api::{ApiSettings, AppState};
use sundial_app::claim::ClaimSettings;
use sundial_app::meter::Meter;
use sundial_app::ports::Ports;
use sundial_app::tick::TickSettings;
use sundial_app::timer::{Timer, TokioTimer};
use sundial_app::use_cases::{self, UseCases};
use sundial_app::worker::poll::poll_once;
use sundial_app::worker::{Worker, WorkerSettings};
use sundial_aws::provision::Resources;
use sundial_domain::clock::{Clock, ManualClock};
use sundial_domain::due_index::format_instant;
use sundial_domain::job::{Job, JobId};
use sundial_domain::ports::store::RunHistory;
use sundial_domain::ports::targets::{Answer, Caller, Invocation};
use sundial_domain::run::{Run, RunId};
use sundial_domain::watchdog::rules::WatchdogSettings;
use sundial_memory::{
    MemoryEventBus, MemoryGroupStore, MemoryIdempotencyStore, MemoryJobStore, MemoryQueue, MemoryRunStore,
    MemoryTickStateStore, MemoryTopics, ScriptedCaller,
};
use sundial_wiring::config::Config;

/// The owner of every job of the suite (the owner of [`crate::api::ALICE`]'s key).
pub const OWNER: &str = "alice";
/// The stack name of every deployment in memory.
pub const STACK: &str = "sundial";
/// Where jobs' HTTP targets point: never called (the [`ScriptedCaller`] answers), only validated.
pub const TARGET: &str = "https://target.example.test/hook";
/// The worker id [`World::deliver`] hands messages to.
pub const WORKER: &str = "test-worker";

pub fn t(s: &str) -> DateTime<Utc> {
    s.parse().expect("an RFC 3339 instant")
}

/// The instants runs are scheduled at, as stored.
pub fn instants(runs: &[Run]) -> Vec<String> {
    runs.iter().map(|r| format_instant(r.scheduled_at())).collect()
}

/// A job document calling [`TARGET`] on `schedule`, with the fields of `extra` added.
pub fn job(name: &str, schedule: Value, extra: Value) -> Value {
    let mut job = serde_json::json!({
        "name": name,
        "schedule": schedule,
        "target": {"type": "http", "url": TARGET}
    });
    if let (Some(job), Some(extra)) = (job.as_object_mut(), extra.as_object()) {
        job.extend(extra.clone());
    }
    job
}

/// What the deployment is configured with: `Config`'s defaults, and what a test changes.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `SUNDIAL_DUE_SHARDS`: partitions of the due and in-flight indexes.
    pub shards: u16,
    pub claim: ClaimSettings,
    pub tick: TickSettings,
    pub watchdog: WatchdogSettings,
    /// `SUNDIAL_HEARTBEAT_WINDOW_S`.
    pub heartbeat_window: Duration,
    /// What the target answers once the caller's script is spent.
    pub answer: Answer,
    /// Whether a use case's pause moves the manual clock ([`ClockTimer`]) instead of waiting.
    pub pauses_move_clock: bool,
}

impl Default for Settings {
    /// What `Config::from_vars` gives without variables.
    fn default() -> Self {
        Settings::of(config(&[]))
    }
}

impl Settings {
    /// What `config` says, and targets that answer 200.
    pub fn of(config: Config) -> Self {
        Settings {
            shards: config.due_shards,
            claim: config.claim,
            tick: config.tick,
            watchdog: config.watchdog,
            heartbeat_window: config.heartbeat_window,
            answer: Answer::Succeeded { status: Some(200), output: None },
            pauses_move_clock: false,
        }
    }
}

/// The configuration of a test deployment: `vars` over the ones every test deployment has (the
/// API keys of [`crate::api`], targets allowed on loopback as the emulator's stacks allow them).
pub fn config(vars: &[(&str, &str)]) -> Config {
    let mut all: HashMap<&str, &str> = HashMap::from([
        ("SUNDIAL_STACK", STACK),
        ("SUNDIAL_API_KEYS", API_KEYS),
        ("SUNDIAL_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128"),
    ]);
    all.extend(vars.iter().copied());
    let named = |what: &str| format!("{STACK}-{what}-in-memory");
    let resources = Resources {
        jobs_table: named("jobs"),
        runs_table: named("runs"),
        idempotency_table: named("idempotency"),
        runs_queue_url: named("runs"),
        dlq_url: named("runs-dlq"),
        events_topic_arn: named("events"),
    };
    Config::from_vars(&all, Some(resources)).expect("a test configuration")
}

impl Settings {
    /// `SUNDIAL_CLAIM_AHEAD_S`.
    pub fn claim_ahead_s(mut self, seconds: i64) -> Self {
        self.claim.claim_ahead = Duration::seconds(seconds);
        self
    }

    pub fn heartbeat_window_s(mut self, seconds: i64) -> Self {
        self.heartbeat_window = Duration::seconds(seconds);
        self
    }

    pub fn shards(mut self, shards: u16) -> Self {
        self.shards = shards;
        self
    }

    pub fn answer(mut self, answer: Answer) -> Self {
        self.answer = answer;
        self
    }

    /// A use case's pause moves the clock by its length, at once.
    pub fn pauses_move_clock(mut self) -> Self {
        self.pauses_move_clock = true;
        self
    }
}

/// A timer whose pause moves a manual clock by its length instead of waiting. Pauses taken side
/// by side add up instead of overlapping: a test with two at once sees the clock moved by both.
#[derive(Debug)]
pub struct ClockTimer(pub Arc<ManualClock>);

#[async_trait]
impl Timer for ClockTimer {
    async fn sleep(&self, duration: std::time::Duration) {
        self.0.advance(Duration::from_std(duration).unwrap_or(Duration::MAX));
    }
}

/// One deployment in memory.
#[derive(Debug, Clone)]
pub struct World {
    pub clock: Arc<ManualClock>,
    pub job_store: Arc<MemoryJobStore>,
    pub runs: Arc<MemoryRunStore>,
    pub tick_state: Arc<MemoryTickStateStore>,
    pub group_store: Arc<MemoryGroupStore>,
    pub queue: Arc<MemoryQueue>,
    pub bus: Arc<MemoryEventBus>,
    pub topics: Arc<MemoryTopics>,
    /// Every target: answers by script, then with [`Settings::answer`].
    pub caller: Arc<ScriptedCaller>,
    /// Every span of runs' traces.
    pub spans: Arc<sundial_memory::MemorySpans>,
    /// Every alert posted to a Slack webhook or PagerDuty, by URL.
    pub channels: Arc<sundial_memory::channels::MemoryChannels>,
    pub ports: Ports,
    /// Every use case, over [`World::ports`].
    pub use_cases: UseCases,
    pub idempotency: Arc<MemoryIdempotencyStore>,
    /// The API over this deployment's use cases.
    pub api: Api,
    /// What the use cases are configured with, for use cases rebuilt over other ports.
    use_case_settings: use_cases::Settings,
}

impl World {
    /// A deployment with the default configuration, its clock at `now`.
    pub fn at(now: &str) -> World {
        World::with(now, Settings::default())
    }

    /// The wiring of `Services::new`, over the ports in memory.
    pub fn with(now: &str, settings: Settings) -> World {
        World::configured(now, &[], settings)
    }

    /// A deployment configured with `vars` (as [`config`] reads them), then `settings`.
    pub fn configured(now: &str, vars: &[(&str, &str)], settings: Settings) -> World {
        crate::logs::capture();
        let clock = Arc::new(ManualClock::new(t(now)));
        // One trail, written by every store with its changes.
        let trail = sundial_memory::MemoryAuditTrail::new();
        let job_store = Arc::new(MemoryJobStore::new(settings.shards).recording_to(trail.clone()));
        let runs = Arc::new(MemoryRunStore::new(settings.shards).recording_to(trail.clone()));
        let tick_state = Arc::new(MemoryTickStateStore::new());
        let group_store = Arc::new(MemoryGroupStore::new().recording_to(trail.clone()));
        let queue = Arc::new(MemoryQueue::new(clock.clone()));
        let bus = Arc::new(MemoryEventBus::new());
        let topics = Arc::new(MemoryTopics::new());
        let caller = Arc::new(ScriptedCaller::new(settings.answer.clone()));
        let spans = Arc::new(sundial_memory::MemorySpans::default());
        let channels = Arc::new(sundial_memory::channels::MemoryChannels::default());
        let ports = Ports {
            jobs: job_store.clone(),
            runs: runs.clone(),
            groups: group_store.clone(),
            calendars: Arc::new(sundial_memory::MemoryCalendarStore::new().recording_to(trail.clone())),
            keys: Arc::new(sundial_memory::MemoryKeyStore::new().recording_to(trail.clone())),
            audit: Arc::new(trail),
            fences: Arc::new(sundial_memory::MemoryFenceStore::new()),
            tick_state: tick_state.clone(),
            queue: queue.clone(),
            bus: bus.clone(),
            channels: channels.clone(),
            topics: topics.clone(),
            caller: caller.clone(),
            spans: spans.clone(),
            clock: clock.clone(),
            timer: match settings.pauses_move_clock {
                true => Arc::new(ClockTimer(clock.clone())) as Arc<dyn Timer>,
                false => Arc::new(TokioTimer),
            },
            entropy: Arc::new(sundial_domain::entropy::OsEntropy),
            meter: Meter::new(false),
        };
        let config = config(vars);
        let worker_settings =
            WorkerSettings { heartbeat_window: settings.heartbeat_window, ..WorkerSettings::default() };
        let use_case_settings = use_cases::Settings {
            claim: settings.claim.clone(),
            tick: settings.tick,
            worker: worker_settings,
            watchdog: settings.watchdog,
            ..config.use_case_settings()
        };
        let use_cases = UseCases::new(&ports, use_case_settings.clone());
        let idempotency = Arc::new(MemoryIdempotencyStore::new());
        let api =
            Api::new(AppState::over(&ports, &use_cases, idempotency.clone(), ApiSettings::from(&config)));
        World {
            clock,
            job_store,
            runs,
            tick_state,
            group_store,
            queue,
            bus,
            topics,
            caller,
            spans,
            channels,
            ports,
            use_cases,
            idempotency,
            api,
            use_case_settings,
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Lets `seconds` of simulated time pass.
    pub fn pass(&self, seconds: i64) {
        self.clock.advance(Duration::seconds(seconds));
    }

    pub fn set(&self, now: &str) {
        self.clock.set(t(now));
    }

    /// A worker of this deployment whose targets are called through `caller`.
    pub fn worker_calling(&self, caller: Arc<dyn Caller>) -> Worker {
        self.rewired(&Ports { caller, ..self.ports.clone() }, |_| {}).worker
    }

    /// The use cases over `ports` (this deployment's, with one swapped: a fault, a recorder),
    /// configured as this deployment's are, then as `change` says: built by `UseCases::new`, as
    /// every process builds them.
    pub fn rewired(&self, ports: &Ports, change: impl FnOnce(&mut use_cases::Settings)) -> UseCases {
        let mut settings = self.use_case_settings.clone();
        change(&mut settings);
        UseCases::new(ports, settings)
    }

    /// Creates a job as [`OWNER`] through the job use cases (which claim it when due soon).
    pub async fn create(&self, document: Value) -> Job {
        let document = serde_json::from_value(document).expect("a job document");
        self.use_cases.jobs.create(&OWNER.to_string(), document).await.expect("the job is created")
    }

    /// Triggers a run of `job` now, as [`OWNER`].
    pub async fn trigger(&self, job: &Job) -> RunId {
        self.use_cases
            .jobs
            .trigger(&OWNER.to_string(), &job.id, None)
            .await
            .expect("the run is triggered")
            .id()
    }

    /// The run as stored; panics if there is none.
    pub async fn run(&self, id: &RunId) -> Run {
        self.runs.get(&id.job_id, &id.key).await.expect("reading a run").expect("the run exists")
    }

    /// Every run of a job, oldest first.
    pub fn runs_of(&self, job: &JobId) -> Vec<Run> {
        let mut runs: Vec<Run> = self.runs.all().into_iter().filter(|r| &r.job_id == job).collect();
        runs.sort_by(|a, b| a.key.cmp(&b.key));
        runs
    }

    /// The job as stored (`None` once deleted).
    pub async fn stored_job(&self, id: &JobId) -> Option<Job> {
        use sundial_domain::ports::store::Catalogue;
        self.job_store.get(id).await.expect("reading a job")
    }

    /// Hands every message visible now to the worker, as the local poller does, until none is
    /// visible; returns how many were handled. Time does not move.
    pub async fn deliver(&self) -> usize {
        let mut handled = 0;
        for _ in 0..1_000 {
            let queue = self.queue.as_ref();
            let n = poll_once(&self.use_cases.worker, queue, queue, WORKER, 0)
                .await
                .expect("receiving from the queue");
            if n == 0 {
                return handled;
            }
            handled += n;
        }
        panic!("messages kept coming back visible at {}", self.now());
    }

    /// Delivers messages, a simulated second at a time, until the run has ended; panics past
    /// `limit_s` simulated seconds.
    pub async fn drive(&self, id: &RunId, limit_s: i64) -> Run {
        let deadline = self.now() + Duration::seconds(limit_s);
        loop {
            self.deliver().await;
            let run = self.run(id).await;
            if run.state.is_terminal() {
                return run;
            }
            assert!(self.now() < deadline, "run still {} after {limit_s} simulated seconds", run.state);
            self.pass(1);
        }
    }

    /// The events published to the shared topic about `run`, in order.
    pub fn told_about(&self, run: &RunId) -> Vec<&'static str> {
        let run = run.to_string();
        self.bus.published().into_iter().filter(|n| n.run_id == run).map(|n| n.event).collect()
    }

    /// Every event published to the shared topic, sorted.
    pub fn told(&self) -> Vec<&'static str> {
        let mut events: Vec<&'static str> = self.bus.published().into_iter().map(|n| n.event).collect();
        events.sort_unstable();
        events
    }
}

/// A target that never answers, standing in for a worker that dies mid-call: the test drops the
/// worker's future once [`Hanging::called`] fires.
#[derive(Debug, Default)]
pub struct Hanging {
    pub called: tokio::sync::Notify,
    calls: AtomicUsize,
}

impl Hanging {
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Caller for Hanging {
    async fn call(&self, _invocation: &Invocation<'_>) -> Answer {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.called.notify_one();
        std::future::pending().await
    }
}
