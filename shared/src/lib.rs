//! Sundial's library: everything the functions share. One crate today; which modules are pure
//! and which hold AWS or HTTP code is stated here as it is, not as it is meant to become.
//!
//! Domain, no AWS or HTTP types (some carry utoipa derives for the OpenAPI document):
//! - [`job`]: the job document users write and the stored job around it;
//! - [`schedule`]: cron, rate and one-off schedules, time zones and DST, `next_after`;
//! - [`validation`]: documents checked against [`limits`] (bounds and allow-lists), errors naming
//!   the field; [`egress`]: where HTTP calls made for jobs may connect;
//! - [`run`]: runs, their states (who moves a run in and out of each), keys and ids;
//! - [`retry`]: exponential backoff with full jitter; [`due`]: due-index bucket and shard maths;
//! - [`merge_patch`]: RFC 7386, how PATCH changes a document;
//! - [`auth`]: API keys (stored hashed) and owners; [`page_token`]: pagination tokens (HMAC-sealed);
//! - [`clock`]: time as an input; [`logs`]: where a run's logs are.
//!
//! Use cases over the ports (each also holds pure rules of its own):
//! - [`jobs`]: the job lifecycle (create, patch, pause, resume, trigger, backfill, delete);
//! - [`history`]: run history, cancel, re-run, and target callbacks;
//! - [`tick`]: the scheduler: which instants are due, claimed once, dispatched to the second;
//! - [`record`]: a run's change written together with the events it causes;
//! - [`watchdog`]: leases, time-outs, re-dispatch, unsent events, SLA and late-start flags, stalls.
//!
//! Mixed: domain rules, a port and its AWS or HTTP adapter in one module:
//! - [`events`]: what people are told about runs, and the SNS event bus;
//! - [`topics`]: per-job notification topics and their SNS subscriptions;
//! - [`queue`]: run messages and dispatch delays, and the SQS runs queue;
//! - [`worker`]: one message in, at most one attempt out; the targets (HTTP, Lambda, SQS, SNS).
//!
//! Ports and adapters:
//! - [`store`]: the storage traits and their DynamoDB implementations;
//! - [`metrics`]: counters of AWS requests and DynamoDB writes by kind; [`meter`]: the process's
//!   series, served as Prometheus text and written as [`emf`] lines in Lambda;
//! - [`capacity`]: the capacity DynamoDB reports for each call, logged by table and index;
//! - [`provision`]: creating the tables, queues and topic declared in `infra/template.yaml`.
//!
//! Wiring: [`config`] (read once from the environment), [`services`] (the adapters and use cases
//! of a process, built once), [`telemetry`] (JSON logs through `tracing`).

pub mod auth;
pub mod capacity;
pub mod clock;
pub mod config;
pub mod due;
pub mod egress;
pub mod emf;
pub mod events;
pub mod history;
pub mod job;
pub mod jobs;
pub mod limits;
pub mod logs;
pub mod merge_patch;
pub mod meter;
pub mod metrics;
pub mod page_token;
pub mod provision;
pub mod queue;
pub mod record;
pub mod retry;
pub mod run;
pub mod schedule;
pub mod services;
pub mod store;
pub mod telemetry;
pub mod tick;
pub mod topics;
pub mod validation;
pub mod watchdog;
pub mod worker;
