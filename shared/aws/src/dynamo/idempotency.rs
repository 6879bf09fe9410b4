//! Idempotency records in DynamoDB: one item per (owner, key), claimed with a conditional put,
//! completed with the response, expired by TTL after a day.
//!
//! A claim that was never completed (the process died mid-request) is taken over after
//! [`PENDING_FOR`], so a crash cannot block a key for a whole day. A released claim (the request
//! failed) stays as `released`, keeping the time the key was first seen: its retry is claimed
//! again with that time, so whatever the request derives from it comes out the same.

use super::item::{Item, get_n, get_opt_s, get_s, n, s};
use super::update::Update;
use crate::errors::store_error;
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;
use sundial_domain::ports::store::{Claim, IdempotencyStore, StoreError, StoreResult, StoredResponse};

/// How long a claim blocks the key while its request is processed.
pub const PENDING_FOR: Duration = Duration::seconds(60);
/// How long a completed response is replayed.
pub const RETAIN_FOR: Duration = Duration::hours(24);

/// Idempotency records in one DynamoDB table.
#[derive(Debug, Clone)]
pub struct DynamoIdempotencyStore {
    client: Client,
    table: String,
}

impl DynamoIdempotencyStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        DynamoIdempotencyStore { client, table: table.into() }
    }

    async fn read(&self, key: &str) -> StoreResult<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("idem_key", s(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        Ok(out.item)
    }
}

#[async_trait]
impl IdempotencyStore for DynamoIdempotencyStore {
    async fn claim(&self, key: &str, fingerprint: &str, now: DateTime<Utc>) -> StoreResult<Claim> {
        use aws_sdk_dynamodb::types::ReturnValue;
        let update = Update::new()
            .set("fingerprint", ":f", s(fingerprint))
            .set("#st", ":pending", s("pending"))
            .set("pending_until", ":until", n((now + PENDING_FOR).timestamp()))
            .set("expires_at", ":exp", n((now + RETAIN_FOR).timestamp()))
            .set_to("first_seen", "if_not_exists(first_seen, :now_text)")
            .name("#st", "state")
            .value(":now_text", s(now.to_rfc3339()))
            .value(":released", s("released"))
            .value(":now", n(now.timestamp()));
        let request = self.client.update_item().table_name(&self.table).key("idem_key", s(key));
        let claimed = update
            .apply(request)
            .condition_expression(
                "attribute_not_exists(idem_key) \
                 OR (#st = :pending AND pending_until < :now AND fingerprint = :f) \
                 OR (#st = :released AND fingerprint = :f)",
            )
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match claimed.map_err(store_error) {
            Ok(out) => {
                let first_seen = out
                    .attributes
                    .as_ref()
                    .and_then(|a| get_opt_s(a, "first_seen"))
                    .and_then(sundial_domain::due_index::parse_instant)
                    .unwrap_or(now);
                return Ok(Claim::New { first_seen });
            }
            Err(StoreError::Conflict) => {}
            Err(e) => return Err(e),
        }
        let Some(record) = self.read(key).await? else {
            // Expired between the two calls: the caller may simply try again.
            return Err(StoreError::Unavailable("idempotency record vanished; retry".into()));
        };
        if get_s(&record, "fingerprint")? != fingerprint {
            return Ok(Claim::Mismatch);
        }
        match get_opt_s(&record, "state") {
            Some("done") => {
                let headers: BTreeMap<String, String> = serde_json::from_str(get_s(&record, "headers")?)
                    .map_err(|e| StoreError::Corrupt(format!("headers: {e}")))?;
                Ok(Claim::Replay(StoredResponse {
                    status: get_n(&record, "status")?,
                    headers,
                    body: get_s(&record, "body")?.to_string(),
                }))
            }
            _ => Ok(Claim::InProgress),
        }
    }

    async fn complete(&self, key: &str, response: &StoredResponse, now: DateTime<Utc>) -> StoreResult<()> {
        let headers =
            serde_json::to_string(&response.headers).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let update = Update::new()
            .set("#st", ":done", s("done"))
            .set("#status", ":status", n(response.status))
            .set("headers", ":headers", s(headers))
            .set("body", ":body", s(&response.body))
            .set("expires_at", ":exp", n((now + RETAIN_FOR).timestamp()))
            .remove("pending_until")
            .name("#st", "state")
            .name("#status", "status");
        let request = self.client.update_item().table_name(&self.table).key("idem_key", s(key));
        update.apply(request).send().await.map_err(store_error)?;
        Ok(())
    }

    async fn release(&self, key: &str) -> StoreResult<()> {
        let update = Update::new()
            .set("#st", ":released", s("released"))
            .remove("pending_until")
            .name("#st", "state")
            .value(":pending", s("pending"));
        let request = self.client.update_item().table_name(&self.table).key("idem_key", s(key));
        let released = update.apply(request).condition_expression("#st = :pending").send().await;
        match released.map_err(store_error) {
            // Already completed (or gone): nothing to give up.
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
