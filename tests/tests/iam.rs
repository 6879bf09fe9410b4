//! Least privilege that is also enough: every AWS call each function makes is allowed by that
//! function's role in `infra/template.yaml`, for the action and for the resource.
//!
//! Each function gets services of its own on a fresh test stack, built from SDK clients that carry
//! a recording interceptor beside the usual request counter: it notes the service and operation
//! of every request (from the operation's metadata) and the resources its serialized request
//! names (DynamoDB tables, indexes and the tables of batch and transaction items, SQS queue URLs,
//! SNS topics). The function is then driven through the paths it takes in AWS, through its real
//! handler where it has one, while the stack's own (unrecorded) services stand in for everything
//! else: users of the API, the Lambda event source, other functions. Each recorded call is turned
//! into what IAM authorises it by (the single action for SQS batches; the item actions for a
//! DynamoDB transaction; `sns:TagResource` too for a topic created with tags), with the stack's
//! real ARNs, and checked against the role's statements, read from the template with their
//! `!GetAtt`, `!Sub`, `!Ref` and `!If` resolved for the test stack. An index query needs the
//! index's ARN, a table call the table's.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use aws_sdk_dynamodb::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use chrono::{DateTime, Duration, Utc};
use http::{Method, StatusCode};
use serde_json::{Value, json};
use serde_yaml::Value as Yaml;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use sundial_aws::metrics::{Clients, Ledger, RequestCounter};
use sundial_aws::provision::{TEMPLATE, Template};
use sundial_domain::clock::{Clock, ManualClock};
use sundial_tests::{ALICE, Answer, Api, Call, Stack, TargetServer};
use sundial_wiring::services::Services;

// -------------------------------------------------------------------------------------------------
// Recording what a function asks of AWS.
// -------------------------------------------------------------------------------------------------

/// A resource named by a request, as the request names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Named {
    /// A DynamoDB table or one of its indexes; `item` is the kind of a transaction's item
    /// (`Put`, `Update`, `Delete`, `ConditionCheck`, `Get`).
    Table { table: String, index: Option<String>, item: Option<String> },
    /// An SQS queue URL.
    Queue(String),
    /// An SNS topic ARN.
    Topic(String),
    /// The name given to `CreateTopic`.
    TopicName(String),
    /// An SNS subscription ARN (`<topic ARN>:<id>`).
    Subscription(String),
    /// A Lambda function name or ARN.
    Function(String),
    /// A state machine's or an execution's ARN.
    StateMachine(String),
    /// An ECS RunTask: the cluster and the task definition, as the request names them.
    EcsRun { cluster: String, task_definition: String },
    /// An ECS task: its cluster (as the request names it) and its ARN.
    EcsTask { cluster: String, task: String },
    /// An EventBridge bus, by name or ARN.
    Bus(String),
}

/// One AWS request as it was sent.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct AwsCall {
    /// `dynamodb`, `sqs`, `sns`, `lambda`, `sfn`, `ecs`, `eventbridge`.
    service: String,
    operation: String,
    resources: Vec<Named>,
    /// The request carries tags (a `CreateTopic` with `Tags`, a `RunTask` with `tags`).
    tagged: bool,
}

/// Decodes `application/x-www-form-urlencoded` text.
fn form_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

impl AwsCall {
    /// What a serialized request names: DynamoDB and SQS speak JSON, SNS form parameters,
    /// Lambda puts the function in the path.
    fn parse(service: &str, operation: &str, uri: &str, body: &[u8]) -> AwsCall {
        let service = service.to_ascii_lowercase();
        let mut resources = Vec::new();
        let mut tagged = false;
        match service.as_str() {
            "dynamodb" => {
                let body: Value = serde_json::from_slice(body).unwrap_or_default();
                if let Some(table) = body["TableName"].as_str() {
                    let index = body["IndexName"].as_str().map(str::to_string);
                    resources.push(Named::Table { table: table.to_string(), index, item: None });
                }
                for table in body["RequestItems"].as_object().into_iter().flat_map(|m| m.keys()) {
                    resources.push(Named::Table { table: table.clone(), index: None, item: None });
                }
                for item in body["TransactItems"].as_array().into_iter().flatten() {
                    for (kind, inner) in item.as_object().into_iter().flatten() {
                        let table = inner["TableName"].as_str().unwrap_or_default().to_string();
                        resources.push(Named::Table { table, index: None, item: Some(kind.clone()) });
                    }
                }
            }
            "sqs" => {
                let body: Value = serde_json::from_slice(body).unwrap_or_default();
                if let Some(url) = body["QueueUrl"].as_str() {
                    resources.push(Named::Queue(url.to_string()));
                }
            }
            "sns" => {
                let body = String::from_utf8_lossy(body);
                for pair in body.split('&') {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    let (key, value) = (form_decode(key), form_decode(value));
                    match key.as_str() {
                        "TopicArn" | "ResourceArn" => resources.push(Named::Topic(value)),
                        "Name" if operation == "CreateTopic" => resources.push(Named::TopicName(value)),
                        "SubscriptionArn" => resources.push(Named::Subscription(value)),
                        k if k.starts_with("Tags.member.") => tagged = true,
                        _ => {}
                    }
                }
            }
            "sfn" => {
                let body: Value = serde_json::from_slice(body).unwrap_or_default();
                for field in ["stateMachineArn", "executionArn"] {
                    if let Some(arn) = body[field].as_str() {
                        resources.push(Named::StateMachine(arn.to_string()));
                    }
                }
            }
            "ecs" => {
                let body: Value = serde_json::from_slice(body).unwrap_or_default();
                let cluster = body["cluster"].as_str().unwrap_or("default").to_string();
                if let Some(task_definition) = body["taskDefinition"].as_str() {
                    let task_definition = task_definition.to_string();
                    resources.push(Named::EcsRun { cluster: cluster.clone(), task_definition });
                }
                let tasks = body["tasks"].as_array().into_iter().flatten().chain(body.get("task"));
                for task in tasks.filter_map(Value::as_str) {
                    resources.push(Named::EcsTask { cluster: cluster.clone(), task: task.to_string() });
                }
                tagged = body["tags"].as_array().is_some_and(|tags| !tags.is_empty());
            }
            "eventbridge" => {
                let body: Value = serde_json::from_slice(body).unwrap_or_default();
                for entry in body["Entries"].as_array().into_iter().flatten() {
                    let bus = entry["EventBusName"].as_str().unwrap_or("default").to_string();
                    resources.push(Named::Bus(bus));
                }
            }
            "lambda" => {
                let path = uri.split("/functions/").nth(1).unwrap_or_default();
                let function = path.split('/').next().unwrap_or_default();
                resources.push(Named::Function(form_decode(function)));
            }
            _ => {}
        }
        AwsCall { service, operation: operation.to_string(), resources, tagged }
    }
}

/// An SDK interceptor noting every request sent (each try of it) as an [`AwsCall`].
#[derive(Debug, Clone, Default)]
struct CallLog(Arc<Mutex<Vec<AwsCall>>>);

impl CallLog {
    fn calls(&self) -> Vec<AwsCall> {
        self.0.lock().unwrap().clone()
    }
}

impl Intercept for CallLog {
    fn name(&self) -> &'static str {
        "SundialIamCallLog"
    }

    // The serialized request: what AWS reads the resource from.
    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(metadata) = cfg.load::<Metadata>() {
            let request = context.request();
            let body = request.body().bytes().unwrap_or_default();
            let call = AwsCall::parse(metadata.service(), metadata.name(), request.uri(), body);
            self.0.lock().unwrap().push(call);
        }
        Ok(())
    }
}

