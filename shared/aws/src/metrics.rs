//! Counters of what Sundial asks of AWS: requests by service and operation (counted by an SDK
//! interceptor, so nothing is missed), and DynamoDB writes by kind (counted by the adapters,
//! which know which index entries a write adds or removes). Benchmarks read these, and the
//! capacity DynamoDB reports for each call ([`CapacityCount`]); in a deployment that capacity is
//! logged by [`crate::capacity`] when configured.

use crate::capacity::{AskCapacity, Kind, Log, Part};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeSerializationInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Kinds of DynamoDB writes, as counted per run.
pub mod writes {
    /// A table item put, updated or deleted.
    pub const ITEM: &str = "dynamodb.write.item";
    /// A global secondary index entry written.
    pub const INDEX_PUT: &str = "dynamodb.write.index_entry_put";
    /// A global secondary index entry removed.
    pub const INDEX_REMOVE: &str = "dynamodb.write.index_entry_removed";
}

/// Named counters, shared by every adapter of a process.
#[derive(Debug, Default)]
pub struct Ledger {
    counts: Mutex<BTreeMap<String, u64>>,
}

impl Ledger {
    pub fn new() -> Arc<Self> {
        Arc::new(Ledger::default())
    }

    pub fn add(&self, name: &str, n: u64) {
        // A poisoned lock only means a panic elsewhere; the counts are still usable.
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry(name.to_string()).or_default() += n;
    }

    pub fn get(&self, name: &str) -> u64 {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).get(name).copied().unwrap_or(0)
    }

    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn reset(&self) {
        self.counts.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// An SDK interceptor counting each operation once (its retries not counted again) as
/// `aws.<service>.<Operation>`.
#[derive(Debug, Clone)]
pub struct RequestCounter(pub Arc<Ledger>);

impl Intercept for RequestCounter {
    fn name(&self) -> &'static str {
        "SundialRequestCounter"
    }

    // Not `read_before_execution`: client interceptors see that hook before the operation's
    // metadata is in the config bag. This one runs once per operation, retries excluded.
    fn read_before_serialization(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(metadata) = cfg.load::<Metadata>() {
            self.0.add(&format!("aws.{}.{}", metadata.service(), metadata.name()), 1);
        }
        Ok(())
    }
}

/// The ledger counter under which [`CapacityCount`] adds a part's units, in thousandths:
/// `dynamodb.capacity_milli.<read|write>.<table>` for the table's own share, with `/<index>`
/// appended for an index's.
pub fn ledger_key(kind: Kind, part: &Part) -> String {
    match &part.index {
        Some(index) => format!("{COUNTED}.{}.{}/{index}", kind.as_str(), part.table),
        None => format!("{COUNTED}.{}.{}", kind.as_str(), part.table),
    }
}

/// The prefix of [`ledger_key`]'s counters.
pub const COUNTED: &str = "dynamodb.capacity_milli";

/// A capacity [`Sink`](crate::capacity::Sink) that adds the units to a ledger ([`ledger_key`]);
/// a call the emulator reported nothing for is counted under
/// `dynamodb.capacity_unreported.<operation>`.
#[derive(Debug, Clone)]
pub struct CapacityCount(pub Arc<Ledger>);

impl crate::capacity::Sink for CapacityCount {
    fn consumed(&self, operation: &str, kind: Kind, parts: &[Part]) {
        if parts.is_empty() {
            self.0.add(&format!("dynamodb.capacity_unreported.{operation}"), 1);
        }
        for part in parts {
            self.0.add(&ledger_key(kind, part), (part.units * 1000.0).round() as u64);
        }
    }
}

/// What the DynamoDB client does about the capacity each call consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// Nothing: calls do not ask for it.
    NotAsked,
    /// Logged per call ([`crate::capacity::Log`]).
    Logged,
    /// Added to the ledger ([`crate::capacity::CapacityCount`]), for benchmarks.
    Counted,
}

/// The SDK clients of a process, each counting its requests into one ledger.
#[derive(Debug, Clone)]
pub struct Clients {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub sns: aws_sdk_sns::Client,
    /// The clients targets are called through.
    pub targets: TargetClients,
    pub ledger: Arc<Ledger>,
}

/// The SDK clients targets are called through. Lambda, SQS, SNS and EventBridge requests are
/// sent once, never repeated by the SDK's retry (an at-most-once attempt sends exactly one; a
/// failed call is the run's retry policy's to repeat). Step Functions and ECS keep the SDK's
/// standard retry: a start is named after its run and attempt (the execution's name, the task's
/// client token), so a repeated start starts nothing twice, and looks and stops repeat
/// harmlessly. Sundial's own tables, queues and topics keep the SDK's standard retry.
#[derive(Debug, Clone)]
pub struct TargetClients {
    pub sqs: aws_sdk_sqs::Client,
    pub sns: aws_sdk_sns::Client,
    /// Lambda targets; `AWS_ENDPOINT_URL_LAMBDA` points it elsewhere (`cargo lambda watch`).
    pub lambda: aws_sdk_lambda::Client,
    pub sfn: aws_sdk_sfn::Client,
    pub ecs: aws_sdk_ecs::Client,
    pub events: aws_sdk_eventbridge::Client,
}

