//! The runs table in DynamoDB.
//!
//! One item per run, keyed (`job_id`, `run_key`). The sparse, keys-only `in-flight` index
//! (`inflight_shard`, `inflight_at`) is written once at claim and removed at the terminal state
//! (once the run's events are published), so starting an attempt, heartbeats and retries never
//! touch an index; an event recorded unsent on an ended run (a health event decided after the
//! end) writes it again. Every state change is a
//! conditional write from the expected state and attempt number (the fencing token); one made for
//! an API request (a trigger, a cancel) is a transaction with its audit record.

use super::audit;
use super::batch;
use super::cursor::{self, Part};
use super::item::{self, Item, TransactFailure, failed, get_n, get_opt_s, get_s, n, s};
use super::update::Update;
use crate::errors::store_error;
use crate::metrics::{Ledger, writes};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update as TransactUpdate};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use sundial_domain::audit::AuditRecord;
use sundial_domain::channels::{Channel, ChannelMark};
use sundial_domain::due_index::{format_instant, parse_instant};
use sundial_domain::health::{Trouble, TroubleMark, Troubles};
use sundial_domain::job::JobId;
use sundial_domain::ports::store::{
    InFlightIndex, Inserted, Page, RunHistory, RunOutbox, RunWrites, StoreError, StoreResult,
};
use sundial_domain::ports::store::{in_flight_shard, in_flight_when_written, transition_leaves_in_flight};
use sundial_domain::run::{Attempt, Run, RunId, RunKey, RunState};
use sundial_domain::run::{Published, RunEvent};

/// Index of in-flight runs (QUEUED, RUNNING, RETRYING) by shard and scheduled instant.
pub const IN_FLIGHT_INDEX: &str = "in-flight";

/// Runs in one DynamoDB table.
#[derive(Debug, Clone)]
pub struct DynamoRunStore {
    client: Client,
    table: String,
    shards: u16,
    ledger: Arc<Ledger>,
}

impl DynamoRunStore {
    pub fn new(client: Client, table: impl Into<String>, shards: u16, ledger: Arc<Ledger>) -> Self {
        DynamoRunStore { client, table: table.into(), shards: shards.max(1), ledger }
    }

    /// An UpdateItem request of `run`'s item.
    fn update_of(&self, run: &Run) -> UpdateItemFluentBuilder {
        let request = self.client.update_item().table_name(&self.table).key("job_id", s(run.job_id.as_str()));
        request.key("run_key", s(run.key.encode()))
    }

