//! W3C Trace Context for runs: every run carries a trace, so that a team's own tracing joins
//! Sundial's. The trace id is derived from the run id (a digest of it), so the claim that makes
//! the run starts the trace and every component that handles the run later (the worker, the
//! watchdog, the API's callbacks) continues it without storing or passing anything; each attempt
//! is a span of its own, whose id is derived from the run id and the attempt. HTTP targets receive
//! `traceparent` naming the attempt's span; SQS, SNS and Lambda targets find it in the envelope.
//! The claim's span (span id of "attempt 0") is the trace's root; each attempt's is its child
//! ([`claim_span`], [`attempt_span`]), sent through the spans port when a collector is set.

use crate::ports::spans::Span;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

/// The version and flags of every `traceparent` Sundial writes: version 00, sampled.
const VERSION: &str = "00";
const SAMPLED: &str = "01";

/// The run's trace id: 32 lowercase hex digits (never all zero, as W3C requires).
pub fn trace_id(run_id: &str) -> String {
    let digest = Sha256::digest(format!("trace\n{run_id}").as_bytes());
    nonzero(hex::encode(&digest[..16]))
}

/// The span id of the run's attempt `attempt` (0: the claim that made the run): 16 lowercase
/// hex digits, never all zero.
pub fn span_id(run_id: &str, attempt: u32) -> String {
    let digest = Sha256::digest(format!("span\n{run_id}\n{attempt}").as_bytes());
    nonzero(hex::encode(&digest[..8]))
}

/// The `traceparent` header of the run's attempt `attempt`: the target's work is a child of it.
pub fn traceparent(run_id: &str, attempt: u32) -> String {
    format!("{VERSION}-{}-{}-{SAMPLED}", trace_id(run_id), span_id(run_id, attempt))
}

/// The span of the claim that made the run (the trace's root), at `at`.
pub fn claim_span(run_id: &str, job_id: &str, at: DateTime<Utc>) -> Span {
    Span {
        trace_id: trace_id(run_id),
        span_id: span_id(run_id, 0),
        parent_span_id: None,
        name: "claim",
        start: at,
        end: at,
        attributes: vec![("sundial.run_id", run_id.to_string()), ("sundial.job_id", job_id.to_string())],
        error: None,
    }
}

/// The span of the run's attempt `attempt`, a child of the claim's: from its start to the
/// target's answer, with its outcome (`error` when it failed).
pub fn attempt_span(
    run_id: &str,
    job_id: &str,
    attempt: u32,
    (start, end): (DateTime<Utc>, DateTime<Utc>),
    outcome: &str,
    error: Option<String>,
) -> Span {
    Span {
        trace_id: trace_id(run_id),
        span_id: span_id(run_id, attempt),
        parent_span_id: Some(span_id(run_id, 0)),
        name: "attempt",
        start,
        end,
        attributes: vec![
            ("sundial.run_id", run_id.to_string()),
            ("sundial.job_id", job_id.to_string()),
            ("sundial.attempt", attempt.to_string()),
            ("sundial.outcome", outcome.to_string()),
        ],
        error,
    }
}

/// `id`, or `…01` if it is all zeros (one digest in 2^64 or 2^128).
fn nonzero(id: String) -> String {
    match id.bytes().all(|b| b == b'0') {
        true => format!("{}1", &id[..id.len() - 1]),
        false => id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_has_one_trace_and_each_attempt_its_own_span() {
        let run = "01jdk9xv7s7kz8m3q1w2e4r5t6.20301001T000000Z";
        let header = traceparent(run, 2);
        let parts: Vec<&str> = header.split('-').collect();
        assert_eq!(parts.len(), 4, "{header}");
        assert_eq!((parts[0], parts[3]), ("00", "01"));
        assert_eq!((parts[1].len(), parts[2].len()), (32, 16));
        assert!(header.bytes().all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert_eq!(parts[1], trace_id(run), "the run's trace, whatever the attempt");
        assert_eq!(trace_id(run), trace_id(run), "derived, so every component agrees");
        assert_ne!(span_id(run, 1), span_id(run, 2), "each attempt a span of its own");
        assert_ne!(trace_id(run), trace_id("another"));
        assert_eq!(nonzero("0000".into()), "0001");
    }
}
