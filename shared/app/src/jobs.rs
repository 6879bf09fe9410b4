//! The job lifecycle: create, read, list, patch, pause, resume, delete, preview.
//!
//! Every use case checks the caller owns the job (another owner's job is "not found"), validates
//! before it writes, and keeps `next_run_at` in step with the schedule:
//! - a new job's next run is the schedule's first instant at or after creation (now, for a job
//!   without a schedule);
//! - an edit that changes the schedule recomputes it from now; any other edit leaves it alone
//!   (so it costs no index move);
//! - resuming skips the instants missed while paused, like a suspended CronJob;
//! - the `version` (the ETag) changes with every edit of the document.

use crate::audit::Recording;
use crate::claim::Claimer;
use crate::groups::{Groups, GroupsError};
use crate::ports::Ports;
use crate::workflow::{GraphView, WorkflowError, Workflows};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use std::sync::Arc;
use sundial_domain::audit::{AuditRecord, Stamp, Target, TargetKind};
use sundial_domain::clock::Clock;
use sundial_domain::entropy::Entropy;
use sundial_domain::events::has_endpoints;
use sundial_domain::fence;
use sundial_domain::job::{
    CatchupPolicy, ConcurrencyPolicy, Gap, GapCause, Job, JobDocument, JobId, MAX_PAUSE_DAYS,
    MAX_PAUSE_REASON_CHARS, Owner, PauseNote,
};
use sundial_domain::limits::{Limits, TargetAllowList};
use sundial_domain::named_calendar::{self, NamedCalendar};
use sundial_domain::page_token::PageTokens;
use sundial_domain::ports::store::{
    CalendarStore, Catalogue, FenceStore, Page, Race, Raced, RunHistory, RunWrites, StoreError, StoreResult,
    until_won,
};
use sundial_domain::ports::topics::{JobTopics, Subscription, TopicError};
use sundial_domain::run::{Run, RunId, RunKey, RunState};
use sundial_domain::schedule::{DstNote, Schedule, ceil_second};
use sundial_domain::validation::{self, Rules, ValidationError};
use sundial_domain::versions::{FieldChange, JobVersion};

/// Why a job operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobsError {
    /// A value Sundial cannot accept (422 at the API).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// A document that does not decode: wrong type, unknown field (400 at the API).
    #[error(transparent)]
    Malformed(ValidationError),
    #[error("job not found")]
    NotFound,
    /// `If-Match` named another version than the current one.
    #[error("the job is at version {current}, not the one in If-Match")]
    VersionMismatch { current: u64 },
    #[error("a job named `{0}` already exists")]
    NameTaken(String),
    #[error("the owner already has the maximum of {0} jobs")]
    QuotaExceeded(u32),
    #[error("the job kept changing while this edit was applied; retry")]
    Contended,
    /// `concurrency: forbid` and a run is active.
    #[error("run {0} is active and the job's concurrency policy is forbid")]
    RunActive(String),
    /// The run has already ended.
    #[error("the run has already ended ({0})")]
    RunEnded(String),
    /// A manual run or a backfill of a paused job: its runs would only be skipped.
    #[error("the job is paused; resume it to run it")]
    Paused,
    /// A version of the job's document that is not kept (never made, or older than the kept
    /// ones).
    #[error("version {0} of the job is not kept")]
    VersionNotKept(u64),
    /// Deleting a job other jobs run after: they are named.
    #[error("jobs run after this one: {}; remove it from their depends_on first", .0.join(", "))]
    HasChildren(Vec<String>),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for JobsError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => JobsError::NotFound,
            StoreError::NameTaken(name) => JobsError::NameTaken(name),
            StoreError::QuotaExceeded(max) => JobsError::QuotaExceeded(max),
            StoreError::BadCursor => {
                JobsError::Malformed(ValidationError::new("next", "is not a token from a previous page"))
            }
            other => JobsError::Store(other),
        }
    }
}

impl From<GroupsError> for JobsError {
    fn from(e: GroupsError) -> Self {
        match e {
            GroupsError::Invalid(v) => JobsError::Invalid(v),
            GroupsError::Contended | GroupsError::InUse(_) => JobsError::Contended,
            GroupsError::NotFound => {
                JobsError::Invalid(ValidationError::new("group", "there is no such group"))
            }
            GroupsError::Store(s) => s.into(),
        }
    }
}

impl From<WorkflowError> for JobsError {
    fn from(e: WorkflowError) -> Self {
        match e {
            WorkflowError::Invalid(v) => JobsError::Invalid(v),
            WorkflowError::Contended => JobsError::Contended,
            WorkflowError::Store(s) => s.into(),
        }
    }
}

pub type JobsResult<T> = Result<T, JobsError>;

/// The store's cursor in a caller's page token for the listing `scope`; a token this
/// deployment did not issue for it is the caller's mistake, named as `next`.
pub(crate) fn open_token(
    tokens: &PageTokens,
    scope: &str,
    token: Option<&str>,
) -> JobsResult<Option<String>> {
    token
        .map(|token| {
            tokens.open(scope, token).ok_or_else(|| {
                JobsError::Malformed(ValidationError::new("next", "is not a token from a previous page"))
            })
        })
        .transpose()
}

/// `page` with its store cursor sealed into a token for `scope`.
pub(crate) fn seal_page<T>(tokens: &PageTokens, scope: &str, page: Page<T>) -> Page<T> {
    Page { next: page.next.map(|cursor| tokens.seal(scope, &cursor)), items: page.items }
}

/// Jobs a filtered listing reads at most per request.
pub const FILTER_READ: usize = 1_000;

/// Which of an owner's jobs a listing shows: all of `tags` (each `key: value`), in `state`, of
/// `group`, whose name or description holds `q` (case aside).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    pub tags: Vec<(String, String)>,
    pub state: Option<JobState>,
    pub group: Option<String>,
    pub q: Option<String>,
}

/// A job's state as listings filter it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Not paused.
    Active,
    Paused,
    /// Its newest run ended FAILED or TIMED_OUT.
    Failing,
}

impl JobFilter {
    pub fn is_empty(&self) -> bool {
        *self == JobFilter::default()
    }

    /// The filter as a page token's scope: a token continues only the listing it was made for.
    fn scope(&self) -> String {
        let tags: Vec<String> = self.tags.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        format!("{tags:?}|{:?}|{:?}|{:?}", self.state, self.group, self.q)
    }
}

/// A kept version in brief: when it was made, and the fields it changed.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionSummary {
    pub version: u64,
    pub at: DateTime<Utc>,
    pub changed: Vec<String>,
}

/// A document as the API shows it (secrets as secret, calendars as named), as JSON.
fn redacted_value(document: &JobDocument) -> serde_json::Value {
    serde_json::to_value(named_calendar::written(&document.redacted())).unwrap_or_default()
}

/// A job as an audit record names it.
pub(crate) fn job_target(job: &Job) -> Target {
    Target { kind: TargetKind::Job, id: job.id.to_string(), name: Some(job.document.name.clone()) }
}

/// A run as an audit record names it.
pub(crate) fn run_target(run: &Run) -> Target {
    Target { kind: TargetKind::Run, id: run.id().to_string(), name: None }
}

