//! Passing a run's end on to the jobs that run after its job (DAG dependencies).
//!
//! A run of a job with children records a `downstream` event in the write that ends it; the
//! announcer hands that event here instead of to the bus. For each child whose parents all have
//! an ended run for the same key, the child's run is put with that key (conditional on absence,
//! as the tick claims: one run per child and key, however many parents end at once or however
//! often the hand-over is repeated), then sent; or written SKIPPED when a parent failed under
//! `all_success`, or when the child is paused. Of two parents ending at once on two workers,
//! each writes its end before it reads the other's run, so at least the later reader sees both
//! ended. A crash before the hand-over leaves the event unsent: the watchdog hands it over again.
//! So does a hand-over that found a parent with no run at all for the key (one root paused, or
//! its catch-up dropped the instant): the event stays unsent, the watchdog hands it over again
//! each pass, and once the wait for that parent is over the child's run is written SKIPPED
//! `upstream_missing` ([`sundial_domain::workflow::UPSTREAM_WAIT`]).

use super::children_of;
use crate::claim::Claimer;
use crate::ports::Ports;
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use std::sync::Arc;
use sundial_domain::clock::Clock;
use sundial_domain::job::{Job, JobId};
use sundial_domain::ports::store::{Catalogue, Inserted, RunHistory, RunWrites, StoreError};
use sundial_domain::run::transition::{self, Step};
use sundial_domain::run::{Run, RunKey};
use sundial_domain::workflow::{Readiness, readiness};

/// Claims the runs of a job's children when one of its runs ends.
#[derive(Debug, Clone)]
pub struct Cascade {
    catalogue: Arc<dyn Catalogue>,
    history: Arc<dyn RunHistory>,
    writes: Arc<dyn RunWrites>,
    claimer: Claimer,
    clock: Arc<dyn Clock>,
}

/// What handing a run's end over to a job's children did.
#[derive(Debug, Default)]
pub struct HandOver {
    /// The children's runs written ended (skipped), with their jobs: their own events (and
    /// hand-overs) are the caller's to announce.
    pub ended: Vec<(Job, Run)>,
    /// A child waits for a parent that has no run for the key: hand the end over again later.
    pub open: bool,
}

/// What handing an end over to one child did.
enum Claimed {
    /// A run was put QUEUED: to be sent.
    Queued(Run),
    /// A run was put ended (skipped): its own events are to be announced.
    Ended(Run),
    /// The child waits for another parent's run to end, or its run exists already.
    Nothing,
    /// The child waits for a parent that has no run for the key yet.
    Missing,
}

impl Cascade {
    /// Hands ends over through `claimer`, over the jobs and runs of `ports`.
    pub fn new(ports: &Ports, claimer: Claimer) -> Self {
        let Ports { jobs, runs, clock, .. } = ports.clone();
        Cascade { catalogue: jobs, history: runs.clone(), writes: runs, claimer, clock }
    }

    /// Hands the end of `run` (of `job`) over to `job`'s children. Repeating it is harmless:
    /// every run it writes is fenced by its key.
    pub async fn follow(&self, job: &Job, run: &Run) -> Result<HandOver, StoreError> {
        let children = children_of(self.catalogue.as_ref(), job).await?;
        let mut done = HandOver::default();
        if children.is_empty() {
            return Ok(done);
        }
        // A workflow run started by hand waits only for the parents that follow its root.
        let members = match &run.workflow {
            Some(root) => Some(self.descendants(root).await?),
            None => None,
        };
        let mut queued = Vec::new();
        for child in children {
            match self.claim_child(&child, run, members.as_ref()).await? {
                Claimed::Queued(new) => queued.push(new),
                Claimed::Ended(new) => done.ended.push((child, new)),
                Claimed::Nothing => {}
                Claimed::Missing => done.open = true,
            }
        }
        for (new, sent) in queued.iter().zip(self.claimer.send(&queued).await) {
            if let Err(e) = sent {
                tracing::warn!(run_id = %new.id(), error = %e, "child run not sent yet; the watchdog will send it");
            }
        }
        Ok(done)
    }

