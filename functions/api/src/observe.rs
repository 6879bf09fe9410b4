//! What operators look at: the process's metrics in Prometheus text (`/metrics`), and one run's
//! lines of the local log (`/v1/runs/{id}/logs`). Both need an API key.

use crate::error::ApiError;
use crate::extract::Caller;
use crate::runs::RunPath;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// The counters of this process (tick, workers and watchdog locally), Prometheus text 0.0.4.
pub async fn metrics(State(state): State<AppState>, Caller(_): Caller) -> Response {
    let mut response = state.ports.meter.prometheus().into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response
}

/// A run's log lines.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunLogs {
    pub run_id: String,
    /// The newest 500 lines that mention the run, oldest first.
    pub lines: Vec<String>,
}

/// The run's lines of the local log (404 where logs are in CloudWatch: see the run's `logs`).
#[utoipa::path(get, path = "/v1/runs/{run_id}/logs", operation_id = "getRunLogs", tag = "runs", params(("run_id" = String, Path)),
    responses((status = 200, body = RunLogs), (status = 401, body = crate::error::ErrorBody), (status = 404, body = crate::error::ErrorBody)),
    security(("bearer" = [])))]
pub async fn run_logs(
    State(state): State<AppState>,
    Caller(owner): Caller,
    RunPath(id): RunPath,
) -> Result<Json<RunLogs>, ApiError> {
    // The owner check first: another owner's run is not found.
    state.use_cases.run_control.get(&owner, &id).await?;
    let run_id = id.to_string();
    let lines = state.settings.logs.local_lines(&run_id, 500).map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "logs_unavailable",
            format!("reading the local log: {e}"),
        )
    })?;
    match lines {
        Some(lines) => Ok(Json(RunLogs { run_id, lines })),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "this deployment's logs are in CloudWatch: see the run's `logs` query",
        )),
    }
}
