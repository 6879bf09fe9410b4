//! The API as a Lambda function behind API Gateway (HTTP API, payload v2).

use sundial_api::{AppState, router};
use sundial_wiring::services::Services;

// One thread: a function serves one event at a time on a fraction of a vCPU (0.15 at 256 MB), and
// the multi-thread scheduler's hand-offs cost a third of the CPU per run (measured:
// docs/decisions.md, "Performance (#18)").
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    sundial_wiring::telemetry::init();
    // Every instance must seal page tokens with the same key, or a page's token fails on the next
    // instance: the template sets it; without it the function refuses to start.
    if std::env::var(sundial_wiring::config::PAGE_TOKEN_KEY).is_err() {
        return Err(format!(
            "{} is required (template parameter PageTokenKey)",
            sundial_wiring::config::PAGE_TOKEN_KEY
        )
        .into());
    }
    let services = Services::from_env().await?;
    lambda_http::run(router(AppState::new(&services))).await
}