    /// The job's flags item, read consistently (`None`: nothing was ever flagged).
    async fn flags_item(&self, job_id: &JobId) -> StoreResult<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("job_id", s(flags_partition(job_id)))
            .key("run_key", s(FLAGS_KEY))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        Ok(out.item)
    }

    /// An update of the job's flags item.
    fn update_of_flags(&self, job_id: &JobId) -> UpdateItemFluentBuilder {
        let request =
            self.client.update_item().table_name(&self.table).key("job_id", s(flags_partition(job_id)));
        request.key("run_key", s(FLAGS_KEY))
    }

    /// The conditional write behind both transitions; with `unchanged`, also fenced by the
    /// `updated_at` that was read.
    async fn write_transition(
        &self,
        before: &Run,
        after: &Run,
        unchanged: bool,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let attempts =
            serde_json::to_string(&after.attempts).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let time = |t: Option<DateTime<Utc>>| t.map(|t| s(t.to_rfc3339()));
        let mut update = Update::new()
            .set("#st", ":new", s(after.state.as_str()))
            .set("attempt", ":attempt_new", n(after.attempt))
            .set("attempts", ":attempts", s(attempts))
            .set("updated_at", ":now", s(after.updated_at.to_rfc3339()))
            .set_or_remove("lease_until", ":lease", time(after.lease_until))
            .set_or_remove("retry_at", ":retry", time(after.retry_at))
            .name("#st", "state")
            .value(":old", s(before.state.as_str()))
            .value(":attempt_old", n(before.attempt));
        if let Some(ended) = after.call_ended.filter(|_| after.call_ended != before.call_ended) {
            update = update.set("call_ended", ":call_ended", n(ended));
        }
        update = update.set_or_remove("reason", ":reason", after.reason.as_ref().map(s));
        // New events join the map in the same write: recorded by whoever wins the change.
        let new_events = after.events.iter().filter(|e| !before.events.iter().any(|b| b.id == e.id));
        let mut new_count = 0;
        for (i, event) in new_events.enumerate() {
            new_count += 1;
            update = update
                .set(format!("events.#ev{i}"), &format!(":ev{i}"), event_value(event))
                .name(format!("#ev{i}"), &event.id);
        }
        // Each new event is recorded once: a conditional flag set meanwhile (the watchdog's
        // `sla_missed`) makes this write a `Conflict`, and the caller re-reads.
        let mut condition = String::from("#st = :old AND attempt = :attempt_old");
        if unchanged {
            condition.push_str(" AND updated_at = :updated_old");
            update = update.value(":updated_old", s(before.updated_at.to_rfc3339()));
        }
        for i in 0..new_count {
            condition.push_str(&format!(" AND attribute_not_exists(events.#ev{i})"));
        }
        // A terminal run leaves the in-flight index once its events are published (then the
        // mark-sent write removes it), so the watchdog finds events a crash left unsent. Only if
        // no event was recorded since `before` was read (the watchdog's flags fence on the state
        // and attempt alone): else the event would leave the index unsent, so the write conflicts
        // and its writer decides again with it.
        let leaves_index = transition_leaves_in_flight(before, after);
        if leaves_index {
            update = update.remove("inflight_shard").remove("inflight_at");
            // (An item written before runs carried events has none, which reads as zero.)
            condition.push_str(match before.events.is_empty() {
                true => " AND (attribute_not_exists(events) OR size(events) = :events_read)",
                false => " AND size(events) = :events_read",
            });
            update = update.value(":events_read", n(before.events.len()));
        }
        match audit {
            None => {
                let request = self.update_of(before);
                update.apply(request).condition_expression(condition).send().await.map_err(store_error)?;
                self.ledger.add(writes::ITEM, 1);
            }
            Some(record) => {
                // The change and its record in one transaction (two write units each).
                let request = TransactUpdate::builder()
                    .table_name(&self.table)
                    .key("job_id", s(before.job_id.as_str()))
                    .key("run_key", s(before.key.encode()))
                    .condition_expression(condition);
                let change =
                    update.apply_transact(request).build().map_err(|e| StoreError::Corrupt(e.to_string()))?;
                let items = vec![TransactWriteItem::builder().update(change).build()];
                let items = audit::with_record(items, &self.table, Some(record), &self.ledger)?;
                match item::transact(&self.client, items).await {
                    Ok(()) => self.ledger.add(writes::ITEM, 2),
                    Err(TransactFailure::Cancelled(r)) if failed(&r, 0) => return Err(StoreError::Conflict),
                    Err(TransactFailure::Cancelled(r)) => {
                        return Err(StoreError::Unavailable(format!("transaction cancelled: {r:?}")));
                    }
                    Err(TransactFailure::Store(e)) => return Err(e),
                }
            }
        }
        if leaves_index {
            self.ledger.add(writes::INDEX_REMOVE, 1);
        }
        Ok(())
    }

    /// [`RunWrites::insert`] of a run made for an API request: the run and its audit record in
    /// one transaction (the record only if the run is new).
    async fn insert_recorded(&self, run: &Run, record: &AuditRecord) -> StoreResult<Inserted> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(self.to_item(run)?))
            .condition_expression("attribute_not_exists(run_key)")
            .build()
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let items = vec![TransactWriteItem::builder().put(put).build()];
        let items = audit::with_record(items, &self.table, Some(record), &self.ledger)?;
        match item::transact(&self.client, items).await {
            Ok(()) => {
                self.ledger.add(writes::ITEM, 2);
                if watched(run) {
                    self.ledger.add(writes::INDEX_PUT, 1);
                }
                Ok(Inserted::Created)
            }
            Err(TransactFailure::Cancelled(r)) if failed(&r, 0) => {
                match self.get(&run.job_id, &run.key).await? {
                    Some(existing) => Ok(Inserted::Exists(Box::new(existing))),
                    None => Err(StoreError::Unavailable("run vanished after a conflicting insert".into())),
                }
            }
            Err(TransactFailure::Cancelled(r)) => {
                Err(StoreError::Unavailable(format!("transaction cancelled: {r:?}")))
            }
            Err(TransactFailure::Store(e)) => Err(e),
        }
    }

    /// Up to `limit` of the job's runs whose key meets `condition` (over `:key` and, if given,
    /// `:until`), in key order (`forward`) or newest first, read consistently.
    async fn runs_where(
        &self,
        job_id: &JobId,
        condition: &str,
        key: &RunKey,
        until: Option<String>,
        forward: bool,
        limit: u32,
    ) -> StoreResult<Vec<Run>> {
        let mut query = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression(format!("job_id = :j AND {condition}"))
            .expression_attribute_values(":j", s(job_id.as_str()))
            .expression_attribute_values(":key", s(key.encode()))
            .consistent_read(true)
            .scan_index_forward(forward)
            .limit(limit.max(1) as i32);
        if let Some(until) = until {
            query = query.expression_attribute_values(":until", s(until));
        }
        let out = query.send().await.map_err(store_error)?;
        Ok(out.items().iter().filter_map(quarantined).collect())
    }

    fn to_item(&self, run: &Run) -> StoreResult<Item> {
        let attempts =
            serde_json::to_string(&run.attempts).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let key = run.key.encode();
        let mut item = Item::from([
            ("job_id".into(), s(run.job_id.as_str())),
            ("run_key".into(), s(&key)),
            ("owner".into(), s(&run.owner)),
            ("state".into(), s(run.state.as_str())),
            ("due_at".into(), s(format_instant(run.due_at))),
            ("attempt".into(), n(run.attempt)),
            ("attempts".into(), s(attempts)),
            ("job_version".into(), n(run.job_version)),
            ("created_at".into(), s(run.created_at.to_rfc3339())),
            ("updated_at".into(), s(run.updated_at.to_rfc3339())),
            ("expires_at".into(), n(run.expires_at.timestamp())),
        ]);
        if let Some(reason) = &run.reason {
            item.insert("reason".into(), s(reason));
        }
        if run.backfill {
            item.insert("backfill".into(), AttributeValue::Bool(true));
        }
        // The run's own payload, as JSON text (bounded as a job's payload is).
        if let Some(input) = run.input.as_ref().and_then(|v| serde_json::to_string(v).ok()) {
            item.insert("input".into(), s(input));
        }
        if let Some(root) = &run.workflow {
            item.insert("workflow".into(), s(root.as_str()));
        }
        if let Some(attempt) = run.call_ended {
            item.insert("call_ended".into(), n(attempt));
        }
        if let Some(at) = run.resent_at {
            item.insert("resent_at".into(), s(at.to_rfc3339()));
        }
        if let Some(at) = run.lease_until {
            item.insert("lease_until".into(), s(at.to_rfc3339()));
        }
        if let Some(at) = run.retry_at {
            item.insert("retry_at".into(), s(at.to_rfc3339()));
        }
        item.insert(
            "events".into(),
            AttributeValue::M(run.events.iter().map(|e| (e.id.clone(), event_value(e))).collect()),
        );
        if watched(run) {
            let shard = in_flight_shard(&run.job_id, &run.key, self.shards);
            item.insert("inflight_shard".into(), s(format!("{shard:02}")));
            item.insert(
                "inflight_at".into(),
                s(format!("{}#{}", format_instant(run.key.instant), run.job_id)),
            );
        }
        Ok(item)
    }
}

