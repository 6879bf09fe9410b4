//! What a request must be before any route reads it, and the JSON answers for what the router
//! itself refuses: a URI too long (414), header fields too large or too many (431), a method the
//! route does not have (405, with `Allow`), a route that does not exist (404).
//!
//! The local runtime's HTTP server accepts more (hyper: 100 header fields, about 400 KB), so
//! there a request either reaches a handler or gets one of these JSON errors; past hyper's own
//! limits the runtime rewrites hyper's empty-bodied answers as JSON (`sundial_local::wire_errors`). In AWS, API Gateway
//! refuses first what passes its own limits (10 KiB of request line and headers) with its own
//! answer; what it lets through meets these bounds or gets them.

use crate::error::ApiError;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;

/// Longest path and query, in bytes.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Most header fields in one request.
pub const MAX_HEADERS: usize = 64;
/// Largest sum of header names and values, in bytes.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// Middleware: refuses a request whose URI or header section is out of bounds.
pub async fn bounded(req: Request, next: Next) -> Result<Response, ApiError> {
    let uri_bytes = req.uri().path_and_query().map_or(0, |pq| pq.as_str().len());
    if uri_bytes > MAX_URI_BYTES {
        return Err(ApiError::new(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!("the path and query are {uri_bytes} bytes; the limit is {MAX_URI_BYTES}"),
        ));
    }
    let headers = req.headers();
    let header_bytes: usize = headers.iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
    if headers.len() > MAX_HEADERS || header_bytes > MAX_HEADER_BYTES {
        return Err(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            format!(
                "{} header fields of {header_bytes} bytes; the limits are {MAX_HEADERS} fields and \
                 {MAX_HEADER_BYTES} bytes",
                headers.len()
            ),
        ));
    }
    Ok(next.run(req).await)
}

/// The answer for a path that exists without the request's method (the router adds `Allow`).
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// The answer for a path no route has.
pub async fn no_route() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}
