//! Rate expressions: `"N seconds|minutes|hours|days"`, evaluated without drift from an anchor.

use chrono::{DateTime, Duration, Utc};
use std::fmt;
use std::str::FromStr;

/// A fixed interval between instants, in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate(u64);

/// Why a rate expression was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RateError(String);

/// The longest rate: a year, leap day included.
pub const MAX_SECONDS: u64 = 366 * 86_400;

impl Rate {
    /// A rate of `seconds`, clamped to 1 s..=[`MAX_SECONDS`] (what the parser accepts).
    pub fn from_seconds(seconds: u64) -> Self {
        Rate(seconds.clamp(1, MAX_SECONDS))
    }

    pub fn seconds(self) -> u64 {
        self.0
    }

    /// The first instant anchor + k × rate (k ≥ 0) strictly after `t`; `None` past the end of
    /// chrono's range.
    pub fn next_after(self, anchor: DateTime<Utc>, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if t < anchor {
            return Some(anchor);
        }
        let step = i64::try_from(self.0).ok()?;
        let elapsed = (t - anchor).num_seconds();
        let offset = (elapsed / step).checked_add(1)?.checked_mul(step)?;
        anchor.checked_add_signed(Duration::try_seconds(offset)?)
    }
}

impl FromStr for Rate {
    type Err = RateError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut parts = text.split_whitespace();
        let (Some(n), Some(unit), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(RateError(format!(
                "`{text}` is not `N seconds|minutes|hours|days` (for example \"5 minutes\")"
            )));
        };
        let n: u64 = n
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| RateError(format!("`{n}` is not a positive whole number")))?;
        let unit_s = match unit.to_ascii_lowercase().trim_end_matches('s') {
            "second" => 1,
            "minute" => 60,
            "hour" => 3_600,
            "day" => 86_400,
            _ => {
                return Err(RateError(format!("unit `{unit}` is not one of seconds, minutes, hours, days")));
            }
        };
        n.checked_mul(unit_s)
            .filter(|s| *s <= MAX_SECONDS)
            .map(Rate)
            .ok_or_else(|| RateError(format!("`{text}` is longer than a year")))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, unit) = match self.0 {
            s if s % 86_400 == 0 => (s / 86_400, "day"),
            s if s % 3_600 == 0 => (s / 3_600, "hour"),
            s if s % 60 == 0 => (s / 60, "minute"),
            s => (s, "second"),
        };
        write!(f, "{n} {unit}{}", if n == 1 { "" } else { "s" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_singular_and_plural() {
        assert_eq!("5 minutes".parse::<Rate>(), Ok(Rate(300)));
        assert_eq!("1 minute".parse::<Rate>(), Ok(Rate(60)));
        assert_eq!("2 Hours".parse::<Rate>(), Ok(Rate(7_200)));
        assert_eq!("1 day".parse::<Rate>(), Ok(Rate(86_400)));
        assert_eq!("30 seconds".parse::<Rate>(), Ok(Rate(30)));
        assert_eq!(Rate(300).to_string(), "5 minutes");
        assert_eq!(Rate(60).to_string(), "1 minute");
    }

    #[test]
    fn rejects_malformed_rates() {
        for bad in
            ["", "5", "five minutes", "0 minutes", "-1 minutes", "5 weeks", "5 minutes ago", "400 days"]
        {
            assert!(bad.parse::<Rate>().is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn instants_are_anchored_without_drift() {
        let anchor: DateTime<Utc> = "2026-01-01T00:00:07Z".parse().unwrap();
        let r = Rate(300);
        assert_eq!(r.next_after(anchor, anchor - Duration::hours(1)), Some(anchor));
        assert_eq!(r.next_after(anchor, anchor), Some(anchor + Duration::seconds(300)));
        assert_eq!(
            r.next_after(anchor, anchor + Duration::seconds(299)),
            Some(anchor + Duration::seconds(300))
        );
        assert_eq!(
            r.next_after(anchor, anchor + Duration::days(100) + Duration::seconds(1)),
            Some(anchor + Duration::days(100) + Duration::seconds(300))
        );
    }

    #[test]
    fn the_end_of_time_has_no_next_instant() {
        let anchor: DateTime<Utc> = "2026-01-01T00:00:07Z".parse().unwrap();
        assert_eq!(Rate(1).next_after(anchor, DateTime::<Utc>::MAX_UTC), None);
        assert_eq!(Rate(MAX_SECONDS).next_after(DateTime::<Utc>::MIN_UTC, DateTime::<Utc>::MAX_UTC), None);
    }

    #[test]
    fn from_seconds_clamps_to_what_the_parser_accepts() {
        assert_eq!(Rate::from_seconds(0), Rate(1));
        assert_eq!(Rate::from_seconds(u64::MAX), Rate(MAX_SECONDS));
        assert_eq!(Rate::from_seconds(1 << 63), Rate(MAX_SECONDS));
    }
}
