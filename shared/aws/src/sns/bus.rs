//! The event bus in SNS: the shared events topic, with the attributes `event`, `job_id`,
//! `job_name` and `owner` for operators' filter policies, and the per-job topics. Each message
//! carries a body per protocol: a short text for email and SMS, JSON for HTTPS and SQS.

use super::topics::TopicNames;
use crate::errors::publish_error;
use async_trait::async_trait;
use sundial_domain::events::{JobNotice, Notification, SchedulerAlert};
use sundial_domain::ports::bus::{EventBus, PublishError};

/// SNS: the shared events topic, and the per-job topics named by [`TopicNames`].
#[derive(Debug, Clone)]
pub struct SnsEventBus {
    client: aws_sdk_sns::Client,
    topic_arn: String,
    names: TopicNames,
}

impl SnsEventBus {
    pub fn new(client: aws_sdk_sns::Client, topic_arn: impl Into<String>, names: TopicNames) -> Self {
        SnsEventBus { client, topic_arn: topic_arn.into(), names }
    }

    async fn send(
        &self,
        topic: &str,
        subject: String,
        bodies: serde_json::Value,
        attributes: &[(&str, &str)],
    ) -> Result<(), PublishError> {
        use aws_sdk_sns::types::MessageAttributeValue;
        let mut request = self
            .client
            .publish()
            .topic_arn(topic)
            .subject(subject)
            .message_structure("json")
            .message(bodies.to_string());
        for (name, value) in attributes {
            let value = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(*value)
                .build()
                .map_err(|e| PublishError::Refused(e.to_string()))?;
            request = request.message_attributes(*name, value);
        }
        request.send().await.map_err(publish_error)?;
        Ok(())
    }

    async fn publish_at(&self, topic: &str, n: &Notification) -> Result<(), PublishError> {
        let json = serde_json::to_string(n).map_err(|e| PublishError::Refused(e.to_string()))?;
        let bodies = protocol_bodies(&json, &n.text(), &n.short_text());
        let attributes =
            [("event", n.event), ("job_id", &n.job_id), ("job_name", &n.job_name), ("owner", &n.owner)];
        self.send(topic, n.subject(), bodies, &attributes).await
    }
}

/// SNS's per-protocol message (`MessageStructure: json`): JSON for machines, text for people.
pub fn protocol_bodies(json: &str, text: &str, short: &str) -> serde_json::Value {
    serde_json::json!({
        "default": json,
        "sqs": json,
        "https": json,
        "http": json,
        "lambda": json,
        "email": text,
        "email-json": json,
        "sms": short,
    })
}

#[async_trait]
impl EventBus for SnsEventBus {
    async fn publish(&self, n: &Notification) -> Result<(), PublishError> {
        self.publish_at(&self.topic_arn, n).await
    }

    async fn publish_to_job(&self, n: &Notification) -> Result<(), PublishError> {
        self.publish_at(&self.names.arn(&n.job_id), n).await
    }

    async fn publish_notice(&self, notice: &JobNotice, to_job: bool) -> Result<(), PublishError> {
        let json = serde_json::to_string(notice).map_err(|e| PublishError::Refused(e.to_string()))?;
        let bodies = protocol_bodies(&json, &notice.text(), &notice.short_text());
        let attributes = [
            ("event", notice.event),
            ("job_id", &notice.job_id),
            ("job_name", &notice.job_name),
            ("owner", &notice.owner),
        ];
        self.send(&self.topic_arn, notice.subject(), bodies.clone(), &attributes).await?;
        if to_job {
            self.send(&self.names.arn(&notice.job_id), notice.subject(), bodies, &attributes).await?;
        }
        Ok(())
    }

    async fn alert(&self, alert: &SchedulerAlert) -> Result<(), PublishError> {
        let json = serde_json::to_string(alert).map_err(|e| PublishError::Refused(e.to_string()))?;
        let text = alert.text();
        let bodies = protocol_bodies(&json, &text, &text);
        self.send(&self.topic_arn, format!("Sundial: {}", alert.event), bodies, &[("event", alert.event)])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machines_get_json_and_people_get_text() {
        let bodies = protocol_bodies(r#"{"event":"failed"}"#, "Job nightly failed", "nightly failed");
        for machine in ["default", "sqs", "https", "http", "lambda", "email-json"] {
            assert_eq!(bodies[machine], r#"{"event":"failed"}"#, "{machine}");
        }
        assert_eq!(bodies["email"], "Job nightly failed");
        assert_eq!(bodies["sms"], "nightly failed");
    }
}
