//! What a scenario needs of a deployment. A scenario is written once, over `H: Harness`, and
//! instantiated over the [`World`] in memory (fast, on a manual clock) and, where the real
//! adapters matter, over the emulator's `Stack` (`sundial-tests`).

use crate::api::{ALICE, Api};
use crate::world::{Settings, TARGET, World, config};
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use http::StatusCode;
use sundial_app::ports::Ports;
use sundial_app::use_cases::{self, UseCases};
use sundial_app::worker::Worker;
use sundial_app::worker::poll::consume_one;
use sundial_domain::job::{Job, JobId};
use sundial_domain::ports::queue::{RunInbox, RunQueue};
use sundial_domain::run::{Run, RunId};
use sundial_domain::target::classify_status;

/// One call the deployment's test target received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetCall {
    pub job_id: String,
    pub run_id: String,
    pub attempt: u32,
    /// The token the run's callbacks must carry.
    pub callback_token: String,
    pub at: DateTime<Utc>,
    /// What it delivered (an HTTP target's JSON body; null for none).
    pub payload: serde_json::Value,
}

/// One deployment a scenario runs on.
#[async_trait]
pub trait Harness: Send + Sync + Sized {
    /// A new deployment of its own, configured as every test deployment is (`world::config`)
    /// and with `vars` besides.
    async fn deploy(vars: &[(&'static str, &str)]) -> Self;

    /// A new deployment on a manual clock standing at `now` (RFC 3339) until
    /// [`Harness::set_clock`] moves it, configured with `vars` besides.
    async fn deploy_at(now: &str, vars: &[(&'static str, &str)]) -> Self;

    /// Moves the manual clock of a deployment made by [`Harness::deploy_at`] to `now`.
    fn set_clock(&self, now: DateTime<Utc>);

    /// The API over this deployment's use cases.
    fn api(&self) -> &Api;

    /// The use cases, for what a request cannot reach: a tick, a retried request's key.
    fn use_cases(&self) -> &UseCases;

    /// The ports the use cases run over, for a use case built with a port swapped (a fault).
    fn ports(&self) -> &Ports;

    /// The use cases over `ports` (these, with one swapped), configured as this deployment's
    /// are, then as `change` says.
    fn use_cases_over(&self, ports: &Ports, change: impl FnOnce(&mut use_cases::Settings) + Send)
    -> UseCases;

    /// Writes `jobs` into the jobs store as they are, as a restore would: no API, no claim.
    async fn import_jobs(&self, jobs: &[Job]);

    /// The job `id` as stored (`None` once deleted).
    async fn stored_job(&self, id: &str) -> Option<Job>;

    /// The run `id` as stored; panics if there is none.
    async fn run(&self, id: &RunId) -> Run;

    /// Every run of a job, oldest first.
    async fn runs_of(&self, job_id: &str) -> Vec<Run>;

    /// Whether nothing is stored: no job, no group, no run (on the emulator, no item of the jobs
    /// table at all: names, counters and links included). What a refused request must leave.
    async fn stores_nothing(&self) -> bool;

    /// The ids of the jobs the tick would find in the due index.
    async fn due_job_ids(&self) -> Vec<String>;

    /// The URL of the deployment's test target, which the calls of its jobs' HTTP targets reach:
    /// a loopback server on the emulator; in memory, the scripted caller answers any URL.
    fn target_url(&self) -> String;

    /// The target's next calls answer these HTTP statuses, in order; later ones answer 200.
    fn answer_next(&self, statuses: &[u16]);

    /// Every call the target received, in order.
    fn target_calls(&self) -> Vec<TargetCall>;

    /// Hands the runs queue to the worker until run `id` has ended; panics past `limit_s`
    /// seconds: simulated in memory (each pass moves the clock a second), real on the emulator.
    async fn drive(&self, id: &RunId, limit_s: u32) -> Run;

    /// Takes every message of the runs queue visible now off the queue, unhandled; returns
    /// their bodies.
    async fn take_messages(&self) -> Vec<String>;

    /// Hands `count` messages of the runs queue to the worker as `worker` (waiting for delayed
    /// ones on the emulator, up to 20 s), each settled and deleted as the local poller does;
    /// returns their bodies. Panics unless there are `count`; in memory, where nothing becomes
    /// visible unless the clock moves, unless exactly `count` are visible.
    async fn work(&self, count: usize, worker: &str) -> Vec<String>;

    /// The scheduler's alerts told on the shared topic (notifications that name no run), in the
    /// order they were published.
    async fn told_alerts(&self) -> Vec<String>;

    /// How late the harness itself may be, beyond what Sundial promises: nothing in memory, where
    /// time moves only when a test moves it; the emulator's and the machine's latency on it.
    fn latency(&self) -> Duration {
        Duration::zero()
    }

    /// How many messages the runs queue holds, visible, delayed or held by a receiver.
    async fn queue_depth(&self) -> usize;

    /// The events told on the shared topic about `run`, in the order they were published.
    async fn told_about(&self, run: &RunId) -> Vec<String>;

    /// The notices told on the shared topic about job `job_id` as a whole (`missed`), as their
    /// JSON bodies, in the order they were published.
    async fn told_about_job(&self, job_id: &str) -> Vec<serde_json::Value>;

    /// Triggers a run of `job_id` through the API as Alice; panics unless it is accepted.
    async fn trigger(&self, job_id: &str) -> RunId {
        let reply =
            self.api().post(ALICE, &format!("/v1/jobs/{job_id}/trigger"), &serde_json::json!({})).await;
        assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.body);
        RunId::parse(reply.body["id"].as_str().unwrap()).unwrap()
    }
}

#[async_trait]
impl Harness for World {
    /// On a clock standing at the wall clock's present, as a client reads it.
    async fn deploy(vars: &[(&'static str, &str)]) -> Self {
        World::configured(&Utc::now().to_rfc3339(), vars, Settings::of(config(vars)))
    }

    fn use_cases_over(
        &self,
        ports: &Ports,
        change: impl FnOnce(&mut use_cases::Settings) + Send,
    ) -> UseCases {
        self.rewired(ports, change)
    }

    fn api(&self) -> &Api {
        &self.api
    }

    async fn deploy_at(now: &str, vars: &[(&'static str, &str)]) -> Self {
        World::configured(now, vars, Settings::of(config(vars)))
    }

    fn set_clock(&self, now: DateTime<Utc>) {
        self.clock.set(now);
    }

    fn use_cases(&self) -> &UseCases {
        &self.use_cases
    }

    fn ports(&self) -> &Ports {
        &self.ports
    }

    async fn import_jobs(&self, jobs: &[Job]) {
        self.job_store.import(jobs).unwrap();
    }

    async fn stored_job(&self, id: &str) -> Option<Job> {
        World::stored_job(self, &JobId::parse(id).unwrap()).await
    }

    async fn run(&self, id: &RunId) -> Run {
        World::run(self, id).await
    }

    async fn runs_of(&self, job_id: &str) -> Vec<Run> {
        World::runs_of(self, &JobId::parse(job_id).unwrap())
    }

    fn target_url(&self) -> String {
        TARGET.to_string()
    }

    fn answer_next(&self, statuses: &[u16]) {
        for status in statuses {
            self.caller.push(classify_status(*status, String::new()));
        }
    }

    fn target_calls(&self) -> Vec<TargetCall> {
        let calls = self.caller.calls().into_iter();
        calls
            .map(|c| TargetCall {
                job_id: c.job_id.to_string(),
                run_id: c.run_id,
                attempt: c.attempt,
                callback_token: c.callback_token,
                at: c.sent_at,
                payload: c.payload,
            })
            .collect()
    }

    async fn drive(&self, id: &RunId, limit_s: u32) -> Run {
        World::drive(self, id, i64::from(limit_s)).await
    }

    async fn queue_depth(&self) -> usize {
        self.queue.depth()
    }

    async fn take_messages(&self) -> Vec<String> {
        let queue = self.queue.as_ref();
        let mut bodies = Vec::new();
        loop {
            let received = RunInbox::receive(queue, 10, 0).await.unwrap();
            if received.is_empty() {
                return bodies;
            }
            for message in received {
                RunInbox::delete(queue, &message.receipt).await.unwrap();
                bodies.push(message.body);
            }
        }
    }

    async fn work(&self, count: usize, worker: &str) -> Vec<String> {
        let queue = self.queue.as_ref();
        let bodies = consume_visible(&self.use_cases.worker, queue, queue, worker, count + 1).await;
        assert_eq!(bodies.len(), count, "messages on the runs queue");
        bodies
    }

    async fn told_alerts(&self) -> Vec<String> {
        self.bus.alerts().into_iter().map(|a| a.event.to_string()).collect()
    }

    async fn told_about(&self, run: &RunId) -> Vec<String> {
        World::told_about(self, run).into_iter().map(str::to_string).collect()
    }

    async fn told_about_job(&self, job_id: &str) -> Vec<serde_json::Value> {
        let notices = self.bus.notices().into_iter().filter(|(n, _)| n.job_id == job_id);
        notices.map(|(n, _)| serde_json::to_value(n).unwrap_or_default()).collect()
    }

    async fn stores_nothing(&self) -> bool {
        self.job_store.all().is_empty() && self.runs.all().is_empty() && self.group_store.is_empty()
    }

    async fn due_job_ids(&self) -> Vec<String> {
        self.job_store.due_index().into_iter().map(|(id, _)| id.to_string()).collect()
    }
}

/// Receives the messages of the runs queue visible now, `most` at the most, and hands each to
/// the worker as `worker_id`, settled and deleted as the local poller does; returns their
/// bodies.
pub async fn consume_visible(
    worker: &Worker,
    queue: &dyn RunQueue,
    inbox: &dyn RunInbox,
    worker_id: &str,
    most: usize,
) -> Vec<String> {
    let mut bodies = Vec::new();
    while bodies.len() < most {
        let wanted = i32::try_from((most - bodies.len()).min(10)).unwrap_or(10);
        let received = inbox.receive(wanted, 0).await.unwrap();
        if received.is_empty() {
            return bodies;
        }
        for message in &received {
            bodies.push(message.body.clone());
            consume_one(worker, queue, inbox, message, worker_id).await;
        }
    }
    bodies
}
