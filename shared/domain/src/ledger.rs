//! The instant ledger: every scheduled instant of a job in a range, and what became of it: it
//! ran, it was skipped, it was missed (and why), or it is still pending. Computed from the
//! schedule, the job's recorded pauses and gaps, and its runs, never guessed: an instant no
//! record explains is reported as unrecorded.
//!
//! The order of explanations: a run at the instant says what happened to it; an instant before
//! the job (or its schedule) began or after it ended was never due; a gap the tick or an edit
//! recorded, then a pause it fell in, explains an instant passed without a run; an instant at or
//! after the job's next instant, or still ahead, is pending. A job run after others has its
//! parents' instants (those of its workflow's root schedule); one without a run is explained by
//! its parents' runs at that instant ([`Upstream`]): a parent without one (`upstream_missing`), or
//! one still going (pending).

use crate::job::{GapCause, Job, ScheduleDocument};
use crate::run::{Run, RunState};
use crate::schedule::Schedule;
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::Serialize;

/// The range asked for when none is: the last day.
pub const DEFAULT_RANGE: Duration = Duration::hours(24);
/// The widest range one request may ask for.
pub const MAX_RANGE: Duration = Duration::days(7);
/// Instants listed per page unless asked for fewer, and at most.
pub const DEFAULT_LIMIT: usize = 500;
pub const MAX_LIMIT: usize = 1000;

/// What became of one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum InstantOutcome {
    /// A run exists for it (queued, running or ended), and was not skipped.
    Ran,
    /// Its run was skipped: the run's reason says why.
    Skipped,
    /// No run exists for it, and the reason says why.
    Missed,
    /// Not yet due, or not yet claimed.
    Pending,
}

/// Why an instant has no run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MissedReason {
    /// The scheduler did not reach it in time and the job's catch-up policy dropped it.
    CatchupDropped,
    /// The job was paused at the instant.
    Paused,
    /// Before the job was created, or before its schedule's `start_at`.
    BeforeStart,
    /// After its schedule's `end_at`.
    AfterEnd,
    /// Not on the job's schedule then: the schedule was changed since.
    Edited,
    /// A job run after others: a parent has no run at the instant, so it was never handed on.
    UpstreamMissing,
    /// No record explains it (the job keeps its latest pauses and gaps only).
    Unrecorded,
}

/// One instant and its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InstantEntry {
    pub at: DateTime<Utc>,
    pub outcome: InstantOutcome,
    /// The run of the instant, where one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<RunState>,
    /// Why it was missed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<MissedReason>,
    /// What the records say, in words: the run's reason for a skipped run, the gap or pause
    /// for a missed instant, when a run was made after its instant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// One page of a job's ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ledger {
    /// The scheduled instants, oldest first.
    pub instants: Vec<InstantEntry>,
    /// Manual runs (triggers, reruns) in the range, oldest first: asked for, not scheduled.
    pub manual: Vec<InstantEntry>,
    /// Where the next page starts, when there is one.
    pub next: Option<DateTime<Utc>>,
}

/// A parent's run at an instant its child has no run for, as read: its name, and its run's
/// state (`None`: it has no run there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    pub parent: String,
    pub state: Option<RunState>,
}

/// The parents' runs at each instant a child job has no run for.
pub type UpstreamAt = std::collections::BTreeMap<DateTime<Utc>, Vec<Upstream>>;

/// The instants of `schedule`'s recurrence in `[from, to]`, oldest first, at most `limit`, with
/// whether more follow: its `start_at` and `end_at` are not applied, so that the ledger can say
/// an instant fell before or after them.
pub fn instants_in(
    schedule: &Schedule,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    limit: usize,
) -> (Vec<DateTime<Utc>>, bool) {
    let unbounded = Schedule { start_at: None, end_at: None, ..schedule.clone() };
    let mut out = Vec::new();
    let mut cursor = unbounded.first_at_or_after(from);
    while let Some(t) = cursor.filter(|t| *t <= to) {
        if out.len() == limit {
            return (out, true);
        }
        out.push(t);
        cursor = unbounded.next_after(t);
    }
    (out, false)
}

