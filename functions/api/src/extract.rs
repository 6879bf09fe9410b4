//! Request extractors that fail with the API's JSON errors: the caller's identity, JSON bodies
//! (size-limited, one value per key, field-named errors), job ids from the path, `If-Match`, and
//! the origin a request came in on; query parameters, each checked and named when wrong.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use sundial_domain::job::{JobId, Owner};
use sundial_domain::validation::ValidationError;

/// The authenticated owner, put into the request by the auth middleware.
#[derive(Debug, Clone)]
pub struct Caller(pub Owner);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(ApiError::unauthorized)
    }
}

/// Who is calling, as authenticated: owner, role and key.
#[derive(Debug, Clone)]
pub struct Acting(pub sundial_domain::keys::Principal);

impl<S: Send + Sync> FromRequestParts<S> for Acting {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Acting>().cloned().ok_or_else(ApiError::unauthorized)
    }
}

/// A JSON body decoded into `T`; errors name the field.
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

/// Whether the request's `Content-Type` is one of `media` (parameters such as `charset` aside).
fn has_media_type(req: &Request, media: &[&str]) -> bool {
    let value = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let essence = value.and_then(|v| v.split(';').next()).map(str::trim);
    essence.is_some_and(|essence| media.iter().any(|m| essence.eq_ignore_ascii_case(m)))
}

/// Refuses a body not sent as one of `media`: 415 naming the types taken.
fn require_media_type(req: &Request, media: &[&str]) -> Result<(), ApiError> {
    if has_media_type(req, media) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!("send the body as {}", media.join(" or ")),
    )
    .with_field("Content-Type"))
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        require_media_type(&req, &["application/json"])?;
        JsonBody::decoded(req, state).await
    }
}

impl<T: DeserializeOwned> JsonBody<T> {
    /// The body decoded, whatever its media type was checked to be.
    async fn decoded<S: Send + Sync>(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            ApiError::new(rejection.status(), "body_rejected", rejection.body_text()).with_field("body")
        })?;
        let value = crate::strict_json::from_slice(&bytes).map_err(|e| {
            ApiError::bad_request(ValidationError::new("body", format!("not valid JSON: {e}")))
        })?;
        let decoded = sundial_domain::validation::decode(value).map_err(ApiError::bad_request)?;
        Ok(JsonBody(decoded))
    }
}

/// A JSON body decoded into `T`, or `None` when the request has no body at all (an empty POST);
/// a body that is there is checked as [`JsonBody`]'s is.
#[derive(Debug)]
pub struct OptionalJsonBody<T>(pub Option<T>);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = has_media_type(&req, &["application/json"]);
        let (parts, body) = req.into_parts();
        let bytes = Bytes::from_request(Request::from_parts(parts.clone(), body), state).await.map_err(
            |rejection| {
                ApiError::new(rejection.status(), "body_rejected", rejection.body_text()).with_field("body")
            },
        )?;
        if bytes.is_empty() {
            return Ok(OptionalJsonBody(None));
        }
        let req = Request::from_parts(parts, axum::body::Body::from(bytes));
        if !json {
            require_media_type(&req, &["application/json"])?;
        }
        let JsonBody(decoded) = JsonBody::decoded(req, state).await?;
        Ok(OptionalJsonBody(Some(decoded)))
    }
}

/// A JSON merge patch body (RFC 7396): an object, sent as `application/merge-patch+json`
/// (its registered media type) or `application/json`.
#[derive(Debug)]
pub struct JsonObject(pub serde_json::Value);

impl<S: Send + Sync> FromRequest<S> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        require_media_type(&req, &["application/merge-patch+json", "application/json"])?;
        let JsonBody(value) =
            JsonBody::<serde_json::Map<String, serde_json::Value>>::decoded(req, state).await?;
        Ok(JsonObject(serde_json::Value::Object(value)))
    }
}

/// A job id from the path; anything that is not a job id is simply not found.
#[derive(Debug)]
pub struct JobPath(pub JobId);

impl<S: Send + Sync> FromRequestParts<S> for JobPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(id) =
            Path::<String>::from_request_parts(parts, state).await.map_err(|_| ApiError::not_found())?;
        JobId::parse(&id).map(JobPath).ok_or_else(ApiError::not_found)
    }
}

/// The version in `If-Match`, if the header is present: `"3"` (or `3`). `If-Match` compares
/// strongly (RFC 9110, 13.1.1), so a weak tag (`W/"3"`) never matches: 412.
#[derive(Debug)]
pub struct IfMatch(pub Option<u64>);

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get(header::IF_MATCH) else {
            return Ok(IfMatch(None));
        };
        let text = value.to_str().unwrap_or_default().trim();
        if text == "*" {
            return Ok(IfMatch(None));
        }
        if text.starts_with("W/") {
            return Err(ApiError::new(
                StatusCode::PRECONDITION_FAILED,
                "version_mismatch",
                "If-Match compares strongly (RFC 9110): a weak ETag never matches; send the ETag as given, such as \"3\"",
            )
            .with_field("If-Match"));
        }
        let bare = text.trim_matches('"');
        bare.parse().map(|v| IfMatch(Some(v))).map_err(|_| {
            ApiError::bad_request(ValidationError::new("If-Match", "must be the job's ETag, such as \"3\""))
        })
    }
}

/// The endpoint a request came in on (`https://` and its `Host`), if it names one: one of
/// Sundial's own endpoints, which jobs may not target.
#[derive(Debug)]
pub struct Origin(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for Origin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let host = parts.headers.get(header::HOST).and_then(|v| v.to_str().ok()).filter(|h| !h.is_empty());
        Ok(Origin(host.map(|host| format!("https://{host}"))))
    }
}

/// Refuses a query naming a parameter other than `known`: 400 naming it and listing them.
pub fn only_parameters(query: &HashMap<String, String>, known: &[&str]) -> Result<(), ApiError> {
    match query.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => Err(ApiError::bad_request(ValidationError::new(
            unknown,
            format!("is not a parameter of this endpoint ({})", known.join(", ")),
        ))),
        None => Ok(()),
    }
}

/// A whole number from 1 to `max` in the query (`default` when absent).
pub fn query_number(
    query: &HashMap<String, String>,
    name: &str,
    default: u32,
    max: u32,
) -> Result<u32, ApiError> {
    match query.get(name) {
        None => Ok(default),
        Some(text) => text.parse::<u32>().ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
            ApiError::bad_request(ValidationError::new(
                name,
                format!("must be a whole number from 1 to {max}"),
            ))
        }),
    }
}

/// An RFC 3339 instant in the query, if given.
pub fn query_instant(query: &HashMap<String, String>, name: &str) -> Result<Option<DateTime<Utc>>, ApiError> {
    query
        .get(name)
        .map(|text| {
            DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&Utc)).map_err(|_| {
                ApiError::bad_request(ValidationError::new(
                    name,
                    format!("`{text}` is not an RFC 3339 instant such as 2026-05-01T09:30:00Z"),
                ))
            })
        })
        .transpose()
}
