//! `Idempotency-Key` on POST: a retried request gets the first response again; the same key on
//! a different request is a 409.
//!
//! The key is scoped to the owner; the request's fingerprint is a digest of method, path and
//! body. The key is claimed before the handler runs (so two concurrent retries cannot both act),
//! the response is stored after, and a 5xx releases the claim so that a retry runs again. The
//! handler sees the key and when it was first seen ([`RequestKey`]): an effect it derives from
//! them (a triggered run's key) is the same on every retry, so a 5xx after the effect cannot
//! double it.

use crate::error::ApiError;
use crate::extract::Caller;
use crate::state::AppState;
use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use sundial_app::jobs::RequestKey;
use sundial_domain::ports::store::{Claim, StoredResponse};

pub const HEADER: &str = "idempotency-key";
/// Response headers worth replaying.
const KEPT_HEADERS: [HeaderName; 3] = [header::CONTENT_TYPE, header::ETAG, header::LOCATION];

pub async fn idempotent(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let Some(key) = req.headers().get(HEADER) else {
        return Ok(next.run(req).await);
    };
    if req.method() != Method::POST {
        return Ok(next.run(req).await);
    }
    let key = valid_key(key)?;
    let Caller(owner) = req.extensions().get::<Caller>().cloned().ok_or_else(ApiError::unauthorized)?;
    let (parts, body) = req.into_parts();
    let bytes = to_bytes(body, state.settings.body_limit()).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the limit is {} bytes", state.settings.body_limit()),
        )
        .with_field("body")
    })?;
    let scoped = format!("{owner}#{key}");
    let first_seen = match state
        .idempotency
        .claim(&scoped, &fingerprint(&parts, &bytes), state.ports.clock.now())
        .await?
    {
        Claim::Replay(stored) => return Ok(replay(stored)),
        Claim::Mismatch => {
            return Err(conflict(
                "idempotency_key_reused",
                "this Idempotency-Key was used for a different request",
            ));
        }
        Claim::InProgress => {
            return Err(conflict(
                "request_in_progress",
                "a request with this Idempotency-Key is being processed; retry shortly",
            ));
        }
        Claim::New { first_seen } => first_seen,
    };
    let mut request = Request::from_parts(parts, Body::from(bytes));
    request.extensions_mut().insert(RequestKey { key, first_seen });
    let response = next.run(request).await;
    if response.status().is_server_error() {
        if let Err(e) = state.idempotency.release(&scoped).await {
            tracing::warn!(error = %e, "could not release an idempotency claim; it expires by itself");
        }
        return Ok(response);
    }
    record(&state, &scoped, response).await
}

/// Fields of a JSON response body that its replay leaves out: what a handler shows once and
/// stores nowhere (a key's secret), set on its response as an extension.
#[derive(Debug, Clone, Copy)]
pub struct Withheld(pub &'static [&'static str]);

/// The key, if it is 1-255 visible ASCII characters.
fn valid_key(key: &HeaderValue) -> Result<String, ApiError> {
    key.to_str()
        .ok()
        .filter(|k| (1..=255).contains(&k.len()) && k.bytes().all(|b| (0x20..=0x7e).contains(&b)))
        .map(str::to_string)
        .ok_or_else(|| {
            ApiError::new(StatusCode::BAD_REQUEST, "bad_request", "must be 1-255 visible ASCII characters")
                .with_field("Idempotency-Key")
        })
}

/// What makes two requests the same: method, path and body.
fn fingerprint(parts: &http::request::Parts, body: &[u8]) -> String {
    let mut digest = Sha256::new();
    digest.update(parts.method.as_str());
    digest.update(b" ");
    digest.update(parts.uri.path());
    digest.update(b"\n");
    digest.update(body);
    hex::encode(digest.finalize())
}

/// A 409 about the key.
fn conflict(code: &'static str, message: &'static str) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, code, message).with_field("Idempotency-Key")
}

/// Records `response` as the answer to the key `scoped`, and returns it. The effect happened:
/// even if recording it fails, the caller gets the real response.
async fn record(state: &AppState, scoped: &str, response: Response) -> Result<Response, ApiError> {
    let (parts, body) = response.into_parts();
    let body = to_bytes(body, usize::MAX).await.map_err(|e| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", format!("reading the response: {e}"))
    })?;
    let kept = match (parts.extensions.get::<Withheld>(), serde_json::from_slice::<serde_json::Value>(&body))
    {
        (Some(Withheld(fields)), Ok(mut value)) => {
            if let Some(map) = value.as_object_mut() {
                for field in *fields {
                    map.remove(*field);
                }
            }
            value.to_string()
        }
        _ => String::from_utf8_lossy(&body).into_owned(),
    };
    let stored = StoredResponse {
        status: parts.status.as_u16(),
        headers: KEPT_HEADERS
            .iter()
            .filter_map(|name| Some((name.to_string(), parts.headers.get(name)?.to_str().ok()?.to_string())))
            .collect::<BTreeMap<_, _>>(),
        body: kept,
    };
    if let Err(e) = state.idempotency.complete(scoped, &stored, state.ports.clock.now()).await {
        tracing::error!(error = %e, "could not record an idempotent response");
    }
    Ok(Response::from_parts(parts, Body::from(body)))
}

fn replay(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut response = (status, stored.body).into_response();
    for (name, value) in stored.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            response.headers_mut().insert(name, value);
        }
    }
    response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}
