//! What the users of a simulated deployment do, drawn from the seed: which jobs they create
//! (cron with zones over DST nights, sub-minute cron, rate, one-time; allow, forbid, replace;
//! every catch-up policy; targets that succeed, fail, hang, answer 202 or crash their worker) and
//! what they do to them while they run (edits, pauses, resumes, triggers, backfills, deletes);
//! and in half the seeds a workflow, the diamond `flow-a` → `flow-b`, `flow-c` → `flow-d`, run on
//! its root's schedule and by triggers of the root, its middle job paused for a while.
//!
//! Drawn apart from the rest (a sub-stream of the seed, so that the draws above stay as they
//! were): in half the seeds one concurrency group, `pool`, with `max_running` 1 to 3, created
//! before any job, named by about a third of the (non-workflow) jobs; in every seed about a
//! quarter of the jobs `at_most_once`; and on every job a small chance that its target refuses
//! the connection (the call never leaves).
//!
//! Drawn from what is already drawn (no new draw): which recurring jobs have `schedule.max_runs`,
//! which edits set, raise, lower or remove it, which pauses are skips or end by themselves.
//!
//! Drawn apart too (a sub-stream of its own, [`schedules_people_have`]): schedules as people
//! write them (#35) on some of the jobs: a union (`schedule.any`) of the job's schedule and one or
//! two more, in other zones, some with bounds of their own and instants that coincide; a cron in
//! a zone whose clocks change on the seed's night (a gap or a fold inside the workload's
//! minutes where there is one), with a DST policy; an hourly, two-hourly or daily cron with a
//! flexible window of 20 minutes to 4 hours (the seed's quiet period runs that much longer, so
//! that every start in a window comes and its run ends).

use crate::executor::Sim;
use crate::target::Profile;
use chrono::{DateTime, Duration, Timelike, Utc};
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

/// The name of the seed's concurrency group, when it has one.
pub const GROUP: &str = "pool";
/// How many runs a minute a group's jobs may be due, per slot (see `delivery_and_groups`).
const GROUP_LOAD: f64 = 4.0;

/// Where a seed's simulation starts: the night before a DST change in Europe or the United
/// States, or an ordinary day.
const STARTS: [&str; 5] = [
    "2030-03-31T00:40:00Z", // Europe springs forward at 01:00 UTC
    "2030-10-27T00:40:00Z", // Europe falls back at 01:00 UTC
    "2030-03-10T06:40:00Z", // New York springs forward at 07:00 UTC
    "2030-11-03T05:40:00Z", // New York falls back at 06:00 UTC
    "2030-06-14T11:40:00Z",
];

