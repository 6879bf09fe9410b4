//! The runs queue in memory: [`MemoryQueue`], a [`RunQueue`] and [`RunInbox`] that behaves as the
//! SQS runs queue and its dead-letter queue do (`sundial_aws::sqs`, on the queues
//! `infra/template.yaml` declares).
//!
//! Time is the injected [`Clock`]'s, so a `ManualClock` drives delays and holds: a message sent
//! with a delay is not received before it ends (capped at [`MAX_DELAY_S`]); a received message is
//! hidden for [`HOLD_S`] and comes back after, with its receive count one higher and a new
//! receipt; `set_visibility` hides it again from now (capped at [`MAX_VISIBILITY_S`]); a receipt
//! names the message only until its next receive, and a delete or visibility change with any
//! other receipt fails (as the emulator answers `ReceiptHandleIsInvalid`). A message received
//! [`MAX_RECEIVE_COUNT`] times is moved to the dead-letter queue instead of being received again
//! (the redrive policy), messages older than [`RETENTION_S`] are dropped, and `redrive` moves
//! every dead letter back as a new message. Receives take visible messages in send order.
//!
//! Only `receive`'s long poll waits in real time (up to `wait_s`, checking the clock every
//! 100 ms), as a consumer's wait is real time whatever the clock says.

use crate::guard::lock;
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use std::sync::{Arc, Mutex};
use sundial_domain::clock::Clock;
use sundial_domain::ports::queue::{QueueError, Received, RunInbox, RunQueue};
use sundial_domain::run_queue::{Dispatch, HOLD_S, MAX_DELAY_S};

/// Receives after which the redrive policy moves a message to the dead-letter queue (the
/// template's `MaxReceiveCount` default).
pub const MAX_RECEIVE_COUNT: u32 = 15;
/// How long both queues keep a message (the template's `MessageRetentionPeriod`).
pub const RETENTION_S: i64 = 1_209_600;
/// SQS's longest visibility timeout.
pub const MAX_VISIBILITY_S: u32 = 12 * 3600;

/// A message of the dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    pub body: String,
    /// The reason a consumer gave (`None`: moved by the redrive policy).
    pub reason: Option<String>,
    /// How often it was received on the runs queue before it got here.
    pub receive_count: u32,
}

#[derive(Debug, Clone)]
struct Message {
    id: String,
    body: String,
    /// When it was enqueued: retention runs from here.
    sent_at: DateTime<Utc>,
    visible_at: DateTime<Utc>,
    receive_count: u32,
    /// The receipt of its latest receive.
    receipt: Option<String>,
    reason: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    messages: Vec<Message>,
    dead: Vec<Message>,
    serial: u64,
    /// While set, sends fail with this error.
    failing_sends: Option<String>,
}

impl State {
    fn next_serial(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    fn enqueue(&mut self, body: String, now: DateTime<Utc>, delay_s: u32, reason: Option<String>) -> Message {
        let serial = self.next_serial();
        Message {
            id: format!("00000000-0000-4000-8000-{serial:012}"),
            body,
            sent_at: now,
            visible_at: now + Duration::seconds(i64::from(delay_s)),
            receive_count: 0,
            receipt: None,
            reason,
        }
    }

    /// Drops what outlived the retention period, from both queues.
    fn expire(&mut self, now: DateTime<Utc>) {
        let cutoff = now - Duration::seconds(RETENTION_S);
        self.messages.retain(|m| m.sent_at > cutoff);
        self.dead.retain(|m| m.sent_at > cutoff);
    }
}

/// The runs queue and its dead-letter queue, in memory.
#[derive(Debug)]
pub struct MemoryQueue {
    clock: Arc<dyn Clock>,
    max_receive_count: Option<u32>,
    state: Mutex<State>,
}

impl MemoryQueue {
    /// Queues on `clock`, with the template's redrive policy ([`MAX_RECEIVE_COUNT`]).
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        MemoryQueue { clock, max_receive_count: Some(MAX_RECEIVE_COUNT), state: Mutex::default() }
    }

    /// The same, moving a message to the dead-letter queue after `count` receives (`None`: never).
    pub fn with_max_receive_count(mut self, count: Option<u32>) -> Self {
        self.max_receive_count = count;
        self
    }

    /// Makes every send fail with `error` (`None`: sends work again), as a queue that is down.
    pub fn fail_sends(&self, error: Option<&str>) {
        lock(&self.state).failing_sends = error.map(str::to_string);
    }

