//! Where a job's HTTP target may point. One tenant used to read another's data by aiming a job
//! at the AWS endpoint (an emulator, or in Lambda the Runtime API and the metadata service) and
//! reading the stored response: Sundial's own endpoints and inside addresses are refused at
//! create, and a name that resolves to one is refused when the attempt calls it, for good.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use async_trait::async_trait;
use http::StatusCode;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use sundial_app::worker::{Worker, WorkerSettings};
use sundial_aws::targets::Targets;
use sundial_aws::targets::outbound::Lookup;
use sundial_domain::run::{RunId, RunState};
use sundial_tests::{ALICE, Answer, BOB, Options, Stack, TargetServer};

fn endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL").expect("scripts/test sets AWS_ENDPOINT_URL")
}

/// Bob's job: a DynamoDB Scan of the jobs table, sent straight to the AWS endpoint.
fn scan_job(stack: &Stack, url: &str) -> Value {
    json!({
        "name": format!("scan-{}", ulid::Ulid::generate().to_string().to_ascii_lowercase()),
        "target": {"type": "http", "url": url, "method": "POST",
                   "headers": {"X-Amz-Target": "DynamoDB_20120810.Scan"}},
        "payload": {"TableName": stack.resources.jobs_table},
        "retry": {"max_attempts": 3, "backoff_s": 1},
    })
}

/// Names of the test's own, each resolving to one address.
#[derive(Debug)]
struct Names(HashMap<String, IpAddr>);

#[async_trait]
impl Lookup for Names {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        self.0
            .get(host)
            .map(|ip| vec![*ip])
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such name"))
    }
}

/// A worker whose targets resolve `names` and obey `stack`'s policy, or `policy` when given.
fn worker(stack: &Stack, names: &[(&str, &str)], policy: Option<&Stack>) -> Worker {
    let s = &stack.services;
    let names = Names(names.iter().map(|(n, ip)| (n.to_string(), ip.parse().unwrap())).collect());
    let allow = policy.map_or_else(|| s.config.targets.clone(), |p| p.config.targets.clone());
    let caller = Arc::new(Targets::with_lookup(stack.targets.clone(), allow, Arc::new(names)));
    stack.worker_with(
        caller,
        WorkerSettings { heartbeat_window: s.config.heartbeat_window, ..WorkerSettings::default() },
    )
}

#[tokio::test]
async fn a_job_cannot_read_another_tenants_data_through_the_aws_endpoint() {
    let stack = Stack::new().await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let secret = format!("alice-secret-{}", ulid::Ulid::generate());
    let alice = json!({"name": secret, "schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": target.url}});
    stack.api.create_job(ALICE, &alice).await;

    let aws = url::Url::parse(&endpoint()).unwrap();
    let port = aws.port_or_known_default().unwrap();
    // The endpoint as configured, and other spellings of the same address and port.
    for url in [
        endpoint(),
        format!("http://localhost:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
    ] {
        let reply = stack.api.post(BOB, "/v1/jobs", &scan_job(&stack, &url)).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {}", reply.body);
        assert_eq!(reply.body["error"]["field"], "target.url", "{url}: {}", reply.body);
        assert!(
            reply.body["error"]["message"].as_str().unwrap().contains("own endpoints"),
            "{url}: {}",
            reply.body
        );
    }
    let jobs = stack.api.get(BOB, "/v1/jobs").await;
    assert_eq!(jobs.status, StatusCode::OK);
    assert_eq!(jobs.body["jobs"].as_array().map(Vec::len), Some(0), "nothing was written: {}", jobs.body);

    // A name is not resolved at create; it is when the attempt calls it, and the attempt fails
    // for good, without a retry and without reaching the endpoint.
    let url = format!("http://aws.test:{port}/");
    let id = stack.api.create_job(BOB, &scan_job(&stack, &url)).await;
    let reply = stack.api.post(BOB, &format!("/v1/jobs/{id}/trigger"), &json!({})).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.body);
    let run_id = RunId::parse(reply.body["id"].as_str().unwrap()).unwrap();
    let run = stack.drive(&worker(&stack, &[("aws.test", "127.0.0.1")], None), &run_id, 60).await;
    assert_eq!(run.state, RunState::Failed, "{run:?}");
    assert_eq!(run.attempts.len(), 1, "a refusal is not retried: {run:?}");
    let error = run.attempts[0].error.clone().unwrap_or_default();
    assert!(error.contains("own endpoints"), "{error}");
    assert!(!format!("{run:?}").contains(&secret), "Alice's job leaked into Bob's run");
}

