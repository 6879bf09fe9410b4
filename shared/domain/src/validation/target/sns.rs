//! An SNS target: a topic ARN that matches the SNS allow-list.

use super::allowed;
use crate::limits::TargetAllowList;
use crate::validation::{Result, ValidationError};

/// Checks `target.topic_arn`.
pub(super) fn validate(topic_arn: &str, list: &TargetAllowList) -> Result<()> {
    if !topic_arn.starts_with("arn:") {
        return Err(ValidationError::new("target.topic_arn", format!("`{topic_arn}` is not an ARN")));
    }
    allowed(list, &list.sns, "target.topic_arn", topic_arn, "SUNDIAL_ALLOWED_SNS")
}
