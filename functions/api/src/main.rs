//! The API as a Lambda function behind API Gateway (HTTP API, payload v2).

use sundial_api::{AppState, router};
use sundial_shared::services::Services;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    sundial_shared::telemetry::init();
    let services = Services::from_env().await?;
    lambda_http::run(router(AppState::new(&services))).await
}
