//! Runs: one execution of a job for one instant, its states and its attempts.
//!
//! A scheduled run's key is derived from (job, instant) — `<instant>#s` — so two claimers of
//! the same instant collide on the same item and only one wins. A manual run (trigger, re-run)
//! has `<instant>#m#<ulid>` and never collides with the schedule. A job's runs sort newest first
//! by key, so its history is one query.

use crate::due_index::{format_instant, parse_instant};
use crate::job::JobId;

pub mod event;
pub mod transition;
pub use event::{Published, RunEvent, RunEventKind};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where a run is in its life. Each state says who moves a run into it and out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RunState {
    /// Claimed; its message is sent or about to be. Entered by the tick, the API (trigger, due
    /// soon, backfill). Left by the worker (start); the watchdog re-sends one never sent.
    Queued,
    /// An attempt holds the lease (`lease_until`). Entered by the worker. Left by the worker
    /// (end), the API (`/complete`, cancel), the watchdog (lease expired, timeout).
    Running,
    /// An attempt failed, timed out or was lost; the next waits out its backoff. Entered by the
    /// worker and the watchdog. Left by the worker (next attempt).
    Retrying,
    /// Terminal: the last attempt succeeded.
    Succeeded,
    /// Terminal: the last attempt failed (or the DLQ handler gave up on the message).
    Failed,
    /// Terminal: the last attempt timed out.
    TimedOut,
    /// Terminal: cancelled by the API, replaced by a newer run (`replace`), or its job deleted.
    Cancelled,
    /// Terminal, with a reason: `forbid` while another run was active, or the job was paused.
    Skipped,
}

impl RunState {
    pub const ALL: [RunState; 8] = [
        RunState::Queued,
        RunState::Running,
        RunState::Retrying,
        RunState::Succeeded,
        RunState::Failed,
        RunState::TimedOut,
        RunState::Cancelled,
        RunState::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "QUEUED",
            RunState::Running => "RUNNING",
            RunState::Retrying => "RETRYING",
            RunState::Succeeded => "SUCCEEDED",
            RunState::Failed => "FAILED",
            RunState::TimedOut => "TIMED_OUT",
            RunState::Cancelled => "CANCELLED",
            RunState::Skipped => "SKIPPED",
        }
    }

    pub fn is_terminal(self) -> bool {
        !self.is_in_flight()
    }

    /// QUEUED, RUNNING or RETRYING: the watchdog watches these.
    pub fn is_in_flight(self) -> bool {
        matches!(self, RunState::Queued | RunState::Running | RunState::Retrying)
    }

    /// RUNNING or RETRYING: what the concurrency policy counts as active.
    pub fn is_active(self) -> bool {
        matches!(self, RunState::Running | RunState::Retrying)
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunState::ALL
            .into_iter()
            .find(|state| state.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("`{s}` is not a run state"))
    }
}

/// How a run came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum RunKind {
    /// Claimed for a scheduled (or backfilled) instant.
    Scheduled,
    /// Triggered or re-run by hand.
    Manual,
}

/// A run's key within its job: the instant, and for manual runs a ULID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    pub instant: DateTime<Utc>,
    /// `None` for a scheduled run, the ULID of a manual one.
    pub manual: Option<String>,
}

impl RunKey {
    pub fn scheduled(instant: DateTime<Utc>) -> Self {
        RunKey { instant, manual: None }
    }

    pub fn manual(instant: DateTime<Utc>) -> Self {
        RunKey { instant, manual: Some(ulid::Ulid::generate().to_string().to_ascii_lowercase()) }
    }

    /// A new manual run's key at `instant`, its unique part drawn from `entropy`.
    pub fn manual_drawn(instant: DateTime<Utc>, entropy: &dyn crate::entropy::Entropy) -> Self {
        let ulid = ulid::Ulid::from_parts(instant.timestamp_millis().max(0) as u64, entropy.bits());
        RunKey { instant, manual: Some(ulid.to_string().to_ascii_lowercase()) }
    }

