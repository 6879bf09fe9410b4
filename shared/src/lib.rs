//! Sundial's library: everything the functions share.
//!
//! Domain (no AWS types):
//! - [`job`]: the job document users write and the stored job around it;
//! - [`schedule`]: cron, rate and one-off schedules, time zones and DST, `next_after`;
//! - [`validation`]: documents checked against [`limits`], errors naming the field;
//! - [`jobs`]: the job lifecycle (create, patch, pause, resume, delete, preview);
//! - [`events`]: what people are told about runs, recorded by the winner of a change, sent once;
//! - [`history`]: run history, cancel, re-run, and target callbacks;
//! - [`run`]: runs, their states (who moves a run in and out of each), keys and ids;
//! - [`retry`]: exponential backoff with full jitter;
//! - [`tick`]: the scheduler: which instants are due, claimed once, dispatched to the second;
//! - [`worker`]: one message in, at most one attempt out: targets, retries, leases;
//! - [`merge_patch`]: RFC 7386, how PATCH changes a document;
//! - [`due`]: due-index bucket and shard maths;
//! - [`egress`]: where HTTP calls made for jobs may connect (no loopback, private or metadata address);
//! - [`auth`]: API keys (stored hashed) and owners; [`page_token`]: pagination tokens (HMAC-sealed);
//! - [`clock`]: time as an input.
//!
//! Ports and adapters:
//! - [`store`]: the storage traits and their DynamoDB implementations;
//! - [`queue`]: the runs queue (SQS);
//! - [`metrics`]: counters of AWS requests and DynamoDB writes by kind;
//! - [`capacity`]: the capacity DynamoDB reports for each call, logged by table and index;
//! - [`provision`]: creating the tables, queues and topic declared in `infra/template.yaml`;
//! - [`config`]: configuration read once from the environment;
//! - [`services`]: the adapters and use cases of a process, wired once;
//! - [`telemetry`]: JSON logs through `tracing`.

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