impl TargetClients {
    /// The target clients of `sdk`'s configuration, counting their requests into `ledger`.
    pub fn new(sdk: &aws_config::SdkConfig, ledger: Arc<Ledger>) -> Self {
        TargetClients::build(sdk, ledger, None)
    }

    /// As [`TargetClients::new`], every service at `endpoint` (a loopback stand-in).
    pub fn at(sdk: &aws_config::SdkConfig, ledger: Arc<Ledger>, endpoint: &str) -> Self {
        TargetClients::build(sdk, ledger, Some(endpoint))
    }

    fn build(sdk: &aws_config::SdkConfig, ledger: Arc<Ledger>, endpoint: Option<&str>) -> Self {
        let counter = RequestCounter(ledger);
        let once = aws_config::retry::RetryConfig::disabled();
        let mut sqs =
            aws_sdk_sqs::config::Builder::from(sdk).retry_config(once.clone()).interceptor(counter.clone());
        let mut sns =
            aws_sdk_sns::config::Builder::from(sdk).retry_config(once.clone()).interceptor(counter.clone());
        let mut lambda = aws_sdk_lambda::config::Builder::from(sdk)
            .retry_config(once.clone())
            .interceptor(counter.clone());
        let mut events =
            aws_sdk_eventbridge::config::Builder::from(sdk).retry_config(once).interceptor(counter.clone());
        let mut sfn = aws_sdk_sfn::config::Builder::from(sdk).interceptor(counter.clone());
        let mut ecs = aws_sdk_ecs::config::Builder::from(sdk).interceptor(counter);
        // Only an endpoint given here replaces the configuration's own (the emulator's, locally).
        if let Some(endpoint) = endpoint {
            let endpoint = Some(endpoint.to_string());
            sqs.set_endpoint_url(endpoint.clone());
            sns.set_endpoint_url(endpoint.clone());
            lambda.set_endpoint_url(endpoint.clone());
            events.set_endpoint_url(endpoint.clone());
            sfn.set_endpoint_url(endpoint.clone());
            ecs.set_endpoint_url(endpoint);
        }
        TargetClients {
            sqs: aws_sdk_sqs::Client::from_conf(sqs.build()),
            sns: aws_sdk_sns::Client::from_conf(sns.build()),
            lambda: aws_sdk_lambda::Client::from_conf(lambda.build()),
            sfn: aws_sdk_sfn::Client::from_conf(sfn.build()),
            ecs: aws_sdk_ecs::Client::from_conf(ecs.build()),
            events: aws_sdk_eventbridge::Client::from_conf(events.build()),
        }
    }
}

impl Clients {
    pub fn new(sdk: &aws_config::SdkConfig, ledger: Arc<Ledger>) -> Self {
        Clients::with_capacity_log(sdk, ledger, false)
    }

    /// As [`Clients::new`]; with `capacity_log`, the DynamoDB client also logs the capacity of
    /// every call ([`crate::capacity`]).
    pub fn with_capacity_log(sdk: &aws_config::SdkConfig, ledger: Arc<Ledger>, capacity_log: bool) -> Self {
        let capacity = if capacity_log { Capacity::Logged } else { Capacity::NotAsked };
        Clients::with_capacity(sdk, ledger, capacity)
    }

    /// As [`Clients::new`], with the DynamoDB client asking for the capacity of every call and
    /// doing with it what `capacity` says.
    pub fn with_capacity(sdk: &aws_config::SdkConfig, ledger: Arc<Ledger>, capacity: Capacity) -> Self {
        let counter = RequestCounter(ledger.clone());
        let mut dynamo = aws_sdk_dynamodb::config::Builder::from(sdk).interceptor(counter.clone());
        match capacity {
            Capacity::NotAsked => {}
            Capacity::Logged => dynamo = dynamo.interceptor(AskCapacity(Log)),
            Capacity::Counted => dynamo = dynamo.interceptor(AskCapacity(CapacityCount(ledger.clone()))),
        }
        let dynamo = dynamo.build();
        let sqs = aws_sdk_sqs::config::Builder::from(sdk).interceptor(counter.clone()).build();
        let sns = aws_sdk_sns::config::Builder::from(sdk).interceptor(counter).build();
        let targets = TargetClients::new(sdk, ledger.clone());
        Clients {
            dynamo: aws_sdk_dynamodb::Client::from_conf(dynamo),
            sqs: aws_sdk_sqs::Client::from_conf(sqs),
            sns: aws_sdk_sns::Client::from_conf(sns),
            targets,
            ledger,
        }
    }
}
