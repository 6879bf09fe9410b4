//! Targets: what an attempt calls, and how its answer is classified.
//!
//! Every target receives the run id (the idempotency key, stable across attempts), the attempt
//! number, the scheduled instant and the job's payload. HTTP targets get them as headers with
//! the payload as the JSON body, signed with the job's secret as Standard Webhooks sign (the id,
//! the time of sending and the body, HMAC-SHA256), so a receiver can refuse a replay; SQS and SNS targets
//! get an envelope with all four. Answers are classified: 2xx succeeded (202: the target will
//! report back), 408, 429, 5xx, timeouts and connection errors are retryable, other 4xx,
//! invalid configuration and a destination the egress policy refuses are permanent.

use super::outbound::{Blocked, Lookup, Outbound, SystemLookup, refusal_in};
use crate::job::{HeaderValue, Job, TargetDocument};
use crate::limits::TargetAllowList;
use async_trait::async_trait;
use base64::Engine;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::Arc;
use std::time::Duration;

/// Longest output or error text kept per attempt.
pub const MAX_OUTPUT_BYTES: usize = 4096;

/// Headers Sundial sets on HTTP targets.
pub mod headers {
    pub const RUN_ID: &str = "x-sundial-run-id";
    pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
    pub const ATTEMPT: &str = "x-sundial-attempt";
    pub const SCHEDULED_AT: &str = "x-sundial-scheduled-at";
    pub const JOB_ID: &str = "x-sundial-job-id";
    /// `sha256=<hex HMAC-SHA256 of the body with the job's secret>`: the first scheme, kept for
    /// one release beside the Standard Webhooks headers, which also sign the time of sending.
    pub const SIGNATURE: &str = "x-sundial-signature";
    /// Standard Webhooks: the message id, `<run id>_<attempt>` (the same for a re-delivery of
    /// one attempt, so a receiver can refuse a repeat).
    pub const WEBHOOK_ID: &str = "webhook-id";
    /// Standard Webhooks: when the request was sent, in Unix seconds.
    pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
    /// Standard Webhooks: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`.
    pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";
    /// The token a target that answered 202 presents to `/v1/runs/{id}/heartbeat|complete`.
    pub const CALLBACK_TOKEN: &str = "x-sundial-callback-token";
}

/// One call of a target.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    pub job: &'a Job,
    pub run_id: String,
    pub attempt: u32,
    pub scheduled_at: DateTime<Utc>,
    pub callback_token: String,
    /// The call is cut after this.
    pub timeout: Duration,
    /// When the call is made (signed into the request, so that a receiver can refuse old ones).
    pub sent_at: DateTime<Utc>,
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Succeeded {
        status: Option<u16>,
        output: Option<String>,
    },
    /// 202: the attempt stays open until the target calls back.
    Accepted {
        status: u16,
    },
    Failed {
        retryable: bool,
        status: Option<u16>,
        error: String,
    },
    TimedOut,
}

/// Calls targets.
#[async_trait]
pub trait Caller: Send + Sync + std::fmt::Debug {
    async fn call(&self, invocation: &Invocation<'_>) -> Answer;
}

/// `sha256=<hex>` of `body` under `secret`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        // HMAC takes keys of any length; this arm is never taken.
        Err(_) => return String::new(),
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// The job's signing secret in the Standard Webhooks form, `whsec_<base64 of the key>`, which
/// the Standard Webhooks verifiers take.
pub fn webhook_secret(secret: &str) -> String {
    format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(secret.as_bytes()))
}

/// The Standard Webhooks signature of one delivery: `v1,<base64 HMAC-SHA256 of
/// "<id>.<timestamp>.<body>">` under `secret`.
pub fn sign_webhook(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        // HMAC takes keys of any length; this arm is never taken.
        Err(_) => return String::new(),
    };
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

