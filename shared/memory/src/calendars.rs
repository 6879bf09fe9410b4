//! Named calendars in memory: [`MemoryCalendarStore`], the [`CalendarStore`] that behaves as
//! the calendars' items in the DynamoDB jobs table do (`sundial_aws::dynamo::calendars`): one
//! record per owner and name, created only if absent and while the owner has fewer than
//! [`MAX_CALENDARS_PER_OWNER`], replaced and deleted only under the version read, kept through
//! its JSON form; links are a record of their own beside it, with their own version.

use crate::audit::MemoryAuditTrail;
use crate::guard::lock;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Mutex;
use sundial_domain::audit::AuditRecord;
use sundial_domain::group::{Link, Links};
use sundial_domain::named_calendar::{MAX_CALENDARS_PER_OWNER, NamedCalendar};
use sundial_domain::ports::store::{CalendarStore, StoreError, StoreResult};

/// Named calendars in memory, by (owner, name).
#[derive(Debug, Default)]
pub struct MemoryCalendarStore {
    calendars: Mutex<BTreeMap<(String, String), (NamedCalendar, Links)>>,
    audit: MemoryAuditTrail,
}

/// A link's time as stored: to the millisecond.
fn stored_at(at: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(at.timestamp_millis()).unwrap_or(at)
}

impl MemoryCalendarStore {
    pub fn new() -> Self {
        MemoryCalendarStore::default()
    }

    /// This store, writing the records of its changes into `trail` (shared with the others).
    pub fn recording_to(mut self, trail: MemoryAuditTrail) -> Self {
        self.audit = trail;
        self
    }
}

#[async_trait]
impl CalendarStore for MemoryCalendarStore {
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<NamedCalendar>> {
        Ok(lock(&self.calendars).get(&(owner.to_string(), name.to_string())).map(|(c, _)| c.clone()))
    }

    async fn list(&self, owner: &str) -> StoreResult<Vec<NamedCalendar>> {
        let calendars = lock(&self.calendars);
        Ok(calendars.iter().filter(|((o, _), _)| o == owner).map(|(_, (c, _))| c.clone()).collect())
    }

    async fn put(
        &self,
        calendar: &NamedCalendar,
        expected: Option<u64>,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let mut calendars = lock(&self.calendars);
        let key = (calendar.owner.clone(), calendar.name.clone());
        match (calendars.get(&key), expected) {
            (None, None) => {
                let owned = calendars.keys().filter(|(owner, _)| *owner == calendar.owner).count();
                if owned >= MAX_CALENDARS_PER_OWNER {
                    return Err(StoreError::QuotaExceeded(MAX_CALENDARS_PER_OWNER as u32));
                }
            }
            (Some(_), None) => return Err(StoreError::Conflict),
            (None, Some(_)) => return Err(StoreError::NotFound),
            (Some((stored, _)), Some(version)) if stored.version != version => {
                return Err(StoreError::Conflict);
            }
            (Some(_), Some(_)) => {}
        }
        let stored = serde_json::to_string(calendar)
            .and_then(|text| serde_json::from_str::<NamedCalendar>(&text))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let links = calendars.remove(&key).map(|(_, links)| links).unwrap_or_default();
        calendars.insert(key, (stored, links));
        self.audit.append(audit);
        Ok(())
    }

    async fn delete(
        &self,
        owner: &str,
        name: &str,
        version: u64,
        links_version: u64,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let mut calendars = lock(&self.calendars);
        let key = (owner.to_string(), name.to_string());
        match calendars.get(&key) {
            None => Err(StoreError::NotFound),
            Some((stored, links)) if stored.version != version || links.version != links_version => {
                Err(StoreError::Conflict)
            }
            Some(_) => {
                calendars.remove(&key);
                self.audit.append(audit);
                Ok(())
            }
        }
    }

    async fn links(&self, owner: &str, name: &str) -> StoreResult<Links> {
        let calendars = lock(&self.calendars);
        Ok(calendars.get(&(owner.to_string(), name.to_string())).map(|(_, l)| l.clone()).unwrap_or_default())
    }

    async fn link(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()> {
        let mut calendars = lock(&self.calendars);
        let (_, links) =
            calendars.get_mut(&(owner.to_string(), name.to_string())).ok_or(StoreError::NotFound)?;
        links.jobs.insert(job.to_string(), Link { at: stored_at(at) });
        links.version += 1;
        Ok(())
    }

    async fn unlink_stale(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()> {
        let mut calendars = lock(&self.calendars);
        if let Some((_, links)) = calendars.get_mut(&(owner.to_string(), name.to_string()))
            && links.jobs.get(job).is_some_and(|link| link.at == stored_at(at))
        {
            links.jobs.remove(job);
            links.version += 1;
        }
        Ok(())
    }

    async fn unlink(&self, owner: &str, name: &str, job: &str) -> StoreResult<()> {
        let mut calendars = lock(&self.calendars);
        if let Some((_, links)) = calendars.get_mut(&(owner.to_string(), name.to_string()))
            && links.jobs.remove(job).is_some()
        {
            links.version += 1;
        }
        Ok(())
    }
}
