//! DynamoDB item helpers shared by the adapters: reading typed attributes and classifying SDK
//! errors into [`StoreError`].

use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
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

/// Error codes of requests DynamoDB refuses as such: retrying the same request cannot succeed.
const REJECTED: [&str; 6] = [
    "AccessDeniedException",
    "ValidationException",
    "ResourceNotFoundException",
    "UnrecognizedClientException",
    "MissingAuthenticationTokenException",
    "IncompleteSignatureException",
];

/// Maps an SDK error: a failed condition is a `Conflict`, and so is a write refused because a
/// transaction holds the item (`TransactionConflictException`: a job's link to its group checks
/// the group's ledger in one, so an admission racing it reads the group again, as after any
/// concurrent change); a request refused as such (denied, invalid, no such table) is `Rejected`;
/// throttling, transport failures and anything else are `Unavailable` (retryable), with the
/// error's full context.
pub fn classify<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    match err.code() {
        Some("ConditionalCheckFailedException" | "TransactionConflictException") => StoreError::Conflict,
        Some(code) if REJECTED.contains(&code) => StoreError::Rejected(DisplayErrorContext(&err).to_string()),
        _ => StoreError::Unavailable(DisplayErrorContext(&err).to_string()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::ErrorMetadata;
    use aws_sdk_dynamodb::operation::get_item::GetItemError;
    use aws_smithy_runtime_api::http::{Response, StatusCode};
    use aws_smithy_types::body::SdkBody;

    fn service_error(code: &str) -> SdkError<GetItemError, Response> {
        let error = GetItemError::generic(ErrorMetadata::builder().code(code).message("m").build());
        let status = StatusCode::try_from(400).unwrap_or_else(|_| unreachable!("400 is a status"));
        SdkError::service_error(error, Response::new(status, SdkBody::empty()))
    }

    #[test]
    fn refused_requests_are_rejected_and_only_outages_are_retryable() {
        assert_eq!(classify(service_error("ConditionalCheckFailedException")), StoreError::Conflict);
        for refused in ["AccessDeniedException", "ValidationException", "ResourceNotFoundException"] {
            let e = classify(service_error(refused));
            assert!(matches!(e, StoreError::Rejected(_)) && !e.is_retryable(), "{refused}: {e:?}");
        }
        for outage in ["ProvisionedThroughputExceededException", "ThrottlingException", "InternalServerError"]
        {
            let e = classify(service_error(outage));
            assert!(matches!(e, StoreError::Unavailable(_)) && e.is_retryable(), "{outage}: {e:?}");
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
                None => return Err(TransactFailure::Store(classify(e))),
            },
        };
        let conflicted = matches!(&failure, TransactFailure::Cancelled(r)
            if r.iter().any(|c| c == "TransactionConflict") && !r.iter().any(|c| c == "ConditionalCheckFailed"));
        if !conflicted || attempt >= TRANSACTION_RETRIES {
            return Err(failure);
        }
        attempt += 1;
        let jitter = u64::from(ulid::Ulid::generate().random() as u16 % 25);
        tokio::time::sleep(std::time::Duration::from_millis(10 * (1 << attempt) + jitter)).await;
    }
}