/// What a manual run's own payload changes, as an audit record says it: that one was given, and
/// its size. Neither the payload nor a digest of it is kept (a digest of a small payload is
/// guessed back by hashing candidates, and the trail outlives the run's own retention).
fn run_input_changes(input: Option<&serde_json::Value>) -> Vec<FieldChange> {
    input
        .map(|input| {
            let bytes = serde_json::to_string(input).map_or(0, |text| text.len());
            let given = serde_json::json!({"given": true, "bytes": bytes});
            FieldChange { field: "payload".into(), old: None, new: Some(given) }
        })
        .into_iter()
        .collect()
}

/// A job due before the next tick plus this is claimed by the API itself.
const DUE_SOON_MARGIN: chrono::Duration = chrono::Duration::seconds(10);
/// Most instants one backfill claims.
pub const MAX_BACKFILL: usize = 1_000;
/// Backfilled runs are spread at this many per second.
pub const BACKFILL_PER_SECOND: usize = 10;

fn topic_error(e: TopicError) -> JobsError {
    match e {
        TopicError::Rejected { field, reason } => JobsError::Invalid(ValidationError::new(field, reason)),
        TopicError::Unavailable(reason) => JobsError::Store(StoreError::Unavailable(reason)),
    }
}

/// What identifies a request that may be retried: its `Idempotency-Key` and when that key was
/// first seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestKey {
    pub key: String,
    pub first_seen: DateTime<Utc>,
}

/// Largest `count` of a preview.
pub const MAX_PREVIEW: usize = 500;
/// Largest page of a listing.
pub const MAX_PAGE: u32 = 100;
/// Edits retried on a concurrent change when the caller gave no `If-Match`.
const EDIT_ATTEMPTS: usize = 3;

/// What an edit of a job is conditional on, and what it accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EditTerms {
    /// The version the edit is based on (`If-Match`): another is 412.
    pub if_match: Option<u64>,
    /// Make the edit even though a join below the job would stop running (its parents' instants
    /// no longer coincide); refused otherwise.
    pub break_joins: bool,
    /// What a pause says (why, who, until when): written on the pause the edit leaves the job
    /// in, even when it was paused already.
    pub pause: Option<PauseNote>,
}

/// What the job use cases are configured with.
#[derive(Debug, Clone)]
pub struct JobsSettings {
    /// Bounds on what a job document may hold.
    pub limits: Limits,
    /// Where targets (and notifications) may point.
    pub targets: TargetAllowList,
    /// Seals pagination tokens.
    pub page_tokens: PageTokens,
}

/// The job use cases, over the [`Catalogue`] of jobs.
#[derive(Debug, Clone)]
pub struct Jobs {
    catalogue: Arc<dyn Catalogue>,
    history: Arc<dyn RunHistory>,
    writes: Arc<dyn RunWrites>,
    clock: Arc<dyn Clock>,
    entropy: Arc<dyn Entropy>,
    limits: Limits,
    targets: TargetAllowList,
    claimer: Claimer,
    topics: Arc<dyn JobTopics>,
    page_tokens: PageTokens,
    workflows: Workflows,
    groups: Groups,
    fences: Arc<dyn FenceStore>,
    calendars: Arc<dyn CalendarStore>,
    recording: Recording,
}

impl Jobs {
    pub fn new(
        ports: &Ports,
        claimer: Claimer,
        groups: Groups,
        settings: JobsSettings,
        recording: Recording,
    ) -> Self {
        let Ports { jobs, runs, fences, calendars, clock, entropy, topics, .. } = ports.clone();
        let JobsSettings { limits, targets, page_tokens } = settings;
        let workflows = Workflows::new(jobs.clone(), runs.clone(), clock.clone());
        Jobs {
            catalogue: jobs,
            history: runs.clone(),
            writes: runs,
            clock,
            entropy,
            limits,
            targets,
            claimer,
            topics,
            page_tokens,
            workflows,
            groups,
            fences,
            calendars,
            recording,
        }
    }

    /// These use cases acting for the request `stamp` names: each change they make is written
    /// with its audit record.
    pub fn acting(&self, stamp: Arc<Stamp>) -> Jobs {
        Jobs { recording: self.recording.by(stamp), ..self.clone() }
    }

    /// These use cases acting for no one: Sundial's own follow-ups are not recorded.
    fn unstamped(&self) -> Jobs {
        Jobs { recording: self.recording.unstamped(), ..self.clone() }
    }

    /// The record of a change of the job from `before` (none: its creation) to `after`, with
    /// the fields of its document that changed (secrets redacted), if acting for someone.
    fn job_record(&self, before: Option<&Job>, after: &Job) -> Option<AuditRecord> {
        let target = job_target(after);
        let record = self.recording.record(&after.owner, after.updated_at, target)?;
        let old = before.map_or_else(|| serde_json::json!({}), |b| redacted_value(&b.document));
        let mut changes = sundial_domain::versions::changes(&old, &redacted_value(&after.document));
        // A write-only value changed: named, never shown.
        let secrets = before.map(|b| b.document.secrets_changed(&after.document)).unwrap_or_default();
        for field in secrets {
            // Already named if the field or one holding it changed.
            let holding = |c: &FieldChange| {
                field == c.field
                    || field.strip_prefix(c.field.as_str()).is_some_and(|rest| rest.starts_with('.'))
            };
            if !changes.iter().any(holding) {
                let secret = Some(serde_json::json!("<secret>"));
                changes.push(FieldChange { field, old: secret.clone(), new: secret });
            }
        }
        changes.sort_by(|a, b| a.field.cmp(&b.field));
        let record = record.of_job(&after.id).with_changes(changes);
        // A version is named only if one is kept for this change (a pause keeps none).
        Some(match after.versions.contains(&after.version) {
            true => record.making_version(after.version),
            false => record,
        })
    }

    /// The record of a manual action on `job` at `at` reaching `target`, with `changes`.
    fn action_record(
        &self,
        job: &Job,
        at: DateTime<Utc>,
        target: Target,
        changes: Vec<FieldChange>,
    ) -> Option<AuditRecord> {
        Some(self.recording.record(&job.owner, at, target)?.of_job(&job.id).with_changes(changes))
    }

    /// This service as reached at `origin` (the URL, or `host:port`, a request came in on): that
    /// endpoint is one of Sundial's own too, refused to targets and notifications like the
    /// configured ones. In AWS the API learns its own address only from its requests.
    pub fn reached_at(&self, origin: &str) -> Jobs {
        let mut jobs = self.clone();
        jobs.targets.network = jobs.targets.network.clone().refusing(origin);
        jobs
    }

    /// The pagination tokens of this deployment (the run history's pages use them too).
    pub fn page_tokens(&self) -> &PageTokens {
        &self.page_tokens
    }