const ZONES: [&str; 6] =
    ["UTC", "Europe/London", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"];

/// One of `choices`, drawn.
fn pick<T: Copy>(core: &mut crate::executor::Core, choices: &[T]) -> T {
    choices[core.between(0, choices.len() as i64 - 1) as usize]
}

/// A user's action.
#[derive(Debug, Clone)]
pub enum Action {
    /// Create the workload's job `n`.
    Create(usize),
    /// A merge patch of job `n`.
    Patch(usize, Value),
    /// Pauses job n, until the instant given (it resumes by itself then: the tick wakes it).
    Pause(usize, Option<DateTime<Utc>>),
    Resume(usize),
    /// Skips job n's next `k` instants without pausing it.
    Skip(usize, usize),
    /// Run job `n` now (with an idempotency key: a retry lands on the same run).
    Trigger(usize),
    /// Claim job `n`'s instants in `[from, to]` that have no run.
    Backfill(usize, DateTime<Utc>, DateTime<Utc>),
    Delete(usize),
    /// Replace the workload's named calendar with this document.
    PutCalendar(Value),
}

/// An action at a time.
#[derive(Debug, Clone)]
pub struct Op {
    pub at: DateTime<Utc>,
    pub action: Action,
}

/// A seed's workload.
#[derive(Debug, Clone)]
pub struct Workload {
    pub start: DateTime<Utc>,
    /// No instant after this one: every schedule ends here, and faults stop.
    pub horizon: DateTime<Utc>,
    pub documents: Vec<Value>,
    pub ops: Vec<Op>,
    /// The concurrency group the world creates before any job: (name, max_running).
    pub group: Option<(String, u32)>,
    /// The named calendar the world creates before any job: (name, document).
    pub calendar: Option<(String, Value)>,
}

impl Workload {
    /// The longest `flexible_window_s` of the workload's jobs: the quiet period is that much
    /// longer, so that a run starting at the end of its window still ends in it.
    pub fn longest_window(&self) -> Duration {
        let windows = self.documents.iter().filter_map(|d| d.get("flexible_window_s")?.as_i64());
        Duration::seconds(windows.max().unwrap_or(0))
    }
}

impl Workload {
    /// Draws `jobs` jobs and the actions on them over `minutes`; `seed` seeds the sub-stream of
    /// delivery, groups and refused connections.
    pub fn draw(sim: &Sim, seed: u64, jobs: usize, minutes: i64) -> Workload {
        let mut core = sim.core();
        let start: DateTime<Utc> =
            STARTS[core.between(0, STARTS.len() as i64 - 1) as usize].parse().unwrap_or_default();
        let horizon = start + Duration::minutes(minutes);
        let end_at = horizon.to_rfc3339();
        let mut documents = Vec::with_capacity(jobs);
        let mut ops = Vec::new();
        for n in 0..jobs {
            let zone = ZONES[core.between(0, ZONES.len() as i64 - 1) as usize];
            let schedule = match core.between(0, 9) {
                0..=2 => {
                    json!({"cron": format!("*/{} * * * *", [1, 2, 3, 5][core.between(0, 3) as usize]), "timezone": zone, "end_at": end_at})
                }
                3 => {
                    // A daily time that falls inside the window, in the zone's local time: on a
                    // DST night it may not exist, or exist twice.
                    let at = start + Duration::seconds(core.between(60, minutes * 60 - 60));
                    let local = at.with_timezone(&zone.parse::<chrono_tz::Tz>().unwrap_or(chrono_tz::UTC));
                    json!({"cron": format!("{} {} * * *", local.minute(), local.hour()), "timezone": zone, "end_at": end_at})
                }
                4..=5 => {
                    json!({"cron": format!("*/{} * * * * *", [15, 20, 30][core.between(0, 2) as usize]), "end_at": end_at})
                }
                6..=7 => {
                    let rate = ["10 seconds", "20 seconds", "30 seconds", "1 minute", "2 minutes"]
                        [core.between(0, 4) as usize];
                    json!({"rate": rate, "end_at": end_at})
                }
                _ => {
                    let at = start + Duration::seconds(core.between(30, minutes * 60 - 60));
                    json!({"at": at.to_rfc3339()})
                }
            };
            let concurrency = ["allow", "allow", "forbid", "replace"][core.between(0, 3) as usize];
            let catchup = ["skip", "latest", "all"][core.between(0, 2) as usize];
            let profile = Profile {
                ok: 0.75,
                fail: 0.1 * core.unit(),
                permanent: 0.03 * core.unit(),
                hang: 0.05 * core.unit(),
                accept: 0.1 * core.unit(),
                crash: 0.04 * core.unit(),
                refused: 0.0, // drawn apart, in `delivery_and_groups`
                start: 0.1 * core.unit(),
                busy_ms: core.between(0, 8_000),
            };
            let mut document = json!({
                "name": format!("job-{n:02}"),
                "schedule": schedule,
                "target": {"type": "http", "url": "https://target.example.test/hook"},
                "payload": profile.to_payload(),
                "concurrency": concurrency,
                "catchup": catchup,
                "timeout_s": pick(&mut core, &[5, 15, 40]),
                "retry": {"max_attempts": core.between(1, 3), "backoff_s": core.between(1, 10), "max_backoff_s": 60},
            });
            if core.chance(0.3) {
                document["sla_s"] = json!(core.between(20, 120));
            }
            if core.chance(0.2) {
                document["start_deadline_s"] = json!(core.between(5, 60));
            }
            if core.chance(0.2) {
                document["alert_after_failures"] = json!(2);
            }
            // A quarter of the recurring jobs end after a few scheduled runs (no draw: chosen from
            // the time the target is busy, already drawn, so the stream stays the same).
            let busy_ms = profile.busy_ms;
            if busy_ms % 4 == 0 && document["schedule"].get("at").is_none() {
                document["schedule"]["max_runs"] = json!([1, 2, 3, 5, 8, 20][(busy_ms / 4 % 6) as usize]);
            }
            documents.push(document);
            // Most jobs exist from the start; some are created while the others run.
            let created = match core.chance(0.75) {
                true => start - Duration::seconds(core.between(10, 240)),
                false => start + Duration::seconds(core.between(0, minutes * 60 / 2)),
            };
            ops.push(Op { at: created, action: Action::Create(n) });
        }
        // About one action a minute on a random job, none in the last two minutes.
        for _ in 0..minutes {
            let n = core.between(0, jobs as i64 - 1) as usize;
            let at = start + Duration::seconds(core.between(0, (minutes - 2) * 60));
            let action = match core.between(0, 19) {
                0..=4 => Action::Trigger(n),
                5..=7 => {
                    let patch = match core.between(0, 2) {
                        0 => json!({"timeout_s": pick(&mut core, &[5, 15, 40])}),
                        1 => json!({"retry": {"max_attempts": core.between(1, 3)}}),
                        _ => {
                            json!({"schedule": {"rate": pick(&mut core, &["15 seconds", "1 minute", "3 minutes"]), "cron": null, "at": null, "timezone": null, "end_at": end_at}})
                        }
                    };
                    Action::Patch(n, patch)
                }
                8..=11 => {
                    let resume = at + Duration::seconds(core.between(20, 240));
                    // A third skip the next instants instead, half the pauses end by themselves
                    // (no draw: the stream stays the same).
                    if resume.timestamp() % 3 == 0 {
                        Action::Skip(n, 1 + (resume.timestamp() % 2) as usize)
                    } else if resume.timestamp() % 2 == 0 {
                        Action::Pause(n, Some(resume))
                    } else {
                        ops.push(Op { at: resume, action: Action::Resume(n) });
                        Action::Pause(n, None)
                    }
                }
                12..=14 => {
                    let from = start - Duration::minutes(core.between(0, 5));
                    Action::Backfill(n, from, at - Duration::minutes(1))
                }
                15 => Action::Delete(n),
                // A third of these triggers set, raise, lower or remove the job's limit of
                // scheduled runs instead (no draw: chosen from the instant already drawn). On a
                // one-time job the limit is refused (422).
                _ if at.timestamp() % 3 == 0 => {
                    let max_runs = [Value::Null, json!(1), json!(2), json!(4), json!(8), json!(25)]
                        [(at.timestamp() / 3 % 6) as usize]
                        .clone();
                    Action::Patch(n, json!({"schedule": {"max_runs": max_runs}}))
                }
                _ => Action::Trigger(n),
            };
            // Edits land while the minute's claim passes run (ticks fire 0-3 s past the minute),
            // so that an edit's read and write can straddle the tick's advance of the same job.
            // No extra draw: the second drawn spreads them over those 3 s.
            let at = match action {
                Action::Patch(..) | Action::Pause(..) => {
                    sundial_domain::due_index::minute_of(at)
                        + Duration::milliseconds(i64::from(at.second()) * 50)
                }
                _ => at,
            };
            ops.push(Op { at, action });
        }
        if core.chance(0.5) {
            diamond(&mut core, start, minutes, &end_at, &mut documents, &mut ops);
        }
        ops.sort_by_key(|op| op.at);
        schedules_people_have(seed, start, horizon, jobs, &mut documents);
        business_calendars(seed, start, horizon, jobs, &mut documents, &mut ops);
        let calendar = named_calendar(seed, start, horizon, jobs, &mut documents, &mut ops);
        let group = delivery_and_groups(seed, jobs, &mut documents);
        // A group's job is never edited to a sub-minute rate: its group's load stays bounded.
        for op in &mut ops {
            if let Action::Patch(n, patch) = &mut op.action {
                let grouped = documents.get(*n).is_some_and(|d| d.get("group").is_some());
                if grouped && patch.pointer("/schedule/rate") == Some(&json!("15 seconds")) {
                    patch["schedule"]["rate"] = json!("1 minute");
                }
                // An edit to a rate is an edit to one plain schedule: no union nor DST policy
                // left beside it, and a window over 15 minutes (longer than the rate) dropped.
                if patch.pointer("/schedule/rate").is_some() {
                    patch["schedule"]["any"] = Value::Null;
                    patch["schedule"]["dst"] = Value::Null;
                    patch["schedule"]["calendar"] = Value::Null;
                    let long = documents.get(*n).and_then(|d| d.get("flexible_window_s")).is_some();
                    if long {
                        patch["flexible_window_s"] = Value::Null;
                    }
                }
            }
        }
        Workload { start, horizon, documents, ops, group, calendar }
    }
}

/// Draws, from a sub-stream of `seed`, the seed's concurrency group (half the seeds) and which of
/// the first `jobs` jobs name it (about a third), which jobs are `at_most_once` (about a
/// quarter, workflow jobs included), and each job's chance of a refused connection. Neither
/// field is ever patched: a job's delivery and group are as created.
///
/// A group's jobs are due at most [`GROUP_LOAD`] times a minute per slot between them: a full
/// group lets a freed slot go to its oldest waiter only, which looks again every 3-5 s (and
/// later still behind a long queue of waiters), so a group loaded beyond what it can run never
/// drains, and its runs would not end within the quiet period.
fn delivery_and_groups(seed: u64, jobs: usize, documents: &mut [Value]) -> Option<(String, u32)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x6209_0b5e);
    let group = rng.random_bool(0.5).then(|| (GROUP.to_string(), rng.random_range(1..=3u32)));
    let mut load = 0.0;
    for (n, document) in documents.iter_mut().enumerate() {
        let named = rng.random_bool(1.0 / 3.0);
        if let Some((_, max_running)) = &group {
            let due = due_per_minute(&document["schedule"]);
            if named && n < jobs && load + due <= GROUP_LOAD * f64::from(*max_running) {
                load += due;
                document["group"] = json!(GROUP);
            }
        }
        if rng.random_bool(0.25) {
            document["delivery"] = json!("at_most_once");
        }
        let refused = 0.03 * rng.random::<f64>();
        if let Some(sim) = document.pointer_mut("/payload/sim") {
            sim["refused"] = json!(refused);
        }
    }
    group
}

