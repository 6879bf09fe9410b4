//! The API as a Lambda function behind API Gateway (HTTP API, payload v2).

use std::sync::Arc;
use sundial_api::{AppState, router};
use sundial_shared::clock::SystemClock;
use sundial_shared::config::{Config, aws_sdk_config};
use sundial_shared::metrics::{Clients, Ledger};
use sundial_shared::services::Services;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    sundial_shared::telemetry::init();
    let config = Config::from_env()?;
    let clients = Clients::new(&aws_sdk_config().await, Ledger::new());
    let services = Services::new(config, &clients, Arc::new(SystemClock));
    lambda_http::run(router(AppState::new(&services))).await
}
