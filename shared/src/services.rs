//! Wiring: the adapters and use cases a process needs, built once from configuration. Every
//! function and the local runtime start here, so they are assembled the same way.

use crate::clock::Clock;
use crate::config::Config;
use crate::jobs::Jobs;
use crate::metrics::{Clients, Ledger};
use crate::queue::{RunQueue, SqsRunQueue};
use crate::store::{
    DynamoIdempotencyStore, DynamoJobStore, DynamoRunStore, DynamoTickStateStore, IdempotencyStore, JobStore,
    RunStore, TickStateStore,
};
use crate::tick::Tick;
use crate::tick::claim::Claimer;
use std::sync::Arc;

/// Everything built from one configuration.
#[derive(Debug, Clone)]
pub struct Services {
    pub config: Config,
    pub clock: Arc<dyn Clock>,
    pub ledger: Arc<Ledger>,
    pub job_store: Arc<dyn JobStore>,
    pub runs: Arc<dyn RunStore>,
    pub queue: Arc<dyn RunQueue>,
    pub tick_state: Arc<dyn TickStateStore>,
    pub idempotency: Arc<dyn IdempotencyStore>,
    pub claimer: Claimer,
    pub jobs: Jobs,
    pub tick: Tick,
}

impl Services {
    pub fn new(config: Config, clients: &Clients, clock: Arc<dyn Clock>) -> Self {
        let r = &config.resources;
        let ledger = clients.ledger.clone();
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
        let queue: Arc<dyn RunQueue> = Arc::new(SqsRunQueue::new(clients.sqs.clone(), &r.runs_queue_url));
        let tick_state: Arc<dyn TickStateStore> =
            Arc::new(DynamoTickStateStore::new(clients.dynamo.clone(), &r.jobs_table));
        let idempotency: Arc<dyn IdempotencyStore> =
            Arc::new(DynamoIdempotencyStore::new(clients.dynamo.clone(), &r.idempotency_table));
        let claimer =
            Claimer::new(job_store.clone(), runs.clone(), queue.clone(), clock.clone(), config.claim.clone());
        let jobs = Jobs::new(
            job_store.clone(),
            clock.clone(),
            config.limits.clone(),
            config.targets.clone(),
            claimer.clone(),
        );
        let tick = Tick::new(
            job_store.clone(),
            tick_state.clone(),
            claimer.clone(),
            clock.clone(),
            config.tick.clone(),
        );
        Services {
            config,
            clock,
            ledger,
            job_store,
            runs,
            queue,
            tick_state,
            idempotency,
            claimer,
            jobs,
            tick,
        }
    }
}
