//! The load forecast: how many runs start in each minute of a window, computed from the jobs'
//! schedules (their own `next_after`: cron in its zone with DST, rate, at) and the start offset
//! each run gets ([`Job::start_offset`], the tick's own answer), never from stored runs; with the
//! peak minutes and the jobs that make them.
//!
//! A run counts in the minute it may first start (instant + offset); an instant just before the
//! window whose offset carries its start into it counts, one whose start falls after it does
//! not. Paused jobs count nothing. Jobs with parents have no instants of their own: their runs
//! start when their parents' runs end, which no schedule says, so they are not placed in a
//! minute and are counted apart ([`Forecast::after_parents`], once per instant of their first
//! root). Sub-minute (6-field) crons and rates count every instant. The work is one
//! `next_after` per instant and no allocation per instant: at most [`MAX_MINUTES`] counters, a
//! few per peak.

use crate::job::{Job, JobId, Owner};
use crate::schedule::Schedule;
use crate::validation::{ValidationError, stored_schedule};
use crate::workflow::Graph;
use chrono::{DateTime, Duration, DurationRound, Utc};
use std::collections::BTreeMap;

/// The longest window: 7 days of minutes.
pub const MAX_MINUTES: i64 = 7 * 24 * 60;
/// The most a walked instant costs: one `next_after` in a zone with DST and the run's start
/// offset. The schedule bench measures 180–360 ns a `next_after` (`bench/results/schedule.json`).
const NS_PER_INSTANT: u64 = 400;
/// The share of a core the API's function has: 256 MB of 1,769 MB a vCPU.
const CORE_PER_MILLE: u64 = 145;
/// How long a forecast may take, of the 29 s the API has to answer (API Gateway's limit).
const WALL_BUDGET_MS: u64 = 10_000;
/// The most instants one forecast walks, counted before it starts from each schedule's shortest
/// gap: its placed jobs' instants twice (the counts, then the peaks' jobs) and, for each job
/// with parents, its first root's instants once. About 3.6 million: 10 s at 0.145 of a core.
pub const MAX_WALKED: u64 = WALL_BUDGET_MS * 1_000_000 * CORE_PER_MILLE / 1_000 / NS_PER_INSTANT;
/// Peak minutes listed with their jobs, busiest first.
pub const LISTED_PEAKS: usize = 20;
/// Jobs listed per peak minute, most runs first.
pub const JOBS_PER_PEAK: usize = 5;

/// Whole UTC minutes `[start, start + minutes)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: DateTime<Utc>,
    pub minutes: usize,
}

impl Window {
    /// The minutes `[from, to)` touches: `from` down to its minute, `to` up to its minute. `to`
    /// must be later than `from`, and at most 7 days later (errors name the field).
    pub fn new(from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Window, ValidationError> {
        if to <= from {
            return Err(ValidationError::new("to", "must be later than from"));
        }
        if to - from > Duration::minutes(MAX_MINUTES) {
            return Err(ValidationError::new("to", "must be at most 7 days after from"));
        }
        let minute = Duration::minutes(1);
        let start =
            from.duration_trunc(minute).map_err(|_| ValidationError::new("from", "is out of range"))?;
        let end = to.duration_trunc(minute).map_err(|_| ValidationError::new("to", "is out of range"))?;
        let end = if end < to { end + minute } else { end };
        let minutes = (end - start).num_minutes().clamp(1, MAX_MINUTES + 1) as usize;
        Ok(Window { start, minutes })
    }

    pub fn end(&self) -> DateTime<Utc> {
        self.start + Duration::minutes(self.minutes as i64)
    }

    /// The index of the minute `t` falls in, if inside.
    fn minute_of(&self, t: DateTime<Utc>) -> Option<usize> {
        if t < self.start {
            return None;
        }
        let index = ((t - self.start).num_seconds() / 60) as usize;
        (index < self.minutes).then_some(index)
    }
}

/// One job's runs in one minute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLoad {
    pub job_id: JobId,
    pub name: String,
    pub owner: Owner,
    pub runs: u32,
}

/// A peak minute: its count and the jobs with the most runs in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peak {
    pub minute: DateTime<Utc>,
    pub runs: u32,
    pub jobs: Vec<JobLoad>,
}

