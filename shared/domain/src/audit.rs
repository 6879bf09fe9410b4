//! The audit trail: one record of every change made through the API: who made it (a key, a
//! configured key's owner, a JWT subject, or a run's own token), what it was (the action, the
//! job, run, group, calendar or key it reached, and the fields that changed, old and new, secrets
//! redacted), when, and the request that carried it. A record is written with its change or not
//! at all: the store puts it in the change's own write ([`crate::ports::store`]). Records are
//! immutable through the API and expire after the retention the deployment sets.
//!
//! A record is bounded: a value over [`MAX_VALUE_BYTES`] is replaced by a note of its size (the
//! job's kept version holds it whole), and once the changes pass [`MAX_CHANGE_BYTES`] the rest are
//! named without their values, so a page of [`MAX_PAGE`] records stays within one API response.

use crate::job::{JobId, Owner};
use crate::keys::Principal;
use crate::versions::FieldChange;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How long a record is kept, unless the deployment says otherwise.
pub const DEFAULT_RETENTION_DAYS: u32 = 400;
/// The largest value a change shows whole, as JSON.
pub const MAX_VALUE_BYTES: usize = 1024;
/// The most bytes of values one record's changes hold.
pub const MAX_CHANGE_BYTES: usize = 16 * 1024;
/// The most fields one record names.
pub const MAX_CHANGES: usize = 50;
/// The longest field path a record names, in bytes (a payload's keys are the owner's own).
pub const MAX_FIELD_BYTES: usize = 128;
/// The most records one page of the trail holds.
pub const MAX_PAGE: u32 = 50;

/// How a caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    /// A key made through the API.
    Key,
    /// A key of the deployment's configuration: its owner's admin.
    ConfiguredKey,
    /// A subject an API Gateway JWT authorizer verified.
    Jwt,
    /// A run's own callback token (a target completing its run).
    RunToken,
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Actor {
    pub kind: ActorKind,
    /// The key's name, the JWT subject, the owner (a configured key) or the run's id.
    pub name: String,
    /// The key's id, for a key made through the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
}

impl Actor {
    /// The actor of a request made by `principal`, behind a JWT authorizer that verified
    /// `jwt_subject` if one did.
    pub fn of(principal: &Principal, jwt_subject: Option<&str>) -> Actor {
        let key_id = principal.key.as_ref().map(|k| k.id.clone());
        match (jwt_subject, &principal.key) {
            (Some(subject), _) => Actor { kind: ActorKind::Jwt, name: subject.to_string(), key_id },
            (None, Some(key)) => Actor { kind: ActorKind::Key, name: key.name.clone(), key_id },
            (None, None) => Actor { kind: ActorKind::ConfiguredKey, name: principal.owner.clone(), key_id },
        }
    }
    /// Whether `who` names this actor: its name or its key's id.
    pub fn is(&self, who: &str) -> bool {
        self.name == who || self.key_id.as_deref() == Some(who)
    }
}

/// What a change reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    Job,
    Run,
    Group,
    Calendar,
    Key,
}

/// The resource a change reached: its kind, id and (where it has one) name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Target {
    pub kind: TargetKind,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The request a change came in: who made it, through which route, under which action, with
/// which request id and from which address. The API makes one per changing request; the use
/// cases turn it into records of what the request changed, each kept by the owner of what it
/// changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub actor: Actor,
    /// What the request does (`job.update`, `run.cancel`, `key.revoke`, …).
    pub action: String,
    /// The method and route template (`PATCH /v1/jobs/{id}`).
    pub route: String,
    pub request_id: String,
    /// The caller's address, as the API saw it.
    pub source: Option<String>,
}

/// One record of the trail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditRecord {
    /// Unique, and in time order within one millisecond's records of an owner.
    pub id: String,
    pub owner: Owner,
    pub at: DateTime<Utc>,
    pub actor: Actor,
    pub action: String,
    pub route: String,
    pub target: Target,
    /// The job the change concerns (itself, or the job of a run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub job: Option<JobId>,
    /// The job's version the change made, where it made one (its document is kept whole there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// The fields that changed, old and new, secrets redacted, values bounded.
    #[serde(default)]
    pub changes: Vec<FieldChange>,
    pub request_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When the record expires (the retention after `at`).
    pub expires_at: DateTime<Utc>,
}

