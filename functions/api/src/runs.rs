//! Handlers of run history and control (`/v1/jobs/{id}/runs`, `/v1/runs/{id}`), and of the
//! callbacks of targets that answered 202 (authenticated by the attempt's callback token).

use crate::audit::{Acts, ActsForRun};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, JobPath, JsonBody, OptionalJsonBody};
use crate::state::AppState;
use crate::view::{RunList, RunView};
use axum::Json;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use std::collections::HashMap;
use sundial_app::run_control::{CallbackError, Completion};
use sundial_domain::run::{RunId, RunState};
use sundial_domain::target::headers::CALLBACK_TOKEN;
use sundial_domain::validation::ValidationError;

/// A run id from the path; anything that is not one is simply not found.
#[derive(Debug)]
pub struct RunPath(pub RunId);

impl<S: Send + Sync> FromRequestParts<S> for RunPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(id) = Path::<String>::from_request_parts(parts, state).await.map_err(|_| run_not_found())?;
        RunId::parse(&id).map(RunPath).ok_or_else(run_not_found)
    }
}

fn run_not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such run")
}

/// A job's runs, newest first.
#[utoipa::path(get, path = "/v1/jobs/{id}/runs", operation_id = "listRuns", tag = "runs",
    params(("id" = String, Path), ("limit" = Option<u32>, Query, description = "1-100 (default 50)"),
        ("next" = Option<String>, Query), ("state" = Option<String>, Query, description = "Only runs in this state")),
    responses((status = 200, body = RunList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<RunList>, ApiError> {
    let limit = match query.get("limit") {
        None => 50,
        Some(text) => text.parse::<u32>().ok().filter(|n| (1..=100).contains(n)).ok_or_else(|| {
            ApiError::bad_request(ValidationError::new("limit", "must be a whole number from 1 to 100"))
        })?,
    };
    let filter = query
        .get("state")
        .map(|s| s.parse::<RunState>().map_err(|e| ApiError::bad_request(ValidationError::new("state", e))))
        .transpose()?;
    let token = query.get("next").map(String::as_str);
    let mut limit = limit;
    loop {
        let page = state.use_cases.run_control.list(&owner, &id, limit, token, filter).await?;
        let runs: Vec<RunView> = page.items.iter().map(|r| state.run_view(r)).collect();
        match crate::paging::shrink(&runs) {
            None => return Ok(Json(RunList { runs, next: page.next })),
            Some(fit) => limit = fit,
        }
    }
}

/// One run: its state and every attempt with times, worker, outcome, status code, error, output.
#[utoipa::path(get, path = "/v1/runs/{run_id}", operation_id = "getRun", tag = "runs", params(("run_id" = String, Path)),
    responses((status = 200, body = RunView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    Caller(owner): Caller,
    RunPath(id): RunPath,
) -> Result<Json<RunView>, ApiError> {
    let (run, job) = state.use_cases.run_control.get(&owner, &id).await.map_err(not_found_as_run)?;
    let waiting = state.use_cases.run_control.wait(&run, job.as_ref()).await;
    Ok(Json(RunView { waiting, ..state.run_view(&run) }))
}

/// Cancel a run that has not ended.
#[utoipa::path(post, path = "/v1/runs/{run_id}/cancel", operation_id = "cancelRun", tag = "runs", params(("run_id" = String, Path)),
    responses((status = 200, body = RunView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "The run has already ended", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn cancel(
    State(state): State<AppState>,
    acts: Acts,
    Caller(owner): Caller,
    RunPath(id): RunPath,
) -> Result<Json<RunView>, ApiError> {
    let run = acts.run_control.cancel(&owner, &id).await.map_err(not_found_as_run)?;
    Ok(Json(state.run_view(&run)))
}

/// Start a new manual run of a finished run's job.
#[utoipa::path(post, path = "/v1/runs/{run_id}/rerun", operation_id = "rerunRun", tag = "runs", params(("run_id" = String, Path)),
    request_body(content = Option<crate::jobs::RunRequest>, description = "Optional: `{\"payload\": …}`, what the new run delivers instead of the job's payload"),
    responses((status = 202, body = RunView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "The run has not ended, another is active under forbid, or the job is paused", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn rerun(
    State(state): State<AppState>,
    acts: Acts,
    Caller(owner): Caller,
    RunPath(id): RunPath,
    OptionalJsonBody(body): OptionalJsonBody<crate::jobs::RunRequest>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    let input = body.unwrap_or_default().payload;
    let run = acts.run_control.rerun(&owner, &id, input).await.map_err(not_found_as_run)?;
    Ok((StatusCode::ACCEPTED, Json(state.run_view(&run))))
}

fn not_found_as_run(e: sundial_app::jobs::JobsError) -> ApiError {
    match e {
        sundial_app::jobs::JobsError::NotFound => run_not_found(),
        other => other.into(),
    }
}

/// The one answer a callback gets without a token that opens the run's attempt: whether the
/// run exists, the id is malformed, or the token is missing or wrong, a caller without the token
/// learns nothing about which runs exist.
fn callback_refused() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "the callback token does not match an open attempt of this run",
    )
    .with_field(CALLBACK_TOKEN)
}

/// The run a callback names: a path that names no run is refused as a bad token is.
#[derive(Debug)]
pub struct CallbackRun(pub RunId);

impl<S: Send + Sync> FromRequestParts<S> for CallbackRun {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(id) =
            Path::<String>::from_request_parts(parts, state).await.map_err(|_| callback_refused())?;
        RunId::parse(&id).map(CallbackRun).ok_or_else(callback_refused)
    }
}

fn callback_token(headers: &HeaderMap) -> Result<&str, ApiError> {
    headers
        .get(CALLBACK_TOKEN)
        .and_then(|v| v.to_str().ok())
        .filter(|t| !t.is_empty())
        .ok_or_else(callback_refused)
}

fn callback_error(e: CallbackError) -> ApiError {
    match e {
        CallbackError::NotFound | CallbackError::BadToken => callback_refused(),
        CallbackError::NotOpen(_) => ApiError::new(StatusCode::CONFLICT, "attempt_closed", e.to_string()),
        CallbackError::Store(s) => s.into(),
    }
}

/// Keep an accepted (202) attempt alive. Authenticated by the attempt's callback token.
#[utoipa::path(post, path = "/v1/runs/{run_id}/heartbeat", operation_id = "heartbeatRun", tag = "callbacks",
    params(("run_id" = String, Path), ("X-Sundial-Callback-Token" = String, Header)),
    responses((status = 200, body = RunView),
        (status = 401, description = "No open attempt of this run has this token (whether or not the run exists)", body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn heartbeat(
    State(state): State<AppState>,
    headers: HeaderMap,
    CallbackRun(id): CallbackRun,
) -> Result<Json<RunView>, ApiError> {
    let run = state
        .use_cases
        .run_control
        .heartbeat(&id, callback_token(&headers)?)
        .await
        .map_err(callback_error)?;
    Ok(Json(state.run_view(&run)))
}

/// How a target reports the end of accepted work.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteRequest {
    pub succeeded: bool,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    /// A failure retrying cannot fix: the run ends now.
    #[serde(default)]
    pub permanent: bool,
}

/// End an accepted (202) attempt. Authenticated by the attempt's callback token.
#[utoipa::path(post, path = "/v1/runs/{run_id}/complete", operation_id = "completeRun", tag = "callbacks",
    params(("run_id" = String, Path), ("X-Sundial-Callback-Token" = String, Header)),
    request_body = CompleteRequest,
    responses((status = 200, body = RunView), (status = 400, body = ErrorBody),
        (status = 401, description = "No open attempt of this run has this token (whether or not the run exists)", body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn complete(
    State(state): State<AppState>,
    headers: HeaderMap,
    CallbackRun(id): CallbackRun,
    ActsForRun(acts): ActsForRun,
    JsonBody(body): JsonBody<CompleteRequest>,
) -> Result<Json<RunView>, ApiError> {
    let completion = Completion {
        succeeded: body.succeeded,
        output: body.output,
        error: body.error,
        permanent: body.permanent,
    };
    let run = acts
        .run_control
        .complete(&id, callback_token(&headers)?, completion)
        .await
        .map_err(callback_error)?;
    Ok(Json(state.run_view(&run)))
}