/// A second set of services on the stack (its configuration and clock), whose clients record
/// every call: one function's.
async fn recording(stack: &Stack) -> (Services, CallLog) {
    let sdk = sundial_wiring::config::aws_sdk_config().await;
    let log = CallLog::default();
    let ledger = Ledger::new();
    let counter = RequestCounter(ledger.clone());
    let dynamo = aws_sdk_dynamodb::config::Builder::from(&sdk)
        .interceptor(counter.clone())
        .interceptor(log.clone())
        .build();
    let sqs = aws_sdk_sqs::config::Builder::from(&sdk)
        .interceptor(counter.clone())
        .interceptor(log.clone())
        .build();
    let sns = aws_sdk_sns::config::Builder::from(&sdk)
        .interceptor(counter.clone())
        .interceptor(log.clone())
        .build();
    let lambda = aws_sdk_lambda::config::Builder::from(&sdk)
        .interceptor(counter.clone())
        .interceptor(log.clone())
        .build();
    let sfn = aws_sdk_sfn::config::Builder::from(&sdk)
        .interceptor(counter.clone())
        .interceptor(log.clone())
        .build();
    let ecs = aws_sdk_ecs::config::Builder::from(&sdk)
        .interceptor(counter.clone())
        .interceptor(log.clone())
        .build();
    let events = aws_sdk_eventbridge::config::Builder::from(&sdk)
        .interceptor(counter)
        .interceptor(log.clone())
        .build();
    let targets = sundial_aws::metrics::TargetClients {
        sqs: aws_sdk_sqs::Client::from_conf(sqs.clone()),
        sns: aws_sdk_sns::Client::from_conf(sns.clone()),
        lambda: aws_sdk_lambda::Client::from_conf(lambda),
        sfn: aws_sdk_sfn::Client::from_conf(sfn),
        ecs: aws_sdk_ecs::Client::from_conf(ecs),
        events: aws_sdk_eventbridge::Client::from_conf(events),
    };
    let clients = Clients {
        dynamo: aws_sdk_dynamodb::Client::from_conf(dynamo),
        sqs: aws_sdk_sqs::Client::from_conf(sqs),
        sns: aws_sdk_sns::Client::from_conf(sns),
        targets,
        ledger,
    };
    let services = Services::new(stack.config.clone(), &clients, stack.services.ports.clock.clone());
    (services, log)
}

// -------------------------------------------------------------------------------------------------
// What IAM authorises a call by.
// -------------------------------------------------------------------------------------------------

/// Where the stack lives, for ARNs: taken from the events topic's ARN.
#[derive(Debug, Clone)]
struct Place {
    partition: String,
    region: String,
    account: String,
}

impl Place {
    fn of(topic_arn: &str) -> Place {
        let parts: Vec<&str> = topic_arn.split(':').collect();
        assert!(parts.len() >= 6 && parts[0] == "arn", "not an ARN: {topic_arn}");
        Place { partition: parts[1].into(), region: parts[3].into(), account: parts[4].into() }
    }

    fn arn(&self, service: &str, resource: &str) -> String {
        format!("arn:{}:{service}:{}:{}:{resource}", self.partition, self.region, self.account)
    }

    fn table(&self, name: &str) -> String {
        if name.starts_with("arn:") {
            name.to_string()
        } else {
            self.arn("dynamodb", &format!("table/{name}"))
        }
    }

    /// `https://host/<account>/<name>` → the queue's ARN.
    fn queue(&self, url: &str) -> String {
        let mut segments = url.trim_end_matches('/').rsplit('/');
        let name = segments.next().unwrap_or_default();
        let account = segments.next().unwrap_or_default();
        format!("arn:{}:sqs:{}:{account}:{name}", self.partition, self.region)
    }
}

/// One (IAM action, resource ARN) a call needs.
type Need = (String, String);

/// What IAM checks for `call`: every pair must be allowed.
fn needs(call: &AwsCall, place: &Place) -> Vec<Need> {
    let mut needed = Vec::new();
    let op = call.operation.as_str();
    match call.service.as_str() {
        "dynamodb" => {
            for named in &call.resources {
                let Named::Table { table, index, item } = named else { continue };
                // A transaction is authorised item by item, by the item's own action.
                let action = match item.as_deref() {
                    None => op,
                    Some("Put") => "PutItem",
                    Some("Update") => "UpdateItem",
                    Some("Delete") => "DeleteItem",
                    Some("ConditionCheck") => "ConditionCheckItem",
                    Some("Get") => "GetItem",
                    Some(other) => panic!("unknown transaction item {other}"),
                };
                let mut resource = place.table(table);
                if let Some(index) = index {
                    resource = format!("{resource}/index/{index}");
                }
                needed.push((format!("dynamodb:{action}"), resource));
            }
        }
        "sqs" => {
            // "You cannot set permissions explicitly for SendMessageBatch, DeleteMessageBatch,
            // or ChangeMessageVisibilityBatch": the single action authorises the batch.
            let action = op.strip_suffix("Batch").unwrap_or(op);
            for named in &call.resources {
                if let Named::Queue(url) = named {
                    needed.push((format!("sqs:{action}"), place.queue(url)));
                }
            }
        }
        "sns" => {
            let action = if op == "PublishBatch" { "Publish" } else { op };
            for named in &call.resources {
                let topic = match named {
                    Named::Topic(arn) => arn.clone(),
                    Named::TopicName(name) => place.arn("sns", name),
                    // A subscription is authorised on its topic.
                    Named::Subscription(arn) => arn.rsplit_once(':').map(|(t, _)| t.to_string()).unwrap(),
                    _ => continue,
                };
                needed.push((format!("sns:{action}"), topic.clone()));
                if call.tagged && op == "CreateTopic" {
                    // The Service Authorization Reference: CreateTopic with tags also needs
                    // sns:TagResource.
                    needed.push(("sns:TagResource".into(), topic));
                }
            }
        }
        "lambda" => {
            for named in &call.resources {
                if let Named::Function(name) = named {
                    let arn = if name.starts_with("arn:") {
                        name.clone()
                    } else {
                        place.arn("lambda", &format!("function:{name}"))
                    };
                    needed.push(("lambda:InvokeFunction".into(), arn));
                }
            }
        }
        "sfn" => {
            for named in &call.resources {
                if let Named::StateMachine(arn) = named {
                    needed.push((format!("states:{op}"), arn.clone()));
                }
            }
        }
        "ecs" => {
            let cluster_arn = |cluster: &str| {
                if cluster.starts_with("arn:") {
                    cluster.to_string()
                } else {
                    place.arn("ecs", &format!("cluster/{cluster}"))
                }
            };
            for named in &call.resources {
                match named {
                    // Authorised on the task definition, the cluster a condition's context
                    // (`ecs:cluster`); tags on the task it makes need `ecs:TagResource`.
                    Named::EcsRun { cluster, task_definition } => {
                        let definition = if task_definition.starts_with("arn:") {
                            task_definition.clone()
                        } else {
                            place.arn("ecs", &format!("task-definition/{task_definition}"))
                        };
                        let cluster = cluster_arn(cluster);
                        needed.push((
                            format!("ecs:{op}"),
                            format!("{definition}{CONTEXT}ecs:cluster={cluster}"),
                        ));
                        if call.tagged {
                            let name = cluster.rsplit('/').next().unwrap_or_default().to_string();
                            needed.push((
                                "ecs:TagResource".into(),
                                place.arn("ecs", &format!("task/{name}/*")),
                            ));
                        }
                    }
                    Named::EcsTask { task, .. } => needed.push((format!("ecs:{op}"), task.clone())),
                    _ => {}
                }
            }
        }
        "eventbridge" => {
            for named in &call.resources {
                if let Named::Bus(bus) = named {
                    let arn = if bus.starts_with("arn:") {
                        bus.clone()
                    } else {
                        place.arn("events", &format!("event-bus/{bus}"))
                    };
                    needed.push((format!("events:{op}"), arn));
                }
            }
        }
        other => panic!("a call to an unexpected service: {other}"),
    }
    if needed.is_empty() {
        needed.push((format!("{}:{op}", call.service), "*".into()));
    }
    needed
}

// -------------------------------------------------------------------------------------------------
// The roles, read from the template.
// -------------------------------------------------------------------------------------------------

/// A policy statement with its resources resolved for one stack.
#[derive(Debug, Clone)]
struct Statement {
    sid: String,
    allow: bool,
    actions: Vec<String>,
    resources: Vec<String>,
    /// `(key, patterns)` of the statement's `ArnLike` and `StringEquals` conditions: each key
    /// must be in a need's context with a value one of its patterns matches.
    conditions: Vec<(String, Vec<String>)>,
}

/// Separates a need's resource from its condition context (`<resource>|key=value|…`).
const CONTEXT: &str = "|";

/// `*` and `?` wildcards, as IAM matches actions (case-insensitively) and resources.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

impl Statement {
    fn matches(&self, (action, resource): &Need) -> bool {
        let action = action.to_ascii_lowercase();
        let mut parts = resource.split(CONTEXT);
        let resource = parts.next().unwrap_or_default();
        let context: Vec<(&str, &str)> = parts.filter_map(|kv| kv.split_once('=')).collect();
        let conditions_hold = self.conditions.iter().all(|(key, patterns)| {
            context.iter().any(|(k, v)| k == key && patterns.iter().any(|p| glob(p, v)))
        });
        self.actions.iter().any(|a| glob(&a.to_ascii_lowercase(), &action))
            && self.resources.iter().any(|r| glob(r, resource))
            && conditions_hold
    }
}

