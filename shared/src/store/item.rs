//! DynamoDB item helpers shared by the adapters: reading typed attributes and classifying SDK
//! errors into [`StoreError`].

use super::StoreError;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

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

/// Maps an SDK error: a failed condition is a `Conflict`, throttling and transport failures are
/// `Unavailable` (retryable); anything else is reported as unavailable with its full context.
pub fn classify<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    if err.code() == Some("ConditionalCheckFailedException") {
        return StoreError::Conflict;
    }
    StoreError::Unavailable(DisplayErrorContext(&err).to_string())
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
        let out = query.clone().set_exclusive_start_key(start).send().await.map_err(classify)?;
        for it in out.items() {
            decoded.push(decode(it)?);
        }
        start = out.last_evaluated_key;
        if start.is_none() {
            return Ok(decoded);
        }
    }
}
