//! Runs in memory: [`MemoryRunStore`], the [`RunStore`] that behaves as the DynamoDB runs table
//! does (`sundial_aws::dynamo::runs`).
//!
//! What it keeps, as that table does: each run as stored under (job, encoded run key), in the
//! key's text order (so at one instant a manual run, `#m#…`, sorts before the scheduled one,
//! `#s`); instants as the table keeps them (key instant and `due_at` to the whole second,
//! `expires_at` in epoch seconds, events ordered by time then id); the sparse in-flight index (a
//! partition per run, set when the run is written whole and removed only where the adapter
//! removes it); and each job's told failing streak and open troubles. Every write checks what the table's
//! condition checks and fails with the same error: a lost condition is `Conflict`, a request
//! DynamoDB refuses as such (a document path to an event that is not there, a key range upside
//! down, a batch naming a key twice) is `Rejected`.

use crate::audit::MemoryAuditTrail;
use crate::guard::lock;
use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use sundial_domain::audit::AuditRecord;
use sundial_domain::due_index::{format_instant, parse_instant};
use sundial_domain::health::{Trouble, TroubleMark, Troubles};
use sundial_domain::job::JobId;
use sundial_domain::ports::store::{
    InFlightIndex, Inserted, Page, RunHistory, RunOutbox, RunWrites, StoreError, StoreResult,
    in_flight_shard, in_flight_when_written, transition_leaves_in_flight,
};
use sundial_domain::run::{Published, Run, RunEvent, RunId, RunKey, RunState};

/// A run as stored, with its in-flight index partition while it is in the index.
#[derive(Debug, Clone)]
struct Stored {
    run: Run,
    in_flight: Option<u16>,
}

/// (job id, encoded run key): the table's key, in its order.
type Key = (String, String);

#[derive(Debug, Default)]
struct State {
    runs: BTreeMap<Key, Stored>,
    /// Per job, the key of the success before the last failing streak told (`-`: none).
    failing: HashMap<String, String>,
    /// Per job, the troubles told and not recovered from.
    troubles: HashMap<String, Troubles>,
    /// Per job, the run that last closed its troubles.
    closed_by: HashMap<String, String>,
    /// A job whose run inserts fail as throttled (a test's outage).
    failing_inserts: Option<JobId>,
}

/// The `after_run` of a streak with no success in view: sorts before every run key.
const NO_SUCCESS: &str = "-";

/// Runs in memory, their in-flight index in `shards` partitions.
#[derive(Debug)]
pub struct MemoryRunStore {
    shards: u16,
    state: Mutex<State>,
    audit: MemoryAuditTrail,
}

impl MemoryRunStore {
    /// A store whose in-flight index has `shards` partitions (at least one), as the DynamoDB
    /// store built with the same count has.
    pub fn new(shards: u16) -> Self {
        MemoryRunStore {
            shards: shards.max(1),
            state: Mutex::new(State::default()),
            audit: MemoryAuditTrail::new(),
        }
    }

    /// This store, writing the records of its changes into `trail` (shared with the others).
    pub fn recording_to(mut self, trail: MemoryAuditTrail) -> Self {
        self.audit = trail;
        self
    }

    /// Every run of every job, as stored, in key order: what a scan of the table shows.
    pub fn all(&self) -> Vec<Run> {
        lock(&self.state).runs.values().map(|s| s.run.clone()).collect()
    }

    /// Makes every insert of a run of `job` fail as throttled; `None`: inserts work again.
    pub fn fail_inserts_of(&self, job: Option<&JobId>) {
        lock(&self.state).failing_inserts = job.cloned();
    }

    /// Whether the run is in the in-flight index (in any partition).
    pub fn is_in_flight(&self, job_id: &JobId, key: &RunKey) -> bool {
        lock(&self.state).runs.get(&key_of(job_id, key)).is_some_and(|s| s.in_flight.is_some())
    }

