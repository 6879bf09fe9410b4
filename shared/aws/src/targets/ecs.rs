//! An ECS target: a task per attempt (RunTask, its client token named after the run and the
//! attempt, so a repeated start starts one task), followed to its end by DescribeTasks
//! (succeeded when every essential container exits 0) and stopped by StopTask.

use super::{Targets, aws_failure};
use aws_sdk_ecs::types::{
    AssignPublicIp, AwsVpcConfiguration, ContainerOverride, KeyValuePair, LaunchType as EcsLaunchType,
    NetworkConfiguration, Tag, TaskOverride,
};
use sundial_domain::arn::Arn;
use sundial_domain::job::{EcsNetwork, EcsOverrides, LaunchType};
use sundial_domain::limits::{MAX_ECS_OVERRIDES_BYTES, ecs_overrides_bytes};
use sundial_domain::ports::targets::{Answer, Invocation, Progress};
use sundial_domain::run::Outcome;
use sundial_domain::run::transition::Ending;
use sundial_domain::target::{MAX_CLIENT_TOKEN, ecs_environment, truncate, work_name};

/// What an ECS target names.
pub(super) struct EcsTask<'a> {
    pub cluster: &'a str,
    pub task_definition: &'a str,
    pub launch_type: LaunchType,
    pub network: Option<&'a EcsNetwork>,
    pub overrides: Option<&'a EcsOverrides>,
}

impl Targets {
    /// Runs the attempt's task; the answer names it. A task ECS could not place was not started:
    /// `NotSent`.
    pub(super) async fn ecs(&self, inv: &Invocation<'_>, task: EcsTask<'_>) -> Answer {
        let mut run = self
            .ecs
            .run_task()
            .cluster(task.cluster)
            .task_definition(task.task_definition)
            .launch_type(match task.launch_type {
                LaunchType::Fargate => EcsLaunchType::Fargate,
                LaunchType::Ec2 => EcsLaunchType::Ec2,
            })
            .client_token(work_name(&inv.run_id, inv.attempt, MAX_CLIENT_TOKEN))
            .started_by("sundial")
            .tags(Tag::builder().key("sundial:run-id").value(&inv.run_id).build())
            .tags(Tag::builder().key("sundial:attempt").value(inv.attempt.to_string()).build());
        if let Some(network) = task.network {
            let vpc = AwsVpcConfiguration::builder()
                .set_subnets(Some(network.subnets.clone()))
                .set_security_groups(Some(network.security_groups.clone()))
                .assign_public_ip(if network.assign_public_ip {
                    AssignPublicIp::Enabled
                } else {
                    AssignPublicIp::Disabled
                })
                .build();
            match vpc {
                Ok(vpc) => {
                    run = run.network_configuration(
                        NetworkConfiguration::builder().awsvpc_configuration(vpc).build(),
                    )
                }
                Err(e) => {
                    return Answer::Failed {
                        retryable: false,
                        status: None,
                        error: truncate(&e.to_string()),
                    };
                }
            }
        }
        if let Some(overrides) = task.overrides {
            let environment = ecs_environment(inv, &overrides.environment);
            let bytes = ecs_overrides_bytes(&overrides.container, overrides.command.as_deref(), &environment);
            if bytes > MAX_ECS_OVERRIDES_BYTES {
                let error = format!(
                    "the container's overrides with this run's payload are {bytes} bytes; ECS takes at most {MAX_ECS_OVERRIDES_BYTES}"
                );
                return Answer::Failed { retryable: false, status: None, error };
            }
            let container = ContainerOverride::builder()
                .name(&overrides.container)
                .set_command(overrides.command.clone())
                .set_environment(Some(
                    environment
                        .into_iter()
                        .map(|(k, v)| KeyValuePair::builder().name(k).value(v).build())
                        .collect(),
                ))
                .build();
            run = run.overrides(TaskOverride::builder().container_overrides(container).build());
        }
        let out = match tokio::time::timeout(inv.timeout, run.send()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => {
                let permanent = e.as_service_error().is_some_and(|s| {
                    s.is_cluster_not_found_exception()
                        || s.is_invalid_parameter_exception()
                        || s.is_access_denied_exception()
                        || s.is_platform_unknown_exception()
                        || s.is_unsupported_feature_exception()
                });
                if permanent {
                    let error = truncate(&aws_sdk_ecs::error::DisplayErrorContext(&e).to_string());
                    return Answer::Failed { retryable: false, status: None, error };
                }
                return aws_failure(e);
            }
            Err(_) => return Answer::TimedOut,
        };
        match out.tasks().first().and_then(|t| t.task_arn()) {
            Some(arn) => Answer::Started { handle: arn.to_string() },
            None => {
                let reasons: Vec<String> = out
                    .failures()
                    .iter()
                    .map(|f| format!("{}: {}", f.reason().unwrap_or("?"), f.detail().unwrap_or("")))
                    .collect();
                Answer::NotSent { error: truncate(&format!("ECS placed no task: {}", reasons.join("; "))) }
            }
        }
    }

