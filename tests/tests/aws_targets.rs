//! Targets that are AWS services, against the emulator's Step Functions, ECS and EventBridge:
//! a state machine's execution per attempt followed to its end (succeeded, failed, stopped at
//! the attempt's timeout, stopped by a cancel), a re-sent start that starts nothing twice; an ECS
//! task per attempt, tagged with its run, followed until it stops and stopped at the timeout; an
//! event put on a bus that reaches the SQS queue a rule routes it to. What only real AWS does
//! (a task's non-zero exit, the client token honoured) is checked on a loopback stand-in.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use sundial_domain::ports::targets::{Answer, Caller, Invocation, Progress};
use sundial_domain::run::{Outcome, RunState};
use sundial_tests::targets::{ecs_cluster_and_task, event_bus_to, state_machine};
use sundial_tests::{ALICE, Options, Stack};

/// A stack whose allow-lists admit the test's own state machines, clusters and buses.
async fn stack() -> Stack {
    let mut options = Options::default();
    options.vars.insert("SUNDIAL_ALLOWED_STATE_MACHINES", "arn:aws:states:*:*:stateMachine:machine-*".into());
    options.vars.insert("SUNDIAL_ALLOWED_ECS_CLUSTERS", "cluster-*".into());
    options.vars.insert("SUNDIAL_ALLOWED_ECS_TASK_DEFINITIONS", "report-*".into());
    options.vars.insert("SUNDIAL_ALLOWED_EVENT_BUSES", "arn:aws:events:*:*:event-bus/bus-*".into());
    Stack::with(options).await
}

async fn sdk() -> aws_config::SdkConfig {
    sundial_wiring::config::aws_sdk_config().await
}

/// Polls the runs queue until run `id`'s first attempt has started its work; the work's ARN.
async fn started_work(stack: &Stack, id: &sundial_domain::run::RunId) -> String {
    let worker = &stack.services.use_cases.worker;
    let (queue, inbox) = (stack.services.ports.queue.as_ref(), stack.services.inbox.as_ref());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(handle) = stack.run(id).await.attempts.first().and_then(|a| a.handle.clone()) {
            return handle;
        }
        sundial_app::worker::poll::poll_once(worker, queue, inbox, "test-worker", 1).await.unwrap();
        assert!(std::time::Instant::now() < deadline, "the work never started");
    }
}

fn job(name: &str, target: Value, extra: Value) -> Value {
    let mut job = json!({
        "name": name,
        "schedule": {"cron": "0 0 1 1 *"},
        "target": target,
        "payload": {"report": "daily"},
        "retry": {"max_attempts": 1},
        "timeout_s": 120
    });
    for (k, v) in extra.as_object().unwrap() {
        job[k] = v.clone();
    }
    job
}

async fn executions(machine: &str) -> Vec<aws_sdk_sfn::types::ExecutionListItem> {
    let sfn = aws_sdk_sfn::Client::new(&sdk().await);
    sfn.list_executions().state_machine_arn(machine).send().await.unwrap().executions
}

async fn describe(execution: &str) -> aws_sdk_sfn::operation::describe_execution::DescribeExecutionOutput {
    let sfn = aws_sdk_sfn::Client::new(&sdk().await);
    sfn.describe_execution().execution_arn(execution).send().await.unwrap()
}

