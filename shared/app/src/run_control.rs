//! Runs as users and targets see them: history, cancel, re-run, and the callbacks of targets
//! that answered 202 (`heartbeat` keeps the attempt's lease alive, `complete` ends it).
//!
//! The owner checks of [`crate::jobs`] apply: another owner's run is "not found". Callbacks
//! authenticate with the attempt's callback token instead, compared by digest.

use crate::audit::Recording;
use crate::groups::slots::Slots;
use crate::jobs::{Jobs, JobsError, JobsResult};
use crate::ports::Ports;
use crate::record::Recorder;
use chrono::{DateTime, Duration, Utc};
use std::sync::Arc;
use sundial_domain::audit::{AuditRecord, Stamp};
use sundial_domain::clock::Clock;
use sundial_domain::follow;
use sundial_domain::job::{Job, Owner};
use sundial_domain::ports::queue::RunQueue;
use sundial_domain::ports::store::{
    Catalogue, GroupStore, Page, Race, Raced, RunHistory, RunWrites, StoreError, until_won,
};
use sundial_domain::run::transition::{self, Ending, Step};
use sundial_domain::run::{Outcome, Run, RunId, RunState};
use sundial_domain::run_queue::Dispatch;
use sundial_domain::versions::FieldChange;
use sundial_domain::waiting::{Wait, wait_of};

/// Why a callback was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackError {
    #[error("no such run")]
    NotFound,
    #[error("the callback token does not match the run's open attempt")]
    BadToken,
    #[error("the attempt is no longer open (the run is {0})")]
    NotOpen(RunState),
    #[error(transparent)]
    Store(StoreError),
}

/// How a target reports the end of its work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub succeeded: bool,
    pub output: Option<String>,
    pub error: Option<String>,
    /// A failure that retrying will not fix ends the run now.
    pub permanent: bool,
}

/// The run use cases.
#[derive(Debug, Clone)]
pub struct RunControl {
    jobs: Jobs,
    recorder: Recorder,
    catalogue: Arc<dyn Catalogue>,
    history: Arc<dyn RunHistory>,
    writes: Arc<dyn RunWrites>,
    groups: Arc<dyn GroupStore>,
    slots: Slots,
    queue: Arc<dyn RunQueue>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn sundial_domain::entropy::Entropy>,
    heartbeat_window: Duration,
    recording: Recording,
}

impl RunControl {
    pub fn new(
        ports: &Ports,
        jobs: Jobs,
        recorder: Recorder,
        heartbeat_window: Duration,
        recording: Recording,
    ) -> Self {
        let Ports { jobs: catalogue, runs, groups, queue, clock, entropy, timer, .. } = ports.clone();
        let slots = Slots::new(groups.clone(), runs.clone(), queue.clone(), timer);
        let (history, writes) = (runs.clone(), runs);
        RunControl {
            jobs,
            recorder,
            catalogue,
            history,
            writes,
            groups,
            slots,
            queue,
            clock,
            entropy,
            heartbeat_window,
            recording,
        }
    }

    /// These use cases acting for the request `stamp` names: each change they make is written
    /// with its audit record.
    pub fn acting(&self, stamp: Arc<Stamp>) -> RunControl {
        RunControl {
            jobs: self.jobs.acting(stamp.clone()),
            recording: self.recording.by(stamp),
            ..self.clone()
        }
    }

    /// The record of this request's change of `run` (of `owner`'s job) at `at`, with `changes`.
    fn run_record(
        &self,
        owner: &str,
        run: &Run,
        at: DateTime<Utc>,
        changes: Vec<FieldChange>,
    ) -> Option<AuditRecord> {
        let record = self.recording.record(owner, at, crate::jobs::run_target(run))?;
        Some(record.of_job(&run.job_id).with_changes(changes))
    }

    /// Why `run` (of `job`) has not started yet, if it waits: its flexible offset, its backoff,
    /// or its group (read for the purpose). A group that cannot be read says nothing.
    pub async fn wait(&self, run: &Run, job: Option<&Job>) -> Option<Wait> {
        let now = self.clock.now();
        let group = match job.and_then(|j| Some((j, j.document.group.as_deref()?))) {
            Some((job, name)) if run.state.is_in_flight() => {
                self.groups.get(&job.owner, name).await.ok().flatten()
            }
            _ => None,
        };
        wait_of(run, group.as_ref(), now)
    }