/// Whether a run belongs in the in-flight index: in flight, or ended with events not yet
/// published (a run the tick writes SKIPPED carries its `skipped` event unsent).
fn watched(run: &Run) -> bool {
    in_flight_when_written(run)
}

fn event_value(event: &RunEvent) -> AttributeValue {
    let mut fields = HashMap::from([
        ("kind".to_string(), s(event.kind.as_str())),
        ("at".to_string(), s(event.at.to_rfc3339())),
        ("sent".to_string(), AttributeValue::Bool(event.sent)),
    ]);
    if event.shared_sent {
        fields.insert("shared_sent".to_string(), AttributeValue::Bool(true));
    }
    if event.topics_sent {
        fields.insert("topics_sent".to_string(), AttributeValue::Bool(true));
    }
    for (channel, mark) in &event.channels {
        if let Ok(text) = serde_json::to_string(mark) {
            fields.insert(format!("{CHANNEL_PREFIX}{}", channel.as_str()), s(text));
        }
    }
    if let Some(at) = event.taken_at {
        fields.insert("taken_at".to_string(), s(at.to_rfc3339()));
    }
    // The numbers are the domain's own shape, kept as its JSON text.
    if let Some(detail) = event.detail.as_ref().and_then(|d| serde_json::to_string(d).ok()) {
        fields.insert("detail".to_string(), s(detail));
    }
    AttributeValue::M(fields)
}