/// A state machine job whose execution succeeds: the run follows it to SUCCEEDED, with the
/// execution's output, its ARN on the attempt, and the run's envelope as the execution's input.
#[tokio::test]
async fn a_state_machine_job_follows_its_execution_to_success() {
    let stack = stack().await;
    let machine = state_machine(json!({"Type": "Pass", "Result": {"rows": 42}, "End": true})).await;
    let target = json!({"type": "stepfunctions", "state_machine_arn": machine});
    let id = stack.api.create_job(ALICE, &job("sfn-ok", target, json!({}))).await;
    let run_id = stack.trigger(&id).await;
    let done = stack.drive(&stack.services.use_cases.worker, &run_id, 60).await;
    assert_eq!(done.state, RunState::Succeeded, "{done:?}");
    let attempt = &done.attempts[0];
    let execution = attempt.handle.clone().expect("the attempt names its execution");
    assert!(execution.contains(":execution:"), "{execution}");
    assert!(attempt.looks >= 1, "followed by at least one look");
    assert_eq!(
        serde_json::from_str::<Value>(attempt.output.as_deref().unwrap()).unwrap(),
        json!({"rows": 42})
    );
    let described = describe(&execution).await;
    let input: Value = serde_json::from_str(described.input().unwrap()).unwrap();
    assert_eq!(input["run_id"], run_id.to_string());
    assert_eq!(input["attempt"], 1);
    assert_eq!(input["payload"], json!({"report": "daily"}));
    assert!(input["traceparent"].as_str().unwrap().starts_with("00-"));
    // Shown by the API as the run's attempt.
    let shown = stack.api.get(ALICE, &format!("/v1/runs/{run_id}")).await;
    assert_eq!(shown.body["attempts"][0]["handle"], execution.as_str());
}

/// A state machine that fails, retried once: two executions, one per attempt (named apart),
/// and the run FAILED with the execution's error and cause.
#[tokio::test]
async fn a_failing_execution_fails_the_attempt_and_each_retry_starts_its_own() {
    let stack = stack().await;
    let machine = state_machine(json!({"Type": "Fail", "Error": "ReportBroken", "Cause": "no rows"})).await;
    let target = json!({"type": "stepfunctions", "state_machine_arn": machine, "input": "payload"});
    let retry = json!({"retry": {"max_attempts": 2, "backoff_s": 1, "max_backoff_s": 1}});
    let id = stack.api.create_job(ALICE, &job("sfn-fail", target, retry)).await;
    let run_id = stack.trigger(&id).await;
    let done = stack.drive(&stack.services.use_cases.worker, &run_id, 90).await;
    assert_eq!(done.state, RunState::Failed, "{done:?}");
    assert_eq!(done.attempts.len(), 2);
    for attempt in &done.attempts {
        assert_eq!(attempt.outcome, Some(Outcome::Failed));
        let error = attempt.error.as_deref().unwrap();
        assert!(error.contains("ReportBroken") && error.contains("no rows"), "{error}");
    }
    assert_ne!(done.attempts[0].handle, done.attempts[1].handle);
    assert_eq!(executions(&machine).await.len(), 2);
    // `input: payload`: the execution received the payload alone.
    let described = describe(done.attempts[0].handle.as_deref().unwrap()).await;
    assert_eq!(
        serde_json::from_str::<Value>(described.input().unwrap()).unwrap(),
        json!({"report": "daily"})
    );
}

/// An execution still running at the attempt's timeout is stopped there, and the run is
/// TIMED_OUT.
#[tokio::test]
async fn an_execution_past_the_timeout_is_stopped() {
    let stack = stack().await;
    let machine = state_machine(json!({"Type": "Wait", "Seconds": 600, "End": true})).await;
    let target = json!({"type": "stepfunctions", "state_machine_arn": machine});
    let id = stack.api.create_job(ALICE, &job("sfn-slow", target, json!({"timeout_s": 4}))).await;
    let run_id = stack.trigger(&id).await;
    let done = stack.drive(&stack.services.use_cases.worker, &run_id, 60).await;
    assert_eq!(done.state, RunState::TimedOut, "{done:?}");
    let attempt = &done.attempts[0];
    assert!(attempt.error.as_deref().unwrap().contains("the work was stopped"), "{attempt:?}");
    let described = describe(attempt.handle.as_deref().unwrap()).await;
    assert_eq!(described.status(), &aws_sdk_sfn::types::ExecutionStatus::Aborted);
}

