//! Health learned from a job's own history, with no configuration: its normal duration (a
//! [`Baseline`] from its latest successful runs), and the runs that depart from it — one still
//! running far longer than usual ([`running_too_long`]: `duration_anomaly`, once per run), or one
//! that succeeded in a small fraction of its usual time ([`too_fast`]: the empty dump that exits
//! 0). A job opts out with `health_alerts: false`; the job holds its baseline
//! ([`crate::job::Job::baseline`]).
//!
//! The rule: the baseline is the median (typical) and the 95th percentile (nearest rank) of the
//! durations of the job's latest [`HISTORY`] successful runs, learned once it has [`MIN_HISTORY`]
//! of them. A run is anomalous past `max(p95 × ANOMALY_FACTOR, p95 + ANOMALY_FLOOR)`; a
//! success is too fast under `typical × TOO_FAST_SHARE`, for jobs whose typical run takes at
//! least [`TOO_FAST_MIN_TYPICAL`] (a 200 ms job's 15 ms run says nothing).

use crate::run::{Run, RunState};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// Successful runs a baseline is learned from, at most (the latest).
pub const HISTORY: usize = 20;
/// Successful runs needed before a baseline is learned.
pub const MIN_HISTORY: usize = 5;
/// A run still running past this many times the p95 is anomalous...
pub const ANOMALY_FACTOR: i32 = 2;
/// ...and past the p95 plus this, so that short jobs' jitter is not an anomaly.
pub const ANOMALY_FLOOR: Duration = Duration::seconds(60);
/// A success under this share of the typical duration (in tenths: 1 = 10 %) is too fast...
pub const TOO_FAST_TENTHS: i32 = 1;
/// ...for jobs whose typical run takes at least this.
pub const TOO_FAST_MIN_TYPICAL: Duration = Duration::seconds(10);

/// A job's normal duration, learned from its latest successful runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Baseline {
    /// The median duration of those runs, in milliseconds.
    pub typical_ms: i64,
    /// Their 95th percentile (nearest rank), in milliseconds.
    pub p95_ms: i64,
    /// How many runs it is based on.
    pub runs: u32,
    /// When it was learned.
    pub at: DateTime<Utc>,
}

impl Baseline {
    /// How long a run may run before it is anomalous.
    pub fn anomaly_after(&self) -> Duration {
        let p95 = Duration::milliseconds(self.p95_ms);
        (p95 * ANOMALY_FACTOR).max(p95 + ANOMALY_FLOOR)
    }

    /// A success shorter than this is too fast (`None`: the job is too quick to tell).
    pub fn too_fast_under(&self) -> Option<Duration> {
        let typical = Duration::milliseconds(self.typical_ms);
        (typical >= TOO_FAST_MIN_TYPICAL).then(|| typical * TOO_FAST_TENTHS / 10)
    }
}

/// How long an ended run took: from its first attempt's start to its last attempt's end.
pub fn duration(run: &Run) -> Option<Duration> {
    let started = run.attempts.first()?.started_at;
    let ended = run.attempts.last()?.finished_at?;
    Some(ended - started)
}

/// The baseline `succeeded` (the job's successful runs, any order) make as of `now`: `None`
/// below [`MIN_HISTORY`]. The latest [`HISTORY`] count.
pub fn learn(succeeded: &[Run], now: DateTime<Utc>) -> Option<Baseline> {
    let mut latest: Vec<&Run> = succeeded.iter().filter(|r| r.state == RunState::Succeeded).collect();
    latest.sort_by_key(|r| std::cmp::Reverse(r.updated_at));
    let mut durations: Vec<i64> =
        latest.iter().take(HISTORY).filter_map(|r| duration(r)).map(|d| d.num_milliseconds()).collect();
    if durations.len() < MIN_HISTORY {
        return None;
    }
    durations.sort_unstable();
    let rank = |p: usize| durations[(durations.len() * p).div_ceil(100).max(1) - 1];
    Some(Baseline { typical_ms: rank(50), p95_ms: rank(95), runs: durations.len() as u32, at: now })
}

/// Whether `run` has been running (since its first attempt started) past `baseline`'s anomaly
/// threshold at `now`.
pub fn running_too_long(baseline: &Baseline, run: &Run, now: DateTime<Utc>) -> bool {
    let Some(first) = run.attempts.first() else { return false };
    run.state == RunState::Running && now - first.started_at > baseline.anomaly_after()
}

