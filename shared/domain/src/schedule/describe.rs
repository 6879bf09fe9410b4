//! Schedules in words, for people: "every day at 02:30 America/New_York". Common cron shapes
//! are spelled out; anything else is shown as the expression itself, so a description is never
//! wrong, at worst literal.

use crate::calendar::OnHoliday;
use crate::job::ScheduleDocument;

const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// Describes a job's schedule (`None`: a job that runs once, when created).
pub fn describe(schedule: Option<&ScheduleDocument>) -> String {
    let Some(s) = schedule else { return "once, when created".into() };
    if let Some(entries) = &s.any {
        let parts: Vec<String> = entries.iter().map(|e| describe(Some(e))).collect();
        return match parts.as_slice() {
            [] => "never".into(),
            [one] => one.clone(),
            [rest @ .., last] => format!("{}, and {last}", rest.join(", ")),
        };
    }
    let zone = s.timezone.as_deref().unwrap_or("UTC");
    if let Some(at) = &s.at {
        return format!("once at {at}");
    }
    if let Some(rate) = &s.rate {
        return format!("every {}", rate.trim());
    }
    match &s.cron {
        Some(expr) => format!("{} {zone}{}", cron_in_words(expr), days_rule_in_words(s)),
        None => "never".into(),
    }
}

/// What a cron's business calendar does to its dates, in words ("" without one).
fn days_rule_in_words(s: &ScheduleDocument) -> String {
    let holidays = s.calendar.as_ref().map_or(0, |c| c.holidays.len());
    let calendar = match (s.calendar.as_ref().and_then(|c| c.name.as_deref()), holidays) {
        (Some(name), _) => format!(" of calendar {name}"),
        (None, 0) => String::new(),
        (None, 1) => " (1 holiday entry)".into(),
        (None, n) => format!(" ({n} holiday entries)"),
    };
    if let Some(n) = s.business_day {
        let which = match n {
            -1 => "the last business day".to_string(),
            n if n < 0 => format!("business day {} from the end", -n),
            n => format!("business day {n}"),
        };
        return format!(", only on {which} of the month{calendar}");
    }
    let on_holiday = s.calendar.as_ref().and_then(|c| c.on_holiday).unwrap_or_default();
    if s.calendar.is_none() && s.business_days_only != Some(true) {
        return String::new();
    }
    match on_holiday {
        OnHoliday::Skip => format!(", on business days only{calendar}"),
        OnHoliday::NextBusinessDay => format!(", other days moved to the next business day{calendar}"),
        OnHoliday::PreviousBusinessDay => format!(", other days moved to the business day before{calendar}"),
    }
}

fn number(field: &str, max: u32) -> Option<u32> {
    field.parse().ok().filter(|n| *n <= max)
}

fn day_name(field: &str) -> Option<&'static str> {
    let n: usize = field.parse().ok()?;
    DAYS.get(n % 7).copied()
}

/// Days of the week as words: `1-5` → "Monday to Friday", `1,3` → "Monday and Wednesday".
fn days_in_words(field: &str) -> Option<String> {
    if let Some((a, b)) = field.split_once('-') {
        return Some(format!("{} to {}", day_name(a)?, day_name(b)?));
    }
    let names: Option<Vec<&str>> = field.split(',').map(day_name).collect();
    let names = names?;
    Some(match names.as_slice() {
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        [] => return None,
    })
}