    /// The dead-letter queue's messages, oldest first.
    pub fn dead_letters(&self) -> Vec<DeadLetter> {
        let mut state = lock(&self.state);
        state.expire(self.clock.now());
        state
            .dead
            .iter()
            .map(|m| DeadLetter {
                body: m.body.clone(),
                reason: m.reason.clone(),
                receive_count: m.receive_count,
            })
            .collect()
    }

    /// The body of every message on the runs queue (visible, delayed or held), in send order.
    pub fn bodies(&self) -> Vec<String> {
        let mut state = lock(&self.state);
        state.expire(self.clock.now());
        state.messages.iter().map(|m| m.body.clone()).collect()
    }

    /// How often each message on the runs queue was received, in send order.
    pub fn receive_counts(&self) -> Vec<u32> {
        let mut state = lock(&self.state);
        state.expire(self.clock.now());
        state.messages.iter().map(|m| m.receive_count).collect()
    }

    /// How many messages the runs queue holds, visible, delayed or held.
    pub fn depth(&self) -> usize {
        self.bodies().len()
    }

    /// Takes up to `max` visible messages, holding each for [`HOLD_S`], after the redrive policy
    /// has moved those received too often.
    fn take_visible(&self, max: usize) -> Vec<Received> {
        let now = self.clock.now();
        let mut guard = lock(&self.state);
        let state = &mut *guard;
        state.expire(now);
        if let Some(limit) = self.max_receive_count {
            let (spent, kept): (Vec<Message>, Vec<Message>) = std::mem::take(&mut state.messages)
                .into_iter()
                .partition(|m| m.receive_count >= limit && m.visible_at <= now);
            state.messages = kept;
            state.dead.extend(spent.into_iter().map(|m| Message { receipt: None, visible_at: now, ..m }));
        }
        let mut received = Vec::new();
        for m in state.messages.iter_mut().filter(|m| m.visible_at <= now).take(max) {
            state.serial += 1;
            let serial = state.serial;
            m.receive_count += 1;
            m.visible_at = now + Duration::seconds(i64::from(HOLD_S));
            let receipt = format!("receipt-{serial}-{}", m.id);
            m.receipt = Some(receipt.clone());
            received.push(Received {
                message_id: m.id.clone(),
                receipt,
                body: m.body.clone(),
                receive_count: m.receive_count,
            });
        }
        received
    }
}

fn invalid_receipt() -> QueueError {
    QueueError::Refused("ReceiptHandleIsInvalid: The input receipt handle is invalid.".into())
}

#[async_trait]
impl RunQueue for MemoryQueue {
    async fn send(&self, batch: &[Dispatch]) -> Vec<Result<(), QueueError>> {
        let now = self.clock.now();
        let mut state = lock(&self.state);
        if let Some(error) = &state.failing_sends {
            let error = QueueError::Unavailable(error.clone());
            return batch.iter().map(|_| Err(error.clone())).collect();
        }
        let mut bodies = Vec::with_capacity(batch.len());
        for d in batch {
            match serde_json::to_string(&d.message) {
                Ok(body) => bodies.push((body, d.delay_s.min(MAX_DELAY_S))),
                Err(e) => return batch.iter().map(|_| Err(QueueError::Refused(e.to_string()))).collect(),
            }
        }
        for (body, delay) in bodies {
            let message = state.enqueue(body, now, delay, None);
            state.messages.push(message);
        }
        batch.iter().map(|_| Ok(())).collect()
    }
}

