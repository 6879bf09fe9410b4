//! Announcing a run's events: publish each unsent event once, to the shared topic and, when the
//! job asked for it, to the job's topic, then mark what was published in one write. A crash
//! between publishing and marking can send an event twice; a crash before publishing leaves it
//! unsent, for the watchdog to publish: a pass takes an event over with a conditional write
//! first, so overlapping passes never both publish it, and a publish that reached the shared
//! topic but not the job's is marked so, so that a retry sends it to the job's topic only.
//!
//! Then each of the job's alert channels the event goes to ([`sundial_domain::channels`]) is
//! delivered to, a few tries at most; each delivery's mark is written with the rest, and an event
//! is sent once every channel is delivered or given up, so a retry delivers only what is owed.
//!
//! The `downstream` event is not told to anyone: it is handed to the [`Cascade`], which claims
//! the runs of the job's children, and is marked sent once it has. Children's runs it writes
//! ended (skipped) are announced in turn.

use crate::emf::{Record, names};
use crate::meter::Meter;
use crate::timer::Timer;
use crate::workflow::cascade::{Cascade, HandOver};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::channels::{self, Channel, ChannelMark, Delivery, DeliveryError, DeliveryState};
use sundial_domain::clock::Clock;
use sundial_domain::events::{Notification, wants};
use sundial_domain::job::Job;
use sundial_domain::ports::bus::EventBus;
use sundial_domain::ports::channels::AlertChannels;
use sundial_domain::ports::store::{Race, Raced, RunOutbox, StoreError};
use sundial_domain::run::{Published, Run, RunEvent, RunEventKind};

/// Publishes the events of runs and marks them sent.
#[derive(Debug, Clone)]
pub struct Announcer {
    bus: Arc<dyn EventBus>,
    outbox: Arc<dyn RunOutbox>,
    public_url: Option<String>,
    /// Where `downstream` events go: a constructor argument, so that no process can lack it.
    cascade: Cascade,
    alerts: Alerts,
}

/// What delivering to alert channels takes: where to post, the pause between tries, where
/// PagerDuty's events go, and where a given-up delivery is counted.
#[derive(Debug, Clone)]
pub struct Alerts {
    pub channels: Arc<dyn AlertChannels>,
    pub timer: Arc<dyn Timer>,
    pub meter: Arc<Meter>,
    pub clock: Arc<dyn Clock>,
    pub pagerduty_url: String,
}

/// Whether `run` has ended and each of its events was sent before or is in `sent`.
fn settles(run: &Run, sent: &[String]) -> bool {
    run.state.is_terminal() && run.events.iter().all(|e| e.sent || sent.contains(&e.id))
}

impl Announcer {
    /// An announcer publishing to `bus` (links to `public_url`), marking on `outbox`, and handing
    /// `downstream` events to `cascade`.
    pub fn new(
        bus: Arc<dyn EventBus>,
        outbox: Arc<dyn RunOutbox>,
        public_url: Option<String>,
        cascade: Cascade,
        alerts: Alerts,
    ) -> Self {
        Announcer { bus, outbox, public_url, cascade, alerts }
    }

    pub fn bus(&self) -> &Arc<dyn EventBus> {
        &self.bus
    }

