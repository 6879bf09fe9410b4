//! Attempts whose lease expired are ended (`timed_out` past an accepted attempt's timeout,
//! `lost` otherwise) and their next attempt dispatched, except those following work a target
//! started, whose looks are taken up again; runs of deleted jobs are cancelled once no attempt
//! holds a live lease, and their work stopped. Both act only on the run as read, so a heartbeat meanwhile wins.

use super::{Watchdog, WatchdogReport};
use chrono::{DateTime, Utc};
use sundial_domain::follow;
use sundial_domain::job::Job;
use sundial_domain::ports::store::{Race, Raced, StoreError};
use sundial_domain::run::transition::{self, Step, abandoned};
use sundial_domain::run::{Outcome, Run, RunState};
use sundial_domain::run_queue::Dispatch;

impl Watchdog {
    /// Ends the open attempt of `run` if its lease expired; `true` when it did (or someone else
    /// moved the run on meanwhile): nothing more to do with what was read.
    pub(super) async fn rescue(
        &self,
        job: &Job,
        run: &Run,
        now: DateTime<Utc>,
        report: &mut WatchdogReport,
    ) -> Result<bool, StoreError> {
        let Some(ending) = abandoned(job, run, now) else { return Ok(false) };
        if let Some(followed) = run.attempts.last().filter(|a| a.handle.is_some()) {
            // One look at a time: a backlog of the runs queue holds the last one.
            if run.resent_at.is_some_and(|at| now - at < follow::REVIVE_EVERY) {
                return Ok(true);
            }
            // Work followed by looks whose lease lapsed: every message of its chain was lost. A
            // look, sent now, takes the chain up and ends the attempt as the work stands
            // (stopping it past the deadline); ending the attempt here would leave the work
            // running with nobody to stop it.
            let look = Dispatch::look(run, followed.looks, follow::tag(self.entropy.unit()), 0);
            self.dispatch(run, look, now, report).await?;
            return Ok(true);
        }
        let expire = Step::Expire { jitter: self.entropy.unit() };
        // Lost: a heartbeat extended the lease meanwhile, or the run moved on.
        let Race::Won(after) = self.recorder.apply(job, run, &expire, now).await?.race() else {
            return Ok(true);
        };
        match ending.outcome {
            Outcome::TimedOut => report.timed_out += 1,
            _ => report.lost += 1,
        }
        if after.state == RunState::Retrying {
            // The attempt's own message may be gone with its worker: send the next.
            self.dispatch(&after, Dispatch::next_attempt(&after, now), now, report).await?;
        }
        Ok(true)
    }

    /// Cancels an in-flight run of a deleted job, unless an attempt still holds its lease.
    pub(super) async fn cancel_orphan(
        &self,
        run: &Run,
        now: DateTime<Utc>,
        report: &mut WatchdogReport,
    ) -> Result<(), StoreError> {
        let cancel = Step::Cancel { reason: "the job was deleted".into() };
        let Ok(change) = transition::apply_orphan(run, &cancel, now) else { return Ok(()) };
        if let Race::Won(()) =
            crate::record::persist(self.writes.as_ref(), run, &change, None).await.raced()?
        {
            report.cancelled += 1;
            // Work its attempt started is wanted by nobody now; a stop that fails is left to a
            // look, which tries it again.
            if let Some(attempt) = run.attempts.last().filter(|a| a.handle.is_some())
                && let Some(handle) = attempt.handle.as_deref()
                && let Err(e) = self.caller.stop(handle, "the job was deleted").await
            {
                tracing::warn!(%handle, error = %e, "the work of a deleted job's run could not be stopped; a look will");
                let look = Dispatch::look(run, attempt.looks, follow::tag(self.entropy.unit()), 0);
                self.dispatch(run, look, now, report).await?;
            }
        }
        Ok(())
    }
}
