//! Named calendars as their owner manages them: create or replace one (`If-Match` for a
//! version), read and list them, delete one once no job names it; and the copy of an edit into
//! every job that names the calendar. An edit writes the calendar first and then reads its links,
//! each job refreshed through [`Jobs::refresh_calendars`] (an edit of the job, from the next
//! unclaimed instant on); a job's own write links it before reading the calendar and checks the
//! calendar again after, so no job keeps an old copy (see [`Jobs`]). A request lost half-way is
//! finished by sending it again: the same body is a replay, whatever its `If-Match`, that copies
//! the calendar into the jobs still behind.

use crate::jobs::{Jobs, JobsError};
use std::collections::BTreeSet;
use std::sync::Arc;
use sundial_domain::clock::Clock;
use sundial_domain::group::{self, Links};
use sundial_domain::job::{JobId, Owner};
use sundial_domain::named_calendar::{self, NamedCalendar, NamedCalendarDocument};
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
    /// Some jobs that name the calendar could not be given its edit: sending the same request
    /// again finishes it.
    #[error("the calendar is saved at version {version}, but jobs still hold an older copy: {}; send the request again", .jobs.join(", "))]
    Unfinished { version: u64, jobs: Vec<String> },
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
    ) -> Self {
        Calendars { calendars, catalogue, jobs, clock }
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
            match self.calendars.put(&after, expected).await {
                Ok(()) => Ok(Race::Won((after, put))),
                // Made, changed or deleted since read: read it again.
                Err(StoreError::Conflict | StoreError::NotFound) => Ok(Race::Lost),
                Err(e) => Err(CalendarsError::from(e)),
            }
        });
        let (calendar, put) = put.await?.ok_or(CalendarsError::Contended)?;
        let view = self.copy_to_jobs(calendar).await?;
        let behind: Vec<String> = view
            .jobs
            .iter()
            .filter(|j| j.holds != Some(view.calendar.version))
            .map(|j| j.name.clone())
            .collect();
        if !behind.is_empty() {
            return Err(CalendarsError::Unfinished { version: view.calendar.version, jobs: behind });
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
            match self.calendars.delete(owner, name, calendar.version, links.version).await {
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

    /// Copies `calendar` into each job linked to it that names it and holds another version; the
    /// view as it stands afterwards. A job that could not be refreshed is left holding its copy,
    /// which the view shows.
    async fn copy_to_jobs(&self, calendar: NamedCalendar) -> Result<CalendarView, CalendarsError> {
        let links = self.calendars.links(&calendar.owner, &calendar.name).await?;
        let mut jobs = self.users(&calendar, &links).await?;
        for user in jobs.iter_mut().filter(|u| u.holds != Some(calendar.version)) {
            match self.jobs.refresh_calendars(&calendar.owner, &user.id).await {
                Ok(job) => {
                    user.holds = named_calendar::held_versions(&job.document).get(&calendar.name).copied()
                }
                // Deleted meanwhile: it names nothing now.
                Err(JobsError::NotFound) => user.holds = Some(calendar.version),
                Err(e) => {
                    tracing::warn!(calendar = %calendar.name, job_id = %user.id, error = %e, "a job keeps an older copy of its calendar");
                }
            }
        }
        Ok(CalendarView { calendar, jobs })
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
        Ok(users)
    }
}
