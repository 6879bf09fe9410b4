//! The job lifecycle: create, read, list, patch, pause, resume, delete, preview.
//!
//! Every use case checks the caller owns the job (another owner's job is "not found"), validates
//! before it writes, and keeps `next_run_at` in step with the schedule:
//! - a new job's next run is the schedule's first instant at or after creation (now, for a job
//!   without a schedule);
//! - an edit that changes the schedule recomputes it from now; any other edit leaves it alone
//!   (so it costs no index move);
//! - resuming skips the instants missed while paused, like a suspended CronJob;
//! - the `version` (the ETag) changes with every edit of the document.

use crate::clock::Clock;
use crate::job::{Job, JobDocument, JobId, Owner};
use crate::limits::{Limits, TargetAllowList};
use crate::schedule::{Schedule, ceil_second};
use crate::store::{JobStore, Page, StoreError};
use crate::validation::{self, Rules, ValidationError};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// Why a job operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobsError {
    /// A value Sundial cannot accept (422 at the API).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// A document that does not decode: wrong type, unknown field (400 at the API).
    #[error(transparent)]
    Malformed(ValidationError),
    #[error("job not found")]
    NotFound,
    /// `If-Match` named another version than the current one.
    #[error("the job is at version {current}, not the one in If-Match")]
    VersionMismatch { current: u64 },
    #[error("a job named `{0}` already exists")]
    NameTaken(String),
    #[error("the owner already has the maximum of {0} jobs")]
    QuotaExceeded(u32),
    #[error("the job kept changing while this edit was applied; retry")]
    Contended,
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for JobsError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => JobsError::NotFound,
            StoreError::NameTaken(name) => JobsError::NameTaken(name),
            StoreError::QuotaExceeded(max) => JobsError::QuotaExceeded(max),
            StoreError::BadCursor => JobsError::Malformed(ValidationError::new(
                "next",
                "is not a token from a previous page",
            )),
            other => JobsError::Store(other),
        }
    }
}

pub type JobsResult<T> = Result<T, JobsError>;

/// Largest `count` of a preview.
pub const MAX_PREVIEW: usize = 500;
/// Largest page of a listing.
pub const MAX_PAGE: u32 = 100;
/// Edits retried on a concurrent change when the caller gave no `If-Match`.
const EDIT_ATTEMPTS: usize = 3;

