//! A job's history: every write that changes its document keeps the document as it became,
//! under the version the write gave the job, so that an owner can read what a job was, compare
//! two versions field by field, and roll back to one (a new version equal to it). The job names
//! the versions it keeps ([`crate::job::Job::versions`], the last [`KEPT_VERSIONS`]); the store
//! writes a kept version with the job's write that made it, and drops the ones that fall out.

use crate::job::{JobDocument, JobId};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// The most versions of a job's document kept.
pub const KEPT_VERSIONS: usize = 100;

/// One kept version of a job's document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobVersion {
    pub job_id: JobId,
    pub version: u64,
    /// The document as that version had it (secret header values included: a rollback restores
    /// them; the API never shows them).
    pub document: JobDocument,
    /// When the write that made it was made.
    pub at: DateTime<Utc>,
}

/// The versions kept after a write that makes `version` of a document whose kept versions were
/// `kept`: `version` added, the oldest dropped past [`KEPT_VERSIONS`].
pub fn kept_with(kept: &[u64], version: u64) -> Vec<u64> {
    let mut kept: Vec<u64> = kept.iter().copied().filter(|v| *v != version).collect();
    kept.push(version);
    let over = kept.len().saturating_sub(KEPT_VERSIONS);
    kept.split_off(over)
}

/// One field that differs between two documents: its dotted path (`retry.max_attempts`,
/// `schedule.any[1].cron`), and its value in each (`None`: absent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldChange {
    pub field: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub old: Option<Value>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Value>))]
    pub new: Option<Value>,
}

/// The fields that differ from `old` to `new`, by path, in path order: objects compared member
/// by member, anything else (arrays among them, whole) as a value.
pub fn changes(old: &Value, new: &Value) -> Vec<FieldChange> {
    let mut out = Vec::new();
    walk("", Some(old), Some(new), &mut out);
    out
}

fn walk(path: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<FieldChange>) {
    // A null member says what an absent one does.
    let (old, new) = (old.filter(|v| !v.is_null()), new.filter(|v| !v.is_null()));
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let field = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                walk(&field, a.get(key), b.get(key), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(FieldChange { field: path.to_string(), old: a.cloned(), new: b.cloned() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_hundred_versions_are_kept() {
        assert_eq!(kept_with(&[], 1), [1]);
        assert_eq!(kept_with(&[1, 2], 3), [1, 2, 3]);
        let full: Vec<u64> = (1..=100).collect();
        let next = kept_with(&full, 101);
        assert_eq!((next.len(), next[0], next[99]), (100, 2, 101), "the oldest dropped");
        assert_eq!(kept_with(&[4, 7], 7), [4, 7], "a version kept once");
    }

    #[test]
    fn changes_name_each_field_with_its_old_and_new_value() {
        let old = json!({"name": "a", "retry": {"max_attempts": 3, "backoff_s": 10}, "tags": {"team": "x"}, "payload": [1]});
        let new = json!({"name": "a", "retry": {"max_attempts": 5, "backoff_s": 10}, "paused": true, "payload": [1, 2]});
        let fields: Vec<(String, Option<Value>, Option<Value>)> =
            changes(&old, &new).into_iter().map(|c| (c.field, c.old, c.new)).collect();
        assert_eq!(
            fields,
            [
                ("paused".into(), None, Some(json!(true))),
                ("payload".into(), Some(json!([1])), Some(json!([1, 2]))),
                ("retry.max_attempts".into(), Some(json!(3)), Some(json!(5))),
                ("tags".into(), Some(json!({"team": "x"})), None),
            ]
        );
        assert!(changes(&old, &old).is_empty());
        assert!(changes(&json!({"payload": null}), &json!({})).is_empty(), "null is absent");
    }
}