    /// The conditional write behind both transitions; with `unchanged`, also fenced by the
    /// `updated_at` that was read.
    fn write_transition(
        &self,
        before: &Run,
        after: &Run,
        unchanged: bool,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        // New events join the run in the same write: those `after` has and `before` had not.
        let new: Vec<&RunEvent> =
            after.events.iter().filter(|e| !before.events.iter().any(|b| b.id == e.id)).collect();
        distinct(new.iter().map(|e| e.id.as_str()))?;
        let mut state = lock(&self.state);
        let Some(stored) = state.runs.get_mut(&key_of(&before.job_id, &before.key)) else {
            return Err(StoreError::Conflict);
        };
        let run = &mut stored.run;
        let leaves = transition_leaves_in_flight(before, after);
        let fenced = run.state == before.state
            && run.attempt == before.attempt
            && (!unchanged || run.updated_at == before.updated_at)
            && !new.iter().any(|e| run.events.iter().any(|s| s.id == e.id))
            // Leaving the index, no event may have been recorded since the read.
            && (!leaves || run.events.len() == before.events.len());
        if !fenced {
            return Err(StoreError::Conflict);
        }
        run.state = after.state;
        run.attempt = after.attempt;
        run.attempts = after.attempts.clone();
        run.updated_at = after.updated_at;
        run.lease_until = after.lease_until;
        run.retry_at = after.retry_at;
        run.reason = after.reason.clone();
        // Set, never removed (a transition from a read older than its mark keeps it).
        if after.call_ended.is_some() && after.call_ended != before.call_ended {
            run.call_ended = after.call_ended;
        }
        // Events already recorded are not rewritten by a transition (marks are
        // `mark_events_sent`'s); only new ones are added.
        run.events.extend(new.into_iter().cloned());
        sort_events(&mut run.events);
        if leaves {
            stored.in_flight = None;
        }
        self.audit.append(audit);
        Ok(())
    }

    /// Up to `limit` runs of the job whose encoded keys `keep`, in key order or newest first.
    fn runs_where(
        &self,
        job_id: &JobId,
        keep: impl Fn(&str) -> bool,
        forward: bool,
        limit: usize,
    ) -> Vec<Run> {
        let state = lock(&self.state);
        let runs = job_runs(&state, job_id).filter(|(key, _)| keep(key)).map(|(_, s)| s.run.clone());
        if forward { runs.take(limit).collect() } else { runs.rev().take(limit).collect() }
    }
}

fn key_of(job_id: &JobId, key: &RunKey) -> Key {
    (job_id.to_string(), key.encode())
}

/// The job's stored runs, in key order.
fn job_runs<'a>(
    state: &'a State,
    job_id: &JobId,
) -> impl DoubleEndedIterator<Item = (&'a str, &'a Stored)> + 'a {
    // Every key of the job sorts between (job, "") and (job + NUL, "").
    let id = job_id.to_string();
    let end = (format!("{id}\0"), String::new());
    state.runs.range((id, String::new())..end).map(|((_, k), s)| (k.as_str(), s))
}

/// DynamoDB refuses an update whose document paths overlap (the same event named twice).
fn distinct<'a>(ids: impl Iterator<Item = &'a str>) -> StoreResult<()> {
    let mut seen = HashSet::new();
    for id in ids {
        if !seen.insert(id) {
            return Err(StoreError::Rejected(format!(
                "Two document paths overlap with each other: events.{id}"
            )));
        }
    }
    Ok(())
}

/// The order events are read back in: by time, then id.
fn sort_events(events: &mut [RunEvent]) {
    events.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
}

fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    parse_instant(&format_instant(t)).unwrap_or(t)
}

/// The run as the table keeps it: its key's instant and `due_at` to the second, `expires_at`
/// in epoch seconds, events in read order.
fn stored_form(run: &Run) -> Run {
    let key = RunKey::decode(&run.key.encode())
        .unwrap_or_else(|| RunKey { instant: whole_second(run.key.instant), manual: run.key.manual.clone() });
    let mut events = run.events.clone();
    sort_events(&mut events);
    Run {
        key,
        due_at: whole_second(run.due_at),
        expires_at: DateTime::from_timestamp(run.expires_at.timestamp(), 0).unwrap_or_default(),
        events,
        ..run.clone()
    }
}

