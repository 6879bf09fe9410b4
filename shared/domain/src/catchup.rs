//! Catch-up: how a job's `catchup` policy decides a scheduled run that would first start past its
//! catch-up window (`catchup_window_s` after it was due), for runs a tick claimed ahead or on
//! time. The tick's own catch-up of instants no tick claimed is in [`crate::tick::plan`].

use chrono::{DateTime, Duration, Utc};

use crate::job::{CatchupPolicy, DEFAULT_CATCHUP_WINDOW_S, Job};
use crate::run::Run;
use crate::validation::stored_schedule;

/// Why a scheduled run whose first attempt would start at `now` does not: it is past its job's
/// catch-up window (`catchup_window_s` after it was due), and the job's `catchup` policy does
/// not run it: `skip` runs no late run, `latest` only the latest of them (one whose next
/// instant of its schedule is late too is superseded), `all` every one.
/// Runs made after their instant's window on purpose are not judged again: manual runs,
/// backfills, the instants a tick's catch-up decided, and children's runs handed down.
pub fn late_reason(job: &Job, run: &Run, now: DateTime<Utc>) -> Option<String> {
    let window =
        Duration::seconds(i64::from(job.document.catchup_window_s.unwrap_or(DEFAULT_CATCHUP_WINDOW_S)));
    // Claimed ahead or on time by a tick; a backfill, a tick's catch-up of missed instants or a
    // child's run handed down by its parents is made long after its instant.
    // Measured from the start its schedule gives it (its instant plus its offset): a run far
    // into a long flexible window is claimed hours after its instant, on time for that start. Not
    // from the run's own `due_at`: a backfill is due when it is made.
    let scheduled_start = run.scheduled_at() + job.start_offset(run.scheduled_at());
    let claimed_on_time = run.created_at <= scheduled_start + window;
    let late = now - run.due_at;
    if run.attempt > 0 || run.key.manual.is_some() || !claimed_on_time || late <= window {
        return None;
    }
    let how_late = format!(
        "started {} s after it was due, past its catch-up window of {} s",
        late.num_seconds(),
        window.num_seconds()
    );
    match job.document.catchup {
        CatchupPolicy::All => None,
        CatchupPolicy::Skip => Some(format!("catchup skip: {how_late}")),
        CatchupPolicy::Latest => {
            // Superseded by the next instant if that one's run is late too: of the runs that
            // start late, the latest runs (as the tick's catch-up runs the latest missed
            // instant), and so does every run on time.
            // Read only here: most runs are on time, and only `latest` needs the schedule.
            let schedule = stored_schedule(job).ok().flatten()?;
            let later = schedule.next_after(run.scheduled_at())?;
            let later_due = later + job.start_offset(later);
            (now - later_due > window).then(|| {
                format!(
                    "catchup latest: {how_late}, and the later instant {} is late too",
                    later.to_rfc3339()
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::at;
    use crate::run::RunKey;
    use crate::run::transition::claim;
    use serde_json::json;

    const DUE: &str = "2026-11-22T10:00:00Z";

    fn job(extra: serde_json::Value) -> Job {
        crate::fixtures::job(extra)
    }

    fn queued(job: &Job) -> Run {
        claim(job, RunKey::scheduled(at(DUE)), at(DUE), at("2026-11-22T09:59:00Z"), Duration::days(30))
    }

    #[test]
    fn a_late_run_is_decided_by_the_catch_up_policy() {
        let minutely = |policy: &str| job(json!({"schedule": {"cron": "* * * * *"}, "catchup": policy}));
        let late = |policy: &str, now: &str| {
            let job = minutely(policy);
            late_reason(&job, &queued(&job), at(now))
        };
        // Due at 10:00:00 with the default window of 60 s.
        assert_eq!(late("skip", "2026-11-22T10:01:00Z"), None, "within its window: on time");
        let skipped = late("skip", "2026-11-22T10:01:01Z").unwrap();
        assert!(skipped.starts_with("catchup skip: started 61 s after it was due"), "{skipped}");
        assert_eq!(late("all", "2026-11-22T10:30:00Z"), None, "`all` runs every late run");
        assert_eq!(late("latest", "2026-11-22T10:01:30Z"), None, "late, but the next instant is on time");
        let superseded = late("latest", "2026-11-22T10:02:01Z").unwrap();
        assert!(
            superseded.contains("the later instant 2026-11-22T10:01:00+00:00 is late too"),
            "{superseded}"
        );

        let job = job(json!({"schedule": {"cron": "* * * * *"}, "catchup": "skip", "catchup_window_s": 600}));
        let run = queued(&job);
        assert_eq!(late_reason(&job, &run, at("2026-11-22T10:09:00Z")), None, "its own window");
        assert!(late_reason(&job, &run, at("2026-11-22T10:10:01Z")).is_some());
        let now = at("2026-11-22T11:00:00Z");
        let started = Run { attempt: 1, ..run.clone() };
        assert_eq!(late_reason(&job, &started, now), None, "a retry is not a start");
        let backfilled = Run { created_at: at("2026-11-22T10:30:00Z"), ..run.clone() };
        assert_eq!(late_reason(&job, &backfilled, now), None, "made after its instant on purpose");
        // As a backfill makes it: due when it is made, started long after (a backlog, a full group).
        let paced =
            Run { created_at: at("2026-11-22T10:30:00Z"), due_at: at("2026-11-22T10:30:00Z"), ..run.clone() };
        assert_eq!(late_reason(&job, &paced, now), None, "a backfill is never judged late");
        // A long window: claimed an hour after its instant, on time for its own start.
        let wide = crate::fixtures::job(
            json!({"schedule": {"cron": "0 10 * * *"}, "catchup": "skip", "flexible_window_s": 14_400}),
        );
        let start = at(DUE) + wide.start_offset(at(DUE));
        let claimed = claim(
            &wide,
            RunKey::scheduled(at(DUE)),
            start,
            start - Duration::minutes(15),
            Duration::days(30),
        );
        assert_eq!(
            late_reason(&wide, &claimed, start + Duration::seconds(30)),
            None,
            "on time for its start"
        );
        assert!(late_reason(&wide, &claimed, start + Duration::minutes(5)).is_some(), "late for its start");
        let manual = Run { key: RunKey::manual(at(DUE)), ..run };
        assert_eq!(late_reason(&job, &manual, now), None, "a trigger is asked for now");
    }
}