/// Adds the diamond `flow-a` → `flow-b`, `flow-c` → `flow-d` (drawn after everything else, so
/// that the rest of the workload is as it would be without it): its jobs, created in order before
/// the start; two triggers of the root; and a pause of `flow-b` for a while.
fn diamond(
    core: &mut crate::executor::Core,
    start: DateTime<Utc>,
    minutes: i64,
    end_at: &str,
    documents: &mut Vec<Value>,
    ops: &mut Vec<Op>,
) {
    let first = documents.len();
    let target = json!({"type": "http", "url": "https://target.example.test/hook"});
    let profile = |core: &mut crate::executor::Core| {
        Profile {
            ok: 0.8,
            fail: 0.1 * core.unit(),
            permanent: 0.1 * core.unit(),
            hang: 0.02 * core.unit(),
            accept: 0.1 * core.unit(),
            crash: 0.04 * core.unit(),
            refused: 0.0,
            start: 0.1 * core.unit(),
            busy_ms: core.between(0, 4_000),
        }
        .to_payload()
    };
    let schedule = match core.between(0, 2) {
        0 => json!({"cron": "*/2 * * * *", "end_at": end_at}),
        1 => json!({"cron": "*/30 * * * * *", "end_at": end_at}),
        _ => json!({"rate": "1 minute", "end_at": end_at}),
    };
    let retry = |core: &mut crate::executor::Core| json!({"max_attempts": core.between(1, 2), "backoff_s": core.between(1, 5), "max_backoff_s": 30});
    documents.push(json!({
        "name": "flow-a", "schedule": schedule, "target": target, "payload": profile(core),
        "timeout_s": 15, "retry": retry(core), "catchup": "all",
    }));
    for (name, parents) in
        [("flow-b", vec!["flow-a"]), ("flow-c", vec!["flow-a"]), ("flow-d", vec!["flow-b", "flow-c"])]
    {
        let rule = pick(core, &["all_success", "all_success", "all_done"]);
        documents.push(json!({
            "name": name, "depends_on": parents, "trigger_rule": rule, "target": target,
            "payload": profile(core), "timeout_s": 15, "retry": retry(core),
            "concurrency": pick(core, &["allow", "allow", "forbid"]),
        }));
    }
    for i in 0..4 {
        ops.push(Op {
            at: start - Duration::seconds(300 - 10 * i as i64),
            action: Action::Create(first + i),
        });
    }
    for _ in 0..2 {
        let at = start + Duration::seconds(core.between(30, (minutes - 3) * 60));
        ops.push(Op { at, action: Action::Trigger(first) });
    }
    let pause = start + Duration::seconds(core.between(60, (minutes - 4) * 60));
    ops.push(Op { at: pause, action: Action::Pause(first + 1, None) });
    ops.push(Op { at: pause + Duration::seconds(core.between(30, 150)), action: Action::Resume(first + 1) });
}

