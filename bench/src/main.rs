//! `sundial-bench`: measures the tick against the emulator (run through `scripts/bench`).
//!
//! - `burst N…`: N one-time jobs due in the same minute; tick invocations (each with its time
//!   budget) until every job is claimed. Figures: time to claim and dispatch all, runs/s,
//!   DynamoDB writes per run by kind, AWS requests per run by operation, CPU time of this
//!   process per run, duplicates and losses. A separate `drain` process empties the queue
//!   meanwhile (so the emulator's SQS does not slow down as it fills) and counts what arrived.
//! - `frequent`: jobs firing every minute over simulated minutes, with and without claiming
//!   several minutes ahead: writes per run of each.
//! - `watchdog N`: N in-flight runs; one watchdog pass with nothing to repair (the steady
//!   state), then one where every run's worker was lost (each attempt ended `lost` and the next
//!   dispatched). Figures per run: AWS requests by operation, DynamoDB writes, CPU; pass time.
//!
//! Wall-clock figures are bound by the emulator (a Python process serving every request);
//! CPU per run and the write and request counts are Sundial's own.

use anyhow::{Context, bail};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use sundial_adapters::dynamo::DynamoJobStore;
use sundial_adapters::metrics::{Clients, Ledger, writes};
use sundial_adapters::provision::provision;
use sundial_domain::clock::{Clock, ManualClock, SystemClock};
use sundial_domain::job::{Job, JobDocument, JobId};
use sundial_domain::run::RunKey;
use sundial_domain::schedule::ceil_second;
use sundial_shared::config::{Config, Vars, aws_sdk_config};
use sundial_shared::services::Services;

/// CPU time (user + system) of this process so far, from /proc (Linux reports it in 1/100 s).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

struct Env(BTreeMap<&'static str, String>);

impl Vars for Env {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned().or_else(|| std::env::var(name).ok())
    }
}