/// A new record id for a record made at `at`: a ULID, so ids sort by time and never collide.
pub fn record_id(at: DateTime<Utc>, entropy: &dyn crate::entropy::Entropy) -> String {
    ulid::Ulid::from_parts(at.timestamp_millis().max(0) as u64, entropy.bits())
        .to_string()
        .to_ascii_lowercase()
}

/// Record ids of one process, in the order they are made even within one millisecond: a record
/// made in the same millisecond as the last (or, the clock stepping back, earlier) takes the
/// last one's id plus one. Records of other processes in the same millisecond were made
/// concurrently, and sort either way.
#[derive(Debug, Default)]
pub struct RecordIds {
    last: std::sync::Mutex<Option<ulid::Ulid>>,
}

impl RecordIds {
    /// The id of a record made at `at`, after every id this process made before.
    pub fn next(&self, at: DateTime<Utc>, entropy: &dyn crate::entropy::Entropy) -> String {
        let drawn = ulid::Ulid::from_parts(at.timestamp_millis().max(0) as u64, entropy.bits());
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let id = match *last {
            Some(previous) if drawn <= previous => previous.increment().unwrap_or(drawn),
            _ => drawn,
        };
        *last = Some(id);
        id.to_string().to_ascii_lowercase()
    }
}

/// The smallest record id of a record made at or after `at`: the trail's sort key bound.
pub fn first_id_at(at: DateTime<Utc>) -> String {
    ulid::Ulid::from_parts(at.timestamp_millis().max(0) as u64, 0).to_string().to_ascii_lowercase()
}

impl Stamp {
    /// The record of this request's change of `owner`'s `target`, at `at`, kept
    /// `retention_days`.
    pub fn record(
        &self,
        id: String,
        owner: &str,
        at: DateTime<Utc>,
        retention_days: u32,
        target: Target,
    ) -> AuditRecord {
        AuditRecord {
            id,
            owner: owner.to_string(),
            at,
            actor: self.actor.clone(),
            action: self.action.clone(),
            route: self.route.clone(),
            target,
            job: None,
            version: None,
            changes: Vec::new(),
            request_id: self.request_id.clone(),
            source: self.source.clone(),
            expires_at: at + chrono::Duration::days(i64::from(retention_days)),
        }
    }
}

impl AuditRecord {
    /// This record, about the job `job`.
    pub fn of_job(mut self, job: &JobId) -> Self {
        self.job = Some(job.clone());
        self
    }

    /// This record, saying that the change made version `version` of its job.
    pub fn making_version(mut self, version: u64) -> Self {
        self.version = Some(version);
        self
    }

    /// This record, with the fields that changed from `old` to `new` (both redacted by the
    /// caller), bounded.
    pub fn changing(mut self, old: &Value, new: &Value) -> Self {
        self.changes = bounded(crate::versions::changes(old, new));
        self
    }

    /// This record, with `changes` (redacted by the caller), bounded.
    pub fn with_changes(mut self, changes: Vec<FieldChange>) -> Self {
        self.changes = bounded(changes);
        self
    }
}

/// `changes` within the bounds of one record: each value at most [`MAX_VALUE_BYTES`], the values
/// together at most [`MAX_CHANGE_BYTES`], at most [`MAX_CHANGES`] fields (the last one kept then
/// says how many more there were).
pub fn bounded(changes: Vec<FieldChange>) -> Vec<FieldChange> {
    let total = changes.len();
    let mut spent = 0;
    let mut out: Vec<FieldChange> = Vec::with_capacity(total.min(MAX_CHANGES));
    for change in changes.into_iter().take(MAX_CHANGES) {
        let mut shown = |value: Option<Value>| {
            let value = value?;
            let size = serde_json::to_vec(&value).map_or(0, |b| b.len());
            if size > MAX_VALUE_BYTES || spent + size > MAX_CHANGE_BYTES {
                return Some(Value::String(format!("<{size} bytes, not shown>")));
            }
            spent += size;
            Some(value)
        };
        let old = shown(change.old);
        let new = shown(change.new);
        out.push(FieldChange { field: truncated(change.field), old, new });
    }
    if total > MAX_CHANGES
        && let Some(last) = out.last_mut()
    {
        last.field = format!("{} (and {} more fields)", last.field, total - MAX_CHANGES + 1);
        last.old = None;
        last.new = None;
    }
    out
}

