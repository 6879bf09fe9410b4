//! DynamoDB item helpers shared by the adapters: reading typed attributes, reading a whole
//! partition, and transactions. SDK errors become [`StoreError`]s in [`crate::errors`].

use crate::errors::store_error;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;
use sundial_domain::ports::store::StoreError;

pub type Item = HashMap<String, AttributeValue>;

pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

pub fn get_s<'a>(item: &'a Item, name: &str) -> Result<&'a str, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v),
        _ => Err(StoreError::Corrupt(format!("attribute {name} missing or not a string"))),
    }
}

pub fn get_opt_s<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v),
        _ => None,
    }
}

pub fn get_n<T: std::str::FromStr>(item: &Item, name: &str) -> Result<T, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => {
            v.parse().map_err(|_| StoreError::Corrupt(format!("attribute {name} is not a valid number")))
        }
        _ => Err(StoreError::Corrupt(format!("attribute {name} missing or not a number"))),
    }
}

/// The reasons a transaction was cancelled, one per item (`ConditionalCheckFailed`, `None`, …),
/// or `None` if the error is not a cancelled transaction.
pub fn cancellation_reasons<R>(
    err: &SdkError<aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError, R>,
) -> Option<Vec<String>> {
    let service = err.as_service_error()?;
    match service {
        aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(e) => {
            Some(
                e.cancellation_reasons()
                    .iter()
                    .map(|r| r.code().unwrap_or("None").to_string())
                    .collect(),
            )
        }
        _ => None,
    }
}

/// Runs `query` page by page, decoding every item: for reads that want all of a partition.
pub async fn query_all<T>(
    query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
    decode: impl Fn(&Item) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let mut decoded = Vec::new();
    let mut start = None;
    loop {
        let out = query.clone().set_exclusive_start_key(start).send().await.map_err(store_error)?;
        for it in out.items() {
            decoded.push(decode(it)?);
        }
        start = out.last_evaluated_key;
        if start.is_none() {
            return Ok(decoded);
        }
    }
}

/// Concurrent transactions on one item cancelled with `TransactionConflict` are retried this
/// many times.
const TRANSACTION_RETRIES: u32 = 6;

/// Why a transaction did not apply.
#[derive(Debug)]
pub enum TransactFailure {
    /// One reason per item, in order.
    Cancelled(Vec<String>),
    Store(StoreError),
}

/// Whether the item at `index` of a cancelled transaction failed its condition.
pub fn failed(reasons: &[String], index: usize) -> bool {
    reasons.get(index).is_some_and(|r| r == "ConditionalCheckFailed")
}

/// Runs a transaction; a cancelled one reports which item's condition failed. Concurrent
/// transactions on one item (two creates of one owner both count its jobs) cancel each other
/// with `TransactionConflict`: those are retried with jittered backoff.
pub async fn transact(
    client: &aws_sdk_dynamodb::Client,
    items: Vec<aws_sdk_dynamodb::types::TransactWriteItem>,
) -> Result<(), TransactFailure> {
    transact_retrying(client, items, TRANSACTION_RETRIES).await
}

/// [`transact`] without its retries: a best-effort write that another writer of the same item
/// makes moot (a refused key's record, written once a minute by whichever request wins).
pub async fn transact_once(
    client: &aws_sdk_dynamodb::Client,
    items: Vec<aws_sdk_dynamodb::types::TransactWriteItem>,
) -> Result<(), TransactFailure> {
    transact_retrying(client, items, 0).await
}

async fn transact_retrying(
    client: &aws_sdk_dynamodb::Client,
    items: Vec<aws_sdk_dynamodb::types::TransactWriteItem>,
    retries: u32,
) -> Result<(), TransactFailure> {
    let mut attempt = 0u32;
    loop {
        let sent = client.transact_write_items().set_transact_items(Some(items.clone())).send().await;
        let failure = match sent {
            Ok(_) => return Ok(()),
            Err(e) => match cancellation_reasons(&e) {
                Some(reasons) => TransactFailure::Cancelled(reasons),
                None if e.code() == Some("TransactionConflictException") => {
                    TransactFailure::Cancelled(vec!["TransactionConflict".into()])
                }
                None => return Err(TransactFailure::Store(store_error(e))),
            },
        };
        let conflicted = matches!(&failure, TransactFailure::Cancelled(r)
            if r.iter().any(|c| c == "TransactionConflict") && !r.iter().any(|c| c == "ConditionalCheckFailed"));
        if !conflicted || attempt >= retries {
            return Err(failure);
        }
        attempt += 1;
        let jitter = u64::from(ulid::Ulid::generate().random() as u16 % 25);
        tokio::time::sleep(std::time::Duration::from_millis(10 * (1 << attempt) + jitter)).await;
    }
}
