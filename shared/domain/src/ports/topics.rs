//! The per-job topics port: a job's notification endpoints, subscribed to a topic of its own.

use crate::job::{Job, JobId};
use async_trait::async_trait;
use serde::Serialize;

/// Whether a subscription is live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SubscriptionStatus {
    Confirmed,
    /// An email (or HTTPS) endpoint that has not confirmed yet: it receives nothing until then.
    PendingConfirmation,
}

/// One subscription of a job's topic, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Subscription {
    pub protocol: String,
    pub endpoint: String,
    pub status: SubscriptionStatus,
}

/// Why a topic could not be changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// SNS refused an endpoint: `field` names it in the job (`notify.sms[0]`).
    #[error("{field}: {reason}")]
    Rejected { field: String, reason: String },
    #[error("notification topic unavailable: {0}")]
    Unavailable(String),
}

/// The per-job topics.
#[async_trait]
pub trait JobTopics: Send + Sync + std::fmt::Debug {
    /// Makes the job's topic and subscriptions match its notification settings.
    async fn sync(&self, job: &Job) -> Result<(), TopicError>;
    /// Removes the job's topic and its subscriptions (nothing to do if there is none).
    async fn remove(&self, job_id: &JobId) -> Result<(), TopicError>;
    /// The subscriptions of the job's topic and their status.
    async fn subscriptions(&self, job_id: &JobId) -> Result<Vec<Subscription>, TopicError>;
}
