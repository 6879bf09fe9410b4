//! The worker as a Lambda function behind two SQS event source mappings (runs queue and DLQ).

use lambda_runtime::{Error, LambdaEvent, service_fn};
use std::sync::Arc;
use sundial_shared::clock::SystemClock;
use sundial_shared::config::{Config, aws_sdk_config};
use sundial_shared::metrics::{Clients, Ledger};
use sundial_shared::services::Services;

#[tokio::main]
async fn main() -> Result<(), Error> {
    sundial_shared::telemetry::init();
    let config = Config::from_env()?;
    let clients = Clients::new(&aws_sdk_config().await, Ledger::new());
    let services = Services::new(config, &clients, Arc::new(SystemClock));
    let (worker, inbox) = (&services.worker, services.inbox.as_ref());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| async move {
        sundial_worker::handle(worker, inbox, event).await
    }))
    .await
}
