//! Calling a target: what every target receives, how HTTP deliveries are signed, and how an
//! answer is classified.
//!
//! Every target receives the run id (the idempotency key, stable across attempts), the attempt
//! number, the scheduled instant and the job's payload. HTTP targets get them as headers with
//! the payload as the JSON body, signed with the job's secret as Standard Webhooks sign (the id,
//! the time of sending and the body, HMAC-SHA256), so a receiver can refuse a replay; SQS, SNS
//! and Lambda targets get an [`envelope`] with all four. Both carry the run's W3C `traceparent`. Answers are classified: 2xx succeeded
//! (202: the target will report back), 408, 429, 5xx, timeouts and connection errors are
//! retryable, other 4xx, invalid configuration and a destination the egress policy refuses are
//! permanent.

use crate::ports::targets::{Answer, Invocation};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Longest output or error text kept per attempt.
pub const MAX_OUTPUT_BYTES: usize = 4096;

/// Longest handle (the ARN of an execution or a task) an attempt keeps: longer is refused as an
/// answer Sundial could not follow.
pub const MAX_HANDLE_BYTES: usize = 512;

/// Longest Step Functions execution name.
pub const MAX_EXECUTION_NAME: usize = 80;
/// Longest ECS RunTask `clientToken`.
pub const MAX_CLIENT_TOKEN: usize = 64;

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
    /// W3C Trace Context: the run's trace and the attempt's span ([`crate::trace`]).
    pub const TRACEPARENT: &str = "traceparent";
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

/// The `Idempotency-Key` a target receives: the run's id, the same for every attempt of the run,
/// so that a target can recognise an attempt repeated after a lost answer.
pub fn idempotency_key<'a>(inv: &'a Invocation<'_>) -> &'a str {
    &inv.run_id
}

/// The envelope SQS and SNS targets receive.
pub fn envelope(inv: &Invocation<'_>) -> String {
    serde_json::json!({
        "run_id": inv.run_id,
        "attempt": inv.attempt,
        "scheduled_at": inv.scheduled_at.to_rfc3339(),
        "job_id": inv.job.id.to_string(),
        "traceparent": crate::trace::traceparent(&inv.run_id, inv.attempt),
        "payload": inv.payload,
    })
    .to_string()
}

/// The name of the work attempt `attempt` of run `run_id` starts (a Step Functions execution's
/// name, an ECS task's client token): the same for every send of the attempt, so that a re-sent
/// start is recognised, and another for each attempt. The run id and attempt (`<run id>-<n>`,
/// dots as dashes) when that fits in `max`; else `sundial-` and a digest of both.
pub fn work_name(run_id: &str, attempt: u32, max: usize) -> String {
    let readable = format!("{}-{attempt}", run_id.replace('.', "-"));
    let fits = readable.len() <= max
        && readable.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if fits {
        return readable;
    }
    use sha2::Digest;
    let digest = hex::encode(Sha256::digest(format!("{run_id}#{attempt}").as_bytes()));
    let tail = format!("-{attempt}");
    let room = max.saturating_sub("sundial-".len() + tail.len()).min(digest.len());
    format!("sundial-{}{tail}", &digest[..room])
}

/// The environment the container an ECS target names receives: the run's context (as the
/// envelope carries it, the payload as JSON) and then the job's own variables.
pub fn ecs_environment(
    inv: &Invocation<'_>,
    own: &std::collections::BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let mut environment = vec![
        ("SUNDIAL_RUN_ID".to_string(), inv.run_id.clone()),
        ("SUNDIAL_ATTEMPT".to_string(), inv.attempt.to_string()),
        ("SUNDIAL_SCHEDULED_AT".to_string(), inv.scheduled_at.to_rfc3339()),
        ("SUNDIAL_JOB_ID".to_string(), inv.job.id.to_string()),
        ("SUNDIAL_PAYLOAD".to_string(), inv.payload.to_string()),
        ("TRACEPARENT".to_string(), crate::trace::traceparent(&inv.run_id, inv.attempt)),
    ];
    environment.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    environment
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_names_are_stable_per_attempt_and_fit_their_service() {
        let id = "01jd5kqz8x7m3n4p5q6r7s8t9v.20261122T030405Z.s";
        assert_eq!(work_name(id, 2, MAX_EXECUTION_NAME), "01jd5kqz8x7m3n4p5q6r7s8t9v-20261122T030405Z-s-2");
        assert_ne!(work_name(id, 2, MAX_EXECUTION_NAME), work_name(id, 3, MAX_EXECUTION_NAME));
        let manual = "01jd5kqz8x7m3n4p5q6r7s8t9v.20261122T030405Z.m.01jd5kqz8x7m3n4p5q6r7s8t9v";
        let token = work_name(manual, 10, MAX_CLIENT_TOKEN);
        assert!(
            token.len() <= MAX_CLIENT_TOKEN && token.starts_with("sundial-") && token.ends_with("-10"),
            "{token}"
        );
        assert_eq!(token, work_name(manual, 10, MAX_CLIENT_TOKEN), "the same for every send");
        assert_ne!(token, work_name(manual, 11, MAX_CLIENT_TOKEN));
    }

    #[test]
    fn the_envelope_carries_the_run_and_its_trace() {
        let job = crate::fixtures::job(serde_json::json!({}));
        let at = crate::fixtures::at("2030-01-01T00:00:00Z");
        let inv = Invocation {
            job: &job,
            payload: serde_json::json!({"n": 1}),
            run_id: "r1".into(),
            attempt: 2,
            scheduled_at: at,
            callback_token: "t".into(),
            timeout: std::time::Duration::from_secs(1),
            sent_at: at,
        };
        let envelope: serde_json::Value = serde_json::from_str(&envelope(&inv)).unwrap_or_default();
        assert_eq!(envelope["run_id"], "r1");
        assert_eq!(envelope["traceparent"], crate::trace::traceparent("r1", 2));
        assert_eq!(envelope["payload"], serde_json::json!({"n": 1}));
    }

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
