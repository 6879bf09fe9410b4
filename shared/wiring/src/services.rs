//! Wiring: the adapters and use cases a process needs, built once from configuration. Every
//! function and the local runtime start here, so they are assembled the same way.

use crate::config::Config;
use std::sync::Arc;
use sundial_app::ports::Ports;
use sundial_app::use_cases::UseCases;
use sundial_aws::channels::HttpChannels;
use sundial_aws::dynamo::{
    DynamoCalendarStore, DynamoFenceStore, DynamoGroupStore, DynamoIdempotencyStore, DynamoJobStore,
    DynamoKeyStore, DynamoRunStore, DynamoTickStateStore,
};
use sundial_aws::metrics::{Clients, Ledger};
use sundial_aws::sns::bus::SnsEventBus;
use sundial_aws::sns::topics::{SnsJobTopics, TopicNames};
use sundial_aws::sqs::SqsRunQueue;
use sundial_aws::targets::Targets;
use sundial_aws::targets::outbound::{Outbound, SystemLookup};
use sundial_domain::clock::Clock;
use sundial_domain::ports::queue::RunInbox;
use sundial_domain::ports::store::IdempotencyStore;

/// Everything built from one configuration: the configuration, the ports, and the use cases
/// over them. Each part is held once; a caller names the bundle it reads from
/// (`services.ports.runs`, `services.use_cases.tick`).
#[derive(Debug, Clone)]
pub struct Services {
    pub config: Config,
    /// The ports the use cases run over.
    pub ports: Ports,
    /// The receiving side of the runs queue (the worker's poller and the dead-letter handler).
    pub inbox: Arc<dyn RunInbox>,
    /// The API's record of requests already answered (only the API reads it).
    pub idempotency: Arc<dyn IdempotencyStore>,
    /// What the DynamoDB requests of this process cost.
    pub ledger: Arc<Ledger>,
    pub use_cases: UseCases,
}

/// Where runs' spans go: the configured collector, or nowhere (also when its exporter could not
/// be built, which is logged).
fn spans(config: &Config) -> Arc<dyn sundial_domain::ports::spans::Spans> {
    let Some(endpoint) = config.otlp_endpoint.as_deref() else {
        return Arc::new(sundial_domain::ports::spans::NoSpans);
    };
    match crate::spans::OtlpSpans::new(endpoint, &config.stack) {
        Ok(spans) => Arc::new(spans),
        Err(e) => {
            tracing::error!(%endpoint, error = %e, "spans are not exported");
            Arc::new(sundial_domain::ports::spans::NoSpans)
        }
    }
}

impl Services {
    /// The services of a deployed function: configuration from the environment, the real clock.
    pub async fn from_env() -> Result<Self, crate::config::ConfigError> {
        let config = Config::from_env()?;
        let sdk = crate::config::aws_sdk_config().await;
        let clients =
            Clients::with_capacity_log(&sdk, sundial_aws::metrics::Ledger::new(), config.capacity_log);
        Ok(Services::new(config, &clients, Arc::new(sundial_domain::clock::SystemClock)))
    }

    pub fn new(config: Config, clients: &Clients, clock: Arc<dyn Clock>) -> Self {
        let r = &config.resources;
        let ledger = clients.ledger.clone();
        let dynamo = &clients.dynamo;
        let sqs_queue = Arc::new(SqsRunQueue::new(clients.sqs.clone(), &r.runs_queue_url, &r.dlq_url));
        let names = TopicNames::new(&config.stack, &r.events_topic_arn);
        let ports = Ports {
            jobs: Arc::new(DynamoJobStore::new(
                dynamo.clone(),
                &r.jobs_table,
                &r.runs_table,
                config.due_shards,
                ledger.clone(),
            )),
            runs: Arc::new(DynamoRunStore::new(
                dynamo.clone(),
                &r.runs_table,
                config.due_shards,
                ledger.clone(),
            )),
            groups: Arc::new(DynamoGroupStore::new(
                dynamo.clone(),
                &r.jobs_table,
                &r.runs_table,
                ledger.clone(),
            )),
            calendars: Arc::new(DynamoCalendarStore::new(
                dynamo.clone(),
                &r.jobs_table,
                &r.runs_table,
                ledger.clone(),
            )),
            keys: Arc::new(DynamoKeyStore::new(dynamo.clone(), &r.jobs_table, &r.runs_table, ledger.clone())),
            audit: Arc::new(sundial_aws::dynamo::DynamoAuditTrail::new(dynamo.clone(), &r.runs_table)),
            fences: Arc::new(DynamoFenceStore::new(dynamo.clone(), &r.jobs_table, ledger.clone())),
            tick_state: Arc::new(DynamoTickStateStore::new(dynamo.clone(), &r.jobs_table)),
            queue: sqs_queue.clone(),
            bus: Arc::new(SnsEventBus::new(clients.sns.clone(), &r.events_topic_arn, names.clone())),
            channels: Arc::new(HttpChannels::new(Outbound::new(
                config.targets.network.clone(),
                Arc::new(SystemLookup),
            ))),
            topics: Arc::new(SnsJobTopics::new(clients.sns.clone(), names)),
            caller: Arc::new(Targets::new(clients.targets.clone(), config.targets.clone())),
            spans: spans(&config),
            clock,
            timer: Arc::new(sundial_app::timer::TokioTimer),
            entropy: Arc::new(sundial_domain::entropy::OsEntropy),
            meter: sundial_app::meter::Meter::new(config.emf),
        };
        let idempotency = Arc::new(DynamoIdempotencyStore::new(dynamo.clone(), &r.idempotency_table));
        let use_cases = UseCases::new(&ports, config.use_case_settings());
        Services { config, ports, inbox: sqs_queue, idempotency, ledger, use_cases }
    }
}
