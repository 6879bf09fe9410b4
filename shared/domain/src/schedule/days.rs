//! Which local dates a cron's instants fall on, by a business calendar: business days only (an
//! instant on another day skipped, or moved to the same local time on the nearest business day
//! after or before it), or only the N-th (or last) business day of each month.
//!
//! A moved instant is one instant with any the cron has at that time of that day (a holiday's
//! 09:00 moved to Monday is Monday's 09:00). Moving keeps the local time of day, and the DST
//! policy resolves it on its new date as it would the cron's own.

use super::cron::CronExpr;
use super::zoned::{self, DstPolicy};
use crate::calendar::{Calendar, OnHoliday};
use chrono::TimeZone;
use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use chrono_tz::Tz;
use std::sync::Arc;

/// The most dates one search walks: business days, or candidate days of a month rule (with
/// jumps over the days without instants, two years of them).
const MAX_DAYS_WALKED: usize = 800;

/// The longest run of days that are not business days a calendar can hold: every holiday on
/// the one business day of a week.
const MAX_DAYS_OFF: i64 = 7 * (crate::calendar::MAX_HOLIDAYS as i64 + 1);

/// How far ahead of `after` a DST change that repeats local times is looked for: longer than any
/// change moves local time (Lord Howe's is 30 minutes, most an hour).
const DST_REACH: Duration = Duration::hours(3);

/// Which dates a cron's instants may fall on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DayRule {
    pub calendar: Arc<Calendar>,
    pub select: DaySelect,
}

/// How a [`DayRule`] picks dates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaySelect {
    /// Business days; an instant on another date does as the rule says.
    BusinessDays(OnHoliday),
    /// The N-th business day of each month (1 the first; -1 the last, -2 the one before).
    NthBusinessDay(i32),
}

/// The first instant strictly after `after` at which `expr` fires in `tz` under `dst`, on the
/// dates `rule` allows (moved as it says).
pub fn next_after(
    expr: &CronExpr,
    tz: Tz,
    dst: DstPolicy,
    rule: &DayRule,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let calendar = rule.calendar.as_ref();
    match rule.select {
        DaySelect::BusinessDays(OnHoliday::Skip) => filtered(
            expr,
            tz,
            dst,
            after,
            |date| calendar.is_business_day(date),
            |date| calendar.on_or_after(date.succ_opt()?),
        ),
        DaySelect::NthBusinessDay(n) => filtered(
            expr,
            tz,
            dst,
            after,
            |date| calendar.is_nth_business_day(date, n),
            |date| nth_after(calendar, date, n),
        ),
        DaySelect::BusinessDays(rule) => moved(expr, tz, dst, calendar, rule, after),
    }
}

/// The first date after `date` that is the `n`-th business day of its month.
fn nth_after(calendar: &Calendar, date: NaiveDate, n: i32) -> Option<NaiveDate> {
    let (mut year, mut month) = (date.year(), date.month());
    // Each holiday takes the N-th business day from one month at most.
    for _ in 0..=crate::calendar::MAX_HOLIDAYS + 1 {
        if let Some(day) = calendar.nth_business_day(year, month, n).filter(|d| *d > date) {
            return Some(day);
        }
        (year, month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
    }
    None
}

/// The first instant at or after local time `local` (past a DST gap, the gap's end).
fn at_local(tz: Tz, local: NaiveDateTime) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&local).earliest() {
        Some(t) => Some(t.with_timezone(&Utc)),
        None => zoned::end_of_gap(tz, local),
    }
}

/// The cron's instants on the dates `accept` takes; `next_date` names the next date worth a look
/// after one it does not.
fn filtered(
    expr: &CronExpr,
    tz: Tz,
    dst: DstPolicy,
    after: DateTime<Utc>,
    accept: impl Fn(NaiveDate) -> bool,
    next_date: impl Fn(NaiveDate) -> Option<NaiveDate>,
) -> Option<DateTime<Utc>> {
    let mut from = after;
    for _ in 0..MAX_DAYS_WALKED {
        let candidate = zoned::next_after(expr, tz, dst, from)?;
        let date = zoned::local_time(tz, candidate)?.date();
        if accept(date) {
            return Some(candidate);
        }
        // Just before the next date worth a look begins.
        let start = at_local(tz, next_date(date)?.and_time(NaiveTime::MIN))?;
        from = start.checked_sub_signed(Duration::seconds(1))?.max(candidate);
    }
    None
}

