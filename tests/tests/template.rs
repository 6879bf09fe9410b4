//! `infra/template.yaml` declares what the code expects: table keys, indexes and TTL; the
//! environment every function reads; queue settings the worker relies on; the per-job topic
//! prefix the IAM policies are scoped to; the metric names the alarms watch; a sample event per
//! function. (That the local stack is built from the same file is `provision.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_yaml::Value;
use std::collections::HashMap;
use sundial_aws::dynamo::jobs::{BY_DUE_INDEX, BY_OWNER_INDEX};
use sundial_aws::dynamo::runs::IN_FLIGHT_INDEX;
use sundial_aws::provision::{KeyDef, TEMPLATE, Template};
use sundial_wiring::config::Config;

fn keys(pairs: &[(&str, &str)]) -> Vec<KeyDef> {
    pairs.iter().map(|(a, t)| KeyDef { attribute: a.to_string(), key_type: t.to_string() }).collect()
}

fn yaml() -> Value {
    serde_yaml::from_str(TEMPLATE).unwrap()
}

/// The `!Sub`, `!Ref` or plain text of a property, as written.
fn text(value: &Value) -> String {
    match value {
        Value::Tagged(t) => text(&t.value),
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// Tables: the keys, indexes (with their key attributes) and TTL the stores read and write.
#[test]
fn tables_match_what_the_stores_expect() {
    let template = Template::parse(TEMPLATE, "s").unwrap();
    let jobs = &template.tables["JobsTable"];
    assert_eq!(jobs.name, "s-jobs");
    assert_eq!(jobs.keys, keys(&[("job_id", "HASH")]));
    let index = |table: &sundial_aws::provision::TableDef, name: &str| {
        table.indexes.iter().find(|i| i.name == name).unwrap_or_else(|| panic!("{name} missing")).clone()
    };
    assert_eq!(index(jobs, BY_OWNER_INDEX).keys, keys(&[("owner", "HASH"), ("name", "RANGE")]));
    assert_eq!(index(jobs, BY_DUE_INDEX).keys, keys(&[("due_bucket", "HASH"), ("due_at", "RANGE")]));
    // The tick reads the jobs the due index names from the table: the index holds keys only,
    // so that an advance writes entries the size of the keys, not of the job.
    assert_eq!(index(jobs, BY_DUE_INDEX).projection, "KEYS_ONLY");
    assert_eq!(jobs.ttl_attribute, None);

    let runs = &template.tables["RunsTable"];
    assert_eq!(runs.keys, keys(&[("job_id", "HASH"), ("run_key", "RANGE")]));
    assert_eq!(
        index(runs, IN_FLIGHT_INDEX).keys,
        keys(&[("inflight_shard", "HASH"), ("inflight_at", "RANGE")])
    );
    assert_eq!(runs.ttl_attribute.as_deref(), Some("expires_at"));

    let idempotency = &template.tables["IdempotencyTable"];
    assert_eq!(idempotency.keys, keys(&[("idem_key", "HASH")]));
    assert_eq!(idempotency.ttl_attribute.as_deref(), Some("expires_at"));
    for table in template.tables.values() {
        for key in table.keys.iter().chain(table.indexes.iter().flat_map(|i| i.keys.iter())) {
            assert_eq!(
                table.attributes.get(&key.attribute).map(String::as_str),
                Some("S"),
                "{}",
                key.attribute
            );
        }
    }
}

/// Every variable the functions need is set by the template, and the configuration accepts the
/// values it sets (resource references stand in as placeholders).
#[test]
fn the_functions_environment_is_complete() {
    let doc = yaml();
    let globals = &doc["Globals"]["Function"]["Environment"]["Variables"];
    let mut names: Vec<String> =
        globals.as_mapping().unwrap().keys().map(|k| k.as_str().unwrap().to_string()).collect();
    let api = &doc["Resources"]["ApiFunction"]["Properties"]["Environment"]["Variables"];
    names.extend(api.as_mapping().unwrap().keys().map(|k| k.as_str().unwrap().to_string()));
    let values: HashMap<&str, &str> = names
        .iter()
        .map(|name| {
            let value = match name.as_str() {
                "SUNDIAL_DUE_SHARDS" => "8",
                "SUNDIAL_RETENTION_DAYS" => "30",
                "SUNDIAL_CAPACITY_LOG" => "0",
                "SUNDIAL_ALLOWED_NETWORKS" => "",
                "SUNDIAL_PAGE_TOKEN_KEY" => "a page token key of 32 bytes at least",
                "SUNDIAL_API_KEY_HASHES"
                | "SUNDIAL_OPERATORS"
                | "SUNDIAL_ALLOWED_LAMBDA"
                | "SUNDIAL_ALLOWED_SQS"
                | "SUNDIAL_ALLOWED_SNS"
                | "SUNDIAL_ALLOWED_STATE_MACHINES"
                | "SUNDIAL_ALLOWED_ECS_CLUSTERS"
                | "SUNDIAL_ALLOWED_ECS_TASK_DEFINITIONS"
                | "SUNDIAL_ALLOWED_EVENT_BUSES" => "",
                _ => "placeholder",
            };
            (name.as_str(), value)
        })
        .filter(|(_, v)| !v.is_empty())
        .collect();
    // Which variables must be set is the declaration's to say: see
    // `the_template_sets_the_declared_variables`.
    Config::from_vars(&values, None).expect("the template's variables configure every function");
}

/// The worker's timeout fits in the runs queue's visibility timeout, the DLQ receives only
/// poison messages (maxReceiveCount above the largest max_attempts), and both queues feed the
/// worker with partial batch responses.
#[test]
fn queues_fit_the_worker() {
    let doc = yaml();
    let template = Template::parse(TEMPLATE, "s").unwrap();
    let runs = &template.queues["RunsQueue"];
    let worker = &doc["Resources"]["WorkerFunction"]["Properties"];
    let timeout: u64 = worker["Timeout"].as_u64().unwrap();
    assert!(
        runs.visibility_timeout_s.unwrap() > timeout,
        "visibility timeout must exceed the worker's timeout"
    );
    let (dlq, receives) = runs.redrive.clone().unwrap();
    assert_eq!(dlq, "RunsDeadLetterQueue");
    assert!(receives > u64::from(sundial_domain::limits::Limits::default().max_attempts));
    for source in ["Runs", "DeadLetters"] {
        let event = &worker["Events"][source]["Properties"];
        assert_eq!(event["FunctionResponseTypes"][0].as_str(), Some("ReportBatchItemFailures"), "{source}");
    }
    // The worker tells the two queues apart by the DLQ's name.
    assert!(template.queues["RunsDeadLetterQueue"].name.ends_with("-dlq"));
}

/// The IAM rights over per-job topics are scoped to the prefix the code names them with.
#[test]
fn job_topic_rights_match_the_topic_names() {
    let names = sundial_aws::sns::topics::TopicNames::new("STACK", "arn:aws:sns:eu-west-1:1:STACK-events");
    assert!(names.name("JOB").starts_with("STACK-job-"));
    let doc = yaml();
    let statements = doc["Resources"]["ApiRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
        .as_sequence()
        .unwrap()
        .clone();
    let topics = statements.iter().find(|s| s["Sid"].as_str() == Some("JobTopics")).unwrap();
    assert!(text(&topics["Resource"]).ends_with(":${AWS::StackName}-job-*"), "{:?}", topics["Resource"]);
    assert_eq!(text(&doc["Resources"]["EventsTopic"]["Properties"]["TopicName"]), "${AWS::StackName}-events");
}

/// The alarms watch metrics the functions emit, in the namespace they emit them to.
#[test]
fn alarms_watch_emitted_metrics() {
    use sundial_app::emf::{NAMESPACE, names};
    let doc = yaml();
    let resources = doc["Resources"].as_mapping().unwrap();
    let mut custom = Vec::new();
    for (id, resource) in resources {
        if resource["Type"].as_str() == Some("AWS::CloudWatch::Alarm") {
            let props = &resource["Properties"];
            if props["Namespace"].as_str() == Some(NAMESPACE) {
                custom.push((
                    id.as_str().unwrap().to_string(),
                    props["MetricName"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    custom.sort();
    assert_eq!(
        custom,
        [
            ("DeadLetterQueueAlarm".to_string(), names::RUNS_DEAD_LETTERED.to_string()),
            ("SchedulerStalledAlarm".to_string(), names::SCHEDULER_MINUTES_BEHIND.to_string()),
            ("SlaMissedAlarm".to_string(), names::SLA_MISSED.to_string())
        ]
    );
}

/// No alarm watches the depth of a queue a function drains as an event source: messages there
/// are taken within seconds, so such an alarm could never fire.
#[test]
fn no_alarm_watches_a_queue_a_function_drains() {
    let doc = yaml();
    let resources = doc["Resources"].as_mapping().unwrap();
    // `!GetAtt Queue.Arn` or `!GetAtt Queue.QueueName`: the queue's logical id.
    let queue_of = |value: &Value| text(value).split('.').next().unwrap_or_default().to_string();
    let mut drained = Vec::new();
    for (_, resource) in resources {
        for (_, event) in resource["Properties"]["Events"].as_mapping().into_iter().flatten() {
            if event["Type"].as_str() == Some("SQS") {
                drained.push(queue_of(&event["Properties"]["Queue"]));
            }
        }
    }
    assert!(drained.contains(&"RunsDeadLetterQueue".to_string()), "{drained:?}");
    for (id, resource) in resources {
        let props = &resource["Properties"];
        if resource["Type"].as_str() != Some("AWS::CloudWatch::Alarm")
            || props["Namespace"].as_str() != Some("AWS/SQS")
        {
            continue;
        }
        for dimension in props["Dimensions"].as_sequence().into_iter().flatten() {
            let queue = queue_of(&dimension["Value"]);
            assert!(!drained.contains(&queue), "{id:?} watches {queue}, which a function drains");
        }
    }
}

/// Each function has its sample events, and the template names each function's build output.
#[test]
fn every_function_has_a_sample_event_and_a_build() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for sample in [
        "api-create-job.json",
        "tick-scheduled.json",
        "worker-sqs-batch.json",
        "worker-dlq-batch.json",
        "watchdog-scheduled.json",
    ] {
        assert!(root.join("events").join(sample).exists(), "events/{sample}");
    }
    let doc = yaml();
    for (id, crate_name) in [
        ("ApiFunction", "sundial-api"),
        ("TickFunction", "sundial-tick"),
        ("WorkerFunction", "sundial-worker"),
        ("WatchdogFunction", "sundial-watchdog"),
    ] {
        let props = &doc["Resources"][id]["Properties"];
        assert_eq!(text(&props["CodeUri"]), format!("../target/lambda/{crate_name}/"), "{id}");
        assert!(
            root.join("functions")
                .join(crate_name.trim_start_matches("sundial-"))
                .join("Cargo.toml")
                .exists()
        );
    }
}

/// The template sets only declared variables, and every variable a deployed function needs:
/// the functions' shared ones in `Globals`, the API's own on the API function itself.
#[test]
fn the_template_sets_the_declared_variables() {
    use sundial_wiring::variables::{Scope, VARIABLES, declared};
    let doc = yaml();
    let keys = |env: &Value| -> Vec<String> {
        env.as_mapping().into_iter().flatten().map(|(k, _)| k.as_str().unwrap().to_string()).collect()
    };
    let globals = keys(&doc["Globals"]["Function"]["Environment"]["Variables"]);
    let api = keys(&doc["Resources"]["ApiFunction"]["Properties"]["Environment"]["Variables"]);
    for (id, resource) in doc["Resources"].as_mapping().unwrap() {
        for name in keys(&resource["Properties"]["Environment"]["Variables"]).iter().chain(&globals) {
            if name.starts_with("SUNDIAL_") {
                assert!(declared(name).is_some(), "{id:?} sets {name}, which is not declared");
            }
        }
    }
    for variable in VARIABLES.iter().filter(|v| v.required_in_lambda) {
        let set = match variable.scope {
            Scope::Functions => globals.contains(&variable.name.to_string()),
            Scope::Api => api.contains(&variable.name.to_string()),
            Scope::Local | Scope::Cli => true,
        };
        assert!(set, "{} is required in Lambda and not set by the template", variable.name);
    }
}
