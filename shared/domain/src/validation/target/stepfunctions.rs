//! A Step Functions target: a state machine ARN that matches the state-machine allow-list.

use super::allowed;
use crate::arn::{Arn, step_functions_name_char};
use crate::limits::TargetAllowList;
use crate::validation::{Result, ValidationError};

/// Checks `target.state_machine_arn`.
pub(super) fn validate(state_machine_arn: &str, list: &TargetAllowList) -> Result<()> {
    let field = "target.state_machine_arn";
    let arn = Arn::parse(state_machine_arn, "states");
    let qualified =
        arn.is_some_and(|arn| arn.resource.strip_prefix("stateMachine:").is_some_and(|r| r.contains(':')));
    if qualified {
        return Err(ValidationError::new(
            field,
            format!(
                "`{state_machine_arn}` names a version or an alias of a state machine; name the state machine itself"
            ),
        ));
    }
    let named = arn.and_then(|arn| arn.resource_named("stateMachine:", 80, step_functions_name_char));
    if named.is_none() {
        return Err(ValidationError::new(
            field,
            format!(
                "`{state_machine_arn}` is not a state machine ARN (arn:<partition>:states:<region>:<12-digit account>:stateMachine:<name>)"
            ),
        ));
    }
    allowed(list, &list.state_machines, field, state_machine_arn, "SUNDIAL_ALLOWED_STATE_MACHINES")
}
