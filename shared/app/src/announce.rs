//! Announcing a run's events: publish each unsent event once, to the shared topic and, when the
//! job asked for it, to the job's topic, then mark what was published in one write. A crash
//! between publishing and marking can send an event twice; a crash before publishing leaves it
//! unsent, for the watchdog to publish: a pass takes an event over with a conditional write
//! first, so overlapping passes never both publish it, and a publish that reached the shared
//! topic but not the job's is marked so, so that a retry sends it to the job's topic only.
//!
//! The `downstream` event is not told to anyone: it is handed to the [`Cascade`], which claims
//! the runs of the job's children, and is marked sent once it has. Children's runs it writes
//! ended (skipped) are announced in turn.

use crate::workflow::cascade::Cascade;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::events::{Notification, wants};
use sundial_domain::job::{EventKind, Job};
use sundial_domain::ports::bus::EventBus;
use sundial_domain::ports::store::{Race, Raced, RunStore, StoreError};
use sundial_domain::run::{Published, Run, RunEvent};

/// Publishes the events of runs and marks them sent.
#[derive(Debug, Clone)]
pub struct Announcer {
    bus: Arc<dyn EventBus>,
    runs: Arc<dyn RunStore>,
    public_url: Option<String>,
    /// Where `downstream` events go; without one they stay unsent (and the run in flight).
    cascade: Option<Cascade>,
}

impl Announcer {
    pub fn new(bus: Arc<dyn EventBus>, runs: Arc<dyn RunStore>, public_url: Option<String>) -> Self {
        Announcer { bus, runs, public_url, cascade: None }
    }

    /// The same, handing `downstream` events to `cascade`.
    pub fn with_cascade(self, cascade: Cascade) -> Self {
        Announcer { cascade: Some(cascade), ..self }
    }

    pub fn bus(&self) -> &Arc<dyn EventBus> {
        &self.bus
    }

    /// Publishes `events` of `run` (those not yet sent) to the shared topic, unless a partial
    /// publish already reached it, and, when the job asked for them, to the job's topic; marks
    /// what was published in one write, and lets an ended run whose events are all published
    /// leave the in-flight index. A failure leaves the event unsent (and is logged) for the
    /// watchdog to publish. `job` is `None` once the job is deleted. Returns how many events
    /// were published everywhere they go.
    pub async fn announce(&self, job: Option<&Job>, run: &Run, events: &[RunEvent]) -> usize {
        if events.iter().all(|e| e.sent) {
            return 0;
        }
        let mut published = Published::default();
        let mut ended_children = Vec::new();
        for event in events.iter().filter(|e| !e.sent) {
            if event.kind == EventKind::Downstream {
                match self.hand_over(job, run).await {
                    Ok(ended) => {
                        published.sent.push(event.id.clone());
                        ended_children.extend(ended);
                    }
                    Err(e) => {
                        tracing::warn!(run_id = %run.id(), error = %e, "run's end not yet handed to its children")
                    }
                }
                continue;
            }
            let notification = Notification::new(job, run, event, self.public_url.as_deref());
            if !event.shared_sent {
                if let Err(e) = self.bus.publish(&notification).await {
                    tracing::warn!(run_id = %run.id(), event = %event.id, error = %e, "event left unsent");
                    continue;
                }
            }
            if job.is_some_and(|j| wants(j, event.kind)) {
                if let Err(e) = self.bus.publish_to_job(&notification).await {
                    tracing::warn!(run_id = %run.id(), event = %event.id, error = %e, "event left unsent to the job's topic");
                    if !event.shared_sent {
                        published.shared_only.push(event.id.clone());
                    }
                    continue;
                }
            }
            published.sent.push(event.id.clone());
        }
        let all_sent = run.events.iter().all(|e| e.sent || published.sent.contains(&e.id));
        let settle = run.state.is_terminal() && all_sent;
        let mut marked = self.runs.mark_events_sent(run, &published, settle).await;
        if settle && matches!(marked, Err(StoreError::Conflict)) {
            // The store holds an event this copy lacks: marked without settling, the run stays
            // in flight for the watchdog, which reads it whole.
            marked = self.runs.mark_events_sent(run, &published, false).await;
        }
        if let Err(e) = marked {
            tracing::warn!(run_id = %run.id(), error = %e, "published events not marked sent");
        }
        for (child, ended) in ended_children {
            Box::pin(self.announce(Some(&child), &ended, &ended.events)).await;
        }
        published.sent.len()
    }

    /// Hands the end of `run` over to its job's children; a deleted job has none left.
    async fn hand_over(&self, job: Option<&Job>, run: &Run) -> Result<Vec<(Job, Run)>, StoreError> {
        match (job, &self.cascade) {
            (None, _) => Ok(Vec::new()),
            (Some(job), Some(cascade)) => cascade.follow(job, run).await,
            (Some(_), None) => Err(StoreError::Unavailable("no cascade in this process".into())),
        }
    }

    /// Publishes events a crash or a failed publish left unsent, each taken over first with a
    /// conditional write so that of overlapping passes only one publishes it (`now` is the
    /// take-over's time). Returns how many were published everywhere they go.
    pub async fn republish(
        &self,
        job: Option<&Job>,
        run: &Run,
        stale: &[RunEvent],
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError> {
        let mut taken = Vec::with_capacity(stale.len());
        for event in stale {
            // Lost: another pass took it (or it was sent meanwhile), and that pass publishes it.
            if let Race::Won(()) = self.runs.take_event(run, event, now).await.raced()? {
                taken.push(RunEvent { taken_at: Some(now), ..event.clone() });
            }
        }
        if taken.is_empty() {
            return Ok(0);
        }
        Ok(self.announce(job, run, &taken).await)
    }
}
