//! Sundial's use cases, over the domain's ports only (no AWS type reaches them):
//!
//! - [`jobs`]: the job lifecycle (create, patch, pause, resume, trigger, backfill, delete);
//! - [`run_control`]: run history, cancel, re-run, and the target callbacks (heartbeat, complete);
//! - [`claim`]: claiming instants once and dispatching them, for the tick and the API;
//! - [`tick`]: the scheduler: which instants are due, claimed once, dispatched to the second;
//! - [`worker`]: one message in, at most one attempt out; [`worker::poll`] drives a queue;
//! - [`watchdog`]: leases, time-outs, re-dispatch, unsent events, SLA and late-start flags, stalls;
//! - [`record`]: a run's change written together with the events it causes;
//! - [`health`]: what a run's end says of its job: failing streaks, failure rates, recovery;
//! - [`announce`]: publishing a run's events once and marking them sent;
//! - [`workflow`]: jobs that run after other jobs: the graph kept sound, and each run's end
//!   handed over to the children ([`workflow::cascade`]);
//! - [`groups`]: concurrency groups: their limits, and the slots runs take ([`groups::slots`]);
//! - [`calendars`]: named calendars, and their edits copied into the jobs that name them;
//! - [`keys`]: API keys made, listed and revoked, and the check of a presented one;
//! - [`audit`]: for whom a use case acts, the records its changes carry, and the trail read back;
//! - [`ledger`]: a job's instants in a range and what became of each;
//! - [`skips`]: instants skipped on request, without pausing, and taken back before they are due;
//! - [`forecast`]: the load forecast of an owner's jobs, or of the whole stack;
//! - [`meter`]: the process's series, served as Prometheus text and written as [`emf`] lines;
//! - [`ports`]: the bundle of ports every use case is built from; [`use_cases`]: all of them,
//!   built from one bundle; [`timer`]: waiting, as a port.

pub mod announce;
pub mod audit;
pub mod calendars;
pub mod claim;
pub mod emf;
pub mod forecast;
pub mod groups;
pub mod health;
pub mod jobs;
pub mod keys;
pub mod ledger;
pub mod meter;
pub mod ports;
pub mod record;
pub mod run_control;
pub mod skips;
pub mod tick;
pub mod timer;
pub mod use_cases;
pub mod watchdog;
pub mod worker;
pub mod workflow;