/// Whether a role's statements allow `need`: some Allow matches and no Deny does.
fn allowed(statements: &[Statement], need: &Need) -> bool {
    statements.iter().any(|s| s.allow && s.matches(need))
        && !statements.iter().any(|s| !s.allow && s.matches(need))
}

/// The template, resolved for one stack: intrinsic functions, parameters at their defaults (so
/// conditions on optional parameters are false, as in a default deployment), resource names as
/// `shared/aws/src/provision.rs` derives them.
struct Resolver {
    doc: Yaml,
    stack: String,
    place: Place,
    names: Template,
    params: BTreeMap<String, String>,
}

fn tag_is(tagged: &serde_yaml::value::TaggedValue, name: &str) -> bool {
    tagged.tag == name
}

impl Resolver {
    /// The template with `params` given, the other parameters at their defaults.
    fn with(stack: &str, place: Place, params: &[(&str, &str)]) -> Resolver {
        let mut resolver = Resolver::new(stack, place);
        for (name, value) in params {
            assert!(resolver.params.contains_key(*name), "the template has no parameter {name}");
            resolver.params.insert(name.to_string(), value.to_string());
        }
        resolver
    }

    fn new(stack: &str, place: Place) -> Resolver {
        let doc: Yaml = serde_yaml::from_str(TEMPLATE).unwrap();
        let mut params = BTreeMap::new();
        for (name, param) in doc["Parameters"].as_mapping().unwrap() {
            let value = match &param["Default"] {
                Yaml::String(s) => s.clone(),
                Yaml::Number(n) => n.to_string(),
                Yaml::Null => String::new(),
                other => panic!("parameter default {other:?}"),
            };
            params.insert(name.as_str().unwrap().to_string(), value);
        }
        let names = Template::parse(TEMPLATE, stack).unwrap();
        Resolver { doc, stack: stack.to_string(), place, names, params }
    }

    fn resource(&self, id: &str) -> &Yaml {
        let resource = &self.doc["Resources"][id];
        assert!(!resource.is_null(), "the template has no resource {id}");
        resource
    }

    fn kind(&self, id: &str) -> String {
        self.resource(id)["Type"].as_str().unwrap().to_string()
    }

    /// `!Ref name`.
    fn reference(&self, name: &str) -> String {
        match name {
            "AWS::Partition" => return self.place.partition.clone(),
            "AWS::Region" => return self.place.region.clone(),
            "AWS::AccountId" => return self.place.account.clone(),
            "AWS::StackName" => return self.stack.clone(),
            "AWS::URLSuffix" => return "amazonaws.com".into(),
            _ => {}
        }
        if let Some(value) = self.params.get(name) {
            return value.clone();
        }
        match self.kind(name).as_str() {
            "AWS::DynamoDB::Table" => self.names.tables[name].name.clone(),
            "AWS::SQS::Queue" => format!(
                "https://sqs.{}.amazonaws.com/{}/{}",
                self.place.region, self.place.account, self.names.queues[name].name
            ),
            "AWS::SNS::Topic" => self.place.arn("sns", &self.names.topics[name]),
            "AWS::Logs::LogGroup" => self.scalar(&self.resource(name)["Properties"]["LogGroupName"]),
            other => panic!("!Ref {name}: a {other} is not resolved here"),
        }
    }

    /// `!GetAtt id.attribute`.
    fn attribute(&self, id: &str, attribute: &str) -> String {
        match (self.kind(id).as_str(), attribute) {
            ("AWS::DynamoDB::Table", "Arn") => self.place.table(&self.names.tables[id].name),
            ("AWS::SQS::Queue", "Arn") => self.place.arn("sqs", &self.names.queues[id].name),
            ("AWS::SQS::Queue", "QueueName") => self.names.queues[id].name.clone(),
            ("AWS::SNS::Topic", "TopicArn") => self.reference(id),
            ("AWS::Logs::LogGroup", "Arn") => {
                self.place.arn("logs", &format!("log-group:{}:*", self.reference(id)))
            }
            (kind, _) => panic!("!GetAtt {id}.{attribute}: a {kind} attribute is not resolved here"),
        }
    }

    fn sub(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find('}').unwrap() + start;
            let name = &rest[start + 2..end];
            let value = match name.split_once('.') {
                Some((id, attribute)) if !name.starts_with("AWS::") => self.attribute(id, attribute),
                _ => self.reference(name),
            };
            out.push_str(&value);
            rest = &rest[end + 1..];
        }
        out.push_str(rest);
        out
    }

    /// A value that must be one string.
    fn scalar(&self, value: &Yaml) -> String {
        let values = self.values(value);
        assert_eq!(values.len(), 1, "{value:?}");
        values.into_iter().next().unwrap()
    }

    /// The strings a property stands for (a list, or one value; none for `AWS::NoValue`).
    fn values(&self, value: &Yaml) -> Vec<String> {
        match value {
            Yaml::String(s) => vec![s.clone()],
            Yaml::Number(n) => vec![n.to_string()],
            Yaml::Sequence(seq) => seq.iter().flat_map(|v| self.values(v)).collect(),
            Yaml::Tagged(t) if tag_is(t, "Ref") && t.value.as_str() == Some("AWS::NoValue") => vec![],
            Yaml::Tagged(t) if tag_is(t, "Ref") => vec![self.reference(t.value.as_str().unwrap())],
            Yaml::Tagged(t) if tag_is(t, "Sub") => vec![self.sub(t.value.as_str().unwrap())],
            Yaml::Tagged(t) if tag_is(t, "GetAtt") => {
                let (id, attribute) = match &t.value {
                    Yaml::String(s) => s.split_once('.').unwrap(),
                    other => panic!("!GetAtt {other:?}"),
                };
                vec![self.attribute(id, attribute)]
            }
            Yaml::Tagged(t) if tag_is(t, "If") => self.values(self.branch(&t.value)),
            other => panic!("a policy value not resolved here: {other:?}"),
        }
    }

    /// The branch `[condition, then, else]` of an `!If` takes.
    fn branch<'a>(&self, args: &'a Yaml) -> &'a Yaml {
        let args = args.as_sequence().unwrap();
        if self.condition(args[0].as_str().unwrap()) { &args[1] } else { &args[2] }
    }

    fn condition(&self, name: &str) -> bool {
        let expression = &self.doc["Conditions"][name];
        assert!(!expression.is_null(), "no condition {name}");
        self.truth(expression)
    }

    fn truth(&self, expression: &Yaml) -> bool {
        let Yaml::Tagged(t) = expression else { panic!("condition {expression:?}") };
        let args = t.value.as_sequence();
        if tag_is(t, "Not") {
            !self.truth(&args.unwrap()[0])
        } else if tag_is(t, "And") {
            args.unwrap().iter().all(|a| self.truth(a))
        } else if tag_is(t, "Or") {
            args.unwrap().iter().any(|a| self.truth(a))
        } else if tag_is(t, "Equals") {
            let args = args.unwrap();
            self.scalar(&args[0]) == self.scalar(&args[1])
        } else if tag_is(t, "Condition") {
            self.condition(t.value.as_str().unwrap())
        } else {
            panic!("condition function {:?}", t.tag)
        }
    }

    /// The statements of a role's inline policies, `!If`s decided.
    fn role(&self, role: &str) -> Vec<Statement> {
        let resource = self.resource(role);
        assert_eq!(resource["Type"].as_str(), Some("AWS::IAM::Role"), "{role}");
        assert!(
            resource["Properties"]["ManagedPolicyArns"].is_null(),
            "{role}: managed policies are not read"
        );
        let mut statements = Vec::new();
        for policy in resource["Properties"]["Policies"].as_sequence().unwrap() {
            for statement in policy["PolicyDocument"]["Statement"].as_sequence().unwrap() {
                let mut statement = statement;
                while let Yaml::Tagged(t) = statement {
                    if tag_is(t, "If") {
                        statement = self.branch(&t.value);
                    } else {
                        break;
                    }
                }
                if let Yaml::Tagged(t) = statement {
                    assert!(tag_is(t, "Ref") && t.value.as_str() == Some("AWS::NoValue"), "{statement:?}");
                    continue;
                }
                for unsupported in ["NotAction", "NotResource", "NotPrincipal"] {
                    assert!(statement[unsupported].is_null(), "{role}: {unsupported} is not evaluated here");
                }
                let mut conditions = Vec::new();
                for (operator, keys) in statement["Condition"].as_mapping().into_iter().flatten() {
                    let operator = operator.as_str().unwrap();
                    assert!(
                        matches!(operator, "ArnLike" | "StringEquals"),
                        "{role}: the condition operator {operator} is not evaluated here"
                    );
                    for (key, value) in keys.as_mapping().unwrap() {
                        conditions.push((key.as_str().unwrap().to_string(), self.values(value)));
                    }
                }
                let actions = match &statement["Action"] {
                    Yaml::String(a) => vec![a.clone()],
                    Yaml::Sequence(seq) => seq.iter().map(|a| a.as_str().unwrap().to_string()).collect(),
                    other => panic!("{role}: Action {other:?}"),
                };
                statements.push(Statement {
                    sid: statement["Sid"].as_str().unwrap_or("(no Sid)").to_string(),
                    allow: statement["Effect"].as_str() == Some("Allow"),
                    actions,
                    resources: self.values(&statement["Resource"]),
                    conditions,
                });
            }
        }
        statements
    }
}

