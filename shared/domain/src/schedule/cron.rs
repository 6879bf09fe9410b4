//! Cron expressions: parsing and wall-clock matching.
//!
//! Owns the syntax of the design's "Time semantics": 5 fields (minute hour day-of-month month
//! day-of-week) or 6 with a leading seconds field; the macros `@hourly`, `@daily`, `@weekly`,
//! `@monthly`, `@yearly`; month and day names; lists, ranges and steps. Matching follows Vixie
//! cron: when both day fields are restricted either may match, and a field that starts with `*`
//! (also `*/N`) counts as unrestricted.
//!
//! This module knows nothing of time zones: it finds the next matching *local* (naive) time.
//! Mapping local times onto real instants, DST included, is `schedule::zoned`'s job.

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use std::fmt;
use std::str::FromStr;

/// Why a cron expression was rejected. The message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CronError(String);

/// How many years ahead the matcher searches before deciding an expression never matches
/// (`0 0 29 2 *` needs up to 8 between leap years around a century).
const SEARCH_YEARS: i32 = 9;

/// A parsed cron expression.
#[derive(Clone, PartialEq, Eq)]
pub struct CronExpr {
    seconds: u64,
    minutes: u64,
    hours: u32,
    days_of_month: u32,
    months: u16,
    days_of_week: u8,
    dom_restricted: bool,
    dow_restricted: bool,
    hour_restricted: bool,
    source: String,
}

impl fmt::Debug for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CronExpr({:?})", self.source)
    }
}

impl fmt::Display for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const SECOND: FieldSpec = FieldSpec { name: "second", min: 0, max: 59, names: &[] };
const MINUTE: FieldSpec = FieldSpec { name: "minute", min: 0, max: 59, names: &[] };
const HOUR: FieldSpec = FieldSpec { name: "hour", min: 0, max: 23, names: &[] };
const DAY_OF_MONTH: FieldSpec = FieldSpec { name: "day-of-month", min: 1, max: 31, names: &[] };
const MONTH: FieldSpec = FieldSpec {
    name: "month",
    min: 1,
    max: 12,
    names: &["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"],
};
// 7 is accepted as a second name for Sunday and folded onto 0 after parsing.
const DAY_OF_WEEK: FieldSpec = FieldSpec {
    name: "day-of-week",
    min: 0,
    max: 7,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
};

/// One parsed field: the set of values as a bit mask, and whether it restricts anything.
struct Field {
    bits: u64,
    restricted: bool,
}

impl FieldSpec {
    fn value(&self, token: &str) -> Result<u32, CronError> {
        if let Some(pos) = self.names.iter().position(|n| n.eq_ignore_ascii_case(token)) {
            return Ok(pos as u32 + if self.min == 1 { 1 } else { 0 });
        }
        let v: u32 = match token.parse() {
            Ok(v) => v,
            // Digits too many for a u32 are a number out of range, not a stranger.
            Err(_) if is_digits(token) => {
                return Err(CronError(format!(
                    "{} field: {token} is outside {}-{}",
                    self.name, self.min, self.max
                )));
            }
            Err(_) => {
                return Err(CronError(format!("{} field: `{token}` is not a number or a name", self.name)));
            }
        };
        if v < self.min || v > self.max {
            return Err(CronError(format!("{} field: {v} is outside {}-{}", self.name, self.min, self.max)));
        }
        Ok(v)
    }

    fn parse(&self, text: &str) -> Result<Field, CronError> {
        let restricted = !(text.starts_with('*') || text == "?");
        let mut bits = 0u64;
        for item in text.split(',') {
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => {
                    let step: u32 = match s.parse() {
                        Ok(step) if step > 0 => step,
                        Err(_) if is_digits(s) && s.bytes().any(|b| b != b'0') => {
                            return Err(CronError(format!("{} field: step `{s}` is too large", self.name)));
                        }
                        _ => {
                            return Err(CronError(format!(
                                "{} field: step `{s}` must be a positive number",
                                self.name
                            )));
                        }
                    };
                    (r, step)
                }
                None => (item, 1),
            };
            let (lo, hi) = if range == "*" || range == "?" {
                (self.min, self.max)
            } else if let Some((a, b)) = range.split_once('-') {
                if a.is_empty() || b.is_empty() {
                    return Err(CronError(format!(
                        "{} field: range `{range}` needs a start and an end (no negative numbers)",
                        self.name
                    )));
                }
                let (a, b) = (self.value(a)?, self.value(b)?);
                if a > b {
                    return Err(CronError(format!("{} field: range `{range}` runs backwards", self.name)));
                }
                (a, b)
            } else if range.is_empty() {
                return Err(CronError(format!("{} field: empty list item", self.name)));
            } else {
                let a = self.value(range)?;
                // Vixie: `a/N` means from a to the end of the range in steps of N.
                if item.contains('/') { (a, self.max) } else { (a, a) }
            };
            // lo <= hi <= 59 here; a step past the end (up to u32::MAX) leaves only `lo`.
            let mut v = lo;
            loop {
                bits |= 1 << v;
                match v.checked_add(step) {
                    Some(next) if next <= hi => v = next,
                    _ => break,
                }
            }
        }
        Ok(Field { bits, restricted })
    }
}

