//! Sundial's adapters: the domain's ports over AWS and HTTP.
//!
//! - [`dynamo`]: the storage ports in DynamoDB (jobs, runs, tick state, idempotency records);
//! - [`sqs`]: the runs queue and its dead-letter queue;
//! - [`sns`]: the event bus (the shared events topic) and the per-job notification topics;
//! - [`targets`]: the real targets, HTTP(S) behind the egress guard, Lambda, SQS and SNS;
//! - [`metrics`]: counters of AWS requests and DynamoDB writes, and the SDK clients that count;
//! - [`capacity`]: the capacity DynamoDB reports for each call, logged by table and index;
//! - [`errors`]: what a failed AWS call means (conflict, refused, throttled, unavailable), for
//!   every port's error;
//! - [`provision`]: creating the tables, queues and topic declared in `infra/template.yaml`.

pub mod capacity;
pub mod channels;
pub mod dynamo;
pub mod errors;
pub mod metrics;
pub mod provision;
pub mod sns;
pub mod sqs;
pub mod targets;
