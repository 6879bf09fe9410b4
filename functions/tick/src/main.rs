//! The tick as a Lambda function, invoked every minute by an EventBridge schedule.

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
    let tick = &services.tick;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| async move {
        sundial_tick::handle(tick, event).await
    }))
    .await
}