/// How many times a minute a drawn schedule is due (a one-time or daily job: never, nearly).
fn due_per_minute(schedule: &Value) -> f64 {
    if let Some(entries) = schedule.get("any").and_then(Value::as_array) {
        return entries.iter().map(due_per_minute).sum();
    }
    let every_s = if let Some(rate) = schedule.get("rate").and_then(Value::as_str) {
        match rate.split_once(' ') {
            Some((n, unit)) => {
                n.parse::<f64>().unwrap_or(60.0) * if unit.starts_with("minute") { 60.0 } else { 1.0 }
            }
            None => 60.0,
        }
    } else if let Some(cron) = schedule.get("cron").and_then(Value::as_str) {
        let fields: Vec<&str> = cron.split_whitespace().collect();
        let step = |field: &str| field.strip_prefix("*/").and_then(|n| n.parse::<f64>().ok());
        match fields.as_slice() {
            [seconds, _, _, _, _, _] => step(seconds).unwrap_or(60.0),
            [minutes, hours, ..] if *hours == "*" => 60.0 * step(minutes).unwrap_or(1.0),
            _ => f64::INFINITY,
        }
    } else {
        f64::INFINITY
    };
    60.0 / every_s
}

/// Zones whose clocks change on some of the seed's nights, for the DST policies: besides those
/// of the workload, Chisinau (falls back at 00:00 UTC on the European night: its repeated hour
/// is the workload's) and Halifax (falls back at 05:00 UTC on the American night: the same).
const DST_ZONES: [&str; 6] = [
    "Europe/Berlin",
    "Europe/London",
    "Europe/Chisinau",
    "America/New_York",
    "America/Halifax",
    "Australia/Lord_Howe",
];

