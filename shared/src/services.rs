//! Wiring: the adapters and use cases a process needs, built once from configuration. Every
//! function and the local runtime start here, so they are assembled the same way.

use crate::config::Config;
use std::sync::Arc;
use sundial_adapters::dynamo::{
    DynamoFenceStore, DynamoGroupStore, DynamoIdempotencyStore, DynamoJobStore, DynamoRunStore,
    DynamoTickStateStore,
};
use sundial_adapters::metrics::{Clients, Ledger};
use sundial_adapters::sns::bus::SnsEventBus;
use sundial_adapters::sns::topics::{SnsJobTopics, TopicNames};
use sundial_adapters::sqs::SqsRunQueue;
use sundial_adapters::targets::Targets;
use sundial_app::announce::Announcer;
use sundial_app::groups::Groups;
use sundial_app::jobs::{Jobs, JobsSettings};
use sundial_app::ports::Ports;
use sundial_app::record::Recorder;
use sundial_app::run_control::RunControl;
use sundial_app::tick::Tick;
use sundial_app::tick::claim::Claimer;
use sundial_app::use_cases::{Settings, UseCases};
use sundial_app::watchdog::Watchdog;
use sundial_app::worker::{Worker, WorkerSettings};
use sundial_domain::clock::Clock;
use sundial_domain::ports::bus::EventBus;
use sundial_domain::ports::queue::{RunInbox, RunQueue};
use sundial_domain::ports::store::{
    FenceStore, GroupStore, IdempotencyStore, JobStore, RunStore, TickStateStore,
};
use sundial_domain::ports::targets::Caller;
use sundial_domain::ports::topics::JobTopics;

/// Everything built from one configuration.
#[derive(Debug, Clone)]
pub struct Services {
    pub config: Config,
    /// The ports the use cases below run over (the fields that follow name the same ones).
    pub ports: Ports,
    pub clock: Arc<dyn Clock>,
    pub ledger: Arc<Ledger>,
    pub meter: Arc<sundial_app::meter::Meter>,
    pub job_store: Arc<dyn JobStore>,
    pub runs: Arc<dyn RunStore>,
    pub queue: Arc<dyn RunQueue>,
    pub inbox: Arc<dyn RunInbox>,
    pub tick_state: Arc<dyn TickStateStore>,
    pub idempotency: Arc<dyn IdempotencyStore>,
    pub claimer: Claimer,
    pub jobs: Jobs,
    pub groups: Groups,
    pub run_control: RunControl,
    pub tick: Tick,
    pub worker: Worker,
    pub watchdog: Watchdog,
    pub announcer: Announcer,
    pub recorder: Recorder,
    pub topics: Arc<dyn JobTopics>,
    pub forecasts: sundial_app::forecast::Forecasts,
}

impl Services {
    /// The services of a deployed function: configuration from the environment, the real clock.
    pub async fn from_env() -> Result<Self, crate::config::ConfigError> {
        let config = Config::from_env()?;
        let sdk = crate::config::aws_sdk_config().await;
        let clients =
            Clients::with_capacity_log(&sdk, sundial_adapters::metrics::Ledger::new(), config.capacity_log);
        Ok(Services::new(config, &clients, Arc::new(sundial_domain::clock::SystemClock)))
    }

    pub fn new(config: Config, clients: &Clients, clock: Arc<dyn Clock>) -> Self {
        let r = &config.resources;
        let ledger = clients.ledger.clone();
        let meter = sundial_app::meter::Meter::new(config.emf);
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
        let caller: Arc<dyn Caller> = Arc::new(Targets::new(clients.targets.clone(), config.targets.clone()));
        let groups: Arc<dyn GroupStore> =
            Arc::new(DynamoGroupStore::new(clients.dynamo.clone(), &r.jobs_table, ledger.clone()));
        let fences: Arc<dyn FenceStore> =
            Arc::new(DynamoFenceStore::new(clients.dynamo.clone(), &r.jobs_table, ledger.clone()));
        let ports = Ports {
            jobs: job_store.clone(),
            runs: runs.clone(),
            groups,
            fences,
            tick_state: tick_state.clone(),
            queue: queue.clone(),
            bus,
            topics: topics.clone(),
            caller,
            clock: clock.clone(),
            timer: Arc::new(sundial_app::timer::TokioTimer),
            entropy: Arc::new(sundial_domain::entropy::OsEntropy),
            meter: meter.clone(),
        };
        let settings = Settings {
            claim: config.claim.clone(),
            tick: config.tick.clone(),
            worker: WorkerSettings { heartbeat_window: config.heartbeat_window, ..WorkerSettings::default() },
            watchdog: config.watchdog.clone(),
            jobs: JobsSettings {
                limits: config.limits.clone(),
                targets: config.targets.clone(),
                page_tokens: config.page_tokens.clone(),
            },
            public_url: config.public_url.clone(),
        };
        let UseCases {
            announcer,
            recorder,
            claimer,
            jobs,
            groups,
            run_control,
            tick,
            worker,
            watchdog,
            forecasts,
        } = UseCases::new(&ports, settings);
        Services {
            config,
            ports,
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
            groups,
            run_control,
            tick,
            worker,
            watchdog,
            announcer,
            recorder,
            topics,
            forecasts,
        }
    }
}
