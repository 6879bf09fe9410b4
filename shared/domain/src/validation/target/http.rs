//! An HTTP target: a URL the deployment may reach, one of [`HTTP_METHODS`], and at most
//! [`MAX_TARGET_HEADERS`] headers of the user's own (none that Sundial sets or HTTP owns), each
//! a token name and a value an HTTP client sends as it is.

use super::http_url;
use crate::egress::Egress;
use crate::job::HeaderValue;
use crate::limits::TargetAllowList;
use crate::validation::{Result, ValidationError};
use std::collections::BTreeMap;

/// HTTP methods a target may use.
pub const HTTP_METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// Headers Sundial sets itself, that HTTP owns (hop-by-hop and framing), or that would change
/// what the request means to Sundial's own API (`Idempotency-Key`).
const RESERVED_HEADERS: [&str; 17] = [
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "idempotency-key",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
];
const RESERVED_HEADER_PREFIX: &str = "x-sundial-";
/// Most headers one HTTP target may set.
pub const MAX_TARGET_HEADERS: usize = 50;
/// Longest header name and value a target may set, in bytes.
const MAX_HEADER_NAME_BYTES: usize = 256;
const MAX_HEADER_VALUE_BYTES: usize = 4096;

/// Checks `target.url`, `target.method` (upper-cased in place) and `target.headers`.
pub(super) fn validate(
    url: &str,
    method: &mut String,
    headers: &BTreeMap<String, HeaderValue>,
    list: &TargetAllowList,
) -> Result<()> {
    reachable_url("target.url", url, false, &list.network)?;
    *method = method.to_ascii_uppercase();
    if !HTTP_METHODS.contains(&method.as_str()) {
        return Err(ValidationError::new(
            "target.method",
            format!("`{method}` is not one of {}", HTTP_METHODS.join(", ")),
        ));
    }
    if headers.len() > MAX_TARGET_HEADERS {
        return Err(ValidationError::new(
            "target.headers",
            format!("has {} headers; at most {MAX_TARGET_HEADERS}", headers.len()),
        ));
    }
    for (name, value) in headers {
        validate_header(name, value)?;
    }
    Ok(())
}

/// `text` as an http(s) URL a job may call: parsed, and not an address the deployment refuses.
fn reachable_url(field: &str, text: &str, https_only: bool, network: &Egress) -> Result<()> {
    let url = http_url(field, text, https_only)?;
    network.check_url(&url).map_err(|refused| ValidationError::new(field, refused.to_string()))
}

/// Checks one header, `target.headers.<name>`: a token name Sundial does not reserve, and a
/// value (a secret's too) of at most [`MAX_HEADER_VALUE_BYTES`] sendable bytes.
fn validate_header(name: &str, value: &HeaderValue) -> Result<()> {
    let field = format!("target.headers.{name}");
    let token = !name.is_empty()
        && name.len() <= MAX_HEADER_NAME_BYTES
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(ValidationError::new(
            field,
            format!("is not a header name (1-{MAX_HEADER_NAME_BYTES} token characters)"),
        ));
    }
    let lower = name.to_ascii_lowercase();
    if RESERVED_HEADERS.contains(&lower.as_str()) || lower.starts_with(RESERVED_HEADER_PREFIX) {
        return Err(ValidationError::new(field, "is set by Sundial and cannot be overridden"));
    }
    let text = match value {
        HeaderValue::Plain(text) => text,
        HeaderValue::Secret(secret) => {
            if !secret.secret {
                return Err(ValidationError::new(
                    field,
                    "an object value must be {\"value\": \"...\", \"secret\": true}",
                ));
            }
            secret
                .value
                .as_ref()
                .ok_or_else(|| ValidationError::new(field.clone(), "a secret header needs a value"))?
        }
    };
    // Visible ASCII, spaces and tabs: what an HTTP client sends as it is (RFC 9110 leaves
    // other bytes to each client; the worker's refuses them, so every run would fail).
    let sendable = text.bytes().all(|b| b == b'\t' || (0x20..=0x7e).contains(&b));
    if text.len() > MAX_HEADER_VALUE_BYTES || !sendable {
        return Err(ValidationError::new(
            field,
            format!("value must be at most {MAX_HEADER_VALUE_BYTES} bytes of visible ASCII, spaces and tabs"),
        ));
    }
    Ok(())
}