/// The prefix of an event's attributes holding a channel's mark (`channel_slack`).
const CHANNEL_PREFIX: &str = "channel_";

/// The channel marks among an event's attributes; one this build cannot read (a channel or a
/// shape of a later build) is left out rather than the run made unreadable.
fn channel_marks(id: &str, fields: &HashMap<String, AttributeValue>) -> BTreeMap<Channel, ChannelMark> {
    let mut marks = BTreeMap::new();
    for (name, value) in fields {
        let (Some(channel), AttributeValue::S(text)) = (name.strip_prefix(CHANNEL_PREFIX), value) else {
            continue;
        };
        let channel = serde_json::from_value(serde_json::Value::String(channel.to_string()));
        match (channel, serde_json::from_str(text)) {
            (Ok(channel), Ok(mark)) => {
                marks.insert(channel, mark);
            }
            _ => tracing::warn!(event = %id, attribute = %name, "a channel mark does not decode; left out"),
        }
    }
    marks
}

fn events_of(item: &Item) -> StoreResult<Vec<RunEvent>> {
    let Some(AttributeValue::M(map)) = item.get("events") else { return Ok(Vec::new()) };
    let mut events = Vec::with_capacity(map.len());
    for (id, value) in map {
        let AttributeValue::M(fields) = value else {
            return Err(StoreError::Corrupt(format!("event {id} is not a map")));
        };
        let kind = get_s(fields, "kind")?;
        events.push(RunEvent {
            id: id.clone(),
            kind: serde_json::from_value(serde_json::Value::String(kind.to_string()))
                .map_err(|_| StoreError::Corrupt(format!("event kind {kind}")))?,
            at: parse_instant(get_s(fields, "at")?)
                .ok_or_else(|| StoreError::Corrupt(format!("event {id} time")))?,
            sent: matches!(fields.get("sent"), Some(AttributeValue::Bool(true))),
            shared_sent: matches!(fields.get("shared_sent"), Some(AttributeValue::Bool(true))),
            topics_sent: matches!(fields.get("topics_sent"), Some(AttributeValue::Bool(true))),
            channels: channel_marks(id, fields),
            taken_at: get_opt_s(fields, "taken_at").and_then(parse_instant),
            // Numbers this build cannot read (written by a later one) leave the event without
            // them rather than the run unreadable: its events are still published.
            detail: get_opt_s(fields, "detail").and_then(|text| match serde_json::from_str(text) {
                Ok(detail) => Some(detail),
                Err(e) => {
                    tracing::warn!(event = %id, error = %e, "an event's numbers do not decode; published without them");
                    None
                }
            }),
        });
    }
    events.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
    Ok(events)
}

/// A run item of a read of several, decoded; one that does not decode (a manual edit, a defect)
/// is left out and reported, so that it never fails the read of every other run (a job's
/// history, a streak's neighbours, the watchdog's batch).
fn quarantined(it: &Item) -> Option<Run> {
    match from_item(it) {
        Ok(run) => Some(run),
        Err(e) => {
            let text = |name: &str| it.get(name).and_then(|v| v.as_s().ok()).map_or("?", String::as_str);
            tracing::error!(job_id = %text("job_id"), run_key = %text("run_key"), error = %e, "a stored run does not decode: left out until it is fixed");
            None
        }
    }
}

