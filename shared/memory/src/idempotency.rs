//! Idempotency records in memory: [`MemoryIdempotencyStore`], the [`IdempotencyStore`] that
//! behaves as the DynamoDB idempotency table does (`sundial_aws::dynamo::idempotency`).
//!
//! One record per key: its fingerprint, its state (`pending` until `pending_until`, `released`,
//! `done` with the response), when the key was first seen, and when it expires. A claim
//! succeeds where the table's conditional update does: on a new key, on a pending claim of the
//! same request whose [`PENDING_FOR`] ran out (a crashed request is taken over), and on a released
//! claim of the same request; otherwise the record says mismatch, replay or in progress.
//! Expired records are not swept: DynamoDB's TTL deletes them some time after `expires_at`, and
//! the adapter's conditions do not look at it either.

use crate::guard::lock;
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;
use std::sync::Mutex;
use sundial_domain::due_index::parse_instant;
use sundial_domain::ports::store::{Claim, IdempotencyStore, StoreError, StoreResult, StoredResponse};

/// How long a claim blocks the key while its request is processed (as the adapter's).
pub const PENDING_FOR: Duration = Duration::seconds(60);
/// How long a completed response is kept (as the adapter's).
pub const RETAIN_FOR: Duration = Duration::hours(24);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Pending,
    Released,
    Done,
}

/// One key's record; every attribute optional, as an item's are (a `complete` of a key never
/// claimed writes one without a fingerprint).
#[derive(Debug, Clone, Default)]
struct Record {
    fingerprint: Option<String>,
    phase: Option<Phase>,
    /// Epoch seconds.
    pending_until: Option<i64>,
    /// Epoch seconds.
    expires_at: Option<i64>,
    /// RFC 3339 text, as the table keeps it.
    first_seen: Option<String>,
    response: Option<StoredResponse>,
}

/// Idempotency records in memory.
#[derive(Debug, Default)]
pub struct MemoryIdempotencyStore {
    records: Mutex<HashMap<String, Record>>,
}

impl MemoryIdempotencyStore {
    pub fn new() -> Self {
        MemoryIdempotencyStore::default()
    }

    /// When the key's record expires (its TTL), if there is one.
    pub fn expires_at(&self, key: &str) -> Option<DateTime<Utc>> {
        let at = lock(&self.records).get(key)?.expires_at?;
        DateTime::from_timestamp(at, 0)
    }
}

#[async_trait]
impl IdempotencyStore for MemoryIdempotencyStore {
    async fn claim(&self, key: &str, fingerprint: &str, now: DateTime<Utc>) -> StoreResult<Claim> {
        let mut records = lock(&self.records);
        let same = |r: &Record| r.fingerprint.as_deref() == Some(fingerprint);
        let claimable = match records.get(key) {
            None => true,
            Some(r) => match r.phase {
                Some(Phase::Pending) => {
                    r.pending_until.is_some_and(|until| until < now.timestamp()) && same(r)
                }
                Some(Phase::Released) => same(r),
                _ => false,
            },
        };
        if claimable {
            let record = records.entry(key.to_string()).or_default();
            record.fingerprint = Some(fingerprint.to_string());
            record.phase = Some(Phase::Pending);
            record.pending_until = Some((now + PENDING_FOR).timestamp());
            record.expires_at = Some((now + RETAIN_FOR).timestamp());
            let first_seen = record.first_seen.get_or_insert_with(|| now.to_rfc3339());
            return Ok(Claim::New { first_seen: parse_instant(first_seen).unwrap_or(now) });
        }
        let Some(record) = records.get(key) else {
            return Err(StoreError::Unavailable("idempotency record vanished; retry".into()));
        };
        let stored = record
            .fingerprint
            .as_deref()
            .ok_or_else(|| StoreError::Corrupt("attribute fingerprint missing or not a string".into()))?;
        if stored != fingerprint {
            return Ok(Claim::Mismatch);
        }
        match (record.phase, &record.response) {
            (Some(Phase::Done), Some(response)) => Ok(Claim::Replay(response.clone())),
            (Some(Phase::Done), None) => {
                Err(StoreError::Corrupt("attribute headers missing or not a string".into()))
            }
            _ => Ok(Claim::InProgress),
        }
    }

    async fn complete(&self, key: &str, response: &StoredResponse, now: DateTime<Utc>) -> StoreResult<()> {
        // Unconditional, as the adapter's update: whatever the record was, it is done now.
        let mut records = lock(&self.records);
        let record = records.entry(key.to_string()).or_default();
        record.phase = Some(Phase::Done);
        record.response = Some(response.clone());
        record.expires_at = Some((now + RETAIN_FOR).timestamp());
        record.pending_until = None;
        Ok(())
    }

    async fn release(&self, key: &str) -> StoreResult<()> {
        // Only a pending claim is given up; a completed (or absent) one is left as it is.
        if let Some(record) = lock(&self.records).get_mut(key).filter(|r| r.phase == Some(Phase::Pending)) {
            record.phase = Some(Phase::Released);
            record.pending_until = None;
        }
        Ok(())
    }
}
