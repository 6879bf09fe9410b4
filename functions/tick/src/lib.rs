//! The tick function's handler: an EventBridge scheduled event in, one tick, a summary out.

use aws_lambda_events::event::cloudwatch_events::CloudWatchEvent;
use lambda_runtime::{Error, LambdaEvent};
use serde::Serialize;
use sundial_app::tick::{Tick, TickReport};

/// The summary the function returns (and logs).
#[derive(Debug, Serialize)]
pub struct Summary {
    pub from: Option<String>,
    pub to: Option<String>,
    pub jobs: usize,
    pub claimed: usize,
    pub dispatched: usize,
    pub resent: usize,
    pub missed_dropped: usize,
    pub duplicates: usize,
    pub failed: usize,
    pub watermark: Option<String>,
    pub unfinished: bool,
}

impl From<&TickReport> for Summary {
    fn from(r: &TickReport) -> Self {
        Summary {
            from: r.from.map(|t| t.to_rfc3339()),
            to: r.to.map(|t| t.to_rfc3339()),
            jobs: r.jobs,
            claimed: r.claims.claimed,
            dispatched: r.claims.dispatched,
            resent: r.claims.resent,
            missed_dropped: r.claims.missed_dropped,
            duplicates: r.claims.duplicates,
            failed: r.claims.failed,
            watermark: r.watermark.map(|t| t.to_rfc3339()),
            unfinished: r.unfinished,
        }
    }
}

/// Runs one tick. The event's own time is not used: the tick reads its clock, so a delayed or
/// repeated invocation does the right thing.
pub async fn handle(tick: &Tick, event: LambdaEvent<CloudWatchEvent>) -> Result<Summary, Error> {
    tracing::debug!(event_id = ?event.payload.id, "tick");
    let report = tick.run().await?;
    let summary = Summary::from(&report);
    tracing::info!(summary = %serde_json::to_string(&summary).unwrap_or_default(), "tick done");
    Ok(summary)
}