/// `field` cut to at most [`MAX_FIELD_BYTES`] (on a character's boundary), marked when cut.
fn truncated(mut field: String) -> String {
    if field.len() <= MAX_FIELD_BYTES {
        return field;
    }
    let mut end = MAX_FIELD_BYTES - 3;
    while !field.is_char_boundary(end) {
        end -= 1;
    }
    field.truncate(end);
    field.push_str("...");
    field
}

/// What a reader of the trail asks for: each filter given narrows it; `from` and `to` bound
/// `at` (from inclusive, to exclusive).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    pub job: Option<JobId>,
    /// A key's name or id, a JWT subject, or an owner.
    pub actor: Option<String>,
    pub action: Option<String>,
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
}

impl AuditQuery {
    /// Whether `record` is one this query's filters other than time ask for (its time is the
    /// range's: [`AuditQuery::ids`]).
    pub fn matches(&self, record: &AuditRecord) -> bool {
        self.job.as_ref().is_none_or(|j| record.job.as_ref() == Some(j))
            && self.actor.as_deref().is_none_or(|a| record.actor.is(a))
            && self.action.as_deref().is_none_or(|a| record.action == a)
    }

    /// The range of record ids this query reads below `cursor` (the last id a page showed):
    /// from the first id at `from` (inclusive) to the smaller of `cursor` and the first id at
    /// `to` (both exclusive), as the ids' milliseconds say; `None` if the range is empty.
    pub fn ids(&self, cursor: Option<&str>) -> Option<IdRange> {
        let low = self.from.map_or_else(|| "0".to_string(), first_id_at);
        let high = match (cursor, self.to.map(first_id_at)) {
            (Some(c), Some(to)) => c.to_string().min(to),
            (Some(c), None) => c.to_string(),
            (None, Some(to)) => to,
            (None, None) => "z".to_string(),
        };
        (low < high).then_some(IdRange { low, high })
    }

    /// What this query asks for, as one line: the scope a page token is sealed to, so that a
    /// token of one query is refused by another.
    pub fn scope(&self) -> String {
        serde_json::json!([
            self.job.as_ref().map(JobId::as_str),
            self.actor,
            self.action,
            self.from.map(|t| t.to_rfc3339()),
            self.to.map(|t| t.to_rfc3339()),
        ])
        .to_string()
    }
}

/// A range of record ids: `low` inclusive, `high` exclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdRange {
    pub low: String,
    pub high: String,
}

impl IdRange {
    pub fn contains(&self, id: &str) -> bool {
        self.low.as_str() <= id && id < self.high.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stamp() -> Stamp {
        Stamp {
            actor: Actor { kind: ActorKind::Key, name: "ci".into(), key_id: Some("k1".into()) },
            action: "job.update".into(),
            route: "PATCH /v1/jobs/{id}".into(),
            request_id: "r1".into(),
            source: Some("127.0.0.1".into()),
        }
    }

    fn j1() -> JobId {
        JobId::parse("01jdk9xv7s7kz8m3q1w2e4r5t6").unwrap_or_else(JobId::generate)
    }

    fn at() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default()
    }

    #[test]
    fn a_record_says_who_what_and_when() {
        let target = Target { kind: TargetKind::Job, id: "j1".into(), name: Some("nightly".into()) };
        let record = stamp()
            .record("a1".into(), "acme", at(), 400, target)
            .of_job(&j1())
            .changing(&json!({"retry": {"max_attempts": 3}}), &json!({"retry": {"max_attempts": 5}}));
        assert_eq!(record.actor.name, "ci");
        assert_eq!(record.changes.len(), 1);
        assert_eq!(record.changes[0].field, "retry.max_attempts");
        assert_eq!(
            (record.changes[0].old.clone(), record.changes[0].new.clone()),
            (Some(json!(3)), Some(json!(5)))
        );
        assert_eq!(record.expires_at - record.at, chrono::Duration::days(400));
    }

