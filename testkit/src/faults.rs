//! One fault layer for the storage roles and the runs queue: [`Faulty`] wraps a port and asks a
//! [`Script`] at each call what happens to it. A call may be refused before it takes effect (a
//! throttle, a 5xx), applied and then answered with an error (a timeout after the write; a lost
//! answer that the SDK's own retry finds as a failed condition), or held, before or after it
//! takes effect, while the test does something else (a [`Gate`], or any action: a heartbeat, a
//! cancel landing between a write and its answer).
//!
//! The delegating impls are generated once per role by `faulty!`, so a method added to a port is
//! wrapped without anyone writing it. The simulator keeps its own layer (`sim/src/faults.rs`):
//! it draws faults from a seed at every call and records each one in the trace its checker
//! reads, which a scripted test does not need.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use sundial_domain::audit::AuditRecord;
use sundial_domain::fence::Fence;
use sundial_domain::group::{Group, Links};
use sundial_domain::health::{Baseline, Trouble, TroubleMark, Troubles};
use sundial_domain::job::{Job, JobId};
use sundial_domain::named_calendar::NamedCalendar;
use sundial_domain::ports::queue::{QueueError, RunQueue};
use sundial_domain::ports::store::{
    Advance, CalendarStore, Catalogue, DueIndex, FenceStore, GroupStore, InFlightIndex, Inserted, Page,
    RunHistory, RunOutbox, RunWrites, StoreError, StoreResult,
};
use sundial_domain::run::{Published, Run, RunEvent, RunId, RunKey, RunState};
use sundial_domain::run_queue::Dispatch;

/// Something a test does in the middle of a call: `Fn`, so a rule that fires on every call can
/// run it each time.
pub type Action = Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// An [`Action`] that does `f` at once (moves a manual clock, say).
pub fn at_once(f: impl Fn() + Send + Sync + 'static) -> Action {
    Arc::new(move || {
        f();
        Box::pin(async {})
    })
}

/// What a rule injects: a storage error, or a queue error for the runs queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Store(StoreError),
    Queue(QueueError),
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        Failure::Store(e)
    }
}

impl From<QueueError> for Failure {
    fn from(e: QueueError) -> Self {
        Failure::Queue(e)
    }
}

impl Failure {
    fn store(self) -> StoreError {
        match self {
            Failure::Store(e) => e,
            Failure::Queue(e) => StoreError::Unavailable(e.to_string()),
        }
    }

    fn queue(self) -> QueueError {
        match self {
            Failure::Queue(e) => e,
            Failure::Store(e) => QueueError::Unavailable(e.to_string()),
        }
    }
}

/// A storage error as an outage reports it: retrying may help.
pub fn unavailable(what: &str) -> StoreError {
    StoreError::Unavailable(format!("injected: {what}"))
}

/// What happens to the calls of one operation (`"RunWrites::transition"`: the role and the
/// method), for the next call or for every call.
#[derive(Clone)]
pub struct Rule {
    op: &'static str,
    /// How many more calls it fires on; `None`: every one.
    left: Option<usize>,
    before: Option<Action>,
    refuse: Option<Failure>,
    after: Option<Action>,
    answer: Option<Failure>,
    /// For the runs queue: only the messages of these jobs (every message if empty).
    jobs: Vec<String>,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("op", &self.op)
            .field("left", &self.left)
            .field("refuse", &self.refuse)
            .field("answer", &self.answer)
            .field("jobs", &self.jobs)
            .finish_non_exhaustive()
    }
}

impl Rule {
    fn new(op: &'static str, left: Option<usize>) -> Self {
        let known = match op.strip_suffix('*') {
            Some(role) => OPS.iter().any(|o| o.starts_with(role)),
            None => OPS.contains(&op),
        };
        assert!(known, "no port operation is called `{op}`: one of {OPS:?}, or `Role::*`");
        Rule { op, left, before: None, refuse: None, after: None, answer: None, jobs: Vec::new() }
    }

    /// A rule for the next call of `op` (`Role::method`, or `Role::*` for any method of the role).
    pub fn once(op: &'static str) -> Self {
        Rule::new(op, Some(1))
    }

