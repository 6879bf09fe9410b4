//! AWS resources a test's jobs target, made on the emulator: state machines, ECS clusters and
//! task definitions, and event buses with a rule routing their events to an SQS queue. Names
//! carry the prefixes the tests' allow-lists admit (`machine-`, `cluster-`, `bus-`).

use serde_json::{Value, json};

async fn sdk() -> aws_config::SdkConfig {
    sundial_wiring::config::aws_sdk_config().await
}

/// `<prefix>-<a new ULID>`.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", ulid::Ulid::generate().to_string().to_ascii_lowercase())
}

/// A state machine of one state (Amazon States Language), named `machine-…`; its ARN.
pub async fn state_machine(state: Value) -> String {
    let sfn = aws_sdk_sfn::Client::new(&sdk().await);
    let definition = json!({"StartAt": "Only", "States": {"Only": state}});
    let made = sfn
        .create_state_machine()
        .name(unique("machine"))
        .definition(definition.to_string())
        .role_arn("arn:aws:iam::000000000000:role/machine-role")
        .send()
        .await
        .unwrap();
    made.state_machine_arn
}

/// A cluster `cluster-…` and a task definition of one container, `app`, logging to CloudWatch
/// (group `/ecs/sundial-tests`, stream prefix `report`): (cluster, family).
pub async fn ecs_cluster_and_task() -> (String, String) {
    let ecs = aws_sdk_ecs::Client::new(&sdk().await);
    let cluster = unique("cluster");
    ecs.create_cluster().cluster_name(&cluster).send().await.unwrap();
    let family = unique("report");
    let container = aws_sdk_ecs::types::ContainerDefinition::builder()
        .name("app")
        .image("public.ecr.aws/docker/library/busybox:latest")
        .essential(true)
        .log_configuration(
            aws_sdk_ecs::types::LogConfiguration::builder()
                .log_driver(aws_sdk_ecs::types::LogDriver::Awslogs)
                .options("awslogs-group", "/ecs/sundial-tests")
                .options("awslogs-stream-prefix", "report")
                .build()
                .unwrap(),
        )
        .build();
    ecs.register_task_definition().family(&family).container_definitions(container).send().await.unwrap();
    (cluster, family)
}

/// A bus `bus-…` whose rule routes events of `source` and `detail_type` to the queue
/// `queue_arn`; the bus's ARN.
pub async fn event_bus_to(queue_arn: &str, source: &str, detail_type: &str) -> String {
    let events = aws_sdk_eventbridge::Client::new(&sdk().await);
    let bus = unique("bus");
    let bus_arn = events.create_event_bus().name(&bus).send().await.unwrap().event_bus_arn.unwrap();
    let pattern = json!({"source": [source], "detail-type": [detail_type]});
    let rule = unique("rule");
    events
        .put_rule()
        .name(&rule)
        .event_bus_name(&bus)
        .event_pattern(pattern.to_string())
        .send()
        .await
        .unwrap();
    let target = aws_sdk_eventbridge::types::Target::builder().id("inbox").arn(queue_arn).build().unwrap();
    events.put_targets().rule(&rule).event_bus_name(&bus).targets(target).send().await.unwrap();
    bus_arn
}