    /// Where the task `arn` stands.
    pub(super) async fn follow_task(&self, arn: &str) -> Progress {
        let Some(cluster) = cluster_of(arn) else {
            return Progress::Ended(
                Ending::new(Outcome::Failed).because(format!("`{arn}` is not a task ARN")),
            );
        };
        let described = match self.ecs.describe_tasks().cluster(cluster).tasks(arn).send().await {
            Ok(described) => described,
            Err(e) => {
                return Progress::Unknown(truncate(&aws_sdk_ecs::error::DisplayErrorContext(e).to_string()));
            }
        };
        let Some(task) = described.tasks().first() else {
            // MISSING: not (yet) known to ECS, which reads its own writes eventually.
            return Progress::Missing(format!("ECS knows no task {arn}"));
        };
        if task.last_status() != Some("STOPPED") {
            return Progress::Running;
        }
        let reason = task.stopped_reason().unwrap_or("");
        let definition = match task.task_definition_arn() {
            Some(definition) => self.containers(definition).await,
            None => None,
        };
        let essential = definition.as_ref().map(|d| d.essential.clone());
        let logs_url = definition.as_ref().and_then(|d| d.logs_url(arn));
        let exits: Vec<(String, Option<i32>)> =
            task.containers().iter().map(|c| (c.name().unwrap_or("?").to_string(), c.exit_code())).collect();
        // The essential containers decide (a sidecar stopped with the task exits 137 or 143); all
        // of them when the task definition could not be read.
        let decides = |name: &str| essential.as_ref().is_none_or(|names| names.iter().any(|n| n == name));
        let failed: Vec<String> = exits
            .iter()
            .filter(|(name, code)| decides(name) && *code != Some(0))
            .map(|(name, code)| match code {
                Some(code) => format!("{name} exited {code}"),
                None => format!("{name} never ran"),
            })
            .collect();
        let summary: Vec<String> = exits
            .iter()
            .map(|(name, code)| format!("{name}: {}", code.map_or("-".into(), |c| c.to_string())))
            .collect();
        let ending = if failed.is_empty() && !exits.is_empty() {
            Ending {
                output: Some(truncate(&format!("exit codes {}", summary.join(", ")))),
                ..Ending::new(Outcome::Succeeded)
            }
        } else {
            Ending::new(Outcome::Failed)
                .because(truncate(&format!("task STOPPED: {}; {reason}", failed.join(", "))))
        };
        Progress::Ended(Ending { logs_url, ..ending })
    }

    /// What the task definition `arn` says of its containers; `None` if it could not be read.
    async fn containers(&self, arn: &str) -> Option<Containers> {
        let definition = match self.ecs.describe_task_definition().task_definition(arn).send().await {
            Ok(described) => described.task_definition?,
            Err(e) => {
                let error = aws_sdk_ecs::error::DisplayErrorContext(e).to_string();
                tracing::warn!(task_definition = %arn, %error, "the task definition was not read; every container decides");
                return None;
            }
        };
        let containers = definition.container_definitions();
        // A container is essential unless it says otherwise.
        let essential = containers.iter().filter(|c| c.essential() != Some(false));
        let logs = essential.clone().find_map(|c| {
            let config = c.log_configuration().filter(|l| l.log_driver().as_str() == "awslogs")?;
            let options = config.options()?;
            Some(AwsLogs {
                container: c.name()?.to_string(),
                group: options.get("awslogs-group")?.clone(),
                region: options.get("awslogs-region").cloned(),
                prefix: options.get("awslogs-stream-prefix")?.clone(),
            })
        });
        Some(Containers { essential: essential.filter_map(|c| c.name().map(str::to_string)).collect(), logs })
    }

