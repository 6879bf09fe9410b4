//! A run's message that was never sent, or whose retry vanished, is sent again and the run marked
//! re-sent, so the next pass waits out a fresh grace before sending another.

use super::{Watchdog, WatchdogReport};
use chrono::{DateTime, Utc};
use sundial_domain::ports::store::StoreError;
use sundial_domain::run::Run;
use sundial_domain::run_queue::Dispatch;
use sundial_domain::watchdog::rules::missing_dispatch;

impl Watchdog {
    pub(super) async fn redispatch_missing(
        &self,
        run: &Run,
        now: DateTime<Utc>,
        report: &mut WatchdogReport,
    ) -> Result<(), StoreError> {
        match missing_dispatch(run, now, &self.settings) {
            Some(dispatch) => self.dispatch(run, dispatch, now, report).await,
            None => Ok(()),
        }
    }

    pub(super) async fn dispatch(
        &self,
        run: &Run,
        dispatch: Dispatch,
        now: DateTime<Utc>,
        report: &mut WatchdogReport,
    ) -> Result<(), StoreError> {
        let sent = self.queue.send(std::slice::from_ref(&dispatch)).await;
        if let Some(Err(e)) = sent.into_iter().next() {
            return Err(StoreError::Unavailable(e.to_string()));
        }
        report.dispatched += 1;
        tracing::info!(run_id = %run.id(), attempt = dispatch.message.attempt, "watchdog dispatched a missing message");
        self.writes.mark_resent(run, now).await
    }
}