    /// `root` and every job below it.
    async fn descendants(&self, root: &JobId) -> Result<BTreeSet<JobId>, StoreError> {
        let mut seen = BTreeSet::from([root.clone()]);
        let mut level = self.catalogue.get_many(std::slice::from_ref(root)).await?;
        while !level.is_empty() {
            let mut next = Vec::new();
            for job in &level {
                for child in children_of(self.catalogue.as_ref(), job).await? {
                    if seen.insert(child.id.clone()) {
                        next.push(child);
                    }
                }
            }
            level = next;
        }
        Ok(seen)
    }

    /// Puts `child`'s run for `parent_run`'s key if every parent (of the workflow, for a run
    /// started by hand) has ended its run for that key.
    async fn claim_child(
        &self,
        child: &Job,
        parent_run: &Run,
        members: Option<&BTreeSet<JobId>>,
    ) -> Result<Claimed, StoreError> {
        let key = &parent_run.key;
        if self.history.get(&child.id, key).await?.is_some() {
            return Ok(Claimed::Nothing);
        }
        let now = self.clock.now();
        let ready =
            parents_readiness(self.catalogue.as_ref(), self.history.as_ref(), child, key, members, now)
                .await?;
        let skip = match ready {
            Readiness::Wait => return Ok(Claimed::Nothing),
            Readiness::Missing => return Ok(Claimed::Missing),
            Readiness::Skip(reason) => Some(reason),
            Readiness::Run => child.document.paused.then(|| "paused".to_string()),
        };
        // Due when the workflow run was: a child's deadlines count from there, and children of a
        // backfilled instant are not all late at once.
        let mut new = self.claimer.new_run(child, key.clone(), parent_run.due_at, now);
        new.workflow = parent_run.workflow.clone();
        if let Some(reason) = skip {
            // A run just made is QUEUED, which a skip always applies to: a refusal is a defect.
            new = transition::apply(child, &new, &Step::Skip { reason }, now)
                .map_err(|refused| StoreError::Rejected(format!("a new run cannot be skipped: {refused}")))?
                .run;
        }
        let inserted = self.writes.insert(&new, None).await?;
        if matches!(inserted, Inserted::Created) {
            self.claimer.trace(std::slice::from_ref(&new)).await;
        }
        Ok(match inserted {
            Inserted::Created if new.state.is_terminal() => Claimed::Ended(new),
            Inserted::Created => Claimed::Queued(new),
            Inserted::Exists(_) => Claimed::Nothing,
        })
    }
}

/// Where `child` stands for `key` at `now`, from its parents' runs for it (only the parents in
/// `members`, for a workflow run started by hand). No parent to wait for is a wait: a child
/// runs only after a parent's run.
pub async fn parents_readiness(
    jobs: &dyn Catalogue,
    runs: &dyn RunHistory,
    child: &Job,
    key: &RunKey,
    members: Option<&BTreeSet<JobId>>,
    now: DateTime<Utc>,
) -> Result<Readiness, StoreError> {
    let mut parent_ids = child.parents();
    parent_ids.retain(|p| members.is_none_or(|m| m.contains(p)));
    if parent_ids.is_empty() {
        return Ok(Readiness::Wait);
    }
    let parents = jobs.get_many(&parent_ids).await?;
    if parents.len() < parent_ids.len() {
        // A parent was left out of the read (its stored job does not decode; a parent with
        // children cannot be deleted): its run cannot be judged, so the child does not run yet.
        tracing::warn!(child = %child.id, "a parent of the job could not be read; its run waits");
        return Ok(Readiness::Wait);
    }
    let mut found = Vec::with_capacity(parents.len());
    for parent in &parents {
        found.push(runs.get(&parent.id, key).await?);
    }
    let pairs: Vec<(&Job, Option<&Run>)> = parents.iter().zip(found.iter().map(Option::as_ref)).collect();
    Ok(readiness(child, &pairs, key.instant, now))
}