// -------------------------------------------------------------------------------------------------
// The check.
// -------------------------------------------------------------------------------------------------

/// Checks every call `log` recorded against `role`: panics listing each (function, action,
/// resource) the role does not grant. Prints what the function needed and what the role grants
/// that it did not use. Returns the needs.
fn assert_granted(stack: &Stack, function: &str, role: &str, log: &CallLog) -> BTreeSet<Need> {
    assert_granted_with(stack, function, role, log, &[])
}

/// [`assert_granted`] with the template's `params` given (the target allow-lists).
fn assert_granted_with(
    stack: &Stack,
    function: &str,
    role: &str,
    log: &CallLog,
    params: &[(&str, &str)],
) -> BTreeSet<Need> {
    let place = Place::of(&stack.resources.events_topic_arn);
    let resolver = Resolver::with(&stack.name, place.clone(), params);
    // The resolver derives the stack's ARNs as AWS would; they must be the emulator's too.
    let events = resolver.reference("EventsTopic");
    assert_eq!(events, stack.resources.events_topic_arn);
    let statements = resolver.role(role);
    let calls = log.calls();
    assert!(!calls.is_empty(), "{function}: no AWS call was recorded");
    let needed: BTreeSet<Need> = calls.iter().flat_map(|c| needs(c, &place)).collect();

    println!("{function} ({role}) needed:");
    for (action, resource) in &needed {
        println!("  {action} on {resource}");
    }
    // What the role grants and the scenario never needed: an action no call used on any of the
    // statement's resources, a resource no call used with any of its actions.
    println!("{role} grants, unused by this scenario:");
    let used = |action: &str, resource: &str| {
        needed
            .iter()
            .any(|(a, r)| glob(&action.to_ascii_lowercase(), &a.to_ascii_lowercase()) && glob(resource, r))
    };
    for s in &statements {
        for action in s.actions.iter().filter(|a| !s.resources.iter().any(|r| used(a, r))) {
            println!("  {}: {action} (on {})", s.sid, s.resources.join(", "));
        }
        for resource in s.resources.iter().filter(|r| !s.actions.iter().any(|a| used(a, r))) {
            println!("  {}: {resource} (for {})", s.sid, s.actions.join(", "));
        }
    }

    let ungranted: Vec<String> = needed
        .iter()
        .filter(|n| !allowed(&statements, n))
        .map(|(action, resource)| format!("  ({function}, {action}, {resource})"))
        .collect();
    assert!(
        ungranted.is_empty(),
        "{role} in infra/template.yaml does not grant what {function} calls:\n{}",
        ungranted.join("\n")
    );
    needed
}

/// Fails unless the scenario made each expected call (`*` wildcards allowed): the paths
/// the check is meant to cover were taken.
fn assert_exercised(function: &str, needed: &BTreeSet<Need>, expected: &[(&str, String)]) {
    let missing: Vec<String> = expected
        .iter()
        .filter(|(action, resource)| !needed.iter().any(|(a, r)| glob(action, a) && glob(resource, r)))
        .map(|(action, resource)| format!("  {action} on {resource}"))
        .collect();
    assert!(missing.is_empty(), "{function} never made these calls:\n{}", missing.join("\n"));
}

/// The ARNs of the stack's tables, queues and topics, for expectations.
struct Arns {
    jobs: String,
    runs: String,
    idempotency: String,
    runs_queue: String,
    dlq: String,
    events: String,
    job_topics: String,
}

impl Arns {
    fn of(stack: &Stack) -> Arns {
        let place = Place::of(&stack.resources.events_topic_arn);
        let r = &stack.resources;
        Arns {
            jobs: place.table(&r.jobs_table),
            runs: place.table(&r.runs_table),
            idempotency: place.table(&r.idempotency_table),
            runs_queue: place.queue(&r.runs_queue_url),
            dlq: place.queue(&r.dlq_url),
            events: r.events_topic_arn.clone(),
            job_topics: place.arn("sns", &format!("{}-job-*", stack.name)),
        }
    }
}

// -------------------------------------------------------------------------------------------------
// Driving the functions.
// -------------------------------------------------------------------------------------------------

const START: &str = "2030-01-01T12:00:00Z";

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

fn job(name: &str, url: &str, extra: Value) -> Value {
    let mut job = json!({
        "name": name,
        "schedule": {"cron": "0 0 1 1 *"},
        "target": {"type": "http", "url": url},
        "timeout_s": 600
    });
    job.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    job
}

/// Notification settings sending `on` to a new SQS queue (a per-job topic is made for them).
async fn notify(stack: &Stack, on: &[&str]) -> Value {
    let (_, arn) = stack.new_queue("notify").await;
    json!({"on": on, "sqs": [arn]})
}

async fn trigger(api: &Api, job_id: &str) -> String {
    let reply = api.post(ALICE, &format!("/v1/jobs/{job_id}/trigger"), &json!({})).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_string()
}

/// Receives `count` messages of a queue (not deleting them), waiting up to 20 s.
async fn receive(stack: &Stack, url: &str, count: usize) -> Vec<aws_sdk_sqs::types::Message> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut messages = Vec::new();
    while messages.len() < count && std::time::Instant::now() < deadline {
        let out = stack
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap();
        messages.extend(out.messages.unwrap_or_default());
    }
    assert_eq!(messages.len(), count, "messages on {url}");
    messages
}

/// Hands every message now on the runs queue to the stack's own worker (the function under
/// test is another), as Lambda would; waits for `count` of them.
async fn work(stack: &Stack, count: usize) {
    for m in receive(stack, &stack.resources.runs_queue_url, count).await {
        stack.services.use_cases.worker.handle(m.body().unwrap(), "setup-worker").await;
        stack
            .sqs
            .delete_message()
            .queue_url(&stack.resources.runs_queue_url)
            .receipt_handle(m.receipt_handle().unwrap())
            .send()
            .await
            .unwrap();
    }
}

async fn queue_arn(stack: &Stack, url: &str) -> String {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out =
        stack.sqs.get_queue_attributes().queue_url(url).attribute_names(A::QueueArn).send().await.unwrap();
    out.attributes.unwrap()[&A::QueueArn].clone()
}

/// A Lambda event with `payload`, as the runtime hands it to a handler.
fn lambda_event<T: serde::de::DeserializeOwned>(payload: Value) -> lambda_runtime::LambdaEvent<T> {
    let mut context = lambda_runtime::Context::default();
    context.request_id = "iam-request".into();
    lambda_runtime::LambdaEvent::new(serde_json::from_value(payload).unwrap(), context)
}