/// Whether `text` is one or more ASCII digits (a whole number, however large).
fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

fn macro_expansion(text: &str) -> Option<&'static str> {
    Some(match text.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return None,
    })
}

impl FromStr for CronExpr {
    type Err = CronError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let source = text.trim().to_string();
        let expanded = if source.starts_with('@') {
            macro_expansion(&source).ok_or_else(|| CronError(format!("unknown macro `{source}`")))?
        } else {
            source.as_str()
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let (sec, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            n => {
                return Err(CronError(format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with a leading second, got {n}"
                )));
            }
        };
        let seconds = SECOND.parse(sec)?;
        let minutes = MINUTE.parse(rest[0])?;
        let hours = HOUR.parse(rest[1])?;
        let dom = DAY_OF_MONTH.parse(rest[2])?;
        let months = MONTH.parse(rest[3])?;
        let mut dow = DAY_OF_WEEK.parse(rest[4])?;
        if dow.bits & (1 << 7) != 0 {
            dow.bits = (dow.bits & !(1 << 7)) | 1;
        }
        Ok(CronExpr {
            seconds: seconds.bits,
            minutes: minutes.bits,
            hours: hours.bits as u32,
            days_of_month: dom.bits as u32,
            months: months.bits as u16,
            days_of_week: dow.bits as u8,
            dom_restricted: dom.restricted,
            dow_restricted: dow.restricted,
            hour_restricted: hours.restricted,
            source,
        })
    }
}

/// The smallest set bit of `bits` at or above `from`, if any.
fn next_bit(bits: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let masked = bits & (u64::MAX << from);
    (masked != 0).then(|| masked.trailing_zeros())
}

impl CronExpr {
    /// True when the hour field is `*` or a step over all hours: such a job follows real time
    /// across DST changes instead of a fixed local hour.
    pub fn follows_real_time(&self) -> bool {
        !self.hour_restricted
    }

