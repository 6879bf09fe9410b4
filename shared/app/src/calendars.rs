//! Named calendars as their owner manages them: create or replace one (`If-Match` for a
//! version), read and list them, delete one once no job names it; and the copy of an edit into
//! every job that names the calendar. An edit writes the calendar first and then reads its links,
//! each job refreshed through [`Jobs::refresh_calendars`] (an edit of the job, from the next
//! unclaimed instant on); a job's own write links it before reading the calendar and checks the
//! calendar again after, so no job keeps an old copy (see [`Jobs`]). A request lost half-way is
//! finished by sending it again: the same body is a replay, whatever its `If-Match`, that copies
//! the calendar into the jobs still behind.

use crate::audit::Recording;
use crate::jobs::{Jobs, JobsError};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use std::sync::Arc;
use sundial_domain::audit::{AuditRecord, Stamp, Target, TargetKind};
use sundial_domain::calendar::NamedCalendarDocument;
use sundial_domain::clock::Clock;
use sundial_domain::group::{self, Links};
use sundial_domain::job::{JobId, Owner};
use sundial_domain::named_calendar::{self, NamedCalendar};
use sundial_domain::ports::store::{CalendarStore, Catalogue, Race, Raced, StoreError, until_won};
use sundial_domain::validation::{self, ValidationError};

/// Why a calendar operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarsError {
    /// A value Sundial cannot accept (422 at the API).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("calendar not found")]
    NotFound,
    /// `If-Match` named another version than the current one (`None`: there is no calendar).
    #[error("the calendar is at version {}, not the one in If-Match", .current.map_or("none".to_string(), |v| v.to_string()))]
    VersionMismatch { current: Option<u64> },
    /// Deleting a calendar jobs still name: they are named.
    #[error("jobs name this calendar: {}; change their schedules first", .0.join(", "))]
    InUse(Vec<String>),
    #[error("the owner already has the maximum of {0} calendars")]
    QuotaExceeded(u32),
    /// Some jobs that name the calendar could not be given its edit yet (storage failed, or
    /// they are being written): sending the same request again finishes it.
    #[error("the calendar is saved at version {version}, but jobs still hold an older copy: {}; send the request again", .jobs.join(", "))]
    Unfinished { version: u64, jobs: Vec<String> },
    /// Jobs that name the calendar cannot take its edit (each with why): they keep their copy
    /// until they are changed.
    #[error("the calendar is saved at version {version}, but jobs cannot take it: {}; change them, then send the request again", .jobs.join("; "))]
    NotTaken { version: u64, jobs: Vec<String> },
    #[error("the calendar kept changing while this change was applied; retry")]
    Contended,
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for CalendarsError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => CalendarsError::NotFound,
            StoreError::QuotaExceeded(max) => CalendarsError::QuotaExceeded(max),
            other => CalendarsError::Store(other),
        }
    }
}

/// A job that names a calendar, and the version of it the job holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarUser {
    pub id: JobId,
    pub name: String,
    /// The version of the calendar the job's schedule was computed from.
    pub holds: Option<u64>,
}

/// A calendar as its owner sees it: the calendar and the jobs that name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarView {
    pub calendar: NamedCalendar,
    pub jobs: Vec<CalendarUser>,
}

impl CalendarUser {
    /// Whether the job's copy is older than `version` (a job holding a newer one took a later
    /// edit; one that no longer names the calendar holds none and is not behind).
    fn behind(&self, version: u64) -> bool {
        self.holds.is_some_and(|held| held < version)
    }
}

/// Jobs refreshed at once by an edit of their calendar.
const REFRESHES_AT_ONCE: usize = 8;

/// How long an edit of a calendar spends copying it into jobs before it answers: well inside the
/// API's 29 s, and the rest are copied by the same request sent again.
const COPY_BUDGET: std::time::Duration = std::time::Duration::from_secs(15);

/// What copying a calendar into its jobs left undone.
#[derive(Debug, Default)]
struct Undone {
    /// Jobs still behind (or being written) that a retry may bring up to date.
    retry: Vec<String>,
    /// Jobs that cannot take the calendar, with why.
    refused: Vec<String>,
}

