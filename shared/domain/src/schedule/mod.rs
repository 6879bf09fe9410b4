//! Schedules: when a job fires.
//!
//! A [`Schedule`] is a validated, pure value: cron in a time zone, a rate anchored at a start
//! instant, one instant (`at`), or a union of those ([`Recurrence::Any`], each with its own zone
//! and bounds); bounded by `start_at`/`end_at`. Its only question is [`Schedule::next_after`], a
//! pure function of an instant. All instants are whole UTC seconds: a run never starts before its
//! instant, so anything finer is rounded up. An instant two entries of a union both yield is one
//! instant.

pub mod cron;
pub mod days;
pub mod describe;
pub mod rate;
pub mod zoned;

pub use self::cron::{CronError, CronExpr};
pub use self::rate::Rate;
pub use self::zoned::{DstEffectKind, DstFold, DstGap, DstPolicy};

use chrono::{DateTime, Duration, SubsecRound, Utc};
use chrono_tz::Tz;

/// What makes a job fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recurrence {
    /// A cron expression evaluated in a time zone.
    Cron(CronExpr),
    /// Every `rate` from `anchor`: instants at anchor + k × rate, k ≥ 0, without drift.
    Rate { rate: Rate, anchor: DateTime<Utc> },
    /// Exactly one instant.
    At(DateTime<Utc>),
    /// The instants of any of these schedules (each with its own zone and bounds; none a union
    /// itself), each instant once.
    Any(Vec<Schedule>),
}

/// A job's schedule: recurrence, zone and bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub recurrence: Recurrence,
    pub timezone: Tz,
    /// What a cron does at a DST change in its zone.
    pub dst: DstPolicy,
    /// The dates a cron's instants may fall on, by a business calendar (`None`: any).
    pub days: Option<days::DayRule>,
    pub start_at: Option<DateTime<Utc>>,
    pub end_at: Option<DateTime<Utc>>,
}

/// A DST change that touches a schedule's instants, and what its policy makes of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DstNote {
    /// The change: the first instant on the zone's new offset.
    pub at: DateTime<Utc>,
    pub effect: DstEffectKind,
    /// In words: "2027-03-14: 02:30 does not exist in America/New_York; runs at 03:00".
    pub detail: String,
    /// The instant the moved local times fire at (`moved`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs_at: Option<DateTime<Utc>>,
    /// The local times it touches, as the zone writes them (`2027-03-14T02:30:00`).
    pub local_times: Vec<chrono::NaiveDateTime>,
}

/// The most instants [`Schedule::gap_shorter_than`] walks.
pub const GAP_WALK: usize = 3_000;

/// Rounds an instant up to a whole second; `None` in chrono's last second, which has no whole
/// second after it.
pub fn checked_ceil_second(t: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let floor = t.trunc_subsecs(0);
    if floor == t { Some(t) } else { floor.checked_add_signed(Duration::seconds(1)) }
}

/// Rounds an instant up to a whole second (in chrono's last second, leaves it as it is: never
/// earlier than `t`).
pub fn ceil_second(t: DateTime<Utc>) -> DateTime<Utc> {
    checked_ceil_second(t).unwrap_or(t)
}

