//! An SQS target: an http(s) queue URL that matches the SQS allow-list.

use super::{allowed, http_url};
use crate::limits::TargetAllowList;
use crate::validation::Result;

/// Checks `target.queue_url`.
pub(super) fn validate(queue_url: &str, list: &TargetAllowList) -> Result<()> {
    http_url("target.queue_url", queue_url, false)?;
    allowed(list, &list.sqs, "target.queue_url", queue_url, "SUNDIAL_ALLOWED_SQS")
}
