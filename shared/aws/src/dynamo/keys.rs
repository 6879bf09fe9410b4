//! API keys in DynamoDB, in the jobs table: one item per key, keyed `apikey#<id>`, the key kept
//! as JSON text (`doc`, its secret's digest only) with its `owner` apart (`key_owner`, so that a
//! revocation checks it), its last use (`last_used`, Unix milliseconds), when it was revoked
//! (`revoked_at`, likewise) and when a refused use of it was last recorded (`last_refused`); the
//! owner's list is another item, `apikeys#<owner>` (one `k_<id>` attribute per key and their
//! `count`), written in the transaction that creates or revokes a key, so a listing is one read
//! and a batch read and the count bounds how many an owner keeps. A revoked key's item stays
//! (about 400 bytes), so that a use of it is known for what it is. None of these items carries `owner`, `name`,
//! `document` or due attributes, so all stay out of the jobs table's indexes and its scan.

use super::audit;
use super::item::{self, Item, TransactFailure, failed, get_s, n, s};
use super::update::Update;
use crate::errors::store_error;
use crate::metrics::{Ledger, writes};
use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem, Update as TransactUpdate};
use chrono::{DateTime, Utc};
use std::sync::Arc;
use sundial_domain::audit::AuditRecord;
use sundial_domain::keys::{ApiKey, LAST_USED_EVERY, MAX_KEYS_PER_OWNER};
use sundial_domain::ports::store::{KeyStore, StoreError, StoreResult};

/// API keys, in the jobs table.
#[derive(Debug, Clone)]
pub struct DynamoKeyStore {
    client: Client,
    table: String,
    /// Where the records of its changes go (the runs table).
    audit_table: String,
    ledger: Arc<Ledger>,
}

fn key_item(id: &str) -> String {
    format!("apikey#{id}")
}

fn list_item(owner: &str) -> String {
    format!("apikeys#{owner}")
}

fn built<T, E: std::fmt::Display>(built: Result<T, E>) -> StoreResult<T> {
    built.map_err(|e| StoreError::Corrupt(e.to_string()))
}

impl DynamoKeyStore {
    /// The store in `table`, writing the records of its changes into `audit_table`.
    pub fn new(
        client: Client,
        table: impl Into<String>,
        audit_table: impl Into<String>,
        ledger: Arc<Ledger>,
    ) -> Self {
        DynamoKeyStore { client, table: table.into(), audit_table: audit_table.into(), ledger }
    }

    fn decode(item: &Item) -> StoreResult<ApiKey> {
        let mut key: ApiKey =
            serde_json::from_str(get_s(item, "doc")?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let millis = |name: &str| match item.get(name) {
            Some(AttributeValue::N(millis)) => {
                millis.parse::<i64>().ok().and_then(DateTime::from_timestamp_millis)
            }
            _ => None,
        };
        key.last_used_at = millis("last_used");
        key.revoked_at = millis("revoked_at");
        key.last_refused_at = millis("last_refused");
        Ok(key)
    }

    async fn read(&self, key: String) -> StoreResult<Option<Item>> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("job_id", s(key))
            .consistent_read(true)
            .send()
            .await
            .map_err(store_error)?;
        Ok(out.item)
    }
}

#[async_trait]
impl KeyStore for DynamoKeyStore {
    async fn get(&self, id: &str) -> StoreResult<Option<ApiKey>> {
        self.read(key_item(id)).await?.as_ref().map(Self::decode).transpose()
    }

    async fn list(&self, owner: &str) -> StoreResult<Vec<ApiKey>> {
        let Some(listed) = self.read(list_item(owner)).await? else { return Ok(Vec::new()) };
        let keys: Vec<Item> = listed
            .keys()
            .filter_map(|attribute| attribute.strip_prefix("k_"))
            .map(|id| Item::from([("job_id".to_string(), s(key_item(id)))]))
            .collect();
        let mut keys =
            super::batch::get(&self.client, &self.table, keys, true, |item| Self::decode(item).map(Some))
                .await?;
        keys.retain(|k| k.owner == owner && k.revoked_at.is_none());
        keys.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
        Ok(keys)
    }

