//! The load forecast against brute force, and the flattening a flexible window buys.
//!
//! Brute force: every second of the window (and of the widest start offset before it) is asked
//! whether the schedule fires at it (`next_after(s - 1 s) == s`), and a firing second is counted
//! in the minute of its start (the second plus `Job::start_offset`). The forecast walks instants
//! instead; the two must agree minute by minute, for cron in zones across DST nights, 6-field
//! crons, rates, `at`, bounds, jitter and flexible windows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use sundial_domain::forecast::{Window, forecast};
use sundial_domain::job::{Job, JobDocument, JobId};
use sundial_domain::validation::stored_schedule;

fn utc(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// A deterministic job id: the k-th of a fixed sequence of ULIDs.
fn id(k: u64) -> JobId {
    // SplitMix64 of k for the random part, a fixed creation millisecond.
    let mut z = k.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    let random = (u128::from(z ^ (z >> 31)) << 16) | u128::from(k as u16);
    JobId::parse(&ulid::Ulid::from_parts(1_767_225_600_000, random).to_string()).unwrap()
}

fn job(k: u64, extra: Value) -> Job {
    let mut doc = json!({"name": format!("job-{k}"), "target": {"type": "http", "url": "https://x.test/"}});
    doc.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let document: JobDocument = serde_json::from_value(doc).unwrap();
    Job {
        id: id(k),
        owner: "alice".into(),
        document,
        version: 1,
        created_at: utc("2026-01-01T00:00:00Z"),
        updated_at: utc("2026-01-01T00:00:00Z"),
        next_run_at: None,
        signing_secret: "s".into(),
        pauses: Vec::new(),
        children: Vec::new(),
        gaps: Vec::new(),
        skips: Vec::new(),
        counted: Default::default(),
        baseline: None,
        versions: Vec::new(),
    }
}

/// Runs per minute of `job` over `window`, second by second.
fn brute_force(job: &Job, window: &Window) -> Vec<u32> {
    let mut counts = vec![0u32; window.minutes];
    let Some(schedule) = stored_schedule(job).unwrap() else { return counts };
    if job.document.paused {
        return counts;
    }
    let reach = i64::from(job.max_start_offset_s());
    let mut s = window.start - Duration::seconds(reach);
    while s < window.end() {
        if schedule.next_after(s - Duration::seconds(1)) == Some(s) {
            let start = s + job.start_offset(s);
            if start >= window.start && start < window.end() {
                counts[((start - window.start).num_seconds() / 60) as usize] += 1;
            }
        }
        s += Duration::seconds(1);
    }
    counts
}

fn schedules() -> Vec<Value> {
    let mut out = Vec::new();
    for zone in ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe"] {
        for cron in ["30 2 * * *", "30 1 * * *", "0 * * * *", "*/7 * * * *", "15 1-3 * * *", "*/20 * * * * *"]
        {
            out.push(json!({"schedule": {"cron": cron, "timezone": zone}}));
        }
    }
    out.push(json!({"schedule": {"rate": "7 minutes", "start_at": "2026-03-07T23:59:30Z"}}));
    out.push(json!({"schedule": {"rate": "45 seconds", "start_at": "2026-03-08T05:00:00Z", "end_at": "2026-03-08T09:00:00Z"}}));
    out.push(json!({"schedule": {"at": "2026-03-08T07:30:10Z"}}));
    out.push(json!({"schedule": {"at": "2026-03-07T23:59:50Z"}, "flexible_window_s": 60}));
    out.push(
        json!({"schedule": {"cron": "0 * * * *", "timezone": "America/New_York"}, "flexible_window_s": 600}),
    );
    out.push(json!({"schedule": {"cron": "*/5 * * * *", "jitter_s": 400}}));
    out.push(
        json!({"schedule": {"cron": "0 3 * * *", "timezone": "America/New_York"}, "flexible_window_s": 900}),
    );
    out.push(json!({"schedule": {"cron": "*/2 * * * *"}, "paused": true}));
    out
}

#[test]
fn the_forecast_equals_a_brute_force_count_across_dst_nights() {
    // The spring-forward night of New York (March 8, 2026) and Lord Howe's fall-back (April 5),
    // and London's fall-back (October 25).
    for (from, to) in [
        ("2026-03-08T00:00:00Z", "2026-03-08T12:00:00Z"),
        ("2026-04-04T13:00:00Z", "2026-04-05T01:00:00Z"),
        ("2026-10-25T00:00:30Z", "2026-10-25T03:00:00Z"),
    ] {
        let window = Window::new(utc(from), utc(to)).unwrap();
        let jobs: Vec<Job> = schedules().into_iter().enumerate().map(|(k, e)| job(k as u64, e)).collect();
        let mut expected = vec![0u32; window.minutes];
        for j in &jobs {
            let alone = forecast(std::slice::from_ref(j), &window).unwrap();
            let brute = brute_force(j, &window);
            assert_eq!(
                alone.counts,
                brute,
                "{} over {from}..{to}",
                serde_json::to_string(&j.document).unwrap()
            );
            for (e, b) in expected.iter_mut().zip(&brute) {
                *e += b;
            }
        }
        let all = forecast(&jobs, &window).unwrap();
        assert_eq!(all.counts, expected);
        assert_eq!(all.total, expected.iter().map(|c| u64::from(*c)).sum::<u64>());
    }
}