/// Whether a put made the calendar or changed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Created,
    Replaced,
    /// The calendar already was as asked (a replay): nothing written but the jobs behind.
    Unchanged,
}

/// Changes of one calendar retried on a concurrent change.
const ATTEMPTS: usize = 8;

/// The calendar use cases.
#[derive(Debug, Clone)]
pub struct Calendars {
    calendars: Arc<dyn CalendarStore>,
    catalogue: Arc<dyn Catalogue>,
    jobs: Jobs,
    clock: Arc<dyn Clock>,
    recording: Recording,
}

fn name_error(name: &str) -> CalendarsError {
    CalendarsError::Invalid(ValidationError::new(
        "name",
        format!("`{name}` must be 1-{} characters of letters, digits, '-', '_' and '.'", group::MAX_NAME_LEN),
    ))
}

impl Calendars {
    pub fn new(
        calendars: Arc<dyn CalendarStore>,
        catalogue: Arc<dyn Catalogue>,
        jobs: Jobs,
        clock: Arc<dyn Clock>,
        recording: Recording,
    ) -> Self {
        Calendars { calendars, catalogue, jobs, clock, recording }
    }

    /// These use cases acting for the request `stamp` names: each change of a calendar is
    /// written with its audit record (its copies into jobs are Sundial's follow-up, not recorded).
    pub fn acting(&self, stamp: Arc<Stamp>) -> Calendars {
        Calendars { recording: self.recording.by(stamp), ..self.clone() }
    }

    /// The record of a change of the owner's calendar `name` at `at`, from `old` to `new`.
    fn record(
        &self,
        owner: &str,
        name: &str,
        at: DateTime<Utc>,
        old: Option<&NamedCalendarDocument>,
        new: Option<&NamedCalendarDocument>,
    ) -> Option<AuditRecord> {
        let target =
            Target { kind: TargetKind::Calendar, id: name.to_string(), name: Some(name.to_string()) };
        let value = |d: Option<&NamedCalendarDocument>| {
            d.and_then(|d| serde_json::to_value(d).ok()).unwrap_or_else(|| serde_json::json!({}))
        };
        Some(self.recording.record(owner, at, target)?.changing(&value(old), &value(new)))
    }

    /// Creates the calendar or replaces it (over `if_match`, when given), then copies it into
    /// every job that names it. A body equal to the stored calendar writes nothing and succeeds
    /// whatever `if_match`: it is a replay, and it finishes the copy into jobs still behind.
    pub async fn put(
        &self,
        owner: &Owner,
        name: &str,
        document: &NamedCalendarDocument,
        if_match: Option<u64>,
    ) -> Result<(CalendarView, Put), CalendarsError> {
        if !group::valid_name(name) {
            return Err(name_error(name));
        }
        validation::named_calendar(document)?;
        let put = until_won(ATTEMPTS, || async move {
            let now = self.clock.now();
            let before = self.calendars.get(owner, name).await?;
            let old = before.as_ref().map(|c| c.document.clone());
            let (after, expected, put) = match before {
                Some(before) if before.document == *document => {
                    return Ok(Race::Won((before, Put::Unchanged)));
                }
                _ if if_match.is_some() && if_match != before.as_ref().map(|c| c.version) => {
                    return Err(CalendarsError::VersionMismatch { current: before.map(|c| c.version) });
                }
                None => {
                    let created = NamedCalendar {
                        owner: owner.clone(),
                        name: name.to_string(),
                        document: document.clone(),
                        version: 1,
                        created_at: now,
                        updated_at: now,
                    };
                    (created, None, Put::Created)
                }
                Some(before) => {
                    let version = before.version;
                    let replaced = NamedCalendar {
                        document: document.clone(),
                        version: version + 1,
                        updated_at: now,
                        ..before
                    };
                    (replaced, Some(version), Put::Replaced)
                }
            };
            self.check_users(&after).await?;
            let record = self.record(owner, name, now, old.as_ref(), Some(&after.document));
            match self.calendars.put(&after, expected, record.as_ref()).await {
                Ok(()) => Ok(Race::Won((after, put))),
                // Made, changed or deleted since read: read it again.
                Err(StoreError::Conflict | StoreError::NotFound) => Ok(Race::Lost),
                Err(e) => Err(CalendarsError::from(e)),
            }
        });
        let (calendar, put) = put.await?.ok_or(CalendarsError::Contended)?;
        let version = calendar.version;
        let (view, undone) = self.copy_to_jobs(calendar).await?;
        if !undone.refused.is_empty() {
            return Err(CalendarsError::NotTaken { version, jobs: undone.refused });
        }
        if !undone.retry.is_empty() {
            return Err(CalendarsError::Unfinished { version, jobs: undone.retry });
        }
        Ok((view, put))
    }