/// A cron expression in words (without its zone), or the expression itself.
pub fn cron_in_words(expr: &str) -> String {
    let literal = || format!("on cron `{expr}`");
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let fields: Vec<&str> = match fields.as_slice() {
        ["@hourly"] => return "every hour at :00".into(),
        ["@daily"] | ["@midnight"] => return "every day at 00:00".into(),
        ["@weekly"] => return "every Sunday at 00:00".into(),
        ["@monthly"] => return "on day 1 of every month at 00:00".into(),
        ["@yearly"] | ["@annually"] => return "every year on January 1 at 00:00".into(),
        ["0", rest @ ..] if rest.len() == 5 => rest.to_vec(),
        f if f.len() == 5 => f.to_vec(),
        _ => return literal(),
    };
    let [minute, hour, dom, month, dow] = [fields[0], fields[1], fields[2], fields[3], fields[4]];
    if month != "*" {
        return literal();
    }
    let time = match (number(minute, 59), number(hour, 23)) {
        (Some(m), Some(h)) => Some(format!("{h:02}:{m:02}")),
        _ => None,
    };
    match (minute, hour, dom, dow, time) {
        ("*", "*", "*", "*", _) => "every minute".into(),
        (m, "*", "*", "*", _) if m.starts_with("*/") => format!("every {} minutes", &m[2..]),
        (m, "*", "*", "*", _) if number(m, 59).is_some() => format!("every hour at :{m:0>2}"),
        (_, _, "*", "*", Some(t)) => format!("every day at {t}"),
        (_, _, "*", days, Some(t)) => match days_in_words(days) {
            Some(days) => format!("every {days} at {t}"),
            None => literal(),
        },
        (_, _, day, "*", Some(t)) if number(day, 31).is_some() => {
            format!("on day {day} of every month at {t}")
        }
        _ => literal(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cron(expr: &str, zone: Option<&str>) -> String {
        let doc = ScheduleDocument {
            cron: Some(expr.into()),
            timezone: zone.map(str::to_string),
            ..Default::default()
        };
        describe(Some(&doc))
    }

    #[test]
    fn common_shapes_read_as_words() {
        assert_eq!(cron("30 2 * * *", Some("America/New_York")), "every day at 02:30 America/New_York");
        assert_eq!(cron("*/5 * * * *", None), "every 5 minutes UTC");
        assert_eq!(cron("15 * * * *", None), "every hour at :15 UTC");
        assert_eq!(cron("0 9 * * 1-5", Some("Europe/Paris")), "every Monday to Friday at 09:00 Europe/Paris");
        assert_eq!(cron("0 9 * * 1,3", None), "every Monday and Wednesday at 09:00 UTC");
        assert_eq!(cron("0 0 1 * *", None), "on day 1 of every month at 00:00 UTC");
        assert_eq!(cron("@daily", None), "every day at 00:00 UTC");
        assert_eq!(cron("0 30 2 * * *", None), "every day at 02:30 UTC");
        assert_eq!(cron("* * * * *", None), "every minute UTC");
    }

    #[test]
    fn anything_else_is_shown_literally() {
        assert_eq!(cron("0 0 1 1 *", None), "on cron `0 0 1 1 *` UTC");
        assert_eq!(cron("5-10 2 * * *", None), "on cron `5-10 2 * * *` UTC");
        assert_eq!(cron("15 30 2 * * *", None), "on cron `15 30 2 * * *` UTC");
    }

    #[test]
    fn a_union_reads_as_its_schedules_joined() {
        let entry = |cron: &str, zone: &str| ScheduleDocument {
            cron: Some(cron.into()),
            timezone: Some(zone.into()),
            ..Default::default()
        };
        let union = ScheduleDocument {
            any: Some(vec![entry("0 9 * * 1-5", "America/New_York"), entry("0 13 1 * *", "UTC")]),
            ..Default::default()
        };
        assert_eq!(
            describe(Some(&union)),
            "every Monday to Friday at 09:00 America/New_York, and on day 1 of every month at 13:00 UTC"
        );
    }

    #[test]
    fn a_calendar_reads_as_its_rule_and_its_name_or_size() {
        let with = |calendar: serde_json::Value| {
            let doc = ScheduleDocument {
                cron: Some("0 9 * * *".into()),
                calendar: Some(serde_json::from_value(calendar).expect("a calendar")),
                ..Default::default()
            };
            describe(Some(&doc))
        };
        assert_eq!(
            with(serde_json::json!({"holidays": ["2027-01-01", "2027-12-24"]})),
            "every day at 09:00 UTC, on business days only (2 holiday entries)"
        );
        assert_eq!(
            with(
                serde_json::json!({"name": "nyse", "version": 3, "holidays": ["2027-01-01"], "on_holiday": "next_business_day"})
            ),
            "every day at 09:00 UTC, other days moved to the next business day of calendar nyse"
        );
    }

    #[test]
    fn rates_and_single_instants() {
        let rate = ScheduleDocument { rate: Some("10 minutes".into()), ..Default::default() };
        assert_eq!(describe(Some(&rate)), "every 10 minutes");
        let at = ScheduleDocument { at: Some("2026-12-01T09:00:00Z".into()), ..Default::default() };
        assert_eq!(describe(Some(&at)), "once at 2026-12-01T09:00:00Z");
        assert_eq!(describe(None), "once, when created");
    }
}
