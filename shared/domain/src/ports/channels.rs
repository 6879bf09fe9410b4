//! The alert channels port: posting one JSON body to a channel's URL (a Slack webhook,
//! PagerDuty's Events API), through the egress guard.

use crate::delivery::DeliveryError;
use async_trait::async_trait;

/// Where Sundial posts the alerts it delivers itself.
#[async_trait]
pub trait AlertChannels: Send + Sync + std::fmt::Debug {
    /// Posts `body` to `url`; `Ok` when the service took it (a 2xx answer).
    async fn post(&self, url: &str, body: &serde_json::Value) -> Result<(), DeliveryError>;
}
