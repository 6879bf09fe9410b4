//! The instant ledger use case: a job's scheduled instants in a range and what became of each,
//! read from the job and its runs and accounted by [`sundial_domain::ledger`].

use crate::jobs::{JobsError, JobsResult};
use chrono::{DateTime, Duration, Utc};
use std::sync::Arc;
use sundial_domain::clock::Clock;
use sundial_domain::job::{JobId, Owner};
use sundial_domain::ledger::{self, DEFAULT_LIMIT, DEFAULT_RANGE, Ledger, MAX_LIMIT, MAX_RANGE};
use sundial_domain::ports::store::{Catalogue, RunHistory};
use sundial_domain::run::{Run, RunKey};
use sundial_domain::validation::{ValidationError, stored_schedule};

/// Runs read per query of the history.
const RUNS_PER_READ: u32 = 500;

/// The most runs one page reads: its scheduled instants' runs, and manual runs besides. A run
/// item holds up to ten attempts' outputs and errors (about 50 KB): 1,500 of them stay near
/// 75 MB in a 256 MB function.
const MAX_RUNS_READ: usize = MAX_LIMIT + RUNS_PER_READ as usize;

/// What a ledger request asks for; each bound optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LedgerQuery {
    pub from: Option<DateTime<Utc>>,
    pub to: Option<DateTime<Utc>>,
    pub limit: Option<usize>,
}

/// The ledgers of jobs' instants.
#[derive(Debug, Clone)]
pub struct Ledgers {
    catalogue: Arc<dyn Catalogue>,
    history: Arc<dyn RunHistory>,
    clock: Arc<dyn Clock>,
}

impl Ledgers {
    pub fn new(catalogue: Arc<dyn Catalogue>, history: Arc<dyn RunHistory>, clock: Arc<dyn Clock>) -> Self {
        Ledgers { catalogue, history, clock }
    }

    /// The owner's job's instants in the query's range (default: the last 24 hours; at most 7
    /// days), oldest first, a page at a time. A range or limit out of bounds is `Malformed`,
    /// naming the field.
    pub async fn instants(&self, owner: &Owner, id: &JobId, query: &LedgerQuery) -> JobsResult<Ledger> {
        let now = self.clock.now();
        let (from, to) = range(query, now)?;
        let limit = match query.limit {
            None => DEFAULT_LIMIT,
            Some(limit) if (1..=MAX_LIMIT).contains(&limit) => limit,
            Some(_) => return Err(malformed("limit", format!("must be 1 to {MAX_LIMIT}"))),
        };
        let job = match self.catalogue.get(id).await? {
            Some(job) if &job.owner == owner => job,
            _ => return Err(JobsError::NotFound),
        };
        let schedule = stored_schedule(&job)?;
        let (instants, more) = match &schedule {
            Some(schedule) => ledger::instants_in(schedule, from, to, limit),
            None => (Vec::new(), false),
        };
        let page_end = if more { instants.last().copied().unwrap_or(to) } else { to };
        let (runs, complete_until) = self.runs(&job.id, from, page_end).await?;
        let more = more || complete_until < page_end;
        let instants: Vec<_> = instants.into_iter().filter(|t| *t <= complete_until).collect();
        Ok(ledger::account(&job, schedule.as_ref(), &instants, more, &runs, complete_until, now))
    }

    /// The job's runs keyed from `from` to `until`, oldest first, and the instant up to which
    /// they are complete (`until`, unless [`MAX_RUNS_READ`] ran out first).
    async fn runs(
        &self,
        job_id: &JobId,
        from: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> JobsResult<(Vec<Run>, DateTime<Utc>)> {
        // Keys sort by instant; every key of `from` sorts after this one.
        let mut after = RunKey::scheduled(from - Duration::seconds(1));
        let mut runs: Vec<Run> = Vec::new();
        loop {
            let read = self.history.after(job_id, &after, until, RUNS_PER_READ).await?;
            let last_page = read.len() < RUNS_PER_READ as usize;
            runs.extend(read);
            match runs.last() {
                _ if last_page => return Ok((runs, until)),
                Some(last) if runs.len() >= MAX_RUNS_READ => {
                    // Complete up to the second before the last run's: its second may hold more.
                    let complete = last.key.instant - Duration::seconds(1);
                    runs.retain(|r| r.key.instant <= complete);
                    return Ok((runs, complete.max(from)));
                }
                Some(last) => after = last.key.clone(),
                None => return Ok((runs, until)),
            }
        }
    }
}

/// The range a query asks for: `[from, to]`, defaulting to the 24 hours before now, or after
/// `from`, or before `to`.
fn range(query: &LedgerQuery, now: DateTime<Utc>) -> JobsResult<(DateTime<Utc>, DateTime<Utc>)> {
    let (from, to) = match (query.from, query.to) {
        (Some(from), Some(to)) => (from, to),
        (Some(from), None) => (from, from + DEFAULT_RANGE),
        (None, Some(to)) => (to - DEFAULT_RANGE, to),
        (None, None) => (now - DEFAULT_RANGE, now),
    };
    if to < from {
        return Err(malformed("to", "must not be before from".into()));
    }
    if to - from > MAX_RANGE {
        return Err(malformed("to", "the range may span at most 7 days; ask for it in parts".into()));
    }
    if from < DateTime::UNIX_EPOCH {
        return Err(malformed("from", "must be 1970-01-01T00:00:00Z or later".into()));
    }
    Ok((from, to))
}

/// A query value out of its bounds: the request's own field (400 at the API).
fn malformed(field: &str, reason: String) -> JobsError {
    JobsError::Malformed(ValidationError::new(field, reason))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap_or(DateTime::UNIX_EPOCH)
    }

    #[test]
    fn a_range_defaults_to_a_day_and_spans_at_most_a_week() {
        let now = at("2026-11-22T12:00:00Z");
        let q = |from: Option<&str>, to: Option<&str>| LedgerQuery {
            from: from.map(at),
            to: to.map(at),
            limit: None,
        };
        assert_eq!(range(&q(None, None), now).ok(), Some((now - DEFAULT_RANGE, now)));
        let from = at("2026-11-20T00:00:00Z");
        assert_eq!(
            range(&q(Some("2026-11-20T00:00:00Z"), None), now).ok(),
            Some((from, from + DEFAULT_RANGE))
        );
        let field = |r: JobsResult<_>| match r {
            Err(JobsError::Malformed(e)) => e.field,
            _ => String::new(),
        };
        assert_eq!(field(range(&q(Some("2026-11-20T00:00:00Z"), Some("2026-11-19T00:00:00Z")), now)), "to");
        assert_eq!(field(range(&q(Some("2026-11-01T00:00:00Z"), Some("2026-11-08T00:00:01Z")), now)), "to");
        assert!(range(&q(Some("2026-11-01T00:00:00Z"), Some("2026-11-08T00:00:00Z")), now).is_ok());
    }
}