    /// The calendar and the jobs that name it; a name no calendar can have is simply not found.
    pub async fn get(&self, owner: &Owner, name: &str) -> Result<CalendarView, CalendarsError> {
        if !group::valid_name(name) {
            return Err(CalendarsError::NotFound);
        }
        let calendar = self.calendars.get(owner, name).await?.ok_or(CalendarsError::NotFound)?;
        let links = self.calendars.links(owner, name).await?;
        let jobs = self.users(&calendar, &links).await?;
        Ok(CalendarView { calendar, jobs })
    }

    /// The owner's calendars, by name.
    pub async fn list(&self, owner: &Owner) -> Result<Vec<NamedCalendar>, CalendarsError> {
        Ok(self.calendars.list(owner).await?)
    }

    /// Deletes the calendar (under `if_match`, when given); refused while a job names it (its
    /// links checked against the jobs, so a link left by a create that failed does not keep the
    /// calendar forever).
    pub async fn delete(
        &self,
        owner: &Owner,
        name: &str,
        if_match: Option<u64>,
    ) -> Result<(), CalendarsError> {
        if !group::valid_name(name) {
            return Err(CalendarsError::NotFound);
        }
        let deleted = until_won(ATTEMPTS, || async move {
            let calendar = self.calendars.get(owner, name).await?.ok_or(CalendarsError::NotFound)?;
            if if_match.is_some_and(|expected| expected != calendar.version) {
                return Err(CalendarsError::VersionMismatch { current: Some(calendar.version) });
            }
            let links = self.calendars.links(owner, name).await?;
            let naming = self.users(&calendar, &links).await?;
            let named: BTreeSet<String> = naming.iter().map(|u| u.id.to_string()).collect();
            let mut users: Vec<String> = links
                .users(&named, self.clock.now())
                .into_iter()
                .map(|id| naming.iter().find(|u| u.id.as_str() == id).map_or(id, |u| u.name.clone()))
                .collect();
            if !users.is_empty() {
                users.sort();
                return Err(CalendarsError::InUse(users));
            }
            let record = self.record(owner, name, self.clock.now(), Some(&calendar.document), None);
            match self.calendars.delete(owner, name, calendar.version, links.version, record.as_ref()).await {
                // Gone under this very delete (a retried request whose first try applied).
                Ok(()) | Err(StoreError::NotFound) => Ok(Race::Won(())),
                other => Ok(other.raced()?),
            }
        });
        deleted.await?.ok_or(CalendarsError::Contended)
    }

    /// Refuses `calendar` if a job that names it could not take it (a union past its holidays'
    /// bound, say), naming the job: nothing is written.
    async fn check_users(&self, calendar: &NamedCalendar) -> Result<(), CalendarsError> {
        let links = self.calendars.links(&calendar.owner, &calendar.name).await?;
        let ids: Vec<JobId> = links.jobs.keys().filter_map(|id| JobId::parse(id)).collect();
        let naming = self.catalogue.get_many(&ids).await?.into_iter().filter(|job| {
            job.owner == calendar.owner && named_calendar::names(&job.document).contains(&calendar.name)
        });
        for job in naming {
            if let Err(e) = self.jobs.takes_calendar(&job, calendar) {
                let reason =
                    format!("job `{}` could not take it: {}: {}", job.document.name, e.field, e.reason);
                return Err(ValidationError::new("holidays", reason).into());
            }
        }
        Ok(())
    }

