//! Business calendars: which days are business days (a week pattern less holidays), the day a
//! holiday moves to, and the N-th or last business day of a month. Pure date maths: a calendar
//! is a value that schedules consult by local date. Calendars stored under a name and shared by
//! jobs are [`crate::named_calendar`]'s.

use chrono::{Datelike, Duration, NaiveDate, Weekday};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The most holiday dates a calendar holds, ranges counted day by day.
pub const MAX_HOLIDAYS: usize = 1000;

/// The longest one holiday range may be, in days.
pub const MAX_RANGE_DAYS: i64 = 366;

/// The most days a search for a business day walks: every holiday on the one business day of a
/// week, in a row. A calendar with no business day within it has none.
const MAX_WALK_DAYS: usize = 7 * (MAX_HOLIDAYS + 1);

/// What a schedule entry's instant does when its date is not a business day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnHoliday {
    /// The instant does not happen.
    #[default]
    Skip,
    /// It happens at the same local time on the next business day.
    NextBusinessDay,
    /// It happens at the same local time on the business day before.
    PreviousBusinessDay,
}

/// A calendar as a schedule entry writes it: its business days and holidays, and what an
/// instant on another date does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CalendarDocument {
    /// A named calendar (`PUT /v1/calendars/{name}`) whose days these are, instead of days of
    /// the entry's own: an edit of the calendar reaches the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The version of the named calendar the job holds a copy of; set by Sundial, never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(read_only))]
    pub version: Option<u64>,
    /// The weekdays that are business days (`mon` … `sun`); default Monday to Friday.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_days: Option<Vec<String>>,
    /// Days that are not business days: dates (`2027-12-24`) or ranges (`{"from": "2027-12-24",
    /// "to": "2027-12-31"}`, at most a year), 1,000 dates at most in all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holidays: Vec<HolidayEntry>,
    /// What an instant on a date that is not a business day does: `skip` (the default),
    /// `next_business_day` or `previous_business_day` (the same local time that day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_holiday: Option<OnHoliday>,
}

/// The longest a calendar's description may be, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 500;

/// What `PUT /v1/calendars/{name}` accepts: a calendar kept under a name, which jobs' schedule
/// entries share ([`crate::named_calendar`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NamedCalendarDocument {
    /// What the calendar is ("NYSE trading days, 2027"), 500 characters at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The IANA zone whose dates the holidays are. A schedule judges a date in its own zone; a
    /// job whose entry runs in another zone is warned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The weekdays that are business days (`mon` … `sun`); default Monday to Friday.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub business_days: Option<Vec<String>>,
    /// Days that are not business days: dates (`2027-12-24`) or ranges (`{"from": "2027-12-24",
    /// "to": "2027-12-31"}`, at most a year), 1,000 dates at most in all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holidays: Vec<HolidayEntry>,
}

/// A holiday: one date, or a range of dates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum HolidayEntry {
    /// `YYYY-MM-DD`.
    Date(String),
    /// From `from` through `to`, both `YYYY-MM-DD`.
    Range { from: String, to: String },
}

/// A calendar's business days: the days of its week pattern that are not holidays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    /// The weekdays that are business days, Monday first (`week[0]` is Monday).
    week: [bool; 7],
    holidays: BTreeSet<NaiveDate>,
}

impl Default for Calendar {
    /// Monday to Friday, no holidays.
    fn default() -> Self {
        Calendar::new(&[Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri], [])
    }
}

impl Calendar {
    /// A calendar whose business days are `days` of each week, less `holidays`.
    pub fn new(days: &[Weekday], holidays: impl IntoIterator<Item = NaiveDate>) -> Self {
        let mut week = [false; 7];
        for day in days {
            week[day.num_days_from_monday() as usize] = true;
        }
        Calendar { week, holidays: holidays.into_iter().collect() }
    }

    /// Whether its week has no business day (so neither has it).
    pub fn is_empty_week(&self) -> bool {
        !self.week.contains(&true)
    }

    /// Whether `date` is a business day.
    pub fn is_business_day(&self, date: NaiveDate) -> bool {
        self.week[date.weekday().num_days_from_monday() as usize] && !self.holidays.contains(&date)
    }

    /// The first business day on or after `date` (`None`: none within the calendar's reach).
    pub fn on_or_after(&self, date: NaiveDate) -> Option<NaiveDate> {
        date.iter_days().take(MAX_WALK_DAYS).find(|d| self.is_business_day(*d))
    }

    /// The last business day on or before `date` (`None`: none within the calendar's reach).
    pub fn on_or_before(&self, date: NaiveDate) -> Option<NaiveDate> {
        let mut day = date;
        for _ in 0..MAX_WALK_DAYS {
            if self.is_business_day(day) {
                return Some(day);
            }
            day = day.pred_opt()?;
        }
        None
    }

    /// The date an instant of `date` happens on under `rule`: `date` itself on a business day;
    /// on another day, none (`skip`) or the nearest business day after or before it.
    pub fn moved(&self, date: NaiveDate, rule: OnHoliday) -> Option<NaiveDate> {
        if self.is_business_day(date) {
            return Some(date);
        }
        match rule {
            OnHoliday::Skip => None,
            OnHoliday::NextBusinessDay => self.on_or_after(date),
            OnHoliday::PreviousBusinessDay => self.on_or_before(date),
        }
    }