/// A cancel of a run whose execution is running stops the execution at the next look.
#[tokio::test]
async fn a_cancelled_run_has_its_execution_stopped() {
    let stack = stack().await;
    let machine = state_machine(json!({"Type": "Wait", "Seconds": 600, "End": true})).await;
    let target = json!({"type": "stepfunctions", "state_machine_arn": machine});
    let id = stack.api.create_job(ALICE, &job("sfn-cancel", target, json!({}))).await;
    let run_id = stack.trigger(&id).await;
    let worker = &stack.services.use_cases.worker;
    let (queue, inbox) = (stack.services.ports.queue.as_ref(), stack.services.inbox.as_ref());
    let execution = started_work(&stack, &run_id).await;
    let cancel = sundial_tests::Call::new(http::Method::POST, format!("/v1/runs/{run_id}/cancel")).key(ALICE);
    assert_eq!(stack.api.call(cancel).await.status, http::StatusCode::OK);
    // The next look finds the attempt cancelled and stops its execution.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        sundial_app::worker::poll::poll_once(worker, queue, inbox, "test-worker", 1).await.unwrap();
        if describe(&execution).await.status() == &aws_sdk_sfn::types::ExecutionStatus::Aborted {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the cancelled run's execution still runs");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(stack.run(&run_id).await.state, RunState::Cancelled);
}

/// One attempt's start sent twice (an SDK retry after a lost answer, a worker's repeat) names
/// one execution and starts it once.
#[tokio::test]
async fn a_resent_start_does_not_start_a_second_execution() {
    let stack = stack().await;
    let machine = state_machine(json!({"Type": "Wait", "Seconds": 600, "End": true})).await;
    let target = json!({"type": "stepfunctions", "state_machine_arn": machine});
    let id = stack.api.create_job(ALICE, &job("sfn-twice", target, json!({}))).await;
    let job = stack
        .services
        .ports
        .jobs
        .get(&sundial_domain::job::JobId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    let now = chrono::Utc::now();
    let invocation = Invocation {
        job: &job,
        payload: json!({"report": "daily"}),
        run_id: format!("{id}.20300101T000000Z.s"),
        attempt: 1,
        scheduled_at: now,
        callback_token: "t".into(),
        timeout: std::time::Duration::from_secs(10),
        sent_at: now,
    };
    let caller = sundial_aws::targets::Targets::new(stack.targets.clone(), stack.config.targets.clone());
    let first = caller.call(&invocation).await;
    let again = caller.call(&invocation).await;
    let Answer::Started { handle } = &first else { panic!("{first:?}") };
    assert_eq!(again, first, "the same execution, named after the run and attempt");
    assert_eq!(executions(&machine).await.len(), 1);
    assert_eq!(caller.follow(handle).await, Progress::Running);
    caller.stop(handle, "test over").await.unwrap();
    caller.stop(handle, "twice is harmless").await.unwrap();
}

/// An ECS job: a task per attempt, tagged with its run, followed while it runs, succeeded when
/// it stops with every container at exit 0; and one stopped at its timeout.
#[tokio::test]
async fn an_ecs_job_runs_one_task_per_attempt_followed_until_it_stops() {
    let stack = stack().await;
    let ecs = aws_sdk_ecs::Client::new(&sdk().await);
    let (cluster, family) = ecs_cluster_and_task().await;
    let target = json!({
        "type": "ecs", "cluster": cluster, "task_definition": family,
        "network": {"subnets": ["subnet-0a1b2c"], "security_groups": ["sg-0a1b"]},
        "overrides": {"container": "app", "command": ["report"], "environment": {"MODE": "full"}}
    });
    let id = stack.api.create_job(ALICE, &job("ecs-ok", target.clone(), json!({}))).await;
    let run_id = stack.trigger(&id).await;
    let worker = &stack.services.use_cases.worker;
    let (queue, inbox) = (stack.services.ports.queue.as_ref(), stack.services.inbox.as_ref());
    let task_arn = started_work(&stack, &run_id).await;
    let tasks = ecs.list_tasks().cluster(&cluster).send().await.unwrap();
    assert_eq!(tasks.task_arns(), std::slice::from_ref(&task_arn), "one task for the attempt");
    let described = ecs
        .describe_tasks()
        .cluster(&cluster)
        .tasks(&task_arn)
        .include(aws_sdk_ecs::types::TaskField::Tags)
        .send()
        .await
        .unwrap();
    let task = &described.tasks()[0];
    let tags: Vec<(String, String)> =
        task.tags().iter().map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string())).collect();
    assert!(tags.contains(&("sundial:run-id".into(), run_id.to_string())), "{tags:?}");
    assert_eq!(task.started_by(), Some("sundial"));
    // Still running: looked at, and the run stays RUNNING.
    for _ in 0..3 {
        sundial_app::worker::poll::poll_once(worker, queue, inbox, "test-worker", 1).await.unwrap();
    }
    assert_eq!(stack.run(&run_id).await.state, RunState::Running);
    // The container finishes (the emulator stops it with exit code 0).
    ecs.stop_task().cluster(&cluster).task(&task_arn).send().await.unwrap();
    let done = stack.drive(worker, &run_id, 90).await;
    assert_eq!(done.state, RunState::Succeeded, "{done:?}");
    assert!(done.attempts[0].output.as_deref().unwrap().contains("app: 0"));
    let logs = done.attempts[0].logs_url.clone().unwrap_or_default();
    let task_id = task_arn.rsplit('/').next().unwrap();
    assert!(logs.ends_with(&format!("log-events/report$252Fapp$252F{task_id}")), "{logs}");

    // Past its timeout, the task is stopped and the run TIMED_OUT.
    let slow = stack.api.create_job(ALICE, &job("ecs-slow", target, json!({"timeout_s": 4}))).await;
    let run_id = stack.trigger(&slow).await;
    let done = stack.drive(worker, &run_id, 60).await;
    assert_eq!(done.state, RunState::TimedOut, "{done:?}");
    let task_arn = done.attempts[0].handle.clone().unwrap();
    let described = ecs.describe_tasks().cluster(&cluster).tasks(&task_arn).send().await.unwrap();
    assert_eq!(described.tasks()[0].last_status(), Some("STOPPED"));
}

