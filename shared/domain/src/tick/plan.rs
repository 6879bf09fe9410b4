//! Which instants of one job to claim now, and where the job goes next: a pure function.
//!
//! The tick claims every instant from the job's `next_run_at` up to a horizon (the lookahead,
//! or further ahead for frequent jobs: several minutes in one pass, one job advance). Instants
//! that fell due in minutes the scheduler had not reached (downtime) are *missed*, and the job's
//! `catchup` policy decides which of them still run; a burst an earlier tick reached but could not
//! finish is not missed. An instant whose run starts late in its flexible window or jitter is
//! claimed by its own start ([`Plan::within_delay`]): the message that carries it can wait no
//! longer than SQS lets it.

use crate::job::CatchupPolicy;
use crate::schedule::Schedule;
use chrono::{DateTime, Duration, Utc};

/// Instants enumerated for one job in one pass, at most; beyond that the oldest missed ones are
/// dropped as if skipped (a job every 10 s down for 11 days).
pub const MAX_ENUMERATED: usize = 100_000;

/// What one pass over a job will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Instants to claim, oldest first.
    pub claim: Vec<DateTime<Utc>>,
    /// Missed instants the catch-up policy drops.
    pub skipped_missed: usize,
    /// The first and the last of them (they are the oldest missed instants, one after another
    /// on the schedule).
    pub dropped: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// The job's next instant after this pass (`None`: no more instants).
    pub next_run_at: Option<DateTime<Utc>>,
}

/// Plans a pass over a job whose next instant is `next_run_at` (and which repeats per
/// `schedule`; `None`: it runs once).
///
/// - `now`: the tick's time; `horizon`: claim instants up to this one;
/// - `reached`: the last minute a previous tick had started processing (`None` before the first
///   tick: nothing counts as missed);
/// - `catchup_max`: the most missed instants `all` runs.
pub fn plan(
    next_run_at: DateTime<Utc>,
    schedule: Option<&Schedule>,
    catchup: CatchupPolicy,
    now: DateTime<Utc>,
    horizon: DateTime<Utc>,
    reached: Option<DateTime<Utc>>,
    catchup_max: usize,
) -> Plan {
    let current_minute = crate::due_index::minute_of(now);
    let is_missed = |t: DateTime<Utc>| {
        reached.is_some_and(|reached| crate::due_index::minute_of(t) > reached) && t < current_minute
    };
    let keep = match catchup {
        CatchupPolicy::Skip => 0,
        CatchupPolicy::Latest => 1,
        CatchupPolicy::All => catchup_max,
    };
    let mut missed = Vec::new();
    let mut claim = Vec::new();
    let mut dropped = Dropped::default();
    let mut cursor = Some(next_run_at);
    let mut enumerated = 0usize;
    while let Some(t) = cursor {
        if t > horizon {
            break;
        }
        enumerated += 1;
        if enumerated > MAX_ENUMERATED && is_missed(t) {
            // A very long outage: drop what was collected and restart close enough to now that
            // the newest missed instants are the ones enumerated.
            let all = missed.len();
            dropped.oldest(&mut missed, all);
            enumerated = 0;
            cursor = schedule.and_then(|s| restart_point(s, t, current_minute, keep.max(1)));
            // The instants jumped over are dropped too: the gap reaches to just before the
            // restart (no instant lies between the last of them and that second).
            if let Some(restart) = cursor {
                dropped.through(t, restart - Duration::seconds(1));
            }
            continue;
        }
        if is_missed(t) {
            missed.push(t);
            // Only the newest `keep` can run: bound the memory of a long outage.
            if missed.len() > 2 * keep.max(1) {
                let drop = missed.len() - keep;
                dropped.oldest(&mut missed, drop);
            }
        } else {
            claim.push(t);
        }
        cursor = schedule.and_then(|s| s.next_after(t));
    }
    let keep = keep.min(missed.len());
    let drop = missed.len() - keep;
    dropped.oldest(&mut missed, drop);
    let mut instants = missed;
    instants.extend(claim);
    Plan { claim: instants, skipped_missed: dropped.count, dropped: dropped.range, next_run_at: cursor }
}

/// The missed instants a plan drops: how many, and the first and last of them.
#[derive(Debug, Default)]
struct Dropped {
    count: usize,
    range: Option<(DateTime<Utc>, DateTime<Utc>)>,
}

impl Dropped {
    /// Drops the `count` oldest of `missed`.
    fn oldest(&mut self, missed: &mut Vec<DateTime<Utc>>, count: usize) {
        if let (Some(first), Some(last)) = (missed.first(), count.checked_sub(1).and_then(|i| missed.get(i)))
        {
            self.through(*first, *last);
        }
        missed.drain(..count);
        self.count += count;
    }