    /// A job's runs, newest first.
    pub async fn list(
        &self,
        owner: &Owner,
        job: &sundial_domain::job::JobId,
        limit: u32,
        cursor: Option<&str>,
        state: Option<RunState>,
    ) -> JobsResult<Page<Run>> {
        let job = self.jobs.get(owner, job).await?;
        let scope = format!("runs\n{}\n{}", job.id, state.map_or("*", |s| s.as_str()));
        let tokens = self.jobs.page_tokens();
        let cursor = crate::jobs::open_token(tokens, &scope, cursor)?;
        let page = self
            .history
            .list(&job.id, limit.clamp(1, crate::jobs::MAX_PAGE), cursor.as_deref(), state)
            .await?;
        Ok(crate::jobs::seal_page(tokens, &scope, page))
    }

    /// One run, if its job is the owner's. The run outlives its job (history is kept until it
    /// expires), so a deleted job's runs are found through the run's own record of its owner.
    pub async fn get(&self, owner: &Owner, id: &RunId) -> JobsResult<(Run, Option<Job>)> {
        let run = self.history.get(&id.job_id, &id.key).await?.ok_or(JobsError::NotFound)?;
        let job = self.catalogue.get(&id.job_id).await?;
        match &job {
            Some(job) if &job.owner != owner => Err(JobsError::NotFound),
            None if &run.owner != owner => Err(JobsError::NotFound),
            _ => Ok((run, job)),
        }
    }

    /// Cancels a run that has not ended; an open attempt's late result is then ignored.
    pub async fn cancel(&self, owner: &Owner, id: &RunId) -> JobsResult<Run> {
        let cancelled = until_won(3, || async move {
            let (run, job) = self.get(owner, id).await?;
            if run.state.is_terminal() {
                return Err(JobsError::RunEnded(run.state.to_string()));
            }
            let cancel = Step::Cancel { reason: "cancelled through the API".into() };
            let now = self.clock.now();
            let state = |state: RunState| Some(serde_json::json!(state.as_str()));
            let changes = vec![FieldChange {
                field: "state".into(),
                old: state(run.state),
                new: state(RunState::Cancelled),
            }];
            let record = self.run_record(owner, &run, now, changes);
            let cancelled = match &job {
                Some(job) => {
                    self.recorder.apply_recorded(job, &run, &cancel, now, record.as_ref()).await?.race()
                }
                // Its job is gone: nobody to tell, and its owner's word ends even a live attempt.
                None => {
                    let after = transition::cancelled(&run, "cancelled through the API", now);
                    self.writes.transition(&run, &after, record.as_ref()).await.raced()?.map(|()| after)
                }
            };
            if let (Race::Won(_), Some(job)) = (&cancelled, job.as_ref().filter(|_| is_accepted(&run))) {
                // The accepted attempt is over: its group's slot is free again. A synchronous
                // call may still run: its worker gives the slot back.
                self.slots.release(job, &run, run.attempt, now).await;
            }
            if let (Race::Won(after), Some(followed)) =
                (&cancelled, run.attempts.last().filter(|a| a.is_open() && a.handle.is_some()))
            {
                // Work the attempt started runs on: a look, sent now, finds the attempt closed and
                // stops it (and gives its group's slot back), as the chain's next look would, were
                // it not lost.
                let look = Dispatch::look(after, followed.looks, follow::tag(self.entropy.unit()), 0);
                if let Some(Err(e)) = self.queue.send(std::slice::from_ref(&look)).await.into_iter().next() {
                    tracing::warn!(run_id = %run.id(), error = %e, "no look sent to stop the cancelled run's work; its own looks will");
                }
            }
            // Lost: moved on under the cancel (or ended): read it again.
            Ok(cancelled)
        });
        cancelled.await?.ok_or(JobsError::Contended)
    }

