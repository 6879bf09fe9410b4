//! Handlers of a job's history: its kept versions (`/v1/jobs/{id}/versions`), one version's
//! document, the fields two versions differ in (`/v1/jobs/{id}/diff`), and a rollback to a
//! version (a new version equal to it, under `If-Match`). Documents are shown as the API shows a
//! job's: secret header values as secret, named calendars by name.

use crate::audit::Acts;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, IfMatch, JobPath, JsonBody, query_number};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::HashMap;
use sundial_domain::job::{JobDocument, JobId};
use sundial_domain::named_calendar;
use sundial_domain::validation::ValidationError;
use sundial_domain::versions::{FieldChange, KEPT_VERSIONS};
use utoipa::ToSchema;

/// A kept version in brief.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionSummaryView {
    pub version: u64,
    /// When the write that made it was made.
    pub at: DateTime<Utc>,
    /// The fields it changed from the version kept before it (none for the oldest kept).
    pub changed: Vec<String>,
}

/// A job's kept versions, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionList {
    pub versions: Vec<VersionSummaryView>,
    /// Pass back as `before` for older versions; null when none are kept before these.
    pub before: Option<u64>,
}

/// One kept version of a job's document.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionView {
    pub version: u64,
    pub at: DateTime<Utc>,
    pub document: JobDocument,
}

/// The fields two versions differ in.
#[derive(Debug, Serialize, ToSchema)]
pub struct DiffView {
    pub from: u64,
    /// The version compared with (the current one when none was named).
    pub to: u64,
    pub changes: Vec<FieldChange>,
}

/// What a rollback asks for.
#[derive(Debug, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    /// The kept version whose document becomes the job's next version.
    pub version: u64,
}

/// A version number from the path or the query: a whole number, else a 400 naming `field`.
fn version_number(text: &str, field: &str) -> Result<u64, ApiError> {
    text.parse::<u64>().ok().filter(|v| *v > 0).ok_or_else(|| {
        ApiError::bad_request(ValidationError::new(field, "must be a version: a whole number from 1"))
    })
}

/// The job's kept versions, newest first.
#[utoipa::path(get, path = "/v1/jobs/{id}/versions", operation_id = "listJobVersions", tag = "jobs",
    params(("id" = String, Path),
        ("limit" = Option<u32>, Query, description = "1-100 (default 20)"),
        ("before" = Option<u64>, Query, description = "Only versions before this one (the `before` of the previous page)")),
    responses((status = 200, body = VersionList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<VersionList>, ApiError> {
    let limit = query_number(&query, "limit", 20, KEPT_VERSIONS as u32)? as usize;
    let before = query.get("before").map(|b| version_number(b, "before")).transpose()?;
    let (versions, before) = state.use_cases.jobs.versions(&owner, &id, limit, before).await?;
    let versions = versions
        .into_iter()
        .map(|v| VersionSummaryView { version: v.version, at: v.at, changed: v.changed })
        .collect();
    Ok(Json(VersionList { versions, before }))
}

/// One kept version of the job's document.
#[utoipa::path(get, path = "/v1/jobs/{id}/versions/{version}", operation_id = "getJobVersion", tag = "jobs",
    params(("id" = String, Path), ("version" = u64, Path)),
    responses((status = 200, body = VersionView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "No such job, or the version is not kept", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    Caller(owner): Caller,
    Path((id, version)): Path<(String, String)>,
) -> Result<Json<VersionView>, ApiError> {
    let id = JobId::parse(&id).ok_or_else(ApiError::not_found)?;
    let version = version_number(&version, "version")?;
    let kept = state.use_cases.jobs.version(&owner, &id, version).await?;
    let document = named_calendar::written(&kept.document.redacted());
    Ok(Json(VersionView { version: kept.version, at: kept.at, document }))
}

/// The fields that differ between two versions of the job (`to` defaults to the current one).
#[utoipa::path(get, path = "/v1/jobs/{id}/diff", operation_id = "diffJobVersions", tag = "jobs",
    params(("id" = String, Path), ("from" = u64, Query), ("to" = Option<u64>, Query, description = "Default: the current version")),
    responses((status = 200, body = DiffView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "No such job, or a version is not kept", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn diff(
    State(state): State<AppState>,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<DiffView>, ApiError> {
    let from = query
        .get("from")
        .ok_or_else(|| {
            ApiError::bad_request(ValidationError::new("from", "is required: the version to compare from"))
        })
        .and_then(|f| version_number(f, "from"))?;
    let to = query.get("to").map(|t| version_number(t, "to")).transpose()?;
    let changes = state.use_cases.jobs.diff(&owner, &id, from, to).await?;
    let to = match to {
        Some(to) => to,
        None => state.use_cases.jobs.get(&owner, &id).await?.version,
    };
    Ok(Json(DiffView { from, to, changes }))
}

/// Make a new version of the job equal to a kept one, checked as any edit is.
#[utoipa::path(post, path = "/v1/jobs/{id}/rollback", operation_id = "rollbackJob", tag = "jobs",
    params(("id" = String, Path), ("If-Match" = Option<String>, Header, description = "The ETag this rollback is based on")),
    request_body = RollbackRequest,
    responses((status = 200, body = crate::view::JobView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "No such job, or the version is not kept", body = ErrorBody),
        (status = 412, description = "If-Match names another version", body = ErrorBody),
        (status = 422, description = "The version's document is no longer valid as it stands", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn rollback(
    State(state): State<AppState>,
    acts: Acts,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    IfMatch(if_match): IfMatch,
    JsonBody(request): JsonBody<RollbackRequest>,
) -> Result<Response, ApiError> {
    let job = acts.jobs.rollback(&owner, &id, request.version, if_match).await?;
    crate::jobs::job_response(&state, StatusCode::OK, &job).await
}