pub(crate) fn from_item(item: &Item) -> StoreResult<Run> {
    let time = |name: &str| {
        parse_instant(get_s(item, name)?)
            .ok_or_else(|| StoreError::Corrupt(format!("attribute {name} is not a time")))
    };
    let job_id = get_s(item, "job_id")?;
    let key = get_s(item, "run_key")?;
    let attempts: Vec<Attempt> = serde_json::from_str(get_s(item, "attempts")?)
        .map_err(|e| StoreError::Corrupt(format!("attempts: {e}")))?;
    let expires: i64 = get_n(item, "expires_at")?;
    Ok(Run {
        job_id: JobId::parse(job_id).ok_or_else(|| StoreError::Corrupt(format!("job_id {job_id}")))?,
        key: RunKey::decode(key).ok_or_else(|| StoreError::Corrupt(format!("run_key {key}")))?,
        owner: get_s(item, "owner")?.to_string(),
        state: get_s(item, "state")?.parse().map_err(StoreError::Corrupt)?,
        due_at: time("due_at")?,
        attempt: get_n(item, "attempt")?,
        attempts,
        job_version: get_n(item, "job_version")?,
        created_at: time("created_at")?,
        updated_at: time("updated_at")?,
        reason: get_opt_s(item, "reason").map(str::to_string),
        resent_at: get_opt_s(item, "resent_at").and_then(parse_instant),
        call_ended: get_n(item, "call_ended").ok(),
        workflow: get_opt_s(item, "workflow").and_then(JobId::parse),
        backfill: matches!(item.get("backfill"), Some(AttributeValue::Bool(true))),
        input: get_opt_s(item, "input")
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("input: {e}")))?,
        lease_until: get_opt_s(item, "lease_until").and_then(parse_instant),
        retry_at: get_opt_s(item, "retry_at").and_then(parse_instant),
        expires_at: DateTime::from_timestamp(expires, 0).unwrap_or_default(),
        events: events_of(item)?,
    })
}

/// A run's key in the table.
fn run_key(job_id: &JobId, key: &RunKey) -> Item {
    Item::from([("job_id".to_string(), s(job_id.as_str())), ("run_key".to_string(), s(key.encode()))])
}

/// The key a listing of `job_id`'s runs continues after.
fn of_job(job_id: &JobId) -> [Part<'_>; 2] {
    [Part::Fixed("job_id", job_id.as_str()), Part::Free("run_key", |key| RunKey::decode(key).is_some())]
}

/// The `after_run` of a streak with no success in view: sorts before every run key.
const NO_SUCCESS: &str = "-";

/// How long a told streak or trouble is remembered after it was told (runs themselves expire
/// sooner).
const FLAG_DAYS: i64 = 400;

/// A job's flags (its told failing streak, its open troubles) are one item in a partition of its
/// own (`failing#<job>`), so that the job's run queries never meet it.
fn flags_partition(job_id: &JobId) -> String {
    format!("failing#{job_id}")
}

/// The sort key of a job's flags item.
const FLAGS_KEY: &str = "streak";

fn flag_expiry(told_at: DateTime<Utc>) -> i64 {
    (told_at + chrono::Duration::days(FLAG_DAYS)).timestamp()
}

/// The attribute of the flags item an open trouble is kept in, as its mark's JSON text.
fn trouble_attribute(trouble: Trouble) -> &'static str {
    match trouble {
        Trouble::Failing => "trouble_failing",
        Trouble::FailureRate => "trouble_failure_rate",
        Trouble::Missed => "trouble_missed",
    }
}

/// A trouble's mark as stored; the same mark always makes the same text, which the close's
/// condition compares.
fn mark_value(mark: &TroubleMark) -> StoreResult<AttributeValue> {
    serde_json::to_string(mark).map(s).map_err(|e| StoreError::Corrupt(format!("trouble mark: {e}")))
}