/// An EventBridge job: its event, the run's envelope as detail, reaches the queue a rule on the
/// bus routes it to; the attempt's output is the event's id.
#[tokio::test]
async fn an_eventbridge_job_puts_its_event_where_a_rule_routes_it() {
    let stack = stack().await;
    let (queue_url, queue_arn) = stack.new_queue("events").await;
    let bus_arn = event_bus_to(&queue_arn, "acme.reports", "report due").await;
    let target = json!({"type": "eventbridge", "event_bus_arn": bus_arn, "detail_type": "report due", "source": "acme.reports"});
    let id = stack.api.create_job(ALICE, &job("events", target, json!({}))).await;
    let run_id = stack.trigger(&id).await;
    let done = stack.drive(&stack.services.use_cases.worker, &run_id, 60).await;
    assert_eq!(done.state, RunState::Succeeded, "{done:?}");
    let event_id = done.attempts[0].output.clone().unwrap();
    let received =
        stack.sqs.receive_message().queue_url(&queue_url).wait_time_seconds(5).send().await.unwrap();
    let messages = received.messages();
    assert_eq!(messages.len(), 1);
    let event: Value = serde_json::from_str(messages[0].body().unwrap()).unwrap();
    assert_eq!(event["id"], event_id.as_str());
    assert_eq!(
        (event["source"].as_str(), event["detail-type"].as_str()),
        (Some("acme.reports"), Some("report due"))
    );
    assert_eq!(event["detail"]["run_id"], run_id.to_string());
    assert_eq!(event["detail"]["payload"], json!({"report": "daily"}));
}

// -------------------------------------------------------------------------------------------------
// What the emulator does not do: a loopback stand-in for ECS.
// -------------------------------------------------------------------------------------------------

