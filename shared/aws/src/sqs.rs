//! The runs queue in SQS, sent to in batches of ten, at most [`SENDS_IN_FLIGHT`] batches at once,
//! with its dead-letter queue.

use crate::errors::queue_error;
use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{MessageSystemAttributeName, SendMessageBatchRequestEntry};
use sundial_domain::ports::queue::{QueueError, Received, RunInbox, RunQueue};
use sundial_domain::run_queue::{BATCH, Dispatch, HOLD_S, MAX_DELAY_S};

/// SQS's longest visibility timeout.
pub const MAX_VISIBILITY_S: u32 = 12 * 3600;

/// The most `SendMessageBatch` requests one send has in flight. Each holds a connection (a file
/// descriptor); a 256 MB Lambda has 1,024, shared with DynamoDB's calls (up to 32 per claim
/// batch, two batches at once). Eight batches of ten keep a burst's sends quick (about 80
/// messages per round trip) and the descriptors few, whatever the burst's size.
pub const SENDS_IN_FLIGHT: usize = 8;

/// The runs queue in SQS, sent to in batches of ten, with its dead-letter queue.
#[derive(Debug, Clone)]
pub struct SqsRunQueue {
    client: Client,
    url: String,
    dlq_url: String,
}

impl SqsRunQueue {
    pub fn new(client: Client, url: impl Into<String>, dlq_url: impl Into<String>) -> Self {
        SqsRunQueue { client, url: url.into(), dlq_url: dlq_url.into() }
    }

    async fn send_chunk(&self, chunk: &[Dispatch]) -> Vec<Result<(), QueueError>> {
        let mut entries = Vec::with_capacity(chunk.len());
        for (i, d) in chunk.iter().enumerate() {
            let body = match serde_json::to_string(&d.message) {
                Ok(body) => body,
                Err(e) => return chunk.iter().map(|_| Err(QueueError::Refused(e.to_string()))).collect(),
            };
            let entry = SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(body)
                .delay_seconds(d.delay_s.min(MAX_DELAY_S) as i32)
                .message_group_id(&d.tenant)
                .build();
            match entry {
                Ok(entry) => entries.push(entry),
                Err(e) => return chunk.iter().map(|_| Err(QueueError::Refused(e.to_string()))).collect(),
            }
        }
        match self.client.send_message_batch().queue_url(&self.url).set_entries(Some(entries)).send().await {
            Ok(out) => {
                let mut results: Vec<Result<(), QueueError>> = chunk.iter().map(|_| Ok(())).collect();
                for failed in out.failed() {
                    if let Some(slot) = failed.id().parse::<usize>().ok().and_then(|i| results.get_mut(i)) {
                        let text = failed.message().unwrap_or(failed.code()).to_string();
                        // SQS says whose fault a failed entry is: the sender's is for good.
                        *slot = Err(match failed.sender_fault() {
                            true => QueueError::Refused(text),
                            false => QueueError::Unavailable(text),
                        });
                    }
                }
                results
            }
            Err(e) => {
                let error = queue_error(e);
                chunk.iter().map(|_| Err(error.clone())).collect()
            }
        }
    }
}

#[async_trait]
impl RunQueue for SqsRunQueue {
    async fn send(&self, batch: &[Dispatch]) -> Vec<Result<(), QueueError>> {
        use futures::StreamExt;
        // `buffered` keeps the chunks' order: each result answers for the dispatch in its place.
        let sends: Vec<_> = batch.chunks(BATCH).map(|chunk| Box::pin(self.send_chunk(chunk))).collect();
        let results: Vec<Vec<Result<(), QueueError>>> =
            futures::stream::iter(sends).buffered(SENDS_IN_FLIGHT).collect().await;
        results.into_iter().flatten().collect()
    }
}

#[async_trait]
impl RunInbox for SqsRunQueue {
    async fn receive(&self, max: i32, wait_s: i32) -> Result<Vec<Received>, QueueError> {
        use aws_sdk_sqs::types::MessageSystemAttributeName;
        let out = self
            .client
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(max.clamp(1, 10))
            .wait_time_seconds(wait_s.clamp(0, 20))
            .visibility_timeout(HOLD_S as i32)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .map_err(queue_error)?;
        Ok(out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(|m| Received {
                receive_count: m
                    .attributes
                    .as_ref()
                    .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1),
                message_id: m.message_id.unwrap_or_default(),
                receipt: m.receipt_handle.unwrap_or_default(),
                body: m.body.unwrap_or_default(),
            })
            .collect())
    }

    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        self.client
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(queue_error)?;
        Ok(())
    }

    async fn set_visibility(&self, receipt: &str, seconds: u32) -> Result<(), QueueError> {
        self.client
            .change_message_visibility()
            .queue_url(&self.url)
            .receipt_handle(receipt)
            .visibility_timeout(seconds.min(MAX_VISIBILITY_S) as i32)
            .send()
            .await
            .map_err(queue_error)?;
        Ok(())
    }

    async fn dead_letter(&self, message: &Received, reason: &str) -> Result<(), QueueError> {
        self.forward_to_dead_letter(&message.body, reason).await?;
        self.delete(&message.receipt).await
    }

    async fn forward_to_dead_letter(&self, body: &str, reason: &str) -> Result<(), QueueError> {
        let attribute = aws_sdk_sqs::types::MessageAttributeValue::builder()
            .data_type("String")
            .string_value(reason)
            .build()
            .map_err(|e| QueueError::Refused(e.to_string()))?;
        self.client
            .send_message()
            .queue_url(&self.dlq_url)
            .message_body(body)
            .message_attributes("sundial_reason", attribute)
            .send()
            .await
            .map_err(queue_error)?;
        Ok(())
    }

    async fn redrive(&self) -> Result<usize, QueueError> {
        let mut moved = 0;
        loop {
            let out = self
                .client
                .receive_message()
                .queue_url(&self.dlq_url)
                .max_number_of_messages(10)
                .message_system_attribute_names(MessageSystemAttributeName::MessageGroupId)
                .send()
                .await
                .map_err(queue_error)?;
            let messages = out.messages.unwrap_or_default();
            if messages.is_empty() {
                return Ok(moved);
            }
            for m in messages {
                // The tenant goes back with the message, where the dead-letter queue kept it.
                let tenant = m
                    .attributes
                    .as_ref()
                    .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
                    .cloned();
                self.client
                    .send_message()
                    .queue_url(&self.url)
                    .message_body(m.body.unwrap_or_default())
                    .set_message_group_id(tenant)
                    .send()
                    .await
                    .map_err(queue_error)?;
                self.client
                    .delete_message()
                    .queue_url(&self.dlq_url)
                    .receipt_handle(m.receipt_handle.unwrap_or_default())
                    .send()
                    .await
                    .map_err(queue_error)?;
                moved += 1;
            }
        }
    }
}
