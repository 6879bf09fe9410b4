//! The targets port: one call of a job's target, and how it ended.

use crate::job::Job;
use crate::run::transition::Ending;
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
    /// The work started elsewhere (a Step Functions execution, an ECS task), named by `handle`
    /// (its ARN): the attempt stays open and is followed to the work's end ([`Caller::follow`]).
    Started {
        handle: String,
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

/// Where work a target started ([`Answer::Started`]) stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Still running.
    Running,
    /// Over: how the attempt ends (succeeded, failed, timed out), with the work's output or
    /// error.
    Ended(Ending),
    /// Could not be told this time (the describe call failed): look again later.
    Unknown(String),
    /// The service does not know the work: gone, or (just after its start) not yet readable.
    Missing(String),
}

/// Calls targets.
#[async_trait]
pub trait Caller: Send + Sync + std::fmt::Debug {
    async fn call(&self, invocation: &Invocation<'_>) -> Answer;

    /// Where the work `handle` (its ARN) names stands. A caller that never
    /// answers [`Answer::Started`] is never asked.
    async fn follow(&self, _handle: &str) -> Progress {
        Progress::Unknown("this caller starts no work to follow".into())
    }

    /// Stops the work `handle` names (an attempt past its timeout, or cancelled); `Err` says why
    /// it could not be stopped. Stopping work that has ended already is not an error.
    async fn stop(&self, _handle: &str, _reason: &str) -> Result<(), String> {
        Err("this caller starts no work to stop".into())
    }
}
