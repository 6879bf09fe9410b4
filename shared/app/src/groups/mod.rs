//! Concurrency groups as their owner manages them: create or change a group's limit, read it
//! with its running and waiting counts, delete it once no job names it; and the links that keep
//! "no job names it" exact. A job's create or edit links it to its group before the job is
//! written (the link fails if the group is gone, so a job never names a deleted group); a delete
//! of the group is fenced by the version the links move. The slots themselves are [`slots`]'s.

pub mod slots;

use crate::audit::Recording;
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use std::sync::Arc;
use sundial_domain::audit::{AuditRecord, Stamp, Target, TargetKind};
use sundial_domain::clock::Clock;
use sundial_domain::group::{self, Group, GroupDocument, Links, slot_is_held};
use sundial_domain::job::{JobId, Owner};
use sundial_domain::ports::store::{Catalogue, GroupStore, Race, Raced, RunHistory, StoreError, until_won};
use sundial_domain::run::RunId;
use sundial_domain::validation::ValidationError;

/// Why a group operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupsError {
    /// A value Sundial cannot accept (422 at the API).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error("group not found")]
    NotFound,
    /// Deleting a group jobs still name: they are named.
    #[error("jobs name this group: {}; change their group first", .0.join(", "))]
    InUse(Vec<String>),
    #[error("the group kept changing while this change was applied; retry")]
    Contended,
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for GroupsError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => GroupsError::NotFound,
            other => GroupsError::Store(other),
        }
    }
}

/// A group as its owner sees it: its limit and how it is used right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    pub name: String,
    pub max_running: u32,
    /// Attempts holding a slot, checked against their runs.
    pub running: usize,
    /// Runs waiting for a slot.
    pub waiting: usize,
    /// The jobs that name the group.
    pub jobs: Vec<JobId>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Changes of one group retried on a concurrent change.
const ATTEMPTS: usize = 8;

/// The group use cases.
#[derive(Debug, Clone)]
pub struct Groups {
    groups: Arc<dyn GroupStore>,
    catalogue: Arc<dyn Catalogue>,
    history: Arc<dyn RunHistory>,
    clock: Arc<dyn Clock>,
    recording: Recording,
}

fn name_error(name: &str) -> GroupsError {
    GroupsError::Invalid(ValidationError::new(
        "name",
        format!("`{name}` must be 1-{} characters of letters, digits, '-', '_' and '.'", group::MAX_NAME_LEN),
    ))
}

impl Groups {
    pub fn new(
        groups: Arc<dyn GroupStore>,
        catalogue: Arc<dyn Catalogue>,
        history: Arc<dyn RunHistory>,
        clock: Arc<dyn Clock>,
        recording: Recording,
    ) -> Self {
        Groups { groups, catalogue, history, clock, recording }
    }

    /// These use cases acting for the request `stamp` names: each change is written with its
    /// audit record.
    pub fn acting(&self, stamp: Arc<Stamp>) -> Groups {
        Groups { recording: self.recording.by(stamp), ..self.clone() }
    }

    /// The record of a change of the owner's group `name` at `at`, its limit from `old` to `new`.
    fn record(
        &self,
        owner: &str,
        name: &str,
        at: DateTime<Utc>,
        old: Option<u32>,
        new: Option<u32>,
    ) -> Option<AuditRecord> {
        let target = Target { kind: TargetKind::Group, id: name.to_string(), name: Some(name.to_string()) };
        let limit = |max: Option<u32>| {
            max.map_or_else(|| serde_json::json!({}), |m| serde_json::json!({"max_running": m}))
        };
        Some(self.recording.record(owner, at, target)?.changing(&limit(old), &limit(new)))
    }

    /// Creates the group, or sets its limit. Lowering the limit below the attempts running lets
    /// them finish; no new one starts until fewer run than the new limit.
    pub async fn put(
        &self,
        owner: &Owner,
        name: &str,
        document: &GroupDocument,
    ) -> Result<GroupView, GroupsError> {
        if !group::valid_name(name) {
            return Err(name_error(name));
        }
        if document.max_running == 0 || document.max_running > group::MAX_RUNNING {
            return Err(GroupsError::Invalid(ValidationError::new(
                "max_running",
                format!("must be between 1 and {}", group::MAX_RUNNING),
            )));
        }
        let put = until_won(ATTEMPTS, || async move {
            let now = self.clock.now();
            let written = match self.groups.get(owner, name).await? {
                None => {
                    let group = Group::new(owner, name, document.max_running, now);
                    let record = self.record(owner, name, now, None, Some(group.max_running));
                    self.groups.put(&group, None, record.as_ref()).await.map(|()| group)
                }
                Some(before) if before.max_running == document.max_running => Ok(before),
                Some(before) => {
                    let after = Group {
                        max_running: document.max_running,
                        version: before.version + 1,
                        updated_at: now,
                        ..before.clone()
                    };
                    let record =
                        self.record(owner, name, now, Some(before.max_running), Some(after.max_running));
                    self.groups.put(&after, Some(before.version), record.as_ref()).await.map(|()| after)
                }
            };
            match written {
                Ok(group) => Ok(Race::Won(group)),
                // Changed, or deleted, since read: read it again.
                Err(StoreError::Conflict | StoreError::NotFound) => Ok(Race::Lost),
                Err(e) => Err(GroupsError::from(e)),
            }
        });
        let group = put.await?.ok_or(GroupsError::Contended)?;
        self.view(group).await
    }

