//! What a failed AWS call means, decided once for DynamoDB, SQS and SNS: [`AwsError::of`] reads
//! an SDK error's code into a [`Fault`], with the error's full text, and each port's error is a
//! plain match on that ([`store_error`], [`queue_error`], [`publish_error`], [`topic_error`]).
//! The codes live here and nowhere else; throttling codes are the SDK's own list.

use aws_runtime::retries::classifiers::THROTTLING_ERRORS;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use sundial_domain::ports::bus::PublishError;
use sundial_domain::ports::queue::QueueError;
use sundial_domain::ports::store::StoreError;
use sundial_domain::ports::topics::TopicError;

/// What a failed call tells about trying it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A DynamoDB condition failed, or a transaction held the item: read again, then decide.
    Conflict,
    /// Refused as such (denied, invalid, no such table, queue or topic, bad credentials, a
    /// request that could not be built): the same request can never succeed.
    Rejected,
    /// Throttled (a code on the SDK's throttling list): the service did not act on it, and
    /// later it may.
    Throttled,
    /// Anything else: unreachable, timed out, a 5xx, a code not listed here. Retrying may help.
    Unavailable,
}

impl Fault {
    /// Whether the same request may succeed later.
    pub fn is_retryable(self) -> bool {
        matches!(self, Fault::Throttled | Fault::Unavailable)
    }
}

/// Codes of a write whose condition failed, or that a transaction in progress refused.
const CONFLICT: [&str; 2] = ["ConditionalCheckFailedException", "TransactionConflictException"];

/// Codes of requests refused as such, by any of the services Sundial calls. Each service has
/// codes of its own, and none of these means anything retryable in another, so there is one
/// list. Until #33 each adapter kept its own, and they disagreed on the five marked "(was
/// DynamoDB's only)": SQS's and SNS's adapters retried them. Bad credentials or an invalid
/// request fail the same way every time (the SDK's own retry policy does not retry them either),
/// so every service's adapter now refuses them.
const REJECTED: [&str; 23] = [
    // Denied, or not signed with credentials AWS knows.
    "AccessDenied",
    "AccessDeniedException",
    "UnrecognizedClientException",         // (was DynamoDB's only)
    "MissingAuthenticationTokenException", // (was DynamoDB's only)
    "IncompleteSignatureException",        // (was DynamoDB's only)
    // The same two faults as SNS's query protocol names them (new in #33).
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    // An invalid request, or one naming nothing that exists.
    "ValidationException",       // (was DynamoDB's only)
    "ResourceNotFoundException", // (was DynamoDB's only)
    "InvalidParameterValue",
    "InvalidSecurity",
    // SQS.
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
    "InvalidMessageContents",
    "ReceiptHandleIsInvalid",
    "UnsupportedOperation",
    "InvalidAddress",
    // SNS.
    "NotFound",
    "InvalidParameter",
    "AuthorizationError",
    "EndpointDisabled",
    "KMSDisabled",
    "KMSNotFound",
];

/// A failed AWS call, read once: its [`Fault`], its code and message if the service sent any,
/// and the error's full text (every cause) for the port's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsError {
    pub fault: Fault,
    pub code: Option<String>,
    pub message: Option<String>,
    pub context: String,
}

impl AwsError {
    /// Classifies `err`. A request that could not be built is `Rejected`: DynamoDB's adapter
    /// called it `Unavailable` until #33, but it is refused before anything is sent, and would
    /// be refused again.
    pub fn of<E, R>(err: &SdkError<E, R>) -> AwsError
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        let code = err.code();
        let fault = match code {
            _ if matches!(err, SdkError::ConstructionFailure(_)) => Fault::Rejected,
            Some(code) if CONFLICT.contains(&code) => Fault::Conflict,
            Some(code) if REJECTED.contains(&code) => Fault::Rejected,
            Some(code) if THROTTLING_ERRORS.contains(&code) => Fault::Throttled,
            _ => Fault::Unavailable,
        };
        AwsError {
            fault,
            code: code.map(str::to_string),
            message: err.message().map(str::to_string),
            context: DisplayErrorContext(err).to_string(),
        }
    }

    /// Whether the service said `code`.
    pub fn is(&self, code: &str) -> bool {
        self.code.as_deref() == Some(code)
    }
}

/// A DynamoDB error as the storage ports see it: a failed condition, or a write refused because a
/// transaction holds the item (a job's link to its group checks the group's ledger in one, so an
/// admission racing it reads the group again, as after any concurrent change), is a `Conflict`.
pub fn store_error<E, R>(err: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let error = AwsError::of(&err);
    match error.fault {
        Fault::Conflict => StoreError::Conflict,
        Fault::Rejected => StoreError::Rejected(error.context),
        Fault::Throttled | Fault::Unavailable => StoreError::Unavailable(error.context),
    }
}

/// An SQS error as the runs queue sees it: refused for good, or worth another try.
pub fn queue_error<E, R>(err: SdkError<E, R>) -> QueueError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let error = AwsError::of(&err);
    match error.fault {
        Fault::Rejected => QueueError::Refused(error.context),
        Fault::Conflict | Fault::Throttled | Fault::Unavailable => QueueError::Unavailable(error.context),
    }
}

/// An SNS error as the event bus sees it: refused for good (no such topic, not authorised, an
/// invalid message), or worth another try.
pub fn publish_error<E, R>(err: SdkError<E, R>) -> PublishError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let error = AwsError::of(&err);
    match error.fault {
        Fault::Rejected => PublishError::Refused(error.context),
        Fault::Conflict | Fault::Throttled | Fault::Unavailable => PublishError::Unavailable(error.context),
    }
}

