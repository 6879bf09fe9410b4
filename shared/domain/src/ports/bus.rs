//! The event bus port: where notifications and scheduler alerts are published.

use crate::events::{JobNotice, Notification, SchedulerAlert};
use async_trait::async_trait;

/// Why a message was not published, and whether trying again can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublishError {
    /// Throttled, timed out or unreachable: trying again may help.
    #[error("could not publish, for now: {0}")]
    Unavailable(String),
    /// Refused for good (a topic that does not exist or may not be used, a message it cannot
    /// take): trying again will not help.
    #[error("publishing was refused: {0}")]
    Refused(String),
}

impl PublishError {
    /// Whether trying again may help.
    pub fn is_retryable(&self) -> bool {
        matches!(self, PublishError::Unavailable(_))
    }
}

/// Where notifications go.
#[async_trait]
pub trait EventBus: Send + Sync + std::fmt::Debug {
    /// To the shared events topic (operators).
    async fn publish(&self, notification: &Notification) -> Result<(), PublishError>;
    /// To the topic of the job `notification` is about (the people its settings name).
    async fn publish_to_job(&self, notification: &Notification) -> Result<(), PublishError>;
    /// A notice about a job as a whole: to the shared events topic, then, when `to_job`, to the
    /// job's own topic (an error: one of them was not reached; publishing again may repeat the
    /// other).
    async fn publish_notice(&self, notice: &JobNotice, to_job: bool) -> Result<(), PublishError>;
    /// A scheduler alert, to the shared events topic.
    async fn alert(&self, alert: &SchedulerAlert) -> Result<(), PublishError>;
}