#[tokio::test]
async fn loopback_is_refused_unless_the_deployment_allows_it() {
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let open = Stack::new().await; // the tests' default, as the local runtime's: loopback allowed
    let closed = Stack::with(Options {
        vars: HashMap::from([("SUNDIAL_ALLOWED_NETWORKS", "192.0.2.0/24".to_string())]),
        clock: None,
    })
    .await;
    let job = json!({"name": "local", "schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": target.url},
                     "retry": {"max_attempts": 3, "backoff_s": 1}});

    let reply = closed.api.post(ALICE, "/v1/jobs", &job).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", reply.body);
    assert_eq!(reply.body["error"]["field"], "target.url");
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("loopback"), "{}", reply.body);

    // Allowed where it was created, refused by a worker whose deployment does not allow it:
    // the call-time check is the one that holds.
    let id = open.api.create_job(ALICE, &job).await;
    let run_id = open.trigger(&id).await;
    let run = open.drive(&worker(&open, &[], Some(&closed)), &run_id, 60).await;
    assert_eq!(run.state, RunState::Failed, "{run:?}");
    assert_eq!(run.attempts.len(), 1, "{run:?}");
    assert!(run.attempts[0].error.clone().unwrap_or_default().contains("loopback"), "{run:?}");
    assert!(target.hits().is_empty(), "the target was called");

    // Where the deployment allows it, the same job runs.
    let run_id = open.trigger(&id).await;
    let run = open.drive(&worker(&open, &[], None), &run_id, 60).await;
    assert_eq!(run.state, RunState::Succeeded, "{run:?}");
    assert_eq!(target.hits().len(), 1);
}

#[tokio::test]
async fn a_name_resolving_inside_is_refused_when_called_whatever_its_class() {
    let stack = Stack::new().await;
    let names = [
        ("private.test", "10.0.0.7"),
        ("link.test", "169.254.3.4"),
        ("cgnat.test", "100.64.0.9"),
        ("metadata.test", "169.254.169.254"),
        ("credentials.test", "169.254.170.2"),
        ("v6-private.test", "fd12::1"),
        ("mapped.test", "::ffff:10.0.0.7"),
    ];
    let worker = worker(&stack, &names, None);
    for (name, ip) in names {
        let job = json!({"name": format!("to-{}", name.replace('.', "-")), "schedule": {"cron": "0 0 1 1 *"},
                         "target": {"type": "http", "url": format!("http://{name}:8080/")}});
        let id = stack.api.create_job(ALICE, &job).await;
        let run = stack.drive(&worker, &stack.trigger(&id).await, 60).await;
        assert_eq!(run.state, RunState::Failed, "{name}: {run:?}");
        let error = run.attempts[0].error.clone().unwrap_or_default();
        assert!(error.starts_with("refused:") && error.contains(ip), "{name}: {error}");
    }
}

