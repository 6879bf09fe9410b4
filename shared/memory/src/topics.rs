//! Per-job topics in memory: [`MemoryTopics`], a [`JobTopics`] that keeps each job's
//! subscriptions as the SNS adapter (`sundial_aws::sns::topics`) leaves them in SNS.
//!
//! `sync` converges a job's subscriptions onto its notification settings: endpoints no longer
//! wanted are unsubscribed, except unconfirmed ones (SNS cannot remove those; they lapse), new
//! ones are subscribed with the job's events as their filter, and a job without endpoints has
//! no topic. As in SNS, `email` and `https` subscriptions stay pending until confirmed
//! ([`MemoryTopics::confirm`]), `sms` and `sqs` ones are confirmed at once, and a pending
//! subscription keeps the filter it was made with. An endpoint can be made to be refused
//! ([`MemoryTopics::refuse`]), and the whole service to be unavailable.

use crate::guard::lock;
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;
use sundial_domain::events::{endpoints, has_endpoints};
use sundial_domain::job::{EventKind, Job, JobId};
use sundial_domain::ports::topics::{JobTopics, Subscription, SubscriptionStatus, TopicError};

/// One subscription of a job's topic, with its filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribed {
    pub protocol: String,
    pub endpoint: String,
    pub status: SubscriptionStatus,
    /// The events its filter policy lets through, sorted, without repeats.
    pub events: Vec<EventKind>,
}

#[derive(Debug, Default)]
struct State {
    topics: HashMap<JobId, Vec<Subscribed>>,
    /// Endpoint → why SNS refuses it.
    refused: HashMap<String, String>,
    unavailable: bool,
}

/// Per-job topics in memory.
#[derive(Debug, Default)]
pub struct MemoryTopics {
    state: Mutex<State>,
}

impl MemoryTopics {
    pub fn new() -> Self {
        MemoryTopics::default()
    }

    /// The job's subscriptions with their filters (empty: no topic).
    pub fn subscribed(&self, job_id: &JobId) -> Vec<Subscribed> {
        lock(&self.state).topics.get(job_id).cloned().unwrap_or_default()
    }

    /// Whether the job has a topic.
    pub fn has_topic(&self, job_id: &JobId) -> bool {
        lock(&self.state).topics.contains_key(job_id)
    }

    /// The person at `endpoint` confirms the job's pending subscription.
    pub fn confirm(&self, job_id: &JobId, endpoint: &str) {
        let mut state = lock(&self.state);
        for s in state.topics.get_mut(job_id).into_iter().flatten().filter(|s| s.endpoint == endpoint) {
            s.status = SubscriptionStatus::Confirmed;
        }
    }

    /// Makes SNS refuse subscribing `endpoint`, for `reason`.
    pub fn refuse(&self, endpoint: &str, reason: &str) {
        lock(&self.state).refused.insert(endpoint.to_string(), reason.to_string());
    }

    /// Makes every call fail as unavailable (`true`) or work again.
    pub fn set_unavailable(&self, unavailable: bool) {
        lock(&self.state).unavailable = unavailable;
    }
}

/// SNS keeps these pending until the endpoint confirms.
fn needs_confirmation(protocol: &str) -> bool {
    matches!(protocol, "email" | "email-json" | "http" | "https")
}

fn unavailable() -> TopicError {
    TopicError::Unavailable("injected: notification topics unavailable".into())
}

