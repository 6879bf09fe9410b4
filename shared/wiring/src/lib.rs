//! Sundial's wiring: what every function and the local runtime start from.
//!
//! The library is four crates, each a layer (see `docs/architecture.md`):
//! - `sundial-domain`: jobs, schedules, runs, events, policies and the ports, pure;
//! - `sundial-app`: the use cases over the ports (jobs, history, tick, worker, watchdog);
//! - `sundial-aws`: the ports in DynamoDB, SQS, SNS and the real targets;
//! - this crate: [`config`] (read once from the environment), [`variables`] (every variable it
//!   reads, declared once), [`services`] (the adapters and use cases of a process, built once),
//!   [`telemetry`] (JSON logs through `tracing`) and [`logs`] (where a run's logs are).

pub mod config;
pub mod logs;
pub mod services;
pub mod spans;
pub mod telemetry;
pub mod variables;