/// A batch read refuses a batch (of up to 100) naming a key twice, as BatchGetItem does.
fn no_duplicates(ids: &[RunId]) -> StoreResult<()> {
    for chunk in ids.chunks(100) {
        let mut seen = HashSet::new();
        if !chunk.iter().all(|id| seen.insert(key_of(&id.job_id, &id.key))) {
            return Err(StoreError::Rejected("Provided list of item keys contains duplicates".into()));
        }
    }
    Ok(())
}

#[async_trait]
impl RunHistory for MemoryRunStore {
    async fn get(&self, job_id: &JobId, key: &RunKey) -> StoreResult<Option<Run>> {
        Ok(lock(&self.state).runs.get(&key_of(job_id, key)).map(|s| s.run.clone()))
    }

    async fn list(
        &self,
        job_id: &JobId,
        limit: u32,
        cursor: Option<&str>,
        state: Option<RunState>,
    ) -> StoreResult<Page<Run>> {
        let limit = limit.max(1) as usize;
        let start = match cursor {
            None => None,
            Some(c) => {
                // `<job id>\n<run key>`: a cursor continues the listing of its own job only.
                let bytes = URL_SAFE_NO_PAD.decode(c).map_err(|_| StoreError::BadCursor)?;
                let text = String::from_utf8(bytes).map_err(|_| StoreError::BadCursor)?;
                let (job, key) = text.split_once('\n').ok_or(StoreError::BadCursor)?;
                if job != job_id.as_str() {
                    return Err(StoreError::BadCursor);
                }
                RunKey::decode(key).ok_or(StoreError::BadCursor)?;
                Some(key.to_string())
            }
        };
        let mut runs = self.runs_where(
            job_id,
            |key| start.as_deref().is_none_or(|start| key < start),
            false,
            usize::MAX,
        );
        runs.retain(|run| state.is_none_or(|s| run.state == s));
        runs.truncate(limit + 1);
        let next = if runs.len() > limit {
            runs.truncate(limit);
            runs.last().map(|r| URL_SAFE_NO_PAD.encode(format!("{job_id}\n{}", r.key.encode())))
        } else {
            None
        };
        Ok(Page { items: runs, next })
    }

    async fn before(&self, job_id: &JobId, key: &RunKey, limit: u32) -> StoreResult<Vec<Run>> {
        let key = key.encode();
        Ok(self.runs_where(job_id, |k| k < key.as_str(), false, limit.max(1) as usize))
    }

    async fn after(
        &self,
        job_id: &JobId,
        key: &RunKey,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<Run>> {
        let (lower, upper) = (key.encode(), format!("{}#~", format_instant(until)));
        if lower > upper {
            // `BETWEEN` with its bounds upside down is refused as such.
            return Err(StoreError::Rejected(
                "Invalid KeyConditionExpression: the BETWEEN operator requires upper bound to be greater than or equal to lower bound".into(),
            ));
        }
        let keep = |k: &str| k > lower.as_str() && k <= upper.as_str();
        Ok(self.runs_where(job_id, keep, true, limit as usize))
    }

    async fn get_many(&self, ids: &[RunId]) -> StoreResult<Vec<Run>> {
        no_duplicates(ids)?;
        let state = lock(&self.state);
        Ok(ids
            .iter()
            .filter_map(|id| state.runs.get(&key_of(&id.job_id, &id.key)))
            .map(|s| s.run.clone())
            .collect())
    }
}

#[async_trait]
impl RunWrites for MemoryRunStore {
    async fn insert(&self, run: &Run, audit: Option<&AuditRecord>) -> StoreResult<Inserted> {
        let stored = stored_form(run);
        let mut state = lock(&self.state);
        if state.failing_inserts.as_ref() == Some(&stored.job_id) {
            return Err(StoreError::Unavailable("injected: throttled".into()));
        }
        let key = key_of(&stored.job_id, &stored.key);
        if let Some(existing) = state.runs.get(&key) {
            return Ok(Inserted::Exists(Box::new(existing.run.clone())));
        }
        let in_flight = in_flight_when_written(&stored)
            .then(|| in_flight_shard(&stored.job_id, &stored.key, self.shards));
        state.runs.insert(key, Stored { run: stored, in_flight });
        self.audit.append(audit);
        Ok(Inserted::Created)
    }