/// Runs per minute over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Forecast {
    pub window: Window,
    /// Runs starting in each minute of the window, in order.
    pub counts: Vec<u32>,
    pub total: u64,
    /// Runs per minute on average over the window.
    pub average: f64,
    /// A minute with at least this many runs is a peak: twice the average, and at least 2.
    pub peak_threshold: u32,
    /// How many minutes are peaks.
    pub peak_minutes: usize,
    /// The busiest peak minutes (at most [`LISTED_PEAKS`]), busiest first, then earliest.
    pub peaks: Vec<Peak>,
    /// Runs of jobs with parents whose instants fall in the window: they start when their
    /// parents' runs end, so no minute holds them.
    pub after_parents: u64,
    /// The DST changes in the window that move, skip or double a job's instants, in order (at
    /// most [`LISTED_DST`]), each with the rule that applied.
    pub dst: Vec<JobDst>,
}

/// A DST change that touches one job's instants in a forecast's window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobDst {
    pub job_id: String,
    pub name: String,
    pub note: crate::schedule::DstNote,
}

/// The most DST changes a forecast lists.
pub const LISTED_DST: usize = 100;

/// The DST changes in `window` that touch the placed jobs' instants, in order.
fn dst_in(placed: &[Placed<'_>], window: &Window) -> Vec<JobDst> {
    let mut listed: Vec<JobDst> = placed
        .iter()
        .flat_map(|p| {
            p.schedule.dst_notes(window.start, window.end()).into_iter().map(|note| JobDst {
                job_id: p.job.id.to_string(),
                name: p.job.document.name.clone(),
                note,
            })
        })
        .collect();
    listed.sort_by(|a, b| a.note.at.cmp(&b.note.at).then_with(|| a.name.cmp(&b.name)));
    listed.truncate(LISTED_DST);
    listed
}

/// A job the forecast places: its schedule parsed once.
struct Placed<'a> {
    job: &'a Job,
    schedule: Schedule,
}

/// Calls `each` with the minute of every run of `job` that starts inside `window`.
fn each_start(placed: &Placed<'_>, window: &Window, mut each: impl FnMut(usize)) {
    let end = window.end();
    let reach = Duration::seconds(i64::from(placed.job.max_start_offset_s()));
    let mut cursor = placed.schedule.first_at_or_after(window.start - reach);
    while let Some(instant) = cursor.filter(|t| *t < end) {
        if let Some(minute) = window.minute_of(instant + placed.job.start_offset(instant)) {
            each(minute);
        }
        cursor = placed.schedule.next_after(instant);
    }
}

/// Instants of `schedule` in `[window.start, window.end())`.
fn instants_in(schedule: &Schedule, window: &Window) -> u64 {
    let end = window.end();
    let mut count = 0;
    let mut cursor = schedule.first_at_or_after(window.start);
    while let Some(instant) = cursor.filter(|t| *t < end) {
        count += 1;
        cursor = schedule.next_after(instant);
    }
    count
}

/// The most instants `schedule` can have in `window` widened by `reach` seconds before it.
fn instant_bound(schedule: &Schedule, window: &Window, reach: u32) -> u64 {
    schedule.max_instants_in(window.minutes as u64 * 60 + u64::from(reach))
}

