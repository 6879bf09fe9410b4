//! Per-job notification topics: a job's email, SMS, HTTPS and SQS endpoints subscribe to a topic
//! of that job, each with a filter policy on the events the job asked for.
//!
//! The topic's name is derived from the job id (`<stack>-job-<job id>`), so nothing about it is
//! stored on the job and IAM can scope Sundial's topic rights to the `<stack>-job-` prefix.
//! [`JobTopics::sync`] converges the topic onto the job's settings (create, subscribe,
//! unsubscribe, re-filter; remove when no endpoint is left), so calling it again repairs a
//! half-done sync. SNS allows 200 filter policies per topic, which rules out one shared topic
//! with a filter per job.

use crate::errors::{AwsError, topic_error};
use async_trait::async_trait;
use aws_sdk_sns::error::DisplayErrorContext;
use sundial_domain::events::{endpoints, has_endpoints};
use sundial_domain::job::{Job, JobId, NotifySettings};
use sundial_domain::ports::topics::{JobTopics, Subscription, SubscriptionStatus, TopicError};

/// How per-job topics are named and addressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicNames {
    /// `<stack>-job-`.
    prefix: String,
    /// `arn:aws:sns:<region>:<account>:`, taken from the shared events topic's ARN.
    arn_base: String,
}

impl TopicNames {
    pub fn new(stack: &str, events_topic_arn: &str) -> Self {
        let arn_base = match events_topic_arn.rsplit_once(':') {
            Some((base, _)) => format!("{base}:"),
            None => String::new(),
        };
        TopicNames { prefix: format!("{stack}-job-"), arn_base }
    }

    pub fn name(&self, job_id: &str) -> String {
        format!("{}{job_id}", self.prefix)
    }

    pub fn arn(&self, job_id: &str) -> String {
        format!("{}{}", self.arn_base, self.name(job_id))
    }
}

