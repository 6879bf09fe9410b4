//! The watchdog as a Lambda function, invoked every minute by an EventBridge schedule.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use sundial_shared::services::Services;

#[tokio::main]
async fn main() -> Result<(), Error> {
    sundial_shared::telemetry::init();
    let services = Services::from_env().await?;
    let watchdog = &services.watchdog;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| async move {
        sundial_watchdog::handle(watchdog, event).await
    }))
    .await
}