/// A sample event of `events/`.
fn sample<T: serde::de::DeserializeOwned>(name: &str) -> lambda_runtime::LambdaEvent<T> {
    let path = format!("{}/../events/{name}", env!("CARGO_MANIFEST_DIR"));
    lambda_event(serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
}

/// An SQS event record for `message`, as the event source mapping of `source_arn` delivers it.
fn record(message: &aws_sdk_sqs::types::Message, source_arn: &str, receive_count: u32) -> Value {
    json!({
        "messageId": message.message_id(),
        "receiptHandle": message.receipt_handle(),
        "body": message.body(),
        "attributes": {
            "ApproximateReceiveCount": receive_count.to_string(),
            "SentTimestamp": "1893499200000",
            "SenderId": "AROAEXAMPLE:sundial",
            "ApproximateFirstReceiveTimestamp": "1893499200000"
        },
        "messageAttributes": {},
        "md5OfBody": message.md5_of_body(),
        "eventSource": "aws:sqs",
        "eventSourceARN": source_arn,
        "awsRegion": "us-east-1"
    })
}

fn ok(reply: &sundial_tests::Reply, what: &str) {
    assert!(reply.status.is_success(), "{what}: {} {}", reply.status, reply.body);
}

/// The API, through its router, along every route that reaches AWS: jobs created (one run at
/// once, some with email and SQS endpoints, so with a topic of their own), listed, read, renamed
/// and re-filtered with `If-Match`, paused, resumed, previewed, triggered with an
/// `Idempotency-Key` (and replayed), refused under `forbid`, replaced under `replace`,
/// backfilled, their runs listed, read, cancelled and rerun, a 202 target's heartbeat and
/// completion, a secret rotated, jobs deleted with their topics: every call is granted by
/// `ApiRole`.
#[tokio::test]
async fn the_api_role_grants_every_call_of_the_api() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:30Z")));
    let stack = Stack::at(&clock, &[]).await;
    let (services, log) = recording(&stack).await;
    let api = Api::over(&services);
    let accepting = TargetServer::start(|_| Answer::Status(202)).await;
    let (_, inbox_arn) = stack.new_queue("inbox").await;

    // Created with an Idempotency-Key and replayed; with endpoints, so with a topic.
    let nightly = job(
        "nightly",
        &accepting.url,
        json!({
            "schedule": {"cron": "0 * * * *"},
            "notify": {"on": ["failed", "succeeded"], "email": ["ops@example.test"], "sqs": [inbox_arn]}
        }),
    );
    let create = || Call::new(Method::POST, "/v1/jobs").key(ALICE).header("idempotency-key", "create-1");
    let created = api.call(create().json(&nightly)).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let replayed = api.call(create().json(&nightly)).await;
    assert_eq!(replayed.body["id"], created.body["id"], "{}", replayed.body);
    let nightly = created.body["id"].as_str().unwrap().to_string();
    // Without a schedule: claimed by the API at once; its failure is told to its own topic.
    let told = json!({"on": ["failed"], "email": ["ops@example.test"]});
    let once = json!({"schedule": null, "retry": {"max_attempts": 1}, "notify": told});
    let once = api.create_job(ALICE, &job("once", &accepting.url, once)).await;
    let forbid =
        api.create_job(ALICE, &job("forbid", &accepting.url, json!({"concurrency": "forbid"}))).await;
    let replace =
        api.create_job(ALICE, &job("replace", &accepting.url, json!({"concurrency": "replace"}))).await;
    // A concurrency group, and a job of it whose run holds one of its slots.
    let put_group = Call::new(Method::PUT, "/v1/groups/etl").key(ALICE).json(&json!({"max_running": 1}));
    ok(&api.call(put_group).await, "put a group");
    let grouped = api.create_job(ALICE, &job("grouped", &accepting.url, json!({"group": "etl"}))).await;
    // A named calendar, a job that names it, and an edit of it that reaches the job.
    let put_calendar = |holidays: Value| {
        Call::new(Method::PUT, "/v1/calendars/desk").key(ALICE).json(&json!({"holidays": holidays}))
    };
    assert_eq!(api.call(put_calendar(json!(["2030-12-25"]))).await.status, StatusCode::CREATED);
    let on_desk_days = json!({"schedule": {"cron": "0 9 * * *", "calendar": {"name": "desk"}}});
    let desk = api.create_job(ALICE, &job("desk", &accepting.url, on_desk_days)).await;
    ok(&api.call(put_calendar(json!(["2030-12-26"]))).await, "edit a calendar");
    ok(&api.get(ALICE, "/v1/calendars/desk").await, "get a calendar");
    ok(&api.get(ALICE, "/v1/calendars").await, "list calendars");
    // A key made through the API, used (its last use written), listed and revoked.
    let made = api.post(ALICE, "/v1/keys", &json!({"name": "ci", "role": "viewer"})).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
    let secret = made.body["secret"].as_str().unwrap().to_string();
    let as_viewer = Call::new(Method::GET, "/v1/jobs").header("authorization", format!("Bearer {secret}"));
    ok(&api.call(as_viewer).await, "a read with a key made through the API");
    ok(&api.get(ALICE, "/v1/keys").await, "list keys");
    let revoked = api.delete(ALICE, &format!("/v1/keys/{}", made.body["id"].as_str().unwrap())).await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT, "{}", revoked.body);
    // Its use after: refused, and recorded in the audit trail, which is then read.
    let as_revoked = Call::new(Method::GET, "/v1/jobs").header("authorization", format!("Bearer {secret}"));
    assert_eq!(api.call(as_revoked).await.status, StatusCode::UNAUTHORIZED);
    let trail = api.get(ALICE, "/v1/audit?action=key.refused").await;
    ok(&trail, "read the audit trail");
    assert_eq!(trail.body["records"].as_array().map(Vec::len), Some(1), "{}", trail.body);
    let forbid_run = trigger(&api, &forbid).await;
    let replace_run = trigger(&api, &replace).await;
    trigger(&api, &grouped).await;
    // The runs start (202: their attempts stay open), by the worker.
    work(&stack, 4).await;
    let group = api.get(ALICE, "/v1/groups/etl").await;
    ok(&group, "get a group");
    assert_eq!(group.body["running"], 1, "{}", group.body);
    let hits = accepting.hits();
    let once_hit = hits.iter().find(|h| h.headers["x-sundial-job-id"] == once.as_str()).unwrap();
    let once_run = once_hit.headers["x-sundial-run-id"].to_str().unwrap().to_string();
    let token = once_hit.headers["x-sundial-callback-token"].to_str().unwrap().to_string();

    let refused = api.post(ALICE, &format!("/v1/jobs/{forbid}/trigger"), &json!({})).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    let replacing = trigger(&api, &replace).await;
    assert_ne!(replacing, replace_run);

    let listed = api.get(ALICE, "/v1/jobs?limit=2").await;
    ok(&listed, "list");
    let next = listed.body["next"].as_str().unwrap().to_string();
    ok(&api.get(ALICE, &format!("/v1/jobs?limit=2&next={next}")).await, "list, page 2");
    let shown = api.get(ALICE, &format!("/v1/jobs/{nightly}")).await;
    ok(&shown, "get");
    let edit = json!({"name": "nightly-2", "notify": {"on": ["failed", "sla_missed"], "email": null}});
    let edited = api
        .call(
            Call::new(Method::PATCH, format!("/v1/jobs/{nightly}"))
                .key(ALICE)
                .header("if-match", shown.etag().to_string())
                .json(&edit),
        )
        .await;
    ok(&edited, "patch");
    ok(&api.post(ALICE, &format!("/v1/jobs/{nightly}/pause"), &json!({})).await, "pause");
    ok(&api.post(ALICE, &format!("/v1/jobs/{nightly}/resume"), &json!({})).await, "resume");
    ok(&api.get(ALICE, &format!("/v1/jobs/{nightly}/preview?count=3")).await, "preview");
    let triggered = api
        .call(
            Call::new(Method::POST, format!("/v1/jobs/{nightly}/trigger"))
                .key(ALICE)
                .header("idempotency-key", "trigger-1")
                .json(&json!({})),
        )
        .await;
    assert_eq!(triggered.status, StatusCode::ACCEPTED, "{}", triggered.body);
    let manual = triggered.body["id"].as_str().unwrap().to_string();
    let range = json!({"from": "2030-01-01T09:00:00Z", "to": "2030-01-01T11:00:00Z"});
    let backfilled = api.post(ALICE, &format!("/v1/jobs/{nightly}/backfill"), &range).await;
    assert_eq!(backfilled.status, StatusCode::ACCEPTED, "{}", backfilled.body);
    ok(&api.get(ALICE, &format!("/v1/jobs/{nightly}/runs?limit=2")).await, "runs");
    ok(&api.get(ALICE, &format!("/v1/jobs/{nightly}/runs?state=QUEUED")).await, "runs by state");
    ok(&api.get(ALICE, &format!("/v1/runs/{manual}")).await, "run");
    ok(&api.post(ALICE, &format!("/v1/runs/{manual}/cancel"), &json!({})).await, "cancel");
    ok(&api.post(ALICE, &format!("/v1/runs/{manual}/rerun"), &json!({})).await, "rerun");
    ok(&api.post(ALICE, &format!("/v1/runs/{forbid_run}/cancel"), &json!({})).await, "cancel a running run");

    // The 202 target reports back with its callback token.
    let callback = |path: &str| {
        Call::new(Method::POST, format!("/v1/runs/{once_run}/{path}"))
            .header("x-sundial-callback-token", token.clone())
    };
    ok(&api.call(callback("heartbeat")).await, "heartbeat");
    let failed = json!({"succeeded": false, "error": "the export broke"});
    ok(&api.call(callback("complete").json(&failed)).await, "complete");

    ok(&api.post(ALICE, &format!("/v1/jobs/{nightly}/rotate-secret"), &json!({})).await, "rotate");
    for id in [&nightly, &once, &forbid, &replace, &grouped, &desk] {
        assert_eq!(api.delete(ALICE, &format!("/v1/jobs/{id}")).await.status, StatusCode::NO_CONTENT);
    }
    assert_eq!(api.delete(ALICE, "/v1/groups/etl").await.status, StatusCode::NO_CONTENT);
    assert_eq!(api.delete(ALICE, "/v1/calendars/desk").await.status, StatusCode::NO_CONTENT);

    let needed = assert_granted(&stack, "api", "ApiRole", &log);
    let a = Arns::of(&stack);
    let index = |name: &str| format!("{}/index/{name}", a.jobs);
    assert_exercised(
        "api",
        &needed,
        &[
            ("dynamodb:Query", index("by-owner")),
            ("dynamodb:BatchGetItem", a.jobs.clone()),
            ("dynamodb:GetItem", a.jobs.clone()),
            ("dynamodb:PutItem", a.jobs.clone()),
            ("dynamodb:UpdateItem", a.jobs.clone()),
            ("dynamodb:DeleteItem", a.jobs.clone()),
            ("dynamodb:PutItem", a.runs.clone()),
            ("dynamodb:GetItem", a.runs.clone()),
            ("dynamodb:BatchGetItem", a.runs.clone()),
            ("dynamodb:UpdateItem", a.runs.clone()),
            ("dynamodb:Query", a.runs.clone()),
            ("dynamodb:*Item", a.idempotency.clone()),
            ("sqs:SendMessage", a.runs_queue.clone()),
            ("sns:Publish", a.events.clone()),
            ("sns:Publish", a.job_topics.clone()),
            ("sns:CreateTopic", a.job_topics.clone()),
            ("sns:TagResource", a.job_topics.clone()),
            ("sns:Subscribe", a.job_topics.clone()),
            ("sns:Unsubscribe", a.job_topics.clone()),
            ("sns:SetSubscriptionAttributes", a.job_topics.clone()),
            ("sns:ListSubscriptionsByTopic", a.job_topics.clone()),
            ("sns:GetSubscriptionAttributes", a.job_topics.clone()),
            ("sns:DeleteTopic", a.job_topics.clone()),
        ],
    );
}

