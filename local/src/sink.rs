//! A target to try Sundial with: an HTTP server on loopback that answers every request `200 OK`
//! and logs what it received (the run, the attempt, the body), so that the README's example and
//! a newcomer's first jobs have somewhere to call that exists on any machine. `sundial-local
//! serve` starts it beside the API (`SUNDIAL_SINK_LISTEN`, default `127.0.0.1:8099`; `off`: not).

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::IntoResponse;
use std::future::Future;
use sundial_domain::target::headers;

/// The most of a request's body a log line shows.
const SHOWN_BYTES: usize = 1024;

/// Serves the sink on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = axum::Router::new().fallback(received);
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

/// One request: logged, answered 200.
async fn received(method: Method, uri: Uri, request_headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let header =
        |name: &str| request_headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let shown = String::from_utf8_lossy(&body[..body.len().min(SHOWN_BYTES)]).into_owned();
    tracing::info!(
        target: "sink",
        method = %method,
        path = %uri.path(),
        run_id = header(headers::RUN_ID),
        attempt = header(headers::ATTEMPT),
        body = shown,
        "the sink received a request"
    );
    axum::Json(serde_json::json!({"received": true}))
}