/// The most instants a forecast of `placed` and `jobs` walks in `window`: each placed job's
/// instants twice, and each job with parents its first root's instants (see [`MAX_WALKED`]).
fn walk_bound(placed: &[Placed<'_>], jobs: &[Job], window: &Window) -> u64 {
    let placed_walk: u64 =
        placed.iter().map(|p| 2 * instant_bound(&p.schedule, window, p.job.max_start_offset_s())).sum();
    let graph = Graph::new(jobs);
    let children_walk: u64 = jobs
        .iter()
        .filter(|j| j.has_parents() && !j.document.paused)
        .filter_map(|child| graph.roots(&child.id).into_iter().next().and_then(|r| graph.job(&r)))
        .filter_map(|root| stored_schedule(root).ok().flatten())
        .map(|schedule| instant_bound(&schedule, window, 0))
        .sum();
    placed_walk + children_walk
}

/// The forecast of `jobs` over `window`. `jobs` should hold the roots of every job with
/// parents (the owner's jobs do); a child whose roots are missing counts nothing. Refused
/// (naming `to`) when it could walk more than [`MAX_WALKED`] instants.
pub fn forecast(jobs: &[Job], window: &Window) -> Result<Forecast, ValidationError> {
    let placed: Vec<Placed<'_>> = jobs
        .iter()
        .filter(|j| !j.document.paused && !j.has_parents())
        .filter_map(|job| match stored_schedule(job) {
            Ok(Some(schedule)) => Some(Placed { job, schedule }),
            // Run-once jobs are claimed when created; a stored schedule that does not parse
            // is never claimed either.
            _ => None,
        })
        .collect();
    let bound = walk_bound(&placed, jobs, window);
    if bound > MAX_WALKED {
        return Err(ValidationError::new(
            "to",
            format!(
                "forecasting these jobs over this window could walk {bound} scheduled instants; a forecast walks at most {MAX_WALKED}: ask for a shorter window"
            ),
        ));
    }

    let mut counts = vec![0u32; window.minutes];
    for p in &placed {
        each_start(p, window, |minute| counts[minute] = counts[minute].saturating_add(1));
    }
    let total: u64 = counts.iter().map(|c| u64::from(*c)).sum();
    let average = total as f64 / window.minutes as f64;
    let peak_threshold = ((2.0 * average).ceil() as u32).max(2);
    let mut peak_indexes: Vec<usize> = (0..counts.len()).filter(|i| counts[*i] >= peak_threshold).collect();
    let peak_minutes = peak_indexes.len();
    peak_indexes.sort_by(|a, b| counts[*b].cmp(&counts[*a]).then(a.cmp(b)));
    peak_indexes.truncate(LISTED_PEAKS);

    let peaks = peak_indexes
        .iter()
        .zip(peak_loads(&placed, window, &peak_indexes))
        .map(|(index, mut jobs)| {
            jobs.sort_by(|a, b| {
                b.runs.cmp(&a.runs).then_with(|| a.name.cmp(&b.name)).then_with(|| a.job_id.cmp(&b.job_id))
            });
            jobs.truncate(JOBS_PER_PEAK);
            Peak { minute: window.start + Duration::minutes(*index as i64), runs: counts[*index], jobs }
        })
        .collect();

    Ok(Forecast {
        window: *window,
        counts,
        total,
        average,
        peak_threshold,
        peak_minutes,
        peaks,
        after_parents: after_parents(jobs, window),
        dst: dst_in(&placed, window),
    })
}

/// The jobs that start runs in each of the `peaks` (minute indexes of `window`), with how many:
/// a second pass over the jobs, counting only those minutes.
fn peak_loads(placed: &[Placed<'_>], window: &Window, peaks: &[usize]) -> Vec<Vec<JobLoad>> {
    let slot: BTreeMap<usize, usize> = peaks.iter().enumerate().map(|(slot, i)| (*i, slot)).collect();
    let mut loads: Vec<Vec<JobLoad>> = vec![Vec::new(); peaks.len()];
    if slot.is_empty() {
        return loads;
    }
    for p in placed {
        let mut mine = vec![0u32; peaks.len()];
        each_start(p, window, |minute| {
            if let Some(s) = slot.get(&minute) {
                mine[*s] += 1;
            }
        });
        for (s, runs) in mine.into_iter().enumerate().filter(|(_, runs)| *runs > 0) {
            loads[s].push(JobLoad {
                job_id: p.job.id.clone(),
                name: p.job.document.name.clone(),
                owner: p.job.owner.clone(),
                runs,
            });
        }
    }
    loads
}

/// Runs of the jobs with parents: one per instant of the job's first root in the window, if
/// neither the job nor any of its roots is paused (a paused root has no runs to hand on).
fn after_parents(jobs: &[Job], window: &Window) -> u64 {
    let graph = Graph::new(jobs);
    jobs.iter()
        .filter(|j| j.has_parents() && !j.document.paused)
        .map(|child| {
            let roots: Vec<&Job> = graph.roots(&child.id).iter().filter_map(|id| graph.job(id)).collect();
            if roots.is_empty() || roots.iter().any(|r| r.document.paused || r.has_parents()) {
                return 0;
            }
            match roots.first().map(|r| stored_schedule(r)) {
                Some(Ok(Some(schedule))) => instants_in(&schedule, window),
                _ => 0,
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::job as stored_job;
    use serde_json::json;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn windows_are_whole_minutes_of_at_most_7_days() {
        let w = Window::new(utc("2026-03-01T10:00:30Z"), utc("2026-03-01T10:02:00Z")).unwrap();
        assert_eq!((w.start, w.minutes), (utc("2026-03-01T10:00:00Z"), 2));
        let w = Window::new(utc("2026-03-01T10:00:00Z"), utc("2026-03-01T10:02:01Z")).unwrap();
        assert_eq!(w.minutes, 3);
        let from = utc("2026-03-01T00:00:00Z");
        assert_eq!(Window::new(from, from + Duration::days(7)).unwrap().minutes, 10_080);
        assert_eq!(
            Window::new(from, from + Duration::days(7) + Duration::seconds(1)).unwrap_err().field,
            "to"
        );
        assert_eq!(Window::new(from, from).unwrap_err().field, "to");
        assert_eq!(Window::new(from, from - Duration::minutes(1)).unwrap_err().field, "to");
    }

    #[test]
    fn peaks_name_their_jobs() {
        let mut jobs: Vec<Job> = (0..3)
            .map(|k| stored_job(json!({"name": format!("hourly-{k}"), "schedule": {"cron": "0 * * * *"}})))
            .collect();
        jobs.push(stored_job(json!({"name": "paused", "schedule": {"cron": "0 * * * *"}, "paused": true})));
        jobs.push(stored_job(json!({"name": "spread", "schedule": {"cron": "*/2 * * * *"}})));
        let w = Window::new(utc("2026-03-01T00:00:00Z"), utc("2026-03-01T02:00:00Z")).unwrap();
        let f = forecast(&jobs, &w).unwrap();
        assert_eq!(f.total, 6 + 60);
        assert_eq!(f.counts[0], 4);
        assert_eq!(f.counts[1], 0);
        assert_eq!(f.counts[2], 1);
        assert_eq!(f.peak_threshold, 2);
        assert_eq!(f.peak_minutes, 2);
        assert_eq!(f.peaks[0].minute, utc("2026-03-01T00:00:00Z"));
        assert_eq!(f.peaks[0].runs, 4);
        let names: Vec<&str> = f.peaks[0].jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["hourly-0", "hourly-1", "hourly-2", "spread"]);
        assert_eq!(f.peaks[1].minute, utc("2026-03-01T01:00:00Z"));
    }

    #[test]
    fn the_work_is_bounded_before_it_starts() {
        // 200 jobs every 10 s: 2 × 1,728,200 instants walked at most over a day, 12 M over 7.
        let jobs: Vec<Job> =
            (0..200).map(|_| stored_job(json!({"schedule": {"cron": "*/10 * * * * *"}}))).collect();
        let from = utc("2026-03-01T00:00:00Z");
        let week = Window::new(from, from + Duration::days(7)).unwrap();
        assert_eq!(forecast(&jobs, &week).unwrap_err().field, "to");
        let half_day = Window::new(from, from + Duration::hours(12)).unwrap();
        assert_eq!(forecast(&jobs, &half_day).unwrap().total, 200 * 4_320);
        assert_eq!(MAX_WALKED, 3_625_000, "10 s at 0.145 of a core, 400 ns an instant");
    }

    /// Jobs with parents walk their root's instants too: each child of a root every 10 s adds a
    /// walk of its instants, which the bound counts before anything is walked.
    #[test]
    fn the_bound_counts_the_walk_of_jobs_after_parents() {
        let root = stored_job(json!({"name": "root", "schedule": {"cron": "*/10 * * * * *"}}));
        let mut jobs = vec![root.clone()];
        for n in 0..50 {
            let mut child =
                stored_job(json!({"name": format!("child-{n}"), "depends_on": [root.id.to_string()]}));
            child.document.schedule = None;
            jobs.push(child);
        }
        let from = utc("2026-03-01T00:00:00Z");
        // A day: the root alone walks 2 × 8,641; its children 50 × 8,641 more, within the bound.
        let day = Window::new(from, from + Duration::days(1)).unwrap();
        assert_eq!(forecast(&jobs, &day).unwrap().after_parents, 50 * 8_640);
        // 7 days with 100 children: 102 × 60,481 = 6.2 M walked, refused before any (the root
        // alone, 121 k, would pass).
        for n in 50..100 {
            let mut child =
                stored_job(json!({"name": format!("child-{n}"), "depends_on": [root.id.to_string()]}));
            child.document.schedule = None;
            jobs.push(child);
        }
        let week = Window::new(from, from + Duration::days(7)).unwrap();
        assert_eq!(forecast(&jobs, &week).unwrap_err().field, "to");
    }
}