/// The tick, through its Lambda handler with the scheduled event, over due jobs it claims and
/// dispatches, among them `concurrency: forbid` and `replace` jobs whose earlier runs are still
/// at work (the forbid one with a topic of its own, told when a run is skipped); then the next
/// minute's tick. Every call is granted by `TickRole`.
#[tokio::test]
async fn the_tick_role_grants_every_call_of_the_tick() {
    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:30Z")));
    let stack = Stack::at(&clock, &[]).await;
    let (services, log) = recording(&stack).await;
    let accepting = TargetServer::start(|_| Answer::Status(202)).await;
    let every_five = json!({"schedule": {"cron": "*/5 * * * *"}});
    let skipped = notify(&stack, &["skipped"]).await;
    let forbid = json!({"schedule": {"cron": "*/5 * * * *"}, "concurrency": "forbid", "notify": skipped});
    let replace = json!({"schedule": {"cron": "*/5 * * * *"}, "concurrency": "replace"});
    stack.api.create_job(ALICE, &job("plain", &accepting.url, every_five.clone())).await;
    stack
        .api
        .create_job(ALICE, &job("daily", &accepting.url, json!({"schedule": {"cron": "0 0 * * *"}})))
        .await;
    let forbid = stack.api.create_job(ALICE, &job("forbid", &accepting.url, forbid)).await;
    let replace = stack.api.create_job(ALICE, &job("replace", &accepting.url, replace)).await;
    // Their earlier runs are still at work (202: the attempts stay open).
    trigger(&stack.api, &forbid).await;
    trigger(&stack.api, &replace).await;
    work(&stack, 2).await;

    // 12:05 falls due: the tick of 12:04:30 claims it.
    clock.set(t("2030-01-01T12:04:30Z"));
    let summary =
        sundial_tick::handle(&services.use_cases.tick, sample("tick-scheduled.json")).await.unwrap();
    assert!(summary.claimed >= 2, "{summary:?}");
    clock.set(t("2030-01-01T12:05:30Z"));
    sundial_tick::handle(&services.use_cases.tick, sample("tick-scheduled.json")).await.unwrap();
    // The tick stops for twenty minutes: a minutely `catchup: skip` job drops the instants it
    // missed, which the tick reads for runs, marks `missed` open on, and tells.
    let skipping = json!({"schedule": {"cron": "* * * * *"}, "catchup": "skip"});
    stack.api.create_job(ALICE, &job("skipping", &accepting.url, skipping)).await;
    clock.set(t("2030-01-01T12:06:30Z"));
    sundial_tick::handle(&services.use_cases.tick, sample("tick-scheduled.json")).await.unwrap();
    clock.set(t("2030-01-01T12:30:30Z"));
    let summary =
        sundial_tick::handle(&services.use_cases.tick, sample("tick-scheduled.json")).await.unwrap();
    assert_eq!(summary.failed, 0, "{summary:?}");
    assert!(summary.missed_dropped > 0, "{summary:?}");

    let needed = assert_granted(&stack, "tick", "TickRole", &log);
    let a = Arns::of(&stack);
    assert_exercised(
        "tick",
        &needed,
        &[
            ("dynamodb:Query", format!("{}/index/by-due", a.jobs)),
            ("dynamodb:BatchGetItem", a.jobs.clone()),
            ("dynamodb:GetItem", a.jobs.clone()),
            ("dynamodb:UpdateItem", a.jobs.clone()),
            ("dynamodb:PutItem", a.runs.clone()),
            ("dynamodb:Query", a.runs.clone()),
            ("dynamodb:UpdateItem", a.runs.clone()),
            ("sns:Publish", a.events.clone()),
            ("sqs:SendMessage", a.runs_queue.clone()),
        ],
    );
}

