//! Provisioning from `infra/template.yaml`: the local stack and the tests create their tables,
//! queues and topic from the same CloudFormation definitions that are deployed to AWS, so names,
//! keys, indexes, TTL and queue settings cannot drift between the two.
//!
//! [`Template::parse`] reads the definitions (pure); [`provision`] creates them through the SDK,
//! idempotently. Properties the emulator cannot honour (point-in-time recovery, encryption) are
//! read past.

use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use serde_yaml::Value;
use std::collections::BTreeMap;

/// The template, compiled into the binaries so that a deployed function and the local stack read
/// the same file.
pub const TEMPLATE: &str = include_str!("../../../infra/template.yaml");

/// Why provisioning failed.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("infra/template.yaml: {0}")]
    Template(String),
    #[error("creating {resource}: {message}")]
    Aws { resource: String, message: String },
}

/// A key attribute: name and whether it is the partition (`HASH`) or sort (`RANGE`) key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDef {
    pub attribute: String,
    pub key_type: String,
}

/// A global secondary index as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDef {
    pub name: String,
    pub keys: Vec<KeyDef>,
    pub projection: String,
}

/// A DynamoDB table as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    pub name: String,
    /// Attribute name → `S`, `N` or `B`.
    pub attributes: BTreeMap<String, String>,
    pub keys: Vec<KeyDef>,
    pub indexes: Vec<IndexDef>,
    pub ttl_attribute: Option<String>,
}

/// An SQS queue as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueDef {
    pub name: String,
    pub visibility_timeout_s: Option<u64>,
    pub retention_s: Option<u64>,
    /// Logical id of the dead-letter queue and the receive count that sends a message there.
    pub redrive: Option<(String, u64)>,
}

/// The resources of the template, by logical id, with names resolved for one stack.
#[derive(Debug, Clone, Default)]
pub struct Template {
    pub tables: BTreeMap<String, TableDef>,
    pub queues: BTreeMap<String, QueueDef>,
    /// Logical id → topic name.
    pub topics: BTreeMap<String, String>,
}

/// What [`provision`] created, by role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resources {
    pub jobs_table: String,
    pub runs_table: String,
    pub idempotency_table: String,
    pub runs_queue_url: String,
    pub dlq_url: String,
    pub events_topic_arn: String,
}

fn err(msg: impl Into<String>) -> ProvisionError {
    ProvisionError::Template(msg.into())
}

/// Resolves a scalar property: plain text, `!Sub "${AWS::StackName}-x"`, `!Ref Param` (to its
/// default), and the long forms of both.
fn scalar(value: &Value, stack: &str, params: &BTreeMap<String, String>) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Tagged(tagged) if tagged.tag == "Sub" => {
            scalar(&tagged.value, stack, params).map(|s| s.replace("${AWS::StackName}", stack))
        }
        Value::Tagged(tagged) if tagged.tag == "Ref" => {
            scalar(&tagged.value, stack, params).and_then(|name| params.get(&name).cloned())
        }
        Value::Mapping(map) if map.len() == 1 => {
            if let Some(inner) = map.get("Fn::Sub") {
                scalar(inner, stack, params).map(|s| s.replace("${AWS::StackName}", stack))
            } else {
                let name = scalar(map.get("Ref")?, stack, params)?;
                params.get(&name).cloned()
            }
        }
        _ => None,
    }
}