    async fn create(&self, key: &ApiKey, audit: Option<&AuditRecord>) -> StoreResult<()> {
        let doc = serde_json::to_string(&ApiKey {
            last_used_at: None,
            revoked_at: None,
            last_refused_at: None,
            ..key.clone()
        })
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let put = built(
            Put::builder()
                .table_name(&self.table)
                .item("job_id", s(key_item(&key.id)))
                .item("doc", s(doc))
                .item("key_owner", s(&key.owner))
                // A revoked key's item may be written over: a grant to a subject, revoked, is
                // granted again under the same id.
                .condition_expression("attribute_not_exists(job_id) OR attribute_exists(revoked_at)")
                .build(),
        )?;
        let listed = Update::new()
            .set("#k", ":one", n(1))
            .add("#count", ":one", n(1))
            .name("#k", format!("k_{}", key.id))
            .name("#count", "count")
            .value(":max", n(MAX_KEYS_PER_OWNER));
        let request = TransactUpdate::builder()
            .table_name(&self.table)
            .key("job_id", s(list_item(&key.owner)))
            .condition_expression("attribute_not_exists(#count) OR #count < :max");
        let list = built(listed.apply_transact(request).build())?;
        self.ledger.add(writes::ITEM, 4);
        let items = vec![
            TransactWriteItem::builder().put(put).build(),
            TransactWriteItem::builder().update(list).build(),
        ];
        let items = audit::with_record(items, &self.audit_table, audit, &self.ledger)?;
        match item::transact(&self.client, items).await {
            Ok(()) => Ok(()),
            Err(TransactFailure::Cancelled(r)) if failed(&r, 0) => Err(StoreError::Conflict),
            Err(TransactFailure::Cancelled(r)) if failed(&r, 1) => {
                Err(StoreError::QuotaExceeded(MAX_KEYS_PER_OWNER as u32))
            }
            Err(TransactFailure::Cancelled(r)) => {
                Err(StoreError::Unavailable(format!("transaction cancelled: {r:?}")))
            }
            Err(TransactFailure::Store(e)) => Err(e),
        }
    }

    async fn revoke(
        &self,
        owner: &str,
        id: &str,
        at: DateTime<Utc>,
        audit: Option<&AuditRecord>,
    ) -> StoreResult<()> {
        let revoked =
            Update::new().set("revoked_at", ":at", n(at.timestamp_millis())).value(":owner", s(owner));
        let request = TransactUpdate::builder()
            .table_name(&self.table)
            .key("job_id", s(key_item(id)))
            .condition_expression("key_owner = :owner AND attribute_not_exists(revoked_at)");
        let key = built(revoked.apply_transact(request).build())?;
        let unlisted = Update::new()
            .remove("#k")
            .add("#count", ":minus", n(-1))
            .name("#k", format!("k_{id}"))
            .name("#count", "count");
        let request = TransactUpdate::builder()
            .table_name(&self.table)
            .key("job_id", s(list_item(owner)))
            .condition_expression("attribute_exists(#k)");
        let list = built(unlisted.apply_transact(request).build())?;
        self.ledger.add(writes::ITEM, 4);
        let items = vec![
            TransactWriteItem::builder().update(key).build(),
            TransactWriteItem::builder().update(list).build(),
        ];
        let items = audit::with_record(items, &self.audit_table, audit, &self.ledger)?;
        match item::transact(&self.client, items).await {
            Ok(()) => Ok(()),
            // Not this owner's key, revoked already (or none): as if there were none.
            Err(TransactFailure::Cancelled(_)) => Err(StoreError::NotFound),
            Err(TransactFailure::Store(e)) => Err(e),
        }
    }

    async fn refused(&self, id: &str, at: DateTime<Utc>, record: &AuditRecord) -> StoreResult<()> {
        let cutoff = (at - LAST_USED_EVERY).timestamp_millis();
        let mark =
            Update::new().set("last_refused", ":at", n(at.timestamp_millis())).value(":cutoff", n(cutoff));
        let request = TransactUpdate::builder().table_name(&self.table).key("job_id", s(key_item(id))).condition_expression(
            "attribute_exists(job_id) AND (attribute_not_exists(last_refused) OR last_refused <= :cutoff)",
        );
        let items =
            vec![TransactWriteItem::builder().update(built(mark.apply_transact(request).build())?).build()];
        self.ledger.add(writes::ITEM, 2);
        let items = audit::with_record(items, &self.audit_table, Some(record), &self.ledger)?;
        // Not retried: a conflict is another request recording the same refusal.
        match item::transact_once(&self.client, items).await {
            Ok(()) => Ok(()),
            // Recorded within the minute (or the key is gone), or being recorded: nothing more.
            Err(TransactFailure::Cancelled(r))
                if failed(&r, 0) || r.iter().any(|c| c == "TransactionConflict") =>
            {
                Ok(())
            }
            Err(TransactFailure::Cancelled(r)) => {
                Err(StoreError::Unavailable(format!("transaction cancelled: {r:?}")))
            }
            Err(TransactFailure::Store(e)) => Err(e),
        }
    }

    async fn touch(&self, id: &str, at: DateTime<Utc>) -> StoreResult<()> {
        self.ledger.add(writes::ITEM, 1);
        let cutoff = (at - LAST_USED_EVERY).timestamp_millis();
        let update =
            Update::new().set("last_used", ":at", n(at.timestamp_millis())).value(":cutoff", n(cutoff));
        let request = self.client.update_item().table_name(&self.table).key("job_id", s(key_item(id)));
        let touched = update
            .apply(request)
            .condition_expression(
                "attribute_exists(job_id) AND (attribute_not_exists(last_used) OR last_used <= :cutoff)",
            )
            .send()
            .await
            .map_err(store_error);
        match touched {
            // Gone, or used within the minute: nothing to write.
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
