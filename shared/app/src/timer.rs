//! Waiting as an input: a use case that pauses (a write retried after a storage brownout) asks a
//! [`Timer`], so that a simulation decides what a pause costs in its own time.

use async_trait::async_trait;

/// Something that waits.
#[async_trait]
pub trait Timer: Send + Sync + std::fmt::Debug {
    async fn sleep(&self, duration: std::time::Duration);
}

/// Tokio's timer: real time.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioTimer;

#[async_trait]
impl Timer for TokioTimer {
    async fn sleep(&self, duration: std::time::Duration) {
        tokio::time::sleep(duration).await;
    }
}