    /// Starts a new manual run of the job of a finished run.
    pub async fn rerun(
        &self,
        owner: &Owner,
        id: &RunId,
        input: Option<serde_json::Value>,
    ) -> JobsResult<Run> {
        let (run, job) = self.get(owner, id).await?;
        if !run.state.is_terminal() {
            return Err(JobsError::RunActive(id.to_string()));
        }
        let job = job.ok_or(JobsError::NotFound)?;
        self.jobs.trigger_with(owner, &job.id, None, input).await
    }

    /// Finds the run and checks the token against its open attempt.
    async fn open_attempt(&self, id: &RunId, token: &str) -> Result<(Run, Job), CallbackError> {
        let run = self
            .history
            .get(&id.job_id, &id.key)
            .await
            .map_err(CallbackError::Store)?
            .ok_or(CallbackError::NotFound)?;
        let expected = run.attempts.last().and_then(|a| a.callback.as_deref());
        if expected != Some(sundial_domain::auth::digest(token).as_str()) {
            return Err(CallbackError::BadToken);
        }
        if run.state != RunState::Running {
            return Err(CallbackError::NotOpen(run.state));
        }
        let job = self
            .catalogue
            .get(&id.job_id)
            .await
            .map_err(CallbackError::Store)?
            .ok_or(CallbackError::NotFound)?;
        Ok((run, job))
    }

    /// Extends the open attempt's lease by the heartbeat window, never past its timeout and
    /// never shorter than it is (a heartbeat during a call the worker still waits on must not
    /// cut that call's lease).
    pub async fn heartbeat(&self, id: &RunId, token: &str) -> Result<Run, CallbackError> {
        let (run, job) = self.open_attempt(id, token).await?;
        let heartbeat = Step::Heartbeat { window: self.heartbeat_window };
        let recorded = self.recorder.apply(&job, &run, &heartbeat, self.clock.now()).await;
        recorded.map_err(CallbackError::Store)?.written().ok_or(CallbackError::NotOpen(run.state))
    }

    /// Ends the open attempt as the target reports it; a failure is retried per the job's policy.
    pub async fn complete(
        &self,
        id: &RunId,
        token: &str,
        completion: Completion,
    ) -> Result<Run, CallbackError> {
        let (run, job) = self.open_attempt(id, token).await?;
        let now = self.clock.now();
        let outcome = if completion.succeeded { Outcome::Succeeded } else { Outcome::Failed };
        let output = completion.output.map(|o| sundial_domain::target::truncate(&o));
        let error = completion.error.map(|e| sundial_domain::target::truncate(&e));
        let ending = Ending {
            outcome,
            status: None,
            error,
            output,
            permanent: completion.permanent,
            unsent: false,
            logs_url: None,
        };
        let finish = Step::Finish { ending, jitter: self.entropy.unit() };
        let said = if completion.succeeded { "succeeded" } else { "failed" };
        let changes =
            vec![FieldChange { field: "outcome".into(), old: None, new: Some(serde_json::json!(said)) }];
        let record = self.run_record(&job.owner, &run, now, changes);
        let recorded = self
            .recorder
            .apply_recorded(&job, &run, &finish, now, record.as_ref())
            .await
            .map_err(CallbackError::Store)?;
        let after = recorded.written().ok_or(CallbackError::NotOpen(run.state))?;
        if is_accepted(&run) {
            // The accepted attempt is over: its group's slot is free again. A synchronous call
            // that reported early may still run: its worker gives the slot back.
            self.slots.release(&job, &run, run.attempt, now).await;
        }
        if after.state == RunState::Retrying {
            // The attempt's own message is long gone: send the next one (the watchdog re-sends
            // it if this send fails).
            let next = Dispatch::next_attempt(&after, now);
            if let Some(Err(e)) = self.queue.send(std::slice::from_ref(&next)).await.into_iter().next() {
                tracing::warn!(run_id = %after.id(), error = %e, "next attempt not sent; the watchdog will");
            }
        }
        Ok(after)
    }
}

/// Whether `run`'s open attempt was answered 202 (its call is over; its target works on).
fn is_accepted(run: &Run) -> bool {
    run.state == RunState::Running && run.attempts.last().is_some_and(|a| a.status_code == Some(202))
}
