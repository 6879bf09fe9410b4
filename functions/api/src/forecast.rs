//! `GET /v1/forecast`: runs due per minute over a window of at most 7 days, from the caller's
//! schedules (or, for an operator with `scope=stack`, every owner's), with the peak minutes.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, query_instant};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::Serialize;
use std::collections::HashMap;
use sundial_app::forecast::Scope;
use sundial_domain::forecast::Forecast;
use sundial_domain::schedule::DstNote;
use sundial_domain::validation::ValidationError;
use utoipa::ToSchema;

/// The default window: the next 24 hours.
const DEFAULT_HOURS: i64 = 24;

/// One job's runs in a peak minute.
#[derive(Debug, Serialize, ToSchema)]
pub struct PeakJob {
    pub job_id: String,
    pub name: String,
    pub owner: String,
    pub runs: u32,
}

/// A peak minute: at least `peak_threshold` runs start in it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PeakView {
    /// The minute, RFC 3339 UTC.
    pub minute: String,
    pub runs: u32,
    /// The jobs with the most runs in this minute (at most 5), most first.
    pub jobs: Vec<PeakJob>,
}

/// Runs due per minute over a window, from the schedules.
#[derive(Debug, Serialize, ToSchema)]
pub struct ForecastView {
    /// `owner`: the caller's jobs; `stack`: every owner's (operators only).
    pub scope: String,
    /// The first minute counted (`from` rounded down to its minute), RFC 3339 UTC.
    pub from: String,
    /// The end of the last minute counted (`to` rounded up to a minute), RFC 3339 UTC.
    pub to: String,
    /// Runs starting in each minute from `from`, in order (one entry per minute). A run counts
    /// in the minute it may first start: its instant plus its jitter or flexible-window offset.
    pub counts: Vec<u32>,
    pub total: u64,
    /// Runs per minute on average over the window.
    pub average: f64,
    pub busiest: u32,
    /// A minute with at least this many runs is a peak: twice the average, and at least 2.
    pub peak_threshold: u32,
    /// How many minutes are peaks.
    pub peak_minutes: usize,
    /// The busiest peak minutes (at most 20), busiest first.
    pub peaks: Vec<PeakView>,
    /// Runs of jobs with `depends_on` whose instants fall in the window: they start when their
    /// parents' runs end, so no minute counts them.
    pub after_parents: u64,
    /// The DST changes in the window that move, skip or double a job's instants, in order (at
    /// most 100), with the rule that applied; the counts already place each run where it falls.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dst: Vec<ForecastDst>,
}

/// A DST change that touches one job's instants in the window.
#[derive(Debug, Serialize, ToSchema)]
pub struct ForecastDst {
    pub job_id: String,
    pub name: String,
    #[serde(flatten)]
    pub note: DstNote,
}

fn instant(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

impl ForecastView {
    fn new(scope: &Scope, f: Forecast) -> Self {
        ForecastView {
            scope: match scope {
                Scope::Owner(_) => "owner".into(),
                Scope::Stack => "stack".into(),
            },
            from: instant(f.window.start),
            to: instant(f.window.end()),
            busiest: f.counts.iter().copied().max().unwrap_or(0),
            total: f.total,
            average: (f.average * 1000.0).round() / 1000.0,
            peak_threshold: f.peak_threshold,
            peak_minutes: f.peak_minutes,
            peaks: f
                .peaks
                .into_iter()
                .map(|p| PeakView {
                    minute: instant(p.minute),
                    runs: p.runs,
                    jobs: p
                        .jobs
                        .into_iter()
                        .map(|j| PeakJob {
                            job_id: j.job_id.to_string(),
                            name: j.name,
                            owner: j.owner,
                            runs: j.runs,
                        })
                        .collect(),
                })
                .collect(),
            after_parents: f.after_parents,
            dst: f
                .dst
                .into_iter()
                .map(|d| ForecastDst { job_id: d.job_id, name: d.name, note: d.note })
                .collect(),
            counts: f.counts,
        }
    }
}

/// Runs due per minute (at most 7 days), with the peak minutes and their top jobs; computed
/// from the schedules (DST included), not from runs.
#[utoipa::path(get, path = "/v1/forecast", operation_id = "getForecast", tag = "forecast",
    params(
        ("from" = Option<String>, Query, description = "RFC 3339; default now"),
        ("to" = Option<String>, Query, description = "RFC 3339, after from and at most 7 days after it; default from + 24 h"),
        ("scope" = Option<String>, Query, description = "`owner` (default): the caller's jobs; `stack`: every owner's, for operators"),
    ),
    responses(
        (status = 200, body = ForecastView),
        (status = 400, description = "A malformed or out-of-range from, to or scope", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 403, description = "scope=stack from a key that is not an operator's", body = ErrorBody),
        (status = 422, description = "The window holds more runs than one forecast counts", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    Caller(owner): Caller,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<ForecastView>, ApiError> {
    let scope = match query.get("scope").map(String::as_str) {
        None | Some("owner") => Scope::Owner(owner),
        Some("stack") if state.settings.operators.contains(&owner) => Scope::Stack,
        Some("stack") => {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "only an operator's key reads the whole stack's forecast",
            )
            .with_field("scope"));
        }
        Some(other) => {
            return Err(ApiError::bad_request(ValidationError::new(
                "scope",
                format!("`{other}` is not owner or stack"),
            )));
        }
    };
    let from = query_instant(&query, "from")?.unwrap_or_else(|| state.ports.clock.now());
    let to = match query_instant(&query, "to")? {
        Some(to) => to,
        None => from.checked_add_signed(Duration::hours(DEFAULT_HOURS)).ok_or_else(|| {
            ApiError::bad_request(ValidationError::new("from", "is too late for a default window"))
        })?,
    };
    let forecast = state.use_cases.forecasts.forecast(&scope, from, to).await?;
    Ok(Json(ForecastView::new(&scope, forecast)))
}