fn keys(value: Option<&Value>) -> Vec<KeyDef> {
    value
        .and_then(Value::as_sequence)
        .map(|seq| {
            seq.iter()
                .filter_map(|k| {
                    Some(KeyDef {
                        attribute: k.get("AttributeName")?.as_str()?.to_string(),
                        key_type: k.get("KeyType")?.as_str()?.to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The template's parameters with a default, resolved for `stack`.
fn parameters(doc: &Value, stack: &str) -> BTreeMap<String, String> {
    let mut params = BTreeMap::new();
    for (name, param) in doc.get("Parameters").and_then(Value::as_mapping).into_iter().flatten() {
        if let (Some(name), Some(default)) = (name.as_str(), param.get("Default"))
            && let Some(v) = scalar(default, stack, &BTreeMap::new())
        {
            params.insert(name.to_string(), v);
        }
    }
    params
}

/// One resource of the template: its logical id and properties, and what they resolve against.
struct Resource<'a> {
    id: &'a str,
    props: &'a Value,
    stack: &'a str,
    params: &'a BTreeMap<String, String>,
}

impl Resource<'_> {
    /// A property value as text, resolved (`!Sub`, `!Ref` of a parameter).
    fn text(&self, value: &Value) -> Option<String> {
        scalar(value, self.stack, self.params)
    }

    /// The name under the property `key`; an error naming the resource if it cannot be resolved.
    fn name(&self, key: &str) -> Result<String, ProvisionError> {
        self.props
            .get(key)
            .and_then(|v| self.text(v))
            .ok_or_else(|| err(format!("{}: {key} missing or not resolvable", self.id)))
    }

    fn number(&self, key: &str) -> Option<u64> {
        self.props.get(key).and_then(|v| self.text(v)).and_then(|s| s.parse().ok())
    }

    fn table(&self) -> Result<TableDef, ProvisionError> {
        let attributes = sequence(self.props.get("AttributeDefinitions"), |a| {
            Some((
                a.get("AttributeName")?.as_str()?.to_string(),
                a.get("AttributeType")?.as_str()?.to_string(),
            ))
        });
        let indexes = sequence(self.props.get("GlobalSecondaryIndexes"), |g| {
            Some(IndexDef {
                name: g.get("IndexName")?.as_str()?.to_string(),
                keys: keys(g.get("KeySchema")),
                projection: g.get("Projection")?.get("ProjectionType")?.as_str()?.to_string(),
            })
        });
        let ttl_attribute = self.props.get("TimeToLiveSpecification").and_then(|ttl| {
            let enabled = ttl.get("Enabled").and_then(Value::as_bool).unwrap_or(false);
            enabled.then(|| ttl.get("AttributeName")?.as_str().map(str::to_string)).flatten()
        });
        Ok(TableDef {
            name: self.name("TableName")?,
            attributes,
            keys: keys(self.props.get("KeySchema")),
            indexes,
            ttl_attribute,
        })
    }

    fn queue(&self) -> Result<QueueDef, ProvisionError> {
        Ok(QueueDef {
            name: self.name("QueueName")?,
            visibility_timeout_s: self.number("VisibilityTimeout"),
            retention_s: self.number("MessageRetentionPeriod"),
            redrive: self.redrive()?,
        })
    }

    /// The queue's dead-letter queue (its logical id) and the receive count that sends there.
    fn redrive(&self) -> Result<Option<(String, u64)>, ProvisionError> {
        let Some(policy) = self.props.get("RedrivePolicy") else { return Ok(None) };
        let target = policy.get("deadLetterTargetArn").and_then(|v| match v {
            Value::Tagged(t) if t.tag == "GetAtt" => t.value.as_str().map(str::to_string),
            _ => v.get("Fn::GetAtt")?.as_sequence()?.first()?.as_str().map(str::to_string),
        });
        let id = self.id;
        let target = target
            .and_then(|t| t.split('.').next().map(str::to_string))
            .ok_or_else(|| err(format!("{id}: deadLetterTargetArn must be !GetAtt <Queue>.Arn")))?;
        let count = policy
            .get("maxReceiveCount")
            .and_then(|v| self.text(v))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| err(format!("{id}: maxReceiveCount missing")))?;
        Ok(Some((target, count)))
    }
}

/// The items of a YAML sequence that `item` reads, the others left out.
fn sequence<T, C: FromIterator<T>>(value: Option<&Value>, item: impl Fn(&Value) -> Option<T>) -> C {
    value.and_then(Value::as_sequence).into_iter().flatten().filter_map(item).collect()
}

impl Template {
    /// Reads the template's tables, queues and topics, naming them for `stack`.
    pub fn parse(text: &str, stack: &str) -> Result<Self, ProvisionError> {
        let doc: Value = serde_yaml::from_str(text).map_err(|e| err(e.to_string()))?;
        let params = parameters(&doc, stack);
        let resources =
            doc.get("Resources").and_then(Value::as_mapping).ok_or_else(|| err("no Resources"))?;
        let mut template = Template::default();
        let empty = Value::Mapping(Default::default());
        for (id, resource) in resources {
            let id = id.as_str().ok_or_else(|| err("a resource id is not text"))?;
            let props = resource.get("Properties").unwrap_or(&empty);
            let resource_at = Resource { id, props, stack, params: &params };
            match resource.get("Type").and_then(Value::as_str).unwrap_or_default() {
                "AWS::DynamoDB::Table" => {
                    template.tables.insert(id.to_string(), resource_at.table()?);
                }
                "AWS::SQS::Queue" => {
                    template.queues.insert(id.to_string(), resource_at.queue()?);
                }
                "AWS::SNS::Topic" => {
                    template.topics.insert(id.to_string(), resource_at.name("TopicName")?);
                }
                _ => {}
            }
        }
        Ok(template)
    }

    fn table(&self, id: &str) -> Result<&TableDef, ProvisionError> {
        self.tables.get(id).ok_or_else(|| err(format!("no table {id}")))
    }
}

fn aws_err<E: std::error::Error>(resource: &str, e: E) -> ProvisionError {
    ProvisionError::Aws { resource: resource.to_string(), message: DisplayErrorContext(e).to_string() }
}

async fn create_table(client: &aws_sdk_dynamodb::Client, table: &TableDef) -> Result<(), ProvisionError> {
    let key = |k: &KeyDef| {
        KeySchemaElement::builder()
            .attribute_name(&k.attribute)
            .key_type(KeyType::from(k.key_type.as_str()))
            .build()
            .map_err(|e| aws_err(&table.name, e))
    };
    let mut request = client.create_table().table_name(&table.name).billing_mode(BillingMode::PayPerRequest);
    for (name, kind) in &table.attributes {
        let attribute = AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::from(kind.as_str()))
            .build()
            .map_err(|e| aws_err(&table.name, e))?;
        request = request.attribute_definitions(attribute);
    }
    for k in &table.keys {
        request = request.key_schema(key(k)?);
    }
    for index in &table.indexes {
        let mut gsi = GlobalSecondaryIndex::builder().index_name(&index.name).projection(
            Projection::builder().projection_type(ProjectionType::from(index.projection.as_str())).build(),
        );
        for k in &index.keys {
            gsi = gsi.key_schema(key(k)?);
        }
        request = request.global_secondary_indexes(gsi.build().map_err(|e| aws_err(&table.name, e))?);
    }
    match request.send().await {
        Ok(_) => {}
        Err(e) if e.as_service_error().is_some_and(|s| s.is_resource_in_use_exception()) => {
            return Ok(());
        }
        Err(e) => return Err(aws_err(&table.name, e)),
    }
    if let Some(attribute) = &table.ttl_attribute {
        let spec = TimeToLiveSpecification::builder()
            .attribute_name(attribute)
            .enabled(true)
            .build()
            .map_err(|e| aws_err(&table.name, e))?;
        client
            .update_time_to_live()
            .table_name(&table.name)
            .time_to_live_specification(spec)
            .send()
            .await
            .map_err(|e| aws_err(&table.name, e))?;
    }
    Ok(())
}

async fn create_queue(
    client: &aws_sdk_sqs::Client,
    queue: &QueueDef,
    dlq_arn: Option<String>,
) -> Result<String, ProvisionError> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let mut request = client.create_queue().queue_name(&queue.name);
    if let Some(v) = queue.visibility_timeout_s {
        request = request.attributes(A::VisibilityTimeout, v.to_string());
    }
    if let Some(v) = queue.retention_s {
        request = request.attributes(A::MessageRetentionPeriod, v.to_string());
    }
    if let (Some((_, count)), Some(arn)) = (&queue.redrive, dlq_arn) {
        let policy = serde_json::json!({"deadLetterTargetArn": arn, "maxReceiveCount": count});
        request = request.attributes(A::RedrivePolicy, policy.to_string());
    }
    let out = request.send().await.map_err(|e| aws_err(&queue.name, e))?;
    out.queue_url
        .ok_or_else(|| ProvisionError::Aws { resource: queue.name.clone(), message: "no queue URL".into() })
}

async fn queue_arn(client: &aws_sdk_sqs::Client, url: &str) -> Result<String, ProvisionError> {
    let out = client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| aws_err(url, e))?;
    out.attributes
        .and_then(|mut a| a.remove(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
        .ok_or_else(|| ProvisionError::Aws { resource: url.to_string(), message: "no queue ARN".into() })
}

/// Creates (or finds) every table, queue and topic of the template for `stack`.
pub async fn provision(sdk: &aws_config::SdkConfig, stack: &str) -> Result<Resources, ProvisionError> {
    let template = Template::parse(TEMPLATE, stack)?;
    let dynamo = aws_sdk_dynamodb::Client::new(sdk);
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let sns = aws_sdk_sns::Client::new(sdk);

    let tables = template.tables.values().map(|t| create_table(&dynamo, t));
    futures::future::try_join_all(tables).await?;

    // Dead-letter queues first: a queue's redrive policy needs its DLQ's ARN.
    let mut urls: BTreeMap<String, String> = BTreeMap::new();
    let (plain, redriven): (Vec<_>, Vec<_>) = template.queues.iter().partition(|(_, q)| q.redrive.is_none());
    for (id, queue) in plain.into_iter().chain(redriven) {
        let dlq_arn = match &queue.redrive {
            Some((dlq, _)) => {
                let url = urls
                    .get(dlq)
                    .ok_or_else(|| err(format!("{id}: dead-letter queue {dlq} not declared")))?;
                Some(queue_arn(&sqs, url).await?)
            }
            None => None,
        };
        urls.insert(id.clone(), create_queue(&sqs, queue, dlq_arn).await?);
    }

    let mut arns: BTreeMap<String, String> = BTreeMap::new();
    for (id, name) in &template.topics {
        let out = sns.create_topic().name(name).send().await.map_err(|e| aws_err(name, e))?;
        arns.insert(id.clone(), out.topic_arn.unwrap_or_default());
    }

    let url = |id: &str| urls.get(id).cloned().ok_or_else(|| err(format!("no queue {id}")));
    Ok(Resources {
        jobs_table: template.table("JobsTable")?.name.clone(),
        runs_table: template.table("RunsTable")?.name.clone(),
        idempotency_table: template.table("IdempotencyTable")?.name.clone(),
        runs_queue_url: url("RunsQueue")?,
        dlq_url: url("RunsDeadLetterQueue")?,
        events_topic_arn: arns.get("EventsTopic").cloned().ok_or_else(|| err("no topic EventsTopic"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_names_resources_for_the_stack() {
        let t = Template::parse(TEMPLATE, "sundial-x").unwrap();
        assert_eq!(t.tables["JobsTable"].name, "sundial-x-jobs");
        assert_eq!(t.queues["RunsQueue"].name, "sundial-x-runs");
        assert_eq!(t.queues["RunsQueue"].redrive, Some(("RunsDeadLetterQueue".into(), 15)));
        assert_eq!(t.topics["EventsTopic"], "sundial-x-events");
        assert_eq!(t.tables["RunsTable"].ttl_attribute.as_deref(), Some("expires_at"));
        assert_eq!(t.tables["JobsTable"].ttl_attribute, None);
    }
}