#[test]
fn fixed_local_times_follow_the_dst_rule() {
    // 02:30 New York does not exist on 2026-03-08: it fires once, at 03:00 EDT (07:00Z).
    let window = Window::new(utc("2026-03-08T00:00:00Z"), utc("2026-03-09T00:00:00Z")).unwrap();
    let f = forecast(
        &[job(1, json!({"schedule": {"cron": "30 2 * * *", "timezone": "America/New_York"}}))],
        &window,
    )
    .unwrap();
    assert_eq!(f.total, 1);
    assert_eq!(f.counts[7 * 60], 1);
    // 01:30 London happens twice on 2026-10-25: it fires once, at the first (00:30Z).
    let window = Window::new(utc("2026-10-25T00:00:00Z"), utc("2026-10-25T03:00:00Z")).unwrap();
    let f = forecast(
        &[job(2, json!({"schedule": {"cron": "30 1 * * *", "timezone": "Europe/London"}}))],
        &window,
    )
    .unwrap();
    assert_eq!((f.total, f.counts[30]), (1, 1));
    // `*/20 * * * * *` over an hour: 180 runs, three a minute.
    let window = Window::new(utc("2026-10-25T00:00:00Z"), utc("2026-10-25T01:00:00Z")).unwrap();
    let f = forecast(&[job(3, json!({"schedule": {"cron": "*/20 * * * * *"}}))], &window).unwrap();
    assert_eq!(f.total, 180);
    assert!(f.counts.iter().all(|c| *c == 3));
}

#[test]
fn jobs_with_parents_are_counted_apart() {
    let root = job(1, json!({"schedule": {"cron": "0 * * * *"}}));
    let child = job(2, json!({"depends_on": [root.id.to_string()]}));
    let grandchild = job(3, json!({"depends_on": [child.id.to_string()]}));
    let paused_child = job(4, json!({"depends_on": [root.id.to_string()], "paused": true}));
    let window = Window::new(utc("2026-03-01T00:00:00Z"), utc("2026-03-02T00:00:00Z")).unwrap();
    let f = forecast(&[root.clone(), child, grandchild, paused_child], &window).unwrap();
    assert_eq!(f.total, 24);
    assert_eq!(f.after_parents, 48);
    let mut paused_root = root;
    paused_root.document.paused = true;
    assert_eq!(forecast(&[paused_root], &window).unwrap().total, 0);
}

/// The measure of issue #17: 2,000 jobs at `0 * * * *`, the busiest minute without and with
/// a 600 s flexible window (ids fixed, so the figures are exact and repeat).
#[test]
fn a_flexible_window_flattens_the_top_of_the_hour() {
    let window = Window::new(utc("2026-03-02T00:00:00Z"), utc("2026-03-03T00:00:00Z")).unwrap();
    let plain: Vec<Job> = (0..2_000).map(|k| job(k, json!({"schedule": {"cron": "0 * * * *"}}))).collect();
    let flexible: Vec<Job> = (0..2_000)
        .map(|k| job(k, json!({"schedule": {"cron": "0 * * * *"}, "flexible_window_s": 600})))
        .collect();
    // The same spread through the schedule's jitter (plain FNV-1a, remainder), for comparison.
    let jittered: Vec<Job> =
        (0..2_000).map(|k| job(k, json!({"schedule": {"cron": "0 * * * *", "jitter_s": 600}}))).collect();
    let before = forecast(&plain, &window).unwrap();
    let after = forecast(&flexible, &window).unwrap();
    let jitter = forecast(&jittered, &window).unwrap();
    let busiest = |f: &sundial_domain::forecast::Forecast| f.counts.iter().copied().max().unwrap_or(0);
    assert_eq!(before.total, 48_000);
    assert_eq!(after.total, 48_000);
    assert_eq!(busiest(&before), 2_000);
    // The window's 10 whole minutes share each hour's 2,000 runs: 200 a minute on average.
    let first_hour = &after.counts[..11];
    println!(
        "before: busiest {} a minute; after: busiest {} a minute, first hour {first_hour:?}, average {:.1} a minute over the day; jitter_s: busiest {}, first hour {:?}",
        busiest(&before),
        busiest(&after),
        after.average,
        busiest(&jitter),
        &jitter.counts[..11],
    );
    assert_eq!(first_hour.iter().sum::<u32>(), 2_000);
    assert_eq!(busiest(&after), FLATTENED_BUSIEST);
    assert!(busiest(&after) <= 240, "within 3 standard deviations of the binomial's 200");
}

/// The busiest minute of the day after flattening, as measured (docs/decisions.md).
const FLATTENED_BUSIEST: u32 = 238;

/// The forecast lists the DST changes in its window that touch a job's instants, with the rule
/// that applied, and places the moved run where it falls (03:00 EDT, 07:00 UTC).
#[test]
fn a_forecast_says_which_dst_changes_touch_its_jobs() {
    let half_past_two = job(1, json!({"schedule": {"cron": "30 2 * * *", "timezone": "America/New_York"}}));
    let noon = job(2, json!({"schedule": {"cron": "0 12 * * *", "timezone": "America/New_York"}}));
    let window = Window::new(utc("2026-03-08T00:00:00Z"), utc("2026-03-09T00:00:00Z")).unwrap();
    let f = forecast(&[half_past_two.clone(), noon], &window).unwrap();
    let listed: Vec<(String, String)> =
        f.dst.iter().map(|d| (d.name.clone(), d.note.detail.clone())).collect();
    assert_eq!(
        listed,
        [(
            "job-1".to_string(),
            "2026-03-08: 02:30 does not exist in America/New_York; runs at 03:00".to_string()
        )]
    );
    let moved = (utc("2026-03-08T07:00:00Z") - window.start).num_minutes() as usize;
    assert_eq!(f.counts[moved], 1, "the moved run counts at 03:00 EDT");
}