    /// The manual run a request names: the same `instant` and `seed` always give the same key,
    /// so a retried request lands on the run its first try created.
    pub fn manual_for(instant: DateTime<Utc>, seed: &[u8]) -> Self {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(seed);
        let mut random = [0u8; 16];
        random[6..].copy_from_slice(&digest[..10]);
        let ulid =
            ulid::Ulid::from_parts(instant.timestamp_millis().max(0) as u64, u128::from_be_bytes(random));
        RunKey { instant, manual: Some(ulid.to_string().to_ascii_lowercase()) }
    }

    pub fn kind(&self) -> RunKind {
        if self.manual.is_some() { RunKind::Manual } else { RunKind::Scheduled }
    }

    /// The stored form: `<instant>#s` or `<instant>#m#<ulid>`.
    pub fn encode(&self) -> String {
        match &self.manual {
            None => format!("{}#s", format_instant(self.instant)),
            Some(id) => format!("{}#m#{id}", format_instant(self.instant)),
        }
    }

    pub fn decode(text: &str) -> Option<Self> {
        let mut parts = text.split('#');
        let instant = parse_instant(parts.next()?)?;
        match (parts.next()?, parts.next(), parts.next()) {
            ("s", None, None) => Some(RunKey::scheduled(instant)),
            ("m", Some(id), None) if ulid::Ulid::from_string(id).is_ok() => {
                Some(RunKey { instant, manual: Some(id.to_ascii_lowercase()) })
            }
            _ => None,
        }
    }
}

/// A run's public id: URL-safe, the idempotency key targets receive, and enough to find the
/// item: `<job_id>.<yyyymmddThhmmssZ>.s` or `<job_id>.<yyyymmddThhmmssZ>.m.<ulid>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunId {
    pub job_id: JobId,
    pub key: RunKey,
}

impl RunId {
    pub fn new(job_id: JobId, key: RunKey) -> Self {
        RunId { job_id, key }
    }

    /// What runs sort by in time: the instant, then the job, then the key.
    pub fn chronological(&self) -> (DateTime<Utc>, &JobId, &RunKey) {
        (self.key.instant, &self.job_id, &self.key)
    }

    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.');
        let job_id = JobId::parse(parts.next()?)?;
        let stamp = parts.next()?;
        let instant = chrono::NaiveDateTime::parse_from_str(stamp, "%Y%m%dT%H%M%SZ").ok()?.and_utc();
        let key = match (parts.next()?, parts.next(), parts.next()) {
            ("s", None, None) => RunKey::scheduled(instant),
            ("m", Some(id), None) if ulid::Ulid::from_string(id).is_ok() => {
                RunKey { instant, manual: Some(id.to_ascii_lowercase()) }
            }
            _ => return None,
        };
        Some(RunId { job_id, key })
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let stamp = self.key.instant.format("%Y%m%dT%H%M%SZ");
        match &self.key.manual {
            None => write!(f, "{}.{stamp}.s", self.job_id),
            Some(id) => write!(f, "{}.{stamp}.m.{id}", self.job_id),
        }
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
    TimedOut,
    /// The worker vanished (its lease expired) before recording an end.
    Lost,
    /// The run was cancelled while the attempt was open; its result, if any comes, is ignored.
    Cancelled,
}

impl Outcome {
    /// The outcome as the API and the logs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed_out",
            Outcome::Lost => "lost",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// One attempt of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Attempt {
    /// 1 for the first attempt.
    pub n: u32,
    pub started_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Who ran it: the Lambda request id and log stream, or the local worker's id.
    pub worker: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The digest of the callback token the attempt's target was given (a late callback is
    /// told the attempt closed). Kept in storage only; the API never shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub callback: Option<String>,
    /// By when its worker has certainly cut the attempt's call (the lease its start gave): the
    /// run after it in its job's start fence waits no longer than this, with the clocks' skew.
    /// Kept in storage only; the API never shows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub call_until: Option<DateTime<Utc>>,
    /// The work the attempt started and follows to its end: a Step Functions execution's or an
    /// ECS task's ARN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle: Option<String>,
    /// When the started work was last looked at (each look renews the attempt's lease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub followed_at: Option<DateTime<Utc>>,
    /// How many looks at the started work were recorded: a look message asks for the next one,
    /// so a duplicate chain of looks ends at its first stale message. Kept in storage only.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub looks: u32,
    /// Where the work the attempt started kept its logs: an ECS task's log stream, in the console.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs_url: Option<String>,
    /// The tag of the look recorded last. Kept in storage only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub look_tag: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Run {
    /// Whether an event of trouble with this run's timing was recorded on it
    /// ([`EventKind::is_run_trouble`](crate::job::EventKind::is_run_trouble)).
    pub fn told_run_trouble(&self) -> bool {
        self.events.iter().any(|e| e.kind.told().is_some_and(crate::job::EventKind::is_run_trouble))
    }
}

