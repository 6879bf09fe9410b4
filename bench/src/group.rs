//! A concurrency group's drain: `n` one-second runs due together in a group of `max_running`,
//! through the tick and the workers at the template's concurrency against the loopback target.
//! Measures the runs started per second from the first start to the last (a freed slot is handed
//! to the oldest waiter and wakes it, instead of waiting for that waiter's next look), the most
//! calls at the target at once (never above the limit), and what each admitted run costs in
//! DynamoDB units and requests: the group's reads and writes by every admission, wait and
//! release, the waiters' looks included. The jobs are linked to the group as the API's creates
//! link them, so that what the group's ledger holds for them is paid for too.

use crate::lag::import;
use crate::stack::{self, OWNER, Workers, per_run, reported_units};
use crate::target::{Hit, Target};
use chrono::{Duration, Utc};
use serde_json::{Value, json};
use std::sync::Arc;
use sundial_aws::metrics::Capacity;
use sundial_domain::clock::SystemClock;
use sundial_domain::due_index::format_instant;
use sundial_domain::group::GroupDocument;
use sundial_domain::job::Job;
use sundial_domain::schedule::ceil_second;

/// Each call's length at the `slow` target.
const CALL_MS: i64 = 1_000;

/// The most calls at the target at once, each taken to last [`CALL_MS`] from its arrival.
fn most_at_once(hits: &[Hit]) -> usize {
    let mut edges: Vec<(i64, i32)> =
        hits.iter().flat_map(|h| [(h.at_ms, 1), (h.at_ms + CALL_MS, -1)]).collect();
    edges.sort_unstable();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

pub async fn drain(n: usize, max_running: u32) -> anyhow::Result<Value> {
    let (services, clients) = stack::stack(&[], Arc::new(SystemClock), Capacity::Counted).await?;
    let target = Target::start().await?;
    services.use_cases.groups.put(&OWNER.to_string(), "bench", &GroupDocument { max_running }).await?;
    let now = Utc::now();
    let due = ceil_second(now) + Duration::seconds(3);
    let jobs: Vec<Job> = (0..n)
        .map(|i| {
            let document = json!({"schedule": {"at": format_instant(due)}, "group": "bench",
                                  "target": {"type": "http", "url": target.url("slow")}});
            stack::job(&format!("grouped-{i:04}"), document, now, Some(due))
        })
        .collect::<anyhow::Result<_>>()?;
    // Linked as the API's creates link them: every job that names the group is known to it.
    for job in &jobs {
        services.use_cases.groups.link(&OWNER.to_string(), "bench", &job.id).await?;
    }
    import(&services, &clients, &jobs).await?;
    services.use_cases.tick.run().await?;
    clients.ledger.reset();
    let started = std::time::Instant::now();
    let workers = Workers::start(&services);
    let limit = std::time::Duration::from_secs(600);
    let arrived = target.wait_until(limit, |hits| hits.len() >= n).await;
    // The last calls end, and their slots are given back.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    workers.stop().await;
    let hits = target.hits();
    let first = hits.iter().map(|h| h.at_ms).min().unwrap_or(0);
    let last = hits.iter().map(|h| h.at_ms).max().unwrap_or(0);
    let span_s = ((last - first) as f64 / 1000.0).max(0.001);
    let per = per_run(&clients.ledger.snapshot(), n);
    let requests = |service: &str| -> f64 {
        per.iter().filter(|(k, _)| k.starts_with(&format!("aws.{service}."))).map(|(_, v)| v).sum()
    };
    let figures = json!({
        "runs": n,
        "max_running": max_running,
        "all_called": arrived,
        "calls": hits.len(),
        "runs_per_second": (hits.len().saturating_sub(1)) as f64 / span_s,
        "first_to_last_start_s": span_s,
        "wall_s": started.elapsed().as_secs_f64(),
        "most_calls_at_once": most_at_once(&hits),
        "per_admitted_run": {
            "write_units": reported_units(&per, "write"),
            "read_units": reported_units(&per, "read"),
            "dynamodb_requests": requests("DynamoDB"),
            "sqs_requests": requests("SQS"),
        },
    });
    println!("{}", serde_json::to_string_pretty(&figures)?);
    Ok(figures)
}
