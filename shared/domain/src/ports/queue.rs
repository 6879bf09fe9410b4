//! The runs queue port: where runs are dispatched, and what a consumer of the queue does with
//! the messages it receives.

use crate::run_queue::Dispatch;
use async_trait::async_trait;

/// Why the runs queue did not do what was asked, and whether trying again can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// Throttled, timed out or unreachable: trying again may help.
    #[error("the runs queue is unavailable: {0}")]
    Unavailable(String),
    /// Refused for good (a message it cannot take, a receipt no longer valid, a queue that does
    /// not exist or may not be used): trying again will not help.
    #[error("the runs queue refused the request: {0}")]
    Refused(String),
}

impl QueueError {
    /// Whether trying again may help.
    pub fn is_retryable(&self) -> bool {
        matches!(self, QueueError::Unavailable(_))
    }
}

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
    /// Long-polls for up to `max` messages for up to `wait`, each held for [`crate::run_queue::HOLD_S`].
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
