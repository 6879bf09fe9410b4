//! The runs queue: the port the tick and the API dispatch runs through, and its SQS adapter.
//!
//! A run becomes visible at its second: `DelaySeconds` is the time until the run is due, rounded
//! up, so a message is never visible before its instant (SQS caps the delay at 15 minutes; runs
//! are never claimed further ahead than that).

use crate::run::RunMessage;
use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::error::DisplayErrorContext;
use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use chrono::{DateTime, Utc};

/// SQS's longest message delay.
pub const MAX_DELAY_S: u32 = 900;
/// SQS's largest batch.
pub const BATCH: usize = 10;

/// A message to send and how long to keep it invisible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dispatch {
    pub message: RunMessage,
    pub delay_s: u32,
}

/// Seconds from `now` until `due`, rounded up, within SQS's bounds.
pub fn delay_until(due: DateTime<Utc>, now: DateTime<Utc>) -> u32 {
    let millis = (due - now).num_milliseconds();
    if millis <= 0 {
        return 0;
    }
    (((millis + 999) / 1000) as u64).min(u64::from(MAX_DELAY_S)) as u32
}

/// A send that did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not send to the runs queue: {0}")]
pub struct QueueError(pub String);

/// Where runs are dispatched.
#[async_trait]
pub trait RunQueue: Send + Sync + std::fmt::Debug {
    /// Sends every message; the result at index i is that of `batch[i]`.
    async fn send(&self, batch: &[Dispatch]) -> Vec<Result<(), QueueError>>;
}

/// The runs queue in SQS, sent to in batches of ten.
#[derive(Debug, Clone)]
pub struct SqsRunQueue {
    client: Client,
    url: String,
}

impl SqsRunQueue {
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        SqsRunQueue { client, url: url.into() }
    }

    async fn send_chunk(&self, chunk: &[Dispatch]) -> Vec<Result<(), QueueError>> {
        let mut entries = Vec::with_capacity(chunk.len());
        for (i, d) in chunk.iter().enumerate() {
            let body = match serde_json::to_string(&d.message) {
                Ok(body) => body,
                Err(e) => return chunk.iter().map(|_| Err(QueueError(e.to_string()))).collect(),
            };
            let entry = SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(body)
                .delay_seconds(d.delay_s.min(MAX_DELAY_S) as i32)
                .build();
            match entry {
                Ok(entry) => entries.push(entry),
                Err(e) => return chunk.iter().map(|_| Err(QueueError(e.to_string()))).collect(),
            }
        }
        match self.client.send_message_batch().queue_url(&self.url).set_entries(Some(entries)).send().await {
            Ok(out) => {
                let mut results: Vec<Result<(), QueueError>> = chunk.iter().map(|_| Ok(())).collect();
                for failed in out.failed() {
                    if let Some(slot) = failed.id().parse::<usize>().ok().and_then(|i| results.get_mut(i)) {
                        *slot = Err(QueueError(failed.message().unwrap_or(failed.code()).to_string()));
                    }
                }
                results
            }
            Err(e) => {
                let message = DisplayErrorContext(&e).to_string();
                chunk.iter().map(|_| Err(QueueError(message.clone()))).collect()
            }
        }
    }
}

#[async_trait]
impl RunQueue for SqsRunQueue {
    async fn send(&self, batch: &[Dispatch]) -> Vec<Result<(), QueueError>> {
        let chunks = batch.chunks(BATCH).map(|chunk| self.send_chunk(chunk));
        futures::future::join_all(chunks).await.into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    #[test]
    fn delays_round_up_and_stay_in_bounds() {
        let now: DateTime<Utc> = "2026-01-01T12:00:00.250Z".parse().unwrap();
        let due: DateTime<Utc> = "2026-01-01T12:00:37Z".parse().unwrap();
        assert_eq!(delay_until(due, now), 37, "36.75 s rounds up: never visible early");
        assert_eq!(delay_until(now, now), 0);
        assert_eq!(delay_until(now - Duration::seconds(5), now), 0);
        assert_eq!(delay_until(now + Duration::hours(1), now), MAX_DELAY_S);
        assert_eq!(delay_until(now + Duration::milliseconds(1), now), 1);
    }
}
