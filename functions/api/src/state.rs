//! What every handler shares: the use cases, the stores and the configuration, built once.

use crate::view::RunView;
use std::sync::Arc;
use sundial_app::jobs::Jobs;
use sundial_app::ports::Ports;
use sundial_app::use_cases::UseCases;
use sundial_domain::auth::{ApiKeys, Operators};
use sundial_domain::ports::store::IdempotencyStore;
use sundial_domain::run::Run;
use sundial_wiring::config::Config;
use sundial_wiring::logs::LogLocation;
use sundial_wiring::services::Services;

/// Largest request body: the payload limit plus room for the rest of a job document.
pub const BODY_OVERHEAD: usize = 32 * 1024;

/// The bundles the handlers share, each held whole (cheap to clone per request): the use cases
/// they call, the ports they read directly (the clock, the meter), the record of answered
/// requests, and the API's settings.
#[derive(Debug, Clone)]
pub struct AppState {
    pub use_cases: Arc<UseCases>,
    pub ports: Arc<Ports>,
    pub idempotency: Arc<dyn IdempotencyStore>,
    pub settings: Arc<ApiSettings>,
}

/// What the API is configured with, besides the use cases it calls.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    pub api_keys: ApiKeys,
    /// Owners whose keys may read the whole stack's forecast.
    pub operators: Operators,
    /// The largest payload a job may carry (a request body may be [`BODY_OVERHEAD`] larger).
    pub max_payload_bytes: usize,
    pub logs: LogLocation,
}

impl ApiSettings {
    /// The largest request body: the largest payload and the rest of a job document.
    pub fn body_limit(&self) -> usize {
        self.max_payload_bytes + BODY_OVERHEAD
    }
}

impl From<&Config> for ApiSettings {
    fn from(config: &Config) -> Self {
        ApiSettings {
            api_keys: config.api_keys.clone(),
            operators: config.operators.clone(),
            max_payload_bytes: config.limits.max_payload_bytes,
            logs: config.logs.clone(),
        }
    }
}

impl AppState {
    /// The API of a deployed process.
    pub fn new(services: &Services) -> Self {
        let settings = ApiSettings::from(&services.config);
        AppState::over(&services.ports, &services.use_cases, services.idempotency.clone(), settings)
    }

    /// The API over the use cases of any ports: the deployed ones, or the in-memory ones of the
    /// tests.
    pub fn over(
        ports: &Ports,
        use_cases: &UseCases,
        idempotency: Arc<dyn IdempotencyStore>,
        settings: ApiSettings,
    ) -> Self {
        AppState {
            use_cases: Arc::new(use_cases.clone()),
            ports: Arc::new(ports.clone()),
            idempotency,
            settings: Arc::new(settings),
        }
    }

    /// The jobs service for a request that came in on `origin`, which it then counts among
    /// Sundial's own endpoints.
    pub fn jobs_at(&self, origin: &crate::extract::Origin) -> std::borrow::Cow<'_, Jobs> {
        match &origin.0 {
            Some(url) => std::borrow::Cow::Owned(self.use_cases.jobs.reached_at(url)),
            None => std::borrow::Cow::Borrowed(&self.use_cases.jobs),
        }
    }

    /// A run as responses show it, with where its logs are.
    pub fn run_view(&self, run: &Run) -> RunView {
        RunView::new(run, &self.settings.logs)
    }
}