/// Zones of a union's other schedules (Kolkata and Kathmandu half and three quarters of an hour
/// off: a minute step of theirs meets a UTC one on some minutes only).
const UNION_ZONES: [&str; 6] =
    ["UTC", "Asia/Kolkata", "Asia/Kathmandu", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"];

/// Schedules people have (#35), drawn from a sub-stream of `seed` (so that the rest of the
/// workload is as it was) over the first `jobs` documents, the workflow's apart: about one job in
/// six becomes a union of its schedule and one or two more, one in eight a cron with a DST policy
/// in a zone whose clocks change that night, one in eight an hourly to daily cron with a long
/// flexible window. Each keeps its `end_at` (the horizon) and its `max_runs`.
fn schedules_people_have(
    seed: u64,
    start: DateTime<Utc>,
    horizon: DateTime<Utc>,
    jobs: usize,
    documents: &mut [Value],
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x0035_a11d);
    let span = (horizon - start).num_seconds().max(120);
    for document in documents.iter_mut().take(jobs) {
        let roll = rng.random_range(0..24u32);
        let schedule = document["schedule"].clone();
        let max_runs = schedule.get("max_runs").cloned();
        let kind = match roll {
            0..=3 => "union",
            4..=6 => "dst",
            7..=9 => "window",
            _ => continue,
        };
        // The draws of each kind are made whatever the job, so that the stream stays put.
        let new = match kind {
            "union" => {
                let mut first = schedule.clone();
                for field in ["end_at", "max_runs"] {
                    if let Some(object) = first.as_object_mut() {
                        object.remove(field);
                    }
                }
                // A rate anchored on a whole minute (not the job's creation): the union's
                // instants keep 10 s apart, every rate and second step being a multiple of it.
                if first.get("rate").is_some() {
                    let anchor = sundial_domain::due_index::minute_of(start) - Duration::minutes(10);
                    first["start_at"] = json!(anchor.to_rfc3339());
                }
                let more = rng.random_range(1..=2usize);
                let mut entries = vec![first.clone()];
                for _ in 0..more {
                    entries.push(union_entry(&mut rng, &first, start, span));
                }
                // Sometimes a DST policy on each cron of the union that is in a changing zone.
                if rng.random_bool(0.3) {
                    let dst = dst_policy(&mut rng);
                    for entry in &mut entries {
                        let zoned = entry.get("timezone").and_then(Value::as_str).is_some_and(|z| z != "UTC");
                        if entry.get("cron").is_some() && zoned {
                            entry["dst"] = dst.clone();
                        }
                    }
                }
                json!({"any": entries, "end_at": horizon.to_rfc3339()})
            }
            "dst" => {
                let zone = DST_ZONES[rng.random_range(0..DST_ZONES.len())];
                let tz = zone.parse::<chrono_tz::Tz>().unwrap_or(chrono_tz::UTC);
                let dst = dst_policy(&mut rng);
                let at = start + Duration::seconds(rng.random_range(60..span));
                let cron = match rng.random_range(0..3u32) {
                    // Follows real time: every step of the repeated or skipped hour.
                    0 => format!("*/{} * * * *", [1, 2, 5, 10][rng.random_range(0..4usize)]),
                    // A local time the seed's window has (in a fold: its second pass).
                    1 => {
                        let local = at.with_timezone(&tz);
                        format!("{} {} * * *", local.minute(), local.hour())
                    }
                    // A local time the night's gap skips, where it has one (else as above).
                    _ => {
                        let minutes = rng.random_range(0..60i64);
                        let local = match gap_in(tz, start, horizon) {
                            Some((change, before)) => {
                                (change + before).naive_utc() + Duration::minutes(minutes)
                            }
                            None => at.with_timezone(&tz).naive_local(),
                        };
                        format!("{} {} * * *", local.minute(), local.hour())
                    }
                };
                let mut new =
                    json!({"cron": cron, "timezone": zone, "dst": dst, "end_at": horizon.to_rfc3339()});
                // A local time the policy leaves no instant of (skipped in the gap, or only in
                // the fold's second pass under `first`) is refused: every five minutes instead.
                if !has_instant(&new, start, horizon) {
                    new["cron"] = json!("*/5 * * * *");
                }
                new
            }
            _ => {
                // One instant inside the minutes of the workload, the rest an hour or more apart.
                let at = start + Duration::seconds(rng.random_range(60..span));
                let daily = rng.random_bool(0.5);
                let zone = if daily { ZONES[rng.random_range(0..ZONES.len())] } else { "UTC" };
                let local = at.with_timezone(&zone.parse::<chrono_tz::Tz>().unwrap_or(chrono_tz::UTC));
                let (cron, gap_s) = match (daily, rng.random_bool(0.5)) {
                    (true, _) => (format!("{} {} * * *", local.minute(), local.hour()), 23 * 3600),
                    (false, true) => (format!("{} * * * *", local.minute()), 3600),
                    (false, false) => (format!("{} {}-23/2 * * *", local.minute(), local.hour() % 2), 7200),
                };
                let window = [1_200, 2_400, 3_600, 7_200, 14_400][rng.random_range(0..5usize)].min(gap_s);
                let recurring = schedule.get("at").is_none();
                if recurring {
                    document["flexible_window_s"] = json!(window);
                }
                json!({"cron": cron, "timezone": zone, "end_at": horizon.to_rfc3339()})
            }
        };
        // A one-time job stays one: a union, a DST policy and a long window are for recurring
        // schedules (its draws are made all the same).
        if schedule.get("at").is_some() {
            continue;
        }
        let mut new = new;
        if let Some(max_runs) = max_runs {
            new["max_runs"] = max_runs;
        }
        document["schedule"] = new;
    }
}

