//! The per-job start fence of `forbid` and `replace` jobs: which of a job's runs may be active.
//!
//! A job under `forbid` or `replace` has one small stored record naming its *holder*: the run
//! that last passed the fence. A run takes the fence, with a write conditional on the holder it
//! read, before its first attempt's start write; whoever loses that write decides again on the
//! fresh holder, so two runs handled at the same moment (one worker batch, a backlog, a
//! backfill) can never both pass (invariant 7: decided by a conditional write, never by a read
//! of other runs).
//!
//! The hold lasts as long as the holder run is not terminal: QUEUED with the fence taken (about
//! to start), RUNNING, or RETRYING. Its end releases the fence without a write of its own: the
//! next run reads the holder and finds it ended. Terminal states are final, so a holder read
//! ended stays ended, and taking the fence over it is safe; a holder whose worker died is
//! reclaimed through its run, whose lease the watchdog expires into a retry or an end. A holder
//! whose run is gone (its history expired) holds nothing.
//!
//! [`decide`] is the rule, pure: the worker reads the holder and its run, and applies it.

use crate::group::SKEW;
use crate::job::ConcurrencyPolicy;
use crate::run::{Outcome, Run, RunKey};
use chrono::{DateTime, Duration, Utc};

/// A job's stored fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The run that last passed the fence.
    pub holder: RunKey,
    /// The last holder before it that started an attempt, whose call the holder waits out
    /// before it starts (see [`call_over`]); `None` for the fence's first holder.
    pub previous: Option<RunKey>,
}

/// What a run about to start its first attempt does about its job's fence.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The fence is free: take it with a write conditional on `expected`, the holder read
    /// (`None`: the job's fence was never taken), then start.
    Take { expected: Option<RunKey> },
    /// The run holds the fence already (a message handled again): start.
    Held,
    /// Another run is active: this one is SKIPPED with the reason.
    Skip(String),
    /// `replace`: the holder, older than this run, is cancelled first; then the fence is taken
    /// over it.
    Replace { holder: Box<Run> },
}

/// The fence's verdict for `run` of a job under `policy`, from the holder's key as read and its
/// run as read after it (`None`: gone). `Allow` takes no fence: always [`Verdict::Held`].
pub fn decide(
    policy: ConcurrencyPolicy,
    run: &Run,
    holder: Option<&RunKey>,
    holder_run: Option<&Run>,
) -> Verdict {
    if policy == ConcurrencyPolicy::Allow {
        return Verdict::Held;
    }
    let Some(holder) = holder else { return Verdict::Take { expected: None } };
    if *holder == run.key {
        return Verdict::Held;
    }
    let live = holder_run.filter(|h| !h.state.is_terminal());
    let Some(live) = live else { return Verdict::Take { expected: Some(holder.clone()) } };
    match policy {
        ConcurrencyPolicy::Replace if live.key < run.key => {
            Verdict::Replace { holder: Box::new(live.clone()) }
        }
        ConcurrencyPolicy::Replace => {
            Verdict::Skip(format!("concurrency replace: superseded by newer run {}", live.id()))
        }
        _ => Verdict::Skip(format!("concurrency forbid: run {} is active", live.id())),
    }
}

/// Whether the call of `previous`'s last attempt (the fence's previous holder, as read; ended,
/// since only an ended holder is ever taken over) has certainly ended at `now`, so that the run
/// after it may call the same target. A call ends with its attempt, unless a cancel closed the
/// attempt while its synchronous call was under way (a cancel does not stop a call by itself):
/// then its worker records the call's end when it sees it ([`Run::call_ended`]), or, if that
/// worker died, the call has ended once its `call_bound` (the lease the start gave, covering
/// the worker's own cut of the call) and [`SKEW`] have passed since it started.
pub fn call_over(previous: Option<&Run>, call_bound: Duration, now: DateTime<Utc>) -> bool {
    let Some(last) = previous.and_then(|run| run.attempts.last().map(|last| (run, last))) else {
        return true;
    };
    let (run, last) = last;
    let cut_by_cancel = last.outcome == Some(Outcome::Cancelled) && last.status_code.is_none();
    !cut_by_cancel || run.call_ended == Some(last.n) || now >= last.started_at + call_bound + SKEW
}

/// The run whose call a run taking the fence over `holder` (as read, `holder_run` its run)
/// waits out: the holder, unless it never started an attempt (cancelled or skipped while it
/// waited for the call before it); then the run that one waited for.
pub fn previous_for(fence: Option<&Fence>, holder_run: Option<&Run>) -> Option<RunKey> {
    let fence = fence?;
    match holder_run {
        Some(run) if run.attempts.is_empty() => fence.previous.clone(),
        _ => Some(fence.holder.clone()),
    }
}

