//! Workflows: jobs that run after other jobs (`depends_on`), as a graph of one owner's jobs.
//!
//! A job with parents has no schedule: it runs for an instant once every parent has a run for
//! that instant and all of those runs have ended. What it then does follows its
//! [`TriggerRule`]: under `all_success` a parent's run that did not succeed makes the child's run
//! SKIPPED `upstream_failed`; under `all_done` the child runs. A parent that has no run for the
//! instant while another's ended long ago ([`UPSTREAM_WAIT`]: one root paused, or catching up
//! differently after an outage) makes the child's run SKIPPED `upstream_missing`, so that a join
//! never stops in silence. The child's run has the parents'
//! run key, so one conditional put decides, for every claimer at once, that a child runs once per
//! instant. This module holds the pure part: the graph checks made before a job is written
//! (unknown parents, cycles, parents whose instants never coincide) and the decision for one
//! child and instant. The use cases read the jobs and runs and write what it decides.

use crate::job::{Job, JobId, ScheduleDocument, TriggerRule};
use crate::run::{Run, RunState};
use chrono::{DateTime, Duration, Utc};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Most parents one job may name.
pub const MAX_PARENTS: usize = 20;

/// How long a child waits for a parent that has no run for an instant, from the last end of
/// the parents' runs that exist. Longer than any lag of the tick's claims, so that only a parent
/// that will not run the instant (paused, its catch-up dropped it, its schedule changed) makes
/// the child's run SKIPPED `upstream_missing`.
pub const UPSTREAM_WAIT: Duration = Duration::hours(1);

/// What a child does for an instant, given its parents' runs for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// A parent's run for the instant has not ended: its end decides.
    Wait,
    /// Every parent's run for the instant has ended, but a parent has none yet: looked at again
    /// until [`UPSTREAM_WAIT`] after the last end, then the child's run is skipped.
    Missing,
    /// Every parent's run ended and the trigger rule lets the child run.
    Run,
    /// Every parent's run ended and one did not succeed, under `all_success`: the reason the
    /// child's run is SKIPPED with.
    Skip(String),
}

/// Whether `parent`, with no run for `instant`, will never have one: a scheduled job that is
/// paused, or whose schedule has moved past the instant (its catch-up dropped it, an end, an
/// edit). A parent with parents of its own gets its run when its own parents' runs end, and a
/// scheduled one the tick has not reached the instant of yet may still claim it: both are
/// waited for, however long that takes.
fn passed_without_a_run(parent: &Job, instant: DateTime<Utc>) -> bool {
    !parent.has_parents() && (parent.document.paused || parent.next_run_at.is_none_or(|next| next > instant))
}

/// The decision for `child`'s run for `instant` at `now` given `parents`: each parent (its job,
/// by which it is named in the reason) and its run for the instant, if it has one.
pub fn readiness(
    child: &Job,
    parents: &[(&Job, Option<&Run>)],
    instant: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Readiness {
    let coming = |(parent, run): &&(&Job, Option<&Run>)| match run {
        Some(run) => !run.state.is_terminal(),
        None => !passed_without_a_run(parent, instant),
    };
    if parents.iter().any(|p| coming(&p)) {
        return Readiness::Wait;
    }
    if let Some((absent, _)) = parents.iter().find(|(_, run)| run.is_none()) {
        let last_end = parents.iter().filter_map(|(_, run)| run.map(|r| r.updated_at)).max();
        return match last_end {
            Some(end) if end + UPSTREAM_WAIT <= now => Readiness::Skip(format!(
                "upstream_missing: parent {} ({}) has no run for this instant",
                absent.document.name, absent.id
            )),
            Some(_) => Readiness::Missing,
            None => Readiness::Wait,
        };
    }
    let failed = parents
        .iter()
        .find_map(|(parent, run)| run.filter(|r| r.state != RunState::Succeeded).map(|r| (parent, r)));
    match (child.document.trigger_rule, failed) {
        (TriggerRule::AllSuccess, Some((parent, run))) => Readiness::Skip(format!(
            "upstream_failed: parent {} ({}) ended {}",
            parent.document.name, parent.id, run.state
        )),
        _ => Readiness::Run,
    }
}

/// Why a job's parents are refused; the message names the jobs concerned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    #[error("no job named or with id `{0}`")]
    Unknown(String),
    #[error("names `{0}` more than once")]
    Repeated(String),
    #[error("a job cannot depend on itself")]
    ItSelf,
    #[error("makes a cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    #[error(
        "parents {0} and {1} share no ancestor and have different schedules, so their instants never coincide"
    )]
    NeverCoincide(String, String),
    #[error("has {0} entries; the limit is {MAX_PARENTS}")]
    TooMany(usize),
    #[error(
        "`{0}` runs after {1} and {2}, whose instants would no longer coincide, so it would never run again; repeat the edit with ?break_joins=true to make it anyway (the join's instants then end SKIPPED upstream_missing)"
    )]
    BreaksJoin(String, String, String),
}

