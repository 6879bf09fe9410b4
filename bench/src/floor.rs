//! The floor under CPU per run: what one AWS request costs this process when Sundial does
//! nothing else. The same SDK clients the functions build (their interceptors included) send
//! one request after another to the emulator, on the functions' current-thread runtime, and the
//! process's CPU time is divided by the requests. CPU per run can be no lower than a run's
//! requests times this, whatever Sundial's own code does.

use crate::stack::{cpu_seconds, unique_suffix};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use std::future::Future;
use sundial_aws::metrics::{Clients, Ledger};
use sundial_aws::provision::provision;
use sundial_wiring::config::aws_sdk_config;

/// CPU milliseconds per request of `n` requests made one after another by `request`.
async fn cpu_ms_per_request<F, Fut>(n: usize, mut request: F) -> anyhow::Result<f64>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    // A few first, so that connections are open and lazily built parts are built.
    for i in 0..20 {
        request(i).await?;
    }
    let before = cpu_seconds();
    for i in 0..n {
        request(i).await?;
    }
    Ok((cpu_seconds() - before) * 1000.0 / n as f64)
}

/// CPU per request for a DynamoDB GetItem and PutItem of a 1 KB item and an SQS SendMessage,
/// `n` of each.
pub async fn requests(n: usize) -> anyhow::Result<Value> {
    let sdk = aws_sdk_config().await;
    let resources = provision(&sdk, &format!("bench{}", unique_suffix())).await?;
    let clients = Clients::new(&sdk, Ledger::new());
    let (dynamo, sqs) = (&clients.dynamo, &clients.sqs);
    let table = resources.runs_table.as_str();
    let filler = AttributeValue::S("x".repeat(900));
    let key = |i: usize| {
        [
            ("job_id".to_string(), AttributeValue::S(format!("floor-{}", i % 100))),
            ("run_key".to_string(), AttributeValue::S("2030-01-01T00:00:00Z#s".into())),
        ]
    };
    let put = cpu_ms_per_request(n, |i| {
        let request = dynamo
            .put_item()
            .table_name(table)
            .set_item(Some(key(i).into_iter().chain([("filler".to_string(), filler.clone())]).collect()));
        async move {
            request.send().await?;
            Ok(())
        }
    })
    .await?;
    let get = cpu_ms_per_request(n, |i| {
        let request = dynamo.get_item().table_name(table).set_key(Some(key(i).into_iter().collect()));
        async move {
            request.consistent_read(true).send().await?;
            Ok(())
        }
    })
    .await?;
    let send = cpu_ms_per_request(n, |i| {
        let request = sqs.send_message().queue_url(&resources.dlq_url).message_body(format!("floor {i}"));
        async move {
            request.send().await?;
            Ok(())
        }
    })
    .await?;
    Ok(json!({
        "requests_each": n,
        "cpu_ms_per_request": {
            "DynamoDB.GetItem": get,
            "DynamoDB.PutItem": put,
            "SQS.SendMessage": send,
        },
        "note": "the SDK clients of the functions, one request at a time on a current-thread runtime, to the emulator on loopback (plain HTTP; AWS adds TLS)",
    }))
}