/// Business calendars (#35), drawn from a sub-stream of `seed` of their own (so that the rest of
/// the workload is as it was): about one plain cron in five of the first `jobs` gets a calendar
/// whose holiday is today or tomorrow (in its zone), with a week of seven business days or of
/// five, and a rule (skip, or move to the next or previous business day); and one or two edits
/// while the workload runs that move the holiday between today and tomorrow, so that a day's
/// instants go and come back while jobs run. The ops stay in time order.
fn business_calendars(
    seed: u64,
    start: DateTime<Utc>,
    horizon: DateTime<Utc>,
    jobs: usize,
    documents: &mut [Value],
    ops: &mut Vec<Op>,
) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x0035_ca1e);
    let span = (horizon - start).num_seconds().max(120);
    for (n, document) in documents.iter_mut().enumerate().take(jobs) {
        let drawn = rng.random_range(0..5u32) == 0;
        let holiday_today = rng.random_bool(0.5);
        let all_week = rng.random_bool(0.7);
        let rule = ["skip", "next_business_day", "previous_business_day"][rng.random_range(0..3usize)];
        let edits: Vec<i64> = (0..rng.random_range(1..=2usize)).map(|_| rng.random_range(30..span)).collect();
        let schedule = &document["schedule"];
        let plain_cron = schedule.get("cron").is_some() && schedule.get("any").is_none();
        if !drawn || !plain_cron {
            continue;
        }
        let zone = schedule.get("timezone").and_then(Value::as_str).unwrap_or("UTC");
        let tz = zone.parse::<chrono_tz::Tz>().unwrap_or(chrono_tz::UTC);
        let today = start.with_timezone(&tz).date_naive();
        let days = |holiday_today: bool| {
            let day = if holiday_today { today } else { today + Duration::days(1) };
            json!([day.format("%Y-%m-%d").to_string()])
        };
        let week = match all_week {
            true => json!(["mon", "tue", "wed", "thu", "fri", "sat", "sun"]),
            false => json!(["mon", "tue", "wed", "thu", "fri"]),
        };
        document["schedule"]["calendar"] =
            json!({"business_days": week, "holidays": days(holiday_today), "on_holiday": rule});
        // A calendar that leaves no instant before the horizon is refused: every day a business
        // day but tomorrow instead (the job's instants as they were).
        if !has_instant(&document["schedule"], start, horizon) {
            let all = json!(["mon", "tue", "wed", "thu", "fri", "sat", "sun"]);
            document["schedule"]["calendar"] =
                json!({"business_days": all, "holidays": days(false), "on_holiday": rule});
        }
        let mut today_off = holiday_today;
        let mut edits = edits;
        edits.sort_unstable();
        for seconds in edits {
            today_off = !today_off;
            let patch = json!({"schedule": {"calendar": {"holidays": days(today_off)}}});
            ops.push(Op { at: start + Duration::seconds(seconds), action: Action::Patch(n, patch) });
        }
    }
    ops.sort_by_key(|op| op.at);
}