    /// A rule for every call of `op`.
    pub fn every(op: &'static str) -> Self {
        Rule::new(op, None)
    }

    /// The call is refused before it takes effect.
    pub fn refuse(mut self, failure: impl Into<Failure>) -> Self {
        self.refuse = Some(failure.into());
        self
    }

    /// The call takes effect, then is answered with `failure`.
    pub fn answer(mut self, failure: impl Into<Failure>) -> Self {
        self.answer = Some(failure.into());
        self
    }

    /// `action` runs before the call reaches the port.
    pub fn before(mut self, action: Action) -> Self {
        self.before = Some(action);
        self
    }

    /// `action` runs after the call took effect, before its answer is returned.
    pub fn after(mut self, action: Action) -> Self {
        self.after = Some(action);
        self
    }

    /// For the runs queue: the rule touches only the messages of `jobs`.
    pub fn for_jobs(mut self, jobs: &[String]) -> Self {
        self.jobs = jobs.to_vec();
        self
    }
}

/// The rules a [`Faulty`] port follows, in the order they were added: a call meets the first
/// rule of its operation that has calls left.
#[derive(Debug, Default)]
pub struct Script {
    rules: Mutex<Vec<Rule>>,
}

impl Script {
    pub fn new() -> Arc<Script> {
        Arc::new(Script::default())
    }

    /// Adds `rule` after the others. A rule the layer could not carry out is refused here, so a
    /// test never passes without its fault: the runs queue refuses messages (before, refuse, for
    /// some jobs); a store's call may also take effect and then be answered, but is not a job's
    /// message to pick out.
    pub fn add(&self, rule: Rule) -> &Self {
        if rule.op.starts_with("RunQueue::") {
            assert!(
                rule.after.is_none() && rule.answer.is_none(),
                "the runs queue refuses; it does not answer late"
            );
        } else {
            assert!(rule.jobs.is_empty(), "only the runs queue's rules pick out jobs");
        }
        self.rules.lock().unwrap().push(rule);
        self
    }

    /// The rule a call of `op` meets (for the queue, a message of `job`), its count taken.
    fn take(&self, op: &str, job: Option<&str>) -> Option<Rule> {
        let mut rules = self.rules.lock().unwrap();
        let rule = rules.iter_mut().find(|r| {
            (r.op == op || r.op.strip_suffix('*').is_some_and(|role| op.starts_with(role)))
                && r.left != Some(0)
                && (r.jobs.is_empty() || job.is_some_and(|j| r.jobs.iter().any(|x| x == j)))
        })?;
        if let Some(left) = &mut rule.left {
            *left -= 1;
        }
        Some(rule.clone())
    }

    /// One storage call of `op`: `call` reaches the port unless the rule refuses it.
    async fn store<T>(
        &self,
        op: &'static str,
        call: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let Some(rule) = self.take(op, None) else { return call.await };
        if let Some(before) = &rule.before {
            before().await;
        }
        if let Some(refused) = rule.refuse {
            return Err(refused.store());
        }
        let answer = call.await?;
        if let Some(after) = &rule.after {
            after().await;
        }
        match rule.answer {
            Some(failure) => Err(failure.store()),
            None => Ok(answer),
        }
    }
}

/// A point where a call waits until the test lets it go: the test awaits [`Gate::entered`], does
/// what must happen meanwhile, and calls [`Gate::open`].
#[derive(Debug)]
pub struct Gate {
    entered: tokio::sync::Notify,
    open: tokio::sync::Semaphore,
}

impl Gate {
    pub fn new() -> Arc<Gate> {
        Arc::new(Gate { entered: tokio::sync::Notify::new(), open: tokio::sync::Semaphore::new(0) })
    }

    /// The action that waits at this gate.
    pub fn wait(self: &Arc<Self>) -> Action {
        let gate = self.clone();
        Arc::new(move || {
            let gate = gate.clone();
            Box::pin(async move {
                gate.entered.notify_one();
                let _permit = gate.open.acquire().await;
            })
        })
    }

    /// Returns once a call waits here.
    pub async fn entered(&self) {
        self.entered.notified().await;
    }

