//! The local stack's resources come from `infra/template.yaml`: what the emulator holds after
//! provisioning matches what the template declares and what the code expects.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use sundial_aws::dynamo::jobs::{BY_DUE_INDEX, BY_OWNER_INDEX};
use sundial_aws::provision::{TEMPLATE, Template};
use sundial_tests::Stack;

/// Tables, indexes, TTL, queue redrive and the topic exist as declared.
#[tokio::test]
async fn provisioned_resources_match_the_template() {
    let stack = Stack::new().await;
    let template = Template::parse(TEMPLATE, &stack.name).unwrap();

    for table in template.tables.values() {
        let described = stack.dynamo.describe_table().table_name(&table.name).send().await.unwrap();
        let described = described.table.unwrap();
        let keys: Vec<(String, String)> = described
            .key_schema()
            .iter()
            .map(|k| (k.attribute_name().to_string(), k.key_type().as_str().to_string()))
            .collect();
        let declared: Vec<(String, String)> =
            table.keys.iter().map(|k| (k.attribute.clone(), k.key_type.clone())).collect();
        assert_eq!(keys, declared, "{}", table.name);
        let mut indexes: Vec<String> = described
            .global_secondary_indexes()
            .iter()
            .filter_map(|g| g.index_name().map(str::to_string))
            .collect();
        indexes.sort();
        let mut want: Vec<String> = table.indexes.iter().map(|i| i.name.clone()).collect();
        want.sort();
        assert_eq!(indexes, want, "{}", table.name);

        let ttl = stack.dynamo.describe_time_to_live().table_name(&table.name).send().await.unwrap();
        let ttl_attribute =
            ttl.time_to_live_description().and_then(|d| d.attribute_name()).map(str::to_string);
        assert_eq!(ttl_attribute, table.ttl_attribute, "{} TTL", table.name);
    }

    // What the code queries exists in the template.
    let jobs = &template.tables["JobsTable"];
    assert_eq!(jobs.name, stack.resources.jobs_table);
    for index in [BY_OWNER_INDEX, BY_DUE_INDEX] {
        assert!(jobs.indexes.iter().any(|i| i.name == index), "{index} missing from the template");
    }
    assert_eq!(template.tables["RunsTable"].ttl_attribute.as_deref(), Some("expires_at"));

    let sdk = sundial_wiring::config::aws_sdk_config().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&stack.resources.runs_queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await
        .unwrap();
    let attrs = attrs.attributes.unwrap();
    let redrive: serde_json::Value =
        serde_json::from_str(&attrs[&aws_sdk_sqs::types::QueueAttributeName::RedrivePolicy]).unwrap();
    assert_eq!(redrive["maxReceiveCount"].to_string().trim_matches('"'), "15");
    assert!(redrive["deadLetterTargetArn"].as_str().unwrap().ends_with("-runs-dlq"));
    assert_eq!(attrs[&aws_sdk_sqs::types::QueueAttributeName::VisibilityTimeout], "960");
    assert!(stack.resources.events_topic_arn.ends_with(&format!("{}-events", stack.name)));

    // Provisioning again is harmless (the local runtime does it at every start).
    let again = sundial_aws::provision::provision(&sdk, &stack.name).await.unwrap();
    assert_eq!(again, stack.resources);
}

/// A stack on a manual clock keeps what it writes until its test ends: the emulator's TTL
/// reaper deletes by the real clock, once a minute, items whose expiry the manual clock wrote
/// (a run claimed on 2026-03-08 expires 30 days later, long past), which took a DST scenario's
/// claimed run whenever the reaper's minute came round during the test. Its tables' TTL is off;
/// a stack on the real clock keeps the template's.
#[tokio::test]
async fn a_stack_on_a_manual_clock_keeps_its_expired_items() {
    let clock =
        std::sync::Arc::new(sundial_domain::clock::ManualClock::new("2026-03-08T05:00:00Z".parse().unwrap()));
    let stack = Stack::at(&clock, &[]).await;
    let r = &stack.resources;
    for table in [&r.jobs_table, &r.runs_table, &r.idempotency_table] {
        let ttl = stack.dynamo.describe_time_to_live().table_name(table).send().await.unwrap();
        let status = ttl.time_to_live_description().and_then(|d| d.time_to_live_status()).cloned();
        assert_ne!(
            status,
            Some(aws_sdk_dynamodb::types::TimeToLiveStatus::Enabled),
            "{table}: the reaper would take its items"
        );
    }
}