/// The filter policy of every subscription of a job: the events it asked for.
pub fn filter_policy(notify: &NotifySettings) -> String {
    let mut names: Vec<&str> = notify.on.iter().map(|k| k.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    serde_json::json!({ "event": names }).to_string()
}

/// Per-job topics in SNS.
#[derive(Debug, Clone)]
pub struct SnsJobTopics {
    client: aws_sdk_sns::Client,
    names: TopicNames,
}

struct Existing {
    arn: String,
    protocol: String,
    endpoint: String,
}

/// SNS's code for a topic or subscription that does not exist (any more).
const NOT_FOUND: &str = "NotFound";

impl SnsJobTopics {
    pub fn new(client: aws_sdk_sns::Client, names: TopicNames) -> Self {
        SnsJobTopics { client, names }
    }

    /// Every subscription of the topic; an absent topic has none.
    async fn existing(&self, topic: &str) -> Result<Vec<Existing>, TopicError> {
        let mut found = Vec::new();
        let mut next = None;
        loop {
            let out = match self
                .client
                .list_subscriptions_by_topic()
                .topic_arn(topic)
                .set_next_token(next)
                .send()
                .await
            {
                Ok(out) => out,
                Err(e) => {
                    let error = AwsError::of(&e);
                    return if error.is(NOT_FOUND) { Ok(Vec::new()) } else { Err(error.into()) };
                }
            };
            for s in out.subscriptions() {
                found.push(Existing {
                    arn: s.subscription_arn().unwrap_or_default().to_string(),
                    protocol: s.protocol().unwrap_or_default().to_string(),
                    endpoint: s.endpoint().unwrap_or_default().to_string(),
                });
            }
            next = out.next_token;
            if next.is_none() {
                return Ok(found);
            }
        }
    }

    /// What SNS says of the subscription `arn`: a listing may name a subscription by its ARN
    /// before its endpoint confirmed it (an emulator does; an HTTPS endpoint whose confirmation
    /// failed stays so), so its `PendingConfirmation` attribute decides.
    async fn status(&self, arn: &str) -> Result<SubscriptionStatus, TopicError> {
        let out = self.client.get_subscription_attributes().subscription_arn(arn).send().await;
        let attributes = match out {
            Ok(out) => out.attributes.unwrap_or_default(),
            // Gone since it was listed: it receives nothing.
            Err(e) if AwsError::of(&e).is(NOT_FOUND) => return Ok(SubscriptionStatus::PendingConfirmation),
            Err(e) => return Err(AwsError::of(&e).into()),
        };
        Ok(match attributes.get("PendingConfirmation").map(String::as_str) {
            Some("true") => SubscriptionStatus::PendingConfirmation,
            _ => SubscriptionStatus::Confirmed,
        })
    }

    async fn unsubscribe(&self, existing: &Existing) -> Result<(), TopicError> {
        if is_pending(&existing.arn) {
            // SNS cannot remove an unconfirmed subscription; it lapses after three days.
            return Ok(());
        }
        let sent = self.client.unsubscribe().subscription_arn(&existing.arn).send().await;
        match sent.map_err(|e| AwsError::of(&e)) {
            Ok(_) => Ok(()),
            Err(e) if e.is(NOT_FOUND) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// SNS shows an unconfirmed subscription's ARN as `PendingConfirmation`.
fn is_pending(arn: &str) -> bool {
    arn.is_empty() || arn.eq_ignore_ascii_case("PendingConfirmation")
}

#[async_trait]
impl JobTopics for SnsJobTopics {
    async fn sync(&self, job: &Job) -> Result<(), TopicError> {
        let Some(notify) = job.document.notify.as_ref().filter(|_| has_endpoints(job)) else {
            return self.remove(&job.id).await;
        };
        let topic = self
            .client
            .create_topic()
            .name(self.names.name(job.id.as_str()))
            // Encrypted at rest with the AWS-managed SNS key.
            .attributes("KmsMasterKeyId", "alias/aws/sns")
            .tags(tag("sundial:job", job.id.as_str())?)
            .send()
            .await
            .map_err(topic_error)?
            .topic_arn
            .ok_or_else(|| TopicError::Unavailable("CreateTopic returned no ARN".into()))?;
        let policy = filter_policy(notify);
        let wanted = endpoints(notify);
        let existing = self.existing(&topic).await?;
        for old in &existing {
            let kept = wanted.iter().any(|(p, e, _)| *p == old.protocol && *e == old.endpoint);
            if !kept {
                self.unsubscribe(old).await?;
            } else if !is_pending(&old.arn) {
                self.client
                    .set_subscription_attributes()
                    .subscription_arn(&old.arn)
                    .attribute_name("FilterPolicy")
                    .attribute_value(&policy)
                    .send()
                    .await
                    .map_err(topic_error)?;
            }
        }
        for (protocol, endpoint, field) in &wanted {
            if existing.iter().any(|old| old.protocol == *protocol && old.endpoint == *endpoint) {
                continue;
            }
            let mut request = self
                .client
                .subscribe()
                .topic_arn(&topic)
                .protocol(*protocol)
                .endpoint(endpoint)
                .attributes("FilterPolicy", &policy);
            if matches!(*protocol, "sqs" | "https") {
                // Machines get the JSON body itself, without the SNS envelope.
                request = request.attributes("RawMessageDelivery", "true");
            }
            request.send().await.map_err(|e| {
                let error = AwsError::of(&e);
                if error.is("InvalidParameter") {
                    let reason = error.message.unwrap_or_else(|| "rejected by SNS".into());
                    TopicError::Rejected { field: field.clone(), reason }
                } else {
                    error.into()
                }
            })?;
        }
        Ok(())
    }

    async fn remove(&self, job_id: &JobId) -> Result<(), TopicError> {
        let topic = self.names.arn(job_id.as_str());
        for old in self.existing(&topic).await? {
            self.unsubscribe(&old).await?;
        }
        let sent = self.client.delete_topic().topic_arn(&topic).send().await;
        match sent.map_err(|e| AwsError::of(&e)) {
            Ok(_) => Ok(()),
            Err(e) if e.is(NOT_FOUND) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn subscriptions(&self, job_id: &JobId) -> Result<Vec<Subscription>, TopicError> {
        let existing = self.existing(&self.names.arn(job_id.as_str())).await?;
        let mut shown = Vec::with_capacity(existing.len());
        for s in existing {
            let status = match is_pending(&s.arn) {
                true => SubscriptionStatus::PendingConfirmation,
                false => self.status(&s.arn).await?,
            };
            shown.push(Subscription { status, protocol: s.protocol, endpoint: s.endpoint });
        }
        Ok(shown)
    }
}

fn tag(key: &str, value: &str) -> Result<aws_sdk_sns::types::Tag, TopicError> {
    let tag = aws_sdk_sns::types::Tag::builder().key(key).value(value).build();
    tag.map_err(|e| TopicError::Unavailable(DisplayErrorContext(e).to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_events_topic() {
        let names = TopicNames::new("sundial", "arn:aws:sns:eu-west-1:123456789012:sundial-events");
        assert_eq!(names.name("01abc"), "sundial-job-01abc");
        assert_eq!(names.arn("01abc"), "arn:aws:sns:eu-west-1:123456789012:sundial-job-01abc");
    }

    #[test]
    fn filter_policy_lists_the_events_asked_for() {
        let notify: NotifySettings = serde_json::from_value(serde_json::json!({
            "on": ["timed_out", "failed", "failed"], "email": ["a@b.test"]
        }))
        .unwrap();
        assert_eq!(filter_policy(&notify), r#"{"event":["failed","timed_out"]}"#);
        let all = endpoints(&notify);
        assert_eq!(all, vec![("email", "a@b.test".to_string(), "notify.email[0]".to_string())]);
    }

    #[test]
    fn unconfirmed_subscriptions_are_pending() {
        assert!(is_pending("PendingConfirmation"));
        assert!(is_pending("pending confirmation".replace(' ', "").as_str()));
        assert!(!is_pending("arn:aws:sns:us-east-1:123456789012:t:5f1c"));
    }
}