/// A loopback stand-in for ECS's JSON API: records each request's body, answers RunTask with a
/// task and DescribeTasks with `described`.
async fn ecs_stand_in(described: Value) -> (String, Arc<Mutex<Vec<(String, Value)>>>) {
    let seen: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |headers: http::HeaderMap, body: axum::body::Bytes| {
        let (log, described) = (log.clone(), described.clone());
        async move {
            let operation = headers
                .get("x-amz-target")
                .and_then(|v| v.to_str().ok())
                .and_then(|t| t.rsplit('.').next())
                .unwrap_or_default()
                .to_string();
            let body: Value = serde_json::from_slice(&body).unwrap_or_default();
            log.lock().unwrap().push((operation.clone(), body));
            let answer = match operation.as_str() {
                "RunTask" => json!({"tasks": [{"taskArn": "arn:aws:ecs:us-east-1:123456789012:task/cluster-a/0123abcd"}], "failures": []}),
                "DescribeTasks" => described,
                "DescribeTaskDefinition" => json!({"taskDefinition": {"containerDefinitions": [
                    {"name": "app", "essential": true, "logConfiguration": {"logDriver": "awslogs",
                        "options": {"awslogs-group": "/ecs/report", "awslogs-stream-prefix": "report"}}},
                    {"name": "sidecar", "essential": false}
                ]}}),
                _ => json!({}),
            };
            http::Response::builder()
                .status(200)
                .header("content-type", "application/x-amz-json-1.1")
                .body(axum::body::Body::from(answer.to_string()))
                .unwrap()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

async fn stand_in_targets(endpoint: &str) -> sundial_aws::targets::Targets {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(sundial_wiring::config::aws_https_client())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new("id", "secret", None, None, "test"))
        .load()
        .await;
    let clients =
        sundial_aws::metrics::TargetClients::at(&sdk, sundial_aws::metrics::Ledger::new(), endpoint);
    let allow = sundial_domain::limits::TargetAllowList {
        ecs_clusters: vec!["*".into()],
        ecs_task_definitions: vec!["*".into()],
        ..Default::default()
    };
    sundial_aws::targets::Targets::new(clients, allow)
}

fn ecs_job(overrides: Value) -> sundial_domain::job::Job {
    let target = json!({"type": "ecs", "cluster": "cluster-a", "task_definition": "report:1", "launch_type": "EC2", "overrides": overrides});
    sundial_tests::stored_job(json!({"name": "ecs", "target": target}))
}

fn invocation(job: &sundial_domain::job::Job, attempt: u32, payload: Value) -> Invocation<'_> {
    let now = chrono::Utc::now();
    Invocation {
        job,
        payload,
        run_id: format!("{}.20300101T000000Z.s", job.id),
        attempt,
        scheduled_at: now,
        callback_token: "t".into(),
        timeout: std::time::Duration::from_secs(10),
        sent_at: now,
    }
}

/// RunTask carries the attempt's client token (the same on a re-send, another per attempt),
/// the run's context in the named container's environment, and the run's tags; a task that
/// stopped with a container's non-zero exit fails the attempt, naming the container and code.
#[tokio::test]
async fn ecs_starts_carry_the_attempts_token_and_a_nonzero_exit_fails() {
    let stopped = json!({"tasks": [{
        "taskArn": "arn:aws:ecs:us-east-1:123456789012:task/cluster-a/0123abcd",
        "lastStatus": "STOPPED",
        "stoppedReason": "Essential container in task exited",
        "containers": [{"name": "app", "exitCode": 3}, {"name": "sidecar", "exitCode": 0}]
    }], "failures": []});
    let (endpoint, seen) = ecs_stand_in(stopped).await;
    let targets = stand_in_targets(&endpoint).await;
    let job = ecs_job(json!({"container": "app", "environment": {"MODE": "full"}}));
    for attempt in [1, 1, 2] {
        let answer = targets.call(&invocation(&job, attempt, json!({"n": 1}))).await;
        assert!(matches!(answer, Answer::Started { .. }), "{answer:?}");
    }
    let starts: Vec<Value> =
        seen.lock().unwrap().iter().filter(|(op, _)| op == "RunTask").map(|(_, body)| body.clone()).collect();
    assert_eq!(starts.len(), 3, "the stand-in answers at once: nothing repeated by the SDK");
    let token = |i: usize| starts[i]["clientToken"].as_str().unwrap().to_string();
    assert_eq!(token(0), token(1), "a re-sent start of one attempt carries its token");
    assert_ne!(token(0), token(2), "each attempt its own");
    assert!(token(0).len() <= 64);
    let environment = &starts[0]["overrides"]["containerOverrides"][0];
    assert_eq!(environment["name"], "app");
    let vars: std::collections::BTreeMap<String, String> = environment["environment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|kv| (kv["name"].as_str().unwrap().to_string(), kv["value"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(vars["SUNDIAL_RUN_ID"], format!("{}.20300101T000000Z.s", job.id));
    assert_eq!(vars["SUNDIAL_ATTEMPT"], "1");
    assert_eq!(vars["SUNDIAL_PAYLOAD"], r#"{"n":1}"#);
    assert_eq!(vars["MODE"], "full");
    assert!(vars["TRACEPARENT"].starts_with("00-"));
    assert!(starts[0]["tags"].as_array().unwrap().iter().any(|t| t["key"] == "sundial:run-id"));

    let progress = targets.follow("arn:aws:ecs:us-east-1:123456789012:task/cluster-a/0123abcd").await;
    let Progress::Ended(ending) = progress else { panic!("{progress:?}") };
    assert_eq!(ending.outcome, Outcome::Failed);
    let error = ending.error.unwrap();
    assert!(error.contains("app exited 3") && !error.contains("sidecar exited"), "{error}");
}

/// Only the essential containers decide: a task whose essential container exited 0 succeeded,
/// though its sidecar was killed when the task stopped (137).
#[tokio::test]
async fn an_ecs_task_succeeds_by_its_essential_containers() {
    let stopped = json!({"tasks": [{
        "taskArn": "arn:aws:ecs:us-east-1:123456789012:task/cluster-a/0123abcd",
        "taskDefinitionArn": "arn:aws:ecs:us-east-1:123456789012:task-definition/report:1",
        "lastStatus": "STOPPED",
        "stopCode": "EssentialContainerExited",
        "containers": [{"name": "app", "exitCode": 0}, {"name": "sidecar", "exitCode": 137}]
    }], "failures": []});
    let (endpoint, seen) = ecs_stand_in(stopped).await;
    let targets = stand_in_targets(&endpoint).await;
    let progress = targets.follow("arn:aws:ecs:us-east-1:123456789012:task/cluster-a/0123abcd").await;
    let Progress::Ended(ending) = progress else { panic!("{progress:?}") };
    assert_eq!(ending.outcome, Outcome::Succeeded, "{ending:?}");
    assert!(seen.lock().unwrap().iter().any(|(op, _)| op == "DescribeTaskDefinition"));
    // Its log stream, linked: `<prefix>/<container>/<task id>` in the group its container names.
    let logs = ending.logs_url.unwrap_or_default();
    assert!(logs.starts_with("https://us-east-1.console.aws.amazon.com/cloudwatch/"), "{logs}");
    assert!(logs.ends_with("log-group/$252Fecs$252Freport/log-events/report$252Fapp$252F0123abcd"), "{logs}");
    // A task ECS does not know (yet) is missing, not failed: the worker looks again within a
    // grace after the start.
    let (endpoint, _) = ecs_stand_in(json!({"tasks": [], "failures": [{"reason": "MISSING"}]})).await;
    let task = "arn:aws:ecs:us-east-1:123456789012:task/cluster-a/0123abcd";
    let progress = stand_in_targets(&endpoint).await.follow(task).await;
    assert!(matches!(progress, Progress::Missing(_)), "{progress:?}");
}

/// ECS's bound on overrides (8 KiB, which only real AWS enforces): a run whose payload would
/// cross it fails permanently before anything is sent.
#[tokio::test]
async fn an_ecs_payload_past_the_overrides_bound_is_refused_before_sending() {
    let (endpoint, seen) = ecs_stand_in(json!({})).await;
    let targets = stand_in_targets(&endpoint).await;
    let job = ecs_job(json!({"container": "app"}));
    let big = json!({"blob": "x".repeat(sundial_domain::limits::MAX_ECS_OVERRIDES_BYTES)});
    let answer = targets.call(&invocation(&job, 1, big)).await;
    let Answer::Failed { retryable: false, error, .. } = answer else { panic!("{answer:?}") };
    assert!(error.contains("8192"), "{error}");
    assert!(seen.lock().unwrap().is_empty(), "nothing was sent");
}
