//! What the simulation saw happen, for the invariant checker and for the trace of a failing
//! seed: every port call (who, what, on which run, with which fault), the job versions written,
//! the scheduler's progress marks, the target's calls and answers, the callbacks, the events
//! published and the crashes.

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use sundial_domain::job::{Job, JobId};
use sundial_domain::run::RunKey;

/// One line of the trace.
#[derive(Debug, Clone)]
pub struct Line {
    pub step: u64,
    pub at: DateTime<Utc>,
    pub actor: Arc<str>,
    pub what: String,
    /// The job and the run (job id, encoded key) the line is about, for filtering.
    pub job: Option<String>,
    pub run: Option<String>,
}

/// How the target answered a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    Ok,
    Failed(u16),
    Hung,
    Accepted,
    /// The call crashed its worker: no answer.
    Crashed,
    /// The call never left (connection refused): `Answer::NotSent`; the target was not reached.
    Refused,
    /// The call started work elsewhere (an execution), which the attempt follows to its end.
    Started,
}

/// Work a call started (a Step Functions execution, an ECS task), as its service sees it.
#[derive(Debug, Clone)]
pub struct Work {
    pub run_id: String,
    pub attempt: u32,
    pub started_at: DateTime<Utc>,
    /// When it ends by itself, and whether it succeeds then.
    pub ends_at: DateTime<Utc>,
    pub succeeds: bool,
    /// When it was stopped (`None`: never).
    pub stopped_at: Option<DateTime<Utc>>,
    /// How a look saw it end, if one did: succeeded or not.
    pub reported: Option<bool>,
}

/// One call a target received.
#[derive(Debug, Clone)]
pub struct Hit {
    pub run_id: String,
    pub job_id: String,
    pub attempt: u32,
    pub scheduled_at: DateTime<Utc>,
    pub idempotency_key: String,
    pub answered: Answered,
    pub at: DateTime<Utc>,
}

/// One event published to the shared topic. An event is told apart from another of the same
/// kind on the same run (a `retrying` per attempt) by the time it was recorded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Told {
    pub run_id: String,
    pub event: &'static str,
    pub at: DateTime<Utc>,
}

/// A job as written at a (global) time; `None`: deleted.
pub type Version = (DateTime<Utc>, Option<Job>);

/// Everything observed.
#[derive(Debug, Default)]
pub struct Observed {
    pub lines: Vec<Line>,
    /// Runs written since the checker last looked.
    pub touched: BTreeSet<(JobId, RunKey)>,
    /// Every job version written, in order: (global time, the job; `None`: deleted).
    pub versions: BTreeMap<JobId, Vec<Version>>,
    /// The tick's progress marks (reached, watermark) as written: (global time, minute).
    pub reached: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// The watermarks written: (global time, minute); every job due up to the minute was claimed.
    pub processed: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    pub hits: Vec<Hit>,
    /// Callbacks that completed an attempt: (run id, attempt, succeeded).
    pub completed: Vec<(String, u32, bool)>,
    /// Events published, per actor, not yet marked sent by that actor.
    pub unmarked: BTreeMap<Arc<str>, Vec<Told>>,
    /// Events published whose mark may not have followed (a crash, a failed or ambiguous mark or
    /// publish): the documented window in which an event is told twice.
    pub window: BTreeSet<Told>,
    /// Faults injected, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    pub crashes: u64,
    /// Violations found while the simulation ran (the store accepted a stale write).
    pub violations: Vec<String>,
    /// Trigger requests: (operation, job, acknowledged).
    pub triggers: Vec<(usize, JobId, bool)>,
    /// Callbacks targets asked for, not yet started.
    pub callbacks: Vec<CallbackPlan>,
    /// The dead letter the dead-letter handler is handling: (job id, run key, attempt).
    pub dead_letter: Option<(String, String, u32)>,
    /// Synchronous calls of each concurrency group's jobs at the target right now: (run id,
    /// attempt), one entry per call, from its arrival until its answer or its worker's crash (a
    /// 202 ends the call; the work behind it is not counted).
    pub group_calls: BTreeMap<String, Vec<(String, u32)>>,
    /// The most calls of each group seen at the target at once, when first reached, and which.
    pub group_peaks: BTreeMap<String, GroupPeak>,
    /// Every attempt start the run store accepted, in order.
    pub starts: Vec<Start>,
    /// Starts the store applied whose writer was told the write failed (its answer lost):
    /// (run id, attempt). Such an attempt is never called by that writer.
    pub unanswered_starts: BTreeSet<(String, u32)>,
    /// The actors (incarnations) that crashed.
    pub crashed: BTreeSet<Arc<str>>,
    /// Every advance of a job the store accepted, in order.
    pub advances: Vec<Advanced>,
    /// The actors (incarnations) that run a backfill request: their runs are not the schedule's
    /// claims (`max_runs` does not count them).
    pub backfillers: BTreeSet<Arc<str>>,
    /// The scheduled runs each actor's claim of a job wrote (created or found), not yet counted
    /// by an advance of that job by that actor: (actor, job) → run keys.
    pub claiming: BTreeMap<(Arc<str>, JobId), BTreeSet<RunKey>>,
    /// The scheduled runs backfills wrote (created or found).
    pub backfilled: BTreeSet<(JobId, RunKey)>,
    /// When (global time) each run was created.
    pub created_at: BTreeMap<(JobId, RunKey), DateTime<Utc>>,
    /// Work calls started, by handle.
    pub works: BTreeMap<String, Work>,
}