    /// Lets every waiting call, and every later one, through.
    pub fn open(&self) {
        self.open.add_permits(tokio::sync::Semaphore::MAX_PERMITS / 2);
    }
}

/// A port wrapped in a [`Script`].
#[derive(Debug)]
pub struct Faulty<P: ?Sized> {
    inner: Arc<P>,
    script: Arc<Script>,
}

impl<P: ?Sized> Faulty<P> {
    pub fn new(inner: Arc<P>, script: &Arc<Script>) -> Arc<Self> {
        Arc::new(Faulty { inner, script: script.clone() })
    }
}

/// Every operation a rule may name.
const OPS: &[&str] = &[
    "Catalogue::create",
    "Catalogue::get",
    "Catalogue::find_by_name",
    "Catalogue::get_many",
    "Catalogue::list",
    "Catalogue::cursor_after",
    "Catalogue::list_all",
    "Catalogue::update",
    "Catalogue::version",
    "Catalogue::delete",
    "DueIndex::due_ids",
    "DueIndex::advance",
    "RunHistory::get",
    "RunHistory::list",
    "RunHistory::before",
    "RunHistory::after",
    "RunHistory::get_many",
    "RunWrites::insert",
    "RunWrites::transition",
    "RunWrites::transition_unchanged",
    "RunWrites::flag_failing",
    "RunWrites::troubles",
    "RunWrites::open_trouble",
    "RunWrites::close_troubles",
    "RunWrites::troubles_closed_by",
    "RunWrites::mark_resent",
    "RunWrites::mark_call_ended",
    "RunOutbox::record_event",
    "RunOutbox::take_event",
    "RunOutbox::mark_events_sent",
    "InFlightIndex::in_flight",
    "GroupStore::get",
    "GroupStore::put",
    "GroupStore::delete",
    "GroupStore::links",
    "GroupStore::link",
    "GroupStore::unlink",
    "CalendarStore::get",
    "CalendarStore::list",
    "CalendarStore::put",
    "CalendarStore::delete",
    "CalendarStore::links",
    "CalendarStore::link",
    "CalendarStore::unlink",
    "CalendarStore::unlink_stale",
    "FenceStore::get",
    "FenceStore::take",
    "FenceStore::remove",
    "RunQueue::send",
];

/// The impl of one storage role for `Faulty`: every method goes through the script under the
/// name `Role::method`, and `shards` (a property, not a call) is passed through.
macro_rules! faulty {
    ($role:ident { $(fn $sync:ident(&self) -> $sync_ret:ty;)* $(async fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)* }) => {
        #[async_trait]
        impl<P: $role + ?Sized> $role for Faulty<P> {
            $(fn $sync(&self) -> $sync_ret {
                self.inner.$sync()
            })*
            $(async fn $name(&self $(, $arg: $ty)*) -> $ret {
                let op = concat!(stringify!($role), "::", stringify!($name));
                self.script.store(op, self.inner.$name($($arg),*)).await
            })*
        }
    };
}

