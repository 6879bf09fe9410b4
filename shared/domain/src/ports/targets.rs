//! The targets port: one call of a job's target, and how it ended.

use crate::job::Job;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// One call of a target.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    pub job: &'a Job,
    /// What the attempt delivers: the run's own payload or its job's, its placeholders filled
    /// when the job asks ([`crate::payload_template`]).
    pub payload: serde_json::Value,
    pub run_id: String,
    pub attempt: u32,
    pub scheduled_at: DateTime<Utc>,
    pub callback_token: String,
    /// The call is cut after this.
    pub timeout: Duration,
    /// When the call is made (signed into the request, so that a receiver can refuse old ones).
    pub sent_at: DateTime<Utc>,
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Succeeded {
        status: Option<u16>,
        output: Option<String>,
    },
    /// 202: the attempt stays open until the target calls back.
    Accepted {
        status: u16,
    },
    Failed {
        retryable: bool,
        status: Option<u16>,
        error: String,
    },
    TimedOut,
    /// The request certainly never left: the connection was refused, or the target's name did
    /// not resolve. Retried even for an at-most-once job.
    NotSent {
        error: String,
    },
}

/// Calls targets.
#[async_trait]
pub trait Caller: Send + Sync + std::fmt::Debug {
    async fn call(&self, invocation: &Invocation<'_>) -> Answer;
}