    /// The `n`-th business day of the month of `year`/`month` (1 the first; -1 the last, -2 the
    /// one before it), if the month has that many.
    pub fn nth_business_day(&self, year: i32, month: u32, n: i32) -> Option<NaiveDate> {
        let first = NaiveDate::from_ymd_opt(year, month, 1)?;
        let next_month = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
        let last = NaiveDate::from_ymd_opt(next_month.0, next_month.1, 1)?.pred_opt()?;
        let days = first.iter_days().take_while(|d| *d <= last).filter(|d| self.is_business_day(*d));
        match n {
            n if n > 0 => days.clone().nth(usize::try_from(n - 1).ok()?),
            n if n < 0 => {
                let business: Vec<NaiveDate> = days.collect();
                let back = usize::try_from(-n).ok()?;
                business.len().checked_sub(back).map(|i| business[i])
            }
            _ => None,
        }
    }

    /// Whether `date` is the `n`-th business day of its month (see [`Calendar::nth_business_day`]).
    pub fn is_nth_business_day(&self, date: NaiveDate, n: i32) -> bool {
        self.nth_business_day(date.year(), date.month(), n) == Some(date)
    }

    /// The dates from `from` through `to` that are holidays of this calendar.
    pub fn holidays_between(&self, from: NaiveDate, to: NaiveDate) -> impl Iterator<Item = &NaiveDate> {
        self.holidays.range(from..=to)
    }

    /// How many holiday dates it holds.
    pub fn holiday_count(&self) -> usize {
        self.holidays.len()
    }
}

/// The dates of a holiday range, first to last: at most [`MAX_RANGE_DAYS`] (`None`: backwards
/// or longer).
pub fn range_dates(from: NaiveDate, to: NaiveDate) -> Option<Vec<NaiveDate>> {
    let days = (to - from).num_days();
    if !(0..MAX_RANGE_DAYS).contains(&days) {
        return None;
    }
    Some((0..=days).map(|d| from + Duration::days(d)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().expect("a date")
    }

    /// Some US exchange holidays of 2027 (observed dates).
    fn nyse_2027() -> Calendar {
        let holidays = [
            "2027-01-01",
            "2027-01-18",
            "2027-02-15",
            "2027-03-26",
            "2027-05-31",
            "2027-06-18",
            "2027-07-05",
            "2027-09-06",
            "2027-11-25",
            "2027-12-24",
        ];
        Calendar::new(
            &[Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri],
            holidays.map(d),
        )
    }

    #[test]
    fn business_days_are_the_week_pattern_less_holidays() {
        let cal = nyse_2027();
        assert!(!cal.is_business_day(d("2027-01-01")), "a holiday");
        assert!(!cal.is_business_day(d("2027-01-02")), "a Saturday");
        assert!(cal.is_business_day(d("2027-01-04")), "a Monday");
        let sun_thu =
            Calendar::new(&[Weekday::Sun, Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu], []);
        assert!(sun_thu.is_business_day(d("2027-01-03")), "Sunday in a Sunday–Thursday week");
        assert!(!sun_thu.is_business_day(d("2027-01-01")), "Friday");
    }

    /// The oracle table: date, rule, where the instant goes.
    #[test]
    fn a_holiday_is_skipped_or_moved_to_the_nearest_business_day() {
        let cal = nyse_2027();
        let cases = [
            ("2027-01-05", OnHoliday::Skip, Some("2027-01-05")),
            ("2027-01-01", OnHoliday::Skip, None),
            ("2027-01-01", OnHoliday::NextBusinessDay, Some("2027-01-04")),
            ("2027-01-01", OnHoliday::PreviousBusinessDay, Some("2026-12-31")),
            ("2027-11-25", OnHoliday::NextBusinessDay, Some("2027-11-26")),
            ("2027-12-24", OnHoliday::NextBusinessDay, Some("2027-12-27")),
            ("2027-12-25", OnHoliday::PreviousBusinessDay, Some("2027-12-23")),
            ("2027-07-04", OnHoliday::NextBusinessDay, Some("2027-07-06")),
        ];
        for (date, rule, want) in cases {
            assert_eq!(cal.moved(d(date), rule), want.map(d), "{date} {rule:?}");
        }
    }

    #[test]
    fn the_nth_and_last_business_days_of_a_month() {
        let cal = nyse_2027();
        assert_eq!(
            cal.nth_business_day(2027, 1, 1),
            Some(d("2027-01-04")),
            "the 1st is a holiday, then a weekend"
        );
        assert_eq!(cal.nth_business_day(2027, 1, 2), Some(d("2027-01-05")));
        assert_eq!(cal.nth_business_day(2027, 12, -1), Some(d("2027-12-31")));
        assert_eq!(cal.nth_business_day(2027, 12, -2), Some(d("2027-12-30")));
        assert_eq!(cal.nth_business_day(2027, 2, 25), None, "February has fewer");
        assert_eq!(cal.nth_business_day(2027, 2, 0), None);
        let closing = Calendar::new(
            &[Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri],
            [d("2027-04-30")],
        );
        assert_eq!(closing.nth_business_day(2027, 4, -1), Some(d("2027-04-29")), "the last day a holiday");
    }

    #[test]
    fn a_calendar_without_business_days_has_none_to_move_to() {
        let none = Calendar::new(&[], []);
        assert_eq!(none.moved(d("2027-01-01"), OnHoliday::NextBusinessDay), None);
        assert_eq!(none.nth_business_day(2027, 1, -1), None);
        assert_eq!(range_dates(d("2027-01-02"), d("2027-01-01")), None, "backwards");
        assert_eq!(range_dates(d("2027-01-01"), d("2028-01-02")), None, "longer than a year");
        assert_eq!(range_dates(d("2027-12-24"), d("2027-12-26")).map(|r| r.len()), Some(3));
    }
}