/// The name of the workload's named calendar.
pub const CALENDAR: &str = "desk";

/// A named calendar (#35) that jobs share, drawn from a sub-stream of `seed` of its own: in half
/// the seeds, a calendar whose holiday is today or tomorrow (UTC dates, judged in each job's own
/// zone), with a week of seven business days or of five; about one plain cron in four of the
/// first `jobs` without a calendar of its own names it, each with its own rule; and one to three
/// edits of the calendar while the workload runs move the holiday between today and tomorrow,
/// so that every job naming it changes at once (a job a calendar would leave without an instant
/// before the horizon does not name it; an edit that leaves one so is still made). The ops stay
/// in time order.
fn named_calendar(
    seed: u64,
    start: DateTime<Utc>,
    horizon: DateTime<Utc>,
    jobs: usize,
    documents: &mut [Value],
    ops: &mut Vec<Op>,
) -> Option<(String, Value)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x0035_da7e);
    if !rng.random_bool(0.5) {
        return None;
    }
    let today = start.date_naive();
    let days = |holiday_today: bool| {
        let day = if holiday_today { today } else { today + Duration::days(1) };
        json!([day.format("%Y-%m-%d").to_string()])
    };
    let week = match rng.random_bool(0.7) {
        true => json!(["mon", "tue", "wed", "thu", "fri", "sat", "sun"]),
        false => json!(["mon", "tue", "wed", "thu", "fri"]),
    };
    let mut holiday_today = rng.random_bool(0.5);
    let calendar =
        json!({"business_days": week, "holidays": days(holiday_today), "description": "the sim's desk"});
    let span = (horizon - start).num_seconds().max(120);
    for document in documents.iter_mut().take(jobs) {
        let named = rng.random_range(0..4u32) == 0;
        let rule = ["skip", "next_business_day", "previous_business_day"][rng.random_range(0..3usize)];
        let schedule = &document["schedule"];
        let plain_cron = schedule.get("cron").is_some()
            && schedule.get("any").is_none()
            && schedule.get("calendar").is_none();
        if !named || !plain_cron {
            continue;
        }
        // Checked with the calendar's days as the job will hold them.
        let mut copy = document["schedule"].clone();
        copy["calendar"] =
            json!({"business_days": week, "holidays": days(holiday_today), "on_holiday": rule});
        if has_instant(&copy, start, horizon) {
            document["schedule"]["calendar"] = json!({"name": CALENDAR, "on_holiday": rule});
        }
    }
    for _ in 0..rng.random_range(1..=3usize) {
        holiday_today = !holiday_today;
        let at = start + Duration::seconds(rng.random_range(30..span));
        let mut edited = calendar.clone();
        edited["holidays"] = days(holiday_today);
        ops.push(Op { at, action: Action::PutCalendar(edited) });
    }
    ops.sort_by_key(|op| op.at);
    Some((CALENDAR.to_string(), calendar))
}

/// Whether `schedule` (a document) has an instant in `[from, to]`.
fn has_instant(schedule: &Value, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
    let parsed = serde_json::from_value(schedule.clone())
        .ok()
        .and_then(|doc| sundial_domain::validation::parse_schedule(&doc, from).ok());
    parsed.and_then(|s| s.first_at_or_after(from)).is_some_and(|t| t <= to)
}

/// A DST policy: each rule set or left to its default.
fn dst_policy(rng: &mut rand::rngs::StdRng) -> Value {
    let mut dst = json!({});
    match rng.random_range(0..4u32) {
        0 => dst["gap"] = json!("shift"),
        1 => dst["gap"] = json!("skip"),
        _ => {}
    }
    match rng.random_range(0..4u32) {
        0 => dst["fold"] = json!("first"),
        1 => dst["fold"] = json!("both"),
        _ => {}
    }
    dst
}