/// The last instant a schedule yields: 9999-12-31T23:59:59Z. Instants are stored as RFC 3339
/// text, whose years have four digits; a schedule has no instant after this one.
pub fn last_instant() -> DateTime<Utc> {
    DateTime::from_timestamp(253_402_300_799, 0).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

impl Schedule {
    /// The first instant strictly after `t` (and not before `start_at`, not after `end_at`, nor
    /// after [`last_instant`]). Total over every instant chrono holds.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Instants before start_at do not exist: search from just before it.
        let from = match self.start_at.and_then(|start| start.checked_sub_signed(Duration::seconds(1))) {
            Some(before_start) if before_start > t => before_start,
            _ => t,
        };
        let next = match &self.recurrence {
            Recurrence::Cron(expr) => match &self.days {
                Some(rule) => days::next_after(expr, self.timezone, self.dst, rule, from),
                None => zoned::next_after(expr, self.timezone, self.dst, from),
            },
            Recurrence::Rate { rate, anchor } => rate.next_after(*anchor, from),
            Recurrence::At(at) => (*at > from).then_some(*at),
            Recurrence::Any(entries) => entries.iter().filter_map(|e| e.next_after(from)).min(),
        }?;
        match self.end_at {
            Some(end) if next > end => None,
            _ if next > last_instant() => None,
            _ => Some(next),
        }
    }

    /// The first instant at or after `t`: the next run of a job created or resumed at `t`.
    pub fn first_at_or_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let second = checked_ceil_second(t)?;
        // chrono's first instant has no second before it: search from the instant itself.
        self.next_after(second.checked_sub_signed(Duration::seconds(1)).unwrap_or(second))
    }

    /// The last instant in `[from, now)`, found by looking back over windows that double from a
    /// minute: a job every second paused for a week is not walked instant by instant.
    pub fn latest_before(&self, from: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut window = Duration::minutes(1);
        loop {
            let start = (now - window).max(from);
            let mut last = None;
            let mut cursor = self.first_at_or_after(start);
            while let Some(t) = cursor.filter(|t| *t < now) {
                last = Some(t);
                cursor = self.next_after(t);
            }
            if last.is_some() || start == from {
                return last;
            }
            window = window * 2;
        }
    }

    /// The DST changes in `[from, to]` (and within the schedule's bounds) that touch its cron's
    /// local times, or its crons' in a union, in order.
    pub fn dst_notes(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DstNote> {
        let from = self.start_at.map_or(from, |s| s.max(from));
        let to = self.end_at.map_or(to, |e| e.min(to));
        let mut notes = match &self.recurrence {
            Recurrence::Cron(expr) => zoned::effects_between(expr, self.timezone, self.dst, from, to)
                .into_iter()
                .map(|e| DstNote {
                    at: e.at,
                    effect: e.kind,
                    detail: e.explain(self.timezone),
                    runs_at: e.to,
                    local_times: e.locals,
                })
                .collect(),
            Recurrence::Any(entries) => entries.iter().flat_map(|e| e.dst_notes(from, to)).collect(),
            Recurrence::Rate { .. } | Recurrence::At(_) => Vec::new(),
        };
        notes.sort_by_key(|n| n.at);
        notes
    }

    /// A gap shorter than `span` between two consecutive instants in the year after `now`, if
    /// there is one (the first found): a year holds every pattern of days and both DST changes.
    /// Walks at most [`GAP_WALK`] instants from now, and the two days around each DST change of
    /// the year, where a cron's gaps shrink (a restricted-hour cron's 02:30 shifted to 03:00).
    pub fn gap_shorter_than(&self, span: Duration, now: DateTime<Utc>) -> Option<Duration> {
        let end = now + Duration::days(366);
        let shorter_from = |from: DateTime<Utc>, until: DateTime<Utc>| {
            let mut previous = self.first_at_or_after(from)?;
            for _ in 0..GAP_WALK {
                let next = self.next_after(previous).filter(|n| *n <= until)?;
                if next - previous < span {
                    return Some(next - previous);
                }
                previous = next;
            }
            None
        };
        // The walk from now may stop short of the year for a frequent schedule: the days of the
        // year's DST changes, where gaps shrink, are walked on their own.
        shorter_from(now, end).or_else(|| {
            self.dst_notes(now, end)
                .iter()
                .find_map(|n| shorter_from(n.at - Duration::days(1), n.at + Duration::days(1)))
        })
    }

    /// The next `n` instants strictly after `t`.
    pub fn upcoming(&self, t: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::with_capacity(n);
        let mut cursor = t;
        while out.len() < n {
            match self.next_after(cursor) {
                Some(next) => {
                    out.push(next);
                    cursor = next;
                }
                None => break,
            }
        }
        out
    }

    /// The most instants the schedule can have in `seconds` of time (from any point): one per
    /// shortest gap, and for a cron no more than its instants a day allow over the days the span
    /// touches (the shortest gap of `0 * * * *` is counted as a minute, its day holds 24).
    pub fn max_instants_in(&self, seconds: u64) -> u64 {
        let by_gap = match self.min_interval_seconds() {
            Some(gap) => seconds / gap.max(1) + 1,
            None => 1,
        };
        match &self.recurrence {
            // A span touches at most its whole days plus two partial ones.
            Recurrence::Cron(expr) => by_gap.min((seconds / 86_400 + 2) * expr.max_per_day()),
            // No more than its entries' together (fewer where they coincide).
            Recurrence::Any(entries) => {
                entries.iter().map(|e| e.max_instants_in(seconds)).sum::<u64>().max(1)
            }
            _ => by_gap,
        }
    }

    /// The shortest gap between two consecutive instants of one entry, in seconds, if the
    /// schedule repeats. For a union, the shortest of its entries': two entries' instants may
    /// fall closer together, so a union's rate is bounded by its entries' sum
    /// ([`Schedule::max_instants_in`]), not by this gap.
    pub fn min_interval_seconds(&self) -> Option<u64> {
        match &self.recurrence {
            Recurrence::Cron(expr) => Some(u64::from(expr.min_gap_seconds())),
            Recurrence::Rate { rate, .. } => Some(rate.seconds()),
            Recurrence::At(_) => None,
            Recurrence::Any(entries) => entries.iter().filter_map(Schedule::min_interval_seconds).min(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn cron(expr: &str, tz: Tz) -> Schedule {
        Schedule {
            recurrence: Recurrence::Cron(expr.parse().unwrap()),
            timezone: tz,
            dst: Default::default(),
            days: None,
            start_at: None,
            end_at: None,
        }
    }

    /// The bound holds against a count, hourly and minutely, across a fall-back night (the
    /// repeated hour), and is far tighter than one per minute for an hourly cron.
    #[test]
    fn the_instants_in_a_span_are_bounded_from_above() {
        let start = utc("2026-11-01T00:00:00Z");
        for (expr, tz) in
            [("0 * * * *", Tz::America__New_York), ("*/5 * * * *", Tz::UTC), ("0 30 9 * * MON-FRI", Tz::UTC)]
        {
            let s = cron(expr, tz);
            for days in [0u64, 1, 3] {
                let seconds = days * 86_400 + 3_600;
                let mut count = 0u64;
                let mut at = s.first_at_or_after(start);
                while let Some(t) = at.filter(|t| *t < start + chrono::Duration::seconds(seconds as i64)) {
                    count += 1;
                    at = s.next_after(t);
                }
                assert!(count <= s.max_instants_in(seconds), "{expr} over {seconds} s: {count}");
            }
        }
        assert_eq!(cron("0 * * * *", Tz::UTC).max_instants_in(86_400), 3 * 25, "days × (24 + 1) hours");
    }

    #[test]
    fn start_and_end_bound_the_instants() {
        let mut s = cron("0 * * * *", Tz::UTC);
        s.start_at = Some(utc("2026-01-01T05:00:00Z"));
        s.end_at = Some(utc("2026-01-01T07:00:00Z"));
        assert_eq!(
            s.upcoming(utc("2026-01-01T00:00:00Z"), 10),
            [utc("2026-01-01T05:00:00Z"), utc("2026-01-01T06:00:00Z"), utc("2026-01-01T07:00:00Z")]
        );
    }

    #[test]
    fn at_fires_once() {
        let s = Schedule {
            recurrence: Recurrence::At(utc("2026-05-01T10:00:00Z")),
            timezone: Tz::UTC,
            dst: Default::default(),
            days: None,
            start_at: None,
            end_at: None,
        };
        assert_eq!(s.upcoming(utc("2026-01-01T00:00:00Z"), 3), [utc("2026-05-01T10:00:00Z")]);
        assert_eq!(s.next_after(utc("2026-05-01T10:00:00Z")), None);
        assert_eq!(s.first_at_or_after(utc("2026-05-01T10:00:00Z")), Some(utc("2026-05-01T10:00:00Z")));
    }

    fn entry(recurrence: Recurrence, zone: &str) -> Schedule {
        Schedule {
            recurrence,
            timezone: zone.parse().unwrap(),
            dst: Default::default(),
            days: None,
            start_at: None,
            end_at: None,
        }
    }

    fn any(entries: Vec<Schedule>) -> Schedule {
        Schedule {
            recurrence: Recurrence::Any(entries),
            timezone: Tz::UTC,
            dst: Default::default(),
            days: None,
            start_at: None,
            end_at: None,
        }
    }

    /// The union's oracle: each case's instants, worked out by hand from the entries' own.
    #[test]
    fn a_union_has_each_instant_of_its_schedules_once() {
        let nine_new_york = || entry(Recurrence::Cron("0 9 * * *".parse().unwrap()), "America/New_York");
        let fourteen_utc = || entry(Recurrence::Cron("0 14 * * *".parse().unwrap()), "UTC");
        // In January 09:00 New York is 14:00 UTC: the two coincide, one instant a day.
        assert_eq!(
            any(vec![nine_new_york(), fourteen_utc()]).upcoming(utc("2027-01-10T00:00:00Z"), 2),
            [utc("2027-01-10T14:00:00Z"), utc("2027-01-11T14:00:00Z")]
        );
        // In July (EDT) they are an hour apart: two a day.
        assert_eq!(
            any(vec![nine_new_york(), fourteen_utc()]).upcoming(utc("2027-07-10T00:00:00Z"), 3),
            [utc("2027-07-10T13:00:00Z"), utc("2027-07-10T14:00:00Z"), utc("2027-07-11T13:00:00Z")]
        );
        // A cron, an `at` between two of its instants, and a rate with its own bounds.
        let mut rate = entry(
            Recurrence::Rate { rate: Rate::from_seconds(3_600), anchor: utc("2027-03-01T00:30:00Z") },
            "UTC",
        );
        rate.end_at = Some(utc("2027-03-01T01:30:00Z"));
        let union = any(vec![
            entry(Recurrence::Cron("0 0 * * *".parse().unwrap()), "UTC"),
            entry(Recurrence::At(utc("2027-03-01T12:00:00Z")), "UTC"),
            rate,
        ]);
        assert_eq!(
            union.upcoming(utc("2027-02-28T23:00:00Z"), 5),
            [
                utc("2027-03-01T00:00:00Z"),
                utc("2027-03-01T00:30:00Z"),
                utc("2027-03-01T01:30:00Z"),
                utc("2027-03-01T12:00:00Z"),
                utc("2027-03-02T00:00:00Z"),
            ]
        );
        // The whole's bounds hold over every entry.
        let mut bounded = any(vec![nine_new_york(), fourteen_utc()]);
        bounded.end_at = Some(utc("2027-07-10T13:30:00Z"));
        assert_eq!(bounded.upcoming(utc("2027-07-10T00:00:00Z"), 3), [utc("2027-07-10T13:00:00Z")]);
        assert_eq!(
            any(vec![fourteen_utc(), fourteen_utc()]).max_instants_in(86_400),
            2 * fourteen_utc().max_instants_in(86_400)
        );
    }

    const EXPRS: &[&str] = &[
        "* * * * *",
        "*/7 * * * *",
        "30 2 * * *",
        "30 1 * * *",
        "0 */3 * * 1-5",
        "15,45 9-17 * * MON-FRI",
        "0 0 13 * 5",
        "*/20 * * * * *",
        "0 0 1 */2 *",
        "@hourly",
    ];
    const ZONES: &[&str] =
        &["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// next > t, next fires on a matching local time (or the end of a DST gap), and the
        /// sequence is monotone.
        #[test]
        fn next_after_is_later_matching_and_monotone(
            e in 0..EXPRS.len(), z in 0..ZONES.len(),
            secs in 1_700_000_000i64..1_900_000_000i64, delta in 0i64..100_000,
        ) {
            let tz: Tz = ZONES[z].parse().unwrap_or(Tz::UTC);
            let s = cron(EXPRS[e], tz);
            let Recurrence::Cron(expr) = &s.recurrence else { unreachable!() };
            let t = DateTime::from_timestamp(secs, 0).unwrap_or_default();
            let next = s.next_after(t);
            prop_assert!(next.is_some());
            let next = next.unwrap_or_default();
            prop_assert!(next > t);
            let local = next.with_timezone(&tz).naive_local();
            let in_gap_end = !expr.matches(local)
                && !expr.follows_real_time()
                && tz.offset_from_utc_datetime(&(next - Duration::seconds(1)).naive_utc())
                    != tz.offset_from_utc_datetime(&next.naive_utc());
            prop_assert!(expr.matches(local) || in_gap_end, "{} at {}", EXPRS[e], local);
            let later = t + Duration::seconds(delta);
            prop_assert!(s.next_after(later).unwrap_or_default() >= next);
        }

        /// Nothing matches strictly between t and next_after(t) in UTC (no instant skipped).
        #[test]
        fn next_after_skips_nothing_in_utc(e in 0..EXPRS.len(), secs in 1_700_000_000i64..1_900_000_000i64) {
            let s = cron(EXPRS[e], Tz::UTC);
            let Recurrence::Cron(expr) = &s.recurrence else { unreachable!() };
            let t = DateTime::from_timestamp(secs, 0).unwrap_or_default();
            let next = s.next_after(t).unwrap_or_default();
            let span = (next - t).num_seconds().min(200_000);
            for k in 1..span {
                let mid = t + Duration::seconds(k);
                prop_assert!(!expr.matches(mid.naive_utc()), "{} matched {} before {}", EXPRS[e], mid, next);
            }
        }

        /// A union's next instant is the earliest of its entries', strictly later, and no
        /// instant is yielded twice.
        #[test]
        fn a_union_is_the_earliest_of_its_entries(
            picks in proptest::collection::vec((0..EXPRS.len(), 0..ZONES.len()), 1..4),
            secs in 1_700_000_000i64..1_900_000_000i64,
        ) {
            let entries: Vec<Schedule> =
                picks.iter().map(|(e, z)| cron(EXPRS[*e], ZONES[*z].parse().unwrap_or(Tz::UTC))).collect();
            let union = any(entries.clone());
            let t = DateTime::from_timestamp(secs, 0).unwrap_or_default();
            let expected = entries.iter().filter_map(|e| e.next_after(t)).min();
            prop_assert_eq!(union.next_after(t), expected);
            let upcoming = union.upcoming(t, 20);
            prop_assert!(upcoming.windows(2).all(|w| w[0] < w[1]), "strictly increasing: {:?}", upcoming);
        }

        /// Rates never drift: every instant is anchor + k × rate.
        #[test]
        fn rate_instants_are_anchored(rate_s in 10u64..100_000, anchor in 1_700_000_000i64..1_800_000_000, t in 1_600_000_000i64..1_900_000_000) {
            let anchor = DateTime::from_timestamp(anchor, 0).unwrap_or_default();
            let rate = Rate::from_seconds(rate_s);
            let t = DateTime::from_timestamp(t, 0).unwrap_or_default();
            let next = rate.next_after(anchor, t).unwrap_or_default();
            prop_assert!(next > t);
            prop_assert!(next >= anchor);
            prop_assert_eq!((next - anchor).num_seconds() % rate_s as i64, 0);
            prop_assert!(next - Duration::seconds(rate_s as i64) <= t || next == anchor);
        }
    }
}