async fn stack(
    name: &str,
    vars: &[(&'static str, &str)],
    clock: Arc<dyn Clock>,
) -> anyhow::Result<(Services, Clients)> {
    let sdk = aws_sdk_config().await;
    let resources = provision(&sdk, name).await?;
    let mut env = Env(BTreeMap::from([("SUNDIAL_STACK", name.to_string())]));
    for (k, v) in vars {
        env.0.insert(k, v.to_string());
    }
    let config = Config::from_vars(&env, Some(resources))?;
    let clients = Clients::new(&sdk, Ledger::new());
    Ok((Services::new(config, &clients, clock), clients))
}

fn job(i: usize, schedule: Value, created: DateTime<Utc>, next: DateTime<Utc>) -> anyhow::Result<Job> {
    let document: JobDocument = serde_json::from_value(json!({
        "name": format!("bench-{i:05}"),
        "schedule": schedule,
        "target": {"type": "http", "url": "http://127.0.0.1:9/"}
    }))?;
    Ok(Job {
        id: JobId::generate(),
        owner: "bench".into(),
        document,
        version: 1,
        created_at: created,
        updated_at: created,
        next_run_at: Some(next),
        signing_secret: "bench-secret".into(),
        pauses: Vec::new(),
        children: Vec::new(),
    })
}

fn per_run(ledger: &BTreeMap<String, u64>, runs: usize) -> BTreeMap<String, f64> {
    ledger.iter().map(|(k, v)| (k.clone(), *v as f64 / runs.max(1) as f64)).collect()
}

fn write_units(per: &BTreeMap<String, f64>) -> f64 {
    [writes::ITEM, writes::INDEX_PUT, writes::INDEX_REMOVE]
        .iter()
        .map(|k| per.get(*k).copied().unwrap_or(0.0))
        .sum()
}

async fn burst(n: usize) -> anyhow::Result<Value> {
    let name = format!("bench{}", ulid_suffix());
    let (services, clients) = stack(&name, &[("SUNDIAL_DUE_SHARDS", "16")], Arc::new(SystemClock)).await?;
    let now = Utc::now();
    let due = ceil_second(now) + Duration::seconds(5);
    let jobs: Vec<Job> = (0..n)
        .map(|i| job(i, json!({"at": sundial_domain::due::format_instant(due)}), now, due))
        .collect::<anyhow::Result<_>>()?;
    let store =
        DynamoJobStore::new(clients.dynamo.clone(), &services.config.resources.jobs_table, 16, Ledger::new());
    store.import(&jobs).await?;

    let drainer = tokio::process::Command::new(std::env::current_exe()?)
        .args(["drain", &services.config.resources.runs_queue_url, &n.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("starting the drain process")?;

    clients.ledger.reset();
    let cpu_before = cpu_seconds();
    let started = std::time::Instant::now();
    let mut invocations = 0;
    let mut claims = sundial_app::tick::claim::ClaimReport::default();
    while claims.claimed < n && invocations < 100 {
        let report = services.tick.run().await?;
        invocations += 1;
        claims.add(report.claims);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    let ledger = clients.ledger.snapshot();

    let out = drainer.wait_with_output().await?;
    let drained: Value = serde_json::from_slice(&out.stdout).context("reading the drain process's report")?;
    let per = per_run(&ledger, claims.claimed);
    Ok(json!({
        "scenario": "burst",
        "jobs": n,
        "tick_invocations": invocations,
        "seconds_to_claim_and_dispatch_all": elapsed,
        "runs_per_second": claims.claimed as f64 / elapsed,
        "runs_claimed": claims.claimed,
        "messages_sent": claims.dispatched,
        "messages_received": drained["received"],
        "duplicate_messages": drained["duplicates"],
        "lost": n as i64 - drained["distinct"].as_i64().unwrap_or(0),
        "cpu_seconds_total": cpu,
        "cpu_ms_per_run": cpu * 1000.0 / claims.claimed.max(1) as f64,
        "dynamodb_write_units_per_run": write_units(&per),
        "per_run": per,
        "totals": ledger,
        "bound_by": "wall time and runs/s: the emulator (one Python process); CPU, writes and requests: Sundial",
    }))
}

/// Jobs every minute ticked over simulated minutes: writes per run with and without claim-ahead.
async fn frequent(jobs: usize, minutes: i64, claim_ahead_s: &str) -> anyhow::Result<Value> {
    let start: DateTime<Utc> = "2030-01-01T12:00:00Z".parse()?;
    let clock = Arc::new(ManualClock::new(start));
    let name = format!("bench{}", ulid_suffix());
    let vars = [("SUNDIAL_CLAIM_AHEAD_S", claim_ahead_s), ("SUNDIAL_DUE_SHARDS", "4")];
    let (services, clients) = stack(&name, &vars, clock.clone()).await?;
    let list: Vec<Job> = (0..jobs)
        .map(|i| job(i, json!({"cron": "* * * * *"}), start, start + Duration::minutes(1)))
        .collect::<anyhow::Result<_>>()?;
    DynamoJobStore::new(clients.dynamo.clone(), &services.config.resources.jobs_table, 4, Ledger::new())
        .import(&list)
        .await?;
    clients.ledger.reset();
    let mut claimed = 0;
    for m in 0..minutes {
        clock.set(start + Duration::minutes(m));
        claimed += services.tick.run().await?.claims.claimed;
    }
    let ledger = clients.ledger.snapshot();
    let per = per_run(&ledger, claimed);
    Ok(json!({
        "scenario": "frequent",
        "jobs": jobs,
        "simulated_minutes": minutes,
        "claim_ahead_s": claim_ahead_s,
        "runs_claimed": claimed,
        "dynamodb_write_units_per_run_claim_and_dispatch": write_units(&per),
        "per_run": per,
    }))
}

/// The child process of `burst`: receives and deletes messages until `expect` distinct runs
/// arrived (or 10 minutes passed), then prints what it saw.
/// The watchdog over `n` in-flight runs: a quiet pass, then a pass that repairs every run.
async fn watchdog(n: usize) -> anyhow::Result<Value> {
    use sundial_domain::run::{Attempt, RunState};
    let name = format!("bench{}", ulid_suffix());
    let start: DateTime<Utc> = ceil_second(Utc::now());
    let clock = Arc::new(ManualClock::new(start));
    let (services, clients) = stack(&name, &[], clock.clone()).await?;
    let later = start + Duration::days(365);
    let jobs: Vec<Job> =
        (0..n).map(|i| job(i, json!({"cron": "0 0 1 1 *"}), start, later)).collect::<anyhow::Result<_>>()?;
    let store = DynamoJobStore::new(
        clients.dynamo.clone(),
        &services.config.resources.jobs_table,
        8,
        clients.ledger.clone(),
    );
    store.import(&jobs).await?;
    // Each job has one run whose attempt started, with a lease of a minute.
    let mut runs = Vec::with_capacity(n);
    for job in &jobs {
        let mut run = services.claimer.new_run(job, RunKey::manual(start), start, start);
        run.state = RunState::Running;
        run.attempt = 1;
        run.resent_at = Some(start);
        run.lease_until = Some(start + Duration::seconds(60));
        run.attempts = vec![Attempt {
            n: 1,
            started_at: start,
            finished_at: None,
            worker: "bench".into(),
            outcome: None,
            status_code: None,
            error: None,
            output: None,
            callback: None,
        }];
        services.runs.insert(&run).await?;
        runs.push(run);
    }
    let pass = |label: &'static str| {
        let (services, clients) = (&services, &clients);
        async move {
            clients.ledger.reset();
            let cpu = cpu_seconds();
            let began = std::time::Instant::now();
            let report = services.watchdog.run().await?;
            let seconds = began.elapsed().as_secs_f64();
            let cpu_ms = (cpu_seconds() - cpu) * 1000.0;
            let ledger = clients.ledger.snapshot();
            let per = per_run(&ledger, n);
            anyhow::Ok(json!({
                "pass": label,
                "inspected": report.inspected,
                "lost": report.lost,
                "dispatched": report.dispatched,
                "seconds": seconds,
                "cpu_ms_per_run": cpu_ms / n.max(1) as f64,
                "dynamodb_write_units_per_run": write_units(&per),
                "aws_requests_per_run": per,
            }))
        }
    };
    clock.set(start + Duration::seconds(30));
    let quiet = pass("quiet").await?;
    clock.set(start + Duration::seconds(90));
    let repairs = pass("every worker lost").await?;
    Ok(json!({"scenario": "watchdog", "runs": n, "passes": [quiet, repairs],
        "bound_by": "seconds: the emulator; requests, writes and CPU: Sundial"}))
}

async fn drain(queue_url: &str, expect: usize) -> anyhow::Result<()> {
    let sdk = aws_sdk_config().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let (mut received, mut distinct) = (0usize, HashSet::new());
    while distinct.len() < expect && std::time::Instant::now() < deadline {
        let out = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await?;
        let messages = out.messages.unwrap_or_default();
        let mut entries = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let body: Value = serde_json::from_str(m.body().unwrap_or("{}"))?;
            received += 1;
            distinct.insert(format!("{}/{}", body["job_id"], body["run_key"]));
            entries.push(
                aws_sdk_sqs::types::DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()?,
            );
        }
        if !entries.is_empty() {
            sqs.delete_message_batch().queue_url(queue_url).set_entries(Some(entries)).send().await?;
        }
    }
    println!(
        "{}",
        json!({"received": received, "distinct": distinct.len(), "duplicates": received - distinct.len()})
    );
    Ok(())
}

fn ulid_suffix() -> String {
    RunKey::manual(Utc::now()).manual.unwrap_or_default()[20..].to_string()
}

fn table(results: &[Value]) -> String {
    let mut out = String::from(
        "\nscenario   jobs    invocations  seconds   runs/s   CPU ms/run  writes/run  dup  lost\n",
    );
    for r in results {
        if r["scenario"] == "watchdog" {
            for p in r["passes"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "watchdog   {:<7} {:<18} {:<9.2} CPU {:.3} ms/run, {:.2} writes/run, lost {}, dispatched {}\n",
                    r["runs"].as_u64().unwrap_or(0),
                    p["pass"].as_str().unwrap_or(""),
                    p["seconds"].as_f64().unwrap_or(0.0),
                    p["cpu_ms_per_run"].as_f64().unwrap_or(0.0),
                    p["dynamodb_write_units_per_run"].as_f64().unwrap_or(0.0),
                    p["lost"],
                    p["dispatched"],
                ));
            }
        } else if r["scenario"] == "burst" {
            out.push_str(&format!(
                "burst      {:<7} {:<12} {:<9.1} {:<8.1} {:<11.3} {:<11.2} {:<4} {}\n",
                r["jobs"].as_u64().unwrap_or(0),
                r["tick_invocations"].as_u64().unwrap_or(0),
                r["seconds_to_claim_and_dispatch_all"].as_f64().unwrap_or(0.0),
                r["runs_per_second"].as_f64().unwrap_or(0.0),
                r["cpu_ms_per_run"].as_f64().unwrap_or(0.0),
                r["dynamodb_write_units_per_run"].as_f64().unwrap_or(0.0),
                r["duplicate_messages"],
                r["lost"],
            ));
        } else {
            out.push_str(&format!(
                "frequent   {:<7} claim-ahead {:>3} s: {:.2} writes/run to claim and dispatch\n",
                r["jobs"].as_u64().unwrap_or(0),
                r["claim_ahead_s"].as_str().unwrap_or(""),
                r["dynamodb_write_units_per_run_claim_and_dispatch"].as_f64().unwrap_or(0.0),
            ));
        }
    }
    out
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var("AWS_ENDPOINT_URL").is_err() {
        bail!("AWS_ENDPOINT_URL is not set: run through scripts/bench, which starts the emulator");
    }
    match args.first().map(String::as_str) {
        Some("drain") => {
            let expect = args.get(2).and_then(|n| n.parse().ok()).context("drain QUEUE_URL COUNT")?;
            drain(args.get(1).context("drain QUEUE_URL COUNT")?, expect).await
        }
        Some("burst") => {
            let path =
                std::env::var("SUNDIAL_BENCH_OUT").unwrap_or_else(|_| "bench/results/tick.json".into());
            if let Some(dir) = std::path::Path::new(&path).parent() {
                std::fs::create_dir_all(dir)?;
            }
            // Written after every scenario, so a long one cut short keeps the others' figures.
            let save = |results: &Vec<Value>| -> anyhow::Result<()> {
                std::fs::write(&path, serde_json::to_string_pretty(results)? + "\n")?;
                Ok(())
            };
            eprintln!("frequent jobs…");
            let mut results = vec![frequent(100, 10, "60").await?, frequent(100, 10, "300").await?];
            save(&results)?;
            for n in &args[1..] {
                let n: usize = n.parse().context("burst N [N…]")?;
                eprintln!("burst of {n} jobs…");
                results.push(burst(n).await?);
                save(&results)?;
            }
            println!("{}", table(&results));
            println!("figures written to {path}");
            Ok(())
        }
        Some("watchdog") => {
            let path =
                std::env::var("SUNDIAL_BENCH_OUT").unwrap_or_else(|_| "bench/results/watchdog.json".into());
            let mut results = Vec::new();
            for n in &args[1..] {
                let n: usize = n.parse().context("watchdog N [N…]")?;
                eprintln!("watchdog over {n} in-flight runs…");
                results.push(watchdog(n).await?);
                std::fs::write(&path, serde_json::to_string_pretty(&results)? + "\n")?;
            }
            println!("{}", table(&results));
            println!("figures written to {path}");
            Ok(())
        }
        _ => bail!("usage: sundial-bench burst N [N…] | watchdog N [N…] | drain QUEUE_URL COUNT"),
    }
}
