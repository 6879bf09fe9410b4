//! The event bus port: where notifications and scheduler alerts are published.

use crate::events::{Notification, SchedulerAlert};
use async_trait::async_trait;

/// Why a message was not published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not publish: {0}")]
pub struct PublishError(pub String);

/// Where notifications go.
#[async_trait]
pub trait EventBus: Send + Sync + std::fmt::Debug {
    /// To the shared events topic (operators).
    async fn publish(&self, notification: &Notification) -> Result<(), PublishError>;
    /// To the topic of the job `notification` is about (the people its settings name).
    async fn publish_to_job(&self, notification: &Notification) -> Result<(), PublishError>;
    /// A scheduler alert, to the shared events topic.
    async fn alert(&self, alert: &SchedulerAlert) -> Result<(), PublishError>;
}
