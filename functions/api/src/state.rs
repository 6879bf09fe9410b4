//! What every handler shares: the use cases, the stores and the configuration, built once.

use std::sync::Arc;
use sundial_shared::auth::ApiKeys;
use sundial_shared::clock::Clock;
use sundial_shared::config::Config;
use sundial_shared::jobs::Jobs;
use sundial_shared::store::{DynamoIdempotencyStore, DynamoJobStore, IdempotencyStore, JobStore};

/// Largest request body: the payload limit plus room for the rest of a job document.
pub const BODY_OVERHEAD: usize = 32 * 1024;

#[derive(Debug, Clone)]
pub struct AppState {
    pub jobs: Jobs,
    pub idempotency: Arc<dyn IdempotencyStore>,
    pub api_keys: Arc<ApiKeys>,
    pub clock: Arc<dyn Clock>,
    pub body_limit: usize,
}

impl AppState {
    /// Builds the state over DynamoDB from configuration and an SDK client.
    pub fn from_config(
        config: &Config,
        dynamo: aws_sdk_dynamodb::Client,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let store: Arc<dyn JobStore> = Arc::new(DynamoJobStore::new(
            dynamo.clone(),
            &config.resources.jobs_table,
            config.due_shards,
        ));
        let idempotency = Arc::new(DynamoIdempotencyStore::new(
            dynamo,
            &config.resources.idempotency_table,
        ));
        AppState {
            jobs: Jobs::new(
                store,
                clock.clone(),
                config.limits.clone(),
                config.targets.clone(),
            ),
            idempotency,
            api_keys: Arc::new(config.api_keys.clone()),
            clock,
            body_limit: config.limits.max_payload_bytes + BODY_OVERHEAD,
        }
    }
}
