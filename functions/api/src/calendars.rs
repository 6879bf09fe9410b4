//! Handlers of `/v1/calendars`: an owner's named calendars, created or replaced with PUT (under
//! `If-Match` when given), read with the jobs that name them, listed, and deleted once no job
//! names them. An edit reaches every job that names the calendar before the response.

use crate::audit::Acts;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, IfMatch, JsonBody};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sundial_app::calendars::{CalendarView, CalendarsError, Put};
use sundial_domain::calendar::{HolidayEntry, NamedCalendarDocument};
use sundial_domain::named_calendar::NamedCalendar;
use utoipa::ToSchema;

/// A named calendar as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CalendarResponse {
    pub name: String,
    /// The ETag: send it back in `If-Match` to edit or delete only this version.
    pub version: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub business_days: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub holidays: Vec<HolidayEntry>,
    /// The jobs that name the calendar, with the version each holds (on single-calendar
    /// responses; every one holds the current version once an edit has reached it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jobs: Option<Vec<CalendarJob>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A job that names a calendar.
#[derive(Debug, Serialize, ToSchema)]
pub struct CalendarJob {
    pub id: String,
    pub name: String,
    /// The version of the calendar its instants are computed from.
    pub holds: Option<u64>,
}

/// The owner's calendars.
#[derive(Debug, Serialize, ToSchema)]
pub struct CalendarList {
    pub calendars: Vec<CalendarResponse>,
}

impl From<NamedCalendar> for CalendarResponse {
    fn from(calendar: NamedCalendar) -> Self {
        let NamedCalendarDocument { description, timezone, business_days, holidays } = calendar.document;
        CalendarResponse {
            name: calendar.name,
            version: calendar.version,
            description,
            timezone,
            business_days,
            holidays,
            jobs: None,
            created_at: calendar.created_at,
            updated_at: calendar.updated_at,
        }
    }
}

impl From<CalendarView> for CalendarResponse {
    fn from(view: CalendarView) -> Self {
        let jobs = view
            .jobs
            .into_iter()
            .map(|job| CalendarJob { id: job.id.to_string(), name: job.name, holds: job.holds })
            .collect();
        CalendarResponse { jobs: Some(jobs), ..CalendarResponse::from(view.calendar) }
    }
}

impl From<CalendarsError> for ApiError {
    fn from(e: CalendarsError) -> Self {
        match e {
            CalendarsError::Invalid(v) => v.into(),
            CalendarsError::NotFound => ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such calendar"),
            CalendarsError::VersionMismatch { .. } => {
                ApiError::new(StatusCode::PRECONDITION_FAILED, "version_mismatch", e.to_string())
                    .with_field("If-Match")
            }
            CalendarsError::InUse(_) => ApiError::new(StatusCode::CONFLICT, "calendar_in_use", e.to_string()),
            CalendarsError::QuotaExceeded(_) => {
                ApiError::new(StatusCode::FORBIDDEN, "quota_exceeded", e.to_string())
            }
            CalendarsError::NotTaken { .. } => {
                ApiError::new(StatusCode::CONFLICT, "calendar_not_taken", e.to_string())
            }
            CalendarsError::Unfinished { .. } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unfinished", e.to_string())
            }
            CalendarsError::Contended => ApiError::new(StatusCode::CONFLICT, "contended", e.to_string()),
            CalendarsError::Store(s) => s.into(),
        }
    }
}

/// The calendar as a response, with its version as `ETag`.
fn calendar_response(status: StatusCode, body: CalendarResponse) -> Response {
    let mut headers = HeaderMap::new();
    if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", body.version)) {
        headers.insert(header::ETAG, etag);
    }
    (status, headers, Json(body)).into_response()
}

/// Create the calendar, or replace it; every job that names it takes the edit from its next
/// unclaimed instant on. The same body again is a replay (200, whatever `If-Match`) that finishes
/// reaching jobs a lost request left behind.
#[utoipa::path(put, path = "/v1/calendars/{name}", operation_id = "putCalendar", tag = "calendars",
    params(("name" = String, Path, description = "1-64 letters, digits, '-', '_', '.'"),
        ("If-Match" = Option<String>, Header, description = "The ETag this edit is based on")),
    request_body = NamedCalendarDocument,
    responses((status = 200, body = CalendarResponse), (status = 201, body = CalendarResponse),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, description = "The owner has the most calendars allowed", body = ErrorBody),
        (status = 409, description = "Saved, but jobs naming it cannot take it (`calendar_not_taken`, naming them and why)", body = ErrorBody),
        (status = 412, description = "If-Match names another version", body = ErrorBody),
        (status = 422, body = ErrorBody),
        (status = 503, description = "Saved, but some jobs still hold an older copy: send it again", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn put(
    acts: Acts,
    Caller(owner): Caller,
    Path(name): Path<String>,
    IfMatch(if_match): IfMatch,
    JsonBody(document): JsonBody<NamedCalendarDocument>,
) -> Result<Response, ApiError> {
    let (view, put) = acts.calendars.put(&owner, &name, &document, if_match).await?;
    let status = if put == Put::Created { StatusCode::CREATED } else { StatusCode::OK };
    Ok(calendar_response(status, view.into()))
}

/// The calendar, with the jobs that name it.
#[utoipa::path(get, path = "/v1/calendars/{name}", operation_id = "getCalendar", tag = "calendars",
    params(("name" = String, Path)),
    responses((status = 200, body = CalendarResponse), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    Caller(owner): Caller,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let view = state.use_cases.calendars.get(&owner, &name).await?;
    Ok(calendar_response(StatusCode::OK, view.into()))
}

/// The owner's calendars, by name (at most 100).
#[utoipa::path(get, path = "/v1/calendars", operation_id = "listCalendars", tag = "calendars",
    responses((status = 200, body = CalendarList), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    Caller(owner): Caller,
) -> Result<Json<CalendarList>, ApiError> {
    let calendars = state.use_cases.calendars.list(&owner).await?;
    Ok(Json(CalendarList { calendars: calendars.into_iter().map(CalendarResponse::from).collect() }))
}

/// Delete the calendar; refused while a job names it.
#[utoipa::path(delete, path = "/v1/calendars/{name}", operation_id = "deleteCalendar", tag = "calendars",
    params(("name" = String, Path), ("If-Match" = Option<String>, Header, description = "The ETag to delete only")),
    responses((status = 204), (status = 400, description = "If-Match is not an ETag", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Jobs name the calendar (`calendar_in_use`); the message names them", body = ErrorBody),
        (status = 412, description = "If-Match names another version", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete(
    acts: Acts,
    Caller(owner): Caller,
    Path(name): Path<String>,
    IfMatch(if_match): IfMatch,
) -> Result<StatusCode, ApiError> {
    acts.calendars.delete(&owner, &name, if_match).await?;
    Ok(StatusCode::NO_CONTENT)
}
