//! The ports' contract: what every store and queue promises the use cases, as generic checks
//! that run against each implementation — the in-memory doubles of `sundial-memory` and the
//! DynamoDB and SQS adapters on the emulator (`tests/tests/contract.rs` runs both).
//!
//! Each `…_keeps_its_promises` function takes a port and states its promises one after another;
//! a failed assertion names the promise it checks. The store suites share one store between
//! their parts (every part uses owners and jobs of its own), except the tick-state suite, which
//! needs a fresh store (there is one tick state per deployment). The queue suite needs fresh
//! queues, and a [`Pace`]: a manual clock is moved (the in-memory queue), real time is waited
//! out (SQS). Timing checks only ever assert a lower bound measured conservatively (a delayed
//! message seen no earlier than its delay after the send began) and poll for what must arrive
//! within a generous deadline, so a loaded machine cannot fail them.

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use sundial_domain::channels::{Channel, ChannelMark};
use sundial_domain::clock::{Clock, ManualClock};
use sundial_domain::due_index::{bucket, due_bucket, shard_of};
use sundial_domain::fence::Fence;
use sundial_domain::health::{Baseline, FailureRate, Trouble, TroubleMark, Troubles};
use sundial_domain::job::{CatchupPolicy, EventKind, Gap, GapCause, Job, JobDocument, JobId};
use sundial_domain::ports::queue::{Received, RunInbox, RunQueue};
use sundial_domain::ports::store::{
    Advance, AuditTrail, CalendarStore, Catalogue, Claim, FenceStore, GroupStore, IdempotencyStore, Inserted,
    JobStore, KeyStore, RunStore, RunWrites, StoreError, StoredResponse, TickState, TickStateStore,
};
use sundial_domain::run::event::EventDetail;
use sundial_domain::run::{Attempt, Published, Run, RunEvent, RunId, RunKey, RunMessage, RunState};
use sundial_domain::run_limit::{Mark, RunCount};
use sundial_domain::run_queue::{Dispatch, HOLD_S, MAX_DELAY_S};

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", ulid::Ulid::generate().to_string().to_ascii_lowercase())
}

// ---------------------------------------------------------------------------------------------
// Jobs

fn document(name: &str) -> JobDocument {
    serde_json::from_value(json!({
        "name": name,
        "schedule": {"cron": "*/5 * * * *"},
        "target": {"type": "http", "url": "http://127.0.0.1:9/hook"},
        "payload": {"n": 1}
    }))
    .unwrap()
}

/// A job of `owner` named `name`, next due at `next`, as the API would create it.
fn job(owner: &str, name: &str, next: Option<DateTime<Utc>>) -> Job {
    Job {
        id: JobId::generate(),
        owner: owner.to_string(),
        document: document(name),
        version: 1,
        // Sub-second times are kept exactly.
        created_at: at("2031-01-01T00:00:00.123456789Z"),
        updated_at: at("2031-01-01T00:00:00.123456789Z"),
        next_run_at: next,
        signing_secret: "secret".into(),
        pauses: Vec::new(),
        children: Vec::new(),
        gaps: Vec::new(),
        skips: Vec::new(),
        counted: Default::default(),
        baseline: None,
        versions: Vec::new(),
    }
}

/// The next version of `job`, with `change` applied to its document.
fn edited(job: &Job, change: impl FnOnce(&mut JobDocument)) -> Job {
    let mut next =
        Job { version: job.version + 1, updated_at: job.updated_at + Duration::seconds(1), ..job.clone() };
    change(&mut next.document);
    next
}

/// A job id in the due-index shard `shard` (of `shards`).
fn id_in_shard(shard: u16, shards: u16) -> JobId {
    loop {
        let id = JobId::generate();
        if shard_of(id.as_str(), shards) == shard {
            return id;
        }
    }
}

/// The ids of the jobs due in `minute`, across every shard.
async fn due_in(store: &dyn JobStore, minute: DateTime<Utc>, shards: u16) -> BTreeSet<JobId> {
    let mut ids = BTreeSet::new();
    for shard in 0..shards {
        ids.extend(store.due_ids(&bucket(minute, shard)).await.unwrap());
    }
    ids
}

/// Every promise of a [`JobStore`] whose due index has `shards` partitions per minute.
pub async fn job_store_keeps_its_promises(store: &dyn JobStore, shards: u16) {
    jobs_are_created_all_or_nothing(store).await;
    job_writes_are_fenced(store).await;
    jobs_list_by_name_in_pages(store).await;
    all_jobs_list_in_pages(store).await;
    the_due_index_is_sparse_and_advances_are_fenced(store, shards).await;
    a_baseline_is_kept_whatever_the_version(store).await;
    a_long_window_is_filed_for_its_start(store, shards).await;
    versions_are_kept_with_the_job(store).await;
}

/// A job whose start lies further into its flexible window than a message can wait is filed
/// for the minute its start comes within reach, on creation and on an advance alike.
async fn a_long_window_is_filed_for_its_start(store: &dyn JobStore, shards: u16) {
    let owner = unique("owner");
    let instant = at("2031-03-05T12:00:00Z");
    let mut wide = job(&owner, "wide", Some(instant));
    wide.document.flexible_window_s = Some(14_400);
    // An id whose offsets today and tomorrow reach past the 15 minutes a message can wait.
    let tomorrow = instant + Duration::days(1);
    while wide.start_offset(instant).min(wide.start_offset(tomorrow)) <= Duration::minutes(30) {
        wide.id = JobId::generate();
    }
    let filed = instant + wide.start_offset(instant) - Duration::minutes(15);
    assert_eq!(wide.index_at(), Some(filed));
    store.create(&wide, 100, None).await.unwrap();
    let minute = |t: DateTime<Utc>| t - Duration::seconds(i64::from(t.timestamp().rem_euclid(60) as u32));
    assert!(!due_in(store, instant, shards).await.contains(&wide.id), "not in its instant's minute");
    assert!(due_in(store, minute(filed), shards).await.contains(&wide.id), "in its start's reach");

    store.advance(&wide, &Advance::to(Some(tomorrow))).await.unwrap();
    let advanced = store.get(&wide.id).await.unwrap().unwrap();
    let filed = advanced.claimable_from(tomorrow);
    assert!(filed > tomorrow, "tomorrow's start is out of reach at its instant too");
    assert!(due_in(store, minute(filed), shards).await.contains(&wide.id), "advanced: filed for its start");
    assert!(!due_in(store, minute(tomorrow), shards).await.contains(&wide.id));
}

/// The versions a job keeps are stored with the write that makes them, read back whole, and
/// dropped when the job no longer keeps them; a deleted job's stay until they expire (nothing
/// reads them: the API reads versions of jobs that exist).
async fn versions_are_kept_with_the_job(store: &dyn JobStore) {
    let owner = unique("owner");
    let job = Job { versions: vec![1], ..job(&owner, "versioned", None) };
    store.create(&job, 100, None).await.unwrap();
    let first = store.version(&job.id, 1).await.unwrap().expect("version 1 kept");
    assert_eq!((first.version, &first.document), (1, &job.document));
    assert_eq!(store.version(&job.id, 2).await.unwrap(), None, "not made yet");

    let mut edited = job.clone();
    edited.document.payload = serde_json::json!({"edited": 2});
    let second = Job { version: 2, versions: vec![1, 2], ..edited };
    store.update(&job, &second, None).await.unwrap();
    let kept = store.version(&job.id, 2).await.unwrap().expect("version 2 kept");
    assert_eq!(kept.document.payload, serde_json::json!({"edited": 2}));
    assert_eq!(
        store.version(&job.id, 1).await.unwrap().map(|v| v.document),
        Some(job.document.clone()),
        "1 as it was"
    );

    // Renamed, and version 1 no longer kept: one write.
    let mut renamed = second.clone();
    renamed.document.name = "versioned-2".into();
    let third = Job { version: 3, versions: vec![2, 3], ..renamed };
    store.update(&second, &third, None).await.unwrap();
    assert_eq!(store.version(&job.id, 1).await.unwrap(), None, "dropped");
    assert_eq!(store.version(&job.id, 3).await.unwrap().map(|v| v.document.name), Some("versioned-2".into()));
    // A write that loses keeps nothing.
    let stale = Job { version: 4, versions: vec![2, 3, 4], ..third.clone() };
    assert_eq!(store.update(&second, &stale, None).await, Err(StoreError::Conflict));
    assert_eq!(store.version(&job.id, 4).await.unwrap(), None, "a lost write keeps no version");

    store.delete(&third, None).await.unwrap();
    assert!(store.version(&job.id, 3).await.unwrap().is_some(), "kept until it expires")
}

/// A learned baseline is written over any version, kept by later edits of what was read with
/// it, and refused for a job that is gone.
async fn a_baseline_is_kept_whatever_the_version(store: &dyn JobStore) {
    let owner = unique("owner");
    let v1 = job(&owner, "learning", None);
    store.create(&v1, 100, None).await.unwrap();
    let baseline = Baseline { typical_ms: 10_000, p95_ms: 12_500, runs: 5, at: at("2031-02-01T00:00:00Z") };
    store.set_baseline(&v1.id, &baseline).await.unwrap();
    let read = store.get(&v1.id).await.unwrap().unwrap();
    assert_eq!((read.baseline, read.version), (Some(baseline), 1), "kept, the version untouched");
    let v2 = edited(&read, |d| d.payload = json!({"n": 2}));
    store.update(&read, &v2, None).await.unwrap();
    assert_eq!(store.get(&v1.id).await.unwrap().unwrap().baseline, Some(baseline), "an edit keeps it");
    store.delete(&v2, None).await.unwrap();
    assert_eq!(store.set_baseline(&v1.id, &baseline).await, Err(StoreError::NotFound));
}

async fn jobs_are_created_all_or_nothing(store: &dyn JobStore) {
    let owner = unique("owner");
    let alpha = job(&owner, "alpha", Some(at("2031-01-01T10:00:00Z")));
    store.create(&alpha, 3, None).await.unwrap();
    assert_eq!(
        store.get(&alpha.id).await.unwrap(),
        Some(alpha.clone()),
        "a created job reads back as written"
    );

    let twin = job(&owner, "alpha", None);
    assert_eq!(
        store.create(&twin, 3, None).await,
        Err(StoreError::NameTaken("alpha".into())),
        "a name is unique per owner"
    );
    assert_eq!(store.get(&twin.id).await.unwrap(), None, "a refused create writes nothing");
    assert_eq!(
        store.find_by_name(&owner, "alpha").await.unwrap(),
        Some(alpha.clone()),
        "a job is found by its name at once"
    );
    assert_eq!(store.find_by_name(&unique("owner"), "alpha").await.unwrap(), None, "by its owner only");
    assert_eq!(store.find_by_name(&owner, "nobody").await.unwrap(), None);
    store
        .create(&job(&unique("owner"), "alpha", None), 3, None)
        .await
        .expect("another owner may use the name");

    // A parent's children, and a child's parents, read back as written; a link is an edit.
    let parent = job(&unique("owner"), "parent", Some(at("2031-01-01T10:00:00Z")));
    store.create(&parent, 10, None).await.unwrap();
    let mut child_doc = document("child");
    child_doc.schedule = None;
    child_doc.depends_on = vec![parent.id.to_string()];
    let child = Job { id: JobId::generate(), document: child_doc, next_run_at: None, ..parent.clone() };
    store.create(&child, 10, None).await.unwrap();
    assert_eq!(store.get(&child.id).await.unwrap(), Some(child.clone()), "depends_on reads back");
    let linked = Job { children: vec![child.id.clone()], version: parent.version + 1, ..parent.clone() };
    store.update(&parent, &linked, None).await.unwrap();
    assert_eq!(store.get(&parent.id).await.unwrap(), Some(linked.clone()), "children read back as written");
    assert_eq!(
        store.update(&parent, &linked, None).await,
        Err(StoreError::Conflict),
        "a link is fenced like any edit"
    );
    let unlinked = Job { children: Vec::new(), version: linked.version + 1, ..linked.clone() };
    store.update(&linked, &unlinked, None).await.unwrap();
    assert_eq!(store.get(&parent.id).await.unwrap(), Some(unlinked), "the last child unlinked leaves none");

    let same_id = Job { document: document("beta"), ..alpha.clone() };
    assert!(store.create(&same_id, 3, None).await.is_err(), "an id cannot be created twice");
    assert_eq!(store.get(&alpha.id).await.unwrap(), Some(alpha.clone()), "the first job is untouched");

    // The refused creates above neither took their names nor counted: three jobs fit.
    store.create(&job(&owner, "beta", None), 3, None).await.expect("a refused create does not hold its name");
    let gamma = job(&owner, "gamma", None);
    store.create(&gamma, 3, None).await.expect("a refused create does not count against the limit");
    let delta = job(&owner, "delta", None);
    assert_eq!(
        store.create(&delta, 3, None).await,
        Err(StoreError::QuotaExceeded(3)),
        "the per-owner limit holds"
    );
    assert_eq!(store.get(&delta.id).await.unwrap(), None, "a create over the limit writes nothing");
    store.delete(&gamma, None).await.unwrap();
    store.create(&delta, 3, None).await.expect("a deleted job frees its place under the limit");
    let newcomer = job(&unique("newcomer"), "first", None);
    assert_eq!(
        store.create(&newcomer, 0, None).await,
        Err(StoreError::QuotaExceeded(0)),
        "a limit of 0 allows no job, not even an owner's first"
    );
    assert_eq!(store.get(&newcomer.id).await.unwrap(), None);

    let exact = job(&owner, "precise", Some(at("2031-01-01T10:00:01.500Z")));
    store.create(&exact, 10, None).await.unwrap();
    let read = store.get(&exact.id).await.unwrap().unwrap();
    assert_eq!(read.next_run_at, Some(at("2031-01-01T10:00:01Z")), "next_run_at is kept to the whole second");
    assert_eq!(read.created_at, exact.created_at, "other times are kept exactly");

    let mut many = store.get_many(&[alpha.id.clone(), gamma.id.clone(), exact.id.clone()]).await.unwrap();
    many.sort_by(|a, b| a.id.cmp(&b.id));
    let mut expected = vec![alpha.clone(), read];
    expected.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(many, expected, "get_many reads the jobs that exist and leaves out the others");
    assert!(
        matches!(store.get_many(&[alpha.id.clone(), alpha.id.clone()]).await, Err(StoreError::Rejected(_))),
        "a batch naming a job twice is refused"
    );
}