    /// Publishes `events` of `run` (those not yet sent) to the shared topic, unless a partial
    /// publish already reached it, and, when the job asked for them, to the job's topic; marks
    /// what was published, and lets an ended run whose events are all published leave the
    /// in-flight index. A failure leaves the event unsent (and is logged) for the watchdog to
    /// publish. `job` is `None` once the job is deleted. Returns how many events were published
    /// everywhere they go.
    ///
    /// The `downstream` hand-over comes last, after what was published is marked: a hand-over
    /// slower than the watchdog's publish grace must not leave published events unmarked (the
    /// watchdog would publish them again). A hand-over that found a parent with no run for the
    /// key stays unsent, for the watchdog to hand over again.
    pub async fn announce(&self, job: Option<&Job>, run: &Run, events: &[RunEvent]) -> usize {
        let unsent: Vec<&RunEvent> = events.iter().filter(|e| !e.sent).collect();
        if unsent.is_empty() {
            return 0;
        }
        let (handed, told): (Vec<&RunEvent>, Vec<&RunEvent>) =
            unsent.into_iter().partition(|e| e.kind == RunEventKind::DOWNSTREAM);
        let mut published = Published::default();
        // Channels are tried only within this budget; the rest are left to the watchdog.
        let deadline = std::time::Instant::now() + channels::ANNOUNCE_BUDGET;
        for event in told {
            self.publish(job, run, event, deadline, &mut published).await;
        }
        let told_count = published.sent.len();
        if handed.is_empty() {
            if self.mark(run, &published, settles(run, &published.sent)).await {
                self.count_given_up(&published);
            }
            return told_count;
        }
        // Counted once, with the first write that holds the marks.
        let mut counted = false;
        if !published.is_empty() && self.mark(run, &published, false).await {
            self.count_given_up(&published);
            counted = true;
        }
        // The hand-over's mark repeats what the first marked (harmless if it held; if it failed,
        // the run must not leave the in-flight index with those marks missing).
        let mut ended_children = Vec::new();
        for event in handed {
            match self.hand_over(job, run).await {
                Ok(hand_over) => {
                    if hand_over.open {
                        tracing::info!(run_id = %run.id(), "a child waits for a parent with no run for this instant");
                    } else {
                        published.sent.push(event.id.clone());
                    }
                    ended_children.extend(hand_over.ended);
                }
                Err(e) => {
                    tracing::warn!(run_id = %run.id(), error = %e, "run's end not yet handed to its children")
                }
            }
        }
        if published.sent.len() > told_count
            && self.mark(run, &published, settles(run, &published.sent)).await
            && !counted
        {
            self.count_given_up(&published);
        }
        for (child, ended) in ended_children {
            Box::pin(self.announce(Some(&child), &ended, &ended.events)).await;
        }
        published.sent.len()
    }

    /// Publishes one event where it goes, noting in `published` how far it got: the shared
    /// topic, the job's topic, then the job's alert channels.
    async fn publish(
        &self,
        job: Option<&Job>,
        run: &Run,
        event: &RunEvent,
        deadline: std::time::Instant,
        published: &mut Published,
    ) {
        let notification = Notification::new(job, run, event, self.public_url.as_deref());
        if !event.topics_sent {
            if !event.shared_sent
                && let Err(e) = self.bus.publish(&notification).await
            {
                tracing::warn!(run_id = %run.id(), event = %event.id, error = %e, "event left unsent");
                return;
            }
            if let Some(kind) = event.kind.told()
                && job.is_some_and(|j| wants(j, kind))
                && let Err(e) = self.bus.publish_to_job(&notification).await
            {
                tracing::warn!(run_id = %run.id(), event = %event.id, error = %e, "event left unsent to the job's topic");
                if !event.shared_sent {
                    published.shared_only.push(event.id.clone());
                }
                return;
            }
        }
        let mut owed = false;
        let Some(job) = job else {
            // The job is gone, and its channels with it: what they were owed is given up.
            for (channel, mark) in event.channels.iter().filter(|(_, m)| !m.is_final()) {
                let gone = Err(DeliveryError::Refused("the job was deleted".to_string()));
                let given_up = ChannelMark::after(*channel, mark.tries, &gone, self.alerts.clock.now());
                log_given_up(run, event, *channel, &given_up);
                published.channels.push((event.id.clone(), *channel, given_up));
            }
            published.sent.push(event.id.clone());
            return;
        };
        let deliveries = channels::deliveries(job, run, event, &notification, &self.alerts.pagerduty_url);
        for delivery in &deliveries {
            let before = event.channels.get(&delivery.channel);
            if before.is_some_and(ChannelMark::is_final) {
                continue;
            }
            let tried = before.map_or(0, |m| m.tries);
            let mark = match std::time::Instant::now() >= deadline {
                // No time left in this announcement: owed to the next, or (PagerDuty) given up.
                true => {
                    ChannelMark::after(delivery.channel, tried, &Err(out_of_time()), self.alerts.clock.now())
                }
                false => self.deliver(delivery, tried, deadline).await,
            };
            let mark = mark.closing_announcement(delivery.channel);
            match mark.state {
                DeliveryState::Delivered => {}
                DeliveryState::Pending => owed = true,
                DeliveryState::Failed => log_given_up(run, event, delivery.channel, &mark),
            }
            published.channels.push((event.id.clone(), delivery.channel, mark));
        }
        // A channel owed the event but since taken off the job (or no longer asking for it).
        let current: Vec<Channel> = deliveries.iter().map(|d| d.channel).collect();
        for (channel, mark) in event.channels.iter().filter(|(c, m)| !m.is_final() && !current.contains(c)) {
            let gone = Err(DeliveryError::Refused("no longer among the job's channels".to_string()));
            let given_up = ChannelMark::after(*channel, mark.tries, &gone, self.alerts.clock.now());
            log_given_up(run, event, *channel, &given_up);
            published.channels.push((event.id.clone(), *channel, given_up));
        }
        match owed {
            true if !event.topics_sent => published.topics_only.push(event.id.clone()),
            true => {}
            false => published.sent.push(event.id.clone()),
        }
    }

