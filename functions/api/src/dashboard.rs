//! The web dashboard: one page and its script and styles, compiled into the binary (no CDN,
//! works offline). Public, like the OpenAPI document: the page asks for an API key and calls the
//! API with it.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};

const INDEX: &str = include_str!("../dashboard/index.html");
const SCRIPT: &str = include_str!("../dashboard/app.js");
const STYLES: &str = include_str!("../dashboard/app.css");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
        ),
    );
    response
}

pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn styles() -> Response {
    asset("text/css; charset=utf-8", STYLES)
}

/// `/` and `/ui` lead to the dashboard (its page is also `/ui/index.html`, which API Gateway's
/// public `/ui/{proxy+}` route matches).
pub async fn to_dashboard() -> Redirect {
    Redirect::temporary("/ui/index.html")
}
