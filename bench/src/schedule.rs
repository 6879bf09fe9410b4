//! Schedule maths: how many next-instant computations a second the domain makes for typical
//! expressions and zones (what the tick asks for every claimed instant, and the forecast for
//! every instant of its window).

use chrono::{DateTime, Datelike, Utc, Weekday};
use serde_json::{Value, json};
use std::sync::Arc;
use sundial_domain::calendar::{Calendar, OnHoliday};
use sundial_domain::job::{Job, JobDocument, JobId};
use sundial_domain::schedule::Schedule;
use sundial_domain::schedule::days::{DayRule, DaySelect};
use sundial_domain::validation::stored_schedule;

/// The expressions measured: (label, schedule document).
fn cases() -> Vec<(&'static str, Value)> {
    vec![
        ("every minute, UTC", json!({"cron": "* * * * *"})),
        ("every 10 s (6 fields), UTC", json!({"cron": "*/10 * * * * *"})),
        ("weekdays 09:30, New York", json!({"cron": "30 9 * * MON-FRI", "timezone": "America/New_York"})),
        ("02:30 daily, Berlin (DST gap)", json!({"cron": "30 2 * * *", "timezone": "Europe/Berlin"})),
        (
            "01:30 on the 1st, Lord Howe (30 min DST)",
            json!({"cron": "30 1 1 * *", "timezone": "Australia/Lord_Howe"}),
        ),
        ("rate 5 minutes", json!({"rate": "5 minutes"})),
        (
            "union of 3: weekdays 09:00 New York, 13:00 on the 1st UTC, every 6 h",
            json!({"any": [
                {"cron": "0 9 * * 1-5", "timezone": "America/New_York"},
                {"cron": "0 13 1 * *"},
                {"rate": "6 hours"}
            ]}),
        ),
        (
            "02:30 daily, New York, dst gap skip and fold both",
            json!({"cron": "30 2 * * *", "timezone": "America/New_York", "dst": {"gap": "skip", "fold": "both"}}),
        ),
        (
            "every 15 min, New York, dst gap shift (real-time cron moved)",
            json!({"cron": "*/15 * * * *", "timezone": "America/New_York", "dst": {"gap": "shift"}}),
        ),
    ]
}

/// 250 holidays over the years measured: every third weekday from `start`, so that runs of days
/// off (a holiday beside a weekend) are common.
fn calendar_of_250(start: DateTime<Utc>) -> Arc<Calendar> {
    let week = [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri];
    let weekdays = start.date_naive().iter_days().filter(|d| d.weekday().num_days_from_monday() < 5);
    Arc::new(Calendar::new(&week, weekdays.step_by(3).take(250)))
}

/// A job with `schedule`, as stored.
fn job_with(schedule: Value, start: DateTime<Utc>) -> anyhow::Result<Job> {
    let document: JobDocument = serde_json::from_value(
        json!({"name": "maths", "schedule": schedule, "target": {"type": "http", "url": "http://127.0.0.1:9/"}}),
    )?;
    Ok(Job {
        id: JobId::generate(),
        owner: "bench".into(),
        document,
        version: 1,
        created_at: start,
        updated_at: start,
        next_run_at: None,
        signing_secret: String::new(),
        pauses: Vec::new(),
        children: Vec::new(),
        gaps: Vec::new(),
        skips: Vec::new(),
        counted: Default::default(),
        baseline: None,
        versions: Vec::new(),
    })
}

/// Next-instant computations a second for `schedule`, over `iterations` consecutive instants.
fn measure(label: &str, schedule: &Schedule, start: DateTime<Utc>, iterations: usize) -> Value {
    let began = std::time::Instant::now();
    let mut cursor = start;
    for _ in 0..iterations {
        // A schedule past its last instant starts over, so every iteration computes one.
        cursor = schedule.next_after(cursor).unwrap_or(start);
    }
    let seconds = began.elapsed().as_secs_f64();
    std::hint::black_box(cursor);
    json!({
        "schedule": label,
        "iterations": iterations,
        "per_second": iterations as f64 / seconds.max(1e-9),
        "ns_each": seconds * 1e9 / iterations.max(1) as f64,
        "reached": cursor.to_rfc3339(),
    })
}

/// Next-instant computations a second for each case, over `iterations` consecutive instants.
pub fn next_instants(iterations: usize) -> anyhow::Result<Value> {
    let start: DateTime<Utc> = "2026-01-01T00:00:00Z".parse()?;
    let mut rows = Vec::new();
    for (label, schedule) in cases() {
        let job = job_with(schedule, start)?;
        let schedule = stored_schedule(&job)?.ok_or_else(|| anyhow::anyhow!("{label}: no schedule"))?;
        rows.push(measure(label, &schedule, start, iterations));
    }
    // Business calendars: a cron in New York whose dates a 250-date calendar decides.
    let cron = |expr: &str, select: DaySelect| -> anyhow::Result<Schedule> {
        let job = job_with(json!({"cron": expr, "timezone": "America/New_York"}), start)?;
        let mut schedule = stored_schedule(&job)?.ok_or_else(|| anyhow::anyhow!("{expr}: no schedule"))?;
        schedule.days = Some(DayRule { calendar: calendar_of_250(start), select });
        Ok(schedule)
    };
    for (label, schedule) in [
        (
            "weekdays 09:00 New York, 250 holidays skipped",
            cron("0 9 * * *", DaySelect::BusinessDays(OnHoliday::Skip))?,
        ),
        (
            "daily 09:00 New York, 250 holidays moved to the next business day",
            cron("0 9 * * *", DaySelect::BusinessDays(OnHoliday::NextBusinessDay))?,
        ),
        (
            "the 1st 13:00 New York, moved to the business day before",
            cron("0 13 1 * *", DaySelect::BusinessDays(OnHoliday::PreviousBusinessDay))?,
        ),
        (
            "last business day 13:00 New York, 250 holidays",
            cron("0 13 * * *", DaySelect::NthBusinessDay(-1))?,
        ),
    ] {
        rows.push(measure(label, &schedule, start, iterations));
    }
    Ok(json!(rows))
}