    /// Posts `delivery`'s requests, up to [`channels::TRIES_PER_ROUND`] times (`tried` before),
    /// no try begun after `deadline`: the mark of how far it got.
    async fn deliver(&self, delivery: &Delivery, tried: u32, deadline: std::time::Instant) -> ChannelMark {
        let mut tries = tried;
        loop {
            tries += 1;
            let mut outcome = Ok(());
            for body in &delivery.requests {
                outcome = self.alerts.channels.post(&delivery.url, body).await;
                if outcome.is_err() {
                    break;
                }
            }
            let mark = ChannelMark::after(delivery.channel, tries, &outcome, self.alerts.clock.now());
            let round_over =
                tries - tried >= channels::TRIES_PER_ROUND || std::time::Instant::now() >= deadline;
            if mark.is_final() || round_over {
                return mark;
            }
            self.alerts.timer.sleep(std::time::Duration::from_millis(channels::PAUSE_MS)).await;
        }
    }

    /// Counts the deliveries `published` gives up, once its marks are written.
    fn count_given_up(&self, published: &Published) {
        let failed = published.channels.iter().filter(|(_, _, m)| m.state == DeliveryState::Failed).count();
        if failed > 0 {
            let now = self.alerts.clock.now();
            self.alerts
                .meter
                .observe(&Record::new("announcer", now).count(names::ALERTS_UNDELIVERED, failed));
        }
    }

    /// Marks `published` in one write, with which an ended run whose events are all sent
    /// leaves the in-flight index (`settle`).
    async fn mark(&self, run: &Run, published: &Published, settle: bool) -> bool {
        let mut marked = self.outbox.mark_events_sent(run, published, settle).await;
        if settle && matches!(marked, Err(StoreError::Conflict)) {
            // The store holds an event this copy lacks: marked without settling, the run stays
            // in flight for the watchdog, which reads it whole.
            marked = self.outbox.mark_events_sent(run, published, false).await;
        }
        match marked {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(run_id = %run.id(), error = %e, "published events not marked sent");
                false
            }
        }
    }

    /// Hands the end of `run` over to its job's children; a deleted job has none left.
    async fn hand_over(&self, job: Option<&Job>, run: &Run) -> Result<HandOver, StoreError> {
        match job {
            None => Ok(HandOver::default()),
            Some(job) => self.cascade.follow(job, run).await,
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
            if let Race::Won(()) = self.outbox.take_event(run, event, now).await.raced()? {
                taken.push(RunEvent { taken_at: Some(now), ..event.clone() });
            }
        }
        if taken.is_empty() {
            return Ok(0);
        }
        Ok(self.announce(job, run, &taken).await)
    }
}

/// Logs a delivery given up (counted once its mark is written).
fn log_given_up(run: &Run, event: &RunEvent, channel: Channel, mark: &ChannelMark) {
    let error = mark.error.as_deref().unwrap_or_default();
    tracing::warn!(run_id = %run.id(), event = %event.id, channel = channel.as_str(), error, "alert given up");
}

/// Why a delivery was not tried: its announcement's channel budget was spent.
fn out_of_time() -> DeliveryError {
    DeliveryError::Unavailable("not tried: its announcement's time for channels was spent".to_string())
}