faulty!(Catalogue {
    async fn create(&self, job: &Job, max_jobs: u32, audit: Option<&AuditRecord>) -> StoreResult<()>;
    async fn get(&self, id: &JobId) -> StoreResult<Option<Job>>;
    async fn find_by_name(&self, owner: &str, name: &str) -> StoreResult<Option<Job>>;
    async fn get_many(&self, ids: &[JobId]) -> StoreResult<Vec<Job>>;
    async fn list(&self, owner: &str, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>>;
    async fn cursor_after(&self, job: &Job) -> StoreResult<String>;
    async fn list_all(&self, limit: u32, cursor: Option<&str>) -> StoreResult<Page<Job>>;
    async fn update(&self, before: &Job, after: &Job, audit: Option<&AuditRecord>) -> StoreResult<()>;
    async fn version(&self, id: &JobId, version: u64) -> StoreResult<Option<sundial_domain::versions::JobVersion>>;
    async fn delete(&self, job: &Job, audit: Option<&AuditRecord>) -> StoreResult<()>;
    async fn set_baseline(&self, id: &JobId, baseline: &Baseline) -> StoreResult<()>;
});

faulty!(DueIndex {
    fn shards(&self) -> u16;
    async fn due_ids(&self, bucket: &str) -> StoreResult<Vec<JobId>>;
    async fn advance(&self, job: &Job, to: &Advance) -> StoreResult<()>;
});

faulty!(RunHistory {
    async fn get(&self, job_id: &JobId, key: &RunKey) -> StoreResult<Option<Run>>;
    async fn list(&self, job_id: &JobId, limit: u32, cursor: Option<&str>, state: Option<RunState>) -> StoreResult<Page<Run>>;
    async fn before(&self, job_id: &JobId, key: &RunKey, limit: u32) -> StoreResult<Vec<Run>>;
    async fn after(&self, job_id: &JobId, key: &RunKey, until: DateTime<Utc>, limit: u32) -> StoreResult<Vec<Run>>;
    async fn get_many(&self, ids: &[RunId]) -> StoreResult<Vec<Run>>;
});

faulty!(RunWrites {
    async fn insert(&self, run: &Run, audit: Option<&AuditRecord>) -> StoreResult<Inserted>;
    async fn transition(&self, before: &Run, after: &Run, audit: Option<&AuditRecord>) -> StoreResult<()>;
    async fn transition_unchanged(&self, before: &Run, after: &Run) -> StoreResult<()>;
    async fn flag_failing(&self, job_id: &JobId, after: Option<&RunKey>, mark: &TroubleMark) -> StoreResult<()>;
    async fn troubles(&self, job_id: &JobId) -> StoreResult<Troubles>;
    async fn open_trouble(&self, job_id: &JobId, trouble: Trouble, mark: &TroubleMark) -> StoreResult<()>;
    async fn close_troubles(&self, job_id: &JobId, ended: &Troubles, by: &str) -> StoreResult<()>;
    async fn troubles_closed_by(&self, job_id: &JobId) -> StoreResult<Option<String>>;
    async fn mark_resent(&self, run: &Run, at: DateTime<Utc>) -> StoreResult<()>;
    async fn mark_call_ended(&self, run: &Run, attempt: u32) -> StoreResult<()>;
});

faulty!(RunOutbox {
    async fn record_event(&self, run: &Run, event: &RunEvent) -> StoreResult<()>;
    async fn take_event(&self, run: &Run, event: &RunEvent, now: DateTime<Utc>) -> StoreResult<()>;
    async fn mark_events_sent(&self, run: &Run, published: &Published, settle: bool) -> StoreResult<()>;
});

faulty!(InFlightIndex {
    fn shards(&self) -> u16;
    async fn in_flight(&self, until: DateTime<Utc>, shards: u16) -> StoreResult<Vec<RunId>>;
});

faulty!(GroupStore {
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<Group>>;
    async fn put(&self, group: &Group, expected: Option<u64>, audit: Option<&AuditRecord>) -> StoreResult<()>;
    async fn delete(&self, owner: &str, name: &str, version: u64, links_version: u64, audit: Option<&AuditRecord>) -> StoreResult<()>;
    async fn links(&self, owner: &str, name: &str) -> StoreResult<Links>;
    async fn link(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()>;
    async fn unlink(&self, owner: &str, name: &str, job: &str) -> StoreResult<()>;
});

faulty!(CalendarStore {
    async fn get(&self, owner: &str, name: &str) -> StoreResult<Option<NamedCalendar>>;
    async fn list(&self, owner: &str) -> StoreResult<Vec<NamedCalendar>>;
    async fn put(&self, calendar: &NamedCalendar, expected: Option<u64>, audit: Option<&AuditRecord>) -> StoreResult<()>;
    async fn delete(&self, owner: &str, name: &str, version: u64, links_version: u64, audit: Option<&AuditRecord>) -> StoreResult<()>;
    async fn links(&self, owner: &str, name: &str) -> StoreResult<Links>;
    async fn link(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()>;
    async fn unlink(&self, owner: &str, name: &str, job: &str) -> StoreResult<()>;
    async fn unlink_stale(&self, owner: &str, name: &str, job: &str, at: DateTime<Utc>) -> StoreResult<()>;
});

faulty!(FenceStore {
    async fn get(&self, job_id: &JobId) -> StoreResult<Option<Fence>>;
    async fn take(&self, job_id: &JobId, expected: Option<&RunKey>, run: &RunKey, previous: Option<&RunKey>) -> StoreResult<()>;
    async fn remove(&self, job_id: &JobId) -> StoreResult<()>;
});

/// The runs queue: each message of a batch meets the script on its own (a rule may touch only
/// some jobs' messages); the messages no rule refuses are sent together.
#[async_trait]
impl<P: RunQueue + ?Sized> RunQueue for Faulty<P> {
    async fn send(&self, batch: &[Dispatch]) -> Vec<Result<(), QueueError>> {
        let mut results: Vec<Option<Result<(), QueueError>>> = Vec::with_capacity(batch.len());
        let mut passed = Vec::new();
        for (i, dispatch) in batch.iter().enumerate() {
            let rule = self.script.take("RunQueue::send", Some(&dispatch.message.job_id));
            if let Some(before) = rule.as_ref().and_then(|r| r.before.clone()) {
                before().await;
            }
            match rule.and_then(|r| r.refuse) {
                Some(refused) => results.push(Some(Err(refused.queue()))),
                None => {
                    results.push(None);
                    passed.push(i);
                }
            }
        }
        let sent: Vec<Dispatch> = passed.iter().map(|&i| batch[i].clone()).collect();
        for (i, result) in passed.into_iter().zip(self.inner.send(&sent).await) {
            results[i] = Some(result);
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(QueueError::Unavailable("the queue gave no answer".into()))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sundial_memory::MemoryJobStore;

    fn job() -> Job {
        let at = chrono::TimeZone::with_ymd_and_hms(&Utc, 2030, 1, 1, 12, 0, 0).unwrap();
        crate::scenarios::tick::one_time_jobs(1, at).remove(0)
    }

    #[tokio::test]
    async fn a_refused_call_changes_nothing_and_an_answered_one_took_effect() {
        let script = Script::new();
        let store = Faulty::new(Arc::new(MemoryJobStore::new(1)), &script);
        let job = job();
        script.add(Rule::once("Catalogue::create").refuse(unavailable("refused")));
        assert!(store.create(&job, 10, None).await.is_err());
        assert_eq!(store.get(&job.id).await.unwrap(), None, "a refused call is not applied");

        script.add(Rule::once("Catalogue::create").answer(unavailable("lost")));
        assert!(store.create(&job, 10, None).await.is_err());
        assert!(store.get(&job.id).await.unwrap().is_some(), "an answer lost after the write");
        assert_eq!(store.create(&job, 10, None).await, Err(StoreError::NameTaken(job.document.name.clone())));
    }

    #[tokio::test]
    async fn a_rule_for_every_call_fires_on_each_and_once_only_on_the_next() {
        let script = Script::new();
        let store = Faulty::new(Arc::new(MemoryJobStore::new(1)), &script);
        script.add(Rule::once("DueIndex::due_ids").refuse(unavailable("once")));
        script.add(Rule::every("Catalogue::get").refuse(unavailable("every")));
        assert!(store.due_ids("b").await.is_err());
        assert!(store.due_ids("b").await.is_ok());
        for _ in 0..3 {
            assert!(store.get(&JobId::generate()).await.is_err());
        }
    }

    #[tokio::test]
    async fn a_gate_holds_a_call_until_it_is_opened() {
        let script = Script::new();
        let store = Faulty::new(Arc::new(MemoryJobStore::new(1)), &script);
        let gate = Gate::new();
        script.add(Rule::every("Catalogue::get_many").before(gate.wait()));
        let held = tokio::spawn({
            let store = store.clone();
            async move { store.get_many(&[]).await }
        });
        gate.entered().await;
        assert!(!held.is_finished());
        gate.open();
        assert_eq!(held.await.unwrap(), Ok(Vec::new()));
    }

    #[test]
    #[should_panic(expected = "the runs queue refuses")]
    fn a_rule_the_layer_cannot_carry_out_is_refused() {
        Script::new().add(Rule::once("RunQueue::send").answer(unavailable("late")));
    }

    #[test]
    #[should_panic(expected = "no port operation is called")]
    fn a_rule_naming_no_operation_is_refused() {
        let _ = Rule::once("RunWrites::transiton");
    }
}
