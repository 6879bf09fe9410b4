//! The instant ledger use case: a job's scheduled instants in a range and what became of each,
//! read from the job and its runs and accounted by [`sundial_domain::ledger`].

use crate::jobs::{JobsError, JobsResult};
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use sundial_domain::clock::Clock;
use sundial_domain::job::{Job, JobId, Owner};
use sundial_domain::ledger::{
    self, DEFAULT_LIMIT, DEFAULT_RANGE, Ledger, MAX_LIMIT, MAX_RANGE, Upstream, UpstreamAt,
};
use sundial_domain::ports::store::{Catalogue, RunHistory};
use sundial_domain::run::{Run, RunId, RunKey, RunState};
use sundial_domain::schedule::Schedule;
use sundial_domain::validation::{ValidationError, stored_schedule};

/// Runs read per query of the history.
const RUNS_PER_READ: u32 = 500;

/// The most runs one page reads: its scheduled instants' runs, and manual runs besides. A run
/// item holds up to ten attempts' outputs and errors (about 50 KB): 1,500 of them stay near
/// 75 MB in a 256 MB function.
const MAX_RUNS_READ: usize = MAX_LIMIT + RUNS_PER_READ as usize;

/// The most parents' runs one page of a child job's ledger reads by key (each is a run item,
/// like those above).
const MAX_UPSTREAM_READS: usize = 500;

/// The most jobs above a child its schedule is looked for through: a workflow deeper than this
/// has no ledger of instants (its runs are still listed).
const MAX_ANCESTORS: usize = 20;

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
        let schedule = self.schedule_of(&job).await?;
        let (instants, more) = match &schedule {
            Some(schedule) => ledger::instants_in(schedule, from, to, limit),
            None => (Vec::new(), false),
        };
        let page_end = if more { instants.last().copied().unwrap_or(to) } else { to };
        let (runs, complete_until) = self.runs(&job.id, from, page_end).await?;
        let more = more || complete_until < page_end;
        let mut instants: Vec<_> = instants.into_iter().filter(|t| *t <= complete_until).collect();
        let (upstream, until) = self.upstream(&job, &mut instants, &runs, complete_until, now).await?;
        let more = more || until < complete_until;
        Ok(ledger::account(&job, schedule.as_ref(), &instants, more, &runs, &upstream, until, now))
    }

    /// The schedule a job's instants come from: its own, or for a job run after others, its
    /// workflow root's (a child's instants are its parents', and its parents' roots share their
    /// schedule), found up the first parent of each job. `None` if the chain breaks (a parent
    /// deleted) or is longer than a workflow may be.
    async fn schedule_of(&self, job: &Job) -> JobsResult<Option<Schedule>> {
        let mut current = job.clone();
        for _ in 0..=MAX_ANCESTORS {
            if let Some(schedule) = stored_schedule(&current)? {
                return Ok(Some(schedule));
            }
            let Some(parent) = current.parents().into_iter().next() else { return Ok(None) };
            match self.catalogue.get(&parent).await? {
                Some(parent) => current = parent,
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// For a job run after others: its parents' runs at the past instants it has no run for,
    /// read by key, at most [`MAX_UPSTREAM_READS`] a page; `instants` is cut where they run out,
    /// and the instant the page is complete to is returned with them.
    async fn upstream(
        &self,
        job: &Job,
        instants: &mut Vec<DateTime<Utc>>,
        runs: &[Run],
        until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> JobsResult<(UpstreamAt, DateTime<Utc>)> {
        let parents = job.parents();
        if parents.is_empty() {
            return Ok((UpstreamAt::new(), until));
        }
        let names: BTreeMap<JobId, String> = self
            .catalogue
            .get_many(&parents)
            .await?
            .into_iter()
            .map(|p| (p.id.clone(), p.document.name))
            .collect();
        let has_run: BTreeSet<DateTime<Utc>> =
            runs.iter().filter(|r| r.key.manual.is_none()).map(|r| r.key.instant).collect();
        let lacking: Vec<DateTime<Utc>> =
            instants.iter().copied().filter(|t| *t <= now && !has_run.contains(t)).collect();
        let per_page = MAX_UPSTREAM_READS / parents.len();
        let mut until = until;
        if let Some(&cut) = lacking.get(per_page) {
            // The first lacking instant past the reads' bound starts the next page.
            until = cut - Duration::seconds(1);
            instants.retain(|t| *t <= until);
        }
        let read: Vec<RunId> = lacking
            .iter()
            .take(per_page)
            .flat_map(|t| parents.iter().map(|p| RunId::new(p.clone(), RunKey::scheduled(*t))))
            .collect();
        let found: BTreeMap<(JobId, DateTime<Utc>), RunState> = self
            .history
            .get_many(&read)
            .await?
            .into_iter()
            .map(|r| ((r.job_id.clone(), r.key.instant), r.state))
            .collect();
        let upstream = lacking
            .iter()
            .take(per_page)
            .map(|t| {
                let at = parents.iter().map(|p| Upstream {
                    parent: names.get(p).cloned().unwrap_or_else(|| p.to_string()),
                    state: found.get(&(p.clone(), *t)).copied(),
                });
                (*t, at.collect())
            })
            .collect();
        Ok((upstream, until))
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
