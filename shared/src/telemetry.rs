//! Logging: JSON lines through `tracing`, the level from the standard Lambda variable
//! (`AWS_LAMBDA_LOG_LEVEL`) or `RUST_LOG`, default `info`.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once; later calls do nothing.
pub fn init() {
    let filter = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .ok()
        .map(|level| EnvFilter::new(level.to_ascii_lowercase()))
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .without_time()
        .try_init();
}
