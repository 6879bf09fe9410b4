//! The real targets: HTTP(S) through reqwest, behind the egress guard; Lambda, SQS and SNS
//! through the SDK's [`TargetClients`], which never repeat a request. What is sent and how
//! answers are classified is [`sundial_domain::target`]'s; an AWS error is `NotSent` only when
//! it proves the request was not processed (the service throttled it, or the connection was
//! refused), so an at-most-once attempt never reaches its target twice.

pub mod outbound;

use crate::errors::{AwsError, Fault};
use crate::metrics::TargetClients;
use async_trait::async_trait;
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use outbound::{Blocked, Lookup, Outbound, SystemLookup, refusal_in};
use std::sync::Arc;
use sundial_domain::job::{HeaderValue, TargetDocument};
use sundial_domain::limits::TargetAllowList;
use sundial_domain::ports::targets::{Answer, Caller, Invocation};
use sundial_domain::target::{
    MAX_OUTPUT_BYTES, classify_status, envelope, headers, sign, sign_webhook, truncate,
};

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
    pub fn new(clients: TargetClients, allow: TargetAllowList) -> Self {
        Targets::with_lookup(clients, allow, Arc::new(SystemLookup))
    }

    /// As [`Targets::new`], host names resolved by `lookup`.
    pub fn with_lookup(clients: TargetClients, allow: TargetAllowList, lookup: Arc<dyn Lookup>) -> Self {
        let outbound = Outbound::new(allow.network.clone(), lookup);
        let TargetClients { sqs, sns, lambda } = clients;
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
                if permanent {
                    let error = truncate(&aws_sdk_lambda::error::DisplayErrorContext(e).to_string());
                    return Answer::Failed { retryable: false, status: None, error };
                }
                return aws_failure(e);
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
                return Answer::NotSent { error: truncate(&unresolved.to_string()) };
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
        let client = match self.outbound.client() {
            Ok(client) => client,
            Err(error) => return Answer::NotSent { error: truncate(error) },
        };
        let mut request = client
            .request(method, url)
            .timeout(inv.timeout)
            .header(headers::RUN_ID, &inv.run_id)
            .header(headers::IDEMPOTENCY_KEY, sundial_domain::target::idempotency_key(inv))
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
            // Connecting failed (refused, unreachable, the TLS handshake): nothing was sent.
            Err(e) if e.is_connect() => Answer::NotSent { error: truncate(&format!("{e}")) },
            Err(e) if e.is_builder() => {
                Answer::Failed { retryable: false, status: None, error: truncate(&e.to_string()) }
            }
            Err(e) => Answer::Failed { retryable: true, status: None, error: truncate(&format!("{e}")) },
        }
    }
}

/// What a failed SDK call of a target tells: `NotSent` when the error proves the request was not
/// processed (a throttling error code, or a refused connection), else a retryable failure
/// (the target may have acted: a timeout, a reset connection, a 5xx).
fn aws_failure<E, R>(e: SdkError<E, R>) -> Answer
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    let classified = AwsError::of(&e);
    let error = truncate(&classified.context);
    if classified.fault == Fault::Throttled || refused_connection(&e) {
        return Answer::NotSent { error };
    }
    Answer::Failed { retryable: true, status: None, error }
}

/// Whether `error`'s causes include a refused connection: the request never left.
fn refused_connection(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = e.source();
    }
    false
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
