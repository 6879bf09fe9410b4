//! Sundial's library: everything the functions share.
//!
//! Domain (no AWS types):
//! - [`job`]: the job document users write and the stored job around it;
//! - [`schedule`]: cron, rate and one-off schedules, time zones and DST, `next_after`;
//! - [`validation`]: documents checked against [`limits`], errors naming the field;
//! - [`jobs`]: the job lifecycle (create, patch, pause, resume, delete, preview);
//! - [`merge_patch`]: RFC 7386, how PATCH changes a document;
//! - [`due`]: due-index bucket and shard maths;
//! - [`auth`]: API keys (stored hashed) and owners;
//! - [`clock`]: time as an input.
//!
//! Ports and adapters:
//! - [`store`]: the storage traits and their DynamoDB implementations;
//! - [`provision`]: creating the tables, queues and topic declared in `infra/template.yaml`;
//! - [`config`]: configuration read once from the environment;
//! - [`telemetry`]: JSON logs through `tracing`.

pub mod auth;
pub mod clock;
pub mod config;
pub mod due;
pub mod job;
pub mod jobs;
pub mod limits;
pub mod merge_patch;
pub mod provision;
pub mod schedule;
pub mod store;
pub mod telemetry;
pub mod validation;
