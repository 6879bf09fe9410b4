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
/// A baseline learned from its full history is learned again at most this often: one history
/// query per job per interval, not one per run.
pub const LEARN_EVERY: Duration = Duration::minutes(10);
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

/// The baseline the latest `durations` of a job's successful runs make (newest first; the first
/// [`HISTORY`] count) as of `now`: `None` below [`MIN_HISTORY`].
pub fn learn(durations: &[Duration], now: DateTime<Utc>) -> Option<Baseline> {
    let mut ms: Vec<i64> = durations.iter().take(HISTORY).map(Duration::num_milliseconds).collect();
    if ms.len() < MIN_HISTORY {
        return None;
    }
    ms.sort_unstable();
    let rank = |p: usize| ms[(ms.len() * p).div_ceil(100).max(1) - 1];
    Some(Baseline { typical_ms: rank(50), p95_ms: rank(95), runs: ms.len() as u32, at: now })
}

/// Whether a success at `now` should learn the job's baseline again: none yet, one learned from
/// fewer runs than [`HISTORY`], or one older than [`LEARN_EVERY`].
pub fn due(baseline: Option<&Baseline>, now: DateTime<Utc>) -> bool {
    baseline.is_none_or(|b| (b.runs as usize) < HISTORY || now - b.at >= LEARN_EVERY)
}

/// Whether a run running since `since` has run past `baseline`'s anomaly threshold at `now`.
pub fn running_too_long(baseline: &Baseline, since: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now - since > baseline.anomaly_after()
}

/// Whether a success that `took` so long was a small fraction of `baseline`'s typical time.
pub fn too_fast(baseline: &Baseline, took: Duration) -> bool {
    baseline.too_fast_under().is_some_and(|under| took < under)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::at;
    use proptest::prelude::*;

    fn seconds(list: &[f64]) -> Vec<Duration> {
        list.iter().map(|s| Duration::milliseconds((s * 1000.0) as i64)).collect()
    }

    #[test]
    fn a_baseline_needs_its_history_and_follows_the_latest_runs() {
        let now = at("2026-11-22T12:00:00Z");
        assert_eq!(learn(&seconds(&[10.0; 4]), now), None, "four runs: not enough to learn from");
        let b = learn(&seconds(&[10.0; 5]), now).unwrap();
        assert_eq!((b.typical_ms, b.p95_ms, b.runs), (10_000, 10_000, 5));
        // Twenty newer runs of 60 s push the ten-second ones out.
        let mut newest_first = seconds(&[60.0; 20]);
        newest_first.extend(seconds(&[10.0; 5]));
        let b = learn(&newest_first, now).unwrap();
        assert_eq!((b.typical_ms, b.p95_ms, b.runs), (60_000, 60_000, 20));
        let b = learn(&seconds(&[1.0, 2.0, 3.0, 4.0, 100.0]), now).unwrap();
        assert_eq!((b.typical_ms, b.p95_ms), (3_000, 100_000), "the median and the nearest rank");
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
        let since = at("2026-11-22T10:00:00Z");
        assert!(!running_too_long(&b(10_000, 12_000), since, since + Duration::seconds(72)));
        assert!(running_too_long(&b(10_000, 12_000), since, since + Duration::seconds(73)));
        assert!(too_fast(&b(10_000, 12_000), Duration::milliseconds(500)));
        assert!(!too_fast(&b(10_000, 12_000), Duration::milliseconds(1500)));
        assert!(!too_fast(&b(2_000, 3_000), Duration::milliseconds(10)));
    }

    #[test]
    fn a_full_baseline_is_learned_again_at_most_every_ten_minutes() {
        let now = at("2026-11-22T12:00:00Z");
        let b = |runs, at| Baseline { typical_ms: 1, p95_ms: 1, runs, at };
        assert!(due(None, now), "nothing learned yet");
        assert!(due(Some(&b(19, now)), now), "fewer runs than its history: every success");
        assert!(!due(Some(&b(20, now - Duration::minutes(9))), now), "full and fresh");
        assert!(due(Some(&b(20, now - Duration::minutes(10))), now), "full and ten minutes old");
    }

    proptest! {
        /// The typical duration and the p95 are durations of the runs learned from, in order.
        #[test]
        fn percentiles_are_durations_seen(list in proptest::collection::vec(0.0f64..10_000.0, 5..40)) {
            let durations = seconds(&list);
            let b = learn(&durations, at("2026-11-22T12:00:00Z")).unwrap();
            let seen: Vec<i64> = durations.iter().take(HISTORY).map(Duration::num_milliseconds).collect();
            prop_assert!(seen.contains(&b.typical_ms) && seen.contains(&b.p95_ms));
            prop_assert!(b.typical_ms <= b.p95_ms);
            prop_assert_eq!(b.runs as usize, seen.len());
        }
    }
}
