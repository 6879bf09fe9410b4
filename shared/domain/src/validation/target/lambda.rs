//! A Lambda target: a function name or ARN that matches the Lambda allow-list.

use super::allowed;
use crate::limits::TargetAllowList;
use crate::validation::Result;

/// Checks `target.function`.
pub(super) fn validate(function: &str, list: &TargetAllowList) -> Result<()> {
    allowed(list, &list.lambda, "target.function", function, "SUNDIAL_ALLOWED_LAMBDA")
}
