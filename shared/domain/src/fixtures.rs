//! Test fixtures shared by the domain's unit tests: instants from text, and a stored job built
//! from a document's extra fields.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed test

use crate::job::{Job, JobDocument, JobId};
use chrono::{DateTime, Utc};

pub fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

/// A stored job `nightly` of `alice` calling an HTTP target, with `extra` merged into its
/// document.
pub fn job(extra: serde_json::Value) -> Job {
    let mut doc =
        serde_json::json!({"name": "nightly", "target": {"type": "http", "url": "https://x.test/"}});
    doc.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let document: JobDocument = serde_json::from_value(doc).unwrap();
    Job {
        id: JobId::generate(),
        owner: "alice".into(),
        document,
        version: 1,
        created_at: at("2026-11-22T00:00:00Z"),
        updated_at: at("2026-11-22T00:00:00Z"),
        next_run_at: None,
        signing_secret: "s".into(),
        pauses: Vec::new(),
        children: Vec::new(),
        gaps: Vec::new(),
        skips: Vec::new(),
        counted: Default::default(),
        baseline: None,
        versions: Vec::new(),
    }
}
