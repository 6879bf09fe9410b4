//! The real targets: HTTP(S) through reqwest, behind the egress guard; Lambda, SQS, SNS,
//! EventBridge, Step Functions and ECS through the SDK's [`TargetClients`] (the first four never
//! repeat a request; a Step Functions or ECS start is named, so a repeat starts nothing twice). What is sent and how
//! answers are classified is [`sundial_domain::target`]'s; an AWS error is `NotSent` only when
//! it proves the request was not processed (the service throttled it, or the connection was
//! refused), so an at-most-once attempt never reaches its target twice.
//!
//! [`Targets`] checks the allow-list and hands each kind of target to its own file (`http`,
//! `lambda`, `sqs`, `sns`, `eventbridge`, `stepfunctions`, `ecs`); what an SDK error means is
//! here, shared. A new kind is a file and an arm of [`Caller::call`]; a kind that starts work
//! (an execution, a task) also follows and stops it by its ARN ([`Caller::follow`],
//! [`Caller::stop`]).

mod ecs;
mod eventbridge;
mod http;
mod lambda;
pub mod outbound;
mod sns;
mod sqs;
pub mod stepfunctions;

use crate::errors::{AwsError, Fault};
use crate::metrics::TargetClients;
use async_trait::async_trait;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use outbound::{Lookup, Outbound, SystemLookup};
use std::sync::Arc;
use sundial_domain::arn::Arn;
use sundial_domain::job::TargetDocument;
use sundial_domain::limits::TargetAllowList;
use sundial_domain::ports::targets::{Answer, Caller, Invocation, Progress};
use sundial_domain::target::truncate;

/// The real targets: HTTP(S) through reqwest; Lambda, SQS and SNS through the SDK.
#[derive(Debug, Clone)]
pub struct Targets {
    /// HTTP targets: only destinations the deployment's egress policy allows.
    outbound: Outbound,
    sqs: aws_sdk_sqs::Client,
    sns: aws_sdk_sns::Client,
    lambda: aws_sdk_lambda::Client,
    sfn: aws_sdk_sfn::Client,
    ecs: aws_sdk_ecs::Client,
    events: aws_sdk_eventbridge::Client,
    allow: TargetAllowList,
}

impl Targets {
    pub fn new(clients: TargetClients, allow: TargetAllowList) -> Self {
        Targets::with_lookup(clients, allow, Arc::new(SystemLookup))
    }

    /// As [`Targets::new`], host names resolved by `lookup`.
    pub fn with_lookup(clients: TargetClients, allow: TargetAllowList, lookup: Arc<dyn Lookup>) -> Self {
        let outbound = Outbound::new(allow.network.clone(), lookup);
        let TargetClients { sqs, sns, lambda, sfn, ecs, events } = clients;
        Targets { outbound, sqs, sns, lambda, sfn, ecs, events, allow }
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
            TargetDocument::StepFunctions { state_machine_arn, input } => {
                if self.allow.check(&self.allow.state_machines, state_machine_arn).is_err() {
                    return refused(state_machine_arn);
                }
                self.stepfunctions(inv, state_machine_arn, *input).await
            }
            TargetDocument::Ecs { cluster, task_definition, launch_type, network, overrides } => {
                if self.allow.check(&self.allow.ecs_clusters, cluster).is_err() {
                    return refused(cluster);
                }
                if self.allow.check(&self.allow.ecs_task_definitions, task_definition).is_err() {
                    return refused(task_definition);
                }
                let task = ecs::EcsTask {
                    cluster,
                    task_definition,
                    launch_type: *launch_type,
                    network: network.as_ref(),
                    overrides: overrides.as_ref(),
                };
                self.ecs(inv, task).await
            }
            TargetDocument::EventBridge { event_bus_arn, detail_type, source } => {
                if self.allow.check(&self.allow.event_buses, event_bus_arn).is_err() {
                    return refused(event_bus_arn);
                }
                self.eventbridge(inv, event_bus_arn, detail_type, source).await
            }
        }
    }

    async fn follow(&self, handle: &str) -> Progress {
        match service_of(handle) {
            Some("states") => self.follow_execution(handle).await,
            Some("ecs") => self.follow_task(handle).await,
            _ => Progress::Unknown(format!("`{handle}` names no work Sundial follows")),
        }
    }

    async fn stop(&self, handle: &str, reason: &str) -> Result<(), String> {
        match service_of(handle) {
            Some("states") => self.stop_execution(handle, reason).await,
            Some("ecs") => self.stop_task(handle, reason).await,
            _ => Err(format!("`{handle}` names no work Sundial follows")),
        }
    }
}

/// The service of the ARN `handle`: `states` for an execution, `ecs` for a task.
fn service_of(handle: &str) -> Option<&'static str> {
    ["states", "ecs"].into_iter().find(|service| Arn::parse(handle, service).is_some())
}