/// One owner's jobs, as a graph: parents from each job's `depends_on`.
#[derive(Debug, Clone)]
pub struct Graph<'a> {
    jobs: BTreeMap<&'a JobId, &'a Job>,
}

impl<'a> Graph<'a> {
    pub fn new(jobs: &'a [Job]) -> Self {
        Graph { jobs: jobs.iter().map(|j| (&j.id, j)).collect() }
    }

    pub fn job(&self, id: &JobId) -> Option<&'a Job> {
        self.jobs.get(id).copied()
    }

    /// The parents of `id` as stored, skipping any the graph does not hold.
    fn parents_of(&self, id: &JobId) -> Vec<JobId> {
        self.job(id).map(|j| j.parents()).unwrap_or_default()
    }

    /// A cycle `job` would close if its parents were `parents`: the jobs on it by name, each
    /// depending on the next, from `job` back to `job`.
    pub fn cycle(&self, job: &JobId, parents: &[JobId]) -> Option<Vec<String>> {
        // Breadth first up from the new parents, for the shortest cycle; `reached_from` maps a
        // job to the one below it on the way up.
        let mut reached_from: BTreeMap<JobId, JobId> = BTreeMap::new();
        let mut queue: VecDeque<JobId> = VecDeque::new();
        for parent in parents {
            reached_from.insert(parent.clone(), job.clone());
            queue.push_back(parent.clone());
        }
        while let Some(at) = queue.pop_front() {
            for up in self.parents_of(&at) {
                if &up == job {
                    let mut path = vec![at.clone()];
                    while let Some(below) = reached_from.get(path.last()?).filter(|b| *b != job) {
                        path.push(below.clone());
                    }
                    let mut names = vec![self.name(job)];
                    names.extend(path.iter().rev().map(|id| self.name(id)));
                    names.push(self.name(job));
                    return Some(names);
                }
                if !reached_from.contains_key(&up) {
                    reached_from.insert(up.clone(), at.clone());
                    queue.push_back(up);
                }
            }
        }
        None
    }

    fn name(&self, id: &JobId) -> String {
        self.job(id).map_or_else(|| id.to_string(), |j| j.document.name.clone())
    }

    /// The scheduled jobs `id` descends from (itself, if it has no parents).
    pub fn roots(&self, id: &JobId) -> BTreeSet<JobId> {
        let mut roots = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut queue = VecDeque::from([id.clone()]);
        while let Some(at) = queue.pop_front() {
            if !seen.insert(at.clone()) {
                continue;
            }
            let parents = self.parents_of(&at);
            if parents.is_empty() {
                roots.insert(at);
            } else {
                queue.extend(parents);
            }
        }
        roots
    }

    /// Whether the instants of `parents` can coincide: all descend from one common root, or
    /// every root they descend from has the same schedule (and anchor). Otherwise a child would
    /// wait for an instant that never comes.
    pub fn coincide(&self, parents: &[JobId]) -> Result<(), GraphError> {
        let Some((first, rest)) = parents.split_first() else { return Ok(()) };
        let first_roots = self.roots(first);
        for other in rest {
            let roots = self.roots(other);
            if !first_roots.is_disjoint(&roots) {
                continue;
            }
            let same =
                first_roots.iter().chain(&roots).map(|r| self.timing(r)).collect::<BTreeSet<_>>().len() == 1;
            if !same {
                return Err(GraphError::NeverCoincide(self.name(first), self.name(other)));
            }
        }
        Ok(())
    }

    /// What decides a root's instants, comparable: its schedule document but for its jitter
    /// (runs are keyed by their instants, not their starts), and the anchor of a rate without
    /// `start_at` (its creation).
    fn timing(&self, id: &JobId) -> String {
        let Some(job) = self.job(id) else { return id.to_string() };
        let instants = job.document.schedule.clone().map(|s| ScheduleDocument { jitter_s: None, ..s });
        // A rate (alone or in a union) without `start_at` is anchored at the job's creation.
        let anchored_at_creation = |s: &ScheduleDocument| {
            let unanchored = |e: &ScheduleDocument| e.rate.is_some() && e.start_at.is_none();
            unanchored(s) || s.any.iter().flatten().any(unanchored)
        };
        match &instants {
            Some(s) if anchored_at_creation(s) => format!("{s:?} from {}", job.created_at.timestamp()),
            Some(s) => format!("{s:?}"),
            // Run-once jobs: their one instant is their creation (a trigger has its own key).
            None => format!("once at {:?}", job.next_run_at),
        }
    }

    /// The jobs that name `id` in `depends_on`.
    pub fn children(&self, id: &JobId) -> Vec<&'a Job> {
        self.jobs.values().copied().filter(|j| j.parents().contains(id)).collect()
    }

    /// The jobs below `id` (its children, theirs, and so on), each once.
    pub fn descendants(&self, id: &JobId) -> Vec<&'a Job> {
        let mut seen = BTreeSet::new();
        let mut queue: VecDeque<&'a Job> = self.children(id).into();
        let mut below = Vec::new();
        while let Some(job) = queue.pop_front() {
            if seen.insert(&job.id) {
                below.push(job);
                queue.extend(self.children(&job.id));
            }
        }
        below
    }

    /// The first join below `id` (a descendant with several parents) whose parents' instants
    /// coincide in `self` and would not in `edited` (the same jobs, one of them edited): it
    /// would wait for instants that never come.
    pub fn join_broken_by(&self, edited: &Graph<'_>, id: &JobId) -> Result<(), GraphError> {
        for join in edited.descendants(id) {
            let parents = join.parents();
            if parents.len() < 2 || self.coincide(&parents).is_err() {
                continue;
            }
            if let Err(GraphError::NeverCoincide(first, other)) = edited.coincide(&parents) {
                return Err(GraphError::BreaksJoin(join.document.name.clone(), first, other));
            }
        }
        Ok(())
    }

    /// Every job connected to `id` through parents and children (itself included), by id.
    pub fn component(&self, id: &JobId) -> Vec<&'a Job> {
        let mut seen = BTreeSet::new();
        let mut queue = VecDeque::from([id.clone()]);
        while let Some(at) = queue.pop_front() {
            if !seen.insert(at.clone()) {
                continue;
            }
            queue.extend(self.parents_of(&at));
            queue.extend(self.children(&at).into_iter().map(|c| c.id.clone()));
        }
        seen.iter().filter_map(|id| self.job(id)).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code: a panic is a failed test

    use super::*;
    use crate::fixtures::{at, job};
    use crate::run::RunKey;
    use crate::run::transition;
    use serde_json::json;

    /// A job named `name` after `parents` (none: on `schedule`).
    fn node(name: &str, parents: &[&Job], schedule: &str) -> Job {
        let depends_on: Vec<String> = parents.iter().map(|p| p.id.to_string()).collect();
        let mut j = if parents.is_empty() {
            job(json!({"name": name, "schedule": {"cron": schedule}}))
        } else {
            job(json!({"name": name, "depends_on": depends_on}))
        };
        j.document.name = name.into();
        j
    }

    fn run_of(job: &Job, state: RunState) -> Run {
        let mut run = transition::claim(
            job,
            RunKey::scheduled(at("2026-11-22T10:00:00Z")),
            at("2026-11-22T10:00:00Z"),
            at("2026-11-22T09:59:00Z"),
            chrono::Duration::days(1),
        );
        run.state = state;
        run
    }

    fn diamond() -> Vec<Job> {
        let a = node("extract", &[], "0 * * * *");
        let b = node("transform", &[&a], "");
        let c = node("aggregate", &[&a], "");
        let d = node("report", &[&b, &c], "");
        vec![a, b, c, d]
    }

    #[test]
    fn a_child_waits_for_every_parent_then_follows_its_trigger_rule() {
        let jobs = diamond();
        let (b, c, d) = (&jobs[1], &jobs[2], &jobs[3]);
        let (instant, now) = (at("2026-11-22T10:00:00Z"), at("2026-11-22T10:05:00Z"));
        let readiness =
            |child: &Job, parents: &[(&Job, Option<&Run>)]| readiness(child, parents, instant, now);
        let done = run_of(b, RunState::Succeeded);
        let failed = run_of(c, RunState::Failed);
        let running = run_of(c, RunState::Running);
        assert_eq!(
            readiness(d, &[(b, Some(&done)), (c, None)]),
            Readiness::Wait,
            "C follows A: its run comes"
        );
        assert_eq!(readiness(d, &[(b, Some(&done)), (c, Some(&running))]), Readiness::Wait);
        let ok = run_of(c, RunState::Succeeded);
        assert_eq!(readiness(d, &[(b, Some(&done)), (c, Some(&ok))]), Readiness::Run);
        let Readiness::Skip(reason) = readiness(d, &[(b, Some(&done)), (c, Some(&failed))]) else {
            panic!("a failed parent skips the child under all_success");
        };
        assert!(reason.starts_with("upstream_failed: parent aggregate"), "{reason}");
        assert!(reason.ends_with("FAILED"), "{reason}");
        let mut all_done = d.clone();
        all_done.document.trigger_rule = TriggerRule::AllDone;
        assert_eq!(readiness(&all_done, &[(b, Some(&done)), (c, Some(&failed))]), Readiness::Run);
        assert_eq!(readiness(&all_done, &[(b, Some(&done)), (c, Some(&running))]), Readiness::Wait);
    }

    /// Two roots on one schedule joined by `join`: `right` has no run for the instant. Only a
    /// root that will never run it (paused, or its schedule past it) is missing, and only an
    /// hour after the other runs ended does the join's instant end SKIPPED.
    #[test]
    fn a_root_that_will_not_run_the_instant_skips_the_join_as_upstream_missing_after_the_wait() {
        let instant = at("2026-11-22T10:00:00Z");
        let left = node("left", &[], "0 * * * *");
        let mut right = node("right", &[], "0 * * * *");
        let join = node("join", &[&left, &right], "");
        let mut done = run_of(&left, RunState::Succeeded);
        done.updated_at = at("2026-11-22T10:01:00Z");
        let just_before = done.updated_at + UPSTREAM_WAIT - chrono::Duration::seconds(1);
        let after_wait = done.updated_at + UPSTREAM_WAIT;

        // The tick has not reached the instant on `right`: its run may come, however late.
        right.next_run_at = Some(instant);
        assert_eq!(
            readiness(&join, &[(&left, Some(&done)), (&right, None)], instant, after_wait),
            Readiness::Wait
        );
        // Its schedule moved past the instant without a run (catch-up dropped it), or it is paused.
        right.next_run_at = Some(at("2026-11-22T11:00:00Z"));
        let parents = [(&left, Some(&done)), (&right, None)];
        assert_eq!(readiness(&join, &parents, instant, just_before), Readiness::Missing);
        let Readiness::Skip(reason) = readiness(&join, &parents, instant, after_wait) else {
            panic!("a parent missing past the wait skips the child");
        };
        assert!(reason.starts_with("upstream_missing: parent right"), "{reason}");
        let mut paused = node("right", &[], "0 * * * *");
        paused.document.paused = true;
        paused.next_run_at = Some(instant);
        assert!(matches!(
            readiness(&join, &[(&left, Some(&done)), (&paused, None)], instant, after_wait),
            Readiness::Skip(_)
        ));
        // A parent still running is waited for, however long the other has been done.
        let running = run_of(&left, RunState::Running);
        let late = done.updated_at + UPSTREAM_WAIT * 3;
        assert_eq!(
            readiness(&join, &[(&left, Some(&running)), (&right, None)], instant, late),
            Readiness::Wait
        );
        // Under all_done too: a missing parent is not a done one.
        let mut all_done = join.clone();
        all_done.document.trigger_rule = TriggerRule::AllDone;
        assert!(matches!(readiness(&all_done, &parents, instant, late), Readiness::Skip(_)));
    }

    /// A parent with parents of its own has no run until they end (a long run, a backoff above
    /// it): it is waited for, never taken as missing.
    #[test]
    fn a_parent_below_another_is_waited_for_however_long() {
        let jobs = diamond();
        let (a, c, d) = (&jobs[0], &jobs[2], &jobs[3]);
        let instant = at("2026-11-22T10:00:00Z");
        let done = run_of(a, RunState::Succeeded);
        let long_after = done.updated_at + UPSTREAM_WAIT * 24;
        assert_eq!(readiness(d, &[(a, Some(&done)), (c, None)], instant, long_after), Readiness::Wait);
    }

    #[test]
    fn a_cycle_is_named_job_by_job() {
        let jobs = diamond();
        let graph = Graph::new(&jobs);
        // extract after report: extract -> report -> transform -> extract.
        let cycle = graph.cycle(&jobs[0].id, &[jobs[3].id.clone()]).unwrap();
        assert_eq!(cycle.first().unwrap(), "extract");
        assert_eq!(cycle.last().unwrap(), "extract");
        assert_eq!(cycle.len(), 4, "{cycle:?}");
        assert_eq!(cycle[1], "report");
        assert!(["transform", "aggregate"].contains(&cycle[2].as_str()), "{cycle:?}");
        // transform after aggregate: no cycle (both follow extract).
        assert_eq!(graph.cycle(&jobs[1].id, &[jobs[2].id.clone()]), None);
    }

    #[test]
    fn parents_coincide_through_a_common_root_or_identical_schedules_only() {
        let a = node("a", &[], "0 * * * *");
        let b = node("b", &[&a], "");
        let c = node("c", &[&a], "");
        let twin = node("twin", &[], "0 * * * *");
        let other = node("other", &[], "30 * * * *");
        let after_other = node("after-other", &[&other], "");
        let jobs = vec![a, b, c, twin, other, after_other];
        let graph = Graph::new(&jobs);
        let id = |i: usize| jobs[i].id.clone();
        assert_eq!(graph.coincide(&[id(1), id(2)]), Ok(()), "a common ancestor");
        assert_eq!(graph.coincide(&[id(1), id(3)]), Ok(()), "the same schedule");
        assert_eq!(
            graph.coincide(&[id(1), id(5)]),
            Err(GraphError::NeverCoincide("b".into(), "after-other".into()))
        );
        assert_eq!(graph.roots(&id(5)), BTreeSet::from([id(4)]));
    }

    #[test]
    fn an_edit_that_makes_a_joins_parents_stop_coinciding_names_the_join() {
        let left = node("left", &[], "0 * * * *");
        let right = node("right", &[], "0 * * * *");
        let middle = node("middle", &[&right], "");
        let join = node("join", &[&left, &middle], "");
        let jobs = vec![left, right, middle, join];
        let was = Graph::new(&jobs);
        let mut edited = jobs.clone();
        edited[1] = node("right", &[], "30 * * * *");
        edited[1].id = jobs[1].id.clone();
        assert_eq!(
            was.join_broken_by(&Graph::new(&edited), &jobs[1].id),
            Err(GraphError::BreaksJoin("join".into(), "left".into(), "middle".into()))
        );
        // Nothing edited breaks nothing; nor does an edit of a job with no join below it.
        assert_eq!(was.join_broken_by(&Graph::new(&jobs), &jobs[1].id), Ok(()));
        assert_eq!(was.join_broken_by(&Graph::new(&edited), &jobs[3].id), Ok(()));
    }

    #[test]
    fn the_component_holds_every_connected_job_and_no_other() {
        let mut jobs = diamond();
        jobs.push(node("alone", &[], "0 * * * *"));
        let graph = Graph::new(&jobs);
        let names: BTreeSet<_> =
            graph.component(&jobs[1].id).iter().map(|j| j.document.name.clone()).collect();
        assert_eq!(names, BTreeSet::from(["extract", "transform", "aggregate", "report"].map(String::from)));
        assert_eq!(graph.children(&jobs[0].id).len(), 2);
    }
}