/// An SNS error of the per-job topics. [`TopicError::Rejected`] names a field of the job, so
/// only the caller that knows which endpoint SNS refused can say it; every other failure is
/// `Unavailable`.
impl From<AwsError> for TopicError {
    fn from(error: AwsError) -> Self {
        TopicError::Unavailable(error.context)
    }
}

/// [`TopicError`] of an SDK error, for `map_err`.
pub fn topic_error<E, R>(err: SdkError<E, R>) -> TopicError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    AwsError::of(&err).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_runtime_api::http::{Response, StatusCode};
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    /// A service error of each SDK's operation error type, as the service would send `code`.
    macro_rules! service_error {
        ($error:ty, $code:expr) => {{
            let error = <$error>::generic(ErrorMetadata::builder().code($code).message("m").build());
            let status = StatusCode::try_from(400).unwrap_or_else(|_| unreachable!("400 is a status"));
            SdkError::service_error(error, Response::new(status, SdkBody::empty()))
        }};
    }

    fn dynamodb(code: &str) -> SdkError<aws_sdk_dynamodb::operation::get_item::GetItemError, Response> {
        service_error!(aws_sdk_dynamodb::operation::get_item::GetItemError, code)
    }

    fn sqs(code: &str) -> SdkError<aws_sdk_sqs::operation::send_message::SendMessageError, Response> {
        service_error!(aws_sdk_sqs::operation::send_message::SendMessageError, code)
    }

    fn sns(code: &str) -> SdkError<aws_sdk_sns::operation::publish::PublishError, Response> {
        service_error!(aws_sdk_sns::operation::publish::PublishError, code)
    }

    #[test]
    fn refused_requests_are_rejected_and_only_outages_are_retryable() {
        assert_eq!(store_error(dynamodb("ConditionalCheckFailedException")), StoreError::Conflict);
        assert_eq!(store_error(dynamodb("TransactionConflictException")), StoreError::Conflict);
        for refused in ["AccessDeniedException", "ValidationException", "ResourceNotFoundException"] {
            let e = store_error(dynamodb(refused));
            assert!(matches!(e, StoreError::Rejected(_)) && !e.is_retryable(), "{refused}: {e:?}");
        }
        for outage in ["ProvisionedThroughputExceededException", "ThrottlingException", "InternalServerError"]
        {
            let e = store_error(dynamodb(outage));
            assert!(matches!(e, StoreError::Unavailable(_)) && e.is_retryable(), "{outage}: {e:?}");
        }
    }

    #[test]
    fn refused_queue_requests_are_final_and_only_outages_are_retryable() {
        for refused in ["AWS.SimpleQueueService.NonExistentQueue", "InvalidMessageContents", "AccessDenied"] {
            let e = queue_error(sqs(refused));
            assert!(matches!(e, QueueError::Refused(_)) && !e.is_retryable(), "{refused}: {e:?}");
        }
        for outage in ["ThrottlingException", "RequestThrottled", "InternalError", "ServiceUnavailable"] {
            let e = queue_error(sqs(outage));
            assert!(matches!(e, QueueError::Unavailable(_)) && e.is_retryable(), "{outage}: {e:?}");
        }
    }

    #[test]
    fn refused_publishes_are_final_and_only_outages_are_retryable() {
        for refused in ["NotFound", "AuthorizationError", "InvalidParameter"] {
            let e = publish_error(sns(refused));
            assert!(matches!(e, PublishError::Refused(_)) && !e.is_retryable(), "{refused}: {e:?}");
        }
        for outage in ["Throttled", "InternalError", "ServiceUnavailable"] {
            let e = publish_error(sns(outage));
            assert!(matches!(e, PublishError::Unavailable(_)) && e.is_retryable(), "{outage}: {e:?}");
        }
    }

    #[test]
    fn bad_credentials_and_invalid_requests_are_refused_by_every_service() {
        for code in ["UnrecognizedClientException", "ValidationException", "InvalidClientTokenId"] {
            assert!(matches!(store_error(dynamodb(code)), StoreError::Rejected(_)), "{code}");
            assert!(matches!(queue_error(sqs(code)), QueueError::Refused(_)), "{code}");
            assert!(matches!(publish_error(sns(code)), PublishError::Refused(_)), "{code}");
        }
    }

    #[test]
    fn throttling_is_the_sdks_list_and_retryable() {
        for code in THROTTLING_ERRORS {
            let e = AwsError::of(&dynamodb(code));
            assert_eq!(e.fault, Fault::Throttled, "{code}");
            assert!(e.fault.is_retryable());
        }
        assert_eq!(AwsError::of(&sqs("InternalError")).fault, Fault::Unavailable);
    }

    #[test]
    fn a_request_that_could_not_be_built_is_rejected() {
        let err: SdkError<aws_sdk_sqs::operation::send_message::SendMessageError, Response> =
            SdkError::construction_failure("missing queue url");
        assert!(matches!(queue_error(err), QueueError::Refused(_)));
        let err: SdkError<aws_sdk_dynamodb::operation::get_item::GetItemError, Response> =
            SdkError::construction_failure("missing table name");
        assert!(matches!(store_error(err), StoreError::Rejected(_)));
    }

    #[test]
    fn topics_keep_the_code_and_message_and_are_unavailable() {
        let e = AwsError::of(&sns("NotFound"));
        assert!(e.is("NotFound") && !e.is("InvalidParameter"));
        assert_eq!(e.message.as_deref(), Some("m"));
        assert!(matches!(TopicError::from(e), TopicError::Unavailable(_)));
    }
}