async fn job_writes_are_fenced(store: &dyn JobStore) {
    let owner = unique("owner");
    let v1 = job(&owner, "one", Some(at("2031-02-01T00:00:00Z")));
    store.create(&v1, 100, None).await.unwrap();
    let v2 = edited(&v1, |d| d.payload = json!({"n": 2}));
    store.update(&v1, &v2, None).await.unwrap();
    assert_eq!(store.get(&v1.id).await.unwrap(), Some(v2.clone()), "an update replaces the job");
    let v3 = edited(&v2, |d| d.payload = json!({"n": 3}));
    assert_eq!(
        store.update(&v1, &v3, None).await,
        Err(StoreError::Conflict),
        "an update from a stale version loses"
    );

    store.advance(&v2, &Advance::to(Some(at("2031-02-01T00:05:00Z")))).await.unwrap();
    assert_eq!(
        store.update(&v2, &v3, None).await,
        Err(StoreError::Conflict),
        "an update read before the tick advanced the job loses"
    );
    let read = store.get(&v1.id).await.unwrap().unwrap();
    assert_eq!((read.version, read.next_run_at), (2, Some(at("2031-02-01T00:05:00Z"))));
    let v3 = edited(&read, |d| d.payload = json!({"n": 3}));
    store.update(&read, &v3, None).await.unwrap();

    // Renames move the name lock.
    let v4 = edited(&v3, |d| d.name = "two".into());
    store.update(&v3, &v4, None).await.unwrap();
    let reuse = job(&owner, "one", None);
    store.create(&reuse, 100, None).await.expect("a rename frees the old name");
    assert_eq!(
        store.create(&job(&owner, "two", None), 100, None).await,
        Err(StoreError::NameTaken("two".into())),
        "a rename takes the new name"
    );
    store.create(&job(&owner, "three", None), 100, None).await.unwrap();
    let v5 = edited(&v4, |d| d.name = "three".into());
    assert_eq!(
        store.update(&v4, &v5, None).await,
        Err(StoreError::NameTaken("three".into())),
        "a rename to a name taken is refused"
    );
    assert_eq!(store.get(&v1.id).await.unwrap(), Some(v4.clone()), "a refused rename changes nothing");

    assert_eq!(
        store.delete(&v3, None).await,
        Err(StoreError::Conflict),
        "a delete from a read that predates a rename loses (the name it would free is not the job's)"
    );
    assert!(store.get(&v1.id).await.unwrap().is_some());
    let v4b = edited(&v4, |d| d.payload = json!({"n": 4}));
    store.update(&v4, &v4b, None).await.unwrap();
    assert_eq!(
        store.delete(&v4, None).await,
        Err(StoreError::Conflict),
        "a delete from a read before an edit loses"
    );
    assert!(store.get(&v1.id).await.unwrap().is_some(), "and deletes nothing");
    store.delete(&v4b, None).await.unwrap();
    assert_eq!(store.get(&v1.id).await.unwrap(), None, "a deleted job is gone");
    assert_eq!(store.delete(&v4b, None).await, Err(StoreError::NotFound), "deleting twice finds nothing");
    let v5 = edited(&v4, |d| d.payload = json!({"n": 5}));
    assert_eq!(
        store.update(&v4, &v5, None).await,
        Err(StoreError::NotFound),
        "updating a deleted job finds nothing"
    );
    store.create(&job(&owner, "two", None), 100, None).await.expect("a delete frees the name");
}

