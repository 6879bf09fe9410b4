//! Consuming the runs queue: what becomes of a message once the worker has handled it, the hold
//! a consumer keeps on a message while it works, and the local poller, which does what the
//! Lambda event source mapping (with `ReportBatchItemFailures`) does in AWS.
//!
//! A message costs a receive only when something failed: a wait is a replacement message with a
//! delay, and a consumer that dies loses its hold within [`HOLD_S`] seconds, not the queue's
//! visibility timeout.

use super::{Disposition, Worker};
use std::future::Future;
use std::sync::Arc;
use sundial_domain::ports::queue::{QueueError, Received, RunInbox, RunQueue};
use sundial_domain::run_queue::{HOLD_RENEW_S, HOLD_S, transient_backoff_s};
use tokio::sync::watch;

/// Where a message stands once its disposition is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Finished with: the consumer deletes it (in Lambda, the event source does).
    Done,
    /// Left on the queue, hidden for a backoff: it comes back.
    Kept,
}

/// Applies a disposition short of the delete: sends the replacement, forwards a dead letter,
/// or hides the message for its backoff when that is what it needs or a send failed.
pub async fn settle(
    queue: &dyn RunQueue,
    inbox: &dyn RunInbox,
    message: &Received,
    disposition: &Disposition,
) -> Settled {
    let sent: Result<(), QueueError> = match disposition {
        Disposition::Delete => return Settled::Done,
        Disposition::Replace(next) => {
            queue.send(std::slice::from_ref(next)).await.into_iter().next().unwrap_or(Ok(()))
        }
        Disposition::DeadLetter(reason) => {
            tracing::error!(message_id = %message.message_id, body = %message.body, reason = %reason, "dead-lettering a message");
            inbox.forward_to_dead_letter(&message.body, reason).await
        }
        Disposition::Retry => Err(QueueError::Unavailable("the worker met a transient failure".into())),
    };
    match sent {
        Ok(()) => Settled::Done,
        Err(e) => {
            let backoff = transient_backoff_s(message.receive_count);
            tracing::warn!(message_id = %message.message_id, error = %e, backoff_s = backoff, "message kept for another receive");
            if let Err(e) = inbox.set_visibility(&message.receipt, backoff).await {
                // It comes back when its hold runs out instead.
                tracing::warn!(message_id = %message.message_id, error = %e, "could not set the backoff");
            }
            Settled::Kept
        }
    }
}

/// Messages a consumer keeps hidden while it works: their hold is renewed every
/// [`HOLD_RENEW_S`] seconds until the work ends, so a consumer that dies releases them within
/// [`HOLD_S`]. In Lambda the event source deletes a batch's messages only when the whole batch
/// returns, so every message of a batch stays held as long as its slowest one, except those
/// released because they were kept for a backoff (renewing would cut their backoff short).
#[derive(Debug)]
pub struct Hold {
    messages: std::sync::Mutex<Vec<Received>>,
}

impl Hold {
    pub fn new(messages: Vec<Received>) -> Self {
        Hold { messages: std::sync::Mutex::new(messages) }
    }

    /// Stops renewing a message (it was kept, with its backoff set).
    pub fn release(&self, message_id: &str) {
        self.messages.lock().unwrap_or_else(|e| e.into_inner()).retain(|m| m.message_id != message_id);
    }

    /// Runs `work` while renewing the hold of the messages not released.
    pub async fn over<T>(&self, inbox: &dyn RunInbox, work: impl Future<Output = T>) -> T {
        let every = std::time::Duration::from_secs(HOLD_RENEW_S);
        let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tokio::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return out,
                _ = renew.tick() => {
                    let held = self.messages.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    for message in held {
                        if let Err(e) = inbox.set_visibility(&message.receipt, HOLD_S).await {
                            tracing::warn!(message_id = %message.message_id, error = %e, "could not renew a message's hold");
                        }
                    }
                }
            }
        }
    }
}

/// Handles one received message, then settles it (without deleting it). The caller holds it.
pub async fn handle_message(
    worker: &Worker,
    queue: &dyn RunQueue,
    inbox: &dyn RunInbox,
    message: &Received,
    worker_id: &str,
) -> Settled {
    let disposition = worker.handle(&message.body, worker_id).await;
    settle(queue, inbox, message, &disposition).await
}

/// Handles, settles and, when done, deletes one message.
pub async fn consume_one(
    worker: &Worker,
    queue: &dyn RunQueue,
    inbox: &dyn RunInbox,
    m: &Received,
    id: &str,
) {
    let settled = Hold::new(vec![m.clone()]).over(inbox, handle_message(worker, queue, inbox, m, id)).await;
    if settled == Settled::Done
        && let Err(e) = inbox.delete(&m.receipt).await
    {
        // It comes back after its hold and is recognised as handled.
        tracing::warn!(message_id = %m.message_id, error = %e, "could not delete a handled message");
    }
}

/// Receives one batch (waiting up to `wait_s`) and handles its messages concurrently. Returns
/// how many messages it handled.
pub async fn poll_once(
    worker: &Worker,
    queue: &dyn RunQueue,
    inbox: &dyn RunInbox,
    worker_id: &str,
    wait_s: i32,
) -> Result<usize, QueueError> {
    let messages = inbox.receive(10, wait_s).await?;
    let handled = messages.iter().map(|m| consume_one(worker, queue, inbox, m, worker_id));
    futures::future::join_all(handled).await;
    Ok(messages.len())
}

/// A local consumer with `slots` messages in hand at most: it receives again as soon as one
/// slot frees, so a slow target holds up no other message. Stops receiving when `stopped`
/// turns true and returns once the messages in hand are handled.
pub async fn consume(
    worker: Worker,
    queue: Arc<dyn RunQueue>,
    inbox: Arc<dyn RunInbox>,
    worker_id: String,
    slots: usize,
    stopped: watch::Receiver<bool>,
) {
    let slots = slots.max(1);
    let mut in_hand = tokio::task::JoinSet::new();
    while !*stopped.borrow() {
        while in_hand.try_join_next().is_some() {}
        if in_hand.len() >= slots {
            in_hand.join_next().await;
            continue;
        }
        let free = (slots - in_hand.len()).min(10) as i32;
        let messages = match inbox.receive(free, 1).await {
            Ok(messages) => messages,
            Err(e) => {
                tracing::warn!(error = %e, "polling the runs queue failed; retrying");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        for m in messages {
            let (worker, queue, inbox, id) =
                (worker.clone(), queue.clone(), inbox.clone(), worker_id.clone());
            in_hand.spawn(async move { consume_one(&worker, queue.as_ref(), inbox.as_ref(), &m, &id).await });
        }
    }
    while in_hand.join_next().await.is_some() {}
}
