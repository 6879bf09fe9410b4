//! The watchdog as a Lambda function, invoked every minute by an EventBridge schedule.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use sundial_wiring::services::Services;

// One thread: a function serves one event at a time on a fraction of a vCPU (0.15 at 256 MB), and
// the multi-thread scheduler's hand-offs cost a third of the CPU per run (measured:
// docs/decisions.md, "Performance (#18)").
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    sundial_wiring::telemetry::init();
    let services = Services::from_env().await?;
    let watchdog = &services.use_cases.watchdog;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| async move {
        sundial_watchdog::handle(watchdog, event).await
    }))
    .await
}