#[async_trait]
impl RunHistory for DynamoRunStore {
    async fn get(&self, job_id: &JobId, key: &RunKey) -> StoreResult<Option<Run>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("job_id", s(job_id.as_str()))
            .key("run_key", s(key.encode()))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        out.item.as_ref().map(from_item).transpose()
    }

    async fn list(
        &self,
        job_id: &JobId,
        limit: u32,
        cursor: Option<&str>,
        state: Option<RunState>,
    ) -> StoreResult<Page<Run>> {
        let limit = limit.max(1) as usize;
        let key = of_job(job_id);
        let mut start = cursor.map(|c| cursor::decode(&key, c)).transpose()?;
        let mut runs = Vec::new();
        loop {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("job_id = :j")
                .expression_attribute_values(":j", s(job_id.as_str()))
                .scan_index_forward(false)
                .set_exclusive_start_key(start)
                .limit((limit + 1 - runs.len()) as i32);
            if let Some(state) = state {
                query = query
                    .filter_expression("#st = :state")
                    .expression_attribute_names("#st", "state")
                    .expression_attribute_values(":state", s(state.as_str()));
            }
            let out = query.send().await.map_err(store_error)?;
            runs.extend(out.items().iter().filter_map(quarantined));
            start = out.last_evaluated_key;
            if runs.len() > limit || start.is_none() {
                break;
            }
        }
        let next = if runs.len() > limit {
            runs.truncate(limit);
            let last = runs.last().map(|r| run_key(&r.job_id, &r.key));
            last.map(|last| cursor::encode(&key, &last)).transpose()?
        } else {
            None
        };
        Ok(Page { items: runs, next })
    }

    async fn before(&self, job_id: &JobId, key: &RunKey, limit: u32) -> StoreResult<Vec<Run>> {
        self.runs_where(job_id, "run_key < :key", key, None, false, limit).await
    }

    async fn after(
        &self,
        job_id: &JobId,
        key: &RunKey,
        until: DateTime<Utc>,
        limit: u32,
    ) -> StoreResult<Vec<Run>> {
        let until = format!("{}#~", format_instant(until));
        let condition = "run_key BETWEEN :key AND :until";
        let runs =
            self.runs_where(job_id, condition, key, Some(until), true, limit.saturating_add(1)).await?;
        // BETWEEN includes the run at `key` itself.
        Ok(runs.into_iter().filter(|run| &run.key != key).take(limit as usize).collect())
    }

    async fn get_many(&self, ids: &[RunId]) -> StoreResult<Vec<Run>> {
        let keys = ids.iter().map(|id| run_key(&id.job_id, &id.key)).collect();
        // One bad item must not stall the watchdog's pass for every other run.
        batch::get(&self.client, &self.table, keys, true, |it| Ok(quarantined(it))).await
    }
}

#[async_trait]
impl RunWrites for DynamoRunStore {
    async fn insert(&self, run: &Run, audit: Option<&AuditRecord>) -> StoreResult<Inserted> {
        use aws_sdk_dynamodb::operation::put_item::PutItemError;
        if let Some(record) = audit {
            return self.insert_recorded(run, record).await;
        }
        use aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure;
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.to_item(run)?))
            .condition_expression("attribute_not_exists(run_key)")
            // The winner's run comes back with the failure: no second read.
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        match result {
            Ok(_) => {
                self.ledger.add(writes::ITEM, 1);
                if watched(run) {
                    self.ledger.add(writes::INDEX_PUT, 1);
                }
                Ok(Inserted::Created)
            }
            Err(e) => {
                let existing = match e.as_service_error() {
                    Some(PutItemError::ConditionalCheckFailedException(c)) => Some(c.item.clone()),
                    _ => None,
                };
                match existing {
                    Some(Some(item)) => Ok(Inserted::Exists(Box::new(from_item(&item)?))),
                    // Lost the race, but the emulator sent no item back: read it.
                    Some(None) => match self.get(&run.job_id, &run.key).await? {
                        Some(existing) => Ok(Inserted::Exists(Box::new(existing))),
                        None => {
                            Err(StoreError::Unavailable("run vanished after a conflicting insert".into()))
                        }
                    },
                    None => Err(store_error(e)),
                }
            }
        }
    }

    async fn transition(&self, before: &Run, after: &Run, audit: Option<&AuditRecord>) -> StoreResult<()> {
        self.write_transition(before, after, false, audit).await
    }

    async fn transition_unchanged(&self, before: &Run, after: &Run) -> StoreResult<()> {
        self.write_transition(before, after, true, None).await
    }

    async fn flag_failing(
        &self,
        job_id: &JobId,
        after: Option<&RunKey>,
        mark: &TroubleMark,
    ) -> StoreResult<()> {
        // A streak is named by the key of the success before it, and keys only grow.
        let after = after.map_or_else(|| NO_SUCCESS.to_string(), RunKey::encode);
        let update = Update::new()
            .set("after_run", ":after", s(after))
            .set("told_at", ":now", s(mark.told_at.to_rfc3339()))
            .set(trouble_attribute(Trouble::Failing), ":mark", mark_value(mark)?)
            .set("expires_at", ":expires", n(flag_expiry(mark.told_at)));
        let condition = "attribute_not_exists(after_run) OR after_run < :after";
        let request = update.apply(self.update_of_flags(job_id)).condition_expression(condition);
        request.send().await.map_err(store_error)?;
        self.ledger.add(writes::ITEM, 1);
        Ok(())
    }

    async fn troubles(&self, job_id: &JobId) -> StoreResult<Troubles> {
        let mut troubles = Troubles::default();
        let Some(item) = self.flags_item(job_id).await? else { return Ok(troubles) };
        for trouble in [Trouble::Failing, Trouble::FailureRate, Trouble::Missed] {
            if let Some(text) = get_opt_s(&item, trouble_attribute(trouble)) {
                let mark = serde_json::from_str(text)
                    .map_err(|e| StoreError::Corrupt(format!("{} of job {job_id}: {e}", trouble.as_str())))?;
                troubles.set(trouble, Some(mark));
            }
        }
        Ok(troubles)
    }

    async fn troubles_closed_by(&self, job_id: &JobId) -> StoreResult<Option<String>> {
        let item = self.flags_item(job_id).await?;
        Ok(item.as_ref().and_then(|item| get_opt_s(item, "closed_by")).map(str::to_string))
    }

    async fn open_trouble(&self, job_id: &JobId, trouble: Trouble, mark: &TroubleMark) -> StoreResult<()> {
        let attribute = trouble_attribute(trouble);
        let update = Update::new().set(attribute, ":mark", mark_value(mark)?).set(
            "expires_at",
            ":expires",
            n(flag_expiry(mark.told_at)),
        );
        let request = update.apply(self.update_of_flags(job_id));
        let request = request.condition_expression(format!("attribute_not_exists({attribute})"));
        request.send().await.map_err(store_error)?;
        self.ledger.add(writes::ITEM, 1);
        Ok(())
    }

    async fn close_troubles(&self, job_id: &JobId, ended: &Troubles, by: &str) -> StoreResult<()> {
        let mut update = Update::new().set("closed_by", ":by", s(by));
        let mut condition = Vec::new();
        for (trouble, mark) in ended.open() {
            let (attribute, placeholder) = (trouble_attribute(trouble), format!(":{}", trouble.as_str()));
            condition.push(format!("{attribute} = {placeholder}"));
            update = update.remove(attribute).value(&placeholder, mark_value(&mark)?);
        }
        if condition.is_empty() {
            return Ok(());
        }
        let request =
            update.apply(self.update_of_flags(job_id)).condition_expression(condition.join(" AND "));
        request.send().await.map_err(store_error)?;
        self.ledger.add(writes::ITEM, 1);
        Ok(())
    }

    async fn mark_resent(&self, run: &Run, at: DateTime<Utc>) -> StoreResult<()> {
        let update = Update::new().set("resent_at", ":at", s(at.to_rfc3339()));
        let request = self.update_of(run).condition_expression("attribute_exists(run_key)");
        update.apply(request).send().await.map_err(store_error)?;
        self.ledger.add(writes::ITEM, 1);
        Ok(())
    }

    async fn mark_call_ended(&self, run: &Run, attempt: u32) -> StoreResult<()> {
        self.ledger.add(writes::ITEM, 1);
        let update = Update::new().set("call_ended", ":n", n(attempt));
        let request = self.update_of(run).condition_expression("attempt = :n");
        update.apply(request).send().await.map_err(store_error).map(|_| ())
    }
}