/// Whether `run`, just ended, succeeded in a small fraction of `baseline`'s typical time.
pub fn too_fast(baseline: &Baseline, run: &Run) -> bool {
    let (under, took) = (baseline.too_fast_under(), duration(run));
    run.state == RunState::Succeeded && matches!((under, took), (Some(u), Some(t)) if t < u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::at;
    use crate::job::Job;
    use crate::run::transition::claim;
    use crate::run::{Attempt, RunKey};
    use proptest::prelude::*;
    use serde_json::json;

    /// A run of `job` that succeeded after `seconds`, ended `n` minutes past 10:00.
    fn took(job: &Job, n: i64, seconds: f64) -> Run {
        let start = at("2026-11-22T10:00:00Z") + Duration::minutes(n);
        let mut run = claim(job, RunKey::scheduled(start), start, start, Duration::days(30));
        let finished = start + Duration::milliseconds((seconds * 1000.0) as i64);
        let attempt: Attempt = serde_json::from_value(json!({
            "n": 1, "started_at": start, "finished_at": finished, "worker": "w"
        }))
        .unwrap();
        run.attempts.push(attempt);
        run.attempt = 1;
        run.state = RunState::Succeeded;
        run.updated_at = start + Duration::minutes(1);
        run
    }

    fn job() -> Job {
        crate::fixtures::job(json!({"schedule": {"cron": "* * * * *"}}))
    }

    #[test]
    fn a_baseline_needs_its_history_and_follows_the_latest_runs() {
        let job = job();
        let now = at("2026-11-22T12:00:00Z");
        let runs: Vec<Run> = (0..4).map(|n| took(&job, n, 10.0)).collect();
        assert_eq!(learn(&runs, now), None, "four runs: not enough to learn from");
        let mut runs: Vec<Run> = (0..5).map(|n| took(&job, n, 10.0)).collect();
        let b = learn(&runs, now).unwrap();
        assert_eq!((b.typical_ms, b.p95_ms, b.runs), (10_000, 10_000, 5));
        // Twenty later runs of 60 s push the ten-second ones out.
        runs.extend((5..25).map(|n| took(&job, n, 60.0)));
        let b = learn(&runs, now).unwrap();
        assert_eq!((b.typical_ms, b.p95_ms, b.runs), (60_000, 60_000, 20));
    }

    #[test]
    fn anomalies_have_a_floor_and_too_fast_needs_a_slow_enough_job() {
        let b = |typical, p95| Baseline {
            typical_ms: typical,
            p95_ms: p95,
            runs: 5,
            at: at("2026-11-22T12:00:00Z"),
        };
        assert_eq!(b(10_000, 12_000).anomaly_after(), Duration::seconds(72), "p95 + 60 s for short jobs");
        assert_eq!(
            b(600_000, 900_000).anomaly_after(),
            Duration::seconds(1800),
            "twice the p95 for long ones"
        );
        assert_eq!(b(10_000, 12_000).too_fast_under(), Some(Duration::seconds(1)));
        assert_eq!(b(2_000, 3_000).too_fast_under(), None, "a two-second job: nothing to tell");
    }

    #[test]
    fn a_run_is_judged_against_the_baseline() {
        let job = job();
        let b = Baseline { typical_ms: 10_000, p95_ms: 12_000, runs: 5, at: at("2026-11-22T12:00:00Z") };
        let mut running = took(&job, 0, 0.0);
        running.state = RunState::Running;
        running.attempts[0].finished_at = None;
        let start = running.attempts[0].started_at;
        assert!(!running_too_long(&b, &running, start + Duration::seconds(72)));
        assert!(running_too_long(&b, &running, start + Duration::seconds(73)));
        assert!(too_fast(&b, &took(&job, 0, 0.5)));
        assert!(!too_fast(&b, &took(&job, 0, 1.5)));
        let mut failed = took(&job, 0, 0.5);
        failed.state = RunState::Failed;
        assert!(!too_fast(&b, &failed), "only a success is too fast");
    }

    proptest! {
        /// The typical duration and the p95 are durations of the runs learned from, in order.
        #[test]
        fn percentiles_are_durations_seen(seconds in proptest::collection::vec(0.0f64..10_000.0, 5..40)) {
            let job = job();
            let runs: Vec<Run> = seconds.iter().enumerate().map(|(n, s)| took(&job, n as i64, *s)).collect();
            let b = learn(&runs, at("2026-11-22T12:00:00Z")).unwrap();
            let seen: Vec<i64> = runs.iter().rev().take(HISTORY).filter_map(duration).map(|d| d.num_milliseconds()).collect();
            prop_assert!(seen.contains(&b.typical_ms) && seen.contains(&b.p95_ms));
            prop_assert!(b.typical_ms <= b.p95_ms);
            prop_assert_eq!(b.runs as usize, seen.len());
        }
    }
}
