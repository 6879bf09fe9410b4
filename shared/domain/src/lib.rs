//! Sundial's domain: what a job is, when it is due, what a run goes through, and what the use
//! cases need from the world. Pure: no AWS SDK, HTTP client, async runtime or OpenAPI crate
//! (the `openapi` feature adds schema derives for the API edge only).
//!
//! - [`job`]: the job document users write and the stored job around it;
//! - [`schedule`]: cron, rate and one-off schedules and their unions, time zones and DST, `next_after`;
//!   [`dst`]: a schedule's DST policy; [`calendar`]: business days, holidays and where a
//!   holiday's instant moves; [`named_calendar`]: calendars kept under a name and shared by jobs;
//! - [`validation`]: documents checked against [`limits`] (bounds and allow-lists), errors
//!   naming the field; [`egress`]: where HTTP calls made for jobs may connect; [`arn`]: ARNs
//!   parsed strictly;
//! - [`run`]: runs, their states, keys and ids, and the events recorded on them;
//! - [`tick`]: what the tick decides: the minutes a pass walks, the instants it claims (with
//!   catch-up);
//! - [`catchup`]: how a job's catch-up policy decides a run that would start late;
//! - [`run_limit`]: what `schedule.max_runs` counts, and how a claim pass counts against it;
//! - [`run_queue`]: run messages and how long each stays invisible in the queue; [`follow`]:
//!   when work a target started is looked at again, to its end;
//! - [`target`]: what a target receives, how deliveries are signed, what an answer means;
//! - [`retry`]: exponential backoff with full jitter; [`due_index`]: due-index bucket and shard
//!   maths;
//! - [`events`]: what is told about runs, when, and to whom; [`trace`]: a run's W3C trace
//!   context, derived from its id;
//! - [`watchdog`]: what the watchdog decides (lost leases, unsent events, SLA, stalls);
//! - [`merge_patch`]: RFC 7386, how PATCH changes a document;
//! - [`auth`]: API keys (stored hashed) and owners; [`keys`]: keys kept as data, and their roles;
//!   [`page_token`]: pagination tokens; [`payload_template`]: placeholders filled per run;
//! - [`clock`]: time as an input; [`entropy`]: chance as an input;
//! - [`workflow`]: jobs that run after other jobs: the graph checks and when a child runs;
//! - [`waiting`]: why a waiting run has not started (its offset, a backoff, its group);
//! - [`fence`]: the per-job start fence that decides `forbid` and `replace` at the start;
//! - [`group`]: concurrency groups: one owner's limit on running attempts, across workers;
//! - [`offset`]: when a run may first start after its instant (jitter, flexible window);
//! - [`ledger`]: every instant of a job in a range and what became of it (ran, skipped, missed
//!   and why, pending);
//! - [`health`]: a job's normal duration learned from its runs, and the runs that depart from it;
//! - [`forecast`]: runs per minute over a window, from the schedules, with the peaks;
//! - [`stored`]: stored documents decoded leniently (a newer version's fields dropped);
//! - [`versions`]: a job's document versions kept, compared field by field, rolled back to;
//!   [`audit`]: the record of every change made through the API, and how the trail is read;
//! - [`ports`]: storage, queue, event bus, per-job topics and targets, as traits.

pub mod arn;
pub mod audit;
pub mod auth;
pub mod calendar;
pub mod catchup;
pub mod channels;
pub mod clock;
pub mod delivery;
pub mod dst;
pub mod due_index;
pub mod egress;
pub mod entropy;
pub mod events;
pub mod fence;
#[cfg(test)]
mod fixtures;
pub mod follow;
pub mod forecast;
pub mod group;
pub mod health;
pub mod job;
pub mod keys;
pub mod ledger;
pub mod limits;
pub mod merge_patch;
pub mod named_calendar;
pub mod offset;
pub mod page_token;
pub mod payload_template;
pub mod ports;
pub mod retry;
pub mod run;
pub mod run_limit;
pub mod run_queue;
pub mod schedule;
pub mod stored;
pub mod target;
pub mod tick;
pub mod trace;
pub mod validation;
pub mod versions;
pub mod waiting;
pub mod watchdog;
pub mod workflow;
