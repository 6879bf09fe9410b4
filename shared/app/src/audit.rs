//! The audit trail, from the use cases' side: [`Recording`] says for whom a use case acts (the
//! [`Stamp`] of the API request, or no one for Sundial's own work) and makes the records its
//! writes carry to the store; [`AuditLog`] reads the trail back for its owner, a page at a time.

use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::audit::{self, AuditQuery, AuditRecord, RecordIds, Stamp, Target};
use sundial_domain::entropy::Entropy;
use sundial_domain::page_token::PageTokens;
use sundial_domain::ports::store::{AuditTrail, Page, StoreError};

/// For whom a use case acts: a request's [`Stamp`], whose changes are recorded, or Sundial
/// itself (no stamp), whose are not.
#[derive(Debug, Clone)]
pub struct Recording {
    stamp: Option<Arc<Stamp>>,
    ids: Arc<RecordIds>,
    entropy: Arc<dyn Entropy>,
    retention_days: u32,
}

impl Recording {
    /// Acting for no one: records nothing, until [`Recording::by`].
    pub fn new(entropy: Arc<dyn Entropy>, retention_days: u32) -> Self {
        Recording { stamp: None, ids: Arc::new(RecordIds::default()), entropy, retention_days }
    }

    /// Acting for the request `stamp` names.
    pub fn by(&self, stamp: Arc<Stamp>) -> Self {
        Recording { stamp: Some(stamp), ..self.clone() }
    }

    /// The record of a change of `owner`'s `target` made at `at`; `None` when acting for no
    /// one.
    pub fn record(&self, owner: &str, at: DateTime<Utc>, target: Target) -> Option<AuditRecord> {
        let stamp = self.stamp.as_ref()?;
        let id = self.ids.next(at, self.entropy.as_ref());
        Some(stamp.record(id, owner, at, self.retention_days, target))
    }

    /// Acting for no one: Sundial's own follow-ups of a change (a calendar's days copied into
    /// its jobs) are not the caller's changes.
    pub fn unstamped(&self) -> Self {
        Recording { stamp: None, ..self.clone() }
    }
}

/// Why the trail could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    /// A page token not issued for this listing (400 at the API).
    #[error("the page token is not one this listing issued")]
    BadToken,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The trail as its owner reads it.
#[derive(Debug, Clone)]
pub struct AuditLog {
    trail: Arc<dyn AuditTrail>,
    page_tokens: PageTokens,
}

impl AuditLog {
    pub fn new(trail: Arc<dyn AuditTrail>, page_tokens: PageTokens) -> Self {
        AuditLog { trail, page_tokens }
    }

    /// The owner's records `query` asks for, newest first, at most `limit`, from the page `token`
    /// names; and the token of the next page, if there is more to read.
    pub async fn page(
        &self,
        owner: &str,
        query: &AuditQuery,
        limit: u32,
        token: Option<&str>,
    ) -> Result<Page<AuditRecord>, AuditError> {
        // A token continues the query it was issued for, and no other.
        let scope = format!("audit:{owner}:{}", query.scope());
        let cursor =
            token.map(|t| self.page_tokens.open(&scope, t).ok_or(AuditError::BadToken)).transpose()?;
        let limit = limit.clamp(1, audit::MAX_PAGE);
        let page = self.trail.page(owner, query, limit, cursor.as_deref()).await?;
        let next = page.next.map(|cursor| self.page_tokens.seal(&scope, &cursor));
        Ok(Page { items: page.items, next })
    }
}
