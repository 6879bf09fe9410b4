//! The API's error responses: every failure is `{"error": {"code", "message", "field"}}` with
//! the status that says what the caller can do.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sundial_app::jobs::JobsError;
use sundial_domain::ports::store::StoreError;
use sundial_domain::validation::ValidationError;
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `invalid_field`, `not_found`, `version_mismatch`, …
    pub code: &'static str,
    pub message: String,
    /// The offending field as a dotted path, when one is to blame.
    pub field: Option<String>,
}

/// An error on its way to becoming a response.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), field: None }
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn unauthorized() -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "missing or unknown API key")
            .with_field("Authorization")
    }

    pub fn not_found() -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such job")
    }

    /// A request field that is malformed (bad JSON, wrong type, unknown field): 400.
    pub fn bad_request(e: ValidationError) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", e.reason).with_field(e.field)
    }
}

impl From<ValidationError> for ApiError {
    /// A well-formed document with a value Sundial cannot accept: 422.
    fn from(e: ValidationError) -> Self {
        let code = if e.field == "payload" { "payload_too_large" } else { "invalid_field" };
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, code, e.reason).with_field(e.field)
    }
}

impl From<JobsError> for ApiError {
    fn from(e: JobsError) -> Self {
        match e {
            JobsError::Malformed(v) => ApiError::bad_request(v),
            JobsError::Invalid(v) => v.into(),
            JobsError::NotFound => ApiError::not_found(),
            JobsError::VersionNotKept(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "version_not_kept", e.to_string()).with_field("version")
            }
            JobsError::VersionMismatch { .. } => {
                ApiError::new(StatusCode::PRECONDITION_FAILED, "version_mismatch", e.to_string())
                    .with_field("If-Match")
            }
            JobsError::NameTaken(_) => {
                ApiError::new(StatusCode::CONFLICT, "name_taken", e.to_string()).with_field("name")
            }
            JobsError::QuotaExceeded(_) => {
                ApiError::new(StatusCode::FORBIDDEN, "quota_exceeded", e.to_string())
            }
            JobsError::Contended => ApiError::new(StatusCode::CONFLICT, "contended", e.to_string()),
            JobsError::RunActive(_) => ApiError::new(StatusCode::CONFLICT, "run_active", e.to_string()),
            JobsError::RunEnded(_) => ApiError::new(StatusCode::CONFLICT, "run_ended", e.to_string()),
            JobsError::Paused => {
                ApiError::new(StatusCode::CONFLICT, "job_paused", e.to_string()).with_field("paused")
            }
            JobsError::HasChildren(_) => ApiError::new(StatusCode::CONFLICT, "has_children", e.to_string()),
            JobsError::Store(s) => s.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::error!(error = %e, "storage error");
        if e.is_retryable() {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "storage is unavailable; retry")
        } else {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "internal error")
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let unauthorized = self.status == StatusCode::UNAUTHORIZED;
        let body =
            ErrorBody { error: ErrorDetail { code: self.code, message: self.message, field: self.field } };
        let mut response = (self.status, Json(body)).into_response();
        if unauthorized {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
