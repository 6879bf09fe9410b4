//! The tick's progress in DynamoDB: one item (`job_id = scheduler#tick`) in the jobs table,
//! outside every index. Updates are conditional so that the minutes only ever move forward,
//! whatever order concurrent ticks finish in. The watchdog keeps its stall incident on the same
//! item.

use super::item::{get_n, get_opt_s, n, s};
use super::update::Update;
use crate::errors::store_error;
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use sundial_domain::due_index::{format_instant, parse_instant};
use sundial_domain::ports::store::{StoreError, StoreResult, TickState, TickStateStore};
use sundial_domain::run::RunId;

const KEY: &str = "scheduler#tick";

#[derive(Debug, Clone)]
pub struct DynamoTickStateStore {
    client: Client,
    table: String,
}

impl DynamoTickStateStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoTickStateStore { client, table: table.into() }
    }

    /// Writes `update` to the tick's item under `condition`.
    async fn write(&self, update: Update, condition: Option<String>) -> StoreResult<()> {
        let request = self.client.update_item().table_name(&self.table).key("job_id", s(KEY));
        update.apply(request).set_condition_expression(condition).send().await.map_err(store_error)?;
        Ok(())
    }

    /// The incident's alert, recorded unsent and taken on at `now`.
    fn unsent(alert: &str, now: DateTime<Utc>) -> Update {
        let update = Update::new().set("unsent_alert", ":alert", s(alert));
        update.set("alert_taken_at", ":now", s(now.to_rfc3339()))
    }

    /// Raises `attribute` to `value`, if it is lower (or absent): a minute, or a count.
    async fn raise(&self, attribute: &str, value: AttributeValue) -> StoreResult<()> {
        let update = Update::new().set("#a", ":v", value).name("#a", attribute);
        match self.write(update, Some("attribute_not_exists(#a) OR #a < :v".into())).await {
            // Another pass already recorded as much, or more.
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[async_trait]
impl TickStateStore for DynamoTickStateStore {
    async fn get(&self) -> StoreResult<TickState> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("job_id", s(KEY))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        let Some(it) = out.item else { return Ok(TickState::default()) };
        Ok(TickState {
            watermark: get_opt_s(&it, "watermark").and_then(parse_instant),
            reached: get_opt_s(&it, "reached").and_then(parse_instant),
            stalled_since: get_opt_s(&it, "stalled_since").and_then(parse_instant),
            unsent_alert: get_opt_s(&it, "unsent_alert").map(str::to_string),
            alert_taken_at: get_opt_s(&it, "alert_taken_at").and_then(parse_instant),
            shards: get_n(&it, "shards").ok(),
            looked_back: get_n(&it, "looked_back_shards").ok(),
            watchdog_cursor: get_opt_s(&it, "watchdog_cursor").and_then(RunId::parse),
        })
    }

    async fn set_reached(&self, minute: DateTime<Utc>) -> StoreResult<()> {
        self.raise("reached", s(format_instant(minute))).await
    }

    async fn set_watermark(&self, minute: DateTime<Utc>) -> StoreResult<()> {
        self.raise("watermark", s(format_instant(minute))).await
    }

    async fn open_incident(&self, since: DateTime<Utc>, alert: &str) -> StoreResult<()> {
        let update = Self::unsent(alert, since).set("stalled_since", ":since", s(format_instant(since)));
        self.write(update, Some("attribute_not_exists(stalled_since)".into())).await
    }

    async fn close_incident(&self, since: DateTime<Utc>, alert: &str, now: DateTime<Utc>) -> StoreResult<()> {
        let update =
            Self::unsent(alert, now).remove("stalled_since").value(":since", s(format_instant(since)));
        self.write(update, Some("stalled_since = :since".into())).await
    }

    async fn take_alert(
        &self,
        alert: &str,
        taken_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let mut update =
            Update::new().set("alert_taken_at", ":now", s(now.to_rfc3339())).value(":alert", s(alert));
        let untouched = match taken_at {
            Some(read) => {
                update = update.value(":read", s(read.to_rfc3339()));
                "alert_taken_at = :read"
            }
            None => "attribute_not_exists(alert_taken_at)",
        };
        self.write(update, Some(format!("unsent_alert = :alert AND {untouched}"))).await
    }

    async fn mark_alert_sent(&self, alert: &str) -> StoreResult<()> {
        let update = Update::new().remove("unsent_alert").remove("alert_taken_at").value(":alert", s(alert));
        self.write(update, Some("unsent_alert = :alert".into())).await
    }

    async fn note_shards(&self, shards: u16) -> StoreResult<()> {
        self.raise("shards", n(shards)).await
    }

    async fn set_looked_back(&self, shards: u16) -> StoreResult<()> {
        self.raise("looked_back_shards", n(shards)).await
    }

    async fn set_watchdog_cursor(&self, cursor: Option<&RunId>) -> StoreResult<()> {
        let update = Update::new().set_or_remove("watchdog_cursor", ":c", cursor.map(|id| s(id.to_string())));
        self.write(update, None).await
    }
}
