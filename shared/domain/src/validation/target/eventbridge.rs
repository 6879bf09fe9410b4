//! An EventBridge target: a bus ARN that matches the event-bus allow-list, and the event's
//! `detail-type` and `source` as PutEvents accepts them.

use super::allowed;
use crate::arn::{Arn, word_char};
use crate::limits::TargetAllowList;
use crate::validation::{Result, ValidationError};

/// PutEvents' longest `DetailType`.
const MAX_DETAIL_TYPE: usize = 128;
/// PutEvents' longest `Source`.
const MAX_SOURCE: usize = 256;

/// Checks `target.event_bus_arn`, `target.detail_type` and `target.source`.
pub(super) fn validate(
    event_bus_arn: &str,
    detail_type: &str,
    source: &str,
    list: &TargetAllowList,
) -> Result<()> {
    let field = "target.event_bus_arn";
    let bus_char = |c: char| word_char(c) || c == '.' || c == '/';
    let named =
        Arn::parse(event_bus_arn, "events").and_then(|arn| arn.resource_named("event-bus/", 256, bus_char));
    if named.is_none() {
        return Err(ValidationError::new(
            field,
            format!(
                "`{event_bus_arn}` is not an event bus ARN (arn:<partition>:events:<region>:<12-digit account>:event-bus/<name>)"
            ),
        ));
    }
    let printable = |text: &str| text.chars().all(|c| !c.is_control());
    if detail_type.trim().is_empty() || detail_type.len() > MAX_DETAIL_TYPE || !printable(detail_type) {
        return Err(ValidationError::new(
            "target.detail_type",
            format!("must be 1 to {MAX_DETAIL_TYPE} printable characters"),
        ));
    }
    if source.trim().is_empty() || source.len() > MAX_SOURCE || !printable(source) {
        return Err(ValidationError::new(
            "target.source",
            format!("must be 1 to {MAX_SOURCE} printable characters"),
        ));
    }
    // EventBridge refuses an `aws.` source from anyone but AWS itself.
    if source.starts_with("aws.") {
        return Err(ValidationError::new("target.source", "must not start with `aws.` (AWS's own sources)"));
    }
    allowed(list, &list.event_buses, field, event_bus_arn, "SUNDIAL_ALLOWED_EVENT_BUSES")
}