    /// Widens the range to hold `first` to `last`.
    fn through(&mut self, first: DateTime<Utc>, last: DateTime<Utc>) {
        self.range = Some(match self.range {
            Some((from, to)) => (from.min(first), to.max(last)),
            None => (first, last),
        });
    }
}

/// The first instant of the shortest window ending at `end` that holds at least `want` instants
/// (the window doubles from a minute; never earlier than just after `after`).
fn restart_point(
    schedule: &Schedule,
    after: DateTime<Utc>,
    end: DateTime<Utc>,
    want: usize,
) -> Option<DateTime<Utc>> {
    let mut window = chrono::Duration::minutes(1);
    loop {
        let from = end - window;
        if from <= after {
            return schedule.next_after(after);
        }
        let found = schedule.upcoming(from, want).into_iter().filter(|t| *t < end).count();
        if found >= want {
            return schedule.next_after(from);
        }
        window = window * 2;
    }
}

impl Plan {
    /// Holds back, from the first on, the instants whose run starts (the instant plus its
    /// `offset`) more than `max_delay` after `now`: the message that carries a run waits at most
    /// that long. The first held back becomes the next instant, and those after it wait with it,
    /// so the job's one cursor stays in order; a later pass claims it once its start is near
    /// enough. Each instant is judged by its own offset, so a wide flexible window or jitter
    /// keeps the claim-ahead of the instants that start early in it.
    pub fn within_delay(
        mut self,
        now: DateTime<Utc>,
        max_delay: Duration,
        offset: impl Fn(DateTime<Utc>) -> Duration,
    ) -> Plan {
        if let Some(held) = self.claim.iter().position(|t| *t + offset(*t) > now + max_delay) {
            self.next_run_at = Some(self.claim[held]);
            self.claim.truncate(held);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{Rate, Recurrence};
    use chrono::Duration;
    use chrono_tz::Tz;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn every_minute() -> Schedule {
        Schedule {
            recurrence: Recurrence::Cron("* * * * *".parse().unwrap()),
            timezone: Tz::UTC,
            dst: Default::default(),
            days: None,
            start_at: None,
            end_at: None,
        }
    }

    /// Tick down from 12:01 to 12:06 (reached 12:01); now 12:06:00 → 12:02..12:05 are missed.
    fn after_outage(policy: CatchupPolicy) -> Plan {
        let now = t("2026-01-01T12:06:00Z");
        plan(
            t("2026-01-01T12:02:00Z"),
            Some(&every_minute()),
            policy,
            now,
            now + Duration::seconds(60),
            Some(t("2026-01-01T12:01:00Z")),
            100,
        )
    }

    #[test]
    fn catchup_skip_runs_none_of_the_missed() {
        let p = after_outage(CatchupPolicy::Skip);
        assert_eq!(p.claim, [t("2026-01-01T12:06:00Z"), t("2026-01-01T12:07:00Z")]);
        assert_eq!(p.skipped_missed, 4);
        assert_eq!(p.dropped, Some((t("2026-01-01T12:02:00Z"), t("2026-01-01T12:05:00Z"))));
        assert_eq!(p.next_run_at, Some(t("2026-01-01T12:08:00Z")));
    }

    #[test]
    fn catchup_latest_runs_the_latest_missed_once() {
        let p = after_outage(CatchupPolicy::Latest);
        assert_eq!(
            p.claim,
            [t("2026-01-01T12:05:00Z"), t("2026-01-01T12:06:00Z"), t("2026-01-01T12:07:00Z")]
        );
        assert_eq!(p.skipped_missed, 3);
        assert_eq!(p.dropped, Some((t("2026-01-01T12:02:00Z"), t("2026-01-01T12:04:00Z"))));
    }

    #[test]
    fn catchup_all_runs_every_missed_up_to_the_cap() {
        let p = after_outage(CatchupPolicy::All);
        assert_eq!(p.claim.len(), 6);
        assert_eq!(p.skipped_missed, 0);
        assert_eq!(p.dropped, None);
        let now = t("2026-01-01T12:06:00Z");
        let capped = plan(
            t("2026-01-01T12:02:00Z"),
            Some(&every_minute()),
            CatchupPolicy::All,
            now,
            now,
            Some(t("2026-01-01T12:01:00Z")),
            2,
        );
        assert_eq!(capped.claim, [t("2026-01-01T12:04:00Z"), t("2026-01-01T12:05:00Z"), now]);
        assert_eq!(capped.skipped_missed, 2);
        assert_eq!(capped.dropped, Some((t("2026-01-01T12:02:00Z"), t("2026-01-01T12:03:00Z"))));
    }

    #[test]
    fn a_burst_the_scheduler_reached_is_not_missed() {
        // A previous tick reached 12:05 but did not finish it: 12:02..12:05 are a continuation.
        let now = t("2026-01-01T12:06:00Z");
        let p = plan(
            t("2026-01-01T12:02:00Z"),
            Some(&every_minute()),
            CatchupPolicy::Skip,
            now,
            now,
            Some(t("2026-01-01T12:05:00Z")),
            100,
        );
        assert_eq!(p.claim.len(), 5);
        assert_eq!(p.skipped_missed, 0);
    }

    #[test]
    fn one_time_jobs_leave_after_their_instant() {
        let now = t("2026-01-01T12:00:00Z");
        let p = plan(
            now + Duration::seconds(20),
            None,
            CatchupPolicy::Latest,
            now,
            now + Duration::seconds(60),
            None,
            100,
        );
        assert_eq!(p.claim, [now + Duration::seconds(20)]);
        assert_eq!(p.next_run_at, None);
    }

    #[test]
    fn frequent_jobs_claim_every_instant_in_the_horizon() {
        let now = t("2026-01-01T12:00:00Z");
        let every_15s = Schedule {
            recurrence: Recurrence::Rate { rate: Rate::from_seconds(15), anchor: now },
            timezone: Tz::UTC,
            dst: Default::default(),
            days: None,
            start_at: None,
            end_at: None,
        };
        let p = plan(
            now,
            Some(&every_15s),
            CatchupPolicy::Latest,
            now,
            now + Duration::seconds(59),
            Some(now),
            100,
        );
        assert_eq!(p.claim.len(), 4);
        assert_eq!(p.next_run_at, Some(now + Duration::seconds(60)));
    }

    #[test]
    fn nothing_due_claims_nothing() {
        let now = t("2026-01-01T12:00:00Z");
        let p = plan(
            now + Duration::hours(1),
            Some(&every_minute()),
            CatchupPolicy::All,
            now,
            now,
            Some(now),
            100,
        );
        assert!(p.claim.is_empty());
        assert_eq!(p.next_run_at, Some(now + Duration::hours(1)));
    }

    #[test]
    fn very_long_outages_are_bounded() {
        let now = t("2026-03-01T00:00:00Z");
        let every_10s = Schedule {
            recurrence: Recurrence::Rate { rate: Rate::from_seconds(10), anchor: t("2026-01-01T00:00:00Z") },
            timezone: Tz::UTC,
            dst: Default::default(),
            days: None,
            start_at: None,
            end_at: None,
        };
        let p = plan(
            t("2026-01-01T00:00:00Z"),
            Some(&every_10s),
            CatchupPolicy::All,
            now,
            now,
            Some(t("2025-12-31T23:59:00Z")),
            5,
        );
        assert_eq!(p.claim.len(), 6, "the 5 newest missed + now");
        assert_eq!(p.claim[0], now - Duration::seconds(50));
        assert_eq!(*p.claim.last().unwrap(), now);
        assert!(p.skipped_missed > 90_000, "{}", p.skipped_missed);
        let (from, to) = p.dropped.unwrap();
        assert!(from < p.claim[0] - Duration::days(10), "the gap starts where the outage began: {from}");
        assert!(to >= p.claim[0] - Duration::seconds(10), "it holds the last instant dropped: {to}");
        assert!(to < p.claim[0], "and ends before the first kept: {to}");
    }

    #[test]
    fn an_instant_is_held_back_only_while_its_own_start_is_beyond_the_delay() {
        let now = t("2026-03-01T11:55:00Z");
        let minutes = |n: i64| now + Duration::minutes(n);
        let plan = Plan {
            claim: vec![minutes(1), minutes(2), minutes(3)],
            skipped_missed: 0,
            dropped: None,
            next_run_at: Some(minutes(4)),
        };
        // Offsets of 10, 14 and 1 minutes: the second would wait 16 minutes, past 15.
        let offset = |at: DateTime<Utc>| match (at - now).num_minutes() {
            1 => Duration::minutes(10),
            2 => Duration::minutes(14),
            _ => Duration::minutes(1),
        };
        let held = plan.clone().within_delay(now, Duration::minutes(15), offset);
        assert_eq!(held.claim, [minutes(1)]);
        assert_eq!(held.next_run_at, Some(minutes(2)), "the cursor waits at the first held back");
        let all = plan.clone().within_delay(now, Duration::minutes(16), offset);
        assert_eq!(all, plan, "nothing held back when every start is near enough");
    }
}