/// Cuts text to at most `MAX_OUTPUT_BYTES`, on a character boundary.
pub fn truncate(text: &str) -> String {
    if text.len() <= MAX_OUTPUT_BYTES {
        return text.to_string();
    }
    let mut end = MAX_OUTPUT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
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

/// How an HTTP status is classified.
pub fn classify_status(status: u16, body: String) -> Answer {
    match status {
        202 => Answer::Accepted { status },
        200..=299 => Answer::Succeeded { status: Some(status), output: Some(truncate(&body)) },
        408 | 429 | 500..=599 => Answer::Failed {
            retryable: true,
            status: Some(status),
            error: truncate(&format!("HTTP {status}: {body}")),
        },
        _ => Answer::Failed {
            retryable: false,
            status: Some(status),
            error: truncate(&format!("HTTP {status}: {body}")),
        },
    }
}

/// The envelope SQS and SNS targets receive.
fn envelope(inv: &Invocation<'_>) -> String {
    serde_json::json!({
        "run_id": inv.run_id,
        "attempt": inv.attempt,
        "scheduled_at": inv.scheduled_at.to_rfc3339(),
        "job_id": inv.job.id.to_string(),
        "payload": inv.job.document.payload,
    })
    .to_string()
}

/// The real targets: HTTP(S) through reqwest; Lambda, SQS and SNS through the SDK.
#[derive(Debug, Clone)]
pub struct Targets {
    /// HTTP targets: only destinations the deployment's egress policy allows.
    outbound: Outbound,
    sqs: aws_sdk_sqs::Client,
    sns: aws_sdk_sns::Client,
    lambda: aws_sdk_lambda::Client,
    allow: TargetAllowList,
}

impl Targets {
    pub fn new(
        sqs: aws_sdk_sqs::Client,
        sns: aws_sdk_sns::Client,
        lambda: aws_sdk_lambda::Client,
        allow: TargetAllowList,
    ) -> Self {
        Targets::with_lookup(sqs, sns, lambda, allow, Arc::new(SystemLookup))
    }

    /// As [`Targets::new`], host names resolved by `lookup`.
    pub fn with_lookup(
        sqs: aws_sdk_sqs::Client,
        sns: aws_sdk_sns::Client,
        lambda: aws_sdk_lambda::Client,
        allow: TargetAllowList,
        lookup: Arc<dyn Lookup>,
    ) -> Self {
        let outbound = Outbound::new(allow.network.clone(), lookup);
        Targets { outbound, sqs, sns, lambda, allow }
    }

    /// Invokes a function and waits for its answer (RequestResponse); a function error is a
    /// (retryable) failure with the function's error payload.
    async fn lambda(&self, inv: &Invocation<'_>, function: &str) -> Answer {
        let invoked = self
            .lambda
            .invoke()
            .function_name(function)
            .invocation_type(aws_sdk_lambda::types::InvocationType::RequestResponse)
            .payload(aws_sdk_lambda::primitives::Blob::new(envelope(inv)))
            .send();
        let out = match tokio::time::timeout(inv.timeout, invoked).await {
            Err(_) => return Answer::TimedOut,
            Ok(Err(e)) => {
                let permanent = e.as_service_error().is_some_and(|s| {
                    s.is_resource_not_found_exception() || s.is_invalid_request_content_exception()
                });
                let error = truncate(&aws_sdk_lambda::error::DisplayErrorContext(e).to_string());
                return Answer::Failed { retryable: !permanent, status: None, error };
            }
            Ok(Ok(out)) => out,
        };
        let status = u16::try_from(out.status_code).ok();
        let body = out.payload.map(|p| String::from_utf8_lossy(p.as_ref()).into_owned()).unwrap_or_default();
        match out.function_error {
            Some(kind) => {
                Answer::Failed { retryable: true, status, error: truncate(&format!("{kind}: {body}")) }
            }
            None => Answer::Succeeded { status, output: Some(truncate(&body)) },
        }
    }

    async fn http(
        &self,
        inv: &Invocation<'_>,
        url: &str,
        method: &str,
        extra: &std::collections::BTreeMap<String, HeaderValue>,
    ) -> Answer {
        let permanent =
            |error: String| Answer::Failed { retryable: false, status: None, error: truncate(&error) };
        let url = match url::Url::parse(url) {
            Ok(url) => url,
            Err(e) => return permanent(format!("`{url}` is not a URL: {e}")),
        };
        match self.outbound.check(&url).await {
            Ok(()) => {}
            Err(Blocked::Refused(refused)) => return permanent(format!("refused: {refused}")),
            Err(unresolved @ Blocked::Unresolved { .. }) => {
                return Answer::Failed {
                    retryable: true,
                    status: None,
                    error: truncate(&unresolved.to_string()),
                };
            }
        }
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap_or(reqwest::Method::POST);
        let with_body = !matches!(method, reqwest::Method::GET | reqwest::Method::DELETE);
        let body = if with_body {
            serde_json::to_vec(&inv.job.document.payload).unwrap_or_default()
        } else {
            Vec::new()
        };
        let webhook_id = format!("{}_{}", inv.run_id, inv.attempt);
        let timestamp = inv.sent_at.timestamp();
        let mut request = self
            .outbound
            .client()
            .request(method, url)
            .timeout(inv.timeout)
            .header(headers::RUN_ID, &inv.run_id)
            .header(headers::IDEMPOTENCY_KEY, &inv.run_id)
            .header(headers::ATTEMPT, inv.attempt.to_string())
            .header(headers::SCHEDULED_AT, inv.scheduled_at.to_rfc3339())
            .header(headers::JOB_ID, inv.job.id.to_string())
            .header(headers::SIGNATURE, sign(&inv.job.signing_secret, &body))
            .header(headers::WEBHOOK_ID, &webhook_id)
            .header(headers::WEBHOOK_TIMESTAMP, timestamp.to_string())
            .header(
                headers::WEBHOOK_SIGNATURE,
                sign_webhook(&inv.job.signing_secret, &webhook_id, timestamp, &body),
            )
            .header(headers::CALLBACK_TOKEN, &inv.callback_token);
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
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                let text = match tokio::time::timeout(inv.timeout, read_bounded(response)).await {
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
            Err(e) if e.is_builder() => {
                Answer::Failed { retryable: false, status: None, error: truncate(&e.to_string()) }
            }
            Err(e) => Answer::Failed { retryable: true, status: None, error: truncate(&format!("{e}")) },
        }
    }
}

fn aws_failure<E: std::error::Error>(e: E) -> Answer {
    Answer::Failed {
        retryable: true,
        status: None,
        error: truncate(&aws_sdk_sqs::error::DisplayErrorContext(e).to_string()),
    }
}

#[async_trait]
impl Caller for Targets {
    async fn call(&self, inv: &Invocation<'_>) -> Answer {
        let refused = |what: &str| Answer::Failed {
            retryable: false,
            status: None,
            error: format!("{what} is not in the target allow-list"),
        };
        match &inv.job.document.target {
            TargetDocument::Http { url, method, headers } => self.http(inv, url, method, headers).await,
            TargetDocument::Sqs { queue_url } => {
                if self.allow.check(&self.allow.sqs, queue_url).is_err() {
                    return refused(queue_url);
                }
                let sent = self.sqs.send_message().queue_url(queue_url).message_body(envelope(inv)).send();
                match tokio::time::timeout(inv.timeout, sent).await {
                    Ok(Ok(out)) => Answer::Succeeded { status: None, output: out.message_id },
                    Ok(Err(e)) => aws_failure(e),
                    Err(_) => Answer::TimedOut,
                }
            }
            TargetDocument::Sns { topic_arn } => {
                if self.allow.check(&self.allow.sns, topic_arn).is_err() {
                    return refused(topic_arn);
                }
                let published = self.sns.publish().topic_arn(topic_arn).message(envelope(inv)).send();
                match tokio::time::timeout(inv.timeout, published).await {
                    Ok(Ok(out)) => Answer::Succeeded { status: None, output: out.message_id },
                    Ok(Err(e)) => aws_failure(e),
                    Err(_) => Answer::TimedOut,
                }
            }
            TargetDocument::Lambda { function } => {
                if self.allow.check(&self.allow.lambda, function).is_err() {
                    return refused(function);
                }
                self.lambda(inv, function).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        assert!(matches!(classify_status(200, "ok".into()), Answer::Succeeded { status: Some(200), .. }));
        assert_eq!(classify_status(202, String::new()), Answer::Accepted { status: 202 });
        for retryable in [408, 429, 500, 502, 503] {
            assert!(
                matches!(classify_status(retryable, String::new()), Answer::Failed { retryable: true, .. }),
                "{retryable}"
            );
        }
        for permanent in [400, 401, 403, 404, 410, 422] {
            assert!(
                matches!(classify_status(permanent, String::new()), Answer::Failed { retryable: false, .. }),
                "{permanent}"
            );
        }
    }

    #[test]
    fn signatures_are_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            sign("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn webhook_signatures_follow_the_standard_webhooks_scheme() {
        // The example of the Standard Webhooks reference libraries: secret
        // whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, id msg_p5jXN8AQM9LWM0D4loKWxJek, timestamp
        // 1614265330, body {"test": 2432232314}.
        let key =
            base64::engine::general_purpose::STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
        mac.update(b"msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{\"test\": 2432232314}");
        let want =
            format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()));
        assert_eq!(want, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        // Sundial's key is the secret's bytes, given to verifiers as whsec_<base64 of them>.
        let secret = "abc123";
        assert_eq!(webhook_secret(secret), "whsec_YWJjMTIz");
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(b"run_1.1614265330.{}");
        let want =
            format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()));
        assert_eq!(sign_webhook(secret, "run_1", 1614265330, b"{}"), want);
    }

    #[test]
    fn output_is_truncated_on_a_character_boundary() {
        let long = "é".repeat(5000);
        let cut = truncate(&long);
        assert!(cut.len() <= MAX_OUTPUT_BYTES + "…".len());
        assert!(cut.ends_with('…'));
    }
}
