//! The spans port: what a process did for a run, as spans of the run's trace, sent where traces
//! are collected. Off unless a collector is configured: the default records nothing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// One finished span of a run's trace ([`crate::trace`]: its ids derive from the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// 32 lowercase hex digits.
    pub trace_id: String,
    /// 16 lowercase hex digits.
    pub span_id: String,
    pub parent_span_id: Option<String>,
    /// `claim` or `attempt`.
    pub name: &'static str,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// `sundial.run_id`, `sundial.job_id`, `sundial.attempt`, …
    pub attributes: Vec<(&'static str, String)>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// Where spans go.
#[async_trait]
pub trait Spans: Send + Sync + std::fmt::Debug {
    /// Sends `spans`, best effort: spans that could not be sent are dropped (and logged).
    async fn record(&self, spans: Vec<Span>);
}

/// Spans sent nowhere: tracing off.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSpans;

#[async_trait]
impl Spans for NoSpans {
    async fn record(&self, _spans: Vec<Span>) {}
}