    /// The matching seconds of a minute, in order.
    pub fn seconds(&self) -> impl Iterator<Item = u32> + '_ {
        (0..60).filter(|s| self.seconds & (1 << s) != 0)
    }

    /// The most instants the expression can have in one local day: its seconds × minutes ×
    /// hours, and one more hour's worth for a fall-back night that repeats an hour.
    pub fn max_per_day(&self) -> u64 {
        let per_hour = u64::from(self.seconds.count_ones()) * u64::from(self.minutes.count_ones());
        per_hour * (u64::from(self.hours.count_ones()) + 1)
    }

    /// Whether the minute `m` (0–59) matches.
    pub fn minute_matches(&self, m: u32) -> bool {
        self.minutes & (1 << m) != 0
    }

    /// Whether a calendar day matches the month and day fields (Vixie's either-day rule).
    pub fn date_matches(&self, date: NaiveDate) -> bool {
        if self.months & (1 << date.month()) == 0 {
            return false;
        }
        let dom = self.days_of_month & (1 << date.day()) != 0;
        let dow = self.days_of_week & (1 << date.weekday().num_days_from_sunday()) != 0;
        if self.dom_restricted && self.dow_restricted { dom || dow } else { dom && dow }
    }

    /// Whether a local time matches every field.
    pub fn matches(&self, t: NaiveDateTime) -> bool {
        self.date_matches(t.date())
            && self.hours & (1 << t.hour()) != 0
            && self.minute_matches(t.minute())
            && self.seconds & (1 << t.second()) != 0
    }

    /// The first local time at or after `from` (rounded up to a whole second) that matches, or
    /// `None` if there is none within the search horizon (or before the end of chrono's range).
    pub fn next_local_at_or_after(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut t = from.with_nanosecond(0)?;
        if from.nanosecond() > 0 {
            t = t.checked_add_signed(Duration::seconds(1))?;
        }
        let horizon = from.year() + SEARCH_YEARS;
        while t.year() <= horizon {
            let date = t.date();
            if !self.date_matches(date) {
                t = date.succ_opt()?.and_time(NaiveTime::MIN);
                continue;
            }
            let Some(hour) = next_bit(u64::from(self.hours), t.hour()) else {
                t = date.succ_opt()?.and_time(NaiveTime::MIN);
                continue;
            };
            if hour != t.hour() {
                t = date.and_hms_opt(hour, 0, 0)?;
            }
            let Some(minute) = next_bit(self.minutes, t.minute()) else {
                t = date.and_hms_opt(t.hour(), 0, 0)?.checked_add_signed(Duration::hours(1))?;
                continue;
            };
            if minute != t.minute() {
                t = date.and_hms_opt(t.hour(), minute, 0)?;
            }
            let Some(second) = next_bit(self.seconds, t.second()) else {
                t = date.and_hms_opt(t.hour(), t.minute(), 0)?.checked_add_signed(Duration::minutes(1))?;
                continue;
            };
            return date.and_hms_opt(t.hour(), t.minute(), second);
        }
        None
    }

    /// The shortest possible gap, in seconds, between two consecutive instants: used to enforce
    /// the minimum interval. Conservative: a wrap from the last second of one minute to the first
    /// of the next counts whenever two consecutive minutes match.
    pub fn min_gap_seconds(&self) -> u32 {
        let secs: Vec<u32> = self.seconds().collect();
        let mut gap = secs.windows(2).map(|w| w[1] - w[0]).min().unwrap_or(u32::MAX);
        let consecutive_minutes =
            (0..60).any(|m| self.minute_matches(m) && self.minute_matches((m + 1) % 60));
        if let (Some(first), Some(last)) = (secs.first(), secs.last()) {
            if consecutive_minutes {
                gap = gap.min(60 - last + first);
            } else {
                gap = gap.min(60);
            }
        }
        gap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap()
    }

    fn next(expr: &str, from: &str) -> Option<String> {
        let e: CronExpr = expr.parse().ok()?;
        e.next_local_at_or_after(local(from)).map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
    }

    #[test]
    fn five_fields_fire_at_second_zero() {
        assert_eq!(next("30 2 * * *", "2026-01-01 00:00:00").as_deref(), Some("2026-01-01 02:30:00"));
        assert_eq!(next("30 2 * * *", "2026-01-01 02:30:01").as_deref(), Some("2026-01-02 02:30:00"));
    }

    #[test]
    fn six_fields_have_a_leading_seconds_field() {
        assert_eq!(next("*/15 * * * * *", "2026-01-01 00:00:01").as_deref(), Some("2026-01-01 00:00:15"));
        assert_eq!(next("10 0 0 * * *", "2026-01-01 00:00:11").as_deref(), Some("2026-01-02 00:00:10"));
    }

    #[test]
    fn macros_expand() {
        assert_eq!(next("@hourly", "2026-01-01 00:00:01").as_deref(), Some("2026-01-01 01:00:00"));
        assert_eq!(next("@daily", "2026-01-01 00:00:01").as_deref(), Some("2026-01-02 00:00:00"));
        assert_eq!(next("@weekly", "2026-01-01 00:00:00").as_deref(), Some("2026-01-04 00:00:00"));
        assert_eq!(next("@monthly", "2026-01-01 00:00:01").as_deref(), Some("2026-02-01 00:00:00"));
        assert_eq!(next("@yearly", "2026-01-01 00:00:01").as_deref(), Some("2027-01-01 00:00:00"));
        assert_eq!(next("@annually", "2026-01-01 00:00:01").as_deref(), Some("2027-01-01 00:00:00"));
    }

    #[test]
    fn names_are_case_insensitive_and_sunday_is_0_or_7() {
        assert_eq!(next("0 9 * jan-mar mon", "2026-04-01 00:00:00").as_deref(), Some("2027-01-04 09:00:00"));
        assert_eq!(next("0 0 * * 7", "2026-01-01 00:00:00").as_deref(), Some("2026-01-04 00:00:00"));
        assert_eq!(next("0 0 * * SUN", "2026-01-01 00:00:00").as_deref(), Some("2026-01-04 00:00:00"));
        assert_eq!(next("0 0 * * FRI-SAT", "2026-01-01 00:00:00").as_deref(), Some("2026-01-02 00:00:00"));
    }

    #[test]
    fn vixie_day_rule_either_day_when_both_restricted() {
        // 2026-01-01 is a Thursday; the 13th or any Monday.
        assert_eq!(next("0 0 13 * 1", "2026-01-01 00:00:01").as_deref(), Some("2026-01-05 00:00:00"));
        // A day field starting with `*` is unrestricted: then both must match (every Monday).
        assert_eq!(next("0 0 */1 * 1", "2026-01-01 00:00:01").as_deref(), Some("2026-01-05 00:00:00"));
        assert_eq!(next("0 0 13 * */1", "2026-01-01 00:00:01").as_deref(), Some("2026-01-13 00:00:00"));
    }

    #[test]
    fn steps_and_ranges() {
        assert_eq!(next("5/20 * * * *", "2026-01-01 00:06:00").as_deref(), Some("2026-01-01 00:25:00"));
        assert_eq!(next("0 1-5/2 * * *", "2026-01-01 01:00:01").as_deref(), Some("2026-01-01 03:00:00"));
        assert_eq!(next("0,30 * * * *", "2026-01-01 00:00:01").as_deref(), Some("2026-01-01 00:30:00"));
    }

    #[test]
    fn steps_past_the_end_of_u32_leave_only_the_start() {
        // `v + step` once overflowed here: in debug a panic, in release minute 0 joined the field.
        assert_eq!(
            next("1/4294967295 * * * *", "2026-01-01 00:00:00").as_deref(),
            Some("2026-01-01 00:01:00")
        );
        assert_eq!(
            next("5-10/4294967291 0 * * *", "2026-01-01 00:00:00").as_deref(),
            Some("2026-01-01 00:05:00")
        );
        assert_eq!(
            next("0 0 */4294967295 * *", "2026-01-02 00:00:00").as_deref(),
            Some("2026-02-01 00:00:00")
        );
    }

    #[test]
    fn the_end_of_time_has_no_next_match() {
        assert_eq!(
            CronExpr::from_str("* * * * * *").ok().and_then(|e| e.next_local_at_or_after(NaiveDateTime::MAX)),
            None
        );
        assert_eq!(
            CronExpr::from_str("0 0 1 1 *").ok().and_then(|e| e.next_local_at_or_after(NaiveDateTime::MAX)),
            None
        );
    }

    #[test]
    fn leap_day_is_found_years_ahead() {
        assert_eq!(next("0 0 29 2 *", "2097-03-01 00:00:00").as_deref(), Some("2104-02-29 00:00:00"));
    }

    #[test]
    fn impossible_dates_never_match() {
        assert_eq!(next("0 0 30 2 *", "2026-01-01 00:00:00"), None);
        assert_eq!(next("0 0 31 4,6,9,11 *", "2026-01-01 00:00:00"), None);
    }

    #[test]
    fn bad_expressions_name_the_field() {
        let cases = [
            ("* * * *", "expected 5 fields"),
            ("60 * * * *", "minute field"),
            ("* 24 * * *", "hour field"),
            ("* * 0 * *", "day-of-month field"),
            ("* * * 13 *", "month field"),
            ("* * * * 8", "day-of-week field"),
            ("* * * FOO *", "month field"),
            ("*/0 * * * *", "step"),
            ("5-1 * * * *", "backwards"),
            ("@sometimes", "unknown macro"),
            ("1,,2 * * * *", "empty list item"),
            ("4294967296 * * * *", "minute field: 4294967296 is outside 0-59"),
            ("* 18446744073709551616 * * *", "hour field: 18446744073709551616 is outside 0-23"),
            ("*/4294967296 * * * *", "minute field: step `4294967296` is too large"),
            ("*/000 * * * *", "must be a positive number"),
            ("-1 * * * *", "minute field: range `-1` needs a start and an end"),
        ];
        for (expr, want) in cases {
            let err = expr.parse::<CronExpr>().err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains(want), "{expr}: {err:?} should mention {want:?}");
        }
    }

    #[test]
    fn hour_wildcard_means_real_time() {
        assert!("30 * * * *".parse::<CronExpr>().map(|e| e.follows_real_time()).unwrap_or(false));
        assert!("0 */2 * * *".parse::<CronExpr>().map(|e| e.follows_real_time()).unwrap_or(false));
        assert!(!"30 2 * * *".parse::<CronExpr>().map(|e| e.follows_real_time()).unwrap_or(true));
    }

    #[test]
    fn min_gap() {
        let gap = |e: &str| e.parse::<CronExpr>().map(|e| e.min_gap_seconds()).unwrap_or(0);
        assert_eq!(gap("* * * * *"), 60);
        assert_eq!(gap("*/5 * * * * *"), 5);
        assert_eq!(gap("0,55 0 * * * *"), 55);
        assert_eq!(gap("0,55 * * * * *"), 5);
        assert_eq!(gap("0 0 * * *"), 60);
    }
}
