//! The load forecast use case: an owner's jobs (or, for an operator, every owner's) read
//! through the [`JobStore`], counted per minute by [`sundial_domain::forecast`].

use crate::jobs::{JobsError, JobsResult};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::forecast::{Forecast, Window, forecast};
use sundial_domain::job::{Job, Owner};
use sundial_domain::ports::store::Catalogue;

/// Jobs read per page.
const PAGE: u32 = 100;

/// Whose jobs a forecast counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One owner's.
    Owner(Owner),
    /// Every owner's (operators only: the caller checks).
    Stack,
}

/// Forecasts of the load the schedules will make.
#[derive(Debug, Clone)]
pub struct Forecasts {
    catalogue: Arc<dyn Catalogue>,
}

impl Forecasts {
    pub fn new(catalogue: Arc<dyn Catalogue>) -> Self {
        Forecasts { catalogue }
    }

    /// Runs per minute over `[from, to)` (at most 7 days), with the peaks. A window the domain
    /// refuses is `Malformed` (the request's own fields); a window holding more instants than
    /// one forecast walks is `Invalid`, naming `to`.
    pub async fn forecast(
        &self,
        scope: &Scope,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> JobsResult<Forecast> {
        let window = Window::new(from, to).map_err(JobsError::Malformed)?;
        let jobs = self.jobs(scope).await?;
        Ok(forecast(&jobs, &window)?)
    }

    /// Every job of the scope, page by page.
    async fn jobs(&self, scope: &Scope) -> JobsResult<Vec<Job>> {
        let mut jobs = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = match scope {
                Scope::Owner(owner) => self.catalogue.list(owner, PAGE, cursor.as_deref()).await?,
                Scope::Stack => self.catalogue.list_all(PAGE, cursor.as_deref()).await?,
            };
            jobs.extend(page.items);
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(jobs),
            }
        }
    }
}