impl Attempt {
    /// Whether the attempt is still open (not finished).
    pub fn is_open(&self) -> bool {
        self.finished_at.is_none()
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub job_id: JobId,
    /// The job's owner when the run was claimed: a run's history stays visible to its owner
    /// after the job is deleted.
    pub owner: String,
    pub key: RunKey,
    pub state: RunState,
    /// When the message becomes visible: the instant plus the job's jitter.
    pub due_at: DateTime<Utc>,
    /// The attempt number of the latest attempt (0 before the first starts): the fencing token.
    pub attempt: u32,
    pub attempts: Vec<Attempt>,
    /// The job's version when the run was claimed.
    pub job_version: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Why a run was skipped or cancelled.
    pub reason: Option<String>,
    /// While RUNNING: the attempt's lease; past it, the attempt is lost.
    pub lease_until: Option<DateTime<Utc>>,
    /// While RETRYING: the next attempt may not start before this.
    pub retry_at: Option<DateTime<Utc>>,
    /// When the watchdog last sent this run's message again because its attempt had not
    /// started in time. Re-sends are safe (an attempt starts only under its fence), so no
    /// claimer marks its own send; this mark only spaces the watchdog's re-sends.
    pub resent_at: Option<DateTime<Utc>>,
    /// The attempt whose call its worker saw end after the attempt was closed under it (a
    /// cancel does not stop a call by itself): the run that passes the job's start fence next
    /// waits for this ([`crate::fence::call_over`]).
    pub call_ended: Option<u32>,
    /// The job whose manual trigger started the workflow run this run belongs to (`None`: a
    /// scheduled instant, or a trigger of a job without children). Its descendants follow it
    /// under the same key; a child waits only for the parents that descend from it.
    pub workflow: Option<JobId>,
    /// Written by a backfill rather than by a claim of the schedule: not counted by
    /// `schedule.max_runs`.
    pub backfill: bool,
    /// The payload this run delivers instead of its job's (a trigger's, re-run's or backfill's
    /// `payload`); `None`: the job's.
    pub input: Option<serde_json::Value>,
    /// When the row expires (DynamoDB TTL).
    pub expires_at: DateTime<Utc>,
    /// Events recorded on the run, each marked once published.
    pub events: Vec<RunEvent>,
}

impl Run {
    pub fn id(&self) -> RunId {
        RunId::new(self.job_id.clone(), self.key.clone())
    }

    pub fn scheduled_at(&self) -> DateTime<Utc> {
        self.key.instant
    }

    /// The message that asks for this run's next attempt.
    pub fn next_message(&self) -> RunMessage {
        RunMessage {
            job_id: self.job_id.to_string(),
            run_key: self.key.encode(),
            attempt: self.attempt + 1,
            look: None,
            tag: None,
        }
    }

    /// When a QUEUED or RETRYING run's next attempt may start: its due time, or the end of its
    /// backoff. `None` for a run that is not waiting for an attempt.
    pub fn waits_until(&self) -> Option<DateTime<Utc>> {
        match self.state {
            RunState::Queued => Some(self.due_at),
            RunState::Retrying => Some(self.retry_at.unwrap_or(self.updated_at)),
            _ => None,
        }
    }

