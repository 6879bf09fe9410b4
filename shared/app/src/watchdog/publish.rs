//! Events a crash or a failed publish left unsent are published (each taken over first, so that
//! of overlapping passes one publishes it); an ended run whose events are all sent leaves the
//! in-flight index.

use super::{Watchdog, WatchdogReport};
use chrono::{DateTime, Utc};
use sundial_domain::job::Job;
use sundial_domain::ports::store::{Race, Raced, StoreError};
use sundial_domain::run::Run;
use sundial_domain::watchdog::rules::{needs_settling, unsent_events};

impl Watchdog {
    pub(super) async fn publish_left_over(
        &self,
        job: Option<&Job>,
        run: &Run,
        now: DateTime<Utc>,
        report: &mut WatchdogReport,
    ) -> Result<(), StoreError> {
        let unsent = unsent_events(run, now, self.settings.publish_grace);
        if !unsent.is_empty() {
            report.republished += self.recorder.announcer().republish(job, run, &unsent, now).await?;
        } else if needs_settling(run, now, self.settings.publish_grace) {
            let settled = self.outbox.mark_events_sent(run, &Default::default(), true).await;
            if let Race::Won(()) = settled.raced()? {
                report.settled += 1;
            }
        }
        Ok(())
    }
}
