//! The tick's progress in memory: [`MemoryTickStateStore`], the [`TickStateStore`] that behaves as
//! the DynamoDB tick item does (`sundial_aws::dynamo::tick`).
//!
//! One record, kept in the attributes' stored forms so that it compares and rounds as the item
//! does: the minutes (`watermark`, `reached`) and `stalled_since` as instant text to the whole
//! second, compared as text; the shard counts as numbers; `alert_taken_at` exactly; the watchdog's
//! cursor as a run id's text (to the second). Raising a minute or a count never lowers it and a
//! lower value is no error; an incident opens and closes under the same conditions as the item's.

use crate::guard::lock;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Mutex;
use sundial_domain::due_index::{format_instant, parse_instant};
use sundial_domain::ports::store::{StoreError, StoreResult, TickState, TickStateStore};
use sundial_domain::run::RunId;

/// The tick item's attributes.
#[derive(Debug, Default, Clone)]
struct Item {
    watermark: Option<String>,
    reached: Option<String>,
    stalled_since: Option<String>,
    unsent_alert: Option<String>,
    alert_taken_at: Option<DateTime<Utc>>,
    shards: Option<u16>,
    looked_back: Option<u16>,
    watchdog_cursor: Option<String>,
}

/// The tick's progress in memory.
#[derive(Debug, Default)]
pub struct MemoryTickStateStore {
    item: Mutex<Item>,
}

impl MemoryTickStateStore {
    pub fn new() -> Self {
        MemoryTickStateStore::default()
    }
}

/// Raises `slot` to `value` if it is absent or lower.
fn raise<T: PartialOrd>(slot: &mut Option<T>, value: T) {
    if slot.as_ref().is_none_or(|current| *current < value) {
        *slot = Some(value);
    }
}

#[async_trait]
impl TickStateStore for MemoryTickStateStore {
    async fn get(&self) -> StoreResult<TickState> {
        let item = lock(&self.item).clone();
        Ok(TickState {
            watermark: item.watermark.as_deref().and_then(parse_instant),
            reached: item.reached.as_deref().and_then(parse_instant),
            stalled_since: item.stalled_since.as_deref().and_then(parse_instant),
            unsent_alert: item.unsent_alert,
            alert_taken_at: item.alert_taken_at,
            shards: item.shards,
            looked_back: item.looked_back,
            watchdog_cursor: item.watchdog_cursor.as_deref().and_then(RunId::parse),
        })
    }

    async fn set_reached(&self, minute: DateTime<Utc>) -> StoreResult<()> {
        raise(&mut lock(&self.item).reached, format_instant(minute));
        Ok(())
    }

    async fn set_watermark(&self, minute: DateTime<Utc>) -> StoreResult<()> {
        raise(&mut lock(&self.item).watermark, format_instant(minute));
        Ok(())
    }

    async fn open_incident(&self, since: DateTime<Utc>, alert: &str) -> StoreResult<()> {
        let mut item = lock(&self.item);
        if item.stalled_since.is_some() {
            return Err(StoreError::Conflict);
        }
        item.stalled_since = Some(format_instant(since));
        item.unsent_alert = Some(alert.to_string());
        item.alert_taken_at = Some(since);
        Ok(())
    }

    async fn close_incident(&self, since: DateTime<Utc>, alert: &str, now: DateTime<Utc>) -> StoreResult<()> {
        let mut item = lock(&self.item);
        if item.stalled_since.as_deref() != Some(format_instant(since).as_str()) {
            return Err(StoreError::Conflict);
        }
        item.stalled_since = None;
        item.unsent_alert = Some(alert.to_string());
        item.alert_taken_at = Some(now);
        Ok(())
    }

    async fn take_alert(
        &self,
        alert: &str,
        taken_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let mut item = lock(&self.item);
        if item.unsent_alert.as_deref() != Some(alert) || item.alert_taken_at != taken_at {
            return Err(StoreError::Conflict);
        }
        item.alert_taken_at = Some(now);
        Ok(())
    }

    async fn mark_alert_sent(&self, alert: &str) -> StoreResult<()> {
        let mut item = lock(&self.item);
        if item.unsent_alert.as_deref() != Some(alert) {
            return Err(StoreError::Conflict);
        }
        item.unsent_alert = None;
        item.alert_taken_at = None;
        Ok(())
    }

    async fn note_shards(&self, shards: u16) -> StoreResult<()> {
        raise(&mut lock(&self.item).shards, shards);
        Ok(())
    }

    async fn set_looked_back(&self, shards: u16) -> StoreResult<()> {
        raise(&mut lock(&self.item).looked_back, shards);
        Ok(())
    }

    async fn set_watchdog_cursor(&self, cursor: Option<&RunId>) -> StoreResult<()> {
        lock(&self.item).watchdog_cursor = cursor.map(RunId::to_string);
        Ok(())
    }
}