/// The first local time of the cron on `date` later than `after` (`None`: from the start of the
/// day), as the cron writes it (a time a DST gap skips included: moved to another date, it may
/// exist there).
fn first_on(expr: &CronExpr, date: NaiveDate, after: Option<NaiveTime>) -> Option<NaiveTime> {
    let from = match after {
        Some(time) => date.and_time(time).checked_add_signed(Duration::seconds(1))?,
        None => date.and_time(NaiveTime::MIN),
    };
    let next = expr.next_local_at_or_after(from)?;
    (next.date() == date).then_some(next.time())
}

/// The cron's instants with those on other days than business days moved to the nearest one
/// after (`NextBusinessDay`) or before (`PreviousBusinessDay`) at the same local time.
fn moved(
    expr: &CronExpr,
    tz: Tz,
    dst: DstPolicy,
    calendar: &Calendar,
    rule: OnHoliday,
    after: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let now = zoned::local_time(tz, after)?;
    let ahead = after.checked_add_signed(DST_REACH).unwrap_or(after);
    let rewind = (zoned::offset_at(tz, after) - zoned::offset_at(tz, ahead)).max(Duration::zero());
    let forward = rule == OnHoliday::NextBusinessDay;
    let mut day = match forward {
        true => calendar.on_or_after(now.date())?,
        false => calendar.on_or_before(now.date()).or_else(|| calendar.on_or_after(now.date()))?,
    };
    for _ in 0..MAX_DAYS_WALKED {
        // The days whose instants land on `day`: itself, and the days that are not business
        // days next to it (before it when moving forward, after it when moving back).
        let mut best: Option<DateTime<Utc>> = None;
        let mut source = day;
        let mut last_source;
        // On `after`'s own day, the times after its local time, and those a fall-back change
        // just ahead repeats (as `zoned::next_after` rewinds).
        let floor = (day == now.date()).then(|| now.time() - rewind).filter(|f| *f <= now.time());
        loop {
            // The source's first time that lands after `after` (a time the DST policy skips, or
            // whose instants are all before `after`, gives way to the next).
            let mut time = first_on(expr, source, floor);
            while let Some(at) = time {
                let instants = zoned::instants_of(expr, tz, dst, day.and_time(at));
                if let Some(instant) = instants.into_iter().find(|i| *i > after) {
                    best = Some(best.map_or(instant, |b| b.min(instant)));
                    break;
                }
                time = first_on(expr, source, Some(at));
            }
            last_source = source;
            source = if forward { source.pred_opt()? } else { source.succ_opt()? };
            // A run of days off is no longer than the calendar's holidays and a weekend.
            if calendar.is_business_day(source) || (source - day).num_days().abs() > MAX_DAYS_OFF {
                break;
            }
        }
        if best.is_some() {
            return best;
        }
        // Nothing lands on `day`: on to the day the cron's next instant after its days lands on.
        let last = if forward { day } else { last_source };
        let end = at_local(tz, last.succ_opt()?.and_time(NaiveTime::MIN))?
            .checked_sub_signed(Duration::seconds(1))?;
        let next_date = zoned::local_time(tz, zoned::next_after(expr, tz, dst, end)?)?.date();
        let following = calendar.on_or_after(day.succ_opt()?)?;
        day = match forward {
            true => calendar.on_or_after(next_date)?,
            false => calendar.on_or_before(next_date).map_or(following, |d| d.max(following)),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Weekday;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().expect("an RFC 3339 instant")
    }

    fn d(s: &str) -> NaiveDate {
        s.parse().expect("a date")
    }

    /// Some US exchange holidays of 2027 (observed dates).
    fn nyse() -> Arc<Calendar> {
        let holidays = ["2027-01-01", "2027-01-18", "2027-05-31", "2027-07-05", "2027-11-25", "2027-12-24"];
        let week = [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri];
        Arc::new(Calendar::new(&week, holidays.map(d)))
    }

    fn upcoming(cron: &str, tz: Tz, select: DaySelect, from: &str, n: usize) -> Vec<DateTime<Utc>> {
        let expr: CronExpr = cron.parse().expect("a cron");
        let rule = DayRule { calendar: nyse(), select };
        let mut out = Vec::new();
        let mut at = utc(from);
        while out.len() < n {
            let Some(next) = next_after(&expr, tz, DstPolicy::default(), &rule, at) else { break };
            out.push(next);
            at = next;
        }
        out
    }

    /// The oracle table: each case's instants, worked out by hand from the calendar.
    #[test]
    fn business_days_skip_or_move_a_holiday() {
        let ny = Tz::America__New_York;
        // 09:00 New York (14:00 UTC in winter) from Thursday 2026-12-31: Friday the 1st is a
        // holiday, then the weekend.
        let skip =
            upcoming("0 9 * * *", ny, DaySelect::BusinessDays(OnHoliday::Skip), "2026-12-31T00:00:00Z", 3);
        assert_eq!(
            skip,
            [utc("2026-12-31T14:00:00Z"), utc("2027-01-04T14:00:00Z"), utc("2027-01-05T14:00:00Z")]
        );
        // Moved forward: Friday's, Saturday's and Sunday's 09:00 are Monday's 09:00, once.
        let next = upcoming(
            "0 9 * * *",
            ny,
            DaySelect::BusinessDays(OnHoliday::NextBusinessDay),
            "2026-12-31T00:00:00Z",
            3,
        );
        assert_eq!(next, skip, "a daily cron moved onto a day it fires anyway adds nothing");
        // A cron on the 1st only: the holiday's instant moves to Monday the 4th, or back to the 31st.
        let first =
            |rule| upcoming("0 13 1 * *", ny, DaySelect::BusinessDays(rule), "2026-12-15T00:00:00Z", 2);
        assert_eq!(first(OnHoliday::Skip), [utc("2027-02-01T18:00:00Z"), utc("2027-03-01T18:00:00Z")]);
        assert_eq!(
            first(OnHoliday::NextBusinessDay),
            [utc("2027-01-04T18:00:00Z"), utc("2027-02-01T18:00:00Z")]
        );
        assert_eq!(
            first(OnHoliday::PreviousBusinessDay),
            [utc("2026-12-31T18:00:00Z"), utc("2027-02-01T18:00:00Z")]
        );
        // Weekends moved forward: a Saturday-only cron runs on Mondays (Tuesday after Memorial Day).
        let saturday = upcoming(
            "0 10 * * SAT",
            Tz::UTC,
            DaySelect::BusinessDays(OnHoliday::NextBusinessDay),
            "2027-05-28T00:00:00Z",
            2,
        );
        assert_eq!(saturday, [utc("2027-06-01T10:00:00Z"), utc("2027-06-07T10:00:00Z")]);
        // Moved after now on the same day: from Monday 09:30, Saturday's 10:00 is still to come.
        let later = upcoming(
            "0 10 * * SAT",
            Tz::UTC,
            DaySelect::BusinessDays(OnHoliday::NextBusinessDay),
            "2027-06-07T09:30:00Z",
            1,
        );
        assert_eq!(later, [utc("2027-06-07T10:00:00Z")]);
    }

    #[test]
    fn the_nth_and_last_business_day_of_each_month() {
        let ny = Tz::America__New_York;
        let first = upcoming("0 9 * * *", ny, DaySelect::NthBusinessDay(1), "2026-12-15T00:00:00Z", 3);
        assert_eq!(
            first,
            [utc("2027-01-04T14:00:00Z"), utc("2027-02-01T14:00:00Z"), utc("2027-03-01T14:00:00Z")]
        );
        // The last business day at 13:00: December 2027's 31st is a Friday (the 24th the holiday).
        let last = upcoming("0 13 * * *", ny, DaySelect::NthBusinessDay(-1), "2027-11-01T00:00:00Z", 2);
        assert_eq!(last, [utc("2027-11-30T18:00:00Z"), utc("2027-12-31T18:00:00Z")]);
    }

    #[test]
    fn a_moved_local_time_is_resolved_by_the_dst_policy_on_its_new_date() {
        // 02:30 every Sunday in New York, moved forward to Monday: on 2027-03-14, the spring
        // change, 02:30 does not exist, but Monday's 02:30 does (EDT, 06:30 UTC).
        let moved = upcoming(
            "30 2 * * SUN",
            Tz::America__New_York,
            DaySelect::BusinessDays(OnHoliday::NextBusinessDay),
            "2027-03-13T00:00:00Z",
            1,
        );
        assert_eq!(moved, [utc("2027-03-15T06:30:00Z")]);
    }

    /// A sparse week with its business days long on holiday, and an N-th business day that
    /// months lack for years: found far ahead, not given up on.
    #[test]
    fn a_business_day_far_ahead_is_still_found() {
        let saturdays = d("2027-01-02").iter_days().step_by(7).take(150);
        let calendar = Arc::new(Calendar::new(&[Weekday::Sat], saturdays));
        let expr: CronExpr = "0 9 * * *".parse().expect("a cron");
        for select in
            [DaySelect::BusinessDays(OnHoliday::Skip), DaySelect::BusinessDays(OnHoliday::NextBusinessDay)]
        {
            let rule = DayRule { calendar: calendar.clone(), select };
            let next = next_after(&expr, Tz::UTC, DstPolicy::default(), &rule, utc("2027-01-01T00:00:00Z"));
            assert_eq!(next, Some(utc("2029-11-17T09:00:00Z")), "{select:?}");
        }
        // Every month of 2027-2029 loses its 23rd business day (where it has one).
        let week = [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri];
        let plain = Calendar::new(&week, []);
        let months = (2027..2030).flat_map(|y| (1..=12).map(move |m| (y, m)));
        let lost: Vec<NaiveDate> = months.filter_map(|(y, m)| plain.nth_business_day(y, m, 23)).collect();
        let rule =
            DayRule { calendar: Arc::new(Calendar::new(&week, lost)), select: DaySelect::NthBusinessDay(23) };
        let next = next_after(&expr, Tz::UTC, DstPolicy::default(), &rule, utc("2027-01-01T00:00:00Z"));
        assert_eq!(next, Some(utc("2030-01-31T09:00:00Z")));
    }

    /// The search agrees with a brute force over every local time the cron writes: each moved
    /// to the date the rule gives (or kept if the rule takes its date), resolved by the DST
    /// policy there, each instant once.
    mod against_brute_force {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeSet;

        fn brute(
            expr: &CronExpr,
            tz: Tz,
            rule: &DayRule,
            from: NaiveDateTime,
            to: NaiveDateTime,
        ) -> BTreeSet<DateTime<Utc>> {
            let mut out = BTreeSet::new();
            let mut cursor = from;
            while let Some(local) = expr.next_local_at_or_after(cursor).filter(|l| *l < to) {
                let date = match rule.select {
                    DaySelect::BusinessDays(on) => rule.calendar.moved(local.date(), on),
                    DaySelect::NthBusinessDay(n) => {
                        Some(local.date()).filter(|d| rule.calendar.is_nth_business_day(*d, n))
                    }
                };
                if let Some(date) = date {
                    out.extend(zoned::instants_of(
                        expr,
                        tz,
                        DstPolicy::default(),
                        date.and_time(local.time()),
                    ));
                }
                cursor = local + Duration::seconds(1);
            }
            out
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            #[test]
            fn the_search_matches(
                cron in prop::sample::select(vec!["0 9 * * *", "30 2 * * *", "0 13 1 * *", "0 10 * * SAT", "15 */6 * * *", "0 9 * * MON-FRI", "0 0 28-31 * *", "0 * * * *", "30 * * * *", "0 0 * * *"]),
                zone in prop::sample::select(vec![
                    Tz::UTC, Tz::America__New_York, Tz::Australia__Lord_Howe, Tz::Africa__Cairo,
                    Tz::Asia__Jerusalem, Tz::Europe__London, Tz::America__Santiago, Tz::Asia__Beirut,
                ]),
                select in prop::sample::select(vec![
                    DaySelect::BusinessDays(OnHoliday::Skip),
                    DaySelect::BusinessDays(OnHoliday::NextBusinessDay),
                    DaySelect::BusinessDays(OnHoliday::PreviousBusinessDay),
                    DaySelect::NthBusinessDay(1),
                    DaySelect::NthBusinessDay(3),
                    DaySelect::NthBusinessDay(-1),
                ]),
                week in prop::sample::select(vec![
                    vec![Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri],
                    vec![Weekday::Sun, Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu],
                    vec![Weekday::Sat],
                ]),
                start_day in 0i64..3000,
                start_second in 0i64..86_400,
                holidays in prop::collection::vec((0i64..3100, 1i64..6), 0..40),
            ) {
                let base = d("2018-01-01");
                // Holidays in runs of one to five days.
                let days = holidays.iter().flat_map(|(from, len)| (0..*len).map(move |i| base + Duration::days(from + i)));
                let calendar = Arc::new(Calendar::new(&week, days));
                let rule = DayRule { calendar, select };
                let expr: CronExpr = cron.parse().expect("a cron");
                let from = (base + Duration::days(start_day)).and_time(NaiveTime::MIN);
                let expected = brute(&expr, zone, &rule, from, from + Duration::days(90));
                // Compare well inside the window: sources outside it move in by days at most.
                let (lo, hi) = (from + Duration::days(30) + Duration::seconds(start_second), from + Duration::days(60));
                let lo_utc = at_local(zone, lo).expect("a local time");
                let hi_utc = at_local(zone, hi).expect("a local time");
                let want: Vec<_> = expected.into_iter().filter(|t| *t > lo_utc && *t < hi_utc).collect();
                let mut got = Vec::new();
                let mut at = lo_utc;
                while let Some(next) = next_after(&expr, zone, DstPolicy::default(), &rule, at).filter(|t| *t < hi_utc) {
                    got.push(next);
                    at = next;
                }
                prop_assert_eq!(got, want);
            }
        }
    }
}
