//! `sla_missed` and `late_start`: a run past its deadlines is flagged with a conditional write
//! (once per run, whoever records it first tells it) and the event is published.

use super::{Watchdog, WatchdogReport};
use chrono::{DateTime, Utc};
use sundial_domain::job::{EventKind, Job};
use sundial_domain::ports::store::{Race, Raced, StoreError};
use sundial_domain::run::{Run, RunEvent};
use sundial_domain::watchdog::rules::flags_due;

impl Watchdog {
    /// Flags the deadlines `run` has passed; `false` when the run moved on meanwhile (nothing
    /// more to do with what was read).
    pub(super) async fn flag_deadlines(
        &self,
        job: &Job,
        run: &mut Run,
        now: DateTime<Utc>,
        report: &mut WatchdogReport,
    ) -> Result<bool, StoreError> {
        for kind in flags_due(job, run, now) {
            let event = RunEvent::new(kind, run.attempt, now);
            match self.outbox.record_event(run, &event).await.raced()? {
                Race::Won(()) => {
                    run.events.push(event.clone());
                    self.recorder.announcer().announce(Some(job), run, &[event]).await;
                    match kind {
                        EventKind::SlaMissed => report.sla_missed += 1,
                        EventKind::DurationAnomaly => report.duration_anomalies += 1,
                        _ => report.late_start += 1,
                    }
                }
                // Recorded by someone else, or the run moved on: their write tells it.
                Race::Lost => return Ok(false),
            }
        }
        Ok(true)
    }
}