/// The whole-store listing (the operators' forecast): every job of every owner once, whole,
/// across pages; no helper records; a cursor that is not one is refused.
async fn all_jobs_list_in_pages(store: &dyn JobStore) {
    let mut mine = BTreeMap::new();
    for k in 0..3 {
        let j = job(&unique("owner"), &format!("scan-{k}"), None);
        store.create(&j, 100, None).await.unwrap();
        mine.insert(j.id.clone(), j);
    }
    let mut seen = BTreeSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = store.list_all(2, cursor.as_deref()).await.unwrap();
        assert!(page.items.len() <= 2, "a page holds at most the limit");
        for listed in &page.items {
            assert!(seen.insert(listed.id.clone()), "{} listed twice", listed.id);
            if let Some(created) = mine.get(&listed.id) {
                assert_eq!(listed, created, "listed jobs are whole");
            }
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert!(mine.keys().all(|id| seen.contains(id)), "every owner's jobs are listed");
    assert_eq!(store.list_all(10, Some("not a cursor!")).await, Err(StoreError::BadCursor));
}

async fn jobs_list_by_name_in_pages(store: &dyn JobStore) {
    let owner = unique("owner");
    let other = unique("owner");
    let mut by_name = BTreeMap::new();
    for name in ["echo", "alpha", "delta", "bravo", "charlie"] {
        let j = job(&owner, name, None);
        store.create(&j, 100, None).await.unwrap();
        by_name.insert(name, j);
    }
    store.create(&job(&other, "aardvark", None), 100, None).await.unwrap();
    let names = |jobs: &[Job]| jobs.iter().map(|j| j.document.name.clone()).collect::<Vec<_>>();

    let first = store.list(&owner, 2, None).await.unwrap();
    assert_eq!(names(&first.items), ["alpha", "bravo"], "an owner's jobs list by name, only theirs");
    assert_eq!(first.items[0], by_name["alpha"], "listed jobs are whole");
    let cursor = first.next.clone().expect("a full page with more after it has a next page");
    let second = store.list(&owner, 2, Some(&cursor)).await.unwrap();
    assert_eq!(names(&second.items), ["charlie", "delta"], "the cursor continues after the page");
    let third = store.list(&owner, 2, second.next.as_deref()).await.unwrap();
    assert_eq!(
        (names(&third.items), third.next),
        (vec!["echo".to_string()], None),
        "the last page has no next"
    );
    let all = store.list(&owner, 5, None).await.unwrap();
    assert_eq!((all.items.len(), all.next), (5, None), "a page that exactly fits has no next page");
    assert_eq!(store.list(&owner, 0, None).await.unwrap().items.len(), 1, "a limit of 0 lists one");

    assert_eq!(
        store.list(&other, 10, Some(&cursor)).await,
        Err(StoreError::BadCursor),
        "another owner's cursor is refused"
    );
    assert_eq!(store.list(&owner, 10, Some("not a cursor!")).await, Err(StoreError::BadCursor));

    store.delete(&by_name["charlie"], None).await.unwrap();
    let again = store.list(&owner, 2, Some(&cursor)).await.unwrap();
    assert_eq!(
        names(&again.items),
        ["delta", "echo"],
        "a deleted job leaves the listing; cursors stay valid"
    );
}

async fn the_due_index_is_sparse_and_advances_are_fenced(store: &dyn JobStore, shards: u16) {
    let owner = unique("owner");
    let minute = at("2031-03-04T05:06:00Z");
    let next_minute = minute + Duration::minutes(1);

    // Two jobs in one partition, due in that minute in the opposite order of their creation.
    let shard = shard_of(JobId::generate().as_str(), shards);
    let later =
        Job { id: id_in_shard(shard, shards), ..job(&owner, "later", Some(minute + Duration::seconds(40))) };
    let sooner =
        Job { id: id_in_shard(shard, shards), ..job(&owner, "sooner", Some(minute + Duration::seconds(10))) };
    let mut paused = job(&owner, "paused", Some(minute + Duration::seconds(20)));
    paused.document.paused = true;
    let never = job(&owner, "never", None);
    for j in [&later, &sooner, &paused, &never] {
        store.create(j, 100, None).await.unwrap();
    }
    let partition = store.due_ids(&due_bucket(later.id.as_str(), minute, shards)).await.unwrap();
    let ours: Vec<&JobId> = partition.iter().filter(|id| **id == later.id || **id == sooner.id).collect();
    assert_eq!(ours, [&sooner.id, &later.id], "a partition's jobs come in due order");
    let due = due_in(store, minute, shards).await;
    assert!(due.contains(&later.id) && due.contains(&sooner.id), "an active job is due in its minute");
    assert!(!due.contains(&paused.id), "a paused job is not in the due index");
    assert!(!due.contains(&never.id), "a job without a next run is not in the due index");
    if shards > 1 {
        let elsewhere = bucket(minute, (shard + 1) % shards);
        assert!(
            store.due_ids(&elsewhere).await.unwrap().iter().all(|id| *id != later.id),
            "a job is due in its own shard only"
        );
    }
    assert!(!due_in(store, next_minute, shards).await.contains(&later.id), "nor in another minute");

    // The tick advances a job without touching its version, recording what it passed.
    let then = next_minute + Duration::seconds(5);
    let gap = Gap {
        from: minute - Duration::minutes(3),
        to: minute - Duration::minutes(1),
        instants: 3,
        cause: GapCause::CatchupDropped {
            policy: CatchupPolicy::Skip,
            outage_from: minute - Duration::minutes(3),
            outage_to: minute,
        },
        at: minute,
        told: true,
    };
    let count = RunCount {
        runs: 7,
        marks: vec![
            Mark { until: then + Duration::minutes(5), version: 0, at: minute },
            Mark { until: then, version: 1, at: minute },
        ],
    };
    let to = Advance { next: Some(then), gaps: Some(vec![gap.clone()]), counted: Some(count.clone()) };
    store.advance(&later, &to).await.unwrap();
    let advanced = store.get(&later.id).await.unwrap().unwrap();
    assert_eq!(
        (advanced.version, advanced.next_run_at, advanced.gaps.clone(), advanced.counted.clone()),
        (1, Some(then), vec![gap.clone()], count.clone()),
        "an advance moves next_run_at, and records the gaps and the count given"
    );
    assert!(!due_in(store, minute, shards).await.contains(&later.id), "an advanced job leaves its minute");
    assert!(due_in(store, next_minute, shards).await.contains(&later.id), "and is due in the next");
    assert_eq!(
        store.advance(&later, &Advance::to(Some(then + Duration::minutes(1)))).await,
        Err(StoreError::Conflict),
        "an advance from a stale next_run_at loses (another tick advanced it)"
    );
    let v2 = edited(&advanced, |d| d.payload = json!({"edited": true}));
    store.update(&advanced, &v2, None).await.unwrap();
    assert_eq!(
        store.advance(&advanced, &Advance::to(Some(then + Duration::minutes(1)))).await,
        Err(StoreError::Conflict),
        "an advance from a stale version loses: an edited job is not re-armed"
    );
    assert_eq!(store.get(&later.id).await.unwrap(), Some(v2.clone()));
    store.advance(&v2, &Advance::to(None)).await.unwrap();
    let ended = store.get(&later.id).await.unwrap().unwrap();
    assert_eq!(
        (ended.next_run_at, ended.gaps, ended.counted),
        (None, vec![gap], count),
        "nothing else given: the gaps and the count stay as they are"
    );
    assert!(!due_in(store, next_minute, shards).await.contains(&later.id), "a job with no next run leaves");

    store.advance(&paused, &Advance::to(Some(then))).await.unwrap();
    let paused_read = store.get(&paused.id).await.unwrap().unwrap();
    assert_eq!(paused_read.next_run_at, Some(then), "a paused job keeps its next run");
    assert!(
        !due_in(store, next_minute, shards).await.contains(&paused.id),
        "a paused job stays out of the index"
    );
    let resumed = edited(&paused_read, |d| d.paused = false);
    store.update(&paused_read, &resumed, None).await.unwrap();
    assert!(due_in(store, next_minute, shards).await.contains(&paused.id), "a resumed job is due again");
    let repaused = edited(&resumed, |d| d.paused = true);
    store.update(&resumed, &repaused, None).await.unwrap();
    assert!(!due_in(store, next_minute, shards).await.contains(&paused.id), "pausing takes a job out");

    store.delete(&sooner, None).await.unwrap();
    assert!(!due_in(store, minute, shards).await.contains(&sooner.id), "a deleted job leaves the index");
    assert_eq!(
        store.advance(&sooner, &Advance::to(Some(then))).await,
        Err(StoreError::Conflict),
        "a deleted job is not re-armed"
    );
    assert_eq!(store.get(&sooner.id).await.unwrap(), None);
}

// ---------------------------------------------------------------------------------------------
// Runs

/// Expiry a month from now (whole seconds): the emulator's TTL reaper must not take the runs.
fn expiry() -> DateTime<Utc> {
    DateTime::from_timestamp((Utc::now() + Duration::days(30)).timestamp(), 0).unwrap()
}

/// A run of `job_id` at `key` in `state`, attempt 0, as the tick claims one.
fn run(job_id: &JobId, key: RunKey, state: RunState) -> Run {
    Run {
        job_id: job_id.clone(),
        owner: "owner".into(),
        due_at: key.instant,
        key,
        state,
        attempt: 0,
        attempts: Vec::new(),
        job_version: 1,
        created_at: at("2031-01-01T00:00:00.5Z"),
        updated_at: at("2031-01-01T00:00:00.5Z"),
        reason: None,
        lease_until: None,
        retry_at: None,
        resent_at: None,
        call_ended: None,
        workflow: None,
        backfill: false,
        input: None,
        expires_at: expiry(),
        events: Vec::new(),
    }
}

/// `before` moved to `state` at `now` (attempt unchanged).
fn moved(before: &Run, state: RunState, now: DateTime<Utc>) -> Run {
    Run { state, updated_at: now, ..before.clone() }
}

/// `before` starting its next attempt at `now`, leased for a minute.
fn started(before: &Run, now: DateTime<Utc>) -> Run {
    let n = before.attempt + 1;
    let mut attempts = before.attempts.clone();
    attempts.push(Attempt {
        n,
        started_at: now,
        finished_at: None,
        worker: "worker-1".into(),
        outcome: None,
        status_code: None,
        error: None,
        output: None,
        callback: None,
        call_until: None,
        handle: None,
        followed_at: None,
        looks: 0,
        look_tag: None,
        logs_url: None,
    });
    Run {
        state: RunState::Running,
        attempt: n,
        attempts,
        lease_until: Some(now + Duration::minutes(1)),
        retry_at: None,
        updated_at: now,
        ..before.clone()
    }
}

fn event(kind: EventKind, attempt: u32, at: DateTime<Utc>) -> RunEvent {
    RunEvent::new(kind, attempt, at)
}

async fn stored(store: &dyn RunStore, r: &Run) -> Run {
    store.get(&r.job_id, &r.key).await.unwrap().expect("the run exists")
}

/// The runs of `jobs` in the in-flight index up to `until`, in the order the index gives them.
async fn in_flight_of(
    store: &dyn RunStore,
    until: DateTime<Utc>,
    shards: u16,
    jobs: &[&JobId],
) -> Vec<RunId> {
    let ids = store.in_flight(until, shards).await.unwrap();
    ids.into_iter().filter(|id| jobs.contains(&&id.job_id)).collect()
}

/// Every promise of a [`RunStore`] whose in-flight index has `shards` partitions.
pub async fn run_store_keeps_its_promises(store: &dyn RunStore, shards: u16) {
    a_run_is_inserted_once(store).await;
    run_transitions_are_fenced(store).await;
    the_in_flight_index_holds_runs_until_their_events_are_sent(store, shards).await;
    an_event_recorded_since_the_read_keeps_the_run_in_flight(store, shards).await;
    an_event_recorded_after_the_end_puts_the_run_back_in_flight(store, shards).await;
    events_are_recorded_taken_and_marked_once(store).await;
    failing_streaks_are_told_once(store).await;
    troubles_open_once_and_close_as_read(store).await;
    run_history_reads_in_key_order(store).await;
}

async fn a_run_is_inserted_once(store: &dyn RunStore) {
    let job_id = JobId::generate();
    let first = run(&job_id, RunKey::scheduled(at("2031-04-01T00:00:00Z")), RunState::Queued);
    assert_eq!(store.insert(&first, None).await.unwrap(), Inserted::Created);
    assert_eq!(
        store.get(&job_id, &first.key).await.unwrap(),
        Some(first.clone()),
        "a run reads back as written"
    );
    let second = Run { job_version: 2, owner: "someone else".into(), ..first.clone() };
    assert_eq!(
        store.insert(&second, None).await.unwrap(),
        Inserted::Exists(Box::new(first.clone())),
        "a second insert of one key finds the first run"
    );
    let backfilled = Run {
        backfill: true,
        input: Some(serde_json::json!({"report": "2030-01", "dry_run": true})),
        ..run(&job_id, RunKey::scheduled(at("2031-03-01T00:00:00Z")), RunState::Queued)
    };
    store.insert(&backfilled, None).await.unwrap();
    assert_eq!(
        store.get(&job_id, &backfilled.key).await.unwrap(),
        Some(backfilled),
        "a backfill's run reads back as one"
    );
    assert_eq!(stored(store, &first).await, first, "and changes nothing");
    let manual = Run {
        workflow: Some(JobId::generate()),
        ..run(&job_id, RunKey::manual(first.key.instant), RunState::Queued)
    };
    assert_eq!(store.insert(&manual, None).await.unwrap(), Inserted::Created, "a manual run never collides");
    assert_eq!(stored(store, &manual).await, manual, "a workflow run keeps its root");
    let missing = RunKey::scheduled(at("2031-04-01T00:01:00Z"));
    assert_eq!(store.get(&job_id, &missing).await.unwrap(), None);

    let precise_key = RunKey::scheduled(at("2031-04-01T00:02:00.750Z"));
    let precise = Run {
        due_at: at("2031-04-01T00:02:03.250Z"),
        expires_at: expiry() + Duration::milliseconds(900),
        ..run(&job_id, precise_key.clone(), RunState::Queued)
    };
    store.insert(&precise, None).await.unwrap();
    let read = store.get(&job_id, &precise_key).await.unwrap().expect("read by the key it was written with");
    let expires = DateTime::from_timestamp(precise.expires_at.timestamp(), 0).unwrap();
    assert_eq!(
        (read.key.instant, read.due_at, read.expires_at, read.created_at),
        (at("2031-04-01T00:02:00Z"), at("2031-04-01T00:02:03Z"), expires, precise.created_at),
        "a run's instant, due time and expiry are kept to the second, other times exactly"
    );
}

async fn run_transitions_are_fenced(store: &dyn RunStore) {
    let job_id = JobId::generate();
    let t = at("2031-04-02T00:00:00Z");
    let queued = run(&job_id, RunKey::scheduled(t), RunState::Queued);
    store.insert(&queued, None).await.unwrap();
    let running = started(&queued, t + Duration::seconds(1));
    store.transition(&queued, &running, None).await.unwrap();
    assert_eq!(stored(store, &queued).await, running, "a transition writes the new state, attempt and lease");

    let other = started(&queued, t + Duration::seconds(2));
    assert_eq!(
        store.transition(&queued, &other, None).await,
        Err(StoreError::Conflict),
        "a stale state loses"
    );
    let stale_attempt = Run { attempt: 0, ..running.clone() };
    let next = started(&running, t + Duration::seconds(3));
    assert_eq!(
        store.transition(&stale_attempt, &next, None).await,
        Err(StoreError::Conflict),
        "a stale attempt loses: the attempt is the fencing token"
    );
    let ghost = run(&job_id, RunKey::scheduled(t - Duration::minutes(1)), RunState::Queued);
    assert_eq!(
        store.transition(&ghost, &started(&ghost, t), None).await,
        Err(StoreError::Conflict),
        "a run that does not exist cannot move"
    );

    let retrying = Run {
        state: RunState::Retrying,
        lease_until: None,
        retry_at: Some(t + Duration::seconds(30)),
        reason: Some("backing off".into()),
        updated_at: t + Duration::seconds(4),
        events: vec![event(EventKind::Retrying, 1, t + Duration::seconds(4))],
        ..running.clone()
    };
    let touched = Run { updated_at: running.updated_at + Duration::milliseconds(1), ..running.clone() };
    assert_eq!(
        store.transition_unchanged(&touched, &retrying).await,
        Err(StoreError::Conflict),
        "transition_unchanged loses to any write since the read"
    );
    store.transition_unchanged(&running, &retrying).await.unwrap();
    assert_eq!(
        stored(store, &queued).await,
        retrying,
        "lease cleared, retry time, reason and new event written"
    );

    let sla = event(EventKind::SlaMissed, 1, t + Duration::seconds(5));
    store.record_event(&retrying, &sla).await.unwrap();
    let mut restart = started(&retrying, t + Duration::seconds(6));
    restart.events.push(sla.clone());
    assert_eq!(
        store.transition(&retrying, &restart, None).await,
        Err(StoreError::Conflict),
        "a transition adding an event already recorded loses: each event is recorded once"
    );

    let read = stored(store, &queued).await;
    let mut resumed = started(&read, t + Duration::seconds(7));
    for e in &mut resumed.events {
        e.sent = true;
    }
    store.transition(&read, &resumed, None).await.unwrap();
    let after = stored(store, &queued).await;
    assert_eq!(after.state, RunState::Running);
    assert!(
        after.events.iter().all(|e| !e.sent),
        "a transition adds events, never rewrites those recorded (marking them is mark_events_sent's)"
    );
    assert_eq!(after.events.len(), 2);
}

/// An event recorded after a change was decided (the watchdog flags `sla_missed` while a cancel
/// decided from an earlier read lands: both fence on the state and attempt only) must not leave
/// the index with the run: the change that would take the run out conflicts, and its writer
/// decides again on the fresh run, events included (invariant: one alert per event).
async fn an_event_recorded_since_the_read_keeps_the_run_in_flight(store: &dyn RunStore, shards: u16) {
    let job = JobId::generate();
    let t = at("2031-05-07T07:08:09Z");
    let queued = run(&job, RunKey::scheduled(t), RunState::Queued);
    store.insert(&queued, None).await.unwrap();
    store.record_event(&queued, &event(EventKind::SlaMissed, 0, t)).await.unwrap();
    let mut cancelled = moved(&queued, RunState::Cancelled, t + Duration::seconds(1));
    cancelled.reason = Some("cancelled by its owner".into());
    assert_eq!(
        store.transition(&queued, &cancelled, None).await,
        Err(StoreError::Conflict),
        "a change decided without the recorded event would drop it from the index"
    );
    let fresh = stored(store, &queued).await;
    assert_eq!(fresh.state, RunState::Queued);
    let cancelled = Run { events: fresh.events.clone(), ..cancelled };
    store.transition(&fresh, &cancelled, None).await.unwrap();
    assert_eq!(
        in_flight_of(store, t, shards, &[&job]).await,
        [queued.id()],
        "decided again with the event, the ended run stays until the event is sent"
    );
}

/// A run that ended with nothing to tell leaves the index; an event recorded on it afterwards
/// (`recovered`, decided after the end) puts it back, so the watchdog publishes it if its
/// recorder does not; marked sent and settled, it leaves again.
async fn an_event_recorded_after_the_end_puts_the_run_back_in_flight(store: &dyn RunStore, shards: u16) {
    let job = JobId::generate();
    let t = at("2031-05-08T07:08:09Z");
    let queued = run(&job, RunKey::scheduled(t), RunState::Queued);
    store.insert(&queued, None).await.unwrap();
    let running = started(&queued, t);
    store.transition(&queued, &running, None).await.unwrap();
    let succeeded = moved(&running, RunState::Succeeded, t + Duration::seconds(5));
    store.transition(&running, &succeeded, None).await.unwrap();
    assert_eq!(in_flight_of(store, t, shards, &[&job]).await, [], "ended with nothing to tell");

    let recovered = event(EventKind::Recovered, 1, t + Duration::seconds(6));
    store.record_event(&succeeded, &recovered).await.unwrap();
    assert_eq!(in_flight_of(store, t, shards, &[&job]).await, [queued.id()], "back until it is told");
    let fresh = stored(store, &succeeded).await;
    let published =
        Published { sent: vec![recovered.id.clone()], shared_only: Vec::new(), ..Default::default() };
    store.mark_events_sent(&fresh, &published, true).await.unwrap();
    assert_eq!(in_flight_of(store, t, shards, &[&job]).await, [], "told and settled");
}

async fn the_in_flight_index_holds_runs_until_their_events_are_sent(store: &dyn RunStore, shards: u16) {
    let (a, b) = {
        let (x, y) = (JobId::generate(), JobId::generate());
        if x < y { (x, y) } else { (y, x) }
    };
    let jobs = [&a, &b];
    let t = at("2031-05-06T07:08:09Z");

    let queued = run(&a, RunKey::scheduled(t), RunState::Queued);
    store.insert(&queued, None).await.unwrap();
    assert_eq!(in_flight_of(store, t, shards, &jobs).await, [queued.id()], "a claimed run is in flight");
    assert!(
        in_flight_of(store, t - Duration::seconds(1), shards, &jobs).await.is_empty(),
        "in_flight reads runs scheduled at or before `until` only"
    );
    let running = started(&queued, t);
    store.transition(&queued, &running, None).await.unwrap();
    assert_eq!(in_flight_of(store, t, shards, &jobs).await, [queued.id()], "a running run stays in flight");
    let mut succeeded = moved(&running, RunState::Succeeded, t + Duration::seconds(1));
    succeeded.lease_until = None;
    succeeded.events.push(event(EventKind::Succeeded, 1, t + Duration::seconds(1)));
    store.transition(&running, &succeeded, None).await.unwrap();
    assert_eq!(
        in_flight_of(store, t, shards, &jobs).await,
        [queued.id()],
        "an ended run stays in the index while an event is unsent"
    );
    let sent = Published { sent: vec!["succeeded".into()], shared_only: vec![], ..Default::default() };
    store.mark_events_sent(&succeeded, &sent, false).await.unwrap();
    assert!(stored(store, &queued).await.events.iter().all(|e| e.sent), "marked events read as sent");
    assert_eq!(
        in_flight_of(store, t, shards, &jobs).await,
        [queued.id()],
        "marking without settling keeps it"
    );
    // An event recorded since the settler's read (a watchdog's `sla_missed` racing the end)
    // keeps the run in flight, and the settle marks nothing.
    let mut late = stored(store, &queued).await;
    store.record_event(&late, &event(EventKind::SlaMissed, 1, t + Duration::seconds(2))).await.unwrap();
    assert_eq!(
        store.mark_events_sent(&succeeded, &Published::default(), true).await,
        Err(StoreError::Conflict),
        "a settler that has not seen every event cannot settle"
    );
    assert_eq!(in_flight_of(store, t, shards, &jobs).await, [queued.id()], "so the run stays in flight");
    late = stored(store, &queued).await;
    let sla_sent = Published { sent: vec!["sla_missed".into()], shared_only: vec![], ..Default::default() };
    store.mark_events_sent(&late, &sla_sent, true).await.unwrap();
    assert!(in_flight_of(store, t, shards, &jobs).await.is_empty(), "settled, it leaves the index");

    // A run that ends with every event sent leaves at once.
    let quiet = run(&a, RunKey::scheduled(t + Duration::minutes(1)), RunState::Queued);
    store.insert(&quiet, None).await.unwrap();
    let mut cancelled = moved(&quiet, RunState::Cancelled, t + Duration::minutes(1));
    cancelled.reason = Some("cancelled".into());
    store.transition(&quiet, &cancelled, None).await.unwrap();
    assert!(
        in_flight_of(store, t + Duration::minutes(1), shards, &jobs).await.is_empty(),
        "a run ended with nothing to publish leaves the index with its last change"
    );

    // Written ended: in the index only while it has an unsent event.
    let mut skipped = run(&a, RunKey::scheduled(t + Duration::minutes(2)), RunState::Skipped);
    skipped.events.push(event(EventKind::Skipped, 0, t + Duration::minutes(2)));
    store.insert(&skipped, None).await.unwrap();
    let done = run(&a, RunKey::scheduled(t + Duration::minutes(3)), RunState::Succeeded);
    store.insert(&done, None).await.unwrap();
    let waiting = run(&b, RunKey::scheduled(t + Duration::minutes(2)), RunState::Queued);
    store.insert(&waiting, None).await.unwrap();
    let manual = run(&a, RunKey::manual(t + Duration::minutes(2)), RunState::Queued);
    store.insert(&manual, None).await.unwrap();
    let later = run(&b, RunKey::scheduled(t + Duration::minutes(1)), RunState::Retrying);
    store.insert(&later, None).await.unwrap();
    assert_eq!(
        in_flight_of(store, t + Duration::minutes(3), shards, &jobs).await,
        [later.id(), skipped.id(), manual.id(), waiting.id()],
        "in flight: oldest first, then by job, then by key; a run written ended is in only with an unsent event"
    );
    assert_eq!(
        store.mark_events_sent(&waiting, &Published::default(), true).await,
        Err(StoreError::Conflict),
        "a run that has not ended cannot settle"
    );
    let skipped_sent = Published { sent: vec!["skipped".into()], shared_only: vec![], ..Default::default() };
    store.mark_events_sent(&skipped, &skipped_sent, true).await.unwrap();
    assert_eq!(
        in_flight_of(store, t + Duration::minutes(3), shards, &jobs).await,
        [later.id(), manual.id(), waiting.id()],
        "marking and settling in one write takes it out"
    );

    let ghost = run(&b, RunKey::scheduled(t - Duration::minutes(5)), RunState::Succeeded);
    assert_eq!(store.mark_events_sent(&ghost, &sent, false).await, Err(StoreError::Conflict), "no such run");
    store.mark_events_sent(&ghost, &Published::default(), false).await.expect("nothing to mark is no write");
    assert!(
        matches!(store.mark_events_sent(&waiting, &sent, false).await, Err(StoreError::Rejected(_))),
        "marking an event the run does not have is refused"
    );
    assert_eq!(store.in_flight(t + Duration::minutes(3), 0).await.unwrap(), [], "no partitions, no runs");
}

async fn events_are_recorded_taken_and_marked_once(store: &dyn RunStore) {
    let job_id = JobId::generate();
    let t = at("2031-06-01T00:00:00Z");
    let queued = run(&job_id, RunKey::scheduled(t), RunState::Queued);
    store.insert(&queued, None).await.unwrap();
    let running = started(&queued, t);
    store.transition(&queued, &running, None).await.unwrap();

    let sla = event(EventKind::SlaMissed, 1, t + Duration::seconds(10));
    store.record_event(&running, &sla).await.unwrap();
    assert_eq!(stored(store, &running).await.events, vec![sla.clone()], "a recorded event reads back unsent");
    assert_eq!(
        store.record_event(&running, &sla).await,
        Err(StoreError::Conflict),
        "an event is recorded once"
    );
    let late = event(EventKind::LateStart, 1, t);
    assert_eq!(
        store.record_event(&queued, &late).await,
        Err(StoreError::Conflict),
        "recording from a stale state loses"
    );
    assert_eq!(
        store.record_event(&Run { attempt: 2, ..running.clone() }, &late).await,
        Err(StoreError::Conflict),
        "recording from a stale attempt loses"
    );
    let ghost = run(&job_id, RunKey::scheduled(t + Duration::hours(1)), RunState::Running);
    assert_eq!(store.record_event(&ghost, &late).await, Err(StoreError::Conflict), "no such run");
    store.record_event(&running, &late).await.unwrap();
    assert_eq!(
        stored(store, &running).await.events.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["late_start", "sla_missed"],
        "events read in time order"
    );
    let rate = FailureRate { failed: 6, ended: 20, percent: 30, threshold_percent: 30 };
    let told = event(EventKind::FailureRate, 1, t + Duration::seconds(11))
        .with_detail(EventDetail::FailureRate(rate));
    store.record_event(&running, &told).await.unwrap();
    let read = stored(store, &running).await.events.into_iter().find(|e| e.id == told.id);
    assert_eq!(read, Some(told), "an event's numbers read back with it");

    let first = t + Duration::seconds(20) + Duration::nanoseconds(123_456_789);
    store.take_event(&running, &sla, first).await.unwrap();
    let taken = stored(store, &running).await.events.into_iter().find(|e| e.id == sla.id).unwrap();
    assert_eq!(taken.taken_at, Some(first), "taking an event over records when, exactly");
    assert_eq!(
        store.take_event(&running, &sla, first + Duration::seconds(1)).await,
        Err(StoreError::Conflict),
        "an event taken over since it was read cannot be taken again"
    );
    store.take_event(&running, &taken, first + Duration::seconds(2)).await.expect("taken from a fresh read");
    let unknown = event(EventKind::Failed, 1, t);
    assert_eq!(store.take_event(&running, &unknown, t).await, Err(StoreError::Conflict), "no such event");

    let marks =
        Published { sent: vec![late.id.clone()], shared_only: vec![sla.id.clone()], ..Default::default() };
    store.mark_events_sent(&running, &marks, false).await.unwrap();
    let events = stored(store, &running).await.events;
    let late_read = events.iter().find(|e| e.id == late.id).unwrap();
    let sla_read = events.iter().find(|e| e.id == sla.id).unwrap();
    assert!(late_read.sent, "sent everywhere");
    assert!(sla_read.shared_sent && !sla_read.sent, "sent to the shared topic only, the job's still owed");
    assert_eq!(
        store.take_event(&running, late_read, first + Duration::seconds(3)).await,
        Err(StoreError::Conflict),
        "a sent event cannot be taken over"
    );

    // Channels: each delivery's mark kept on its event, one write at a time, the topics' mark
    // with them; a later mark of one channel replaces its earlier one and leaves the other.
    let at = t + Duration::seconds(30);
    let busy = sundial_domain::channels::DeliveryError::Unavailable("HTTP 503".into());
    let pending = ChannelMark::after(Channel::PagerDuty, 1, &Err(busy), at);
    let delivered = ChannelMark::after(Channel::Slack, 1, &Ok(()), at);
    let round = Published {
        topics_only: vec![sla.id.clone()],
        channels: vec![
            (sla.id.clone(), Channel::Slack, delivered.clone()),
            (sla.id.clone(), Channel::PagerDuty, pending.clone()),
        ],
        ..Default::default()
    };
    store.mark_events_sent(&running, &round, false).await.unwrap();
    let sla_read = stored(store, &running).await.events.into_iter().find(|e| e.id == sla.id).unwrap();
    assert!(sla_read.topics_sent && !sla_read.sent, "both topics told, a channel still owed");
    assert_eq!(sla_read.channels.get(&Channel::Slack), Some(&delivered));
    assert_eq!(sla_read.channels.get(&Channel::PagerDuty), Some(&pending));
    let now_delivered = ChannelMark::after(Channel::PagerDuty, 2, &Ok(()), at + Duration::seconds(120));
    let second = Published {
        sent: vec![sla.id.clone()],
        channels: vec![(sla.id.clone(), Channel::PagerDuty, now_delivered.clone())],
        ..Default::default()
    };
    store.mark_events_sent(&running, &second, false).await.unwrap();
    let sla_read = stored(store, &running).await.events.into_iter().find(|e| e.id == sla.id).unwrap();
    assert!(sla_read.sent);
    assert_eq!(sla_read.channels.get(&Channel::PagerDuty), Some(&now_delivered), "the later mark replaces");
    assert_eq!(sla_read.channels.get(&Channel::Slack), Some(&delivered), "the other channel's mark stays");

    let resend = t + Duration::minutes(3) + Duration::milliseconds(5);
    store.mark_resent(&running, resend).await.unwrap();
    assert_eq!(stored(store, &running).await.resent_at, Some(resend), "mark_resent records the re-send");
    assert_eq!(store.mark_resent(&ghost, resend).await, Err(StoreError::Conflict), "no such run");

    let attempt = stored(store, &running).await.attempt;
    assert_eq!(
        store.mark_call_ended(&running, attempt + 1).await,
        Err(StoreError::Conflict),
        "only the run's current attempt"
    );
    assert_eq!(stored(store, &running).await.call_ended, None);
    store.mark_call_ended(&running, attempt).await.unwrap();
    assert_eq!(
        stored(store, &running).await.call_ended,
        Some(attempt),
        "mark_call_ended records the attempt"
    );
    assert_eq!(store.mark_call_ended(&ghost, 1).await, Err(StoreError::Conflict), "no such run");
}

async fn failing_streaks_are_told_once(store: &dyn RunStore) {
    let (job_id, other) = (JobId::generate(), JobId::generate());
    let now = at("2031-07-01T00:00:00Z");
    let mark = TroubleMark { as_of: at("2031-06-30T02:00:00Z"), told_at: now, told_by: "run-x".into() };
    let (k0, k1) =
        (RunKey::scheduled(at("2031-06-30T00:00:00Z")), RunKey::scheduled(at("2031-06-30T01:00:00Z")));
    store.flag_failing(&job_id, None, &mark).await.unwrap();
    assert_eq!(
        store.flag_failing(&job_id, None, &mark).await,
        Err(StoreError::Conflict),
        "a streak is told once"
    );
    store.flag_failing(&job_id, Some(&k1), &mark).await.expect("a later streak is told");
    assert_eq!(store.flag_failing(&job_id, Some(&k1), &mark).await, Err(StoreError::Conflict));
    assert_eq!(
        store.flag_failing(&job_id, Some(&k0), &mark).await,
        Err(StoreError::Conflict),
        "an earlier streak than one told is not told"
    );
    store.flag_failing(&other, Some(&k0), &mark).await.expect("streaks are per job");
    assert_eq!(
        store.troubles(&job_id).await.unwrap().failing,
        Some(mark),
        "a told streak is an open trouble"
    );
}

async fn troubles_open_once_and_close_as_read(store: &dyn RunStore) {
    let job_id = JobId::generate();
    assert!(store.troubles(&job_id).await.unwrap().is_empty(), "a job with none");
    let mark = |m: u32| TroubleMark {
        as_of: at("2031-07-02T00:00:00Z") + Duration::minutes(i64::from(m)),
        told_at: at("2031-07-02T00:00:00.123456789Z") + Duration::minutes(i64::from(m)),
        told_by: format!("run-{m}"),
    };
    store.open_trouble(&job_id, Trouble::FailureRate, &mark(1)).await.unwrap();
    assert_eq!(
        store.open_trouble(&job_id, Trouble::FailureRate, &mark(2)).await,
        Err(StoreError::Conflict),
        "open until closed"
    );
    store.open_trouble(&job_id, Trouble::Missed, &mark(3)).await.unwrap();
    store.flag_failing(&job_id, None, &mark(4)).await.unwrap();
    let open = store.troubles(&job_id).await.unwrap();
    assert_eq!(open, Troubles { failing: Some(mark(4)), failure_rate: Some(mark(1)), missed: Some(mark(3)) });

    // A close names the marks it read: one that moved since fails it whole.
    let stale = Troubles { failing: Some(mark(0)), missed: Some(mark(3)), ..Troubles::default() };
    assert_eq!(store.close_troubles(&job_id, &stale, "run-a").await, Err(StoreError::Conflict));
    assert_eq!(store.troubles_closed_by(&job_id).await.unwrap(), None, "a lost close records no closer");
    assert_eq!(store.troubles(&job_id).await.unwrap(), open, "nothing closed");
    let two = Troubles { failing: Some(mark(4)), missed: Some(mark(3)), ..Troubles::default() };
    store.close_troubles(&job_id, &two, "run-b").await.unwrap();
    assert_eq!(store.close_troubles(&job_id, &two, "run-c").await, Err(StoreError::Conflict), "closed once");
    assert_eq!(
        store.troubles_closed_by(&job_id).await.unwrap().as_deref(),
        Some("run-b"),
        "the closer is kept: a writer whose answer was lost knows its own close"
    );
    let left = store.troubles(&job_id).await.unwrap();
    assert_eq!(left, Troubles { failure_rate: Some(mark(1)), ..Troubles::default() });
    store.close_troubles(&job_id, &Troubles::default(), "run-d").await.expect("closing none is a no-op");
    assert_eq!(
        store.troubles_closed_by(&job_id).await.unwrap().as_deref(),
        Some("run-b"),
        "and records nothing"
    );
    store.close_troubles(&job_id, &left, "run-e").await.unwrap();
    store.open_trouble(&job_id, Trouble::FailureRate, &mark(5)).await.expect("opens again once closed");
}

async fn run_history_reads_in_key_order(store: &dyn RunStore) {
    let job_id = JobId::generate();
    let t = |m: i64| at("2031-08-01T00:00:00Z") + Duration::minutes(m);
    let states = [
        RunState::Succeeded,
        RunState::Running,
        RunState::Retrying,
        RunState::Queued,
        RunState::Failed,
        RunState::Running,
    ];
    let runs: Vec<Run> =
        states.iter().enumerate().map(|(m, s)| run(&job_id, RunKey::scheduled(t(m as i64)), *s)).collect();
    for r in &runs {
        store.insert(r, None).await.unwrap();
    }
    let manual = run(&job_id, RunKey::manual(t(3)), RunState::Succeeded);
    store.insert(&manual, None).await.unwrap();
    store.insert(&run(&JobId::generate(), RunKey::scheduled(t(2)), RunState::Running), None).await.unwrap();
    let keys = |runs: &[Run]| runs.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
    let k = |i: usize| runs[i].key.clone();

    let newest_first = [k(5), k(4), k(3), manual.key.clone(), k(2), k(1), k(0)];
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = store.list(&job_id, 3, cursor.as_deref(), None).await.unwrap();
        pages += 1;
        listed.extend(keys(&page.items));
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(
        (listed, pages),
        (newest_first.to_vec(), 3),
        "a job's runs list newest first (at one instant the scheduled run before manual ones), in pages"
    );
    let all = store.list(&job_id, 7, None, None).await.unwrap();
    assert_eq!((all.items.len(), all.next), (7, None), "a page that exactly fits has no next page");
    assert_eq!(all.items[0], runs[5], "listed runs are whole");
    let first = store.list(&job_id, 1, None, Some(RunState::Running)).await.unwrap();
    assert_eq!(keys(&first.items), [k(5)], "a state filter lists only that state");
    let rest = store.list(&job_id, 1, first.next.as_deref(), Some(RunState::Running)).await.unwrap();
    assert_eq!((keys(&rest.items), rest.next), (vec![k(1)], None), "and pages through it");
    assert_eq!(store.list(&job_id, 10, Some("garbage!"), None).await, Err(StoreError::BadCursor));
    let not_a_key = base64_url("2031-08-01T00:00:00Z#x");
    assert_eq!(store.list(&job_id, 10, Some(&not_a_key), None).await, Err(StoreError::BadCursor));
    let of_this_job = store.list(&job_id, 3, None, None).await.unwrap().next.unwrap();
    assert_eq!(
        store.list(&JobId::generate(), 10, Some(&of_this_job), None).await,
        Err(StoreError::BadCursor),
        "another job's cursor is refused"
    );

    assert_eq!(
        keys(&store.before(&job_id, &k(3), 2).await.unwrap()),
        [manual.key.clone(), k(2)],
        "before: older keys, newest first, up to the limit"
    );
    assert!(store.before(&job_id, &k(0), 5).await.unwrap().is_empty());
    assert_eq!(
        keys(&store.after(&job_id, &k(1), t(4), 10).await.unwrap()),
        [k(2), manual.key.clone(), k(3), k(4)],
        "after: newer keys up to `until`, oldest first, without the key itself"
    );
    assert_eq!(keys(&store.after(&job_id, &k(1), t(4), 2).await.unwrap()), [k(2), manual.key.clone()]);
    assert!(store.after(&job_id, &k(5), t(5), 10).await.unwrap().is_empty());

    let missing = RunId::new(job_id.clone(), RunKey::scheduled(t(9)));
    let mut many = store.get_many(&[runs[0].id(), missing, runs[5].id()]).await.unwrap();
    many.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(many, [runs[0].clone(), runs[5].clone()], "get_many reads the runs that exist");
    assert!(
        matches!(store.get_many(&[runs[0].id(), runs[0].id()]).await, Err(StoreError::Rejected(_))),
        "a batch naming a run twice is refused"
    );
}

fn base64_url(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

// ---------------------------------------------------------------------------------------------
// Tick state

/// Every promise of a [`TickStateStore`]; `store` must be fresh (nothing recorded yet).
pub async fn tick_state_store_keeps_its_promises(store: &dyn TickStateStore) {
    assert_eq!(store.get().await.unwrap(), TickState::default(), "a fresh tick state is empty");
    let m = |n: i64| at("2031-09-01T00:00:00Z") + Duration::minutes(n);

    store.set_reached(m(2)).await.unwrap();
    store.set_reached(m(1)).await.expect("an older minute is no error");
    store.set_watermark(m(1)).await.unwrap();
    store.set_watermark(m(0)).await.unwrap();
    store.note_shards(4).await.unwrap();
    store.note_shards(2).await.unwrap();
    store.set_looked_back(8).await.unwrap();
    store.set_looked_back(3).await.unwrap();
    let read = store.get().await.unwrap();
    assert_eq!(
        (read.reached, read.watermark, read.shards, read.looked_back),
        (Some(m(2)), Some(m(1)), Some(4), Some(8)),
        "minutes and shard counts only ever move forward"
    );
    store.set_watermark(m(3) + Duration::milliseconds(1500)).await.unwrap();
    assert_eq!(
        store.get().await.unwrap().watermark,
        Some(m(3) + Duration::seconds(1)),
        "minutes are kept to the whole second"
    );

    let since = m(10);
    store.open_incident(since, "scheduler_stalled").await.unwrap();
    let read = store.get().await.unwrap();
    assert_eq!(
        (read.stalled_since, read.unsent_alert.as_deref(), read.alert_taken_at),
        (Some(since), Some("scheduler_stalled"), Some(since)),
        "an opened incident records its alert unsent, taken on by its recorder"
    );
    assert_eq!(
        store.open_incident(m(11), "scheduler_stalled").await,
        Err(StoreError::Conflict),
        "an incident opens once"
    );
    assert_eq!(store.get().await.unwrap().stalled_since, Some(since));

    let first = m(12) + Duration::nanoseconds(123_456_789);
    store.take_alert("scheduler_stalled", Some(since), first).await.unwrap();
    assert_eq!(store.get().await.unwrap().alert_taken_at, Some(first), "taking an alert over records when");
    for (alert, read_at) in [
        ("scheduler_stalled", Some(since)),
        ("scheduler_stalled", None),
        ("scheduler_recovered", Some(first)),
    ] {
        assert_eq!(
            store.take_alert(alert, read_at, m(13)).await,
            Err(StoreError::Conflict),
            "an alert taken since it was read, or not the one unsent, cannot be taken ({alert}, {read_at:?})"
        );
    }
    store.mark_alert_sent("scheduler_stalled").await.unwrap();
    let read = store.get().await.unwrap();
    assert_eq!((read.unsent_alert, read.alert_taken_at, read.stalled_since), (None, None, Some(since)));
    assert_eq!(store.mark_alert_sent("scheduler_stalled").await, Err(StoreError::Conflict), "marked once");
    assert_eq!(store.take_alert("scheduler_stalled", None, m(14)).await, Err(StoreError::Conflict));

    assert_eq!(
        store.close_incident(m(11), "scheduler_recovered", m(15)).await,
        Err(StoreError::Conflict),
        "only the incident open closes"
    );
    store.close_incident(since, "scheduler_recovered", m(15)).await.unwrap();
    let read = store.get().await.unwrap();
    assert_eq!(
        (read.stalled_since, read.unsent_alert.as_deref(), read.alert_taken_at),
        (None, Some("scheduler_recovered"), Some(m(15))),
        "a closed incident records its alert unsent"
    );
    assert_eq!(
        store.close_incident(since, "scheduler_recovered", m(16)).await,
        Err(StoreError::Conflict),
        "an incident closes once"
    );
    store.take_alert("scheduler_recovered", Some(m(15)), m(16)).await.unwrap();
    store.open_incident(m(20), "scheduler_stalled").await.expect("a new incident opens after one closed");

    let cursor = RunId::new(JobId::generate(), RunKey::manual(m(30)));
    store.set_watchdog_cursor(Some(&cursor)).await.unwrap();
    assert_eq!(store.get().await.unwrap().watchdog_cursor, Some(cursor), "the watchdog's cursor is kept");
    store.set_watchdog_cursor(None).await.unwrap();
    assert_eq!(store.get().await.unwrap().watchdog_cursor, None, "and cleared");
    assert_eq!(store.get().await.unwrap().reached, Some(m(2)), "the incident left the minutes alone");
}

// ---------------------------------------------------------------------------------------------
// Concurrency groups

/// Every promise of a [`GroupStore`]: a group is created once per owner and name, replaced and
/// deleted only under the version read, read back exactly as written (slots, waiters, links),
/// and the same name of another owner is another group.
/// A start fence is taken only over the holder read: of two takes over one holder one wins, a
/// take over a holder that moved on or over a fence that exists as if new is a `Conflict`, the
/// holder reads back as written, one job's fence is not another's, and a removed fence is new
/// again.
pub async fn fence_store_keeps_its_promises(store: &dyn FenceStore) {
    let (job, other) = (JobId::generate(), JobId::generate());
    let first = RunKey::scheduled(at("2030-01-01T12:00:00Z"));
    let second = RunKey::manual(at("2030-01-01T12:00:01Z"));
    let third = RunKey::scheduled(at("2030-01-01T12:01:00Z"));
    let fence = |holder: &RunKey, previous: Option<&RunKey>| {
        Some(Fence { holder: holder.clone(), previous: previous.cloned() })
    };
    assert_eq!(store.get(&job).await.unwrap(), None, "never taken");
    store.take(&job, None, &first, None).await.unwrap();
    assert_eq!(store.take(&job, None, &second, None).await, Err(StoreError::Conflict), "taken once as new");
    assert_eq!(store.get(&job).await.unwrap(), fence(&first, None));
    assert_eq!(store.get(&other).await.unwrap(), None, "another job's fence is its own");

    store.take(&job, Some(&first), &second, Some(&first)).await.unwrap();
    assert_eq!(store.get(&job).await.unwrap(), fence(&second, Some(&first)), "a manual key reads back whole");
    assert_eq!(
        store.take(&job, Some(&first), &third, Some(&first)).await,
        Err(StoreError::Conflict),
        "the second of two takes over one holder loses"
    );
    assert_eq!(store.get(&job).await.unwrap(), fence(&second, Some(&first)), "a lost take writes nothing");
    assert_eq!(
        store.take(&other, Some(&first), &third, None).await,
        Err(StoreError::Conflict),
        "no such holder"
    );
    assert_eq!(store.get(&other).await.unwrap(), None);
    // Over a holder that never started, the run before it stays the one waited for.
    store.take(&job, Some(&second), &third, Some(&first)).await.unwrap();
    assert_eq!(store.get(&job).await.unwrap(), fence(&third, Some(&first)));
    store.take(&job, Some(&third), &second, None).await.unwrap();
    assert_eq!(store.get(&job).await.unwrap(), fence(&second, None), "no previous: none kept");

    store.remove(&job).await.unwrap();
    store.remove(&job).await.unwrap();
    assert_eq!(store.get(&job).await.unwrap(), None, "removed");
    store.take(&job, None, &third, None).await.unwrap();
    assert_eq!(store.get(&job).await.unwrap(), fence(&third, None));
}

// ---------------------------------------------------------------------------------------------
// Named calendars

/// Every promise of a [`KeyStore`]: a key is created once per id, while its owner has fewer than
/// the most not revoked; read back by id exactly as written; listed by owner and name; revoked
/// only by its owner and once, then still read (as revoked) but no longer listed or counted; its
/// last use recorded at most every minute.
pub async fn key_store_keeps_its_promises(store: &dyn KeyStore) {
    use sundial_domain::keys::{ApiKey, MAX_KEYS_PER_OWNER, Role};
    let now = chrono::SubsecRound::trunc_subsecs(Utc::now(), 3);
    let owner = unique("owner");
    let key = |id: String, name: &str| ApiKey {
        id,
        owner: owner.clone(),
        name: name.to_string(),
        role: Role::Operator,
        created_by: "alice".into(),
        created_at: now,
        expires_at: Some(now + Duration::days(30)),
        last_used_at: None,
        revoked_at: None,
        last_refused_at: None,
        subject: None,
        digest: "ab".repeat(32),
    };
    let id = |n: u32| format!("{:012x}{n:08x}", rand_suffix());
    let first = key(id(1), "zeta");
    store.create(&first, None).await.unwrap();
    assert_eq!(store.create(&first, None).await, Err(StoreError::Conflict), "created once");
    assert_eq!(store.get(&first.id).await.unwrap().as_ref(), Some(&first), "read back as written");
    let second = key(id(2), "alpha");
    store.create(&second, None).await.unwrap();
    assert_eq!(store.list(&owner).await.unwrap(), vec![second.clone(), first.clone()], "listed by name");
    assert_eq!(store.list(&unique("other")).await.unwrap(), Vec::new(), "another owner's list is its own");

    store.touch(&first.id, now + Duration::seconds(5)).await.unwrap();
    assert_eq!(
        store.get(&first.id).await.unwrap().and_then(|k| k.last_used_at),
        Some(now + Duration::seconds(5))
    );
    store.touch(&first.id, now + Duration::seconds(30)).await.unwrap();
    let seen = store.get(&first.id).await.unwrap().and_then(|k| k.last_used_at);
    assert_eq!(seen, Some(now + Duration::seconds(5)), "within the minute: not written again");
    store.touch(&first.id, now + Duration::seconds(70)).await.unwrap();
    let seen = store.get(&first.id).await.unwrap().and_then(|k| k.last_used_at);
    assert_eq!(seen, Some(now + Duration::seconds(70)));

    let revoked_at = now + Duration::seconds(100);
    assert_eq!(
        store.revoke(&unique("other"), &first.id, revoked_at, None).await,
        Err(StoreError::NotFound),
        "only by its owner"
    );
    assert_eq!(store.get(&first.id).await.unwrap().and_then(|k| k.revoked_at), None);
    store.revoke(&owner, &first.id, revoked_at, None).await.unwrap();
    let read = store.get(&first.id).await.unwrap();
    assert_eq!(read.and_then(|k| k.revoked_at), Some(revoked_at), "still read, as revoked");
    assert_eq!(store.revoke(&owner, &first.id, revoked_at, None).await, Err(StoreError::NotFound), "once");
    assert_eq!(store.list(&owner).await.unwrap(), vec![second.clone()], "unlisted");

    for n in 1..MAX_KEYS_PER_OWNER as u32 {
        store.create(&key(id(100 + n), &format!("k{n:03}")), None).await.unwrap();
    }
    let over = store.create(&key(id(999), "one-more"), None).await;
    assert_eq!(over, Err(StoreError::QuotaExceeded(MAX_KEYS_PER_OWNER as u32)), "no more than the most");
    store.revoke(&owner, &second.id, revoked_at, None).await.unwrap();
    store.create(&key(id(999), "one-more"), None).await.unwrap();
}

/// Every promise of the audit trail: a record lands with its change and only with it (a change
/// refused by its condition leaves none), is read back exactly as written, newest first, filtered
/// by job, actor, action and time, and paged to the end by its cursor; a key's refusals are
/// recorded once a minute.
pub async fn audit_records_land_with_their_changes(
    jobs: &dyn Catalogue,
    runs: &dyn RunWrites,
    keys: &dyn KeyStore,
    trail: &dyn AuditTrail,
) {
    use sundial_domain::audit::{Actor, ActorKind, AuditQuery, Stamp, Target, TargetKind, record_id};
    use sundial_domain::entropy::OsEntropy;
    use sundial_domain::keys::{ApiKey, Role};
    let owner = unique("owner");
    let stamp = |name: &str, action: &str| Stamp {
        actor: Actor { kind: ActorKind::Key, name: name.into(), key_id: Some(format!("id-{name}")) },
        action: action.into(),
        route: "PATCH /v1/jobs/{id}".into(),
        request_id: unique("request"),
        source: Some("127.0.0.1".into()),
    };
    let base = chrono::SubsecRound::trunc_subsecs(Utc::now(), 3);
    let record = |stamp: &Stamp, at: DateTime<Utc>, job: &Job| {
        let target =
            Target { kind: TargetKind::Job, id: job.id.to_string(), name: Some(job.document.name.clone()) };
        stamp
            .record(record_id(at, &OsEntropy), &owner, at, 400, target)
            .of_job(&job.id)
            .changing(&json!({"retry": 1, "secret": "<redacted>"}), &json!({"retry": 2}))
    };
    let everything = AuditQuery::default();
    let all = |query: AuditQuery| trail_read(trail, &owner, query);

    // A job's creation and edit land with their records; a stale edit lands with neither.
    let alice = stamp("alice", "job.create");
    let first = job(&owner, "audited", None);
    let created = record(&alice, base, &first);
    jobs.create(&first, 100, Some(&created)).await.unwrap();
    let second = edited(&first, |d| d.description = Some("v2".into()));
    let bob = stamp("bob", "job.update");
    let updated = record(&bob, base + Duration::seconds(1), &second);
    jobs.update(&first, &second, Some(&updated)).await.unwrap();
    let stale = edited(&first, |d| d.description = Some("lost".into()));
    let lost = record(&bob, base + Duration::seconds(2), &stale);
    assert_eq!(jobs.update(&first, &stale, Some(&lost)).await, Err(StoreError::Conflict));
    assert_eq!(
        all(everything.clone()).await,
        vec![updated.clone(), created.clone()],
        "newest first, as written"
    );

    // A run's insert lands with its record; an insert of a key that exists lands without.
    let manual = run(&first.id, RunKey::manual(base), RunState::Queued);
    let carol = stamp("carol", "job.trigger");
    let triggered = record(&carol, base + Duration::seconds(3), &second);
    assert_eq!(runs.insert(&manual, Some(&triggered)).await.unwrap(), Inserted::Created);
    let again = record(&carol, base + Duration::seconds(4), &second);
    assert!(matches!(runs.insert(&manual, Some(&again)).await.unwrap(), Inserted::Exists(_)));
    let cancelled = Run { state: RunState::Cancelled, ..manual.clone() };
    let cancel = record(&stamp("carol", "run.cancel"), base + Duration::seconds(5), &second);
    runs.transition(&manual, &cancelled, Some(&cancel)).await.unwrap();
    let refused = record(&stamp("carol", "run.cancel"), base + Duration::seconds(6), &second);
    assert_eq!(runs.transition(&manual, &cancelled, Some(&refused)).await, Err(StoreError::Conflict));

    // Filters, each on its own, and time bounds (from inclusive, to exclusive).
    let by = all;
    assert_eq!(
        by(AuditQuery { actor: Some("bob".into()), ..Default::default() }).await,
        vec![updated.clone()]
    );
    assert_eq!(
        by(AuditQuery { actor: Some("id-alice".into()), ..Default::default() }).await,
        vec![created.clone()]
    );
    assert_eq!(
        by(AuditQuery { action: Some("run.cancel".into()), ..Default::default() }).await,
        vec![cancel.clone()]
    );
    let window = AuditQuery {
        from: Some(base + Duration::seconds(1)),
        to: Some(base + Duration::seconds(5)),
        ..Default::default()
    };
    assert_eq!(by(window).await, vec![triggered.clone(), updated.clone()]);
    let other = job(&owner, "other", None);
    assert_eq!(by(AuditQuery { job: Some(other.id.clone()), ..Default::default() }).await, Vec::new());
    assert_eq!(by(AuditQuery { job: Some(first.id.clone()), ..Default::default() }).await.len(), 4);
    assert!(
        trail.page(&unique("owner"), &everything, 50, None).await.unwrap().items.is_empty(),
        "another owner's"
    );

    // A deleted job's record lands with its delete.
    let gone = record(&alice, base + Duration::seconds(7), &second);
    jobs.delete(&second, Some(&gone)).await.unwrap();
    assert_eq!(all(everything.clone()).await.first(), Some(&gone));

    // A refused use of a key: recorded once a minute.
    let key = ApiKey {
        id: format!("{:012x}{:08x}", rand_suffix(), 7),
        owner: owner.clone(),
        name: "leaked".into(),
        role: Role::Viewer,
        created_by: "alice".into(),
        created_at: base,
        expires_at: None,
        last_used_at: None,
        revoked_at: None,
        last_refused_at: None,
        subject: None,
        digest: "cd".repeat(32),
    };
    keys.create(&key, None).await.unwrap();
    let refusal = |at: DateTime<Utc>| {
        let target = Target { kind: TargetKind::Key, id: key.id.clone(), name: Some(key.name.clone()) };
        stamp("leaked", "key.refused").record(record_id(at, &OsEntropy), &owner, at, 400, target)
    };
    let t0 = base + Duration::seconds(10);
    keys.refused(&key.id, t0, &refusal(t0)).await.unwrap();
    keys.refused(&key.id, t0 + Duration::seconds(30), &refusal(t0 + Duration::seconds(30))).await.unwrap();
    keys.refused(&key.id, t0 + Duration::seconds(61), &refusal(t0 + Duration::seconds(61))).await.unwrap();
    let refusals = by(AuditQuery { action: Some("key.refused".into()), ..Default::default() }).await;
    let times: Vec<DateTime<Utc>> = refusals.iter().map(|r| r.at).collect();
    assert_eq!(times, vec![t0 + Duration::seconds(61), t0], "one a minute");
}

/// Every record of `owner`'s trail that `query` asks for, read a record a page to the end.
async fn trail_read(
    trail: &dyn AuditTrail,
    owner: &str,
    query: sundial_domain::audit::AuditQuery,
) -> Vec<sundial_domain::audit::AuditRecord> {
    let mut records = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = trail.page(owner, &query, 1, cursor.as_deref()).await.unwrap();
        records.extend(page.items);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return records,
        }
    }
}

