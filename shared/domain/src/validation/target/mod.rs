//! A job's target checked: [`validate_target`] hands each kind to its own file (`http`,
//! `lambda`, `sqs`, `sns`, `stepfunctions`, `ecs`, `eventbridge`), and the checks kinds share live here: what an http(s) URL must be,
//! and an identifier matched against its allow-list. A new kind is a file and an arm.

mod ecs;
mod eventbridge;
mod http;
mod lambda;
mod sns;
mod sqs;
mod stepfunctions;

pub use http::{HTTP_METHODS, MAX_TARGET_HEADERS};

use crate::job::TargetDocument;
use crate::limits::{Refusal, TargetAllowList};
use crate::validation::{Result, ValidationError};

/// Checks `target` against the deployment's allow-lists and normalises it in place (an HTTP
/// method upper-cased); errors name `target.<field>`.
pub(super) fn validate_target(target: &mut TargetDocument, list: &TargetAllowList) -> Result<()> {
    match target {
        TargetDocument::Http { url, method, headers } => http::validate(url, method, headers, list),
        TargetDocument::Lambda { function } => lambda::validate(function, list),
        TargetDocument::Sqs { queue_url } => sqs::validate(queue_url, list),
        TargetDocument::Sns { topic_arn } => sns::validate(topic_arn, list),
        TargetDocument::StepFunctions { state_machine_arn, .. } => {
            stepfunctions::validate(state_machine_arn, list)
        }
        TargetDocument::Ecs { cluster, task_definition, launch_type, network, overrides } => {
            ecs::validate(cluster, task_definition, *launch_type, network.as_ref(), overrides.as_ref(), list)
        }
        TargetDocument::EventBridge { event_bus_arn, detail_type, source } => {
            eventbridge::validate(event_bus_arn, detail_type, source, list)
        }
    }
}

/// The job's payload fits where its target carries it (an ECS container's environment, within
/// ECS's bound on overrides); errors name `payload`.
pub(super) fn payload_fits(doc: &crate::job::JobDocument) -> Result<()> {
    match &doc.target {
        TargetDocument::Ecs { overrides: Some(overrides), .. } => ecs::payload_fits(overrides, &doc.payload),
        _ => Ok(()),
    }
}

/// `text` parsed as an http(s) URL with a host, or why it is not one.
pub(super) fn http_url(field: &str, text: &str, https_only: bool) -> Result<url::Url> {
    let want = if https_only { "an https" } else { "an http or https" };
    // A URI is printable ASCII (RFC 3986): an IDN host in punycode, other bytes percent-encoded;
    // a backslash is not a URI character at all (WHATWG parsers read it as `/`, others as part
    // of a user name: `http://a.example\@10.0.0.1/` must not mean two hosts).
    if !text.bytes().all(|b| b.is_ascii_graphic() && b != b'\\') {
        return Err(ValidationError::new(
            field,
            format!(
                "`{text}` is not {want} URL: only printable ASCII without spaces or backslashes (percent-encode the rest)"
            ),
        ));
    }
    let url = url::Url::parse(text)
        .map_err(|e| ValidationError::new(field, format!("`{text}` is not {want} URL: {e}")))?;
    let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && !https_only);
    if !scheme_ok {
        return Err(ValidationError::new(field, format!("`{text}` is not {want} URL")));
    }
    if url.host_str().is_none_or(str::is_empty) || text.len() > 2048 {
        return Err(ValidationError::new(field, format!("`{text}` has no valid host")));
    }
    if url.port() == Some(0) {
        return Err(ValidationError::new(
            field,
            format!("`{text}` names port 0, which no server listens on"),
        ));
    }
    // Credentials in a URL would be shown in every response and log line that shows the URL.
    // The written authority is checked too: an `@` there is userinfo to some parser.
    let authority =
        text.split_once("://").map_or("", |(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""));
    if !url.username().is_empty() || url.password().is_some() || authority.contains('@') {
        return Err(ValidationError::new(
            field,
            "must not carry credentials (user:password@); send them in a secret header instead",
        ));
    }
    Ok(url)
}

/// `id` is not blank and matches `patterns` (the allow-list read from `variable`), and is none
/// of Sundial's own resources.
fn allowed(list: &TargetAllowList, patterns: &[String], field: &str, id: &str, variable: &str) -> Result<()> {
    if id.trim().is_empty() {
        return Err(ValidationError::new(field, "must not be empty"));
    }
    list.check(patterns, id).map_err(|refusal| refused(field, id, refusal, variable))
}

/// The error naming `field` for an `id` the allow-list (read from `variable`) refused.
pub(super) fn refused(field: &str, id: &str, refusal: Refusal, variable: &str) -> ValidationError {
    match refusal {
        Refusal::OwnResource => {
            ValidationError::new(field, format!("`{id}` is one of Sundial's own resources"))
        }
        Refusal::NotAllowed => {
            ValidationError::new(field, format!("`{id}` does not match the allow-list ({variable})"))
        }
    }
}
