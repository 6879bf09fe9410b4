//! The use cases of one process, built from one bundle of ports and their settings: the wiring
//! over the AWS adapters and the scenario tests over the in-memory ones assemble them the same
//! way.

use crate::announce::{Alerts, Announcer};
use crate::audit::{AuditLog, Recording};
use crate::calendars::Calendars;
use crate::claim::{ClaimSettings, Claimer};
use crate::forecast::Forecasts;
use crate::groups::Groups;
use crate::jobs::{Jobs, JobsSettings};
use crate::keys::Keys;
use crate::ledger::Ledgers;
use crate::ports::Ports;
use crate::record::Recorder;
use crate::run_control::RunControl;
use crate::skips::Skips;
use crate::tick::{Tick, TickSettings};
use crate::watchdog::Watchdog;
use crate::worker::{Worker, WorkerSettings};
use crate::workflow::cascade::Cascade;
use std::sync::Arc;
use sundial_domain::audit::Stamp;
use sundial_domain::watchdog::rules::WatchdogSettings;

/// What the use cases are configured with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub claim: ClaimSettings,
    pub tick: TickSettings,
    pub worker: WorkerSettings,
    pub watchdog: WatchdogSettings,
    pub jobs: JobsSettings,
    /// Where links in notifications point (the dashboard), if anywhere.
    pub public_url: Option<String>,
    /// Where PagerDuty's events go (its Events API v2, or a stand-in).
    pub pagerduty_url: String,
    /// How long audit records are kept, in days.
    pub audit_retention_days: u32,
}

/// Every use case, over the same ports.
#[derive(Debug, Clone)]
pub struct UseCases {
    pub announcer: Announcer,
    pub recorder: Recorder,
    pub claimer: Claimer,
    pub jobs: Jobs,
    pub groups: Groups,
    pub calendars: Calendars,
    pub keys: Keys,
    pub audit: AuditLog,
    pub run_control: RunControl,
    pub tick: Tick,
    pub worker: Worker,
    pub watchdog: Watchdog,
    pub forecasts: Forecasts,
    pub ledgers: Ledgers,
    pub skips: Skips,
}

impl UseCases {
    pub fn new(ports: &Ports, settings: Settings) -> Self {
        let claimer = Claimer::new(ports, settings.claim, settings.public_url.clone());
        let cascade = Cascade::new(ports, claimer.clone());
        let alerts = Alerts {
            channels: ports.channels.clone(),
            timer: ports.timer.clone(),
            meter: ports.meter.clone(),
            clock: ports.clock.clone(),
            pagerduty_url: settings.pagerduty_url,
        };
        let announcer =
            Announcer::new(ports.bus.clone(), ports.runs.clone(), settings.public_url, cascade, alerts);
        let recorder =
            Recorder::new(ports.jobs.clone(), ports.runs.clone(), announcer.clone(), ports.timer.clone());
        // Nobody's, until a request's stamp makes them act for it (`UseCases::acting`).
        let recording = Recording::new(ports.entropy.clone(), settings.audit_retention_days);
        let groups = Groups::new(
            ports.groups.clone(),
            ports.jobs.clone(),
            ports.runs.clone(),
            ports.clock.clone(),
            recording.clone(),
        );
        let audit = AuditLog::new(ports.audit.clone(), settings.jobs.page_tokens.clone());
        let jobs = Jobs::new(ports, claimer.clone(), groups.clone(), settings.jobs, recording.clone());
        let calendars = Calendars::new(
            ports.calendars.clone(),
            ports.jobs.clone(),
            jobs.clone(),
            ports.clock.clone(),
            recording.clone(),
        );
        let keys =
            Keys::new(ports.keys.clone(), ports.clock.clone(), ports.entropy.clone(), recording.clone());
        // The tick's passes send runs due later: just after a whole second, to start on time.
        let tick = Tick::new(ports, claimer.clone().aligning_sends(), jobs.clone(), settings.tick);
        let heartbeat_window = settings.worker.heartbeat_window;
        let worker = Worker::new(ports, recorder.clone(), settings.worker);
        let run_control =
            RunControl::new(ports, jobs.clone(), recorder.clone(), heartbeat_window, recording.clone());
        let watchdog = Watchdog::new(ports, recorder.clone(), settings.watchdog);
        let forecasts = Forecasts::new(ports.jobs.clone());
        let ledgers = Ledgers::new(ports.jobs.clone(), ports.runs.clone(), ports.clock.clone());
        let skips = Skips::new(ports.jobs.clone(), ports.clock.clone(), recording);
        UseCases {
            announcer,
            recorder,
            claimer,
            jobs,
            groups,
            calendars,
            keys,
            audit,
            run_control,
            tick,
            worker,
            watchdog,
            forecasts,
            ledgers,
            skips,
        }
    }

    /// The use cases that change things, acting for the request `stamp` names: each change they
    /// make is written with its audit record. Sundial's own work (the tick, workers, the
    /// watchdog) acts for no one and records nothing.
    pub fn acting(&self, stamp: Stamp) -> UseCases {
        let stamp = Arc::new(stamp);
        UseCases {
            jobs: self.jobs.acting(stamp.clone()),
            groups: self.groups.acting(stamp.clone()),
            calendars: self.calendars.acting(stamp.clone()),
            keys: self.keys.acting(stamp.clone()),
            run_control: self.run_control.acting(stamp.clone()),
            skips: self.skips.acting(stamp),
            ..self.clone()
        }
    }
}
