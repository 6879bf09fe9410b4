//! Handlers of `/v1/groups/{name}`: an owner's concurrency groups, created or changed with PUT,
//! read with their running and waiting counts, deleted once no job names them.

use crate::audit::Acts;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, JsonBody};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sundial_app::groups::{GroupView, GroupsError};
use sundial_domain::group::GroupDocument;
use utoipa::ToSchema;

/// A concurrency group as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupResponse {
    pub name: String,
    /// How many attempts of the group's jobs may run at once.
    pub max_running: u32,
    /// Attempts running now (holding a slot).
    pub running: usize,
    /// Runs waiting for a slot, oldest instant first.
    pub waiting: usize,
    /// The ids of the jobs that name the group.
    pub jobs: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<GroupView> for GroupResponse {
    fn from(view: GroupView) -> Self {
        GroupResponse {
            name: view.name,
            max_running: view.max_running,
            running: view.running,
            waiting: view.waiting,
            jobs: view.jobs.iter().map(ToString::to_string).collect(),
            created_at: view.created_at,
            updated_at: view.updated_at,
        }
    }
}

impl From<GroupsError> for ApiError {
    fn from(e: GroupsError) -> Self {
        match e {
            GroupsError::Invalid(v) => v.into(),
            GroupsError::NotFound => ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such group"),
            GroupsError::InUse(_) => ApiError::new(StatusCode::CONFLICT, "group_in_use", e.to_string()),
            GroupsError::Contended => ApiError::new(StatusCode::CONFLICT, "contended", e.to_string()),
            GroupsError::Store(s) => s.into(),
        }
    }
}

/// Create the group, or set its limit.
#[utoipa::path(put, path = "/v1/groups/{name}", operation_id = "putGroup", tag = "groups",
    params(("name" = String, Path, description = "1-64 letters, digits, '-', '_', '.'")), request_body = GroupDocument,
    responses((status = 200, body = GroupResponse), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn put(
    acts: Acts,
    Caller(owner): Caller,
    Path(name): Path<String>,
    JsonBody(document): JsonBody<GroupDocument>,
) -> Result<Json<GroupResponse>, ApiError> {
    Ok(Json(acts.groups.put(&owner, &name, &document).await?.into()))
}

/// The group, with its running and waiting counts.
#[utoipa::path(get, path = "/v1/groups/{name}", operation_id = "getGroup", tag = "groups",
    params(("name" = String, Path)),
    responses((status = 200, body = GroupResponse), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    Caller(owner): Caller,
    Path(name): Path<String>,
) -> Result<Json<GroupResponse>, ApiError> {
    Ok(Json(state.use_cases.groups.get(&owner, &name).await?.into()))
}

/// Delete the group; refused while a job names it.
#[utoipa::path(delete, path = "/v1/groups/{name}", operation_id = "deleteGroup", tag = "groups",
    params(("name" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Jobs name the group", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete(
    acts: Acts,
    Caller(owner): Caller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    acts.groups.delete(&owner, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