#[async_trait]
impl JobTopics for MemoryTopics {
    async fn sync(&self, job: &Job) -> Result<(), TopicError> {
        let Some(notify) = job.document.notify.as_ref().filter(|_| has_endpoints(job)) else {
            return self.remove(&job.id).await;
        };
        let mut state = lock(&self.state);
        if state.unavailable {
            return Err(unavailable());
        }
        let mut events = notify.on.clone();
        events.sort_unstable();
        events.dedup();
        let wanted = endpoints(notify);
        let refused = state.refused.clone();
        let subscriptions = state.topics.entry(job.id.clone()).or_default();
        subscriptions.retain(|old| {
            let kept = wanted.iter().any(|(p, e, _)| *p == old.protocol && *e == old.endpoint);
            kept || old.status == SubscriptionStatus::PendingConfirmation
        });
        for old in subscriptions.iter_mut().filter(|s| s.status == SubscriptionStatus::Confirmed) {
            old.events = events.clone();
        }
        for (protocol, endpoint, field) in wanted {
            if subscriptions.iter().any(|old| old.protocol == protocol && old.endpoint == endpoint) {
                continue;
            }
            if let Some(reason) = refused.get(&endpoint) {
                // What was subscribed before the refusal stays, as in SNS.
                return Err(TopicError::Rejected { field, reason: reason.clone() });
            }
            let status = if needs_confirmation(protocol) {
                SubscriptionStatus::PendingConfirmation
            } else {
                SubscriptionStatus::Confirmed
            };
            subscriptions.push(Subscribed {
                protocol: protocol.to_string(),
                endpoint,
                status,
                events: events.clone(),
            });
        }
        Ok(())
    }

    async fn remove(&self, job_id: &JobId) -> Result<(), TopicError> {
        let mut state = lock(&self.state);
        if state.unavailable {
            return Err(unavailable());
        }
        state.topics.remove(job_id);
        Ok(())
    }

    async fn subscriptions(&self, job_id: &JobId) -> Result<Vec<Subscription>, TopicError> {
        let state = lock(&self.state);
        if state.unavailable {
            return Err(unavailable());
        }
        Ok(state
            .topics
            .get(job_id)
            .into_iter()
            .flatten()
            .map(|s| Subscription {
                protocol: s.protocol.clone(),
                endpoint: s.endpoint.clone(),
                status: s.status,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn job(notify: serde_json::Value) -> Job {
        let document = serde_json::from_value(serde_json::json!({
            "name": "n", "target": {"type": "http", "url": "https://x.test/"}, "notify": notify
        }))
        .unwrap();
        Job {
            id: JobId::generate(),
            owner: "o".into(),
            document,
            version: 1,
            created_at: chrono::DateTime::UNIX_EPOCH,
            updated_at: chrono::DateTime::UNIX_EPOCH,
            next_run_at: None,
            signing_secret: String::new(),
            pauses: Vec::new(),
            children: Vec::new(),
            gaps: Vec::new(),
            skips: Vec::new(),
            counted: Default::default(),
            baseline: None,
            versions: Vec::new(),
        }
    }

    #[tokio::test]
    async fn subscriptions_follow_the_settings_and_pending_ones_linger() {
        let topics = MemoryTopics::new();
        let mut j = job(serde_json::json!({"on": ["failed"], "email": ["a@x.test"], "sms": ["+15550100"]}));
        topics.sync(&j).await.unwrap();
        let shown = topics.subscriptions(&j.id).await.unwrap();
        let statuses: Vec<_> = shown.iter().map(|s| (s.protocol.as_str(), s.status)).collect();
        assert_eq!(
            statuses,
            [("email", SubscriptionStatus::PendingConfirmation), ("sms", SubscriptionStatus::Confirmed)]
        );
        // Neither endpoint wanted any more: the confirmed one goes, the pending one cannot.
        j = Job { document: job(serde_json::json!({"on": ["timed_out"], "sqs": ["arn:q"]})).document, ..j };
        topics.sync(&j).await.unwrap();
        let left: Vec<_> = topics.subscribed(&j.id).into_iter().map(|s| (s.protocol, s.events)).collect();
        assert_eq!(
            left,
            [("email".into(), vec![EventKind::Failed]), ("sqs".into(), vec![EventKind::TimedOut])]
        );
        topics.confirm(&j.id, "a@x.test");
        topics.refuse("+15550199", "bad number");
        let refused = Job { document: job(serde_json::json!({"sms": ["+15550199"]})).document, ..j.clone() };
        let err = topics.sync(&refused).await.unwrap_err();
        assert_eq!(err, TopicError::Rejected { field: "notify.sms[0]".into(), reason: "bad number".into() });
        let none = Job { document: job(serde_json::json!(null)).document, ..j };
        topics.sync(&none).await.unwrap();
        assert!(!topics.has_topic(&none.id), "no endpoints, no topic");
        topics.set_unavailable(true);
        assert!(matches!(topics.subscriptions(&none.id).await, Err(TopicError::Unavailable(_))));
    }
}
