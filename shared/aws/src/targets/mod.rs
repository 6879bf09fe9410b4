//! The real targets: HTTP(S) through reqwest, behind the egress guard; Lambda, SQS and SNS
//! through the SDK's [`TargetClients`], which never repeat a request. What is sent and how
//! answers are classified is [`sundial_domain::target`]'s; an AWS error is `NotSent` only when
//! it proves the request was not processed (the service throttled it, or the connection was
//! refused), so an at-most-once attempt never reaches its target twice.
//!
//! [`Targets`] checks the allow-list and hands each kind of target to its own file (`http`,
//! `lambda`, `sqs`, `sns`); what an SDK error means is here, shared. A new kind is a file and an
//! arm of [`Caller::call`].

mod http;
mod lambda;
pub mod outbound;
mod sns;
mod sqs;

use crate::errors::{AwsError, Fault};
use crate::metrics::TargetClients;
use async_trait::async_trait;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use outbound::{Lookup, Outbound, SystemLookup};
use std::sync::Arc;
use sundial_domain::job::TargetDocument;
use sundial_domain::limits::TargetAllowList;
use sundial_domain::ports::targets::{Answer, Caller, Invocation};
use sundial_domain::target::truncate;

/// The real targets: HTTP(S) through reqwest; Lambda, SQS and SNS through the SDK.
#[derive(Debug, Clone)]
pub struct Targets {
    /// HTTP targets: only destinations the deployment's egress policy allows.
    outbound: Outbound,
    sqs: aws_sdk_sqs::Client,
    sns: aws_sdk_sns::Client,
    lambda: aws_sdk_lambda::Client,
    allow: TargetAllowList,
}

impl Targets {
    pub fn new(clients: TargetClients, allow: TargetAllowList) -> Self {
        Targets::with_lookup(clients, allow, Arc::new(SystemLookup))
    }

    /// As [`Targets::new`], host names resolved by `lookup`.
    pub fn with_lookup(clients: TargetClients, allow: TargetAllowList, lookup: Arc<dyn Lookup>) -> Self {
        let outbound = Outbound::new(allow.network.clone(), lookup);
        let TargetClients { sqs, sns, lambda } = clients;
        Targets { outbound, sqs, sns, lambda, allow }
    }
}

/// What a failed SDK call of a target tells: `NotSent` when the error proves the request was not
/// processed (a throttling error code, or a refused connection), else a retryable failure
/// (the target may have acted: a timeout, a reset connection, a 5xx).
fn aws_failure<E, R>(e: SdkError<E, R>) -> Answer
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    let classified = AwsError::of(&e);
    let error = truncate(&classified.context);
    if classified.fault == Fault::Throttled || refused_connection(&e) {
        return Answer::NotSent { error };
    }
    Answer::Failed { retryable: true, status: None, error }
}

/// Whether `error`'s causes include a refused connection: the request never left.
fn refused_connection(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = e.source();
    }
    false
}

#[async_trait]
impl Caller for Targets {
    async fn call(&self, inv: &Invocation<'_>) -> Answer {
        let refused = |what: &str| Answer::Failed {
            retryable: false,
            status: None,
            error: format!("{what} is not in the target allow-list"),
        };
        match &inv.job.document.target {
            TargetDocument::Http { url, method, headers } => self.http(inv, url, method, headers).await,
            TargetDocument::Lambda { function } => {
                if self.allow.check(&self.allow.lambda, function).is_err() {
                    return refused(function);
                }
                self.lambda(inv, function).await
            }
            TargetDocument::Sqs { queue_url } => {
                if self.allow.check(&self.allow.sqs, queue_url).is_err() {
                    return refused(queue_url);
                }
                self.sqs(inv, queue_url).await
            }
            TargetDocument::Sns { topic_arn } => {
                if self.allow.check(&self.allow.sns, topic_arn).is_err() {
                    return refused(topic_arn);
                }
                self.sns(inv, topic_arn).await
            }
        }
    }
}