/// The worker, through its Lambda handler with SQS batches built from real messages of the runs
/// queue: an attempt that succeeds against a loopback target, one answered 503 (retried after a
/// backoff), one answered 202 (kept open), the second run of a `concurrency: forbid` job whose
/// first is still at work, an undecodable body (forwarded to the dead-letter queue); then a batch
/// from the dead-letter queue (its run recorded FAILED). The jobs have topics of their own, so
/// their events go there too. Every call is granted by `WorkerRole`.
#[tokio::test]
async fn the_worker_role_grants_every_call_of_the_worker() {
    let clock = Arc::new(ManualClock::new(t(START)));
    let stack = Stack::at(&clock, &[]).await;
    let (services, log) = recording(&stack).await;
    let fine = TargetServer::start(|_| Answer::Status(200)).await;
    let unavailable = TargetServer::start(|_| Answer::Status(503)).await;
    let accepting = TargetServer::start(|_| Answer::Status(202)).await;
    let on = notify(&stack, &["succeeded", "failed", "retrying", "skipped"]).await;
    let retry = json!({"max_attempts": 3, "backoff_s": 5, "max_backoff_s": 5});
    let mut names = BTreeMap::new();
    for (name, url, extra) in [
        ("fine", &fine.url, json!({})),
        ("unavailable", &unavailable.url, json!({})),
        ("accepting", &accepting.url, json!({})),
        ("forbid", &accepting.url, json!({"concurrency": "forbid"})),
        ("dead", &fine.url, json!({})),
        ("parent", &fine.url, json!({})),
    ] {
        let mut extra = extra;
        extra["notify"] = on.clone();
        extra["retry"] = retry.clone();
        names.insert(name, stack.api.create_job(ALICE, &job(name, url, extra)).await);
    }
    // A workflow: the parent's end hands the child its run (jobs read in a batch, a run put).
    let child =
        json!({"name": "child", "depends_on": ["parent"], "target": {"type": "http", "url": fine.url}});
    names.insert("child", stack.api.create_job(ALICE, &child).await);
    // A concurrency group of one slot, which the first job's run holds (202: it stays open).
    let put_group = Call::new(Method::PUT, "/v1/groups/etl").key(ALICE).json(&json!({"max_running": 1}));
    assert_eq!(stack.api.call(put_group).await.status, StatusCode::OK);
    for (name, url) in [("holder", &accepting.url), ("waiter", &fine.url)] {
        names.insert(name, stack.api.create_job(ALICE, &job(name, url, json!({"group": "etl"}))).await);
    }
    for name in ["fine", "unavailable", "accepting", "forbid", "forbid", "dead", "parent", "holder", "waiter"]
    {
        trigger(&stack.api, &names[name]).await;
    }
    let runs_url = &stack.resources.runs_queue_url;
    stack.sqs.send_message().queue_url(runs_url).message_body("not a run message").send().await.unwrap();
    let mut messages = receive(&stack, runs_url, 10).await;
    let job_of = |m: &aws_sdk_sqs::types::Message| {
        let body = serde_json::from_str::<Value>(m.body().unwrap()).ok()?;
        let id = body["job_id"].as_str()?.to_string();
        names.iter().find(|(_, v)| **v == id).map(|(k, _)| *k)
    };
    let runs_arn = queue_arn(&stack, runs_url).await;
    let dlq_arn = queue_arn(&stack, &stack.resources.dlq_url).await;
    assert!(dlq_arn.ends_with("-dlq"));
    // Calls name queues by URL; the check reads the ARN from it as SQS does.
    let a = Arns::of(&stack);
    assert_eq!((a.runs_queue.as_str(), a.dlq.as_str()), (runs_arn.as_str(), dlq_arn.as_str()));

    // The forbid job's first run starts (202: it stays open), by another worker.
    let first = messages.iter().position(|m| job_of(m) == Some("forbid")).unwrap();
    let first = messages.remove(first);
    stack.services.use_cases.worker.handle(first.body().unwrap(), "another-worker").await;
    let holder = messages.iter().position(|m| job_of(m) == Some("holder")).unwrap();
    let holder = messages.remove(holder);
    stack.services.use_cases.worker.handle(holder.body().unwrap(), "another-worker").await;
    // From the runs queue: all but the dead job's message. The waiter finds its group full,
    // reads the slot holder's run, and waits (its place written).
    let dead = messages.iter().position(|m| job_of(m) == Some("dead")).unwrap();
    let dead = messages.remove(dead);
    let batch: Vec<Value> = messages.iter().map(|m| record(m, &runs_arn, 1)).collect();
    assert_eq!(batch.len(), 7);
    let event = lambda_event(json!({"Records": batch}));
    let s = &services;
    sundial_worker::handle(&s.use_cases.worker, s.ports.queue.as_ref(), s.inbox.as_ref(), event)
        .await
        .unwrap();
    assert_eq!(fine.hits().len(), 2, "fine and parent");
    assert_eq!(unavailable.hits().len(), 1);
    assert_eq!(stack.runs_of(&names["child"]).await.len(), 1, "the parent's end claimed the child's run");
    assert_eq!(stack.runs_of(&names["waiter"]).await[0].state, sundial_domain::run::RunState::Queued);

    // From the dead-letter queue, after the runs queue gave up on it.
    let event = lambda_event(json!({"Records": [record(&dead, &dlq_arn, 16)]}));
    let response =
        sundial_worker::handle(&s.use_cases.worker, s.ports.queue.as_ref(), s.inbox.as_ref(), event)
            .await
            .unwrap();
    assert!(response.batch_item_failures.is_empty());
    let dead_runs = stack.runs_of(&names["dead"]).await;
    assert_eq!(dead_runs[0].state, sundial_domain::run::RunState::Failed);

    let needed = assert_granted(&stack, "worker", "WorkerRole", &log);
    assert_exercised(
        "worker",
        &needed,
        &[
            ("dynamodb:GetItem", a.jobs.clone()),
            ("dynamodb:BatchGetItem", a.jobs.clone()),
            ("dynamodb:PutItem", a.jobs.clone()),
            ("dynamodb:GetItem", a.runs.clone()),
            ("dynamodb:BatchGetItem", a.runs.clone()),
            ("dynamodb:PutItem", a.runs.clone()),
            ("dynamodb:UpdateItem", a.runs.clone()),
            ("sqs:SendMessage", a.runs_queue.clone()),
            ("sqs:SendMessage", a.dlq.clone()),
            ("sns:Publish", a.events.clone()),
            ("sns:Publish", a.job_topics.clone()),
        ],
    );
}

/// The worker's calls of AWS targets, with the template's target parameters set: a state
/// machine's execution started, looked at and stopped at its timeout; an ECS task run (tagged),
/// looked at and stopped; an event put on a bus. Every call is granted by `WorkerRole`, the
/// RunTask by its condition on the cluster.
#[tokio::test]
async fn the_worker_role_grants_every_call_of_aws_targets() {
    use sundial_tests::targets::{ecs_cluster_and_task, event_bus_to, state_machine};
    let mut options = sundial_tests::Options::default();
    // As the template sets them from the parameters below.
    options.vars.insert("SUNDIAL_ALLOWED_STATE_MACHINES", "arn:aws:states:*:*:stateMachine:machine-*".into());
    options.vars.insert("SUNDIAL_ALLOWED_ECS_CLUSTERS", "cluster-*".into());
    options.vars.insert("SUNDIAL_ALLOWED_ECS_TASK_DEFINITIONS", "report-*".into());
    options.vars.insert("SUNDIAL_ALLOWED_EVENT_BUSES", "arn:aws:events:*:*:event-bus/bus-*".into());
    let stack = Stack::with(options).await;
    let (services, log) = recording(&stack).await;
    let worker = &services.use_cases.worker;

    let machine = state_machine(json!({"Type": "Wait", "Seconds": 600, "End": true})).await;
    let (cluster, family) = ecs_cluster_and_task().await;
    let (_, queue_arn) = stack.new_queue("events").await;
    let bus = event_bus_to(&queue_arn, "acme.reports", "report due").await;
    let targets = [
        json!({"type": "stepfunctions", "state_machine_arn": machine}),
        json!({"type": "ecs", "cluster": cluster, "task_definition": family, "launch_type": "EC2",
            "overrides": {"container": "app"}}),
        json!({"type": "eventbridge", "event_bus_arn": bus, "detail_type": "report due", "source": "acme.reports"}),
    ];
    for (i, target) in targets.into_iter().enumerate() {
        let document = json!({"name": format!("aws-{i}"), "schedule": {"cron": "0 0 1 1 *"}, "target": target,
            "retry": {"max_attempts": 1}, "timeout_s": 4});
        let id = stack.api.create_job(ALICE, &document).await;
        let run_id = stack.trigger(&id).await;
        let done = stack.drive(worker, &run_id, 60).await;
        assert!(done.state.is_terminal(), "{done:?}");
    }

    let params = [
        ("StateMachineTargetNames", "machine-*"),
        ("EcsClusterTargetNames", "cluster-*"),
        ("EcsTaskDefinitionNames", "report-*"),
        ("EventBusTargetNames", "bus-*"),
    ];
    let needed = assert_granted_with(&stack, "worker", "WorkerRole", &log, &params);
    let place = Place::of(&stack.resources.events_topic_arn);
    let execution = machine.replace(":stateMachine:", ":execution:") + ":*";
    assert_exercised(
        "worker",
        &needed,
        &[
            ("states:StartExecution", machine.clone()),
            ("states:DescribeExecution", execution.clone()),
            ("states:StopExecution", execution),
            ("ecs:RunTask", place.arn("ecs", &format!("task-definition/{family}*"))),
            ("ecs:TagResource", place.arn("ecs", &format!("task/{cluster}/*"))),
            ("ecs:DescribeTasks", place.arn("ecs", &format!("task/{cluster}/*"))),
            ("ecs:StopTask", place.arn("ecs", &format!("task/{cluster}/*"))),
            ("events:PutEvents", bus),
        ],
    );
    // Without the parameters, none of it is granted.
    let resolver = Resolver::new(&stack.name, place.clone());
    let statements = resolver.role("WorkerRole");
    let aws_targets: Vec<&Need> = needed
        .iter()
        .filter(|(a, _)| a.starts_with("states:") || a.starts_with("ecs:") || a.starts_with("events:"))
        .collect();
    assert!(
        aws_targets.iter().all(|n| !allowed(&statements, n)),
        "a default deployment grants no AWS target"
    );
}

