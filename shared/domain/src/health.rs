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
//!
//! Outcomes too: a job whose latest runs fail too often is told `failure_rate` ([`FailureRate`]:
//! at least [`RATE_ALERT_PERCENT`] % of its latest [`RATE_WINDOW`] ended runs failed, once it has
//! [`RATE_MIN_ENDED`] of them), even when it never fails `alert_after_failures` times in a row.
//! What a job was told is wrong with it (`failing`, `failure_rate`, `missed`) stays open as a
//! [`Trouble`] until a later success ends it, and that success tells `recovered` once
//! ([`Troubles::ended_by`]).

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

/// Ended runs a failure rate is taken over, at most (the latest).
pub const RATE_WINDOW: usize = 20;
/// Ended runs needed before a failure rate is told.
pub const RATE_MIN_ENDED: usize = 10;
/// A failure rate at or above this share (in percent) is told...
pub const RATE_ALERT_PERCENT: u32 = 30;
/// ...and recovered from once a success brings it back to or under this one: half, so that a
/// job failing about as often as the threshold is not told and recovered by turns.
pub const RATE_RECOVERED_PERCENT: u32 = 15;

/// How an ended run counts in a failure rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Succeeded,
    /// Failed or timed out.
    Failed,
}

/// The share of failed runs among a job's latest ended runs: the numbers `failure_rate` is told
/// with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FailureRate {
    /// Failed (or timed out) runs among them.
    pub failed: u32,
    /// The ended runs counted (the latest, at most [`RATE_WINDOW`]).
    pub ended: u32,
    /// `failed` as a share of `ended`, in whole percent (rounded down).
    pub percent: u32,
    /// The share it is told at, in percent.
    pub threshold_percent: u32,
}

impl FailureRate {
    /// The rate of the latest ended runs (newest first; the first [`RATE_WINDOW`] count): `None`
    /// below [`RATE_MIN_ENDED`].
    pub fn of(latest: impl IntoIterator<Item = Ended>) -> Option<FailureRate> {
        let window: Vec<Ended> = latest.into_iter().take(RATE_WINDOW).collect();
        if window.len() < RATE_MIN_ENDED {
            return None;
        }
        let failed = window.iter().filter(|e| **e == Ended::Failed).count() as u32;
        let ended = window.len() as u32;
        Some(FailureRate {
            failed,
            ended,
            percent: failed * 100 / ended,
            threshold_percent: RATE_ALERT_PERCENT,
        })
    }

    /// Whether it is high enough to tell.
    pub fn alarming(&self) -> bool {
        self.failed * 100 >= RATE_ALERT_PERCENT * self.ended
    }

    /// Whether a job told its failure rate has recovered from it.
    pub fn recovered(&self) -> bool {
        self.failed * 100 <= RATE_RECOVERED_PERCENT * self.ended
    }
}

/// What a job was told is wrong with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Trouble {
    Failing,
    FailureRate,
    Missed,
}

impl Trouble {
    /// The wire name (`failure_rate`), as serde writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Trouble::Failing => "failing",
            Trouble::FailureRate => "failure_rate",
            Trouble::Missed => "missed",
        }
    }
}

/// When a trouble was told, and the scheduled instant it was told as of: the failed run's (for
/// `failing` and `failure_rate`) or the last dropped instant's (for `missed`). Only a success
/// scheduled after that instant ends it: a run that began before the trouble and ends after it
/// says nothing of the job as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TroubleMark {
    pub as_of: DateTime<Utc>,
    pub told_at: DateTime<Utc>,
    /// The run whose end told it: how a writer whose answer was lost knows its own flag.
    pub told_by: String,
}

/// The troubles told about a job and not recovered from yet, each with its mark.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Troubles {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing: Option<TroubleMark>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<TroubleMark>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<TroubleMark>,
}

