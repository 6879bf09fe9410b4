//! A Sundial stack on the emulator for one scenario: its resources provisioned afresh, its
//! services built over SDK clients that count every request (and, when asked, the capacity
//! DynamoDB reports), HTTP targets on loopback allowed; local workers polling its runs queue as
//! the template's event source would; and the small figures every scenario reports (CPU time of
//! this process, percentiles, per-run ledgers).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use sundial_aws::metrics::{Capacity, Clients, Ledger, writes};
use sundial_aws::provision::provision;
use sundial_domain::clock::Clock;
use sundial_domain::job::{Job, JobDocument, JobId};
use sundial_domain::run::RunKey;
use sundial_wiring::config::{Config, Vars, aws_sdk_config};
use sundial_wiring::services::Services;
use tokio::sync::watch;

/// The owner of every benchmark job.
pub const OWNER: &str = "bench";

/// Concurrent worker invocations of the template's event source (`WorkerMaxConcurrency`'s
/// default) and the messages each takes (`BatchSize`).
pub const WORKER_INVOCATIONS: usize = 10;
pub const BATCH_SIZE: usize = 10;

struct Env(BTreeMap<&'static str, String>);

impl Vars for Env {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned().or_else(|| std::env::var(name).ok())
    }
}

/// A fresh stack: services and the clients whose ledger counts what they ask of AWS.
pub async fn stack(
    vars: &[(&'static str, &str)],
    clock: Arc<dyn Clock>,
    capacity: Capacity,
) -> anyhow::Result<(Services, Clients)> {
    let name = format!("bench{}", unique_suffix());
    let sdk = aws_sdk_config().await;
    let resources = provision(&sdk, &name).await?;
    let mut env = Env(BTreeMap::from([("SUNDIAL_STACK", name.clone())]));
    for (k, v) in vars {
        env.0.insert(k, v.to_string());
    }
    let mut config = Config::from_vars(&env, Some(resources))?;
    // The targets are on loopback, as in the local runtime.
    config.targets.network = std::mem::take(&mut config.targets.network).allowing_loopback();
    let clients = Clients::with_capacity(&sdk, Ledger::new(), capacity);
    Ok((Services::new(config, &clients, clock), clients))
}

/// Local workers consuming the runs queue as the Lambda event source would: one poller per
/// concurrent invocation, each with a batch's worth of messages in hand.
#[derive(Debug)]
pub struct Workers {
    stop: watch::Sender<bool>,
    pollers: Vec<tokio::task::JoinHandle<()>>,
}

impl Workers {
    pub fn start(services: &Services) -> Workers {
        let (stop, stopped) = watch::channel(false);
        let pollers = (0..WORKER_INVOCATIONS)
            .map(|n| {
                tokio::spawn(sundial_app::worker::poll::consume(
                    services.use_cases.worker.clone(),
                    services.ports.queue.clone(),
                    services.inbox.clone(),
                    format!("bench/worker-{n}"),
                    BATCH_SIZE,
                    stopped.clone(),
                ))
            })
            .collect();
        Workers { stop, pollers }
    }

    /// Stops taking messages and waits for the attempts in hand.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for poller in self.pollers {
            let _ = poller.await;
        }
    }
}

/// A job of the benchmark's owner, as the API would store it.
pub fn job(
    name: &str,
    document: Value,
    now: DateTime<Utc>,
    next: Option<DateTime<Utc>>,
) -> anyhow::Result<Job> {
    let mut document = document;
    document["name"] = json!(name);
    let document: JobDocument = serde_json::from_value(document)?;
    Ok(Job {
        id: JobId::generate(),
        owner: OWNER.into(),
        document,
        version: 1,
        created_at: now,
        updated_at: now,
        next_run_at: next,
        signing_secret: "bench-secret".into(),
        pauses: Vec::new(),
        children: Vec::new(),
        gaps: Vec::new(),
        skips: Vec::new(),
        counted: Default::default(),
        baseline: None,
        versions: Vec::new(),
    })
}

/// CPU time (user + system) of this process so far, from /proc (Linux reports it in 1/100 s).
pub fn cpu_seconds() -> f64 {
    process_cpu_seconds("self")
}

/// CPU time of the emulator so far (`SUNDIAL_BENCH_EMULATOR_PID`, set by `scripts/bench`), to
/// show what bounds a burst's rate; `None` when unknown.
pub fn emulator_cpu_seconds() -> Option<f64> {
    let pid = std::env::var("SUNDIAL_BENCH_EMULATOR_PID").ok()?;
    Some(process_cpu_seconds(&pid))
}

/// CPU time (user + system) of the process `pid` (a number or `self`), from /proc.
fn process_cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// p50, p95, p99 and max of `values` (nearest rank), in their unit.
pub fn percentiles(values: &mut [f64]) -> Value {
    values.sort_by(f64::total_cmp);
    let rank = |p: f64| -> f64 {
        if values.is_empty() {
            return 0.0;
        }
        let i = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1;
        values[i]
    };
    json!({"p50": rank(0.50), "p95": rank(0.95), "p99": rank(0.99), "max": rank(1.0), "count": values.len()})
}

/// A ledger's counters divided by `runs`.
pub fn per_run(ledger: &BTreeMap<String, u64>, runs: usize) -> BTreeMap<String, f64> {
    ledger.iter().map(|(k, v)| (k.clone(), *v as f64 / runs.max(1) as f64)).collect()
}

/// Writes per run counted by the adapters: items, and index entries put and removed.
pub fn counted_writes(per: &BTreeMap<String, f64>) -> f64 {
    [writes::ITEM, writes::INDEX_PUT, writes::INDEX_REMOVE]
        .iter()
        .map(|k| per.get(*k).copied().unwrap_or(0.0))
        .sum()
}

/// Capacity units of `kind` (`read` or `write`) per run, as DynamoDB reported them.
pub fn reported_units(per: &BTreeMap<String, f64>, kind: &str) -> f64 {
    let prefix = format!("{}.{kind}.", sundial_aws::metrics::COUNTED);
    per.iter().filter(|(k, _)| k.starts_with(&prefix)).map(|(_, v)| v / 1000.0).sum()
}

/// A suffix that makes a stack's name unique.
pub fn unique_suffix() -> String {
    RunKey::manual(Utc::now()).manual.unwrap_or_default()[20..].to_string()
}
