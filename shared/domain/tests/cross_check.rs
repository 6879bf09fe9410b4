//! The schedule maths against independent libraries, from tables they wrote
//! (`scripts/oracle/generate.py`, committed under `tests/fixtures/`):
//!
//! - business days by numpy (`np.is_busday`, `np.busday_offset`): whether a date is a business
//!   day of a week pattern less holidays, where an instant on it moves forward and back, and the
//!   N-th and last business days of months. They must agree everywhere.
//! - cron instants in zones by croniter (over Python's zoneinfo), 30 after each of several
//!   starts across DST changes. croniter fires a fixed hour at both passes of a fold and at the
//!   end of a gap: Sundial's `dst: {"fold": "both"}`, which must agree with it everywhere. Under
//!   Sundial's default rule (a fold's first pass only) the two differ only at folds, by the
//!   second passes croniter fires, and how many there are is pinned, so that a change on either
//!   side is seen.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::{DateTime, Duration, NaiveDate, Offset, TimeZone, Utc, Weekday};
use serde_json::Value;
use std::collections::BTreeSet;
use sundial_domain::calendar::{Calendar, OnHoliday};
use sundial_domain::job::ScheduleDocument;
use sundial_domain::validation::parse_schedule;

fn date(v: &Value) -> NaiveDate {
    v.as_str().unwrap().parse().unwrap()
}

#[test]
fn business_days_agree_with_numpy() {
    let table: Value = serde_json::from_str(include_str!("fixtures/busdays-numpy.json")).unwrap();
    let mut checked = 0;
    for case in table["cases"].as_array().unwrap() {
        let days: Vec<Weekday> = case["business_days"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap().parse().unwrap())
            .collect();
        let calendar = Calendar::new(&days, case["holidays"].as_array().unwrap().iter().map(date));
        for q in case["dates"].as_array().unwrap() {
            let day = date(&q["date"]);
            assert_eq!(calendar.is_business_day(day), q["business"].as_bool().unwrap(), "{day} in {case}");
            assert_eq!(
                calendar.moved(day, OnHoliday::NextBusinessDay),
                Some(date(&q["next"])),
                "{day} forward"
            );
            assert_eq!(
                calendar.moved(day, OnHoliday::PreviousBusinessDay),
                Some(date(&q["previous"])),
                "{day} back"
            );
            let skipped = calendar.moved(day, OnHoliday::Skip);
            assert_eq!(skipped.is_some(), q["business"].as_bool().unwrap(), "{day} skipped");
            checked += 4;
        }
        for q in case["nth"].as_array().unwrap() {
            let (year, month, n) = (
                q["year"].as_i64().unwrap() as i32,
                q["month"].as_u64().unwrap() as u32,
                q["n"].as_i64().unwrap() as i32,
            );
            let want = q["date"].as_str().map(|d| d.parse::<NaiveDate>().unwrap());
            assert_eq!(calendar.nth_business_day(year, month, n), want, "{year}-{month} n={n}");
            checked += 1;
        }
    }
    assert!(checked > 5_000, "{checked}");
}

/// Whether `t` lies within a day of a change of `zone`'s offset.
fn near_a_change(zone: chrono_tz::Tz, t: DateTime<Utc>) -> bool {
    let offset = |t: DateTime<Utc>| zone.offset_from_utc_datetime(&t.naive_utc()).fix();
    offset(t - Duration::days(1)) != offset(t + Duration::days(1))
}

/// Sundial's instants of `cron` in `zone` after `after` up to `last`, under `dst` (a JSON policy,
/// `null` for the default rule).
fn ours(
    cron: &str,
    zone: &str,
    dst: Value,
    after: DateTime<Utc>,
    last: DateTime<Utc>,
) -> BTreeSet<DateTime<Utc>> {
    let document = ScheduleDocument {
        cron: Some(cron.into()),
        timezone: Some(zone.into()),
        dst: serde_json::from_value(dst).unwrap(),
        ..Default::default()
    };
    let schedule = parse_schedule(&document, after).unwrap();
    let mut instants = BTreeSet::new();
    let mut cursor = schedule.next_after(after);
    while let Some(t) = cursor.filter(|t| *t <= last) {
        instants.insert(t);
        cursor = schedule.next_after(t);
    }
    instants
}

#[test]
fn cron_instants_in_zones_agree_with_croniter_but_where_dst_decides() {
    let table: Value = serde_json::from_str(include_str!("fixtures/cron-croniter.json")).unwrap();
    let (mut compared, mut apart) = (0, Vec::new());
    for case in table["cases"].as_array().unwrap() {
        let (cron, zone) = (case["cron"].as_str().unwrap(), case["timezone"].as_str().unwrap());
        let after: DateTime<Utc> = case["after"].as_str().unwrap().parse().unwrap();
        let theirs: BTreeSet<DateTime<Utc>> = case["instants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().parse().unwrap())
            .collect();
        let last = *theirs.last().unwrap();
        // croniter fires a fixed hour at both passes of a fold: Sundial's `fold: both`.
        let both = ours(cron, zone, serde_json::json!({"fold": "both"}), after, last);
        assert_eq!(both, theirs, "{cron} in {zone} after {after}, fold both");
        let default = ours(cron, zone, Value::Null, after, last);
        let tz: chrono_tz::Tz = zone.parse().unwrap();
        for t in default.symmetric_difference(&theirs) {
            assert!(near_a_change(tz, *t), "{cron} in {zone}: {t} differs away from any DST change");
            assert!(theirs.contains(t), "{cron} in {zone}: {t} is Sundial's only");
            apart.push(format!("{cron} {zone} {t}"));
        }
        compared += theirs.len();
    }
    apart.sort();
    apart.dedup();
    assert!(compared > 6_000, "{compared}");
    // Under the default rule a fixed hour fires at a fold's first pass only: croniter's second
    // pass is not Sundial's.
    assert_eq!(apart.len(), EXPECTED_SECOND_PASSES, "{apart:#?}");
}

/// The second passes of folds croniter fires and Sundial's default rule does not, in the table.
const EXPECTED_SECOND_PASSES: usize = 5;