#[async_trait]
impl RunOutbox for DynamoRunStore {
    async fn record_event(&self, run: &Run, event: &RunEvent) -> StoreResult<()> {
        let mut update = Update::new()
            .set("events.#id", ":event", event_value(event))
            .name("#id", &event.id)
            .name("#st", "state")
            .value(":state", s(run.state.as_str()))
            .value(":attempt", n(run.attempt));
        // An unsent event on an ended run (which may have left the index) puts it back, so that
        // the watchdog publishes what its recorder did not; an in-flight run is there already.
        let reindexed = run.state.is_terminal() && !event.sent;
        if reindexed {
            let shard = in_flight_shard(&run.job_id, &run.key, self.shards);
            update = update.set("inflight_shard", ":shard", s(format!("{shard:02}"))).set(
                "inflight_at",
                ":inflight_at",
                s(format!("{}#{}", format_instant(run.key.instant), run.job_id)),
            );
        }
        let request = self
            .update_of(run)
            .condition_expression("#st = :state AND attempt = :attempt AND attribute_not_exists(events.#id)");
        update.apply(request).send().await.map_err(store_error)?;
        self.ledger.add(writes::ITEM, 1);
        if reindexed {
            self.ledger.add(writes::INDEX_PUT, 1);
        }
        Ok(())
    }

