//! An ECS target: a cluster that matches the ECS allow-list, a task definition, and a network
//! and overrides RunTask accepts (an awsvpc network for FARGATE; overrides within ECS's 8 KiB).

use super::allowed;
use crate::arn::Arn;
use crate::job::{EcsNetwork, EcsOverrides, LaunchType};
use crate::limits::TargetAllowList;
use crate::validation::{Result, ValidationError};

/// RunTask's most subnets and security groups of an awsvpc network.
const MAX_SUBNETS: usize = 16;
const MAX_SECURITY_GROUPS: usize = 5;

/// Checks an ECS target's fields.
pub(super) fn validate(
    cluster: &str,
    task_definition: &str,
    launch_type: LaunchType,
    network: Option<&EcsNetwork>,
    overrides: Option<&EcsOverrides>,
    list: &TargetAllowList,
) -> Result<()> {
    if !named_or_arn(cluster, "cluster/", 255) {
        return Err(ValidationError::new(
            "target.cluster",
            format!(
                "`{cluster}` is neither a cluster name (1 to 255 letters, digits, - and _) nor a cluster ARN"
            ),
        ));
    }
    if !task_definition_ok(task_definition) {
        return Err(ValidationError::new(
            "target.task_definition",
            format!("`{task_definition}` is not a task definition (family, family:revision or its ARN)"),
        ));
    }
    match network {
        None if launch_type == LaunchType::Fargate => {
            return Err(ValidationError::new("target.network", "a FARGATE task needs its subnets"));
        }
        None => {}
        Some(network) => validate_network(network)?,
    }
    if let Some(overrides) = overrides {
        validate_overrides(overrides)?;
    }
    allowed(list, &list.ecs_clusters, "target.cluster", cluster, "SUNDIAL_ALLOWED_ECS_CLUSTERS")?;
    // Any task definition on an allowed cluster would run any code under that definition's role.
    let field = "target.task_definition";
    allowed(list, &list.ecs_task_definitions, field, task_definition, "SUNDIAL_ALLOWED_ECS_TASK_DEFINITIONS")
}

/// The most the run's context (its id, attempt, instant, job id and `traceparent`) adds to a
/// container's environment, beyond the payload.
const CONTEXT_ALLOWANCE: usize = 512;

/// `payload` in the container's environment keeps the overrides within ECS's bound; errors name
/// `payload`.
pub(super) fn payload_fits(overrides: &EcsOverrides, payload: &serde_json::Value) -> Result<()> {
    let mut environment: Vec<(String, String)> =
        overrides.environment.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    environment.push(("SUNDIAL_PAYLOAD".into(), payload.to_string()));
    let bytes =
        crate::limits::ecs_overrides_bytes(&overrides.container, overrides.command.as_deref(), &environment)
            + CONTEXT_ALLOWANCE;
    if bytes > crate::limits::MAX_ECS_OVERRIDES_BYTES {
        return Err(ValidationError::new(
            "payload",
            format!(
                "with the container's overrides it is about {bytes} bytes; ECS takes at most {} bytes of overrides, and the payload is passed in the container's environment (SUNDIAL_PAYLOAD)",
                crate::limits::MAX_ECS_OVERRIDES_BYTES
            ),
        ));
    }
    Ok(())
}

/// A name of 1 to `max` letters, digits, `-` and `_`, or an `ecs` ARN of that resource type.
fn named_or_arn(text: &str, prefix: &str, max: usize) -> bool {
    match Arn::parse(text, "ecs") {
        Some(arn) => arn.resource_named(prefix, max, crate::arn::word_char).is_some(),
        None => !text.starts_with("arn:") && name_ok(text, max),
    }
}

fn name_ok(text: &str, max: usize) -> bool {
    !text.is_empty()
        && text.len() <= max
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `family`, `family:revision` (a positive revision), or an ARN of one.
fn task_definition_ok(text: &str) -> bool {
    let resource = match Arn::parse(text, "ecs") {
        Some(arn) => match arn.resource.strip_prefix("task-definition/") {
            Some(resource) => resource,
            None => return false,
        },
        None if text.starts_with("arn:") => return false,
        None => text,
    };
    let (family, revision) = match resource.split_once(':') {
        Some((family, revision)) => (family, Some(revision)),
        None => (resource, None),
    };
    name_ok(family, 255)
        && revision.is_none_or(|r| r.parse::<u32>().is_ok_and(|n| n > 0) && !r.starts_with('+'))
}

fn validate_network(network: &EcsNetwork) -> Result<()> {
    let id = |text: &str, prefix: &str| {
        text.strip_prefix(prefix).is_some_and(|rest| {
            !rest.is_empty() && rest.len() <= 32 && rest.bytes().all(|b| b.is_ascii_hexdigit())
        })
    };
    if network.subnets.is_empty() || network.subnets.len() > MAX_SUBNETS {
        return Err(ValidationError::new(
            "target.network.subnets",
            format!("must list 1 to {MAX_SUBNETS} subnets"),
        ));
    }
    if let Some(bad) = network.subnets.iter().find(|s| !id(s, "subnet-")) {
        return Err(ValidationError::new(
            "target.network.subnets",
            format!("`{bad}` is not a subnet id (subnet-<hex>)"),
        ));
    }
    if network.security_groups.len() > MAX_SECURITY_GROUPS {
        return Err(ValidationError::new(
            "target.network.security_groups",
            format!("must list at most {MAX_SECURITY_GROUPS} security groups"),
        ));
    }
    if let Some(bad) = network.security_groups.iter().find(|s| !id(s, "sg-")) {
        return Err(ValidationError::new(
            "target.network.security_groups",
            format!("`{bad}` is not a security group id (sg-<hex>)"),
        ));
    }
    Ok(())
}

fn validate_overrides(overrides: &EcsOverrides) -> Result<()> {
    if !name_ok(&overrides.container, 255) {
        return Err(ValidationError::new(
            "target.overrides.container",
            "must be a container name: 1 to 255 letters, digits, - and _",
        ));
    }
    if overrides.command.as_ref().is_some_and(Vec::is_empty) {
        return Err(ValidationError::new(
            "target.overrides.command",
            "must not be empty (leave it out to keep the image's)",
        ));
    }
    if let Some(bad) = overrides.environment.keys().find(|k| k.starts_with("SUNDIAL_") || *k == "TRACEPARENT")
    {
        return Err(ValidationError::new(
            format!("target.overrides.environment.{bad}"),
            "is set by Sundial for each run",
        ));
    }
    if let Some(bad) = overrides.environment.keys().find(|k| !env_name_ok(k)) {
        return Err(ValidationError::new(
            "target.overrides.environment",
            format!(
                "`{bad}` is not an environment variable name (letters, digits and _, not starting with a digit)"
            ),
        ));
    }
    Ok(())
}

fn env_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
