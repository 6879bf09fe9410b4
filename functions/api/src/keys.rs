//! Handlers of `/v1/keys`: an owner's API keys, made (the secret shown once), listed (never a
//! secret or its digest) and revoked. Admin keys only.

use crate::audit::Acts;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Acting, JsonBody};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sundial_app::keys::KeysError;
use sundial_domain::keys::{ApiKey, KeyDocument, Role};
use utoipa::ToSchema;

/// An API key as the API shows it: never its secret, nor its digest.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyView {
    pub id: String,
    pub name: String,
    pub role: Role,
    /// The key that made it (its name), or the owner for a configured key.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    /// Its last use, to the minute.
    pub last_used_at: Option<DateTime<Utc>>,
    /// The JWT subject a grant is for (a grant has no secret).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The secret: only in the response that made the key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl From<ApiKey> for KeyView {
    fn from(key: ApiKey) -> Self {
        KeyView {
            id: key.id,
            name: key.name,
            role: key.role,
            created_by: key.created_by,
            created_at: key.created_at,
            expires_at: key.expires_at,
            last_used_at: key.last_used_at,
            subject: key.subject,
            secret: None,
        }
    }
}

/// The owner's keys.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<KeyView>,
}

impl From<KeysError> for ApiError {
    fn from(e: KeysError) -> Self {
        match e {
            KeysError::Invalid(v) => v.into(),
            KeysError::NotFound => ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such key"),
            KeysError::QuotaExceeded(_) => {
                ApiError::new(StatusCode::FORBIDDEN, "quota_exceeded", e.to_string())
            }
            KeysError::GrantExists => {
                ApiError::new(StatusCode::CONFLICT, "grant_exists", e.to_string()).with_field("subject")
            }
            KeysError::Store(s) => s.into(),
        }
    }
}

/// Make a key; its secret is in this response only. With `subject`, a grant to a JWT subject
/// instead: no secret; the subject's token acts in this owner's name, with the role, on requests
/// that say `X-Sundial-Owner: <owner>`.
#[utoipa::path(post, path = "/v1/keys", operation_id = "createKey", tag = "keys", request_body = KeyDocument,
    responses((status = 201, body = KeyView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, description = "Not an admin key, or the owner has the most keys allowed", body = ErrorBody),
        (status = 409, description = "The owner has a grant to this subject already", body = ErrorBody),
        (status = 422, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn create(
    acts: Acts,
    Acting(principal): Acting,
    JsonBody(document): JsonBody<KeyDocument>,
) -> Result<Response, ApiError> {
    let made = acts.keys.create(&principal, &document).await?;
    let view = KeyView { secret: made.secret, ..KeyView::from(made.key) };
    let mut response = (StatusCode::CREATED, Json(view)).into_response();
    // Shown once, stored nowhere: a replay of this creation shows the key without it.
    response.extensions_mut().insert(crate::idempotency::Withheld(&["secret"]));
    Ok(response)
}

/// The owner's keys, by name.
#[utoipa::path(get, path = "/v1/keys", operation_id = "listKeys", tag = "keys",
    responses((status = 200, body = KeyList), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    Acting(principal): Acting,
) -> Result<Json<KeyList>, ApiError> {
    let keys = state.use_cases.keys.list(&principal.owner).await?;
    Ok(Json(KeyList { keys: keys.into_iter().map(KeyView::from).collect() }))
}

/// Revoke a key: the next request that presents it is refused.
#[utoipa::path(delete, path = "/v1/keys/{id}", operation_id = "revokeKey", tag = "keys",
    params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn revoke(
    acts: Acts,
    Acting(principal): Acting,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    acts.keys.revoke(&principal.owner, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