/// The ledger of `job` over the `instants` of its schedule (from [`instants_in`]; `more`: more
/// follow them), with `runs` every run of the job from the first instant to `until` (the end of
/// the page: the last instant when more follow, else the range's end), as of `now`. A job run
/// after others is accounted over its root's schedule, with its parents' runs at the instants it
/// has none for (`upstream`).
#[allow(clippy::too_many_arguments, reason = "the records one page is computed from, each read once")]
pub fn account(
    job: &Job,
    schedule: Option<&Schedule>,
    instants: &[DateTime<Utc>],
    more: bool,
    runs: &[Run],
    upstream: &UpstreamAt,
    until: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Ledger {
    let window = Duration::seconds(i64::from(
        job.document.catchup_window_s.unwrap_or(crate::job::DEFAULT_CATCHUP_WINDOW_S),
    ));
    let mut scheduled: Vec<InstantEntry> = Vec::new();
    let mut manual = Vec::new();
    let mut runs: Vec<&Run> = runs.iter().filter(|r| r.key.instant <= until).collect();
    runs.sort_by(|a, b| a.key.cmp(&b.key));
    for run in &runs {
        if run.key.manual.is_some() {
            manual.push(of_run(run, window));
        }
    }
    let mut at_instants = runs.iter().filter(|r| r.key.manual.is_none()).peekable();
    for &t in instants.iter().filter(|t| **t <= until) {
        // Scheduled runs before this instant that are not on the schedule now (an old
        // schedule's, a child's handed down) are listed at their own instants.
        while let Some(run) = at_instants.next_if(|r| r.key.instant < t) {
            scheduled.push(of_run(run, window));
        }
        match at_instants.next_if(|r| r.key.instant == t) {
            // A run not started yet of an instant asked to be skipped will be skipped.
            Some(run) if run.is_unstarted() && job.skip_at(t).is_some() => scheduled.push(InstantEntry {
                outcome: InstantOutcome::Skipped,
                detail: job.skip_at(t).map(|s| s.explain()),
                ..of_run(run, window)
            }),
            Some(run) => scheduled.push(of_run(run, window)),
            None => scheduled.push(without_run(job, schedule, upstream.get(&t), t, now)),
        }
    }
    scheduled.extend(at_instants.map(|run| of_run(run, window)));
    Ledger { instants: scheduled, manual, next: more.then(|| until + Duration::seconds(1)) }
}

/// The entry of an instant that has a run.
fn of_run(run: &Run, window: Duration) -> InstantEntry {
    let skipped = run.state == RunState::Skipped;
    let late = run.key.manual.is_none() && run.created_at > run.key.instant + window;
    let detail = if skipped {
        run.reason.clone()
    } else if late {
        Some(format!(
            "claimed at {}, after its instant: a backfill or the tick's catch-up",
            text(run.created_at)
        ))
    } else {
        None
    };
    InstantEntry {
        at: run.key.instant,
        outcome: if skipped { InstantOutcome::Skipped } else { InstantOutcome::Ran },
        run_id: Some(run.id().to_string()),
        state: Some(run.state),
        reason: None,
        detail,
    }
}

/// An instant as the ledger's sentences write it: to the second, in UTC.
fn text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Whether `t` was an instant of the schedule `previous` (of `job`).
fn was_instant_of(previous: Option<&ScheduleDocument>, job: &Job, t: DateTime<Utc>) -> bool {
    let schedule = previous.and_then(|doc| crate::validation::parse_schedule(doc, job.created_at).ok());
    let second = t - Duration::seconds(1);
    schedule.is_some_and(|s| s.next_after(second) == Some(t))
}

/// The entry of an instant without a run: why, from the records (`upstream`: the parents' runs
/// at it, for a job run after others).
fn without_run(
    job: &Job,
    schedule: Option<&Schedule>,
    upstream: Option<&Vec<Upstream>>,
    t: DateTime<Utc>,
    now: DateTime<Utc>,
) -> InstantEntry {
    let pending = |detail: Option<String>| InstantEntry {
        at: t,
        outcome: InstantOutcome::Pending,
        run_id: None,
        state: None,
        reason: None,
        detail,
    };
    let missed = |reason: MissedReason, detail: String| InstantEntry {
        at: t,
        outcome: InstantOutcome::Missed,
        run_id: None,
        state: None,
        reason: Some(reason),
        detail: Some(detail),
    };
    let start = schedule.and_then(|s| s.start_at);
    if t < job.created_at || start.is_some_and(|s| t < s) {
        let began = start.map_or(job.created_at, |s| s.max(job.created_at));
        return missed(MissedReason::BeforeStart, format!("the job's schedule began at {}", text(began)));
    }
    if let Some(end) = schedule.and_then(|s| s.end_at).filter(|end| t > *end) {
        return missed(MissedReason::AfterEnd, format!("the job's schedule ended at {}", text(end)));
    }
    for gap in job.gaps_at(t) {
        match &gap.cause {
            GapCause::CatchupDropped { .. } => return missed(MissedReason::CatchupDropped, gap.explain()),
            // An instant the schedule before the edit had too is explained otherwise.
            GapCause::Edited { previous } if !was_instant_of(previous.as_deref(), job, t) => {
                return missed(MissedReason::Edited, gap.explain());
            }
            GapCause::Edited { .. } => {}
        }
    }
    if let Some(pause) = job.pause_at(t).filter(|_| t <= now) {
        let until = pause.to.map_or_else(|| "now".to_string(), text);
        let mut detail = format!("the job was paused from {} to {until}", text(pause.from));
        if let Some(by) = &pause.by {
            detail.push_str(&format!(" by {by}"));
        }
        if let Some(reason) = &pause.reason {
            detail.push_str(&format!(": {reason}"));
        }
        return missed(MissedReason::Paused, detail);
    }
    if let Some(skip) = job.skip_at(t) {
        let detail = Some(skip.explain());
        return InstantEntry {
            at: t,
            outcome: InstantOutcome::Skipped,
            run_id: None,
            state: None,
            reason: None,
            detail,
        };
    }
    if let Some(parents) = upstream {
        if let Some(missing) = parents.iter().find(|p| p.state.is_none()) {
            let detail =
                format!("parent {} has no run at {}, so none was handed on", missing.parent, text(t));
            return missed(MissedReason::UpstreamMissing, detail);
        }
        let waiting = parents.iter().find(|p| p.state.is_some_and(|s| !s.is_terminal()));
        let detail = match waiting {
            Some(p) => format!("waiting for parent {} ({})", p.parent, p.state.map_or("", |s| s.as_str())),
            None => "every parent's run has ended: being handed on".to_string(),
        };
        return pending(Some(detail));
    }
    if job.next_run_at.is_some_and(|next| t >= next) || t > now {
        return pending(
            job.document.paused.then(|| "the job is paused: it will not run unless resumed first".into()),
        );
    }
    missed(
        MissedReason::Unrecorded,
        "no run and no record of why: the job keeps only its latest pauses and gaps".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::at;
    use crate::job::{CatchupPolicy, Gap, Pause};
    use crate::run::RunKey;
    use crate::run::transition::claim;
    use serde_json::json;

    fn minutely() -> (Job, Schedule) {
        let job = crate::fixtures::job(json!({"schedule": {"cron": "* * * * *"}, "catchup": "skip"}));
        let schedule = crate::validation::stored_schedule(&job).unwrap().unwrap();
        (job, schedule)
    }

    fn run_at(job: &Job, instant: &str, created: &str) -> Run {
        claim(job, RunKey::scheduled(at(instant)), at(instant), at(created), Duration::days(30))
    }

    fn ledger(job: &Job, schedule: &Schedule, runs: &[Run], from: &str, to: &str, now: &str) -> Ledger {
        let (instants, more) = instants_in(schedule, at(from), at(to), MAX_LIMIT);
        account(job, Some(schedule), &instants, more, runs, &UpstreamAt::new(), at(to), at(now))
    }

    fn outcomes(ledger: &Ledger) -> Vec<(String, InstantOutcome, Option<MissedReason>)> {
        ledger.instants.iter().map(|e| (e.at.format("%H:%M").to_string(), e.outcome, e.reason)).collect()
    }

    #[test]
    fn every_instant_is_explained_by_its_run_a_gap_a_pause_or_the_cursor() {
        let (mut job, schedule) = minutely();
        job.gaps.push(Gap {
            from: at("2026-11-22T10:02:00Z"),
            to: at("2026-11-22T10:03:00Z"),
            instants: 2,
            cause: GapCause::CatchupDropped {
                policy: CatchupPolicy::Skip,
                outage_from: at("2026-11-22T10:02:00Z"),
                outage_to: at("2026-11-22T10:04:10Z"),
            },
            at: at("2026-11-22T10:04:10Z"),
            told: true,
        });
        job.pauses.push(Pause {
            from: at("2026-11-22T10:05:30Z"),
            to: Some(at("2026-11-22T10:07:30Z")),
            reason: Some("maintenance".into()),
            by: Some("alice".into()),
            until: None,
        });
        job.next_run_at = Some(at("2026-11-22T10:09:00Z"));
        let mut skipped = run_at(&job, "2026-11-22T10:04:00Z", "2026-11-22T10:03:00Z");
        skipped.state = RunState::Skipped;
        skipped.reason = Some("catchup skip: started 70 s after it was due".into());
        let runs = [
            run_at(&job, "2026-11-22T10:01:00Z", "2026-11-22T10:00:00Z"),
            skipped,
            run_at(&job, "2026-11-22T10:05:00Z", "2026-11-22T10:04:10Z"),
            run_at(&job, "2026-11-22T10:08:00Z", "2026-11-22T10:07:31Z"),
        ];
        let got = ledger(
            &job,
            &schedule,
            &runs,
            "2026-11-21T23:59:00Z",
            "2026-11-22T10:10:00Z",
            "2026-11-22T10:08:30Z",
        );
        use InstantOutcome::*;
        use MissedReason::*;
        let tail: Vec<_> = outcomes(&got).into_iter().skip_while(|(t, ..)| t != "10:00").collect();
        assert_eq!(
            tail,
            [
                ("10:00".into(), Missed, Some(Unrecorded)),
                ("10:01".into(), Ran, None),
                ("10:02".into(), Missed, Some(CatchupDropped)),
                ("10:03".into(), Missed, Some(CatchupDropped)),
                ("10:04".into(), Skipped, None),
                ("10:05".into(), Ran, None),
                ("10:06".into(), Missed, Some(Paused)),
                ("10:07".into(), Missed, Some(Paused)),
                ("10:08".into(), Ran, None),
                ("10:09".into(), Pending, None),
                ("10:10".into(), Pending, None),
            ]
        );
        assert_eq!(
            outcomes(&got)[0],
            ("23:59".into(), Missed, Some(BeforeStart)),
            "before the job was created"
        );
        let detail = |hhmm: &str| {
            let entry = got.instants.iter().find(|e| e.at == at(&format!("2026-11-22T{hhmm}:00Z"))).unwrap();
            entry.detail.clone().unwrap_or_default()
        };
        assert!(detail("10:04").starts_with("catchup skip"), "a skip says why");
        assert!(detail("10:02").contains("`catchup: skip` dropped 2 instant(s)"), "{}", detail("10:02"));
        assert!(detail("10:06").contains("paused from 2026-11-22T10:05:30"), "{}", detail("10:06"));
        assert!(detail("10:06").ends_with("by alice: maintenance"), "{}", detail("10:06"));
        assert_eq!(got.next, None);
    }

    #[test]
    fn runs_off_the_schedule_and_manual_runs_are_listed_too() {
        let (job, schedule) = minutely();
        let mut off = run_at(&job, "2026-11-22T10:00:30Z", "2026-11-22T10:00:00Z");
        off.key = RunKey::scheduled(at("2026-11-22T10:00:30Z"));
        let manual = claim(
            &job,
            RunKey::manual(at("2026-11-22T10:00:40Z")),
            at("2026-11-22T10:00:40Z"),
            at("2026-11-22T10:00:40Z"),
            Duration::days(30),
        );
        let late = run_at(&job, "2026-11-22T10:01:00Z", "2026-11-22T11:00:00Z");
        let got = ledger(
            &job,
            &schedule,
            &[manual, late, off],
            "2026-11-22T10:00:00Z",
            "2026-11-22T10:01:00Z",
            "2026-11-22T12:00:00Z",
        );
        let at_: Vec<_> = got.instants.iter().map(|e| e.at.format("%H:%M:%S").to_string()).collect();
        assert_eq!(at_, ["10:00:00", "10:00:30", "10:01:00"], "oldest first, each once");
        assert_eq!(got.manual.len(), 1, "a trigger is listed apart");
        assert!(
            got.instants[2].detail.as_deref().unwrap().contains("after its instant"),
            "a late claim says so"
        );
    }

    #[test]
    fn an_edit_explains_only_the_instants_the_old_schedule_did_not_have() {
        // Every two minutes from 10:00, every minute since the edit at 10:05; paused 10:01-10:03.
        let (mut job, _) = minutely();
        job.created_at = at("2026-11-22T10:00:00Z");
        let previous = ScheduleDocument { cron: Some("*/2 * * * *".into()), ..ScheduleDocument::default() };
        job.gaps.push(Gap {
            from: job.created_at,
            to: at("2026-11-22T10:04:59Z"),
            instants: 0,
            cause: GapCause::Edited { previous: Some(Box::new(previous)) },
            at: at("2026-11-22T10:05:00Z"),
            told: true,
        });
        job.pauses.push(Pause {
            from: at("2026-11-22T10:01:30Z"),
            to: Some(at("2026-11-22T10:03:30Z")),
            reason: None,
            by: None,
            until: None,
        });
        job.next_run_at = Some(at("2026-11-22T10:06:00Z"));
        let schedule = crate::validation::stored_schedule(&job).unwrap().unwrap();
        let runs = [
            run_at(&job, "2026-11-22T10:00:00Z", "2026-11-22T09:59:00Z"),
            run_at(&job, "2026-11-22T10:04:00Z", "2026-11-22T10:03:30Z"),
        ];
        let got = ledger(
            &job,
            &schedule,
            &runs,
            "2026-11-22T10:00:00Z",
            "2026-11-22T10:05:00Z",
            "2026-11-22T10:05:30Z",
        );
        use InstantOutcome::*;
        use MissedReason::*;
        assert_eq!(
            outcomes(&got),
            [
                ("10:00".into(), Ran, None),
                ("10:01".into(), Missed, Some(Edited)),
                ("10:02".into(), Missed, Some(Paused)),
                ("10:03".into(), Missed, Some(Edited)),
                ("10:04".into(), Ran, None),
                ("10:05".into(), Missed, Some(Unrecorded)),
            ]
        );
    }

    #[test]
    fn a_child_instant_without_a_run_is_explained_by_its_parents_runs() {
        let (_, schedule) = minutely();
        let mut child = crate::fixtures::job(json!({"depends_on": ["01J00000000000000000000000"]}));
        child.created_at = at("2026-11-22T09:00:00Z");
        let (instants, more) =
            instants_in(&schedule, at("2026-11-22T10:00:00Z"), at("2026-11-22T10:02:00Z"), 10);
        let parent = |state: Option<RunState>| Upstream { parent: "extract".into(), state };
        let upstream = UpstreamAt::from([
            (at("2026-11-22T10:00:00Z"), vec![parent(Some(RunState::Succeeded)), parent(None)]),
            (at("2026-11-22T10:01:00Z"), vec![parent(Some(RunState::Running))]),
            (at("2026-11-22T10:02:00Z"), vec![parent(Some(RunState::Failed))]),
        ]);
        let now = at("2026-11-22T10:05:00Z");
        let got = account(
            &child,
            Some(&schedule),
            &instants,
            more,
            &[],
            &upstream,
            at("2026-11-22T10:02:00Z"),
            now,
        );
        let seen: Vec<_> = got
            .instants
            .iter()
            .map(|e| (e.outcome, e.reason, e.detail.clone().unwrap_or_default()))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    InstantOutcome::Missed,
                    Some(MissedReason::UpstreamMissing),
                    "parent extract has no run at 2026-11-22T10:00:00Z, so none was handed on".to_string()
                ),
                (InstantOutcome::Pending, None, "waiting for parent extract (RUNNING)".to_string()),
                (InstantOutcome::Pending, None, "every parent's run has ended: being handed on".to_string()),
            ]
        );
    }

    #[test]
    fn a_page_ends_where_its_instants_do() {
        let (job, schedule) = minutely();
        let (instants, more) =
            instants_in(&schedule, at("2026-11-22T10:00:00Z"), at("2026-11-22T11:00:00Z"), 10);
        assert!(more);
        let until = *instants.last().unwrap();
        let got = account(
            &job,
            Some(&schedule),
            &instants,
            more,
            &[],
            &UpstreamAt::new(),
            until,
            at("2026-11-22T12:00:00Z"),
        );
        assert_eq!(got.instants.len(), 10);
        assert_eq!(got.next, Some(at("2026-11-22T10:09:01Z")));
    }
}