    async fn take_event(&self, run: &Run, event: &RunEvent, now: DateTime<Utc>) -> StoreResult<()> {
        let mut update = Update::new()
            .set("events.#id.taken_at", ":now", s(now.to_rfc3339()))
            .name("#id", &event.id)
            .value(":false", AttributeValue::Bool(false));
        let untouched = match event.taken_at {
            Some(read) => {
                update = update.value(":read", s(read.to_rfc3339()));
                "events.#id.taken_at = :read"
            }
            None => "attribute_not_exists(events.#id.taken_at)",
        };
        let request =
            self.update_of(run).condition_expression(format!("events.#id.sent = :false AND {untouched}"));
        update.apply(request).send().await.map_err(store_error)?;
        self.ledger.add(writes::ITEM, 1);
        Ok(())
    }

    async fn mark_events_sent(&self, run: &Run, published: &Published, settle: bool) -> StoreResult<()> {
        if published.is_empty() && !settle {
            return Ok(());
        }
        let mut update = Update::new();
        let flag = |id: &String, mark: &str| (id.clone(), mark.to_string(), AttributeValue::Bool(true));
        let marks = published.sent.iter().map(|id| flag(id, "sent"));
        let marks = marks.chain(published.shared_only.iter().map(|id| flag(id, "shared_sent")));
        let marks = marks.chain(published.topics_only.iter().map(|id| flag(id, "topics_sent")));
        // A channel's mark is the domain's own shape, kept as its JSON text.
        let marks = marks.chain(published.channels.iter().map(|(id, channel, mark)| {
            let text = serde_json::to_string(mark).unwrap_or_default();
            (id.clone(), format!("{CHANNEL_PREFIX}{}", channel.as_str()), s(text))
        }));
        for (i, (id, mark, value)) in marks.enumerate() {
            update = update
                .set(format!("events.#id{i}.#m{i}"), &format!(":m{i}"), value)
                .name(format!("#id{i}"), id)
                .name(format!("#m{i}"), mark);
        }
        let mut condition = "attribute_exists(run_key)".to_string();
        if settle {
            // Only a run that has ended leaves the index.
            update = update.remove("inflight_shard").remove("inflight_at");
            let terminal = RunState::ALL.into_iter().filter(|state| state.is_terminal());
            let mut names = Vec::new();
            for (i, state) in terminal.enumerate() {
                names.push(format!(":t{i}"));
                update = update.value(&format!(":t{i}"), s(state.as_str()));
            }
            // Nor one with an event the caller has not seen: events are only ever added.
            let seen = match run.events.is_empty() {
                true => "(attribute_not_exists(events) OR size(events) = :seen)",
                false => "size(events) = :seen",
            };
            update = update.value(":seen", n(run.events.len())).name("#st", "state");
            condition = format!("attribute_exists(run_key) AND #st IN ({}) AND {seen}", names.join(", "));
        }
        update
            .apply(self.update_of(run))
            .condition_expression(condition)
            .send()
            .await
            .map_err(store_error)?;
        self.ledger.add(writes::ITEM, 1);
        if settle {
            self.ledger.add(writes::INDEX_REMOVE, 1);
        }
        Ok(())
    }
}

#[async_trait]
impl InFlightIndex for DynamoRunStore {
    fn shards(&self) -> u16 {
        self.shards
    }

    async fn in_flight(&self, until: DateTime<Utc>, shards: u16) -> StoreResult<Vec<RunId>> {
        // Every shard's keys, in parallel (the index projects keys only).
        let bound = format!("{}#~", format_instant(until));
        let shards = futures::future::try_join_all((0..shards).map(|shard| {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .index_name(IN_FLIGHT_INDEX)
                .key_condition_expression("inflight_shard = :shard AND inflight_at <= :until")
                .expression_attribute_values(":shard", s(format!("{shard:02}")))
                .expression_attribute_values(":until", s(bound.clone()));
            item::query_all(query, |it| {
                let (job_id, key) = (get_s(it, "job_id")?, get_s(it, "run_key")?);
                let job_id =
                    JobId::parse(job_id).ok_or_else(|| StoreError::Corrupt(format!("job_id {job_id}")))?;
                let key = RunKey::decode(key).ok_or_else(|| StoreError::Corrupt(format!("run_key {key}")))?;
                Ok(RunId::new(job_id, key))
            })
        }))
        .await?;
        let mut ids: Vec<RunId> = shards.into_iter().flatten().collect();
        ids.sort_by(|a, b| a.chronological().cmp(&b.chronological()));
        Ok(ids)
    }
}
