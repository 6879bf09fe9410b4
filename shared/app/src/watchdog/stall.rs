//! The scheduler's health: when the tick's watermark falls behind, operators are told once that
//! the scheduler stalled, and once that it recovered; each alert is recorded before it is
//! published, so a crash leaves it for the next pass.

use super::Watchdog;
use chrono::{DateTime, Utc};
use sundial_domain::events::SchedulerAlert;
use sundial_domain::ports::store::{Race, Raced, StoreError, TickState};

impl Watchdog {
    /// Opens a stall incident when the tick's watermark falls `behind`, closes it when the tick
    /// catches up; each alert is recorded before it is published, so a crash leaves it for the
    /// next pass. Returns the alert published, if any.
    pub(super) async fn alert_on(
        &self,
        state: &TickState,
        behind: i64,
        now: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        let stalled = behind >= self.settings.stall_after_minutes;
        let recorded = match (state.stalled_since, stalled) {
            (None, true) => {
                let watermark = state.watermark.map(|w| w.to_rfc3339());
                tracing::error!(minutes_behind = behind, watermark, "the scheduler is stalled");
                self.tick_state
                    .open_incident(now, SchedulerAlert::STALLED)
                    .await
                    .map(|()| SchedulerAlert::STALLED)
            }
            (Some(since), false) => {
                tracing::info!(since = %since, "the scheduler has recovered");
                self.tick_state
                    .close_incident(since, SchedulerAlert::RECOVERED, now)
                    .await
                    .map(|()| SchedulerAlert::RECOVERED)
            }
            // An alert recorded and left unsent: taken over once its publisher's grace is out.
            _ => {
                let event = match state.unsent_alert.as_deref() {
                    Some(SchedulerAlert::STALLED) => SchedulerAlert::STALLED,
                    Some(SchedulerAlert::RECOVERED) => SchedulerAlert::RECOVERED,
                    _ => return Ok(None),
                };
                let taken = state.alert_taken_at;
                if taken.is_some_and(|at| at + self.settings.publish_grace > now) {
                    return Ok(None);
                }
                self.tick_state.take_alert(event, taken, now).await.map(|()| event)
            }
        };
        // Lost: another watchdog recorded it, or took it over: that one publishes.
        let Race::Won(event) = recorded.raced()? else { return Ok(None) };
        let alert = SchedulerAlert { event, watermark: state.watermark, at: now };
        if let Err(e) = self.recorder.announcer().bus().alert(&alert).await {
            tracing::warn!(event, error = %e, "scheduler alert left unsent");
            return Ok(None);
        }
        // Lost: marked by another pass that published it too.
        self.tick_state.mark_alert_sent(event).await.raced()?;
        Ok(Some(event.to_string()))
    }
}