    #[test]
    fn large_values_and_many_fields_are_bounded() {
        let big = json!("x".repeat(5_000));
        let kept = bounded(vec![FieldChange { field: "payload".into(), old: None, new: Some(big) }]);
        assert_eq!(kept[0].new, Some(json!("<5002 bytes, not shown>")));
        let many: Vec<FieldChange> = (0..500)
            .map(|i| FieldChange { field: format!("f{i:03}"), old: Some(json!("y".repeat(900))), new: None })
            .collect();
        let kept = bounded(many);
        assert_eq!(kept.len(), MAX_CHANGES);
        let long = bounded(vec![FieldChange { field: "é".repeat(100), old: None, new: None }]);
        assert!(long[0].field.len() <= MAX_FIELD_BYTES && long[0].field.ends_with("..."));
        assert!(kept[MAX_CHANGES - 1].field.ends_with("(and 451 more fields)"));
        let bytes: usize = kept.iter().filter_map(|c| c.old.as_ref()).map(|v| v.to_string().len()).sum();
        assert!(bytes <= MAX_CHANGE_BYTES + MAX_CHANGES * 32, "values bounded: {bytes}");
    }

    #[test]
    fn a_page_of_the_largest_records_fits_one_response() {
        // Lambda's response is 6 MB, and API Gateway doubles every quote: a page stays under 2 MiB
        // (the API's page bound), so MAX_PAGE of the largest records must fit it.
        let many: Vec<FieldChange> = (0..500)
            .map(|i| FieldChange {
                field: format!("schedule.any[{i}].{}", "z".repeat(200)),
                old: Some(json!("\"".repeat(500))),
                new: Some(json!("\"".repeat(500))),
            })
            .collect();
        let target = Target { kind: TargetKind::Job, id: "j".repeat(64), name: Some("n".repeat(128)) };
        let record = stamp().record("a".repeat(32), "acme", at(), 400, target).with_changes(many);
        let one = serde_json::to_vec(&record).map_or(usize::MAX, |b| b.len());
        assert!(one * MAX_PAGE as usize <= 2 * 1024 * 1024, "a record of {one} bytes, {MAX_PAGE} a page");
    }

    #[test]
    fn ids_of_one_process_follow_the_order_records_are_made() {
        let ids = RecordIds::default();
        let entropy = crate::entropy::OsEntropy;
        let made: Vec<String> = (0..100).map(|_| ids.next(at(), &entropy)).collect();
        let mut sorted = made.clone();
        sorted.sort();
        assert_eq!(made, sorted, "within one millisecond, in order");
        let earlier = ids.next(at() - chrono::Duration::seconds(1), &entropy);
        assert!(earlier > made[99], "a clock stepping back does not reorder them");
        assert!(ids.next(at() + chrono::Duration::seconds(1), &entropy) > earlier);
    }

    #[test]
    fn a_query_narrows_by_each_filter_given() {
        let target = Target { kind: TargetKind::Job, id: "j1".into(), name: None };
        let record = stamp().record("a1".into(), "acme", at(), 400, target).of_job(&j1());
        assert!(AuditQuery::default().matches(&record));
        assert!(AuditQuery { actor: Some("k1".into()), ..Default::default() }.matches(&record));
        assert!(AuditQuery { actor: Some("ci".into()), ..Default::default() }.matches(&record));
        assert!(!AuditQuery { actor: Some("bob".into()), ..Default::default() }.matches(&record));
        assert!(!AuditQuery { job: Some(JobId::generate()), ..Default::default() }.matches(&record));
        assert!(!AuditQuery { action: Some("job.delete".into()), ..Default::default() }.matches(&record));
        let id = record_id(at(), &crate::entropy::OsEntropy);
        let second = at() + chrono::Duration::seconds(1);
        let window = AuditQuery { from: Some(at()), to: Some(second), ..Default::default() };
        assert!(window.ids(None).is_some_and(|r| r.contains(&id)), "from inclusive");
        let before = AuditQuery { to: Some(at()), ..Default::default() }.ids(None);
        assert!(before.is_some_and(|r| !r.contains(&id)), "to exclusive");
        let upside_down = AuditQuery { from: Some(second), to: Some(at()), ..Default::default() };
        assert_eq!(upside_down.ids(None), None, "an empty range");
        assert_eq!(window.ids(Some("0")), None, "a cursor below the range");
        assert_ne!(window.scope(), AuditQuery::default().scope());
        let ampersand = AuditQuery { actor: Some("a&action=b".into()), ..Default::default() };
        let split =
            AuditQuery { actor: Some("a".into()), action: Some("b&action=".into()), ..Default::default() };
        assert_ne!(ampersand.scope(), split.scope(), "no two queries share a scope");
    }
}
