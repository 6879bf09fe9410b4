//! Idempotency records in DynamoDB: one item per (owner, key), claimed with a conditional put,
//! completed with the response, expired by TTL after a day.
//!
//! A claim that was never completed (the process died mid-request) is taken over after
//! [`PENDING_FOR`], so a crash cannot block a key for a whole day. A released claim (the request
//! failed) stays as `released`, keeping the time the key was first seen: its retry is claimed
//! again with that time, so whatever the request derives from it comes out the same.

use super::item::{Item, get_n, get_opt_s, get_s, n, s};
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
        let claimed = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("idem_key", s(key))
            .update_expression(
                "SET fingerprint = :f, #st = :pending, pending_until = :until, expires_at = :exp, \
                 first_seen = if_not_exists(first_seen, :now_text)",
            )
            .condition_expression(
                "attribute_not_exists(idem_key) \
                 OR (#st = :pending AND pending_until < :now AND fingerprint = :f) \
                 OR (#st = :released AND fingerprint = :f)",
            )
            .expression_attribute_names("#st", "state")
            .expression_attribute_values(":f", s(fingerprint))
            .expression_attribute_values(":pending", s("pending"))
            .expression_attribute_values(":released", s("released"))
            .expression_attribute_values(":until", n((now + PENDING_FOR).timestamp()))
            .expression_attribute_values(":exp", n((now + RETAIN_FOR).timestamp()))
            .expression_attribute_values(":now", n(now.timestamp()))
            .expression_attribute_values(":now_text", s(now.to_rfc3339()))
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
        self.client
            .update_item()
            .table_name(&self.table)
            .key("idem_key", s(key))
            .update_expression("SET #st = :done, #status = :status, headers = :headers, body = :body, expires_at = :exp REMOVE pending_until")
            .expression_attribute_names("#st", "state")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":done", s("done"))
            .expression_attribute_values(":status", n(response.status))
            .expression_attribute_values(":headers", s(headers))
            .expression_attribute_values(":body", s(&response.body))
            .expression_attribute_values(":exp", n((now + RETAIN_FOR).timestamp()))
            .send()
            .await
            .map_err(store_error)?;
        Ok(())
    }

    async fn release(&self, key: &str) -> StoreResult<()> {
        let released = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("idem_key", s(key))
            .update_expression("SET #st = :released REMOVE pending_until")
            .condition_expression("#st = :pending")
            .expression_attribute_names("#st", "state")
            .expression_attribute_values(":pending", s("pending"))
            .expression_attribute_values(":released", s("released"))
            .send()
            .await;
        match released.map_err(store_error) {
            // Already completed (or gone): nothing to give up.
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