/// 48 random bits, so that ids of one run of the suite differ from another's.
fn rand_suffix() -> u64 {
    u64::from_str_radix(&JobId::generate().to_string()[..12], 32).unwrap_or(0) & 0xffff_ffff_ffff
}

/// Every promise of a [`CalendarStore`]: a calendar is created once per owner and name, while the
/// owner has fewer than the most; replaced and deleted only under the version read; read back and
/// listed exactly as written, by name; its links a record of their own; another owner's name is
/// another calendar.
pub async fn calendar_store_keeps_its_promises(store: &dyn CalendarStore) {
    use sundial_domain::calendar::HolidayEntry;
    use sundial_domain::calendar::NamedCalendarDocument;
    use sundial_domain::named_calendar::{MAX_CALENDARS_PER_OWNER, NamedCalendar};
    let now = chrono::SubsecRound::trunc_subsecs(Utc::now(), 3);
    let owner = unique("owner");
    let calendar = |name: &str, version: u64| NamedCalendar {
        owner: owner.clone(),
        name: name.to_string(),
        document: NamedCalendarDocument {
            description: Some("exchange holidays".into()),
            timezone: Some("America/New_York".into()),
            business_days: Some(vec!["mon".into(), "tue".into()]),
            holidays: vec![
                HolidayEntry::Date("2030-01-01".into()),
                HolidayEntry::Range { from: "2030-12-24".into(), to: "2030-12-31".into() },
            ],
        },
        version,
        created_at: now,
        updated_at: now,
    };
    assert_eq!(store.get(&owner, "nyse").await.unwrap(), None);
    assert_eq!(store.list(&owner).await.unwrap(), Vec::new(), "an owner without calendars lists none");
    let nyse = calendar("nyse", 1);
    store.put(&nyse, None, None).await.unwrap();
    assert_eq!(store.put(&nyse, None, None).await, Err(StoreError::Conflict), "created once");
    assert_eq!(store.get(&owner, "nyse").await.unwrap().as_ref(), Some(&nyse), "read back as written");
    assert_eq!(store.get(&unique("other"), "nyse").await.unwrap(), None, "another owner's name is free");
    let lse = calendar("lse", 1);
    store.put(&lse, None, None).await.unwrap();
    assert_eq!(store.list(&owner).await.unwrap(), vec![lse.clone(), nyse.clone()], "listed by name");
    assert_eq!(store.list(&unique("other")).await.unwrap(), Vec::new(), "another owner's list is its own");

    let edited = NamedCalendar { version: 2, document: NamedCalendarDocument::default(), ..nyse.clone() };
    store.put(&edited, Some(1), None).await.unwrap();
    assert_eq!(store.get(&owner, "nyse").await.unwrap().as_ref(), Some(&edited));
    assert_eq!(
        store.put(&NamedCalendar { version: 3, ..edited.clone() }, Some(1), None).await,
        Err(StoreError::Conflict),
        "only over the version read"
    );
    assert_eq!(
        store.put(&calendar("none", 2), Some(1), None).await,
        Err(StoreError::NotFound),
        "no such calendar to replace"
    );

    // Links: their own record, each write moving their version.
    let (job, other) = ("01jd0000000000000000000003", "01jd0000000000000000000004");
    store.link(&owner, "nyse", job, now + Duration::nanoseconds(1_500_000)).await.unwrap();
    store.link(&owner, "nyse", other, now).await.unwrap();
    let links = store.links(&owner, "nyse").await.unwrap();
    assert_eq!(links.jobs[job].at, now + Duration::milliseconds(1), "to the millisecond");
    assert_eq!((links.jobs.len(), links.version), (2, 2));
    assert_eq!(store.get(&owner, "nyse").await.unwrap().as_ref(), Some(&edited), "the calendar untouched");
    store.unlink(&owner, "nyse", other).await.unwrap();
    store.unlink(&owner, "nyse", other).await.unwrap();
    let links = store.links(&owner, "nyse").await.unwrap();
    assert_eq!((links.jobs.len(), links.version), (1, 3), "unlinked once");
    assert_eq!(
        store.link(&owner, "none", job, now).await,
        Err(StoreError::NotFound),
        "no link to a calendar that does not exist"
    );
    // A stale link is pruned only if it is still the one made at the time read.
    store.link(&owner, "nyse", other, now).await.unwrap();
    store.unlink_stale(&owner, "nyse", other, now - Duration::seconds(1)).await.unwrap();
    assert!(store.links(&owner, "nyse").await.unwrap().jobs.contains_key(other), "made again since: kept");
    store.unlink_stale(&owner, "nyse", other, now).await.unwrap();
    let links = store.links(&owner, "nyse").await.unwrap();
    assert_eq!((links.jobs.len(), links.version), (1, 5), "pruned once");

    assert_eq!(
        store.delete(&owner, "nyse", 1, links.version, None).await,
        Err(StoreError::Conflict),
        "deleted only at its version"
    );
    assert_eq!(
        store.delete(&owner, "nyse", 2, links.version - 1, None).await,
        Err(StoreError::Conflict),
        "and only at its links' version"
    );
    store.delete(&owner, "nyse", 2, links.version, None).await.unwrap();
    assert_eq!(store.get(&owner, "nyse").await.unwrap(), None);
    assert_eq!(
        store.links(&owner, "nyse").await.unwrap(),
        sundial_domain::group::Links::default(),
        "links gone too"
    );
    assert_eq!(store.list(&owner).await.unwrap(), vec![lse.clone()], "unlisted");
    assert_eq!(store.delete(&owner, "nyse", 2, 0, None).await, Err(StoreError::NotFound));
    store.delete(&owner, "lse", 1, 0, None).await.unwrap();

    // The most an owner keeps, then a delete frees a place.
    for i in 0..MAX_CALENDARS_PER_OWNER {
        store.put(&calendar(&format!("c{i:03}"), 1), None, None).await.unwrap();
    }
    let over = store.put(&calendar("one-more", 1), None, None).await;
    assert_eq!(over, Err(StoreError::QuotaExceeded(MAX_CALENDARS_PER_OWNER as u32)), "no more than the most");
    assert_eq!(store.list(&owner).await.unwrap().len(), MAX_CALENDARS_PER_OWNER, "every one listed");
    store.delete(&owner, "c000", 1, 0, None).await.unwrap();
    store.put(&calendar("one-more", 1), None, None).await.unwrap();
}