/// The watchdog, through its Lambda handler with the scheduled event, over in-flight runs whose
/// repair is due: an accepted attempt whose lease expired (ended, the next attempt dispatched),
/// a run whose end event was recorded but never published, runs still queued past their start
/// deadline and SLA, a run of a deleted job; and the scheduler stalled, then recovered. The jobs
/// have topics of their own. Every call is granted by `WatchdogRole`.
#[tokio::test]
async fn the_watchdog_role_grants_every_call_of_the_watchdog() {
    use sundial_domain::job::EventKind;
    use sundial_domain::run::RunEvent;
    use sundial_domain::run::{Run, RunId, RunState};

    let clock = Arc::new(ManualClock::new(t("2030-01-01T12:00:05Z")));
    let stack = Stack::at(&clock, &[("SUNDIAL_STALL_AFTER_MINUTES", "3")]).await;
    let (services, log) = recording(&stack).await;
    stack.services.use_cases.tick.run().await.unwrap();
    let accepting = TargetServer::start(|_| Answer::Status(202)).await;
    let on = notify(&stack, &["retrying", "failed", "timed_out", "sla_missed", "late_start"]).await;
    let retry = json!({"max_attempts": 3, "backoff_s": 1, "max_backoff_s": 1});
    let with = |extra: Value| {
        let mut extra = extra;
        extra["notify"] = on.clone();
        extra["retry"] = retry.clone();
        extra
    };
    let lost = stack.api.create_job(ALICE, &job("lost", &accepting.url, with(json!({})))).await;
    let unsent = stack.api.create_job(ALICE, &job("unsent", &accepting.url, with(json!({})))).await;
    let late = stack
        .api
        .create_job(ALICE, &job("late", &accepting.url, with(json!({"start_deadline_s": 30, "sla_s": 60}))))
        .await;
    let deleted = stack.api.create_job(ALICE, &job("deleted", &accepting.url, json!({}))).await;

    // An attempt that started and whose worker then vanished.
    trigger(&stack.api, &lost).await;
    work(&stack, 1).await;
    // A run that failed; the writer crashed before publishing its event.
    let unsent_run = RunId::parse(&trigger(&stack.api, &unsent).await).unwrap();
    // A run still queued past its start deadline and SLA, and one of a job since deleted.
    trigger(&stack.api, &late).await;
    trigger(&stack.api, &deleted).await;
    stack.drain_queue().await;
    let queued = stack.services.ports.runs.get(&unsent_run.job_id, &unsent_run.key).await.unwrap().unwrap();
    let now = clock.now();
    let failed = Run {
        state: RunState::Failed,
        updated_at: now,
        events: vec![RunEvent::new(EventKind::Failed, 0, now)],
        ..queued.clone()
    };
    stack.services.ports.runs.transition(&queued, &failed, None).await.unwrap();
    assert_eq!(stack.api.delete(ALICE, &format!("/v1/jobs/{deleted}")).await.status, StatusCode::NO_CONTENT);

    // Four minutes on, without a tick: every repair is due and the scheduler is stalled.
    clock.advance(Duration::minutes(4));
    let report = sundial_watchdog::handle(&services.use_cases.watchdog, sample("watchdog-scheduled.json"))
        .await
        .unwrap();
    assert_eq!(report.alert.as_deref(), Some("scheduler_stalled"), "{report:?}");
    assert_eq!(report.lost + report.timed_out, 1, "{report:?}");
    assert!(report.republished >= 1 && report.late_start + report.sla_missed >= 1, "{report:?}");
    assert_eq!(report.cancelled, 1, "{report:?}");
    // The tick catches up: the next pass tells of the recovery.
    clock.advance(Duration::minutes(1));
    stack.services.use_cases.tick.run().await.unwrap();
    clock.advance(Duration::seconds(30));
    let report = sundial_watchdog::handle(&services.use_cases.watchdog, sample("watchdog-scheduled.json"))
        .await
        .unwrap();
    assert_eq!(report.alert.as_deref(), Some("scheduler_recovered"), "{report:?}");

    let needed = assert_granted(&stack, "watchdog", "WatchdogRole", &log);
    let a = Arns::of(&stack);
    assert_exercised(
        "watchdog",
        &needed,
        &[
            ("dynamodb:GetItem", a.jobs.clone()),
            ("dynamodb:UpdateItem", a.jobs.clone()),
            ("dynamodb:BatchGetItem", a.jobs.clone()),
            ("dynamodb:Query", format!("{}/index/in-flight", a.runs)),
            ("dynamodb:BatchGetItem", a.runs.clone()),
            ("dynamodb:UpdateItem", a.runs.clone()),
            ("sqs:SendMessage", a.runs_queue.clone()),
            ("sns:Publish", a.events.clone()),
            ("sns:Publish", a.job_topics.clone()),
        ],
    );
}

/// The check itself, on made-up calls against the template's roles for a stack `s`: an index
/// query needs the index's ARN and a table call the table's; SQS batches need the single action;
/// a transaction needs each item's action on the item's table; a tagged `CreateTopic` needs
/// `sns:TagResource`; an ungranted batch read of the jobs table is caught; every role's
/// statements resolve.
#[test]
fn the_check_tells_tables_from_indexes_and_batches_from_items() {
    let place = Place::of("arn:aws:sns:eu-west-1:111122223333:s-events");
    let resolver = Resolver::new("s", place.clone());
    let role = |name: &str| resolver.role(name);
    for name in ["ApiRole", "TickRole", "WorkerRole", "WatchdogRole"] {
        assert!(!role(name).is_empty(), "{name}");
    }
    let table = |table: &str, index: Option<&str>, item: Option<&str>| Named::Table {
        table: table.into(),
        index: index.map(str::to_string),
        item: item.map(str::to_string),
    };
    let call = |service: &str, operation: &str, resources: Vec<Named>| AwsCall {
        service: service.into(),
        operation: operation.into(),
        resources,
        tagged: false,
    };
    let granted =
        |role_name: &str, c: &AwsCall| needs(c, &place).iter().all(|n| allowed(&role(role_name), n));

    let due = call("dynamodb", "Query", vec![table("s-jobs", Some("by-due"), None)]);
    assert_eq!(
        needs(&due, &place),
        [(
            "dynamodb:Query".to_string(),
            "arn:aws:dynamodb:eu-west-1:111122223333:table/s-jobs/index/by-due".to_string()
        )]
    );
    assert!(granted("TickRole", &due));
    assert!(!granted("TickRole", &call("dynamodb", "Query", vec![table("s-jobs", None, None)])));
    assert!(!granted("TickRole", &call("dynamodb", "Query", vec![table("s-jobs", Some("by-owner"), None)])));
    assert!(granted("TickRole", &call("dynamodb", "BatchGetItem", vec![table("s-jobs", None, None)])));
    assert!(!granted("TickRole", &call("dynamodb", "BatchWriteItem", vec![table("s-jobs", None, None)])));

    let url = "http://127.0.0.1:4566/111122223333/s-runs";
    let batch = call("sqs", "SendMessageBatch", vec![Named::Queue(url.into())]);
    assert_eq!(
        needs(&batch, &place),
        [("sqs:SendMessage".to_string(), "arn:aws:sqs:eu-west-1:111122223333:s-runs".to_string())]
    );
    assert!(granted("WatchdogRole", &batch));
    let dead_letter = call("sqs", "SendMessageBatch", vec![Named::Queue(format!("{url}-dlq"))]);
    assert!(granted("WorkerRole", &dead_letter));
    assert!(!granted("WatchdogRole", &dead_letter), "only the worker writes to the dead-letter queue");

    let transaction = call(
        "dynamodb",
        "TransactWriteItems",
        vec![
            table("s-jobs", None, Some("Put")),
            table("s-jobs", None, Some("Delete")),
            table("s-jobs", None, Some("Update")),
        ],
    );
    let actions: Vec<String> = needs(&transaction, &place).into_iter().map(|(a, _)| a).collect();
    assert_eq!(actions, ["dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem"]);
    assert!(granted("ApiRole", &transaction));
    assert!(!granted("TickRole", &transaction));

    let mut topic = call("sns", "CreateTopic", vec![Named::TopicName("s-job-01abc".into())]);
    topic.tagged = true;
    let topic_arn = "arn:aws:sns:eu-west-1:111122223333:s-job-01abc".to_string();
    assert_eq!(
        needs(&topic, &place),
        [("sns:CreateTopic".to_string(), topic_arn.clone()), ("sns:TagResource".to_string(), topic_arn)]
    );
    assert!(granted("ApiRole", &topic));
    assert!(!granted("ApiRole", &call("sns", "CreateTopic", vec![Named::TopicName("other-job-1".into())])));

    // Requests as the SDK serializes them.
    let body = br#"{"RequestItems":{"s-jobs":{"Keys":[{"job_id":{"S":"1"}}]}}}"#;
    let parsed = AwsCall::parse("DynamoDB", "BatchGetItem", "http://x/", body);
    assert_eq!(parsed.resources, [table("s-jobs", None, None)]);
    let form =
        b"Action=Unsubscribe&SubscriptionArn=arn%3Aaws%3Asns%3Aeu-west-1%3A111122223333%3As-job-01abc%3A5f1c";
    let parsed = AwsCall::parse("SNS", "Unsubscribe", "http://x/", form);
    assert_eq!(
        needs(&parsed, &place),
        [("sns:Unsubscribe".to_string(), "arn:aws:sns:eu-west-1:111122223333:s-job-01abc".to_string())]
    );
}