    async fn transition(&self, before: &Run, after: &Run, audit: Option<&AuditRecord>) -> StoreResult<()> {
        self.write_transition(before, after, false, audit)
    }

    async fn transition_unchanged(&self, before: &Run, after: &Run) -> StoreResult<()> {
        self.write_transition(before, after, true, None)
    }

    async fn flag_failing(
        &self,
        job_id: &JobId,
        after: Option<&RunKey>,
        mark: &TroubleMark,
    ) -> StoreResult<()> {
        // A streak is named by the key of the success before it, and keys only grow.
        let after = after.map_or_else(|| NO_SUCCESS.to_string(), RunKey::encode);
        let mut state = lock(&self.state);
        match state.failing.get(job_id.as_str()) {
            Some(told) if *told >= after => Err(StoreError::Conflict),
            _ => {
                state.failing.insert(job_id.to_string(), after);
                state.troubles.entry(job_id.to_string()).or_default().failing = Some(mark.clone());
                Ok(())
            }
        }
    }

    async fn troubles(&self, job_id: &JobId) -> StoreResult<Troubles> {
        Ok(lock(&self.state).troubles.get(job_id.as_str()).cloned().unwrap_or_default())
    }

    async fn open_trouble(&self, job_id: &JobId, trouble: Trouble, mark: &TroubleMark) -> StoreResult<()> {
        let mut state = lock(&self.state);
        let troubles = state.troubles.entry(job_id.to_string()).or_default();
        if troubles.get(trouble).is_some() {
            return Err(StoreError::Conflict);
        }
        troubles.set(trouble, Some(mark.clone()));
        Ok(())
    }

    async fn close_troubles(&self, job_id: &JobId, ended: &Troubles, by: &str) -> StoreResult<()> {
        let mut state = lock(&self.state);
        let troubles = state.troubles.entry(job_id.to_string()).or_default();
        if ended.open().any(|(trouble, mark)| troubles.get(trouble) != Some(mark)) {
            return Err(StoreError::Conflict);
        }
        if ended.is_empty() {
            return Ok(());
        }
        for (trouble, _) in ended.open() {
            troubles.set(trouble, None);
        }
        state.closed_by.insert(job_id.to_string(), by.to_string());
        Ok(())
    }

    async fn troubles_closed_by(&self, job_id: &JobId) -> StoreResult<Option<String>> {
        Ok(lock(&self.state).closed_by.get(job_id.as_str()).cloned())
    }

    async fn mark_resent(&self, run: &Run, at: DateTime<Utc>) -> StoreResult<()> {
        let mut state = lock(&self.state);
        let stored = state.runs.get_mut(&key_of(&run.job_id, &run.key)).ok_or(StoreError::Conflict)?;
        stored.run.resent_at = Some(at);
        Ok(())
    }

    async fn mark_call_ended(&self, run: &Run, attempt: u32) -> StoreResult<()> {
        let mut state = lock(&self.state);
        let stored = state.runs.get_mut(&key_of(&run.job_id, &run.key)).ok_or(StoreError::Conflict)?;
        if stored.run.attempt != attempt {
            return Err(StoreError::Conflict);
        }
        stored.run.call_ended = Some(attempt);
        Ok(())
    }
}

#[async_trait]
impl RunOutbox for MemoryRunStore {
    async fn record_event(&self, run: &Run, event: &RunEvent) -> StoreResult<()> {
        let shards = self.shards;
        let mut state = lock(&self.state);
        let stored = state
            .runs
            .get_mut(&key_of(&run.job_id, &run.key))
            .filter(|s| s.run.state == run.state && s.run.attempt == run.attempt)
            .filter(|s| !s.run.events.iter().any(|e| e.id == event.id))
            .ok_or(StoreError::Conflict)?;
        stored.run.events.push(event.clone());
        sort_events(&mut stored.run.events);
        // An unsent event on an ended run puts it back in the index, as the table's write does.
        if run.state.is_terminal() && !event.sent {
            stored.in_flight = Some(in_flight_shard(&run.job_id, &run.key, shards));
        }
        Ok(())
    }

