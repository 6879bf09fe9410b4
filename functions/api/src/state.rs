//! What every handler shares: the use cases, the stores and the configuration, built once.

use crate::view::RunView;
use std::sync::Arc;
use sundial_app::groups::Groups;
use sundial_app::jobs::Jobs;
use sundial_app::meter::Meter;
use sundial_app::run_control::RunControl;
use sundial_domain::auth::ApiKeys;
use sundial_domain::clock::Clock;
use sundial_domain::ports::store::IdempotencyStore;
use sundial_domain::run::Run;
use sundial_shared::logs::LogLocation;
use sundial_shared::services::Services;

/// Largest request body: the payload limit plus room for the rest of a job document.
pub const BODY_OVERHEAD: usize = 32 * 1024;

#[derive(Debug, Clone)]
pub struct AppState {
    pub jobs: Jobs,
    pub groups: Groups,
    pub run_control: RunControl,
    pub idempotency: Arc<dyn IdempotencyStore>,
    pub api_keys: Arc<ApiKeys>,
    pub clock: Arc<dyn Clock>,
    pub body_limit: usize,
    pub meter: Arc<Meter>,
    pub logs: LogLocation,
    pub forecasts: sundial_app::forecast::Forecasts,
    /// Owners whose keys may read the whole stack's forecast.
    pub operators: Arc<sundial_domain::auth::Operators>,
}

impl AppState {
    pub fn new(services: &Services) -> Self {
        AppState {
            jobs: services.jobs.clone(),
            groups: services.groups.clone(),
            run_control: services.run_control.clone(),
            idempotency: services.idempotency.clone(),
            api_keys: Arc::new(services.config.api_keys.clone()),
            clock: services.clock.clone(),
            body_limit: services.config.limits.max_payload_bytes + BODY_OVERHEAD,
            meter: services.meter.clone(),
            logs: services.config.logs.clone(),
            forecasts: services.forecasts.clone(),
            operators: Arc::new(services.config.operators.clone()),
        }
    }

    /// The jobs service for a request that came in on `origin`, which it then counts among
    /// Sundial's own endpoints.
    pub fn jobs_at(&self, origin: &crate::extract::Origin) -> std::borrow::Cow<'_, Jobs> {
        match &origin.0 {
            Some(url) => std::borrow::Cow::Owned(self.jobs.reached_at(url)),
            None => std::borrow::Cow::Borrowed(&self.jobs),
        }
    }

    /// A run as responses show it, with where its logs are.
    pub fn run_view(&self, run: &Run) -> RunView {
        RunView::new(run, &self.logs)
    }
}
