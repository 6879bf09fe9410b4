//! Storage ports and their DynamoDB adapters.
//!
//! The traits say what the functions need from storage in domain terms; the `dynamo_*` modules
//! implement them. Each adapter maps its SDK errors onto [`StoreError`], which says whether a
//! retry can help, so no AWS type crosses this boundary.

pub mod dynamo_idempotency;
pub mod dynamo_jobs;
mod item;

pub use dynamo_idempotency::DynamoIdempotencyStore;
pub use dynamo_jobs::DynamoJobStore;

use crate::job::{Job, JobId};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// A storage failure, with what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The item does not exist (or no longer does).
    #[error("not found")]
    NotFound,
    /// A conditional write lost: the version (or another fenced attribute) changed since read.
    #[error("the item changed since it was read")]
    Conflict,
    /// Another job of the same owner has this name.
    #[error("a job named `{0}` already exists")]
    NameTaken(String),
    /// The owner has as many jobs as allowed.
    #[error("the owner already has the maximum of {0} jobs")]
    QuotaExceeded(u32),
    /// A pagination cursor that this store did not issue for this query.
    #[error("the pagination token is not valid here")]
    BadCursor,
    /// Storage could not be reached or throttled: retrying may succeed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// An item that does not decode: a defect or a manual edit, retrying will not help.
    #[error("stored item is corrupt: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Whether the same request may succeed later.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

pub type StoreResult<T> = Result<T, StoreError>;

/// One page of a listing; `next` continues it.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

/// Job definitions.
#[async_trait]
pub trait JobStore: Send + Sync + std::fmt::Debug {
    /// Stores a new job: fails with `NameTaken` if the owner has a job of that name and with
    /// `QuotaExceeded` if the owner already has `max_jobs`. All or nothing.
    async fn create(&self, job: &Job, max_jobs: u32) -> StoreResult<()>;

    async fn get(&self, id: &JobId) -> StoreResult<Option<Job>>;

    /// The owner's jobs by name, `limit` at a time.
    async fn list(&self, owner: &str, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>>;

    /// Replaces `before` with `after` if `before.version` is still current (`Conflict` if not,
    /// `NotFound` if the job is gone). `after` carries its new version.
    async fn update(&self, before: &Job, after: &Job) -> StoreResult<()>;

    /// Deletes the job and frees its name.
    async fn delete(&self, job: &Job) -> StoreResult<()>;
}

/// A response kept for an idempotent replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

/// What an idempotency key says about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// First use: process the request, then `complete` (or `release` on failure).
    New,
    /// Seen with the same request: send this response again.
    Replay(StoredResponse),
    /// Seen with a different request.
    Mismatch,
    /// The same request is being processed right now.
    InProgress,
}

/// Responses to requests that carried an `Idempotency-Key`.
#[async_trait]
pub trait IdempotencyStore: Send + Sync + std::fmt::Debug {
    /// Claims `key` for a request whose fingerprint is `fingerprint`.
    async fn claim(&self, key: &str, fingerprint: &str, now: DateTime<Utc>) -> StoreResult<Claim>;
    /// Records the response of a claimed request.
    async fn complete(
        &self,
        key: &str,
        response: &StoredResponse,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// Gives a claim up (the request failed without effect), so a retry processes it again.
    async fn release(&self, key: &str) -> StoreResult<()>;
}
