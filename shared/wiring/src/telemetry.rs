//! Logging: JSON lines through `tracing`, the level from the standard Lambda variable
//! (`AWS_LAMBDA_LOG_LEVEL`) or `RUST_LOG`, default `info`.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// Installs the global subscriber once, writing to stdout; later calls do nothing.
pub fn init() {
    init_with_writer(std::io::stdout);
}

/// Installs the global subscriber once, writing to `writer` (tests capture logs this way).
pub fn init_with_writer<W>(writer: W)
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .ok()
        .map(|level| EnvFilter::new(level.to_ascii_lowercase()))
        .or_else(|| EnvFilter::try_from_default_env().ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(writer)
        .try_init();
}