    /// Copies `calendar` into each job linked to it that names it and holds an older version,
    /// [`REFRESHES_AT_ONCE`] at a time for at most [`COPY_BUDGET`]; the view as it stands
    /// afterwards, and what is left undone. A job linked moments ago that is not written yet is
    /// undone too: its own write may have read the calendar before this edit, and it is
    /// checked again when the request is sent again.
    async fn copy_to_jobs(&self, calendar: NamedCalendar) -> Result<(CalendarView, Undone), CalendarsError> {
        use futures::StreamExt;
        let links = self.calendars.links(&calendar.owner, &calendar.name).await?;
        let mut jobs = self.users(&calendar, &links).await?;
        let named: BTreeSet<String> = jobs.iter().map(|u| u.id.to_string()).collect();
        let mut undone = Undone {
            retry: links
                .users(&named, self.clock.now())
                .into_iter()
                .filter(|id| !named.contains(id))
                .collect(),
            ..Undone::default()
        };
        let started = std::time::Instant::now();
        let version = calendar.version;
        let behind: Vec<(usize, JobId)> = jobs
            .iter()
            .enumerate()
            .filter(|(_, u)| u.behind(version))
            .map(|(i, u)| (i, u.id.clone()))
            .collect();
        let owner = &calendar.owner;
        let refreshes = behind.into_iter().map(|(i, id)| async move {
            if started.elapsed() > COPY_BUDGET {
                return (i, None);
            }
            (i, Some(self.jobs.refresh_calendars(owner, &id).await))
        });
        let results: Vec<_> =
            futures::stream::iter(refreshes).buffer_unordered(REFRESHES_AT_ONCE).collect().await;
        for (i, result) in results {
            let Some(user) = jobs.get_mut(i) else { continue };
            match result {
                Some(Ok(job)) => {
                    user.holds = named_calendar::held_versions(&job.document).get(&calendar.name).copied()
                }
                // Deleted meanwhile: it names nothing now.
                Some(Err(JobsError::NotFound)) => user.holds = None,
                Some(Err(JobsError::Invalid(e))) => {
                    undone.refused.push(format!("{} ({}: {})", user.name, e.field, e.reason));
                }
                Some(Err(e)) => {
                    tracing::warn!(calendar = %calendar.name, job_id = %user.id, error = %e, "a job keeps an older copy of its calendar");
                    undone.retry.push(user.name.clone());
                }
                None => undone.retry.push(user.name.clone()),
            }
        }
        undone.retry.sort();
        Ok((CalendarView { calendar, jobs }, undone))
    }

    /// The jobs linked to `calendar` that exist and name it, with the version each holds.
    async fn users(
        &self,
        calendar: &NamedCalendar,
        links: &Links,
    ) -> Result<Vec<CalendarUser>, CalendarsError> {
        let ids: Vec<JobId> = links.jobs.keys().filter_map(|id| JobId::parse(id)).collect();
        let mut users: Vec<CalendarUser> = self
            .catalogue
            .get_many(&ids)
            .await?
            .into_iter()
            .filter(|job| job.owner == calendar.owner)
            .filter(|job| named_calendar::names(&job.document).contains(&calendar.name))
            .map(|job| CalendarUser {
                holds: named_calendar::held_versions(&job.document).get(&calendar.name).copied(),
                id: job.id,
                name: job.document.name,
            })
            .collect();
        users.sort_by(|a, b| a.name.cmp(&b.name));
        // A link past its grace whose job is gone or no longer names the calendar is pruned
        // (only if it was not made again since): the links do not grow with every job that ever
        // named the calendar.
        let now = self.clock.now();
        let stale = links.jobs.iter().filter(|(id, link)| {
            now - link.at >= group::LINK_GRACE && !users.iter().any(|u| u.id.as_str() == id.as_str())
        });
        for (job, link) in stale {
            if let Err(e) = self.calendars.unlink_stale(&calendar.owner, &calendar.name, job, link.at).await {
                tracing::warn!(calendar = %calendar.name, job_id = %job, error = %e, "a stale calendar link was left");
            }
        }
        Ok(users)
    }
}