pub async fn group_store_keeps_its_promises(store: &dyn GroupStore) {
    let now = chrono::SubsecRound::trunc_subsecs(Utc::now(), 3);
    let owner = unique("owner");
    let name = "etl";
    assert_eq!(store.get(&owner, name).await.unwrap(), None);
    let mut group = sundial_domain::group::Group::new(&owner, name, 2, now);
    store.put(&group, None, None).await.unwrap();
    assert_eq!(store.put(&group, None, None).await, Err(StoreError::Conflict), "created once");
    assert_eq!(store.get(&owner, name).await.unwrap().as_ref(), Some(&group), "read back as written");
    assert_eq!(store.get(&unique("other"), name).await.unwrap(), None, "another owner's name is free");

    let before = group.version;
    group.slots.insert(
        "01jd0000000000000000000000.20300101T120000Z".into(),
        sundial_domain::group::Slot {
            attempt: 1,
            taken_at: now + Duration::milliseconds(1),
            until: now + Duration::seconds(90),
        },
    );
    group.waiting.insert(
        "01jd0000000000000000000001.20300101T120000Z".into(),
        sundial_domain::group::Waiter {
            attempt: 2,
            instant: now,
            since: now,
            seen_at: now + Duration::milliseconds(7),
        },
    );
    // Links written into the ledger by an earlier version are kept with it.
    group.jobs.insert("01jd0000000000000000000002".into(), sundial_domain::group::Link { at: now });
    group.version = before + 1;
    store.put(&group, Some(before), None).await.unwrap();
    assert_eq!(
        store.get(&owner, name).await.unwrap().as_ref(),
        Some(&group),
        "slots, waiters and old links kept"
    );
    let stale = sundial_domain::group::Group { version: before + 1, ..group.clone() };
    assert_eq!(
        store.put(&stale, Some(before), None).await,
        Err(StoreError::Conflict),
        "only over the version read"
    );

    // Links: their own record, each write moving their version, never the ledger's.
    assert_eq!(store.links(&owner, name).await.unwrap(), sundial_domain::group::Links::default());
    let (job, other) = ("01jd0000000000000000000003", "01jd0000000000000000000004");
    store.link(&owner, name, job, now + Duration::nanoseconds(1_500_000)).await.unwrap();
    store.link(&owner, name, other, now).await.unwrap();
    let links = store.links(&owner, name).await.unwrap();
    assert_eq!(links.jobs[job].at, now + Duration::milliseconds(1), "to the millisecond");
    assert_eq!(links.jobs.len(), 2);
    assert_eq!(links.version, 2);
    assert_eq!(store.get(&owner, name).await.unwrap().as_ref(), Some(&group), "the ledger untouched");
    store.unlink(&owner, name, other).await.unwrap();
    store.unlink(&owner, name, other).await.unwrap();
    let links = store.links(&owner, name).await.unwrap();
    assert_eq!((links.jobs.len(), links.version), (1, 3), "unlinked once");
    assert_eq!(
        store.link(&owner, "none", job, now).await,
        Err(StoreError::NotFound),
        "no link to a group that does not exist"
    );
    assert_eq!(store.links(&owner, "none").await.unwrap(), sundial_domain::group::Links::default());

    assert_eq!(
        store.delete(&owner, name, before, links.version, None).await,
        Err(StoreError::Conflict),
        "deleted only at its version"
    );
    assert_eq!(
        store.delete(&owner, name, group.version, links.version - 1, None).await,
        Err(StoreError::Conflict),
        "and only at its links' version"
    );
    store.delete(&owner, name, group.version, links.version, None).await.unwrap();
    assert_eq!(store.get(&owner, name).await.unwrap(), None);
    assert_eq!(
        store.links(&owner, name).await.unwrap(),
        sundial_domain::group::Links::default(),
        "links gone too"
    );
    assert_eq!(store.delete(&owner, name, group.version, 0, None).await, Err(StoreError::NotFound));
    assert_eq!(
        store.put(&group, Some(group.version), None).await,
        Err(StoreError::NotFound),
        "gone is not found"
    );
    // A group that never had a link is deleted at links version 0.
    let fresh = sundial_domain::group::Group::new(&owner, name, 1, now);
    store.put(&fresh, None, None).await.unwrap();
    store.delete(&owner, name, fresh.version, 0, None).await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Idempotency

/// Every promise of an [`IdempotencyStore`]. Times are near now: the emulator's TTL reaper
/// removes records whose expiry has passed.
pub async fn idempotency_store_keeps_its_promises(store: &dyn IdempotencyStore) {
    let now = Utc::now();
    let secs = Duration::seconds;
    let response = StoredResponse {
        status: 201,
        headers: BTreeMap::from([("etag".into(), "\"1\"".into()), ("location".into(), "/v1/jobs/x".into())]),
        body: r#"{"id":"x"}"#.into(),
    };

    let key = unique("key");
    assert_eq!(
        store.claim(&key, "f1", now).await.unwrap(),
        Claim::New { first_seen: now },
        "a new key is claimed"
    );
    assert_eq!(
        store.claim(&key, "f1", now + secs(1)).await.unwrap(),
        Claim::InProgress,
        "a claimed key is in progress"
    );
    assert_eq!(
        store.claim(&key, "f2", now + secs(1)).await.unwrap(),
        Claim::Mismatch,
        "another request's key"
    );
    store.complete(&key, &response, now + secs(2)).await.unwrap();
    assert_eq!(
        store.claim(&key, "f1", now + secs(3)).await.unwrap(),
        Claim::Replay(response.clone()),
        "a completed key replays its response"
    );
    assert_eq!(store.claim(&key, "f2", now + secs(3)).await.unwrap(), Claim::Mismatch);
    store.release(&key).await.unwrap();
    assert_eq!(
        store.claim(&key, "f1", now + secs(4)).await.unwrap(),
        Claim::Replay(response.clone()),
        "a completed claim cannot be released"
    );

    let released = unique("key");
    store.claim(&released, "f1", now).await.unwrap();
    store.release(&released).await.unwrap();
    assert_eq!(
        store.claim(&released, "f1", now + secs(5)).await.unwrap(),
        Claim::New { first_seen: now },
        "a released key is claimed again, keeping when it was first seen"
    );
    store.release(&released).await.unwrap();
    assert_eq!(
        store.claim(&released, "f2", now + secs(6)).await.unwrap(),
        Claim::Mismatch,
        "a released key keeps its fingerprint"
    );

    let crashed = unique("key");
    store.claim(&crashed, "f1", now).await.unwrap();
    assert_eq!(
        store.claim(&crashed, "f1", now + secs(60)).await.unwrap(),
        Claim::InProgress,
        "a claim blocks its key for 60 s"
    );
    assert_eq!(store.claim(&crashed, "f2", now + secs(61)).await.unwrap(), Claim::Mismatch);
    assert_eq!(
        store.claim(&crashed, "f1", now + secs(61)).await.unwrap(),
        Claim::New { first_seen: now },
        "a claim left pending longer is taken over by the same request"
    );
    store.release(&unique("key")).await.expect("releasing an unknown key is nothing");
}

// ---------------------------------------------------------------------------------------------
// The runs queue

/// How time passes for a queue under test.
#[async_trait]
pub trait Pace: Send + Sync {
    /// Seconds since the pace began, as the queue measures time.
    fn elapsed(&self) -> f64;
    /// Lets `seconds` pass.
    async fn pass(&self, seconds: f64);
    /// Whether letting a whole hold or the longest delay pass is cheap (a manual clock).
    fn fast(&self) -> bool;
}

/// A manual clock, moved by hand: the in-memory queue's time.
#[derive(Debug)]
pub struct ManualPace {
    clock: Arc<ManualClock>,
    origin: DateTime<Utc>,
}

impl ManualPace {
    pub fn new(clock: Arc<ManualClock>) -> Self {
        let origin = clock.now();
        ManualPace { clock, origin }
    }
}

#[async_trait]
impl Pace for ManualPace {
    fn elapsed(&self) -> f64 {
        (self.clock.now() - self.origin).num_milliseconds() as f64 / 1000.0
    }
    async fn pass(&self, seconds: f64) {
        self.clock.advance(Duration::milliseconds((seconds * 1000.0).round() as i64));
    }
    fn fast(&self) -> bool {
        true
    }
}

/// Real time, waited out: SQS's.
#[derive(Debug)]
pub struct RealPace(std::time::Instant);

impl RealPace {
    pub fn new() -> Self {
        RealPace(std::time::Instant::now())
    }
}

impl Default for RealPace {
    fn default() -> Self {
        RealPace::new()
    }
}

#[async_trait]
impl Pace for RealPace {
    fn elapsed(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
    async fn pass(&self, seconds: f64) {
        tokio::time::sleep(std::time::Duration::from_secs_f64(seconds)).await;
    }
    fn fast(&self) -> bool {
        false
    }
}

fn dispatch(tag: &str, delay_s: u32) -> Dispatch {
    Dispatch {
        message: RunMessage {
            job_id: tag.to_string(),
            run_key: "k".into(),
            attempt: 1,
            look: None,
            tag: None,
        },
        delay_s,
        tenant: "owner-a".into(),
    }
}

fn body_of(d: &Dispatch) -> String {
    serde_json::to_string(&d.message).unwrap()
}

/// Receives (without waiting) until `wanted` messages with these bodies have come, within
/// `limit_s` of the pace; returns every message received meanwhile.
async fn receive_until(
    inbox: &dyn RunInbox,
    pace: &dyn Pace,
    wanted: &[&str],
    limit_s: f64,
) -> Vec<Received> {
    let start = pace.elapsed();
    let mut got: Vec<Received> = Vec::new();
    loop {
        got.extend(inbox.receive(10, 0).await.unwrap());
        if wanted.iter().all(|w| got.iter().any(|r| r.body == *w)) {
            return got;
        }
        assert!(
            pace.elapsed() - start < limit_s,
            "still waiting for {wanted:?} after {limit_s} s; received {got:?}"
        );
        pace.pass(0.2).await;
    }
}

/// Everything received (without waiting) over `seconds` of the pace.
async fn receive_for(inbox: &dyn RunInbox, pace: &dyn Pace, seconds: f64) -> Vec<Received> {
    let start = pace.elapsed();
    let mut got = inbox.receive(10, 0).await.unwrap();
    while pace.elapsed() - start < seconds {
        pace.pass(0.2).await;
        got.extend(inbox.receive(10, 0).await.unwrap());
    }
    got
}

fn the<'a>(got: &'a [Received], body: &str) -> &'a Received {
    got.iter().find(|r| r.body == body).unwrap_or_else(|| panic!("{body} was not received: {got:?}"))
}

