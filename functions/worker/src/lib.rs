//! The worker function's handler: an SQS batch in, the ids of the messages to retry out
//! (`ReportBatchItemFailures`), so one bad message never fails the batch.
//!
//! The same function serves two event sources: the runs queue (attempts) and its dead-letter
//! queue (runs whose messages gave up are recorded FAILED; undecodable messages are logged).

use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use lambda_runtime::{Error, LambdaEvent};
use sundial_app::worker::Worker;
use sundial_app::worker::poll::{Hold, Settled, handle_message};
use sundial_domain::ports::queue::{Received, RunInbox, RunQueue};

/// Who runs an attempt: the Lambda request id and its log stream.
pub fn worker_identity(request_id: &str) -> String {
    let stream = std::env::var("AWS_LAMBDA_LOG_STREAM_NAME").unwrap_or_default();
    format!("lambda:{request_id} {stream}").trim_end().to_string()
}

fn received(m: &SqsMessage) -> Received {
    Received {
        message_id: m.message_id.clone().unwrap_or_default(),
        receipt: m.receipt_handle.clone().unwrap_or_default(),
        body: m.body.clone().unwrap_or_default(),
        receive_count: m.attributes.get("ApproximateReceiveCount").and_then(|c| c.parse().ok()).unwrap_or(1),
    }
}

fn from_dead_letter_queue(m: &SqsMessage) -> bool {
    m.event_source_arn.as_deref().is_some_and(|arn| arn.ends_with("-dlq"))
}

/// Handles one batch.
pub async fn handle(
    worker: &Worker,
    queue: &dyn RunQueue,
    inbox: &dyn RunInbox,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let identity = worker_identity(&event.context.request_id);
    // Every message stays hidden until the batch returns and the event source deletes it.
    let hold = Hold::new(event.payload.records.iter().map(received).collect());
    let hold = &hold;
    let results = event.payload.records.iter().map(|record| {
        let identity = identity.clone();
        async move {
            let message = received(record);
            if from_dead_letter_queue(record) {
                let reason = format!("received {} times from the runs queue", message.receive_count);
                return match worker.dead_lettered(&message.body, &reason).await {
                    Ok(done) => {
                        tracing::warn!(message_id = %message.message_id, done = %done, "dead letter handled");
                        None
                    }
                    Err(e) => {
                        tracing::error!(message_id = %message.message_id, error = %e, "dead letter not handled; retried");
                        Some(message.message_id)
                    }
                };
            }
            // Reported a success, the event source deletes the message; a kept one is
            // reported failed, with the backoff already set on it.
            match handle_message(worker, queue, inbox, &message, &identity).await {
                Settled::Done => None,
                Settled::Kept => {
                    hold.release(&message.message_id);
                    Some(message.message_id)
                }
            }
        }
    });
    let failures = hold.over(inbox, futures::future::join_all(results)).await.into_iter().flatten();
    let mut response = SqsBatchResponse::default();
    response.batch_item_failures = failures
        .map(|id| {
            let mut f = BatchItemFailure::default();
            f.item_identifier = id;
            f
        })
        .collect();
    Ok(response)
}