    fn rules(&self) -> Rules<'_> {
        Rules { limits: &self.limits, targets: &self.targets }
    }

    /// The next run of a job whose schedule is (re)started at `now`; none for a job that runs
    /// after others (its parents' runs bring its own).
    fn first_run(
        document: &JobDocument,
        schedule: Option<&Schedule>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        match schedule {
            Some(s) => s.first_at_or_after(now),
            None if !document.depends_on.is_empty() => None,
            None => Some(ceil_second(now)),
        }
    }

    pub async fn create(&self, owner: &Owner, mut document: JobDocument) -> JobsResult<Job> {
        self.resolve_calendars(owner, &mut document).await?;
        let now = self.clock.now();
        let schedule = validation::validate(&mut document, &self.rules(), now, now)?;
        let parents = self.workflows.check_parents(owner, &mut document, None).await?;
        let mut job = Job {
            id: JobId::drawn(now, self.entropy.as_ref()),
            owner: owner.clone(),
            next_run_at: Self::first_run(&document, schedule.as_ref(), now),
            document,
            version: 1,
            created_at: now,
            updated_at: now,
            signing_secret: sundial_domain::job::new_signing_secret(self.entropy.as_ref()),
            pauses: Vec::new(),
            children: Vec::new(),
            gaps: Vec::new(),
            skips: Vec::new(),
            counted: Default::default(),
            baseline: None,
            versions: vec![1],
        };
        job.record_pause_change(false, now);
        // The topic first: an endpoint SNS refuses fails the request before anything is saved.
        let has_topic = has_endpoints(&job);
        if has_topic {
            self.topics.sync(&job).await.map_err(topic_error)?;
        }
        // The parents learn of their child, and the group of its job, before the job exists (see
        // `workflow` and `groups`).
        let linked = match self.link_group(&job).await {
            Ok(()) => self.link_calendars(&job, &named_calendar::names(&job.document)).await,
            Err(e) => Err(e),
        };
        let linked = match linked {
            Ok(()) => self.workflows.link(&parents, &job.id).await.map_err(JobsError::from),
            Err(e) => Err(e),
        };
        let created = match linked {
            Ok(()) => {
                let record = self.job_record(None, &job);
                self.catalogue
                    .create(&job, self.limits.max_jobs_per_owner, record.as_ref())
                    .await
                    .map_err(JobsError::from)
            }
            Err(e) => Err(e),
        };
        if let Err(e) = created {
            // A write that may have applied (its answer lost) keeps its links and its topic: a
            // link whose job was never written is ignored, and an orphan topic is logged,
            // while a job written without them would never run, or never tell.
            let maybe_written = matches!(e, JobsError::Store(ref s) if s.is_retryable());
            if !maybe_written {
                self.workflows.unlink(&parents, &job.id).await;
                self.unlink_group(&job).await;
                self.unlink_calendars(&job, &named_calendar::names(&job.document)).await;
                if has_topic {
                    self.remove_topic(&job).await;
                }
            }
            return Err(e);
        }
        let job = self.calendars_caught_up(job).await?;
        self.claim_if_due_soon(job).await
    }

    /// A job whose next instant falls before the next tick could dispatch it (or that has no
    /// schedule) is claimed right away, through the tick's own claim path; the job is returned as
    /// it stands afterwards.
    async fn claim_if_due_soon(&self, job: Job) -> JobsResult<Job> {
        let now = self.clock.now();
        let next_tick =
            sundial_domain::due_index::minute_of(now) + chrono::Duration::seconds(60) + DUE_SOON_MARGIN;
        // Where the due index files it: a start deep in a long window is claimed later.
        match job.claimable_at() {
            Some(due) if due < next_tick => {
                let report = self.claimer.claim(vec![job.clone()], None, now).await;
                if report.failed > 0 || report.send_failures > 0 {
                    // The tick heals it after the grace period; the job itself is saved.
                    tracing::warn!(job_id = %job.id, "claiming a job due soon failed; the tick will");
                }
                Ok(self.catalogue.get(&job.id).await?.unwrap_or(job))
            }
            _ => Ok(job),
        }
    }

    pub async fn get(&self, owner: &Owner, id: &JobId) -> JobsResult<Job> {
        match self.catalogue.get(id).await? {
            Some(job) if &job.owner == owner => Ok(job),
            _ => Err(JobsError::NotFound),
        }
    }

    /// The job's newest run, read from the runs table (never written onto the job).
    pub async fn last_run(&self, job: &Job) -> JobsResult<Option<Run>> {
        Ok(self.history.list(&job.id, 1, None, None).await?.items.into_iter().next())
    }

    pub async fn list(&self, owner: &Owner, limit: u32, token: Option<&str>) -> JobsResult<Page<Job>> {
        let scope = format!("jobs\n{owner}");
        let cursor = open_token(&self.page_tokens, &scope, token)?;
        let page = self.catalogue.list(owner, limit.clamp(1, MAX_PAGE), cursor.as_deref()).await?;
        Ok(seal_page(&self.page_tokens, &scope, page))
    }

    /// The owner's jobs that `filter` selects, by name, `limit` at a time. The owner's listing is
    /// read page by page from the token's place and filtered here; a response stops at `limit`
    /// jobs (its token continues right after the last) or after [`FILTER_READ`] jobs read (its
    /// token continues where the reading stopped, and it may hold fewer), so no request reads
    /// more than the owner's own jobs, nor all of them.
    pub async fn list_filtered(
        &self,
        owner: &Owner,
        filter: &JobFilter,
        limit: u32,
        token: Option<&str>,
    ) -> JobsResult<Page<Job>> {
        if filter.is_empty() {
            return self.list(owner, limit, token).await;
        }
        let scope = format!("jobs\n{owner}\n{}", filter.scope());
        let mut cursor = open_token(&self.page_tokens, &scope, token)?;
        let limit = limit.clamp(1, MAX_PAGE) as usize;
        let (mut found, mut read) = (Vec::new(), 0);
        loop {
            let page = self.catalogue.list(owner, MAX_PAGE, cursor.as_deref()).await?;
            let mut jobs = page.items;
            jobs.sort_by(|a, b| (&a.document.name, &a.id).cmp(&(&b.document.name, &b.id)));
            let last = jobs.len();
            for (i, job) in jobs.into_iter().enumerate() {
                read += 1;
                if !self.selects(filter, &job).await? {
                    continue;
                }
                found.push(job);
                if found.len() == limit {
                    let more = i + 1 < last || page.next.is_some();
                    let next = match (more, found.last()) {
                        (true, Some(job)) => Some(self.catalogue.cursor_after(job).await?),
                        _ => None,
                    };
                    return Ok(seal_page(&self.page_tokens, &scope, Page { items: found, next }));
                }
            }
            cursor = page.next;
            // `failing` reads each candidate's newest run: a request reads fewer jobs for it.
            let budget = if filter.state == Some(JobState::Failing) { FILTER_READ / 5 } else { FILTER_READ };
            if cursor.is_none() || read >= budget {
                return Ok(seal_page(&self.page_tokens, &scope, Page { items: found, next: cursor }));
            }
        }
    }

    /// Whether `filter` selects `job` (its newest run read only for `state=failing`).
    async fn selects(&self, filter: &JobFilter, job: &Job) -> JobsResult<bool> {
        let document = &job.document;
        let tagged = filter.tags.iter().all(|(k, v)| document.tags.get(k) == Some(v));
        let grouped = filter.group.as_ref().is_none_or(|g| document.group.as_ref() == Some(g));
        let text = filter.q.as_ref().is_none_or(|q| {
            let q = q.to_lowercase();
            document.name.to_lowercase().contains(&q)
                || document.description.as_ref().is_some_and(|d| d.to_lowercase().contains(&q))
        });
        if !(tagged && grouped && text) {
            return Ok(false);
        }
        Ok(match filter.state {
            None => true,
            Some(JobState::Active) => !document.paused,
            Some(JobState::Paused) => document.paused,
            Some(JobState::Failing) => self
                .last_run(job)
                .await?
                .is_some_and(|run| matches!(run.state, RunState::Failed | RunState::TimedOut)),
        })
    }

    /// Applies a JSON merge patch to the job's document, on the `terms` the caller set.
    pub async fn patch(
        &self,
        owner: &Owner,
        id: &JobId,
        patch: &serde_json::Value,
        terms: EditTerms,
    ) -> JobsResult<Job> {
        if !patch.is_object() {
            return Err(JobsError::Malformed(ValidationError::new(
                "body",
                "a merge patch must be a JSON object",
            )));
        }
        self.edit(owner, id, terms, |document| {
            let mut merged = serde_json::to_value(&*document)
                .map_err(|e| JobsError::Malformed(ValidationError::new("body", e.to_string())))?;
            sundial_domain::merge_patch::apply(&mut merged, patch);
            *document = validation::decode(merged).map_err(JobsError::Malformed)?;
            Ok(())
        })
        .await
    }

    /// The job's kept versions, newest first, `limit` at a time from before version `before`
    /// (the newest, without it): each with when it was made and the fields it changed from the
    /// version kept before it (none for the oldest kept); and the version to ask `before` for
    /// older ones, if any are kept.
    pub async fn versions(
        &self,
        owner: &Owner,
        id: &JobId,
        limit: usize,
        before: Option<u64>,
    ) -> JobsResult<(Vec<VersionSummary>, Option<u64>)> {
        use futures::StreamExt;
        let job = self.get(owner, id).await?;
        let kept: Vec<u64> = job.versions.iter().copied().filter(|v| before.is_none_or(|b| *v < b)).collect();
        let shown = kept.len().saturating_sub(limit.max(1));
        // One more than shown: the version each shown one is compared with; read 8 at a time.
        let wanted: Vec<u64> = kept[shown.saturating_sub(1)..].to_vec();
        let catalogue = &self.catalogue;
        let reads = wanted.into_iter().map(|version| async move { catalogue.version(id, version).await });
        let read: Vec<StoreResult<Option<JobVersion>>> =
            futures::stream::iter(reads).buffered(8).collect().await;
        let mut documents = Vec::with_capacity(read.len());
        for version in read {
            documents.extend(version?);
        }
        let mut summaries: Vec<VersionSummary> = documents
            .windows(2)
            .map(|pair| VersionSummary {
                version: pair[1].version,
                at: pair[1].at,
                changed: sundial_domain::versions::changes(
                    &redacted_value(&pair[0].document),
                    &redacted_value(&pair[1].document),
                )
                .into_iter()
                .map(|c| c.field)
                .collect(),
            })
            .collect();
        // The oldest kept has nothing kept to compare with.
        if shown == 0
            && let Some(oldest) = documents.first()
        {
            summaries
                .insert(0, VersionSummary { version: oldest.version, at: oldest.at, changed: Vec::new() });
        }
        summaries.reverse();
        let older = (shown > 0).then(|| summaries.last().map(|s| s.version)).flatten();
        Ok((summaries, older))
    }

    /// Version `version` of the job's document, if it is kept.
    pub async fn version(&self, owner: &Owner, id: &JobId, version: u64) -> JobsResult<JobVersion> {
        self.get(owner, id).await?;
        self.catalogue.version(id, version).await?.ok_or(JobsError::VersionNotKept(version))
    }

    /// The fields that differ from version `from` to version `to` (the current one, without it),
    /// secret header values shown as secret.
    pub async fn diff(
        &self,
        owner: &Owner,
        id: &JobId,
        from: u64,
        to: Option<u64>,
    ) -> JobsResult<Vec<FieldChange>> {
        let job = self.get(owner, id).await?;
        let old = self.catalogue.version(id, from).await?.ok_or(JobsError::VersionNotKept(from))?;
        let new = match to {
            None => job.document,
            Some(to) => self.catalogue.version(id, to).await?.ok_or(JobsError::VersionNotKept(to))?.document,
        };
        Ok(sundial_domain::versions::changes(&redacted_value(&old.document), &redacted_value(&new)))
    }

    /// Writes a new version of the job equal to version `version`'s document (under `If-Match`
    /// when given), checked as any edit is.
    pub async fn rollback(
        &self,
        owner: &Owner,
        id: &JobId,
        version: u64,
        if_match: Option<u64>,
    ) -> JobsResult<Job> {
        let kept = self.version(owner, id, version).await?;
        let document = named_calendar::written(&kept.document);
        let terms = EditTerms { if_match, ..EditTerms::default() };
        // Whether the job runs is not the version's to say: a paused job stays paused (and a
        // running one running) until it is resumed (or paused) as such.
        self.edit(owner, id, terms, move |current| {
            *current = JobDocument { paused: current.paused, ..document.clone() };
            Ok(())
        })
        .await
    }

    /// Pauses the job, with why, who and until when (`until`: it resumes by itself then). A
    /// paused job is paused again with the new note. A reason too long or an `until` not ahead
    /// (at most [`MAX_PAUSE_DAYS`]) is `Invalid`, naming it, and changes nothing.
    pub async fn pause(&self, owner: &Owner, id: &JobId, note: PauseNote) -> JobsResult<Job> {
        if note.reason.as_ref().is_some_and(|r| r.chars().count() > MAX_PAUSE_REASON_CHARS) {
            let reason = format!("at most {MAX_PAUSE_REASON_CHARS} characters");
            return Err(ValidationError::new("reason", reason).into());
        }
        if let Some(until) = note.until {
            let now = self.clock.now();
            if until <= now {
                return Err(ValidationError::new("until", "must be in the future").into());
            }
            if until > now + chrono::Duration::days(MAX_PAUSE_DAYS) {
                let reason = format!("must be at most {MAX_PAUSE_DAYS} days ahead");
                return Err(ValidationError::new("until", reason).into());
            }
        }
        let terms = EditTerms { pause: Some(note), ..EditTerms::default() };
        self.edit(owner, id, terms, |document| {
            document.paused = true;
            Ok(())
        })
        .await
    }

    /// Resumes the job from now on. The instants it missed while paused are skipped, or, as
    /// `catchup` says, the latest of them or all of them (at most [`MAX_BACKFILL`]: more is
    /// `Invalid`, naming `catchup`, and the job stays paused) are run now, as a backfill.
    pub async fn resume(&self, owner: &Owner, id: &JobId, catchup: CatchupPolicy) -> JobsResult<Job> {
        let paused = self.get(owner, id).await?;
        let missed = self.paused_instants(&paused, catchup)?;
        let resumed = self
            .edit(owner, id, EditTerms::default(), |document| {
                document.paused = false;
                Ok(())
            })
            .await?;
        if let (Some(first), Some(last)) = (missed.first(), missed.last()) {
            self.backfill(owner, id, *first, *last).await?;
        }
        Ok(resumed)
    }

    /// The instants of `job`'s open pause (up to now) a resume with `catchup` runs.
    fn paused_instants(&self, job: &Job, catchup: CatchupPolicy) -> JobsResult<Vec<DateTime<Utc>>> {
        let (Some(pause), Some(schedule)) = (job.open_pause(), validation::stored_schedule(job)?) else {
            return Ok(Vec::new());
        };
        let now = self.clock.now();
        match catchup {
            CatchupPolicy::Skip => Ok(Vec::new()),
            CatchupPolicy::Latest => Ok(schedule.latest_before(pause.from, now).into_iter().collect()),
            CatchupPolicy::All => {
                let mut instants = Vec::new();
                let mut cursor = schedule.first_at_or_after(pause.from);
                while let Some(t) = cursor.filter(|t| *t < now) {
                    if instants.len() == MAX_BACKFILL {
                        let reason = format!(
                            "the pause holds more than {MAX_BACKFILL} instants: resume with latest or skip, then backfill in parts"
                        );
                        return Err(ValidationError::new("catchup", reason).into());
                    }
                    instants.push(t);
                    cursor = schedule.next_after(t);
                }
                Ok(instants)
            }
        }
    }

    /// Resumes a job whose pause ran to its `until`, as the tick finds it: only if it is still
    /// at the version read (a resume, a new pause or an edit since wins). The job as resumed,
    /// or `None` when it was not.
    pub async fn wake(&self, job: &Job) -> JobsResult<Option<Job>> {
        let terms = EditTerms { if_match: Some(job.version), ..EditTerms::default() };
        let resumed = self.edit(&job.owner, &job.id, terms, |document| {
            document.paused = false;
            Ok(())
        });
        match resumed.await {
            Ok(job) => Ok(Some(job)),
            Err(JobsError::VersionMismatch { .. } | JobsError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Read, change, validate and write under the version check; without `If-Match` a lost race
    /// is retried on the fresh version.
    async fn edit(
        &self,
        owner: &Owner,
        id: &JobId,
        terms: EditTerms,
        change: impl Fn(&mut JobDocument) -> JobsResult<()>,
    ) -> JobsResult<Job> {
        let (terms, change) = (&terms, &change);
        let edited = until_won(EDIT_ATTEMPTS, || self.edit_once(owner, id, terms, change))
            .await?
            .ok_or(JobsError::Contended)?;
        self.calendars_caught_up(edited).await
    }

    /// Copies the named calendars' current days into the job (an edit that changes nothing else,
    /// and nothing at all when its copies are current): how an edit of a calendar reaches the
    /// jobs that name it. It may break a join below the job: the calendar's owner edited it.
    pub async fn refresh_calendars(&self, owner: &Owner, id: &JobId) -> JobsResult<Job> {
        let terms = EditTerms { break_joins: true, ..EditTerms::default() };
        // The calendar's own change is the one recorded.
        let jobs = self.unstamped();
        until_won(EDIT_ATTEMPTS, || jobs.edit_once(owner, id, &terms, &|_: &mut JobDocument| Ok(())))
            .await?
            .ok_or(JobsError::Contended)
    }

    /// Whether `job` can take `calendar` as an edit would make it: the error (naming the job's
    /// field) if its schedule would then be refused. An edit of a calendar checks every job
    /// that names it first, so that it is refused, not left half-applied.
    pub fn takes_calendar(&self, job: &Job, calendar: &NamedCalendar) -> Result<(), ValidationError> {
        let mut document = named_calendar::recopied(&job.document, calendar);
        validation::validate_kept(&mut document, &self.rules(), job.created_at, self.clock.now()).map(|_| ())
    }

    /// `job` as written, or refreshed if a calendar it names moved on while it was being
    /// written. A write links the job before it reads the calendars, and an edit of a calendar
    /// writes it before it reads the links: so either this read, after the job's write, sees the
    /// edit, or the calendar's edit sees the link and refreshes the job itself. The job is
    /// written either way: a refresh that fails here is the calendar edit's to report.
    async fn calendars_caught_up(&self, job: Job) -> JobsResult<Job> {
        for (name, held) in named_calendar::held_versions(&job.document) {
            let current = match self.calendars.get(&job.owner, &name).await {
                Ok(calendar) => calendar.map(|c| c.version),
                Err(e) => {
                    tracing::warn!(calendar = %name, job_id = %job.id, error = %e, "could not check the job's calendar copy");
                    None
                }
            };
            if current.is_some_and(|current| current != held) {
                return match self.refresh_calendars(&job.owner, &job.id).await {
                    Ok(refreshed) => Ok(refreshed),
                    Err(e) => {
                        tracing::warn!(calendar = %name, job_id = %job.id, error = %e, "the job keeps an older copy of its calendar");
                        Ok(job)
                    }
                };
            }
        }
        Ok(job)
    }

    /// Fills `document`'s named calendar entries with copies of the owner's calendars: a name
    /// the owner has no calendar of is `Invalid`, naming the entry.
    async fn resolve_calendars(&self, owner: &Owner, document: &mut JobDocument) -> JobsResult<()> {
        let mut found: Vec<NamedCalendar> = Vec::new();
        for name in named_calendar::names(document) {
            if sundial_domain::group::valid_name(&name)
                && let Some(calendar) = self.calendars.get(owner, &name).await?
            {
                found.push(calendar);
            }
        }
        named_calendar::resolve(document, |name| found.iter().find(|c| c.name == name).cloned())?;
        Ok(())
    }

    /// One read, change and write of [`Jobs::edit`]: `Lost` when the write lost to a change the
    /// terms allow (any, without `If-Match`; with it, only the tick's advance).
    async fn edit_once(
        &self,
        owner: &Owner,
        id: &JobId,
        terms: &EditTerms,
        change: &impl Fn(&mut JobDocument) -> JobsResult<()>,
    ) -> JobsResult<Race<Job>> {
        let before = self.get(owner, id).await?;
        if terms.if_match.is_some_and(|expected| expected != before.version) {
            return Err(JobsError::VersionMismatch { current: before.version });
        }
        // The change applies to the document as its owner wrote it; the calendars it names are
        // copied in afresh.
        let mut document = named_calendar::written(&before.document);
        change(&mut document)?;
        self.resolve_calendars(owner, &mut document).await?;
        // The graph is checked only when the parents change: a pause or an edit of a child reads
        // nothing more.
        let parents = if document.depends_on == before.document.depends_on {
            before.parents()
        } else {
            self.workflows.check_parents(owner, &mut document, Some(id)).await?
        };
        if !terms.break_joins {
            self.workflows.check_joins_below(&before, &document).await?;
        }
        let noted = terms
            .pause
            .as_ref()
            .filter(|note| document.paused && before.open_pause().is_none_or(|p| !p.says(note)));
        if document == before.document && noted.is_none() {
            return Ok(Race::Won(before));
        }
        let mut after = self.revised(&before, document, &parents)?;
        if let Some(note) = &terms.pause {
            after.note_pause(note);
        }
        let resumed = before.document.paused && !after.document.paused;
        // An edit of the flexible window moves where the job is filed even when its next
        // instant stays: a filing in a minute the tick has passed is claimed now.
        let refiled = after.index_at() != before.index_at();
        match self.write_edit(&before, &after, &parents).await? {
            Race::Won(()) if after.next_run_at != before.next_run_at || resumed || refiled => {
                self.claim_if_due_soon(after).await.map(Race::Won)
            }
            Race::Won(()) => Ok(Race::Won(after)),
            Race::Lost => match terms.if_match {
                // Edited by someone else since read: the caller's If-Match is stale.
                Some(expected) => match self.get(owner, id).await?.version {
                    current if current != expected => Err(JobsError::VersionMismatch { current }),
                    // Only the tick advanced it: apply the edit to the fresh read.
                    _ => Ok(Race::Lost),
                },
                None => Ok(Race::Lost),
            },
        }
    }

    /// `before` with its edited `document`, validated: its next version, and its next instant
    /// where the schedule changed or the job resumed.
    fn revised(&self, before: &Job, mut document: JobDocument, parents: &[JobId]) -> JobsResult<Job> {
        let now = self.clock.now();
        let schedule_changed = document.schedule != before.document.schedule;
        // A schedule its owner did not edit keeps its instants: a one-time job that already ran
        // stays valid when its payload changes, and a job whose calendar was edited is not
        // refused for having no instant left (it ends, as at its `end_at`).
        let written = |d: &JobDocument| named_calendar::written(d).schedule;
        let owner_edited = written(&document) != written(&before.document);
        let schedule = match owner_edited {
            true => validation::validate(&mut document, &self.rules(), before.created_at, now)?,
            false => validation::validate_kept(&mut document, &self.rules(), before.created_at, now)?,
        };
        let resumed = before.document.paused && !document.paused;
        // An edit of the owner's starts the schedule again from now; a calendar's edit copied in
        // takes effect from the next unclaimed instant on (one overdue stays the job's, if the
        // calendar still has it).
        let restart = match (owner_edited || resumed, before.next_run_at) {
            (false, Some(next)) => next.min(now),
            _ => now,
        };
        let next_run_at = match (schedule.as_ref(), schedule_changed || resumed) {
            // A job that runs after others has no instants of its own.
            _ if !parents.is_empty() => None,
            (_, false) => before.next_run_at,
            // An instant still waiting for its start (deep in a long window) keeps its run if
            // the edited schedule has it too and its start is still ahead.
            (Some(s), true) if !resumed && let Some(waiting) = waiting_instant(before, &document, s, now) => {
                Some(waiting)
            }
            (Some(s), true) => s.first_at_or_after(restart),
            // Run-once jobs keep their pending run (or its absence, once it ran).
            (None, true) => before.next_run_at.map(|t| t.max(ceil_second(now))),
        };
        let version = before.version + 1;
        // A version is kept for what the owner wrote: not for a pause or a resume (the pause
        // record says those), nor for a calendar's days copied in (its own versions say those).
        let as_written = |d: &JobDocument| JobDocument { paused: false, ..named_calendar::written(d) };
        let versions = match as_written(&document) == as_written(&before.document) {
            true => before.versions.clone(),
            false => sundial_domain::versions::kept_with(&before.versions, version),
        };
        let mut after = Job { document, version, updated_at: now, next_run_at, versions, ..before.clone() };
        after.record_pause_change(before.document.paused, now);
        let moved = match (&before.document.schedule, &after.document.schedule) {
            (Some(old), Some(new)) => !old.same_instants(new),
            (old, new) => old != new,
        };
        if moved {
            // Instants of the new schedule since the last change that were not instants of the
            // old one were not the job's: the ledger says so instead of calling them missed.
            let cause = GapCause::Edited { previous: before.document.schedule.clone().map(Box::new) };
            // The new schedule's instants start at the whole second after its restart.
            let to = ceil_second(restart) - chrono::Duration::seconds(1);
            let edit = Gap { from: before.schedule_since(), to, instants: 0, cause, at: now, told: true };
            after.gaps = before.gaps_with(edit);
        }
        Ok(after)
    }

    /// Writes `after` over `before` under the version check, with what the edit changes around
    /// the job: its topic's subscriptions, its links to new parents and to its group before the
    /// write; the links it dropped, and its fence, once the write won. A lost write puts the
    /// subscriptions back as the saved job has them. `Lost` if the version check failed.
    async fn write_edit(&self, before: &Job, after: &Job, parents: &[JobId]) -> JobsResult<Race<()>> {
        let notify_changed = after.document.notify != before.document.notify;
        if notify_changed {
            // Creates, edits or removes the topic as the new settings say.
            self.topics.sync(after).await.map_err(topic_error)?;
        }
        let new_parents: Vec<JobId> =
            parents.iter().filter(|p| !before.parents().contains(p)).cloned().collect();
        self.workflows.link(&new_parents, &after.id).await?;
        let group_changed = after.document.group != before.document.group;
        if group_changed {
            self.link_group(after).await?;
        }
        let newly_named = &named_calendar::names(&after.document) - &named_calendar::names(&before.document);
        self.link_calendars(after, &newly_named).await?;
        let record = self.job_record(Some(before), after);
        let updated = self.catalogue.update(before, after, record.as_ref()).await.raced();
        if !matches!(updated, Ok(Race::Won(()))) {
            if notify_changed && let Err(e) = self.topics.sync(before).await {
                tracing::warn!(job_id = %before.id, error = %e, "could not restore the job's subscriptions");
            }
            return Ok(updated?);
        }
        let dropped: Vec<JobId> = before.parents().into_iter().filter(|p| !parents.contains(p)).collect();
        self.workflows.unlink(&dropped, &after.id).await;
        if group_changed {
            self.unlink_group(before).await;
        }
        // A calendar the job stopped naming keeps its link (a delete of the calendar reads past
        // it): an unlink here could take away the link of a later edit that names it again.
        let fenced = |job: &Job| job.document.concurrency != ConcurrencyPolicy::Allow;
        if fenced(after) && !fenced(before) {
            // Its runs under `allow` never took the fence: the next take reads them.
            self.forget_fence(after).await;
        }
        Ok(Race::Won(()))
    }

    /// Issues a new signing secret; the old one stops working at once.
    pub async fn rotate_secret(&self, owner: &Owner, id: &JobId) -> JobsResult<Job> {
        let rotated = until_won(EDIT_ATTEMPTS, || async move {
            let before = self.get(owner, id).await?;
            let after = Job {
                signing_secret: sundial_domain::job::new_signing_secret(self.entropy.as_ref()),
                version: before.version + 1,
                updated_at: self.clock.now(),
                ..before.clone()
            };
            let record = self.job_record(Some(&before), &after);
            Ok::<_, JobsError>(
                self.catalogue.update(&before, &after, record.as_ref()).await.raced()?.map(|()| after),
            )
        });
        rotated.await?.ok_or(JobsError::Contended)
    }

    /// Deletes the job; refused while other jobs run after it. The delete is fenced by the
    /// version read, which a new child's link moves: a child linked after the check makes it
    /// read and check again.
    pub async fn delete(&self, owner: &Owner, id: &JobId) -> JobsResult<()> {
        let deleted = until_won(EDIT_ATTEMPTS, || async move {
            let job = self.get(owner, id).await?;
            let children = self.workflows.children(&job).await?;
            if !children.is_empty() {
                return Err(JobsError::HasChildren(children.into_iter().map(|c| c.document.name).collect()));
            }
            let record = self.action_record(&job, self.clock.now(), job_target(&job), Vec::new());
            Ok(self.catalogue.delete(&job, record.as_ref()).await.raced()?.map(|()| job))
        });
        let job = deleted.await?.ok_or(JobsError::Contended)?;
        self.workflows.unlink(&job.parents(), &job.id).await;
        self.unlink_group(&job).await;
        self.unlink_calendars(&job, &named_calendar::names(&job.document)).await;
        self.forget_fence(&job).await;
        if has_endpoints(&job) {
            self.remove_topic(&job).await;
        }
        Ok(())
    }

    /// Removes `job`'s start fence (best effort): the job is deleted, or was just made `forbid`
    /// or `replace` (its next run's take then reads the job's active runs, which never took it).
    /// A fence left behind after a delete is about 100 bytes that nothing reads again (a job's id
    /// is never reused).
    async fn forget_fence(&self, job: &Job) {
        if let Err(e) = self.fences.remove(&job.id).await {
            tracing::warn!(job_id = %job.id, error = %e, "the job's start fence was left behind");
        }
    }

    /// Links `job` to the group it names, if any (an error naming `group` if there is none).
    async fn link_group(&self, job: &Job) -> JobsResult<()> {
        match job.document.group.as_deref() {
            Some(name) => Ok(self.groups.link(&job.owner, name, &job.id).await?),
            None => Ok(()),
        }
    }

    /// Unlinks `job` from the group it names, if any (best effort).
    async fn unlink_group(&self, job: &Job) {
        if let Some(name) = job.document.group.as_deref() {
            self.groups.unlink(&job.owner, name, &job.id).await;
        }
    }

    /// Links `job` to the calendars `names` (before the write that makes it name them): a
    /// calendar deleted since it was read is `Invalid`, naming the schedule.
    async fn link_calendars(&self, job: &Job, names: &BTreeSet<String>) -> JobsResult<()> {
        for name in names {
            match self.calendars.link(&job.owner, name, job.id.as_str(), self.clock.now()).await {
                Ok(()) => {}
                Err(StoreError::NotFound) => {
                    let reason = format!(
                        "there is no calendar `{name}`; create it first with PUT /v1/calendars/{name}"
                    );
                    return Err(ValidationError::new("schedule", reason).into());
                }
                Err(StoreError::Conflict) => return Err(JobsError::Contended),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Unlinks `job` from the calendars `names` (best effort: a link left behind is ignored by a
    /// delete of the calendar once its grace has passed).
    async fn unlink_calendars(&self, job: &Job, names: &BTreeSet<String>) {
        for name in names {
            if let Err(e) = self.calendars.unlink(&job.owner, name, job.id.as_str()).await {
                tracing::warn!(calendar = %name, job_id = %job.id, error = %e, "calendar link left behind");
            }
        }
    }

    /// The subscriptions of the job's notification topic and their status.
    pub async fn subscriptions(&self, job: &Job) -> JobsResult<Vec<Subscription>> {
        if !has_endpoints(job) {
            return Ok(Vec::new());
        }
        self.topics.subscriptions(&job.id).await.map_err(topic_error)
    }

    /// Removes the job's topic; a failure leaves an orphan topic, logged for an operator.
    async fn remove_topic(&self, job: &Job) {
        if let Err(e) = self.topics.remove(&job.id).await {
            tracing::warn!(job_id = %job.id, error = %e, "the job's notification topic was not removed");
        }
    }

    /// Starts a manual run now (`<now>#m#<ulid>`). A paused job is refused (`Paused`): its run
    /// would only be skipped. Under `forbid` a live holder of the job's start fence is a
    /// `RunActive` error at once; otherwise the policy is decided when the run starts, as for any
    /// run. With a `request` key (an `Idempotency-Key`), the run's key derives from the key and
    /// the time it was first seen, so a retry of a request that failed after the run was written
    /// finds that run instead of making a second one.
    pub async fn trigger(&self, owner: &Owner, id: &JobId, request: Option<&RequestKey>) -> JobsResult<Run> {
        self.trigger_with(owner, id, request, None).await
    }

    /// [`Jobs::trigger`], the run delivering `input` instead of the job's payload when given
    /// (checked as a payload is: bounded, and its placeholders known if the job fills them).
    pub async fn trigger_with(
        &self,
        owner: &Owner,
        id: &JobId,
        request: Option<&RequestKey>,
        input: Option<serde_json::Value>,
    ) -> JobsResult<Run> {
        let job = self.get(owner, id).await?;
        self.check_input(&job, input.as_ref())?;
        let now = self.clock.now();
        let key = match request {
            Some(r) => {
                RunKey::manual_for(ceil_second(r.first_seen), format!("{owner}\n{id}\n{}", r.key).as_bytes())
            }
            None => RunKey::manual_drawn(ceil_second(now), self.entropy.as_ref()),
        };
        if job.document.paused {
            // A retry of a trigger that wrote its run before the pause gets that run.
            if request.is_some()
                && let Some(run) = self.history.get(&job.id, &key).await?
            {
                return Ok(run);
            }
            return Err(JobsError::Paused);
        }
        if job.document.concurrency == ConcurrencyPolicy::Forbid {
            // What the run's start will decide, told at once: the fence's holder is active.
            let fence = self.fences.get(&job.id).await?;
            let holder = fence.map(|fence| fence.holder).filter(|holder| *holder != key);
            if let Some(holder) = holder {
                let holder_run = self.history.get(&job.id, &holder).await?;
                if fence::holds(holder_run.as_ref()) {
                    return Err(JobsError::RunActive(RunId::new(job.id.clone(), holder).to_string()));
                }
            }
        }
        let mut run = self.claimer.new_run(&job, key, now, now);
        run.input = input;
        // A job with children starts a workflow run: they follow it under the same key.
        run.workflow = (!job.children.is_empty()).then(|| job.id.clone());
        let changes = run_input_changes(run.input.as_ref());
        let record = self.action_record(&job, now, run_target(&run), changes);
        let run = match self.writes.insert(&run, record.as_ref()).await? {
            sundial_domain::ports::store::Inserted::Created => {
                self.claimer.trace(std::slice::from_ref(&run)).await;
                run
            }
            sundial_domain::ports::store::Inserted::Exists(existing) => *existing,
        };
        if run.is_unstarted() {
            self.dispatch(std::slice::from_ref(&run)).await;
        }
        Ok(run)
    }

    /// Claims every scheduled instant in `[from, to]` (up to now) that has no run yet, paced at
    /// [`BACKFILL_PER_SECOND`]; returns the runs created and how many instants already had one.
    pub async fn backfill(
        &self,
        owner: &Owner,
        id: &JobId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> JobsResult<(Vec<Run>, usize)> {
        self.backfill_with(owner, id, from, to, None).await
    }

    /// [`Jobs::backfill`], each run delivering `input` instead of the job's payload when given.
    pub async fn backfill_with(
        &self,
        owner: &Owner,
        id: &JobId,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        input: Option<serde_json::Value>,
    ) -> JobsResult<(Vec<Run>, usize)> {
        let job = self.get(owner, id).await?;
        self.check_input(&job, input.as_ref())?;
        let Some(schedule) = validation::stored_schedule(&job)? else {
            return Err(ValidationError::new("job", "has no schedule to backfill").into());
        };
        // Its runs would all be skipped.
        if job.document.paused {
            return Err(JobsError::Paused);
        }
        if to < from {
            return Err(ValidationError::new("to", "must not be before from").into());
        }
        // Run keys and history hold instants of four-digit years, from the Unix epoch on.
        if from < DateTime::UNIX_EPOCH {
            return Err(ValidationError::new("from", "must be 1970-01-01T00:00:00Z or later").into());
        }
        let now = self.clock.now();
        let to = to.min(now);
        let mut instants = Vec::new();
        let mut cursor = schedule.first_at_or_after(from);
        while let Some(t) = cursor.filter(|t| *t <= to) {
            if instants.len() == MAX_BACKFILL {
                return Err(ValidationError::new(
                    "to",
                    format!("the range holds more than {MAX_BACKFILL} instants; backfill it in parts"),
                )
                .into());
            }
            instants.push(t);
            cursor = schedule.next_after(t);
        }
        let mut created = Vec::new();
        let mut existing = 0;
        // One record for the backfill, with the first run it creates.
        let mut changes = vec![
            FieldChange { field: "from".into(), old: None, new: Some(serde_json::json!(from)) },
            FieldChange { field: "to".into(), old: None, new: Some(serde_json::json!(to)) },
        ];
        changes.extend(run_input_changes(input.as_ref()));
        let mut record = self.action_record(&job, now, job_target(&job), changes);
        for instant in instants {
            let due = now + chrono::Duration::seconds((created.len() / BACKFILL_PER_SECOND) as i64);
            let run = Run {
                backfill: true,
                input: input.clone(),
                ..self.claimer.new_run(&job, RunKey::scheduled(instant), due, now)
            };
            match self.writes.insert(&run, record.as_ref()).await? {
                sundial_domain::ports::store::Inserted::Created => {
                    record = None;
                    self.claimer.trace(std::slice::from_ref(&run)).await;
                    created.push(run);
                }
                sundial_domain::ports::store::Inserted::Exists(_) => existing += 1,
            }
        }
        self.dispatch(&created).await;
        Ok((created, existing))
    }

    /// Refuses a run's own payload that the job's could not be: too large, or (for a job that
    /// fills placeholders) naming one that does not exist; named as `payload`.
    fn check_input(&self, job: &Job, input: Option<&serde_json::Value>) -> JobsResult<()> {
        match input {
            Some(input) => Ok(validation::run_input(input, &self.rules(), job.document.payload_template)?),
            None => Ok(()),
        }
    }

    /// Sends the first-attempt messages of runs the API created. A send that fails is not an
    /// error of the request: the run exists, and the watchdog sends every run whose attempt has
    /// not started in time.
    async fn dispatch(&self, runs: &[Run]) {
        for (run, result) in runs.iter().zip(self.claimer.send(runs).await) {
            if let Err(e) = result {
                tracing::warn!(run_id = %run.id(), error = %e, "run not sent yet; the watchdog will send it");
            }
        }
    }

    /// The names of the job's parents, in its `depends_on` order (an id for one that is gone).
    pub async fn parent_names(&self, job: &Job) -> JobsResult<Vec<String>> {
        let parents = self.catalogue.get_many(&job.parents()).await?;
        Ok(job
            .parents()
            .iter()
            .map(|id| {
                parents
                    .iter()
                    .find(|p| &p.id == id)
                    .map_or_else(|| id.to_string(), |p| p.document.name.clone())
            })
            .collect())
    }

    /// The graph of jobs connected to the job through `depends_on`.
    pub async fn graph(&self, owner: &Owner, id: &JobId) -> JobsResult<GraphView> {
        let job = self.get(owner, id).await?;
        Ok(self.workflows.graph(&job).await?)
    }

    /// The next `count` instants of the job, paused or not.
    pub async fn preview(&self, owner: &Owner, id: &JobId, count: usize) -> JobsResult<Preview> {
        let job = self.get(owner, id).await?;
        let now = self.clock.now();
        let count = count.min(MAX_PREVIEW);
        let (instants, dst) = match validation::stored_schedule(&job)? {
            Some(schedule) => {
                let instants = schedule.upcoming(now - chrono::Duration::seconds(1), count);
                // At most a year of DST changes: a rare schedule's 500 instants span centuries.
                let last = instants
                    .last()
                    .copied()
                    .unwrap_or(now)
                    .min(now + chrono::Duration::days(DST_WARNING_DAYS));
                (instants, schedule.dst_notes(now, last))
            }
            None => (job.next_run_at.into_iter().take(count).collect(), Vec::new()),
        };
        Ok(Preview { job, instants, dst })
    }

    /// What a job's owner should know of its schedule before it bites: each DST change in the
    /// next year that moves, skips or doubles one of its instants, in words. Returned with the
    /// job by the API (on create and edit too), so a schedule written in a zone with DST says
    /// what its rule will do and when.
    ///
    /// A schedule entry that names a calendar kept for another zone is warned of too: the
    /// entry judges dates in its own zone.
    pub async fn warnings(&self, job: &Job) -> Vec<String> {
        let now = self.clock.now();
        let Ok(Some(schedule)) = validation::stored_schedule(job) else { return Vec::new() };
        let notes = schedule.dst_notes(now, now + chrono::Duration::days(DST_WARNING_DAYS));
        let mut warnings: Vec<String> = notes.into_iter().map(|n| format!("DST: {}", n.detail)).collect();
        let held = named_calendar::held_versions(&job.document);
        for (name, zone) in named_calendar::zones(&job.document) {
            let calendar = match self.calendars.get(&job.owner, &name).await {
                Ok(calendar) => calendar,
                Err(e) => {
                    tracing::warn!(calendar = %name, error = %e, "could not read a calendar for its warnings");
                    None
                }
            };
            let Some(calendar) = calendar else { continue };
            if let Some(calendar_zone) = calendar.document.timezone.as_ref().filter(|z| **z != zone) {
                warnings.push(format!(
                    "calendar: `{name}` lists dates of {calendar_zone}; this schedule judges them in {zone}"
                ));
            }
            if let Some(held) = held.get(&name).filter(|held| **held < calendar.version) {
                let version = calendar.version;
                let warning = format!(
                    "calendar: `{name}` is at version {version}, this job's instants follow version {held}; PUT the calendar again to bring it to its jobs"
                );
                if !warnings.contains(&warning) {
                    warnings.push(warning);
                }
            }
        }
        warnings
    }
}

/// How far ahead a job's DST warnings look.
const DST_WARNING_DAYS: i64 = 366;

/// A job's next instants, and the DST changes among them.
#[derive(Debug, Clone)]
pub struct Preview {
    pub job: Job,
    pub instants: Vec<DateTime<Utc>>,
    /// The DST changes from now to the last instant that touch the schedule.
    pub dst: Vec<DstNote>,
}

/// The job's next instant when it is past but its run has not been claimed because its start,
/// deep in a long flexible window, is still ahead, and the edited `document`'s `schedule` has it
/// too, with a start (under the edit) still ahead: an edit does not drop it.
fn waiting_instant(
    before: &Job,
    document: &JobDocument,
    schedule: &Schedule,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let waiting = before.next_run_at.filter(|next| *next < now)?;
    let edited = Job { document: document.clone(), ..before.clone() };
    let on_schedule = schedule.first_at_or_after(waiting) == Some(waiting);
    (on_schedule && waiting + edited.start_offset(waiting) >= now).then_some(waiting)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().unwrap_or(DateTime::UNIX_EPOCH)
    }

    fn cron(expr: &str) -> Schedule {
        let doc = sundial_domain::job::ScheduleDocument { cron: Some(expr.into()), ..Default::default() };
        validation::parse_schedule(&doc, DateTime::UNIX_EPOCH).unwrap_or_else(|e| panic!("{expr}: {e}"))
    }

    #[test]
    fn the_latest_paused_instant_is_found_without_walking_the_pause() {
        let now = at("2026-11-27T12:00:00.500Z");
        let week_ago = now - chrono::Duration::days(7);
        assert_eq!(cron("* * * * * *").latest_before(week_ago, now), Some(at("2026-11-27T12:00:00Z")));
        assert_eq!(cron("30 2 * * *").latest_before(week_ago, now), Some(at("2026-11-27T02:30:00Z")));
        assert_eq!(cron("0 0 1 1 *").latest_before(week_ago, now), None, "none in the pause");
        let just_paused = at("2026-11-27T11:59:59.900Z");
        assert_eq!(cron("* * * * * *").latest_before(just_paused, now), Some(at("2026-11-27T12:00:00Z")));
    }
}
