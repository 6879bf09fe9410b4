//! The watchdog function's handler: an EventBridge scheduled event in, one pass, its report out.

use aws_lambda_events::event::cloudwatch_events::CloudWatchEvent;
use lambda_runtime::{Error, LambdaEvent};
use sundial_app::watchdog::{Watchdog, WatchdogReport};

/// Runs one pass. Like the tick, it reads its own clock rather than the event's time.
pub async fn handle(
    watchdog: &Watchdog,
    event: LambdaEvent<CloudWatchEvent>,
) -> Result<WatchdogReport, Error> {
    tracing::debug!(event_id = ?event.payload.id, "watchdog");
    let report = watchdog.run().await?;
    tracing::info!(report = %serde_json::to_string(&report).unwrap_or_default(), "watchdog done");
    Ok(report)
}
