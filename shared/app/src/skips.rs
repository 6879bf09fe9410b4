//! Skipping instants of a job's schedule on request, without pausing it, and taking a skip back
//! before its instant is due. The job keeps the skips it was asked for ([`Skip`]); the worker
//! skips a skipped instant's run at its start (a run claimed ahead included), and the preview and
//! the ledger show them.

use crate::audit::Recording;
use crate::jobs::{JobsError, JobsResult};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::audit::Stamp;
use sundial_domain::clock::Clock;
use sundial_domain::job::{Job, JobId, MAX_SKIPS, Owner, SKIPS_KEPT_FOR, Skip};
use sundial_domain::ports::store::{Catalogue, Raced, until_won};
use sundial_domain::validation::{ValidationError, stored_schedule};

/// Writes of a job retried when they lose to another change, at most.
const WRITE_ATTEMPTS: usize = 3;

/// Which instants to skip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipAsk {
    /// The next N instants from now (1 to [`MAX_SKIPS`]).
    Next(usize),
    /// These instants of the schedule, each still ahead.
    Instants(Vec<DateTime<Utc>>),
}

/// The skips of jobs' instants.
#[derive(Debug, Clone)]
pub struct Skips {
    catalogue: Arc<dyn Catalogue>,
    clock: Arc<dyn Clock>,
    recording: Recording,
}

impl Skips {
    pub fn new(catalogue: Arc<dyn Catalogue>, clock: Arc<dyn Clock>, recording: Recording) -> Self {
        Skips { catalogue, clock, recording }
    }

    /// These use cases acting for the request `stamp` names: each change is written with its
    /// audit record (the instants skipped, before and after).
    pub fn acting(&self, stamp: Arc<Stamp>) -> Skips {
        Skips { recording: self.recording.by(stamp), ..self.clone() }
    }

    /// Skips the instants `ask` names, as asked by `by`; the job with its skips. A job without a
    /// schedule, a count out of bounds, an instant not of the schedule or already due, or more
    /// than [`MAX_SKIPS`] skips in all is `Invalid`, naming the field, and changes nothing.
    pub async fn skip(&self, owner: &Owner, id: &JobId, ask: &SkipAsk, by: &str) -> JobsResult<Job> {
        self.amend(owner, id, |job, now| {
            let instants = instants_asked(job, ask, now)?;
            let mut skips: Vec<Skip> = kept(job, now);
            for at in instants {
                if !skips.iter().any(|s| s.at == at) {
                    skips.push(Skip { at, by: Some(by.to_string()), asked_at: now });
                }
            }
            if skips.len() > MAX_SKIPS {
                let reason = format!("a job holds at most {MAX_SKIPS} skips of instants ahead");
                return Err(ValidationError::new(field_of(ask), reason).into());
            }
            skips.sort_by_key(|s| s.at);
            Ok(skips)
        })
        .await
    }

    /// Takes back the skip of `instant` (`None`: every skip of an instant not yet due). An
    /// instant already due, or not skipped, is `Invalid`, naming `instant`.
    pub async fn unskip(&self, owner: &Owner, id: &JobId, instant: Option<DateTime<Utc>>) -> JobsResult<Job> {
        self.amend(owner, id, |job, now| {
            let mut skips = kept(job, now);
            match instant {
                None => skips.retain(|s| s.at <= now),
                Some(at) if at <= now => {
                    return Err(ValidationError::new("instant", "is already due: its skip stands").into());
                }
                Some(at) => {
                    let before = skips.len();
                    skips.retain(|s| s.at != at);
                    if skips.len() == before {
                        return Err(ValidationError::new("instant", "is not skipped").into());
                    }
                }
            }
            Ok(skips)
        })
        .await
    }

    /// Reads the owner's job, gives it the skips `decide` makes of it as of now, and writes it
    /// under its version (read again and decided again when another change won).
    async fn amend(
        &self,
        owner: &Owner,
        id: &JobId,
        decide: impl Fn(&Job, DateTime<Utc>) -> JobsResult<Vec<Skip>>,
    ) -> JobsResult<Job> {
        let decide = &decide;
        let won = until_won(WRITE_ATTEMPTS, || async move {
            let before = match self.catalogue.get(id).await? {
                Some(job) if &job.owner == owner => job,
                _ => return Err(JobsError::NotFound),
            };
            let now = self.clock.now();
            let skips = decide(&before, now)?;
            let after = Job { skips, version: before.version + 1, updated_at: now, ..before.clone() };
            let instants =
                |job: &Job| serde_json::json!({"skips": job.skips.iter().map(|s| s.at).collect::<Vec<_>>()});
            let record = self
                .recording
                .record(owner, now, crate::jobs::job_target(&after))
                .map(|r| r.of_job(&after.id).changing(&instants(&before), &instants(&after)));
            Ok(self.catalogue.update(&before, &after, record.as_ref()).await.raced()?.map(|()| after))
        })
        .await?;
        won.ok_or(JobsError::Contended)
    }
}

/// The job's skips still worth keeping at `now`: those whose instant is not long past.
fn kept(job: &Job, now: DateTime<Utc>) -> Vec<Skip> {
    job.skips.iter().filter(|s| s.at > now - SKIPS_KEPT_FOR).cloned().collect()
}

fn field_of(ask: &SkipAsk) -> &'static str {
    match ask {
        SkipAsk::Next(_) => "next",
        SkipAsk::Instants(_) => "instants",
    }
}

/// The instants `ask` names for `job`, checked.
fn instants_asked(job: &Job, ask: &SkipAsk, now: DateTime<Utc>) -> JobsResult<Vec<DateTime<Utc>>> {
    let Some(schedule) = stored_schedule(job)? else {
        return Err(ValidationError::new("job", "has no schedule of its own to skip instants of").into());
    };
    match ask {
        SkipAsk::Next(n) if (1..=MAX_SKIPS).contains(n) => {
            let first = schedule.first_at_or_after(now);
            let mut instants: Vec<DateTime<Utc>> = first.into_iter().collect();
            instants.extend(first.map(|f| schedule.upcoming(f, n - 1)).unwrap_or_default());
            Ok(instants)
        }
        SkipAsk::Next(_) => Err(ValidationError::new("next", format!("must be 1 to {MAX_SKIPS}")).into()),
        SkipAsk::Instants(list) if list.is_empty() || list.len() > MAX_SKIPS => {
            Err(ValidationError::new("instants", format!("must list 1 to {MAX_SKIPS} instants")).into())
        }
        SkipAsk::Instants(list) => {
            for (i, at) in list.iter().enumerate() {
                let field = format!("instants[{i}]");
                if *at <= now {
                    return Err(ValidationError::new(field, "is already due").into());
                }
                if schedule.next_after(*at - chrono::Duration::seconds(1)) != Some(*at) {
                    return Err(ValidationError::new(field, "is not an instant of the job's schedule").into());
                }
            }
            Ok(list.clone())
        }
    }
}