/// Notifications obey the same rules as targets: SNS will not be told to deliver into Sundial's
/// runs queue or dead-letter queue (a forged run message), nor to call Sundial's own endpoints;
/// a user's allowed queue is accepted. Nothing is created for a refused job.
#[tokio::test]
async fn notifications_cannot_feed_sundials_own_resources() {
    let public = "https://sundial.example.test/";
    let stack = Stack::with(Options {
        vars: HashMap::from([("SUNDIAL_PUBLIC_URL", public.to_string())]),
        clock: None,
    })
    .await;
    let arn_of = |url: &str| {
        let (account, name) =
            url.rsplit_once('/').map(|(rest, name)| (rest.rsplit('/').next(), name)).unwrap();
        format!("arn:aws:sqs:us-east-1:{}:{name}", account.unwrap())
    };
    let own_queues = [arn_of(&stack.resources.runs_queue_url), arn_of(&stack.resources.dlq_url)];
    let job = |notify: Value| {
        json!({"name": "told", "schedule": {"cron": "0 0 1 1 *"},
               "target": {"type": "http", "url": "http://127.0.0.1:9/hook"}, "notify": notify})
    };
    for arn in &own_queues {
        let reply = stack.api.post(ALICE, "/v1/jobs", &job(json!({"sqs": [arn]}))).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{arn}: {}", reply.body);
        assert_eq!(reply.body["error"]["field"], "notify.sqs[0]");
        assert!(reply.body["error"]["message"].as_str().unwrap().contains("own resources"), "{}", reply.body);
    }
    let reply = stack.api.post(ALICE, "/v1/jobs", &job(json!({"https": [format!("{public}v1/jobs")]}))).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", reply.body);
    assert_eq!(reply.body["error"]["field"], "notify.https[0]");

    // A queue outside the allow-list is refused, a user's allowed queue is accepted.
    let (_, stranger) = sundial_tests::create_queue(&stack.sqs, &format!("stranger-{}", stack.name)).await;
    let reply = stack.api.post(ALICE, "/v1/jobs", &job(json!({"sqs": [stranger]}))).await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", reply.body);
    assert!(reply.body["error"]["message"].as_str().unwrap().contains("allow-list"), "{}", reply.body);
    assert_eq!(stack.api.get(ALICE, "/v1/jobs").await.body["jobs"], json!([]), "a refused job was stored");

    let (_, inbox) = stack.new_queue("inbox").await;
    let reply = stack.api.post(ALICE, "/v1/jobs", &job(json!({"sqs": [inbox]}))).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
}

/// In AWS the API's own address is known only from its requests (the template cannot give the
/// function its own URL): a job created or patched through a host may not target or notify that
/// host; another host is fine.
#[tokio::test]
async fn the_host_a_request_came_in_on_is_an_own_endpoint() {
    use http::Method;
    use sundial_tests::Call;
    let stack = Stack::new().await;
    let host = "abc123.execute-api.us-east-1.amazonaws.com";
    let job = |notify: &str, url: &str| {
        json!({"name": "self", "schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": url},
               "notify": {"on": ["failed"], "https": [notify]}})
    };
    let create =
        |body: Value| Call::new(Method::POST, "/v1/jobs").key(ALICE).header("host", host).json(&body);
    let elsewhere = "https://hooks.example.com/sundial";
    for (body, field) in [
        (job(&format!("https://{host}/v1/jobs"), elsewhere), "notify.https[0]"),
        (job(elsewhere, &format!("https://{host}/v1/runs/x/complete")), "target.url"),
    ] {
        let reply = stack.api.call(create(body.clone())).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {}", reply.body);
        assert_eq!(reply.body["error"]["field"], field);
        assert!(reply.body["error"]["message"].as_str().unwrap().contains("own endpoints"), "{}", reply.body);
    }
    let reply = stack.api.call(create(job(elsewhere, elsewhere))).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    let id = reply.body["id"].as_str().unwrap().to_string();
    let patch = json!({"notify": {"https": [format!("https://{host}/v1/jobs")]}});
    let reply = stack
        .api
        .call(Call::new(Method::PATCH, format!("/v1/jobs/{id}")).key(ALICE).header("host", host).json(&patch))
        .await;
    assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", reply.body);
    assert_eq!(reply.body["error"]["field"], "notify.https[0]");
}