    /// The group; a name no group can have is simply not found.
    pub async fn get(&self, owner: &Owner, name: &str) -> Result<GroupView, GroupsError> {
        if !group::valid_name(name) {
            return Err(GroupsError::NotFound);
        }
        let group = self.groups.get(owner, name).await?.ok_or(GroupsError::NotFound)?;
        self.view(group).await
    }

    /// Deletes the group; refused while a job names it (its links checked against the jobs,
    /// so a link left by a create that failed does not keep the group forever).
    pub async fn delete(&self, owner: &Owner, name: &str) -> Result<(), GroupsError> {
        if !group::valid_name(name) {
            return Err(GroupsError::NotFound);
        }
        let deleted = until_won(ATTEMPTS, || async move {
            let group = self.groups.get(owner, name).await?.ok_or(GroupsError::NotFound)?;
            let links = self.links(&group).await?;
            let users = self.users(&group, &links).await?;
            if !users.is_empty() {
                return Err(GroupsError::InUse(users));
            }
            let record = self.record(owner, name, self.clock.now(), Some(group.max_running), None);
            match self.groups.delete(owner, name, group.version, links.version, record.as_ref()).await {
                // Gone under this very delete (a retried request whose first try applied).
                Ok(()) | Err(StoreError::NotFound) => Ok(Race::Won(())),
                other => Ok(other.raced()?),
            }
        });
        deleted.await?.ok_or(GroupsError::Contended)
    }

    /// Records that `job` names the group `name` of `owner`, before the job is written; an
    /// error naming `group` if there is no such group. A link is (re)dated by every create or
    /// edit that needs it: it keeps the group from being deleted while that write is under way.
    /// It is a record apart from the group's ledger, which admissions rewrite.
    pub async fn link(&self, owner: &Owner, name: &str, job: &JobId) -> Result<(), GroupsError> {
        match self.groups.link(owner, name, job.as_str(), self.clock.now()).await {
            Ok(()) => Ok(()),
            Err(StoreError::NotFound) => Err(GroupsError::Invalid(ValidationError::new(
                "group",
                format!("there is no group `{name}`; create it first with PUT /v1/groups/{name}"),
            ))),
            Err(StoreError::Conflict) => Err(GroupsError::Contended),
            Err(e) => Err(e.into()),
        }
    }

    /// Forgets that `job` names the group (after the job was written without it, or deleted).
    /// Best effort: a link left behind is ignored by a delete of the group.
    pub async fn unlink(&self, owner: &Owner, name: &str, job: &JobId) {
        if let Err(e) = self.groups.unlink(owner, name, job.as_str()).await {
            tracing::warn!(group = %name, job_id = %job, error = %e, "group link left behind");
        }
    }

    /// The group's links, and those an earlier version kept in its ledger.
    async fn links(&self, group: &Group) -> Result<Links, GroupsError> {
        let mut links = self.groups.links(&group.owner, &group.name).await?;
        for (job, link) in &group.jobs {
            links.jobs.entry(job.clone()).or_insert_with(|| link.clone());
        }
        Ok(links)
    }

    /// The jobs that keep `group` from being deleted, by name (or id while not written yet):
    /// those that exist and name it, and those linked moments ago (see [`Links::users`]).
    /// `links` includes the links kept in the ledger by earlier versions.
    async fn users(&self, group: &Group, links: &Links) -> Result<Vec<String>, GroupsError> {
        let ids: Vec<JobId> = links.jobs.keys().filter_map(|id| JobId::parse(id)).collect();
        let jobs = self.catalogue.get_many(&ids).await?;
        let naming: Vec<_> = jobs
            .into_iter()
            .filter(|job| {
                job.owner == group.owner && job.document.group.as_deref() == Some(group.name.as_str())
            })
            .collect();
        let named: BTreeSet<String> = naming.iter().map(|job| job.id.to_string()).collect();
        let mut users: Vec<String> = links
            .users(&named, self.clock.now())
            .into_iter()
            .map(|id| naming.iter().find(|j| j.id.as_str() == id).map_or(id, |j| j.document.name.clone()))
            .collect();
        users.sort();
        Ok(users)
    }

    async fn view(&self, group: Group) -> Result<GroupView, GroupsError> {
        let now = self.clock.now();
        let ids: Vec<RunId> = group.slots.keys().filter_map(|id| RunId::parse(id)).collect();
        let runs = if ids.is_empty() { Vec::new() } else { self.history.get_many(&ids).await? };
        let running = group
            .slots
            .iter()
            .filter(|(id, slot)| slot_is_held(slot, runs.iter().find(|r| r.id().to_string() == **id), now))
            .count();
        let waiting = group.live_waiters(now).count();
        let jobs = self.links(&group).await?.jobs.keys().filter_map(|id| JobId::parse(id)).collect();
        Ok(GroupView {
            name: group.name,
            max_running: group.max_running,
            running,
            waiting,
            jobs,
            created_at: group.created_at,
            updated_at: group.updated_at,
        })
    }
}