/// The change of `tz`'s clocks forward in `(from, to]`, if there is one: its instant and the
/// offset before it.
fn gap_in(tz: chrono_tz::Tz, from: DateTime<Utc>, to: DateTime<Utc>) -> Option<(DateTime<Utc>, Duration)> {
    use chrono::{Offset, TimeZone};
    let offset = |t: DateTime<Utc>| {
        Duration::seconds(i64::from(tz.offset_from_utc_datetime(&t.naive_utc()).fix().local_minus_utc()))
    };
    let before = offset(from);
    if offset(to) <= before {
        return None;
    }
    let (mut lo, mut hi) = (from, to);
    while hi - lo > Duration::seconds(1) {
        let mid = lo + Duration::seconds((hi - lo).num_seconds() / 2);
        if offset(mid) > before { hi = mid } else { lo = mid }
    }
    Some((hi, before))
}

/// Another schedule for a union whose first is `first`: the same cron in another zone (its
/// instants coincide where the zones are whole hours apart), a minute step in another zone, one
/// instant of the workload's on a whole minute, or a rate anchored on a whole minute with bounds
/// of its own.
fn union_entry(rng: &mut rand::rngs::StdRng, first: &Value, start: DateTime<Utc>, span: i64) -> Value {
    let zone = UNION_ZONES[rng.random_range(0..UNION_ZONES.len())];
    let step = [1, 2, 3, 5][rng.random_range(0..4usize)];
    let minute = |rng: &mut rand::rngs::StdRng| {
        sundial_domain::due_index::minute_of(start + Duration::seconds(rng.random_range(60..span)))
    };
    let at = minute(rng);
    let until = minute(rng);
    let rate = ["1 minute", "2 minutes", "30 seconds"][rng.random_range(0..3usize)];
    match rng.random_range(0..4u32) {
        0 => match first.get("cron") {
            Some(cron) => json!({"cron": cron, "timezone": zone}),
            None => json!({"cron": format!("*/{step} * * * *"), "timezone": zone}),
        },
        1 => json!({"cron": format!("*/{step} * * * *"), "timezone": zone}),
        2 => json!({"at": at.to_rfc3339()}),
        _ => {
            let (from, to) = (at.min(until), at.max(until) + Duration::minutes(1));
            json!({"rate": rate, "start_at": from.to_rfc3339(), "end_at": to.to_rfc3339()})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sundial_domain::egress::Egress;
    use sundial_domain::limits::{Limits, TargetAllowList};
    use sundial_domain::validation::{Rules, validate};

    /// Every schedule people have that the workload draws is one the API accepts (a refused
    /// create would leave the job out without a word): the jobs of 300 seeds, each validated as
    /// created before the start, off the whole second.
    #[test]
    fn drawn_schedules_are_accepted() {
        use sundial_domain::named_calendar::NamedCalendar;
        let targets = TargetAllowList {
            own_prefix: "sundial-".into(),
            network: Egress::new(&[], &[]).expect("an empty egress allow-list is valid"),
            ..TargetAllowList::default()
        };
        let limits = Limits::default();
        let rules = Rules { limits: &limits, targets: &targets };
        let (mut unions, mut dst, mut windows, mut calendars) = (0, 0, 0, 0);
        for seed in 0..300 {
            let sim = Sim::new(seed, DateTime::UNIX_EPOCH);
            let workload = Workload::draw(&sim, seed, 8, 20);
            for document in &workload.documents {
                let mut job: sundial_domain::job::JobDocument =
                    serde_json::from_value(document.clone()).expect("a job document");
                // A named calendar's days copied in, as the API does before it validates.
                let named = workload.calendar.as_ref().map(|(name, calendar)| NamedCalendar {
                    owner: String::new(),
                    name: name.clone(),
                    document: serde_json::from_value(calendar.clone()).expect("a calendar document"),
                    version: 1,
                    created_at: DateTime::UNIX_EPOCH,
                    updated_at: DateTime::UNIX_EPOCH,
                });
                sundial_domain::named_calendar::resolve(&mut job, |name| {
                    named.clone().filter(|c| c.name == name)
                })
                .expect("the workload names its own calendar");
                // Off the whole second, as the API's clock is: a rate is anchored there.
                let created =
                    workload.start - Duration::milliseconds(10_000 + (seed as i64 * 7_919) % 230_000);
                let checked = validate(&mut job, &rules, created, created);
                assert!(checked.is_ok(), "seed {seed}: {document}: {checked:?}");
                unions += usize::from(document.pointer("/schedule/any").is_some());
                dst += usize::from(document.pointer("/schedule/dst").is_some());
                windows += usize::from(document.get("flexible_window_s").is_some());
                calendars += usize::from(document.pointer("/schedule/calendar").is_some());
            }
        }
        assert!(
            unions > 100 && dst > 100 && windows > 100 && calendars > 100,
            "{unions} {dst} {windows} {calendars}"
        );
    }
}