    async fn take_event(&self, run: &Run, event: &RunEvent, now: DateTime<Utc>) -> StoreResult<()> {
        let mut state = lock(&self.state);
        let stored = state
            .runs
            .get_mut(&key_of(&run.job_id, &run.key))
            .and_then(|s| s.run.events.iter_mut().find(|e| e.id == event.id))
            // Still unsent, and taken by nobody since it was read.
            .filter(|e| !e.sent && e.taken_at == event.taken_at)
            .ok_or(StoreError::Conflict)?;
        stored.taken_at = Some(now);
        Ok(())
    }

    async fn mark_events_sent(&self, run: &Run, published: &Published, settle: bool) -> StoreResult<()> {
        if published.is_empty() && !settle {
            return Ok(());
        }
        // `events.<id>.sent`, `.shared_sent`, `.topics_sent` and each channel's mark are distinct
        // paths; one id twice in the same list is not.
        distinct(published.sent.iter().map(String::as_str))?;
        distinct(published.shared_only.iter().map(String::as_str))?;
        distinct(published.topics_only.iter().map(String::as_str))?;
        let channel_paths: Vec<String> =
            published.channels.iter().map(|(id, channel, _)| format!("{id}.{}", channel.as_str())).collect();
        distinct(channel_paths.iter().map(String::as_str))?;
        let mut state = lock(&self.state);
        let Some(stored) = state.runs.get_mut(&key_of(&run.job_id, &run.key)) else {
            return Err(StoreError::Conflict);
        };
        // Only a run that has ended leaves the index.
        if settle && !stored.run.state.is_terminal() {
            return Err(StoreError::Conflict);
        }
        // Nor one with an event the caller has not seen.
        if settle && stored.run.events.len() != run.events.len() {
            return Err(StoreError::Conflict);
        }
        let ids = published.sent.iter().chain(&published.shared_only).chain(&published.topics_only);
        let mut ids = ids.chain(published.channels.iter().map(|(id, _, _)| id));
        if let Some(missing) = ids.find(|id| !stored.run.events.iter().any(|e| e.id == **id)) {
            return Err(StoreError::Rejected(format!(
                "The document path provided in the update expression is invalid for update: events.{missing}"
            )));
        }
        for event in stored.run.events.iter_mut() {
            event.sent |= published.sent.contains(&event.id);
            event.shared_sent |= published.shared_only.contains(&event.id);
            event.topics_sent |= published.topics_only.contains(&event.id);
            for (_, channel, mark) in published.channels.iter().filter(|(id, _, _)| *id == event.id) {
                event.channels.insert(*channel, mark.clone());
            }
        }
        if settle {
            stored.in_flight = None;
        }
        Ok(())
    }
}

#[async_trait]
impl InFlightIndex for MemoryRunStore {
    fn shards(&self) -> u16 {
        self.shards
    }

    async fn in_flight(&self, until: DateTime<Utc>, shards: u16) -> StoreResult<Vec<RunId>> {
        let until = format_instant(until);
        let state = lock(&self.state);
        let mut ids: Vec<RunId> = state
            .runs
            .values()
            .filter(|s| s.in_flight.is_some_and(|shard| shard < shards))
            .filter(|s| format_instant(s.run.key.instant) <= until)
            .map(|s| s.run.id())
            .collect();
        ids.sort_by(|a, b| a.chronological().cmp(&b.chronological()));
        Ok(ids)
    }
}