/// Whether `holder_run` (the fence's holder as read) keeps another run of a `forbid` job from
/// starting: a trigger is refused while it does.
pub fn holds(holder_run: Option<&Run>) -> bool {
    holder_run.is_some_and(|h| !h.state.is_terminal())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::at;
    use crate::run::RunState;
    use crate::run::transition::{Step, apply, claim};

    fn run(minute: u32, state: RunState) -> Run {
        let job = crate::fixtures::job(serde_json::json!({}));
        let instant = at(&format!("2026-01-01T00:{minute:02}:00Z"));
        let mut run = claim(&job, RunKey::scheduled(instant), instant, instant, Duration::days(1));
        run.state = state;
        run
    }

    #[test]
    fn a_free_fence_is_taken_over_what_was_read() {
        let me = run(5, RunState::Queued);
        assert_eq!(decide(ConcurrencyPolicy::Forbid, &me, None, None), Verdict::Take { expected: None });
        let ended = run(4, RunState::Succeeded);
        assert_eq!(
            decide(ConcurrencyPolicy::Forbid, &me, Some(&ended.key), Some(&ended)),
            Verdict::Take { expected: Some(ended.key.clone()) }
        );
        // A holder whose run is gone holds nothing.
        assert_eq!(
            decide(ConcurrencyPolicy::Replace, &me, Some(&ended.key), None),
            Verdict::Take { expected: Some(ended.key.clone()) }
        );
    }

    #[test]
    fn a_run_that_holds_the_fence_starts() {
        let me = run(5, RunState::Queued);
        assert_eq!(decide(ConcurrencyPolicy::Forbid, &me, Some(&me.key), Some(&me)), Verdict::Held);
        assert_eq!(decide(ConcurrencyPolicy::Allow, &me, None, None), Verdict::Held);
    }

    #[test]
    fn forbid_skips_while_the_holder_is_active_whatever_its_age() {
        let me = run(5, RunState::Queued);
        for state in [RunState::Queued, RunState::Running, RunState::Retrying] {
            for minute in [4, 6] {
                let holder = run(minute, state);
                let verdict = decide(ConcurrencyPolicy::Forbid, &me, Some(&holder.key), Some(&holder));
                assert!(
                    matches!(&verdict, Verdict::Skip(reason) if reason.starts_with("concurrency forbid: run ")),
                    "{state} at minute {minute}: {verdict:?}"
                );
            }
        }
    }

    #[test]
    fn replace_cancels_an_older_holder_and_yields_to_a_newer_one() {
        let me = run(5, RunState::Queued);
        let older = run(4, RunState::Running);
        assert_eq!(
            decide(ConcurrencyPolicy::Replace, &me, Some(&older.key), Some(&older)),
            Verdict::Replace { holder: Box::new(older.clone()) }
        );
        let newer = run(6, RunState::Queued);
        assert!(matches!(
            decide(ConcurrencyPolicy::Replace, &me, Some(&newer.key), Some(&newer)),
            Verdict::Skip(reason) if reason.starts_with("concurrency replace: superseded by newer run ")
        ));
    }

    #[test]
    fn a_call_cut_short_by_a_cancel_is_over_once_its_worker_says_so_or_its_bound_has_passed() {
        let job = crate::fixtures::job(serde_json::json!({}));
        let queued = run(1, RunState::Queued);
        let start = Step::Start { worker: "w".into(), callback: "c".into(), lease: Duration::seconds(90) };
        let started_at = at("2026-01-01T00:01:00Z");
        let running = apply(&job, &queued, &start, started_at).unwrap().run;
        let cancel = Step::Cancel { reason: "concurrency replace".into() };
        let mut cancelled = apply(&job, &running, &cancel, started_at + Duration::seconds(5)).unwrap().run;
        let bound = Duration::seconds(90);
        let soon = started_at + Duration::seconds(6);
        assert!(call_over(None, bound, soon), "nothing before it");
        assert!(call_over(Some(&queued), bound, soon), "never started: no call");
        assert!(!call_over(Some(&cancelled), bound, soon), "its call may still be under way");
        assert!(!call_over(Some(&cancelled), bound, started_at + bound + SKEW - Duration::milliseconds(1)));
        assert!(call_over(Some(&cancelled), bound, started_at + bound + SKEW), "its worker cut it by then");
        cancelled.call_ended = Some(1);
        assert!(call_over(Some(&cancelled), bound, soon), "its worker saw it end");
        let finish =
            Step::Finish { ending: crate::run::transition::Ending::new(Outcome::Succeeded), jitter: 0.0 };
        let finished = apply(&job, &running, &finish, soon).unwrap().run;
        assert!(call_over(Some(&finished), bound, soon), "ended by its own answer");
    }

    #[test]
    fn only_a_live_holder_holds() {
        assert!(!holds(None));
        assert!(!holds(Some(&run(1, RunState::Cancelled))));
        assert!(holds(Some(&run(1, RunState::Queued))));
        assert!(holds(Some(&run(1, RunState::Retrying))));
    }
}
