//! The tick's progress in DynamoDB: one item (`job_id = scheduler#tick`) in the jobs table,
//! outside every index. Updates are conditional so that the minutes only ever move forward,
//! whatever order concurrent ticks finish in. The watchdog keeps its stall incident on the same
//! item.

use super::item::{get_n, get_opt_s, n, s};
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

    /// Opens or closes the stall incident of `since`, recording `alert` unsent (taken on at
    /// `now`), under `condition`.
    async fn incident(
        &self,
        update: &str,
        condition: &str,
        since: DateTime<Utc>,
        alert: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("job_id", s(KEY))
            .update_expression(update)
            .condition_expression(condition)
            .expression_attribute_values(":since", s(format_instant(since)))
            .expression_attribute_values(":alert", s(alert))
            .expression_attribute_values(":now", s(now.to_rfc3339()))
            .send()
            .await
            .map_err(store_error)?;
        Ok(())
    }

    /// Raises `attribute` to `value`, if it is lower (or absent): a minute, or a count.
    async fn raise(&self, attribute: &str, value: AttributeValue) -> StoreResult<()> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("job_id", s(KEY))
            .update_expression("SET #a = :v")
            .condition_expression("attribute_not_exists(#a) OR #a < :v")
            .expression_attribute_names("#a", attribute)
            .expression_attribute_values(":v", value)
            .send()
            .await
            .map_err(store_error);
        match result {
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
        let update = "SET stalled_since = :since, unsent_alert = :alert, alert_taken_at = :now";
        self.incident(update, "attribute_not_exists(stalled_since)", since, alert, since).await
    }

    async fn close_incident(&self, since: DateTime<Utc>, alert: &str, now: DateTime<Utc>) -> StoreResult<()> {
        let update = "SET unsent_alert = :alert, alert_taken_at = :now REMOVE stalled_since";
        self.incident(update, "stalled_since = :since", since, alert, now).await
    }

    async fn take_alert(
        &self,
        alert: &str,
        taken_at: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("job_id", s(KEY))
            .update_expression("SET alert_taken_at = :now")
            .expression_attribute_values(":alert", s(alert))
            .expression_attribute_values(":now", s(now.to_rfc3339()));
        let untouched = match taken_at {
            Some(read) => {
                request = request.expression_attribute_values(":read", s(read.to_rfc3339()));
                "alert_taken_at = :read"
            }
            None => "attribute_not_exists(alert_taken_at)",
        };
        request
            .condition_expression(format!("unsent_alert = :alert AND {untouched}"))
            .send()
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn mark_alert_sent(&self, alert: &str) -> StoreResult<()> {
        self.client
            .update_item()
            .table_name(&self.table)
            .key("job_id", s(KEY))
            .update_expression("REMOVE unsent_alert, alert_taken_at")
            .condition_expression("unsent_alert = :alert")
            .expression_attribute_values(":alert", s(alert))
            .send()
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn note_shards(&self, shards: u16) -> StoreResult<()> {
        self.raise("shards", n(shards)).await
    }

    async fn set_looked_back(&self, shards: u16) -> StoreResult<()> {
        self.raise("looked_back_shards", n(shards)).await
    }

    async fn set_watchdog_cursor(&self, cursor: Option<&RunId>) -> StoreResult<()> {
        let request = self.client.update_item().table_name(&self.table).key("job_id", s(KEY));
        let request = match cursor {
            Some(id) => request
                .update_expression("SET watchdog_cursor = :c")
                .expression_attribute_values(":c", s(id.to_string())),
            None => request.update_expression("REMOVE watchdog_cursor"),
        };
        request.send().await.map_err(store_error)?;
        Ok(())
    }
}