/// Decodes a JSON object into `T`, naming the offending field (`retry.max_attempts`) on failure.
pub fn decode<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ValidationError> {
    if !value.is_object() {
        return Err(ValidationError::new("body", "must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        let reason = e.into_inner().to_string();
        // serde names an unknown or missing field only in its message: lift it into the path.
        let named = ["unknown field `", "missing field `"]
            .iter()
            .find_map(|prefix| reason.strip_prefix(prefix))
            .and_then(|r| r.split('`').next());
        let field = match named {
            Some(unknown) if field.is_empty() => unknown.to_string(),
            Some(unknown) if !field.ends_with(unknown) => format!("{field}.{unknown}"),
            _ if field.is_empty() => "body".to_string(),
            _ => field,
        };
        ValidationError::new(field, reason)
    })
}

/// The job use cases, over a [`JobStore`].
#[derive(Debug, Clone)]
pub struct Jobs {
    store: Arc<dyn JobStore>,
    clock: Arc<dyn Clock>,
    limits: Limits,
    targets: TargetAllowList,
}

impl Jobs {
    pub fn new(
        store: Arc<dyn JobStore>,
        clock: Arc<dyn Clock>,
        limits: Limits,
        targets: TargetAllowList,
    ) -> Self {
        Jobs {
            store,
            clock,
            limits,
            targets,
        }
    }

    fn rules(&self) -> Rules<'_> {
        Rules {
            limits: &self.limits,
            targets: &self.targets,
        }
    }

    /// The job's schedule as stored (validated when written).
    pub fn schedule_of(job: &Job) -> JobsResult<Option<Schedule>> {
        job.document
            .schedule
            .as_ref()
            .map(|s| validation::parse_schedule(s, job.created_at))
            .transpose()
            .map_err(JobsError::Invalid)
    }

    /// The next run of a job whose schedule is (re)started at `now`.
    fn first_run(schedule: Option<&Schedule>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match schedule {
            Some(s) => s.first_at_or_after(now),
            None => Some(ceil_second(now)),
        }
    }

    pub async fn create(&self, owner: &Owner, mut document: JobDocument) -> JobsResult<Job> {
        let now = self.clock.now();
        let schedule = validation::validate(&mut document, &self.rules(), now, now)?;
        let job = Job {
            id: JobId::generate(),
            owner: owner.clone(),
            next_run_at: Self::first_run(schedule.as_ref(), now),
            document,
            version: 1,
            created_at: now,
            updated_at: now,
        };
        self.store
            .create(&job, self.limits.max_jobs_per_owner)
            .await?;
        Ok(job)
    }

    pub async fn get(&self, owner: &Owner, id: &JobId) -> JobsResult<Job> {
        match self.store.get(id).await? {
            Some(job) if &job.owner == owner => Ok(job),
            _ => Err(JobsError::NotFound),
        }
    }

    pub async fn list(
        &self,
        owner: &Owner,
        limit: u32,
        cursor: Option<&str>,
    ) -> JobsResult<Page<Job>> {
        Ok(self
            .store
            .list(owner, limit.clamp(1, MAX_PAGE), cursor)
            .await?)
    }

    /// Applies a JSON merge patch to the job's document.
    pub async fn patch(
        &self,
        owner: &Owner,
        id: &JobId,
        patch: &serde_json::Value,
        if_match: Option<u64>,
    ) -> JobsResult<Job> {
        if !patch.is_object() {
            return Err(JobsError::Malformed(ValidationError::new(
                "body",
                "a merge patch must be a JSON object",
            )));
        }
        self.edit(owner, id, if_match, |document| {
            let mut merged = serde_json::to_value(&*document)
                .map_err(|e| JobsError::Malformed(ValidationError::new("body", e.to_string())))?;
            crate::merge_patch::apply(&mut merged, patch);
            *document = decode(merged).map_err(JobsError::Malformed)?;
            Ok(())
        })
        .await
    }

    pub async fn pause(&self, owner: &Owner, id: &JobId) -> JobsResult<Job> {
        self.edit(owner, id, None, |document| {
            document.paused = true;
            Ok(())
        })
        .await
    }

    pub async fn resume(&self, owner: &Owner, id: &JobId) -> JobsResult<Job> {
        self.edit(owner, id, None, |document| {
            document.paused = false;
            Ok(())
        })
        .await
    }

    /// Read, change, validate and write under the version check; without `If-Match` a lost race
    /// is retried on the fresh version.
    async fn edit(
        &self,
        owner: &Owner,
        id: &JobId,
        if_match: Option<u64>,
        change: impl Fn(&mut JobDocument) -> JobsResult<()>,
    ) -> JobsResult<Job> {
        for _ in 0..EDIT_ATTEMPTS {
            let before = self.get(owner, id).await?;
            if let Some(expected) = if_match {
                if expected != before.version {
                    return Err(JobsError::VersionMismatch {
                        current: before.version,
                    });
                }
            }
            let mut document = before.document.clone();
            change(&mut document)?;
            if document == before.document {
                return Ok(before);
            }
            let now = self.clock.now();
            let schedule_changed = document.schedule != before.document.schedule;
            // A schedule that is not edited keeps its instants: a one-time job that already ran
            // stays valid when its payload changes.
            let validate_at = if schedule_changed {
                now
            } else {
                before.created_at.min(now)
            };
            let schedule =
                validation::validate(&mut document, &self.rules(), before.created_at, validate_at)?;
            let resumed = before.document.paused && !document.paused;
            let next_run_at = match (schedule.as_ref(), schedule_changed || resumed) {
                (_, false) => before.next_run_at,
                (Some(s), true) => s.first_at_or_after(now),
                // Run-once jobs keep their pending run (or its absence, once it ran).
                (None, true) => before.next_run_at.map(|t| t.max(ceil_second(now))),
            };
            let after = Job {
                document,
                version: before.version + 1,
                updated_at: now,
                next_run_at,
                ..before.clone()
            };
            match self.store.update(&before, &after).await {
                Ok(()) => return Ok(after),
                Err(StoreError::Conflict) => match if_match {
                    Some(_) => {
                        let current = self.get(owner, id).await?.version;
                        return Err(JobsError::VersionMismatch { current });
                    }
                    None => continue,
                },
                Err(e) => return Err(e.into()),
            }
        }
        Err(JobsError::Contended)
    }

    pub async fn delete(&self, owner: &Owner, id: &JobId) -> JobsResult<()> {
        let job = self.get(owner, id).await?;
        Ok(self.store.delete(&job).await?)
    }

    /// The next `count` instants of the job, paused or not.
    pub async fn preview(
        &self,
        owner: &Owner,
        id: &JobId,
        count: usize,
    ) -> JobsResult<(Job, Vec<DateTime<Utc>>)> {
        let job = self.get(owner, id).await?;
        let now = self.clock.now();
        let count = count.min(MAX_PREVIEW);
        let instants = match Self::schedule_of(&job)? {
            Some(schedule) => schedule.upcoming(now - chrono::Duration::seconds(1), count),
            None => job.next_run_at.into_iter().take(count).collect(),
        };
        Ok((job, instants))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        inner: Inner,
    }
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn decode_names_the_field() {
        let field = |v| {
            decode::<Outer>(v)
                .err()
                .map(|e| e.field)
                .unwrap_or_default()
        };
        assert_eq!(field(json!({"inner": {"n": "x"}})), "inner.n");
        assert_eq!(field(json!({"inner": {"n": 1, "m": 2}})), "inner.m");
        assert_eq!(field(json!({"inner": {"n": 1}, "extra": 2})), "extra");
        assert_eq!(field(json!({})), "inner");
        assert_eq!(field(json!({"inner": {}})), "inner.n");
        assert_eq!(field(json!([1])), "body");
    }
}
