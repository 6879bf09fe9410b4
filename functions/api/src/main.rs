//! The API as a Lambda function behind API Gateway (HTTP API, payload v2).

use std::sync::Arc;
use sundial_api::{AppState, router};
use sundial_shared::clock::SystemClock;
use sundial_shared::config::{Config, aws_sdk_config};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    sundial_shared::telemetry::init();
    let config = Config::from_env()?;
    let sdk = aws_sdk_config().await;
    let state = AppState::from_config(
        &config,
        aws_sdk_dynamodb::Client::new(&sdk),
        Arc::new(SystemClock),
    );
    lambda_http::run(router(state)).await
}
