//! The runs queue: the port the tick and the API dispatch runs through, and its SQS adapter.
//!
//! A run becomes visible at its second: `DelaySeconds` is the time until the run is due, rounded
//! up, so a message is never visible before its instant (SQS caps the delay at 15 minutes; runs
//! are never claimed further ahead than that, and a longer wait is a chain of messages).
//!
//! Receives are spent only on failures: a consumer holds a message for [`HOLD_S`] and extends
//! the hold while it works, so a message of a crashed consumer comes back within a minute; a
//! wait (a backoff, an early arrival) replaces the message with a delayed one instead of hiding
//! it, so `maxReceiveCount` counts real failures only.

use crate::run::{Run, RunMessage};
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

impl Dispatch {
    /// The message for `run`'s next attempt, visible when that attempt may start.
    pub fn next_attempt(run: &Run, now: DateTime<Utc>) -> Dispatch {
        let at = run.waits_until().unwrap_or(now);
        Dispatch { message: run.next_message(), delay_s: delay_until(at, now) }
    }
}

/// How long a consumer holds a message it received; it extends the hold every
/// [`HOLD_RENEW_S`] while it works.
pub const HOLD_S: u32 = 60;
/// How often a held message's hold is renewed.
pub const HOLD_RENEW_S: u64 = 20;

/// How long a message that failed for a transient reason (storage unavailable, a send that did
/// not happen) stays hidden before its next receive: 10 s doubling with each receive, at most
/// 15 minutes, so `maxReceiveCount` (15) outlasts a brownout of hours, not seconds.
pub fn transient_backoff_s(receive_count: u32) -> u32 {
    let exponent = receive_count.saturating_sub(1).min(10);
    (10u32 << exponent).min(MAX_DELAY_S)
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

/// A message received from the runs queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub message_id: String,
    pub receipt: String,
    pub body: String,
    pub receive_count: u32,
}

/// What a consumer of the runs queue does with messages (the Lambda event source does the
/// receiving and deleting in AWS; the local worker loop does it through this).
#[async_trait]
pub trait RunInbox: Send + Sync + std::fmt::Debug {
    /// Long-polls for up to `max` messages for up to `wait`, each held for [`HOLD_S`].
    async fn receive(&self, max: i32, wait_s: i32) -> Result<Vec<Received>, QueueError>;
    async fn delete(&self, receipt: &str) -> Result<(), QueueError>;
    /// Hides the message for `seconds` from now (a hold renewed, or a transient failure's
    /// backoff).
    async fn set_visibility(&self, receipt: &str, seconds: u32) -> Result<(), QueueError>;
    /// Moves a message to the dead-letter queue with the reason, then deletes it.
    async fn dead_letter(&self, message: &Received, reason: &str) -> Result<(), QueueError>;
    /// Sends a copy of a message body to the dead-letter queue with the reason, and nothing
    /// else: a Lambda event source deletes the original itself once the batch reports success.
    async fn forward_to_dead_letter(&self, body: &str, reason: &str) -> Result<(), QueueError>;
    /// Moves every message of the dead-letter queue back to the runs queue; returns how many.
    async fn redrive(&self) -> Result<usize, QueueError>;
}

/// SQS's longest visibility timeout.
pub const MAX_VISIBILITY_S: u32 = 12 * 3600;

/// The runs queue in SQS, sent to in batches of ten, with its dead-letter queue.
#[derive(Debug, Clone)]
pub struct SqsRunQueue {
    client: Client,
    url: String,
    dlq_url: String,
}

fn queue_error<E: std::error::Error>(e: E) -> QueueError {
    QueueError(DisplayErrorContext(e).to_string())
}

impl SqsRunQueue {
    pub fn new(client: Client, url: impl Into<String>, dlq_url: impl Into<String>) -> Self {
        SqsRunQueue { client, url: url.into(), dlq_url: dlq_url.into() }
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

#[async_trait]
impl RunInbox for SqsRunQueue {
    async fn receive(&self, max: i32, wait_s: i32) -> Result<Vec<Received>, QueueError> {
        use aws_sdk_sqs::types::MessageSystemAttributeName;
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(max.clamp(1, 10))
            .wait_time_seconds(wait_s.clamp(0, 20))
            .visibility_timeout(HOLD_S as i32)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(queue_error)?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(|m| Received {
                receive_count: m
                    .attributes
                    .as_ref()
                    .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1),
                message_id: m.message_id.unwrap_or_default(),
                receipt: m.receipt_handle.unwrap_or_default(),
                body: m.body.unwrap_or_default(),
            })
            .collect())
    }

    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        self.client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(queue_error)?;
        Ok(())
    }

    async fn set_visibility(&self, receipt: &str, seconds: u32) -> Result<(), QueueError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(receipt)
            .visibility_timeout(seconds.min(MAX_VISIBILITY_S) as i32)
            .send()
            .await
            .map_err(queue_error)?;
        Ok(())
    }

    async fn dead_letter(&self, message: &Received, reason: &str) -> Result<(), QueueError> {
        self.forward_to_dead_letter(&message.body, reason).await?;
        self.delete(&message.receipt).await
    }

    async fn forward_to_dead_letter(&self, body: &str, reason: &str) -> Result<(), QueueError> {
        let attribute = aws_sdk_sqs::types::MessageAttributeValue::builder()
            .data_type("String")
            .string_value(reason)
            .build()
            .map_err(queue_error)?;
        self.client
            .send_message()
            .queue_url(&self.dlq_url)
            .message_body(body)
            .message_attributes("sundial_reason", attribute)
            .send()
            .await
            .map_err(queue_error)?;
        Ok(())
    }

    async fn redrive(&self) -> Result<usize, QueueError> {
        let mut moved = 0;
        loop {
            let out = self
                .client
                .receive_message()
                .queue_url(&self.dlq_url)
                .max_number_of_messages(10)
                .send()
                .await
                .map_err(queue_error)?;
            let messages = out.messages.unwrap_or_default();
            if messages.is_empty() {
                return Ok(moved);
            }
            for m in messages {
                self.client
                    .send_message()
                    .queue_url(&self.url)
                    .message_body(m.body.unwrap_or_default())
                    .send()
                    .await
                    .map_err(queue_error)?;
                self.client
                    .delete_message()
                    .queue_url(&self.dlq_url)
                    .receipt_handle(m.receipt_handle.unwrap_or_default())
                    .send()
                    .await
                    .map_err(queue_error)?;
                moved += 1;
            }
        }
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

    #[test]
    fn transient_failures_back_off_so_receives_last_hours() {
        assert_eq!(transient_backoff_s(1), 10);
        assert_eq!(transient_backoff_s(2), 20);
        assert_eq!(transient_backoff_s(7), 640);
        assert_eq!(transient_backoff_s(8), MAX_DELAY_S);
        assert_eq!(transient_backoff_s(u32::MAX), MAX_DELAY_S);
        // The 15 receives a message gets before the DLQ span over two hours of failures.
        let total: u32 = (1..=15).map(transient_backoff_s).sum();
        assert!(total > 2 * 3600, "{total}");
    }
}
