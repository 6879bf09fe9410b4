//! The local consumer of the runs queue: long-polls and applies each message's disposition, as
//! the Lambda event source mapping (with `ReportBatchItemFailures`) does in AWS.

use super::{Disposition, Worker};
use crate::queue::{QueueError, Received, RunInbox};
use futures::future::join_all;

/// Receives one batch (waiting up to `wait_s`), handles its messages concurrently and applies
/// their dispositions. Returns how many messages it handled.
pub async fn poll_once(
    worker: &Worker,
    inbox: &dyn RunInbox,
    worker_id: &str,
    wait_s: i32,
) -> Result<usize, QueueError> {
    let messages = inbox.receive(10, wait_s).await?;
    let handled = messages.iter().map(|m| async move {
        let disposition = worker.handle(&m.body, worker_id).await;
        if let Err(e) = apply(inbox, m, &disposition).await {
            // The message reappears after its visibility timeout and is handled again.
            tracing::warn!(message_id = %m.message_id, error = %e, "could not apply a disposition");
        }
    });
    join_all(handled).await;
    Ok(messages.len())
}

/// Deletes, delays or dead-letters one message.
pub async fn apply(
    inbox: &dyn RunInbox,
    message: &Received,
    disposition: &Disposition,
) -> Result<(), QueueError> {
    match disposition {
        Disposition::Delete => inbox.delete(&message.receipt).await,
        Disposition::RetryAfter(wait) => {
            let seconds = u32::try_from(wait.num_seconds().max(1)).unwrap_or(u32::MAX);
            inbox.retry_after(&message.receipt, seconds).await
        }
        Disposition::DeadLetter(reason) => {
            tracing::error!(message_id = %message.message_id, body = %message.body, reason = %reason, "dead-lettering a message");
            inbox.dead_letter(message, reason).await
        }
    }
}
