//! Schedule maths: how many next-instant computations a second the domain makes for typical
//! expressions and zones (what the tick asks for every claimed instant, and the forecast for
//! every instant of its window).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sundial_domain::job::{Job, JobDocument, JobId};
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

/// Next-instant computations a second for each case, over `iterations` consecutive instants.
pub fn next_instants(iterations: usize) -> anyhow::Result<Value> {
    let start: DateTime<Utc> = "2026-01-01T00:00:00Z".parse()?;
    let mut rows = Vec::new();
    for (label, schedule) in cases() {
        let document: JobDocument = serde_json::from_value(
            json!({"name": "maths", "schedule": schedule, "target": {"type": "http", "url": "http://127.0.0.1:9/"}}),
        )?;
        let job = Job {
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
        };
        let schedule = stored_schedule(&job)?.ok_or_else(|| anyhow::anyhow!("{label}: no schedule"))?;
        let began = std::time::Instant::now();
        let mut cursor = start;
        for _ in 0..iterations {
            // A schedule past its last instant starts over, so every iteration computes one.
            cursor = schedule.next_after(cursor).unwrap_or(start);
        }
        let seconds = began.elapsed().as_secs_f64();
        std::hint::black_box(cursor);
        rows.push(json!({
            "schedule": label,
            "iterations": iterations,
            "per_second": iterations as f64 / seconds.max(1e-9),
            "ns_each": seconds * 1e9 / iterations.max(1) as f64,
            "reached": cursor.to_rfc3339(),
        }));
    }
    Ok(json!(rows))
}
