//! The event bus in memory: [`MemoryEventBus`], an [`EventBus`] that records what is published
//! where (the shared events topic, a job's topic, scheduler alerts) and can be told to fail, per
//! destination, as SNS does when a topic is unreachable or gone. A failed publish records nothing.

use crate::guard::lock;
use async_trait::async_trait;
use std::sync::Mutex;
use sundial_domain::events::{JobNotice, Notification, SchedulerAlert};
use sundial_domain::ports::bus::{EventBus, PublishError};

/// Where a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Destination {
    /// The shared events topic (operators).
    Shared,
    /// A job's own topic.
    Job,
    /// Scheduler alerts, on the shared topic.
    Alerts,
}

#[derive(Debug, Default)]
struct State {
    shared: Vec<Notification>,
    to_jobs: Vec<Notification>,
    alerts: Vec<SchedulerAlert>,
    /// Job notices, each with whether it also went to the job's topic.
    notices: Vec<(JobNotice, bool)>,
    failing: Vec<Destination>,
}

/// An event bus that records what it is given.
#[derive(Debug, Default)]
pub struct MemoryEventBus {
    state: Mutex<State>,
}

impl MemoryEventBus {
    pub fn new() -> Self {
        MemoryEventBus::default()
    }

    /// Makes publishing to `destination` fail (`failing`) or work again.
    pub fn fail(&self, destination: Destination, failing: bool) {
        let mut state = lock(&self.state);
        state.failing.retain(|d| *d != destination);
        if failing {
            state.failing.push(destination);
        }
    }

    /// What was published to the shared events topic, in order.
    pub fn published(&self) -> Vec<Notification> {
        lock(&self.state).shared.clone()
    }

    /// What was published to jobs' topics, in order.
    pub fn published_to_jobs(&self) -> Vec<Notification> {
        lock(&self.state).to_jobs.clone()
    }

    /// The job notices published (each with whether it reached the job's topic too), in order.
    pub fn notices(&self) -> Vec<(JobNotice, bool)> {
        lock(&self.state).notices.clone()
    }

    /// The scheduler alerts published, in order.
    pub fn alerts(&self) -> Vec<SchedulerAlert> {
        lock(&self.state).alerts.clone()
    }

    /// Records `item` in the list `pick` chooses, unless `destination` is failing.
    fn record<T>(
        &self,
        destination: Destination,
        item: &T,
        pick: impl FnOnce(&mut State) -> &mut Vec<T>,
    ) -> Result<(), PublishError>
    where
        T: Clone,
    {
        let mut state = lock(&self.state);
        if state.failing.contains(&destination) {
            return Err(PublishError::Unavailable(format!("injected failure publishing to {destination:?}")));
        }
        pick(&mut state).push(item.clone());
        Ok(())
    }
}

#[async_trait]
impl EventBus for MemoryEventBus {
    async fn publish(&self, notification: &Notification) -> Result<(), PublishError> {
        self.record(Destination::Shared, notification, |s| &mut s.shared)
    }

    async fn publish_to_job(&self, notification: &Notification) -> Result<(), PublishError> {
        self.record(Destination::Job, notification, |s| &mut s.to_jobs)
    }

    async fn publish_notice(&self, notice: &JobNotice, to_job: bool) -> Result<(), PublishError> {
        let item = (notice.clone(), to_job);
        self.record(Destination::Shared, &item, |s| &mut s.notices)?;
        if to_job && lock(&self.state).failing.contains(&Destination::Job) {
            return Err(PublishError::Unavailable("injected failure publishing to Job".into()));
        }
        Ok(())
    }

    async fn alert(&self, alert: &SchedulerAlert) -> Result<(), PublishError> {
        self.record(Destination::Alerts, alert, |s| &mut s.alerts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sundial_domain::events::SchedulerAlert;

    fn alert() -> SchedulerAlert {
        SchedulerAlert { event: SchedulerAlert::STALLED, watermark: None, at: chrono::DateTime::UNIX_EPOCH }
    }

    #[tokio::test]
    async fn records_what_it_publishes_and_fails_when_told() {
        let bus = MemoryEventBus::new();
        bus.alert(&alert()).await.unwrap();
        bus.fail(Destination::Alerts, true);
        assert!(bus.alert(&alert()).await.is_err());
        assert_eq!(bus.alerts().len(), 1, "a failed publish records nothing");
        bus.fail(Destination::Alerts, false);
        bus.alert(&alert()).await.unwrap();
        assert_eq!(bus.alerts(), vec![alert(), alert()]);
        assert!(bus.published().is_empty() && bus.published_to_jobs().is_empty());
    }
}
