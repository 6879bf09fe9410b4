//! Workflows: jobs that run after other jobs (`depends_on`). [`Workflows`] keeps the graph sound
//! as jobs are written (parents resolved by id or name and checked for cycles and for instants
//! that coincide; each parent linked to its children before a child is written) and shows it;
//! [`cascade`] runs it, claiming a child's run when its parents' runs have ended.
//!
//! A parent lists its children (`Job::children`) so that a run's end reaches them without a
//! scan. The link is written first and removed last: a link whose child was never written, or
//! no longer names the parent, is ignored, while a child without its link would never run.

pub mod cascade;

use std::sync::Arc;
use sundial_domain::clock::Clock;
use sundial_domain::job::{Job, JobDocument, JobId};
use sundial_domain::ports::store::{Catalogue, Race, Raced, RunHistory, StoreError, until_won};
use sundial_domain::run::Run;
use sundial_domain::validation::ValidationError;
use sundial_domain::workflow::{Graph, GraphError, MAX_PARENTS};

/// Link and unlink edits retried on a concurrent change of the parent.
const LINK_ATTEMPTS: usize = 5;
/// Jobs read per page when the owner's graph is loaded.
const PAGE: u32 = 100;

/// Why a graph check or link failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkflowError {
    /// `depends_on` names what cannot be (422 at the API).
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// A parent kept changing while it was linked.
    #[error("a parent kept changing while it was linked; retry")]
    Contended,
    #[error(transparent)]
    Store(#[from] StoreError),
}

type Result<T> = std::result::Result<T, WorkflowError>;

/// The graph around a job: every job connected to it, each with its newest run, and the edges
/// from parent to child.
#[derive(Debug, Clone)]
pub struct GraphView {
    pub nodes: Vec<(Job, Option<Run>)>,
    pub edges: Vec<(JobId, JobId)>,
}

/// The jobs linked as `job`'s children that still name it as a parent (a link can outlive its
/// child's edit or deletion), by id.
pub async fn children_of(jobs: &dyn Catalogue, job: &Job) -> std::result::Result<Vec<Job>, StoreError> {
    if job.children.is_empty() {
        return Ok(Vec::new());
    }
    let mut children = jobs.get_many(&job.children).await?;
    children.retain(|c| c.owner == job.owner && c.parents().contains(&job.id));
    children.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(children)
}

/// The graph checks and links of the job use cases, and the graph they show.
#[derive(Debug, Clone)]
pub struct Workflows {
    catalogue: Arc<dyn Catalogue>,
    history: Arc<dyn RunHistory>,
    clock: Arc<dyn Clock>,
}

fn invalid(e: GraphError) -> WorkflowError {
    WorkflowError::Invalid(ValidationError::new("depends_on", e.to_string()))
}

impl Workflows {
    pub fn new(catalogue: Arc<dyn Catalogue>, history: Arc<dyn RunHistory>, clock: Arc<dyn Clock>) -> Self {
        Workflows { catalogue, history, clock }
    }

