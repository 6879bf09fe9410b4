//! Cron in a time zone: mapping matching local times onto real instants across DST changes.
//!
//! The design's rule, decided once here:
//! - a fixed local time skipped by a DST change fires once, at the end of the gap (02:30 on a
//!   02:00→03:00 night fires at 03:00);
//! - a fixed local time that occurs twice fires once, at its first occurrence;
//! - a job whose hour field is `*` (or a step over all hours) follows real time: it fires in both
//!   passes of a repeated hour and has no instants in a skipped one (as cronie does).

use super::cron::CronExpr;
use chrono::{DateTime, Datelike, Duration, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

/// The largest DST shift looked for around an instant (real zones shift by at most 2 hours).
const MAX_SHIFT: Duration = Duration::hours(3);

fn offset_at(tz: Tz, t: DateTime<Utc>) -> Duration {
    Duration::seconds(i64::from(tz.offset_from_utc_datetime(&t.naive_utc()).fix().local_minus_utc()))
}

/// The local time of `t` in `tz`; `None` past either end of chrono's range (where
/// `naive_local` would panic).
fn local_time(tz: Tz, t: DateTime<Utc>) -> Option<NaiveDateTime> {
    t.naive_utc().checked_add_offset(tz.offset_from_utc_datetime(&t.naive_utc()).fix())
}

/// The instant at which local wall-clock time jumps over `gap_time`, a local time that does not
/// exist: the first instant whose local time is later than `gap_time`.
fn end_of_gap(tz: Tz, gap_time: NaiveDateTime) -> Option<DateTime<Utc>> {
    // Local time is monotone in real time around a gap, so bisect on whole seconds.
    let mut lo = gap_time.and_utc().checked_sub_signed(Duration::hours(15))?;
    let mut hi = gap_time.and_utc().checked_add_signed(Duration::hours(15))?;
    if local_time(tz, hi)? <= gap_time || local_time(tz, lo)? > gap_time {
        return None;
    }
    while hi - lo > Duration::seconds(1) {
        // Half the span in whole seconds: halving a Duration would leave fractions of a
        // second, and the end of a gap would not be a whole second.
        let mid = lo + Duration::seconds((hi - lo).num_seconds() / 2);
        if local_time(tz, mid)? > gap_time { hi = mid } else { lo = mid }
    }
    Some(hi)
}

/// The real instants a matching local time stands for under the DST rule, earliest first.
fn instants_of(expr: &CronExpr, tz: Tz, local: NaiveDateTime) -> Vec<DateTime<Utc>> {
    match tz.from_local_datetime(&local) {
        LocalResult::Single(t) => vec![t.with_timezone(&Utc)],
        LocalResult::Ambiguous(first, second) => {
            if expr.follows_real_time() {
                vec![first.with_timezone(&Utc), second.with_timezone(&Utc)]
            } else {
                vec![first.with_timezone(&Utc)]
            }
        }
        LocalResult::None => {
            if expr.follows_real_time() {
                vec![]
            } else {
                end_of_gap(tz, local).into_iter().collect()
            }
        }
    }
}

/// The first instant strictly after `after` at which `expr` fires in `tz`. `None` when there
/// is none within the search horizon or before the end of chrono's range (year 262142).
pub fn next_after(expr: &CronExpr, tz: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    // Ahead of a fall-back change, local times already passed come round again: start the walk
    // that much earlier. Elsewhere local order is real order and the first hit is the answer.
    let ahead = after.checked_add_signed(MAX_SHIFT).unwrap_or(DateTime::<Utc>::MAX_UTC);
    let rewind = (offset_at(tz, after) - offset_at(tz, ahead)).max(Duration::zero());
    let mut cursor = match local_time(tz, after) {
        Some(local) => local.checked_sub_signed(rewind).unwrap_or(NaiveDateTime::MIN),
        // Local time past the end of chrono's range: no later local time can be written.
        None if after.year() > 0 => return None,
        // Local time before its start: every local time that can be written is later.
        None => NaiveDateTime::MIN,
    };
    let mut best: Option<DateTime<Utc>> = None;
    loop {
        let Some(local) = expr.next_local_at_or_after(cursor) else {
            return best;
        };
        if let Some(b) = best {
            // Past this point no local time maps to an instant before `best`.
            match local_time(tz, b).and_then(|b| b.checked_add_signed(rewind)) {
                Some(last) if local <= last => {}
                _ => return best,
            }
        }
        for instant in instants_of(expr, tz, local) {
            if instant > after && best.is_none_or(|b| instant < b) {
                best = Some(instant);
            }
        }
        if best.is_some() && rewind.is_zero() {
            return best;
        }
        cursor = match local.checked_add_signed(Duration::seconds(1)) {
            Some(next) => next,
            None => return best,
        };
    }
}

#[cfg(test)]
mod tests {
    //! The DST decision table: each row is a zone, an expression, a starting instant and the
    //! instants that must follow, in UTC.
    use super::*;

    fn fires(expr: &str, zone: &str, from: &str, n: usize) -> Vec<String> {
        let (Ok(expr), Ok(tz), Ok(from)) =
            (expr.parse::<CronExpr>(), zone.parse::<Tz>(), from.parse::<DateTime<Utc>>())
        else {
            return vec!["bad test input".into()];
        };
        let mut out = Vec::new();
        let mut t = from;
        while out.len() < n {
            let Some(next) = next_after(&expr, tz, t) else {
                break;
            };
            out.push(format!("{}", next.with_timezone(&tz).format("%Y-%m-%d %H:%M:%S%:z")));
            t = next;
        }
        out
    }

    const NY: &str = "America/New_York";

    #[test]
    fn new_york_spring_forward_fixed_0230_fires_at_end_of_gap() {
        assert_eq!(
            fires("30 2 * * *", NY, "2026-03-07T00:00:00Z", 3),
            ["2026-03-07 02:30:00-05:00", "2026-03-08 03:00:00-04:00", "2026-03-09 02:30:00-04:00"]
        );
    }

    #[test]
    fn the_end_of_a_gap_is_a_whole_second() {
        let tz: Tz = NY.parse().unwrap();
        let expr: CronExpr = "30 2 * * *".parse().unwrap();
        let next = next_after(&expr, tz, "2026-03-08T06:59:59Z".parse().unwrap()).unwrap();
        assert_eq!(next, "2026-03-08T07:00:00Z".parse::<DateTime<Utc>>().unwrap());
    }

    #[test]
    fn new_york_spring_forward_fixed_0130_is_unaffected() {
        assert_eq!(
            fires("30 1 * * *", NY, "2026-03-07T12:00:00Z", 2),
            ["2026-03-08 01:30:00-05:00", "2026-03-09 01:30:00-04:00"]
        );
    }

    #[test]
    fn new_york_spring_forward_star_hour_skips_the_missing_hour() {
        assert_eq!(
            fires("30 * * * *", NY, "2026-03-08T05:00:00Z", 3),
            ["2026-03-08 00:30:00-05:00", "2026-03-08 01:30:00-05:00", "2026-03-08 03:30:00-04:00"]
        );
    }

    #[test]
    fn new_york_fall_back_fixed_0130_fires_once_at_first_occurrence() {
        assert_eq!(
            fires("30 1 * * *", NY, "2026-10-31T12:00:00Z", 2),
            ["2026-11-01 01:30:00-04:00", "2026-11-02 01:30:00-05:00"]
        );
    }

    #[test]
    fn new_york_fall_back_fixed_0230_is_unaffected() {
        assert_eq!(
            fires("30 2 * * *", NY, "2026-10-31T12:00:00Z", 2),
            ["2026-11-01 02:30:00-05:00", "2026-11-02 02:30:00-05:00"]
        );
    }

    #[test]
    fn new_york_fall_back_star_hour_fires_in_both_passes() {
        assert_eq!(
            fires("30 * * * *", NY, "2026-11-01T04:00:00Z", 4),
            [
                "2026-11-01 00:30:00-04:00",
                "2026-11-01 01:30:00-04:00",
                "2026-11-01 01:30:00-05:00",
                "2026-11-01 02:30:00-05:00"
            ]
        );
    }

    #[test]
    fn fall_back_from_inside_the_first_pass_still_finds_the_second() {
        // 01:40 EDT: the next `:30` in real time is 01:30 EST, fifty minutes later.
        assert_eq!(fires("30 * * * *", NY, "2026-11-01T05:40:00Z", 1), ["2026-11-01 01:30:00-05:00"]);
    }

    #[test]
    fn several_gap_times_collapse_into_one_instant() {
        assert_eq!(
            fires("0,20,40 2 * * *", NY, "2026-03-08T06:00:00Z", 2),
            ["2026-03-08 03:00:00-04:00", "2026-03-09 02:00:00-04:00"]
        );
    }

    #[test]
    fn london_spring_forward_and_fall_back() {
        assert_eq!(
            fires("30 1 * * *", "Europe/London", "2026-03-28T12:00:00Z", 2),
            ["2026-03-29 02:00:00+01:00", "2026-03-30 01:30:00+01:00"]
        );
        assert_eq!(
            fires("30 1 * * *", "Europe/London", "2026-10-24T12:00:00Z", 2),
            ["2026-10-25 01:30:00+01:00", "2026-10-26 01:30:00+00:00"]
        );
        assert_eq!(
            fires("15 * * * *", "Europe/London", "2026-10-24T23:30:00Z", 3),
            ["2026-10-25 01:15:00+01:00", "2026-10-25 01:15:00+00:00", "2026-10-25 02:15:00+00:00"]
        );
    }

    #[test]
    fn lord_howe_half_hour_shift() {
        // 2026-10-04 02:00 +10:30 → 02:30 +11:00: 02:15 is skipped and fires at 02:30.
        assert_eq!(
            fires("15 2 * * *", "Australia/Lord_Howe", "2026-10-03T00:00:00Z", 2),
            ["2026-10-04 02:30:00+11:00", "2026-10-05 02:15:00+11:00"]
        );
        // 2026-04-05 02:00 +11:00 → 01:30 +10:30: 01:45 occurs twice and fires once.
        assert_eq!(
            fires("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T00:00:00Z", 2),
            ["2026-04-05 01:45:00+11:00", "2026-04-06 01:45:00+10:30"]
        );
        // Real time: `*/15` over the repeated half hour fires in both passes.
        assert_eq!(
            fires("*/15 * * * *", "Australia/Lord_Howe", "2026-04-04T14:20:00Z", 5),
            [
                "2026-04-05 01:30:00+11:00",
                "2026-04-05 01:45:00+11:00",
                "2026-04-05 01:30:00+10:30",
                "2026-04-05 01:45:00+10:30",
                "2026-04-05 02:00:00+10:30"
            ]
        );
    }

    #[test]
    fn utc_has_no_surprises() {
        assert_eq!(
            fires("0 0 * * *", "UTC", "2026-03-08T00:00:00Z", 2),
            ["2026-03-09 00:00:00+00:00", "2026-03-10 00:00:00+00:00"]
        );
    }
}