    /// Stops the task `arn`; one that has stopped already needs nothing.
    pub(super) async fn stop_task(&self, arn: &str, reason: &str) -> Result<(), String> {
        let cluster = cluster_of(arn).ok_or_else(|| format!("`{arn}` is not a task ARN"))?;
        // ECS takes a reason of at most 255 characters.
        let reason: String = reason.chars().take(255).collect();
        match self.ecs.stop_task().cluster(cluster).task(arn).reason(reason).send().await {
            Ok(_) => Ok(()),
            Err(e) => Err(truncate(&aws_sdk_ecs::error::DisplayErrorContext(e).to_string())),
        }
    }
}

/// What a task definition says of its containers.
struct Containers {
    /// The essential ones' names: they decide the task's success.
    essential: Vec<String>,
    /// Where the first essential container that logs to CloudWatch logs.
    logs: Option<AwsLogs>,
}

/// An `awslogs` log configuration: the task's stream is `<prefix>/<container>/<task id>`.
struct AwsLogs {
    container: String,
    group: String,
    region: Option<String>,
    prefix: String,
}

impl Containers {
    /// The console page of the log stream of the task `task_arn`, if its containers log to
    /// CloudWatch with a stream prefix.
    fn logs_url(&self, task_arn: &str) -> Option<String> {
        let logs = self.logs.as_ref()?;
        let arn = Arn::parse(task_arn, "ecs")?;
        let task_id = arn.resource.rsplit('/').next()?;
        let region = logs.region.as_deref().unwrap_or(arn.region);
        let stream = format!("{}/{}/{task_id}", logs.prefix, logs.container);
        // The console's own escaping: each name URL-encoded, its `%` written `$25`.
        let escape = |text: &str| {
            url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>().replace('%', "$25")
        };
        Some(format!(
            "https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#logsV2:log-groups/log-group/{}/log-events/{}",
            escape(&logs.group),
            escape(&stream)
        ))
    }
}

/// The cluster of a task ARN (`arn:…:ecs:<region>:<account>:task/<cluster>/<id>`).
fn cluster_of(task_arn: &str) -> Option<&str> {
    let arn = Arn::parse(task_arn, "ecs")?;
    let mut parts = arn.resource.strip_prefix("task/")?.split('/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(cluster), Some(_id), None) if !cluster.is_empty() => Some(cluster),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tasks_log_stream_is_linked_as_the_console_writes_it() {
        let containers = Containers {
            essential: vec!["app".into()],
            logs: Some(AwsLogs {
                container: "app".into(),
                group: "/ecs/report".into(),
                region: None,
                prefix: "report".into(),
            }),
        };
        assert_eq!(
            containers.logs_url("arn:aws:ecs:eu-west-1:123456789012:task/reports/0123abcd").as_deref(),
            Some(
                "https://eu-west-1.console.aws.amazon.com/cloudwatch/home?region=eu-west-1#logsV2:log-groups/log-group/$252Fecs$252Freport/log-events/report$252Fapp$252F0123abcd"
            )
        );
        assert_eq!(
            Containers { logs: None, ..containers }.logs_url("arn:aws:ecs:eu-west-1:123456789012:task/r/1"),
            None
        );
    }

    #[test]
    fn a_tasks_cluster_is_read_from_its_arn() {
        assert_eq!(cluster_of("arn:aws:ecs:us-east-1:123456789012:task/reports/0123abcd"), Some("reports"));
        assert_eq!(cluster_of("arn:aws:ecs:us-east-1:123456789012:task/0123abcd"), None, "the old form");
        assert_eq!(cluster_of("arn:aws:states:us-east-1:123456789012:task/reports/0123abcd"), None);
    }
}
