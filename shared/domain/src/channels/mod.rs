//! Alert channels Sundial delivers to itself, where SNS cannot (it cannot confirm a Slack
//! webhook, nor open and resolve a PagerDuty incident): which of a job's channels an event goes
//! to, the requests each is sent ([`slack`], [`pagerduty`]), and the mark each delivery leaves on
//! the event, so that an announcement retried after a partial failure delivers only what is
//! still owed (one delivery per event and channel, barring a crash between delivering and
//! marking, as for SNS).
//!
//! An announcement tries a delivery up to [`TRIES_PER_ROUND`] times. A refusal (a 4xx other than
//! 429, a destination the egress guard refuses) ends it at once; a channel still failing after
//! [`MAX_TRIES`] in all is given up: marked failed on the event, counted, and owed no more.

pub mod pagerduty;
pub mod slack;

pub use crate::delivery::{Channel, ChannelMark, DeliveryError, DeliveryState, MAX_TRIES, PAGERDUTY_TRIES};
use crate::events::Notification;
use crate::job::{EventKind, Job};
use crate::run::{Run, RunEvent};

/// Tries of one delivery within one announcement.
pub const TRIES_PER_ROUND: u32 = 2;
/// The pause between two tries of one announcement, in milliseconds.
pub const PAUSE_MS: u64 = 300;
/// How long one announcement may spend on channels before it leaves the rest to the watchdog:
/// with [`TRIES_PER_ROUND`] and each post's own limit, an announcement ends well inside the
/// API's 29 s (a callback announces its run's end) and the watchdog's publish grace.
pub const ANNOUNCE_BUDGET: std::time::Duration = std::time::Duration::from_secs(8);
/// Where PagerDuty's Events API v2 takes events (`SUNDIAL_PAGERDUTY_URL` overrides it).
pub const PAGERDUTY_EVENTS_URL: &str = "https://events.pagerduty.com/v2/enqueue";

/// The requests one event makes of one channel: JSON bodies posted, in order, to `url`.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub channel: Channel,
    pub url: String,
    pub requests: Vec<serde_json::Value>,
}

/// The deliveries `event` of `run` makes to `job`'s channels (its notification `n`): Slack when
/// the job asked for the event; PagerDuty's triggers when it asked for the event, its resolves
/// always ([`pagerduty::requests`]).
pub fn deliveries(
    job: &Job,
    run: &Run,
    event: &RunEvent,
    n: &Notification,
    pagerduty_url: &str,
) -> Vec<Delivery> {
    let (Some(kind), Some(notify)) = (event.kind.told(), job.document.notify.as_ref()) else {
        return Vec::new();
    };
    let asked = notify.on.contains(&kind);
    let mut deliveries = Vec::new();
    if let Some(url) = notify.slack.as_ref().and_then(|s| s.webhook_url.clone()).filter(|_| asked) {
        deliveries.push(Delivery { channel: Channel::Slack, url, requests: vec![slack::message(n)] });
    }
    if let Some(settings) = &notify.pagerduty
        && let Some(key) = &settings.routing_key
    {
        // With a threshold of its own, a job is paged at `failing`, not at each failure.
        let each_failure = job.document.alert_after_failures.is_none();
        let triggers = asked && (each_failure || !matches!(kind, EventKind::Failed | EventKind::TimedOut));
        let requests = pagerduty::requests(settings.severity, key, triggers, run, kind, n);
        if !requests.is_empty() {
            deliveries.push(Delivery {
                channel: Channel::PagerDuty,
                url: pagerduty_url.to_string(),
                requests,
            });
        }
    }
    deliveries
}