impl Troubles {
    /// Each open trouble, with its mark, in a fixed order.
    pub fn open(&self) -> impl Iterator<Item = (Trouble, TroubleMark)> + '_ {
        [
            (Trouble::Failing, self.failing.clone()),
            (Trouble::FailureRate, self.failure_rate.clone()),
            (Trouble::Missed, self.missed.clone()),
        ]
        .into_iter()
        .filter_map(|(trouble, mark)| Some((trouble, mark?)))
    }

    pub fn is_empty(&self) -> bool {
        self.open().next().is_none()
    }

    pub fn get(&self, trouble: Trouble) -> Option<TroubleMark> {
        match trouble {
            Trouble::Failing => self.failing.clone(),
            Trouble::FailureRate => self.failure_rate.clone(),
            Trouble::Missed => self.missed.clone(),
        }
    }

    pub fn set(&mut self, trouble: Trouble, mark: Option<TroubleMark>) {
        match trouble {
            Trouble::Failing => self.failing = mark,
            Trouble::FailureRate => self.failure_rate = mark,
            Trouble::Missed => self.missed = mark,
        }
    }

    /// The troubles a success of the run scheduled at `scheduled` ends (those told as of an
    /// earlier instant), given the job's failure rate with that success counted (`rate`; `None`:
    /// not read). `failing` and `missed` end at the first such success; `failure_rate` only once
    /// the rate is back to [`RATE_RECOVERED_PERCENT`] or under.
    pub fn ended_by(&self, scheduled: DateTime<Utc>, rate: Option<&FailureRate>) -> Troubles {
        let mut ended = Troubles::default();
        for (trouble, mark) in self.open().filter(|(_, mark)| mark.as_of < scheduled) {
            let ends = match trouble {
                Trouble::Failing | Trouble::Missed => true,
                Trouble::FailureRate => rate.is_some_and(FailureRate::recovered),
            };
            if ends {
                ended.set(trouble, Some(mark));
            }
        }
        ended
    }
}

/// What `recovered` tells: the troubles a success ended, each with when it was told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Recovery {
    pub from: Troubles,
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

    fn rate(newest_first: &str) -> Option<FailureRate> {
        FailureRate::of(newest_first.chars().map(|c| if c == 'F' { Ended::Failed } else { Ended::Succeeded }))
    }

    #[test]
    fn a_failure_rate_needs_ten_ended_runs_and_counts_the_latest_twenty() {
        assert_eq!(rate("FFFFFFFFF"), None, "nine runs: not enough");
        let r = rate("FFFSSSSSSS").unwrap();
        assert_eq!((r.failed, r.ended, r.percent, r.threshold_percent), (3, 10, 30, 30));
        assert!(r.alarming() && !r.recovered());
        assert!(!rate("FFSSSSSSSS").unwrap().alarming(), "20 % is under the threshold");
        // Only the latest twenty count: the old failures have passed out of the window.
        let r = rate(&format!("{}{}", "S".repeat(20), "F".repeat(20))).unwrap();
        assert_eq!((r.failed, r.ended), (0, 20));
        assert!(r.recovered());
        assert!(rate("FFFSSSSSSSSSSSSSSSSS").unwrap().recovered(), "3 of 20 is 15 %: recovered");
        assert!(!rate("FFFFSSSSSSSSSSSSSSSS").unwrap().recovered(), "4 of 20 is 20 %: not yet");
    }

    #[test]
    fn a_success_ends_the_troubles_told_before_its_instant() {
        let told =
            |as_of: &str| Some(TroubleMark { as_of: at(as_of), told_at: at(as_of), told_by: "run".into() });
        let troubles = Troubles {
            failing: told("2026-11-22T12:05:00Z"),
            failure_rate: told("2026-11-22T12:05:00Z"),
            missed: told("2026-11-22T12:10:00Z"),
        };
        let high = rate("SFFFSSSSSS").unwrap();
        let low = rate(&format!("S{}", "S".repeat(19))).unwrap();
        let ended = troubles.ended_by(at("2026-11-22T12:06:00Z"), Some(&high));
        assert_eq!(ended.open().map(|(t, _)| t).collect::<Vec<_>>(), vec![Trouble::Failing]);
        let ended = troubles.ended_by(at("2026-11-22T12:11:00Z"), Some(&low));
        assert_eq!(ended, troubles, "a later success at a low rate ends all three");
        assert!(
            troubles.ended_by(at("2026-11-22T12:05:00Z"), Some(&low)).is_empty(),
            "not one scheduled before"
        );
        assert!(troubles.ended_by(at("2026-11-22T12:11:00Z"), None).failure_rate.is_none(), "rate not read");
    }

    proptest! {
        /// Whatever the runs, a rate is never both alarming and recovered, and what a success ends
        /// was open.
        #[test]
        fn rates_have_a_dead_band(runs in proptest::collection::vec(any::<bool>(), 10..40)) {
            let r = FailureRate::of(runs.iter().map(|f| if *f { Ended::Failed } else { Ended::Succeeded })).unwrap();
            prop_assert!(!(r.alarming() && r.recovered()));
            prop_assert!(r.failed <= r.ended && r.ended as usize <= RATE_WINDOW);
        }
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
