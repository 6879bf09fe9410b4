//! How far an alert's delivery to one of a job's channels got: the mark kept on the run's event
//! ([`crate::run::RunEvent::channels`]), what a try's failure says, and when a delivery is given
//! up. What is delivered, and where, is [`crate::channels`]'.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Tries of one Slack delivery in all (over the announcement and the watchdog's republishes)
/// before it is given up.
pub const MAX_TRIES: u32 = 6;
/// Tries of one PagerDuty delivery: one announcement's, never a republish minutes later, whose
/// trigger could reopen an incident a later event has resolved (or whose resolve could close one
/// a later failure opened).
pub const PAGERDUTY_TRIES: u32 = 2;
/// The longest error kept on a mark, in bytes.
const MAX_ERROR_BYTES: usize = 300;

/// A channel of a job's `notify` settings that Sundial delivers to itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Slack,
    #[serde(rename = "pagerduty")]
    PagerDuty,
}

impl Channel {
    pub const ALL: [Channel; 2] = [Channel::Slack, Channel::PagerDuty];

    /// Whether a delivery still owed at the end of an announcement is tried again by the
    /// watchdog: Slack's messages, yes; PagerDuty's triggers and resolves, no (minutes later
    /// they could undo what a later event did to the incident).
    pub fn retried_later(self) -> bool {
        self == Channel::Slack
    }

    /// Tries of one delivery before it is given up.
    pub fn max_tries(self) -> u32 {
        match self {
            Channel::Slack => MAX_TRIES,
            Channel::PagerDuty => PAGERDUTY_TRIES,
        }
    }

    /// The wire name (`pagerduty`), as serde writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Slack => "slack",
            Channel::PagerDuty => "pagerduty",
        }
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    Delivered,
    /// Failed for now: the watchdog's republish tries again.
    Pending,
    /// Refused, or failing after its channel's tries ([`Channel::max_tries`]): given up.
    Failed,
}

/// How far an event's delivery to one channel got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelMark {
    pub state: DeliveryState,
    /// Tries so far, over every announcement.
    pub tries: u32,
    /// The last try's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the last try ended.
    pub at: DateTime<Utc>,
}

impl ChannelMark {
    /// The mark as its announcement leaves it: a delivery still owed to a channel that is not
    /// retried later is given up.
    pub fn closing_announcement(self, channel: Channel) -> Self {
        match self.state {
            DeliveryState::Pending if !channel.retried_later() => {
                ChannelMark { state: DeliveryState::Failed, ..self }
            }
            _ => self,
        }
    }

    /// Whether the channel is owed nothing more.
    pub fn is_final(&self) -> bool {
        self.state != DeliveryState::Pending
    }

    /// The mark of a delivery to `channel` that made `tries` in all and ended with `outcome`.
    pub fn after(
        channel: Channel,
        tries: u32,
        outcome: &Result<(), DeliveryError>,
        at: DateTime<Utc>,
    ) -> Self {
        let (state, error) = match outcome {
            Ok(()) => (DeliveryState::Delivered, None),
            Err(DeliveryError::Refused(e)) => (DeliveryState::Failed, Some(e)),
            Err(DeliveryError::Unavailable(e)) if tries >= channel.max_tries() => {
                (DeliveryState::Failed, Some(e))
            }
            Err(DeliveryError::Unavailable(e)) => (DeliveryState::Pending, Some(e)),
        };
        let error = error.map(|e| {
            let mut e = e.clone();
            let mut cut = MAX_ERROR_BYTES.min(e.len());
            while !e.is_char_boundary(cut) {
                cut -= 1;
            }
            e.truncate(cut);
            e
        });
        ChannelMark { state, tries, error, at }
    }
}

/// Why a request to a channel was not taken, and whether trying again can help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeliveryError {
    /// Throttled (429), a 5xx, a timeout, unreachable: trying again may help.
    #[error("not delivered, for now: {0}")]
    Unavailable(String),
    /// Refused for good (another 4xx, a destination the egress guard refuses).
    #[error("refused: {0}")]
    Refused(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::at;

    #[test]
    fn a_mark_is_final_once_delivered_refused_or_out_of_tries() {
        let t = at("2026-11-27T10:00:00Z");
        let busy = Err(DeliveryError::Unavailable("HTTP 503".into()));
        assert_eq!(ChannelMark::after(Channel::Slack, 1, &Ok(()), t).state, DeliveryState::Delivered);
        assert_eq!(ChannelMark::after(Channel::Slack, 2, &busy, t).state, DeliveryState::Pending);
        assert_eq!(ChannelMark::after(Channel::Slack, MAX_TRIES, &busy, t).state, DeliveryState::Failed);
        let refused =
            ChannelMark::after(Channel::Slack, 1, &Err(DeliveryError::Refused("HTTP 404".into())), t);
        assert_eq!((refused.state, refused.error.as_deref()), (DeliveryState::Failed, Some("HTTP 404")));
        assert!(refused.is_final() && !ChannelMark::after(Channel::Slack, 1, &busy, t).is_final());
        let long = ChannelMark::after(Channel::Slack, 1, &Err(DeliveryError::Refused("x".repeat(5_000))), t);
        assert_eq!(long.error.map(|e| e.len()), Some(MAX_ERROR_BYTES));
        let busy_pager = ChannelMark::after(
            Channel::PagerDuty,
            PAGERDUTY_TRIES,
            &Err(DeliveryError::Unavailable("x".into())),
            t,
        );
        assert_eq!(busy_pager.state, DeliveryState::Failed, "PagerDuty: one announcement's tries");
    }

    #[test]
    fn channels_are_stored_by_their_wire_names() {
        for channel in Channel::ALL {
            assert_eq!(serde_json::to_value(channel).unwrap(), channel.as_str());
        }
    }
}
