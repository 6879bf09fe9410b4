//! Wiring: the adapters and use cases a process needs, built once from configuration. Every
//! function and the local runtime start here, so they are assembled the same way.

use crate::clock::Clock;
use crate::config::Config;
use crate::events::{Announcer, EventBus, SnsEventBus};
use crate::history::History;
use crate::jobs::Jobs;
use crate::metrics::{Clients, Ledger};
use crate::queue::{RunInbox, RunQueue, SqsRunQueue};
use crate::record::Recorder;
use crate::store::{
    DynamoIdempotencyStore, DynamoJobStore, DynamoRunStore, DynamoTickStateStore, IdempotencyStore, JobStore,
    RunStore, TickStateStore,
};
use crate::tick::Tick;
use crate::tick::claim::Claimer;
use crate::topics::{JobTopics, SnsJobTopics, TopicNames};
use crate::watchdog::Watchdog;
use crate::worker::target::{Caller, Targets};
use crate::worker::{Worker, WorkerSettings};
use std::sync::Arc;

/// Everything built from one configuration.
#[derive(Debug, Clone)]
pub struct Services {
    pub config: Config,
    pub clock: Arc<dyn Clock>,
    pub ledger: Arc<Ledger>,
    pub meter: Arc<crate::meter::Meter>,
    pub job_store: Arc<dyn JobStore>,
    pub runs: Arc<dyn RunStore>,
    pub queue: Arc<dyn RunQueue>,
    pub inbox: Arc<dyn RunInbox>,
    pub tick_state: Arc<dyn TickStateStore>,
    pub idempotency: Arc<dyn IdempotencyStore>,
    pub claimer: Claimer,
    pub jobs: Jobs,
    pub history: History,
    pub tick: Tick,
    pub worker: Worker,
    pub watchdog: Watchdog,
    pub announcer: Announcer,
    pub recorder: Recorder,
    pub topics: Arc<dyn JobTopics>,
}

impl Services {
    /// The services of a deployed function: configuration from the environment, the real clock.
    pub async fn from_env() -> Result<Self, crate::config::ConfigError> {
        let config = Config::from_env()?;
        let sdk = crate::config::aws_sdk_config().await;
        let clients = Clients::with_capacity_log(&sdk, crate::metrics::Ledger::new(), config.capacity_log);
        Ok(Services::new(config, &clients, Arc::new(crate::clock::SystemClock)))
    }

    pub fn new(config: Config, clients: &Clients, clock: Arc<dyn Clock>) -> Self {
        let r = &config.resources;
        let ledger = clients.ledger.clone();
        let meter = crate::meter::Meter::new(config.emf);
        let job_store: Arc<dyn JobStore> = Arc::new(DynamoJobStore::new(
            clients.dynamo.clone(),
            &r.jobs_table,
            config.due_shards,
            ledger.clone(),
        ));
        let runs: Arc<dyn RunStore> = Arc::new(DynamoRunStore::new(
            clients.dynamo.clone(),
            &r.runs_table,
            config.due_shards,
            ledger.clone(),
        ));
        let sqs_queue = Arc::new(SqsRunQueue::new(clients.sqs.clone(), &r.runs_queue_url, &r.dlq_url));
        let queue: Arc<dyn RunQueue> = sqs_queue.clone();
        let inbox: Arc<dyn RunInbox> = sqs_queue;
        let tick_state: Arc<dyn TickStateStore> =
            Arc::new(DynamoTickStateStore::new(clients.dynamo.clone(), &r.jobs_table));
        let idempotency: Arc<dyn IdempotencyStore> =
            Arc::new(DynamoIdempotencyStore::new(clients.dynamo.clone(), &r.idempotency_table));
        let names = TopicNames::new(&config.stack, &r.events_topic_arn);
        let topics: Arc<dyn JobTopics> = Arc::new(SnsJobTopics::new(clients.sns.clone(), names.clone()));
        let bus: Arc<dyn EventBus> =
            Arc::new(SnsEventBus::new(clients.sns.clone(), &r.events_topic_arn, names));
        let announcer = Announcer::new(bus, runs.clone(), config.public_url.clone());
        let recorder = Recorder::new(runs.clone(), announcer.clone());
        let claimer =
            Claimer::new(job_store.clone(), runs.clone(), queue.clone(), clock.clone(), config.claim.clone());
        let jobs = Jobs::new(
            job_store.clone(),
            clock.clone(),
            config.limits.clone(),
            config.targets.clone(),
            claimer.clone(),
            topics.clone(),
            config.page_tokens.clone(),
        );
        let tick = Tick::new(
            job_store.clone(),
            tick_state.clone(),
            claimer.clone(),
            clock.clone(),
            meter.clone(),
            config.tick.clone(),
        );
        let caller: Arc<dyn Caller> = Arc::new(Targets::new(
            clients.sqs.clone(),
            clients.sns.clone(),
            clients.lambda.clone(),
            config.targets.clone(),
        ));
        let worker_settings =
            WorkerSettings { heartbeat_window: config.heartbeat_window, ..WorkerSettings::default() };
        let worker = Worker::new(
            job_store.clone(),
            runs.clone(),
            caller,
            recorder.clone(),
            clock.clone(),
            meter.clone(),
            worker_settings,
        );
        let history = History::new(
            jobs.clone(),
            job_store.clone(),
            runs.clone(),
            queue.clone(),
            recorder.clone(),
            clock.clone(),
            config.heartbeat_window,
        );
        let watchdog = Watchdog::new(
            job_store.clone(),
            runs.clone(),
            queue.clone(),
            recorder.clone(),
            tick_state.clone(),
            clock.clone(),
            meter.clone(),
            config.watchdog.clone(),
        );
        Services {
            config,
            clock,
            ledger,
            meter,
            job_store,
            runs,
            queue,
            inbox,
            tick_state,
            idempotency,
            claimer,
            jobs,
            history,
            tick,
            worker,
            watchdog,
            announcer,
            recorder,
            topics,
        }
    }
}
