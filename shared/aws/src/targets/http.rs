//! An HTTP target: the URL checked by the egress guard, then one request with the payload as its
//! JSON body, Sundial's headers (both signatures among them) and the job's own, and the answer
//! read, at most [`MAX_OUTPUT_BYTES`] of it, and classified.

use super::Targets;
use super::outbound::{Blocked, refusal_in};
use std::collections::BTreeMap;
use std::time::Duration;
use sundial_domain::job::HeaderValue;
use sundial_domain::ports::targets::{Answer, Invocation};
use sundial_domain::target::{
    MAX_OUTPUT_BYTES, classify_status, headers, idempotency_key, sign, sign_webhook, truncate,
};

impl Targets {
    /// Calls `url` with `method` and the job's `extra` headers, if the egress guard lets it.
    pub(super) async fn http(
        &self,
        inv: &Invocation<'_>,
        url: &str,
        method: &str,
        extra: &BTreeMap<String, HeaderValue>,
    ) -> Answer {
        let url = match url::Url::parse(url) {
            Ok(url) => url,
            Err(e) => return permanent(format!("`{url}` is not a URL: {e}")),
        };
        match self.outbound.check(&url).await {
            Ok(()) => {}
            Err(Blocked::Refused(refused)) => return permanent(format!("refused: {refused}")),
            Err(unresolved @ Blocked::Unresolved { .. }) => {
                return Answer::NotSent { error: truncate(&unresolved.to_string()) };
            }
        }
        let client = match self.outbound.client() {
            Ok(client) => client,
            Err(error) => return Answer::NotSent { error: truncate(error) },
        };
        let sent = request(client, inv, url, method, extra).send().await;
        answer(sent, inv.timeout).await
    }
}

/// A failure no other attempt can mend.
fn permanent(error: String) -> Answer {
    Answer::Failed { retryable: false, status: None, error: truncate(&error) }
}

/// The request of one attempt: the payload as its JSON body (none for GET and DELETE; an unknown
/// method is POST), Sundial's headers, then the job's own.
fn request(
    client: &reqwest::Client,
    inv: &Invocation<'_>,
    url: url::Url,
    method: &str,
    extra: &BTreeMap<String, HeaderValue>,
) -> reqwest::RequestBuilder {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::POST);
    let with_body = !matches!(method, reqwest::Method::GET | reqwest::Method::DELETE);
    let body = if with_body { serde_json::to_vec(&inv.payload).unwrap_or_default() } else { Vec::new() };
    let mut request = sundial_headers(client.request(method, url).timeout(inv.timeout), inv, &body);
    for (name, value) in extra {
        let text = match value {
            HeaderValue::Plain(text) => text.as_str(),
            HeaderValue::Secret(secret) => secret.value.as_deref().unwrap_or(""),
        };
        request = request.header(name.as_str(), text);
    }
    if with_body {
        request = request.header(reqwest::header::CONTENT_TYPE, "application/json").body(body);
    }
    request
}

/// The headers Sundial sets: the run, its idempotency key, the attempt, the instant, the job, the
/// callback token, the trace context, and `body` signed both ways (the first scheme and Standard
/// Webhooks).
fn sundial_headers(
    request: reqwest::RequestBuilder,
    inv: &Invocation<'_>,
    body: &[u8],
) -> reqwest::RequestBuilder {
    let webhook_id = format!("{}_{}", inv.run_id, inv.attempt);
    let timestamp = inv.sent_at.timestamp();
    request
        .header(headers::RUN_ID, &inv.run_id)
        .header(headers::IDEMPOTENCY_KEY, idempotency_key(inv))
        .header(headers::ATTEMPT, inv.attempt.to_string())
        .header(headers::SCHEDULED_AT, inv.scheduled_at.to_rfc3339())
        .header(headers::JOB_ID, inv.job.id.to_string())
        .header(headers::SIGNATURE, sign(&inv.job.signing_secret, body))
        .header(headers::WEBHOOK_ID, &webhook_id)
        .header(headers::WEBHOOK_TIMESTAMP, timestamp.to_string())
        .header(
            headers::WEBHOOK_SIGNATURE,
            sign_webhook(&inv.job.signing_secret, &webhook_id, timestamp, body),
        )
        .header(headers::CALLBACK_TOKEN, &inv.callback_token)
        .header(headers::TRACEPARENT, sundial_domain::trace::traceparent(&inv.run_id, inv.attempt))
}

/// What a sent request tells: the status and the body read within `timeout`, or what the error
/// proves (nothing sent when connecting failed; refused when the resolver met a refused address).
async fn answer(sent: reqwest::Result<reqwest::Response>, timeout: Duration) -> Answer {
    match sent {
        Ok(response) => {
            let status = response.status().as_u16();
            let text = match tokio::time::timeout(timeout, read_bounded(response)).await {
                Ok(text) => text,
                Err(_) => return Answer::TimedOut,
            };
            classify_status(status, text)
        }
        // The client's resolver met a refused address (the name changed its answer).
        Err(e) if refusal_in(&e).is_some() => {
            permanent(format!("refused: {}", refusal_in(&e).map(ToString::to_string).unwrap_or_default()))
        }
        Err(e) if e.is_timeout() => Answer::TimedOut,
        // Connecting failed (refused, unreachable, the TLS handshake): nothing was sent.
        Err(e) if e.is_connect() => Answer::NotSent { error: truncate(&format!("{e}")) },
        Err(e) if e.is_builder() => {
            Answer::Failed { retryable: false, status: None, error: truncate(&e.to_string()) }
        }
        Err(e) => Answer::Failed { retryable: true, status: None, error: truncate(&format!("{e}")) },
    }
}

/// Reads a response body up to just past [`MAX_OUTPUT_BYTES`] (what [`truncate`] keeps), then
/// stops: a target that answers megabytes, or never ends its body, costs neither memory nor
/// the attempt.
async fn read_bounded(mut response: reqwest::Response) -> String {
    let mut body = Vec::new();
    while body.len() <= MAX_OUTPUT_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            // The end, or a body cut off: what arrived is the output.
            Ok(None) | Err(_) => break,
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}