    /// Whether no attempt of the run was ever started: QUEUED, attempt 0. Claiming its instant
    /// again re-sends its message instead of making a new run.
    /// How long it took: from its first attempt's start to its last attempt's end (`None`
    /// before it has one that ended).
    pub fn duration(&self) -> Option<chrono::Duration> {
        let started = self.attempts.first()?.started_at;
        let ended = self.attempts.last()?.finished_at?;
        Some(ended - started)
    }

    pub fn is_unstarted(&self) -> bool {
        self.state == RunState::Queued && self.attempt == 0
    }

    /// Whether a message asking for `attempt` still speaks for this run (invariant: state moves forward: a stale
    /// message is deleted unread). A waiting run answers to the message of its next attempt, and
    /// to that of the attempt that just ended (whose replacement may not have been sent); a
    /// RUNNING run to the message of its open attempt only.
    pub fn answers_to(&self, attempt: u32) -> bool {
        match self.state {
            RunState::Queued | RunState::Retrying => attempt == self.attempt + 1 || attempt == self.attempt,
            RunState::Running => attempt == self.attempt,
            _ => false,
        }
    }
}

/// The message on the runs queue: which run, and which attempt it asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunMessage {
    pub job_id: String,
    pub run_key: String,
    pub attempt: u32,
    /// A look at the work the open attempt started ([`crate::follow`]): the number of looks
    /// the attempt had when this one was asked for. `None`: the message asks for an attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub look: Option<u32>,
    /// A look's own tag, recorded with it ([`crate::follow`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn outcomes_are_spelled_as_serialised() {
        for outcome in
            [Outcome::Succeeded, Outcome::Failed, Outcome::TimedOut, Outcome::Lost, Outcome::Cancelled]
        {
            assert_eq!(serde_json::to_value(outcome).ok(), Some(serde_json::json!(outcome.as_str())));
        }
    }

    #[test]
    fn keys_round_trip() {
        let t: DateTime<Utc> = "2026-11-22T03:04:05Z".parse().unwrap();
        let s = RunKey::scheduled(t);
        assert_eq!(s.encode(), "2026-11-22T03:04:05Z#s");
        assert_eq!(RunKey::decode(&s.encode()), Some(s));
        let m = RunKey::manual(t);
        assert!(m.encode().starts_with("2026-11-22T03:04:05Z#m#"));
        assert_eq!(RunKey::decode(&m.encode()), Some(m));
        assert_eq!(RunKey::decode("2026-11-22T03:04:05Z#x"), None);
        assert_eq!(RunKey::decode("garbage"), None);
    }

    #[test]
    fn ids_are_url_safe_and_round_trip() {
        let t: DateTime<Utc> = "2026-11-22T03:04:05Z".parse().unwrap();
        let job = JobId::generate();
        for key in [RunKey::scheduled(t), RunKey::manual(t)] {
            let id = RunId::new(job.clone(), key);
            let text = id.to_string();
            assert!(text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.'), "{text}");
            assert_eq!(RunId::parse(&text), Some(id));
        }
        assert_eq!(RunId::parse("nope"), None);
        assert_eq!(RunId::parse(&format!("{job}.20261122T030405Z.q")), None);
    }

    #[test]
    fn states_parse_and_classify() {
        for state in RunState::ALL {
            assert_eq!(state.as_str().parse::<RunState>(), Ok(state));
            assert_eq!(serde_json::to_value(state).unwrap(), serde_json::json!(state.as_str()));
            assert_eq!(state.is_terminal(), !state.is_in_flight());
        }
        assert!(RunState::Running.is_active() && RunState::Retrying.is_active());
        assert!(!RunState::Queued.is_active());
    }

    proptest! {
        #[test]
        fn scheduled_keys_sort_like_their_instants(a in 0i64..4_000_000_000, b in 0i64..4_000_000_000) {
            let (ta, tb) = (DateTime::from_timestamp(a, 0).unwrap(), DateTime::from_timestamp(b, 0).unwrap());
            prop_assert_eq!(RunKey::scheduled(ta).encode().cmp(&RunKey::scheduled(tb).encode()), ta.cmp(&tb));
        }
    }
}
