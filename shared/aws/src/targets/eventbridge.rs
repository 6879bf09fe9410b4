//! An EventBridge target: the run's envelope put on a bus as one event's detail.

use super::{Targets, aws_failure};
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use sundial_domain::ports::targets::{Answer, Invocation};
use sundial_domain::target::{envelope, truncate};

/// EventBridge's largest PutEvents entry (detail, detail-type, source and the rest).
pub const MAX_ENTRY_BYTES: usize = 262_144;

impl Targets {
    /// Puts one event on `event_bus_arn`; the answer's output is the event id. An entry the bus
    /// refused was not put: `NotSent`.
    pub(super) async fn eventbridge(
        &self,
        inv: &Invocation<'_>,
        event_bus_arn: &str,
        detail_type: &str,
        source: &str,
    ) -> Answer {
        let detail = envelope(inv);
        let size = detail.len() + detail_type.len() + source.len();
        if size > MAX_ENTRY_BYTES {
            let error =
                format!("the event is {size} bytes; EventBridge takes at most {MAX_ENTRY_BYTES} per entry");
            return Answer::Failed { retryable: false, status: None, error };
        }
        let entry = PutEventsRequestEntry::builder()
            .event_bus_name(event_bus_arn)
            .detail_type(detail_type)
            .source(source)
            .detail(detail)
            .build();
        let put = self.events.put_events().entries(entry).send();
        let out = match tokio::time::timeout(inv.timeout, put).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return aws_failure(e),
            Err(_) => return Answer::TimedOut,
        };
        let Some(first) = out.entries().first() else {
            return Answer::Failed {
                retryable: true,
                status: None,
                error: "PutEvents answered no entry".into(),
            };
        };
        match (first.event_id(), first.error_code()) {
            (Some(id), None) if out.failed_entry_count() == 0 => {
                Answer::Succeeded { status: None, output: Some(id.to_string()) }
            }
            (_, code) => {
                let message = first.error_message().unwrap_or("");
                Answer::NotSent {
                    error: truncate(&format!(
                        "the bus refused the event: {}: {message}",
                        code.unwrap_or("?")
                    )),
                }
            }
        }
    }
}