    /// Every job of `owner` (the owner's job count is bounded).
    async fn owner_jobs(&self, owner: &str) -> std::result::Result<Vec<Job>, StoreError> {
        let mut jobs = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.catalogue.list(owner, PAGE, cursor.as_deref()).await?;
            jobs.extend(page.items);
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(jobs),
            }
        }
    }

    /// Resolves `document.depends_on` (ids or names of `owner`'s jobs) to ids in place, and
    /// refuses unknown, repeated or self parents, a cycle through `itself` (the job being
    /// edited; `None` when it is being created), and parents whose instants never coincide.
    /// Every read is consistent (by id, by name lock, ancestors in batches), so a parent created
    /// a moment ago is found. Returns the parents' ids.
    pub async fn check_parents(
        &self,
        owner: &str,
        document: &mut JobDocument,
        itself: Option<&JobId>,
    ) -> Result<Vec<JobId>> {
        if document.depends_on.is_empty() {
            return Ok(Vec::new());
        }
        // A new job naming itself is the one cycle a create can make.
        if itself.is_none() && document.depends_on.contains(&document.name) {
            let name = document.name.clone();
            return Err(invalid(GraphError::Cycle(vec![name.clone(), name])));
        }
        if document.depends_on.len() > MAX_PARENTS {
            return Err(invalid(GraphError::TooMany(document.depends_on.len())));
        }
        let mut known: Vec<Job> = Vec::new();
        let mut parents: Vec<JobId> = Vec::new();
        for named in &document.depends_on {
            let by_id = match JobId::parse(named) {
                Some(id) => self.catalogue.get(&id).await?.filter(|j| j.owner == owner),
                None => None,
            };
            let found = match by_id {
                Some(job) => Some(job),
                None => self.catalogue.find_by_name(owner, named).await?,
            };
            let job = found.ok_or_else(|| invalid(GraphError::Unknown(named.clone())))?;
            if Some(&job.id) == itself {
                return Err(invalid(GraphError::ItSelf));
            }
            if parents.contains(&job.id) {
                return Err(invalid(GraphError::Repeated(named.clone())));
            }
            parents.push(job.id.clone());
            known.push(job);
        }
        self.add_ancestors(&mut known).await?;
        let graph = Graph::new(&known);
        if let Some(cycle) = itself.and_then(|id| graph.cycle(id, &parents)) {
            return Err(invalid(GraphError::Cycle(cycle)));
        }
        graph.coincide(&parents).map_err(invalid)?;
        document.depends_on = parents.iter().map(JobId::to_string).collect();
        Ok(parents)
    }

    /// Refuses an edit of `before` to `document` (its parents resolved) that would make the
    /// parents of a join below it stop coinciding — a root's schedule edited, or a middle job's
    /// parents — since the join would wait for instants that never come. Reads the owner's jobs
    /// only when the job has children and its schedule or parents change.
    pub async fn check_joins_below(&self, before: &Job, document: &JobDocument) -> Result<()> {
        let schedule_changed = document.schedule != before.document.schedule;
        if before.children.is_empty()
            || (!schedule_changed && document.depends_on == before.document.depends_on)
        {
            return Ok(());
        }
        let jobs = self.owner_jobs(&before.owner).await?;
        let mut edited = jobs.clone();
        if let Some(job) = edited.iter_mut().find(|j| j.id == before.id) {
            job.document = document.clone();
        }
        let field = if schedule_changed { "schedule" } else { "depends_on" };
        Graph::new(&jobs)
            .join_broken_by(&Graph::new(&edited), &before.id)
            .map_err(|e| WorkflowError::Invalid(ValidationError::new(field, e.to_string())))
    }

    /// Adds every ancestor of `known` to it, a generation at a time.
    async fn add_ancestors(&self, known: &mut Vec<Job>) -> std::result::Result<(), StoreError> {
        let mut next: Vec<JobId> = known.iter().flat_map(Job::parents).collect();
        loop {
            next.sort();
            next.dedup();
            next.retain(|id| !known.iter().any(|k| &k.id == id));
            if next.is_empty() {
                return Ok(());
            }
            let found = self.catalogue.get_many(&next).await?;
            next = found.iter().flat_map(Job::parents).collect();
            known.extend(found);
        }
    }

    /// Adds `child` to each parent's children (before the child is written).
    pub async fn link(&self, parents: &[JobId], child: &JobId) -> Result<()> {
        for parent in parents {
            self.change_children(parent, |children| {
                if !children.contains(child) {
                    children.push(child.clone());
                    children.sort();
                }
            })
            .await?;
        }
        Ok(())
    }

    /// Removes `child` from each parent's children (after the child stopped naming it); a
    /// failure leaves a link the cascade ignores, and is logged.
    pub async fn unlink(&self, parents: &[JobId], child: &JobId) {
        for parent in parents {
            if let Err(e) = self.change_children(parent, |children| children.retain(|c| c != child)).await {
                tracing::warn!(parent = %parent, child = %child, error = %e, "stale child link left on the parent");
            }
        }
    }

    /// Edits a parent's children under its version check, retried on a concurrent change.
    async fn change_children(&self, parent: &JobId, change: impl Fn(&mut Vec<JobId>)) -> Result<()> {
        let change = &change;
        let changed = until_won(LINK_ATTEMPTS, || async move {
            let Some(before) = self.catalogue.get(parent).await? else {
                return Err(invalid(GraphError::Unknown(parent.to_string())));
            };
            let mut children = before.children.clone();
            change(&mut children);
            if children == before.children {
                return Ok(Race::Won(()));
            }
            let after =
                Job { children, version: before.version + 1, updated_at: self.clock.now(), ..before.clone() };
            Ok(self.catalogue.update(&before, &after, None).await.raced()?)
        });
        changed.await?.ok_or(WorkflowError::Contended)
    }

    /// The jobs that name `job` as a parent.
    pub async fn children(&self, job: &Job) -> std::result::Result<Vec<Job>, StoreError> {
        children_of(self.catalogue.as_ref(), job).await
    }

    /// Every job connected to `job` through parents and children, each with its newest run.
    pub async fn graph(&self, job: &Job) -> std::result::Result<GraphView, StoreError> {
        let jobs = self.owner_jobs(&job.owner).await?;
        let graph = Graph::new(&jobs);
        let component = graph.component(&job.id);
        let ids: std::collections::BTreeSet<&JobId> = component.iter().map(|j| &j.id).collect();
        let mut nodes = Vec::with_capacity(component.len());
        let mut edges = Vec::new();
        for node in component {
            let latest = self.history.list(&node.id, 1, None, None).await?.items.into_iter().next();
            edges
                .extend(node.parents().into_iter().filter(|p| ids.contains(p)).map(|p| (p, node.id.clone())));
            nodes.push((node.clone(), latest));
        }
        Ok(GraphView { nodes, edges })
    }
}