/// Every promise of the runs queue: `queue` and `inbox` over fresh queues (the runs queue and
/// its dead-letter queue, empty), whose redrive policy moves a message to the dead-letter queue
/// after `max_receives` receives; `pace` lets the queue's time pass.
pub async fn run_queue_keeps_its_promises(
    queue: &dyn RunQueue,
    inbox: &dyn RunInbox,
    pace: &dyn Pace,
    max_receives: u32,
) {
    assert!(inbox.receive(10, 0).await.unwrap().is_empty(), "a fresh queue has nothing to receive");

    // Delays: a message is never received before its delay has passed since it was sent.
    let (now, later) = (dispatch("now", 0), dispatch("later", 2));
    let (now_body, later_body) = (body_of(&now), body_of(&later));
    let sent_at = pace.elapsed();
    assert_eq!(
        queue.send(&[now.clone(), later.clone()]).await,
        vec![Ok(()), Ok(())],
        "one result per message"
    );
    // Wherever the delayed message shows up, its delay had passed.
    let check_later = |got: &[Received]| {
        let found = got.iter().find(|r| r.body == later_body).cloned();
        if found.is_some() {
            let after = pace.elapsed() - sent_at;
            assert!(
                after >= 2.0,
                "a message is not received before its delay: seen {after} s after its send"
            );
        }
        found
    };
    let got = receive_until(inbox, pace, &[&now_body], 10.0).await;
    let mut seen_later = check_later(&got);
    let first = the(&got, &now_body).clone();
    assert_eq!(first.receive_count, 1, "a first receive counts one");
    assert!(!first.message_id.is_empty() && !first.receipt.is_empty());
    assert_eq!(
        serde_json::from_str::<RunMessage>(&first.body).unwrap(),
        now.message,
        "the body is the run message as JSON"
    );
    let again = inbox.receive(10, 0).await.unwrap();
    seen_later = seen_later.or_else(|| check_later(&again));
    assert!(again.iter().all(|r| r.body != now_body), "a received message is hidden while it is held");
    if seen_later.is_none() {
        let got = receive_until(inbox, pace, &[&later_body], 15.0).await;
        seen_later = check_later(&got);
        assert!(got.iter().all(|r| r.body != now_body), "a held message stays hidden");
    }
    let later_received = seen_later.expect("the delayed message came");
    inbox.delete(&later_received.receipt).await.unwrap();

    // Visibility.
    inbox.set_visibility(&first.receipt, 0).await.unwrap();
    let got = receive_until(inbox, pace, &[&now_body], 10.0).await;
    let second = the(&got, &now_body).clone();
    assert_eq!(
        (second.message_id.as_str(), second.receive_count),
        (first.message_id.as_str(), 2),
        "set_visibility(0) shows a message again at once; receives are counted"
    );
    assert_ne!(second.receipt, first.receipt, "each receive gives a new receipt");
    let hidden_at = pace.elapsed();
    inbox.set_visibility(&second.receipt, 1).await.unwrap();
    let got = receive_until(inbox, pace, &[&now_body], 10.0).await;
    assert!(pace.elapsed() - hidden_at >= 1.0, "set_visibility hides a message for as long as asked");
    let third = the(&got, &now_body).clone();
    assert_eq!(third.receive_count, 3);
    let mut held = third.clone();
    if pace.fast() {
        pace.pass(f64::from(HOLD_S) - 1.0).await;
        assert!(
            inbox.receive(10, 0).await.unwrap().iter().all(|r| r.body != now_body),
            "a receive holds a message for HOLD_S"
        );
        pace.pass(2.0).await;
        let got = inbox.receive(10, 0).await.unwrap();
        held = the(&got, &now_body).clone();
        assert_eq!(held.receive_count, 4, "a message whose hold ran out comes back");
    }

    // Delete: a deleted message never comes back, even one visible when it was deleted.
    inbox.set_visibility(&held.receipt, 0).await.unwrap();
    inbox.delete(&held.receipt).await.unwrap();
    let got = receive_for(inbox, pace, 0.5).await;
    assert!(got.iter().all(|r| r.body != now_body), "a deleted message is not received again: {got:?}");

    // Batches: any number sent, at most `max` (and never more than 10) received at a time.
    let batch: Vec<Dispatch> = (0..15).map(|i| dispatch(&format!("batch-{i:02}"), 0)).collect();
    let bodies: Vec<String> = batch.iter().map(body_of).collect();
    let results = queue.send(&batch).await;
    assert_eq!(results.len(), 15);
    assert!(results.iter().all(Result::is_ok), "a batch of more than ten is sent whole: {results:?}");
    let few = receive_until_some(inbox, pace, 3).await;
    assert!(few.len() <= 3, "a receive returns at most `max` messages: {}", few.len());
    let mut all = few;
    let start = pace.elapsed();
    while all.len() < 15 {
        let got = inbox.receive(50, 0).await.unwrap();
        assert!(got.len() <= 10, "a receive returns at most ten: {}", got.len());
        all.extend(got);
        assert!(pace.elapsed() - start < 10.0, "only {} of 15 received", all.len());
        if all.len() < 15 {
            pace.pass(0.2).await;
        }
    }
    let received: BTreeSet<&str> = all.iter().map(|r| r.body.as_str()).collect();
    assert_eq!(received, bodies.iter().map(String::as_str).collect(), "every message of the batch, once");
    let ids: BTreeSet<&str> = all.iter().map(|r| r.message_id.as_str()).collect();
    assert_eq!(ids.len(), 15, "each message has its own id");
    for r in &all {
        inbox.delete(&r.receipt).await.unwrap();
    }

    // The longest delay is SQS's: a longer one is sent, capped.
    let far = dispatch("far", MAX_DELAY_S * 5);
    assert_eq!(queue.send(std::slice::from_ref(&far)).await, vec![Ok(())], "a delay beyond the cap is sent");
    assert!(inbox.receive(10, 0).await.unwrap().is_empty(), "a delayed message is not received at once");
    if pace.fast() {
        pace.pass(f64::from(MAX_DELAY_S) - 1.0).await;
        assert!(inbox.receive(10, 0).await.unwrap().is_empty(), "not received before its (capped) delay");
        pace.pass(2.0).await;
        let got = inbox.receive(10, 0).await.unwrap();
        inbox.delete(&the(&got, &body_of(&far)).receipt).await.unwrap();
    }

    // Dead letters: a message dead-lettered leaves the queue and comes back on redrive.
    assert_eq!(inbox.redrive().await.unwrap(), 0, "an empty dead-letter queue redrives nothing");
    let doomed = dispatch("doomed", 0);
    let doomed_body = body_of(&doomed);
    assert_eq!(queue.send(std::slice::from_ref(&doomed)).await, vec![Ok(())]);
    let got = receive_until(inbox, pace, &[&doomed_body], 10.0).await;
    let d = the(&got, &doomed_body).clone();
    inbox.set_visibility(&d.receipt, 0).await.unwrap();
    inbox.dead_letter(&d, "malformed").await.unwrap();
    let got = receive_for(inbox, pace, 0.5).await;
    assert!(got.iter().all(|r| r.body != doomed_body), "a dead-lettered message leaves the queue");
    assert_eq!(inbox.redrive().await.unwrap(), 1, "redrive moves every dead letter back");
    let got = receive_until(inbox, pace, &[&doomed_body], 10.0).await;
    let back = the(&got, &doomed_body).clone();
    assert_eq!(back.receive_count, 1, "a redriven message is a new one");
    assert_ne!(back.message_id, d.message_id);
    inbox.delete(&back.receipt).await.unwrap();

    let copied = dispatch("copied", 0);
    let copied_body = body_of(&copied);
    assert_eq!(queue.send(std::slice::from_ref(&copied)).await, vec![Ok(())]);
    let got = receive_until(inbox, pace, &[&copied_body], 10.0).await;
    let c = the(&got, &copied_body).clone();
    inbox.forward_to_dead_letter(&c.body, "copied").await.unwrap();
    inbox.set_visibility(&c.receipt, 0).await.unwrap();
    let got = receive_until(inbox, pace, &[&copied_body], 10.0).await;
    let original = the(&got, &copied_body).clone();
    assert_eq!(
        (original.message_id.as_str(), original.receive_count),
        (c.message_id.as_str(), 2),
        "forward_to_dead_letter leaves the original on the queue"
    );
    assert_eq!(inbox.redrive().await.unwrap(), 1, "and puts a copy in the dead-letter queue");
    let got = receive_until(inbox, pace, &[&copied_body], 10.0).await;
    let copy = the(&got, &copied_body).clone();
    assert_ne!(copy.message_id, c.message_id, "the copy is a message of its own");
    inbox.delete(&copy.receipt).await.unwrap();
    inbox.delete(&original.receipt).await.unwrap();

    // The redrive policy: a message received `max_receives` times is dead-lettered, not received.
    let spent = dispatch("spent", 0);
    let spent_body = body_of(&spent);
    assert_eq!(queue.send(std::slice::from_ref(&spent)).await, vec![Ok(())]);
    for n in 1..=max_receives {
        let got = receive_until(inbox, pace, &[&spent_body], 10.0).await;
        let r = the(&got, &spent_body);
        assert_eq!(r.receive_count, n);
        inbox.set_visibility(&r.receipt, 0).await.unwrap();
    }
    let got = receive_for(inbox, pace, 0.5).await;
    assert!(
        got.iter().all(|r| r.body != spent_body),
        "a message received {max_receives} times goes to the dead-letter queue"
    );
    assert_eq!(inbox.redrive().await.unwrap(), 1, "where redrive finds it");
    let got = receive_until(inbox, pace, &[&spent_body], 10.0).await;
    assert_eq!(the(&got, &spent_body).receive_count, 1);
}

/// Receives up to `max` at once, waiting (without a long poll) until something comes.
async fn receive_until_some(inbox: &dyn RunInbox, pace: &dyn Pace, max: i32) -> Vec<Received> {
    let start = pace.elapsed();
    loop {
        let got = inbox.receive(max, 0).await.unwrap();
        if !got.is_empty() {
            return got;
        }
        assert!(pace.elapsed() - start < 10.0, "nothing received within 10 s");
        pace.pass(0.2).await;
    }
}
