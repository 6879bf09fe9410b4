//! Spans kept in memory: [`MemorySpans`] records every span sent, for tests of what a run's trace
//! holds.

use crate::guard::lock;
use async_trait::async_trait;
use std::sync::Mutex;
use sundial_domain::ports::spans::{Span, Spans};

/// Every span recorded, in order.
#[derive(Debug, Default)]
pub struct MemorySpans {
    spans: Mutex<Vec<Span>>,
}

impl MemorySpans {
    /// The spans recorded so far.
    pub fn all(&self) -> Vec<Span> {
        lock(&self.spans).clone()
    }
}

#[async_trait]
impl Spans for MemorySpans {
    async fn record(&self, spans: Vec<Span>) {
        lock(&self.spans).extend(spans);
    }
}