/// An advance of a job the store accepted: the job as its claimer read it, and what it wrote.
#[derive(Debug, Clone)]
pub struct Advanced {
    /// Global time.
    pub at: DateTime<Utc>,
    pub job_id: JobId,
    /// The version read (an advance keeps it).
    pub version: u64,
    /// The job's next instant as read: the claim started there.
    pub from: Option<DateTime<Utc>>,
    /// The limit of scheduled runs of the version read, and its count of them then.
    pub max_runs: Option<u64>,
    pub scheduled_runs: u64,
    /// The next instant written (`None`: the schedule ended).
    pub next: Option<DateTime<Utc>>,
    /// The count of scheduled runs written, when the pass claimed some.
    pub counted: Option<u64>,
    /// The scheduled runs the advancing actor's claim of the job wrote before it (what the count
    /// grew by).
    pub claimed: BTreeSet<RunKey>,
}

impl Advanced {
    /// The job's count of scheduled runs once written.
    pub fn count(&self) -> u64 {
        self.counted.unwrap_or(self.scheduled_runs)
    }

    /// Whether this advance ended the schedule at its limit of scheduled runs: no instant of the
    /// version it read from its `from` on is claimed after it.
    pub fn ended_by_limit(&self) -> bool {
        self.next.is_none() && self.max_runs.is_some_and(|max| self.count() >= max)
    }
}

/// The most calls of a group at the target at once.
#[derive(Debug, Clone)]
pub struct GroupPeak {
    pub count: usize,
    pub at: DateTime<Utc>,
    /// The calls in flight then: (run id, attempt).
    pub calls: Vec<(String, u32)>,
}

/// An attempt start the run store accepted.
#[derive(Debug, Clone)]
pub struct Start {
    pub job_id: JobId,
    pub run_id: String,
    pub attempt: u32,
    /// Who wrote it.
    pub actor: Arc<str>,
}

/// The shared ledger.
#[derive(Debug, Clone, Default)]
pub struct Ledger(Arc<Mutex<Observed>>);

impl Ledger {
    pub fn get(&self) -> MutexGuard<'_, Observed> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn fault(&self, kind: &'static str) {
        *self.get().faults.entry(kind).or_default() += 1;
    }
}

/// What a target that answered 202 does next: heartbeats, then (maybe) its completion.
#[derive(Debug, Clone)]
pub struct CallbackPlan {
    pub run_id: sundial_domain::run::RunId,
    pub token: String,
    pub attempt: u32,
    /// Seconds before each heartbeat and before the completion.
    pub every_s: i64,
    pub heartbeats: u32,
    /// How the work ended (`None`: the target never calls back; the watchdog times it out).
    pub then: Option<bool>,
}

/// Every step of the actors whose names start with `prefix`.
pub fn trace_of_actors(observed: &Observed, prefix: &str) -> Vec<String> {
    let with_job = |l: &Line| match &l.job {
        Some(job) => format!("{} job {job}", format_line(l)),
        None => format_line(l),
    };
    observed.lines.iter().filter(|l| l.actor.starts_with(prefix)).map(with_job).collect()
}

/// One step, as a trace shows it.
fn format_line(l: &Line) -> String {
    format!(
        "step {:>7} {} {:<16} {}{}",
        l.step,
        l.at.format("%H:%M:%S%.3f"),
        l.actor,
        l.what,
        l.run.as_deref().map(|r| format!(" [{r}]")).unwrap_or_default()
    )
}

/// The last `limit` lines about a job (and run), with the crashes among them: the steps that led
/// to a violation.
pub fn trace_of(observed: &Observed, job: Option<&str>, run: Option<&str>, limit: usize) -> Vec<String> {
    let about = |line: &Line| match (job, run) {
        (None, None) => true,
        (Some(job), None) => line.job.as_deref() == Some(job),
        (Some(job), Some(run)) => {
            line.job.as_deref() == Some(job)
                && line.run.as_deref().map_or(
                    !line.what.starts_with("jobs.get") && !line.what.starts_with("runs.active"),
                    |r| r == run,
                )
        }
        (None, Some(run)) => line.run.as_deref() == Some(run),
    };
    let actors: BTreeSet<&str> = observed.lines.iter().filter(|l| about(l)).map(|l| &*l.actor).collect();
    let lines: Vec<String> = observed
        .lines
        .iter()
        .filter(|l| {
            about(l)
                || (l.what.starts_with("CRASH of ") && actors.contains(&l.what["CRASH of ".len()..]))
                || (l.what.starts_with("groups.put") && job.is_some_and(|j| l.what.contains(j)))
        })
        .map(format_line)
        .collect();
    lines[lines.len().saturating_sub(limit)..].to_vec()
}