#[async_trait]
impl RunInbox for MemoryQueue {
    async fn receive(&self, max: i32, wait_s: i32) -> Result<Vec<Received>, QueueError> {
        let max = max.clamp(1, 10) as usize;
        let wait = std::time::Duration::from_secs(wait_s.clamp(0, 20) as u64);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let received = self.take_visible(max);
            let now = tokio::time::Instant::now();
            if !received.is_empty() || now >= deadline {
                return Ok(received);
            }
            tokio::time::sleep((deadline - now).min(std::time::Duration::from_millis(100))).await;
        }
    }

    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        let mut state = lock(&self.state);
        let before = state.messages.len();
        state.messages.retain(|m| m.receipt.as_deref() != Some(receipt));
        if state.messages.len() == before {
            return Err(invalid_receipt());
        }
        Ok(())
    }

    async fn set_visibility(&self, receipt: &str, seconds: u32) -> Result<(), QueueError> {
        let now = self.clock.now();
        let mut state = lock(&self.state);
        let message = state
            .messages
            .iter_mut()
            .find(|m| m.receipt.as_deref() == Some(receipt))
            .ok_or_else(invalid_receipt)?;
        message.visible_at = now + Duration::seconds(i64::from(seconds.min(MAX_VISIBILITY_S)));
        Ok(())
    }

    async fn dead_letter(&self, message: &Received, reason: &str) -> Result<(), QueueError> {
        self.forward_to_dead_letter(&message.body, reason).await?;
        self.delete(&message.receipt).await
    }

    async fn forward_to_dead_letter(&self, body: &str, reason: &str) -> Result<(), QueueError> {
        let now = self.clock.now();
        let mut state = lock(&self.state);
        let message = state.enqueue(body.to_string(), now, 0, Some(reason.to_string()));
        state.dead.push(message);
        Ok(())
    }

    async fn redrive(&self) -> Result<usize, QueueError> {
        let now = self.clock.now();
        let mut state = lock(&self.state);
        state.expire(now);
        let dead = std::mem::take(&mut state.dead);
        let moved = dead.len();
        for letter in dead {
            // Sent again as a new message: no delay, no reason, no receives.
            let message = state.enqueue(letter.body, now, 0, None);
            state.messages.push(message);
        }
        Ok(moved)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use sundial_domain::clock::ManualClock;
    use sundial_domain::run::RunMessage;

    fn dispatch(attempt: u32, delay_s: u32) -> Dispatch {
        let message = RunMessage { job_id: "j".into(), run_key: "k".into(), attempt, look: None, tag: None };
        Dispatch { message, delay_s, tenant: "t".into() }
    }

    fn queue() -> (Arc<ManualClock>, MemoryQueue) {
        let clock = Arc::new(ManualClock::new("2030-01-01T00:00:00Z".parse().unwrap()));
        (clock.clone(), MemoryQueue::new(clock))
    }

    #[tokio::test]
    async fn a_message_received_too_often_moves_to_the_dead_letter_queue() {
        let (_clock, queue) = queue();
        queue.send(&[dispatch(1, 0)]).await;
        for n in 1..=MAX_RECEIVE_COUNT {
            let got = queue.receive(10, 0).await.unwrap();
            assert_eq!(got.len(), 1, "receive {n}");
            assert_eq!(got[0].receive_count, n);
            queue.set_visibility(&got[0].receipt, 0).await.unwrap();
        }
        assert!(queue.receive(10, 0).await.unwrap().is_empty());
        let dead = queue.dead_letters();
        assert_eq!(dead.len(), 1);
        assert_eq!((dead[0].reason.as_ref(), dead[0].receive_count), (None, MAX_RECEIVE_COUNT));
        assert_eq!(queue.redrive().await.unwrap(), 1);
        assert_eq!(queue.receive(10, 0).await.unwrap()[0].receive_count, 1);
    }

    #[tokio::test]
    async fn messages_outlive_neither_retention_nor_a_stale_receipt() {
        let (clock, queue) = queue();
        queue.send(&[dispatch(1, 0)]).await;
        let first = queue.receive(1, 0).await.unwrap().remove(0);
        clock.advance(Duration::seconds(i64::from(HOLD_S)));
        let second = queue.receive(1, 0).await.unwrap().remove(0);
        assert_eq!((second.message_id.as_str(), second.receive_count), (first.message_id.as_str(), 2));
        assert!(queue.delete(&first.receipt).await.is_err(), "a receipt names only the latest receive");
        assert!(queue.set_visibility(&first.receipt, 0).await.is_err());
        queue.forward_to_dead_letter("{}", "bad").await.unwrap();
        clock.advance(Duration::seconds(RETENTION_S));
        assert_eq!((queue.depth(), queue.dead_letters().len()), (0, 0), "both queues drop old messages");
    }

    #[tokio::test]
    async fn sends_fail_while_told_to() {
        let (_clock, queue) = queue();
        queue.fail_sends(Some("down"));
        assert_eq!(queue.send(&[dispatch(1, 0)]).await, vec![Err(QueueError::Unavailable("down".into()))]);
        queue.fail_sends(None);
        assert_eq!(queue.send(&[dispatch(1, 0)]).await, vec![Ok(())]);
        assert_eq!(queue.bodies(), vec![r#"{"job_id":"j","run_key":"k","attempt":1}"#.to_string()]);
    }

    #[tokio::test]
    async fn a_long_poll_sees_a_message_sent_while_it_waits() {
        let (_clock, queue) = queue();
        let queue = Arc::new(queue);
        let sender = queue.clone();
        let send = async move {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            sender.send(&[dispatch(1, 0)]).await
        };
        let (got, _) = tokio::join!(queue.receive(10, 5), send);
        assert_eq!(got.unwrap().len(), 1);
    }
}
