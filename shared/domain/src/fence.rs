//! The per-job start fence of `forbid` and `replace` jobs: which of a job's runs may be active.
//!
//! A job under `forbid` or `replace` has one small stored record naming its *holder*: the run
//! that last passed the fence. A run takes the fence, with a write conditional on the holder it
//! read, before its first attempt's start write; whoever loses that write decides again on the
//! fresh holder, so two runs handled at the same moment (one worker batch, a backlog, a
//! backfill) can never both pass (invariant: policies decided under the start fence: decided by a conditional write, never by a read
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
use crate::run::{Run, RunKey};
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

/// Whether the call of `previous`'s last attempt (the fence's previous holder, as read) has
/// certainly ended at `now`, so that the run after it may call the same target: its end is
/// recorded ([`Run::call_ended`]: by the write of the worker's own answer or of its 202, or by
/// the worker of a call stopped because the attempt was closed under it: a cancel, or a lease
/// the watchdog judged expired, neither of which stops a call by itself), or its worker has
/// certainly cut it (its worker died): past the attempt's `call_until` (the lease its start
/// gave; an attempt written by an earlier version has none, and `call_bound` from its start,
/// the longest any call lasts, stands in) and [`SKEW`]. A run that never started an attempt
/// made no call.
pub fn call_over(previous: Option<&Run>, call_bound: Duration, now: DateTime<Utc>) -> bool {
    let Some((run, last)) = previous.and_then(|run| run.attempts.last().map(|last| (run, last))) else {
        return true;
    };
    let cut_by = last.call_until.unwrap_or(last.started_at + call_bound);
    run.call_ended == Some(last.n) || now >= cut_by + SKEW
}

/// The run whose call a run taking the fence over `holder` (`holder_run` its run, as last read)
/// waits out: the holder, unless it never started an attempt (cancelled or skipped while it
/// waited for the call before it); then the run that one waited for (`before_it`).
pub fn previous_for(
    holder: Option<&RunKey>,
    before_it: Option<&RunKey>,
    holder_run: Option<&Run>,
) -> Option<RunKey> {
    match holder_run {
        Some(run) if run.attempts.is_empty() => before_it.cloned(),
        _ => holder.cloned(),
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
    fn a_call_is_over_once_recorded_ended_or_past_its_bound() {
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
        let finish = Step::Finish {
            ending: crate::run::transition::Ending::new(crate::run::Outcome::Succeeded),
            jitter: 0.0,
        };
        let finished = apply(&job, &running, &finish, soon).unwrap().run;
        assert!(call_over(Some(&finished), bound, soon), "ended by its own answer");
        let accept = Step::Accept { status: 202, window: Duration::seconds(60) };
        let accepted = apply(&job, &running, &accept, soon).unwrap().run;
        assert!(call_over(Some(&accepted), bound, soon), "its call ended with its 202");
        // A lease the watchdog judged expired closes the attempt; the call may still be under way.
        let late = started_at + Duration::seconds(100);
        let lost = apply(&job, &running, &Step::Expire { jitter: 0.0 }, late).unwrap().run;
        assert!(!call_over(Some(&lost), bound, late), "closed by the watchdog, its call not seen ended");
    }

    #[test]
    fn only_a_live_holder_holds() {
        assert!(!holds(None));
        assert!(!holds(Some(&run(1, RunState::Cancelled))));
        assert!(holds(Some(&run(1, RunState::Queued))));
        assert!(holds(Some(&run(1, RunState::Retrying))));
    }
}
