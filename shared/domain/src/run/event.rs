//! The events recorded on a run: each is written, unsent, in the same conditional write as the
//! change that causes it, and marked sent once published (invariant: one alert per event).

use crate::delivery::{Channel, ChannelMark};
use crate::job::EventKind;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a run event is: an event told to people, or the run's end handed to the jobs that run
/// after its job. The hand-over is told to no one; it is recorded with the ending like the
/// others, so a crash before it is handed over leaves it for the watchdog, as an unsent event
/// is. Stored as its wire name (`failed`, `downstream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RunEventKind {
    Told(EventKind),
    Downstream(Downstream),
}

/// The wire name of the hand-over, `downstream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Downstream {
    Downstream,
}

impl RunEventKind {
    /// The hand-over of a run's end to its job's children.
    pub const DOWNSTREAM: RunEventKind = RunEventKind::Downstream(Downstream::Downstream);

    /// The wire name (`timed_out`, `downstream`), as serde writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunEventKind::Told(kind) => kind.as_str(),
            RunEventKind::Downstream(_) => "downstream",
        }
    }

    /// The event told to people, or `None` for the hand-over.
    pub fn told(self) -> Option<EventKind> {
        match self {
            RunEventKind::Told(kind) => Some(kind),
            RunEventKind::Downstream(_) => None,
        }
    }
}

impl From<EventKind> for RunEventKind {
    fn from(kind: EventKind) -> Self {
        RunEventKind::Told(kind)
    }
}

impl PartialEq<EventKind> for RunEventKind {
    fn eq(&self, other: &EventKind) -> bool {
        *self == RunEventKind::Told(*other)
    }
}

/// An event recorded on a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEvent {
    /// Unique within the run: `<event>` or `<event>#<attempt>` for per-attempt events.
    pub id: String,
    pub kind: RunEventKind,
    pub at: DateTime<Utc>,
    /// Published to every destination it goes to.
    pub sent: bool,
    /// Published to the shared topic while the job's topic still owes it (a partial publish).
    pub shared_sent: bool,
    /// Published to both topics while one of the job's alert channels still owes it.
    pub topics_sent: bool,
    /// How far its delivery to each of the job's alert channels got ([`crate::delivery`]).
    pub channels: BTreeMap<Channel, ChannelMark>,
    /// When a watchdog pass last took the publishing of the event over (`None`: only its
    /// recorder, at `at`, has).
    pub taken_at: Option<DateTime<Utc>>,
    /// The numbers the event was decided on, where they are not the run's own: kept with it, so
    /// that a later publish tells what its recorder saw.
    pub detail: Option<EventDetail>,
}

/// The numbers an event was decided on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EventDetail {
    /// `failure_rate`: the rate told.
    FailureRate(crate::health::FailureRate),
    /// `recovered`: what the job recovered from.
    Recovered(crate::health::Recovery),
}

impl RunEvent {
    pub fn new(kind: impl Into<RunEventKind>, attempt: u32, at: DateTime<Utc>) -> Self {
        let kind = kind.into();
        let name = kind.as_str();
        let id = match kind {
            RunEventKind::Told(EventKind::Retrying) => format!("{name}#{attempt}"),
            _ => name.to_string(),
        };
        RunEvent {
            id,
            kind,
            at,
            sent: false,
            shared_sent: false,
            topics_sent: false,
            channels: BTreeMap::new(),
            taken_at: None,
            detail: None,
        }
    }

    /// The event with the numbers it was decided on.
    pub fn with_detail(self, detail: EventDetail) -> Self {
        RunEvent { detail: Some(detail), ..self }
    }

    /// When its publisher last took it on: a publisher has that long (the watchdog's
    /// `publish_grace`) before another may take it over.
    pub fn last_taken(&self) -> DateTime<Utc> {
        self.taken_at.unwrap_or(self.at)
    }
}

/// What one announcement published, to be marked in one write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    /// Events published everywhere they go.
    pub sent: Vec<String>,
    /// Events published to the shared topic only: the job's topic failed.
    pub shared_only: Vec<String>,
    /// Events published to both topics while a channel still owes them.
    pub topics_only: Vec<String>,
    /// How far each delivery to a channel got: (event, channel, its mark).
    pub channels: Vec<(String, Channel, ChannelMark)>,
}

impl Published {
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
            && self.shared_only.is_empty()
            && self.topics_only.is_empty()
            && self.channels.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_stored_as_its_wire_name() {
        for kind in [RunEventKind::Told(EventKind::TimedOut), RunEventKind::DOWNSTREAM] {
            let text = serde_json::to_string(&kind).unwrap();
            assert_eq!(text, format!("\"{}\"", kind.as_str()));
            assert_eq!(serde_json::from_str::<RunEventKind>(&text).unwrap(), kind);
        }
        assert!(serde_json::from_str::<RunEventKind>("\"upstream\"").is_err());
    }
}
