//! A Lambda target: the function invoked with the run's envelope, its answer awaited.

use super::{Targets, aws_failure};
use sundial_domain::ports::targets::{Answer, Invocation};
use sundial_domain::target::{envelope, truncate};

impl Targets {
    /// Invokes a function and waits for its answer (RequestResponse); a function error is a
    /// (retryable) failure with the function's error payload.
    pub(super) async fn lambda(&self, inv: &Invocation<'_>, function: &str) -> Answer {
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
}
