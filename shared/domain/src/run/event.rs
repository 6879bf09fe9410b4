//! The events recorded on a run: each is written, unsent, in the same conditional write as the
//! change that causes it, and marked sent once published (invariant: one alert per event).

use crate::job::EventKind;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// An event recorded on a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEvent {
    /// Unique within the run: `<event>` or `<event>#<attempt>` for per-attempt events.
    pub id: String,
    pub kind: EventKind,
    pub at: DateTime<Utc>,
    /// Published to every destination it goes to.
    pub sent: bool,
    /// Published to the shared topic while the job's topic still owes it (a partial publish).
    pub shared_sent: bool,
    /// When a watchdog pass last took the publishing of the event over (`None`: only its
    /// recorder, at `at`, has).
    pub taken_at: Option<DateTime<Utc>>,
}

impl RunEvent {
    pub fn new(kind: EventKind, attempt: u32, at: DateTime<Utc>) -> Self {
        let name = kind.as_str();
        let id = match kind {
            EventKind::Retrying => format!("{name}#{attempt}"),
            _ => name.to_string(),
        };
        RunEvent { id, kind, at, sent: false, shared_sent: false, taken_at: None }
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
}

impl Published {
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty() && self.shared_only.is_empty()
    }
}
