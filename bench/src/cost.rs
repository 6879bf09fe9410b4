//! What a run costs, by path: DynamoDB units billed (as the emulator reports them with
//! `ReturnConsumedCapacity = INDEXES`, from item sizes and index writes), AWS requests by
//! operation, Lambda invocations and GB-seconds, turned into dollars per million runs at
//! published on-demand prices, beside EventBridge Scheduler.
//!
//! A run's cost is measured in two phases on separate stacks, because the first depends on the
//! schedule and the second on how the target answers:
//! - **claim**: ticks over ten simulated minutes (a manual clock) claim and dispatch the runs of
//!   one-time jobs, jobs every minute and jobs every 10 s (claim-ahead amortises the job's own
//!   write over several instants); a one-time job's creation through the API's use case counts
//!   as part of its run, since each one-time run needs one.
//! - **execution**: runs due now, executed by the workers against the loopback target, answered
//!   200 (happy), 500 then 200 (one retry), or 202 then two heartbeats and a completion through
//!   the callback use cases (what the API does for `/v1/runs/{id}/heartbeat|complete`); or a
//!   Step Functions execution of 25 s followed to its end by the worker's looks.

use crate::lag::import;
use crate::stack::{self, OWNER, Workers, per_run, reported_units};
use crate::target::Target;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use sundial_app::run_control::Completion;
use sundial_aws::metrics::{Capacity, Clients, Ledger};
use sundial_domain::clock::{ManualClock, SystemClock};
use sundial_domain::due_index::format_instant;
use sundial_domain::job::{Job, JobDocument};
use sundial_domain::run::RunId;
use sundial_domain::schedule::ceil_second;
use sundial_domain::validation::stored_schedule;
use sundial_wiring::services::Services;

/// Published on-demand prices, us-east-1, in dollars per million (GB-s: per GB-second).
pub mod price {
    /// DynamoDB on-demand, per million write request units (since November 2024).
    pub const WRITE_UNIT: f64 = 0.625;
    /// DynamoDB on-demand, per million read request units.
    pub const READ_UNIT: f64 = 0.125;
    /// SQS standard queue, per million requests (64 KiB each).
    pub const SQS_REQUEST: f64 = 0.40;
    /// SNS, per million publishes.
    pub const SNS_PUBLISH: f64 = 0.50;
    /// Lambda, per million requests.
    pub const LAMBDA_REQUEST: f64 = 0.20;
    /// Lambda x86_64, per GB-second (× 1e6 for per million).
    pub const LAMBDA_GB_S: f64 = 0.000_016_666_7;
    /// EventBridge Scheduler, per million invocations (after 14 million free a month).
    pub const EVENTBRIDGE_SCHEDULER: f64 = 1.00;
    /// DynamoDB provisioned capacity, per write and read capacity unit-hour.
    pub const PROVISIONED_WRITE_UNIT_HOUR: f64 = 0.000_65;
    pub const PROVISIONED_READ_UNIT_HOUR: f64 = 0.000_13;
    /// The share of provisioned capacity a steady load uses (auto scaling's usual target).
    pub const PROVISIONED_UTILISATION: f64 = 0.7;

    /// Dollars per million writes (or reads) at provisioned capacity, `PROVISIONED_UTILISATION`
    /// of it used: a unit-hour serves 3,600 of them at full use.
    pub fn provisioned_per_million(unit_hour: f64) -> f64 {
        unit_hour / (3600.0 * PROVISIONED_UTILISATION) * 1e6
    }
}

/// The model of a Lambda invocation's billed duration: AWS answers a DynamoDB or SQS request in
/// about this many milliseconds from inside the region (single-digit; the emulator's own figures
/// are not AWS's), plus the target's answer, which the worker waits for.
pub const AWS_REQUEST_MS: f64 = 6.0;
/// The target's answer time assumed for the worker's billed duration.
pub const TARGET_ANSWER_MS: f64 = 100.0;
/// Every function's memory (the template's `Globals.Function.MemorySize`), in GB.
pub const MEMORY_GB: f64 = 0.25;

/// What one phase cost, per run.
#[derive(Debug, Clone, Default)]
struct Share {
    requests: BTreeMap<String, f64>,
    /// Units by kind, table and index (`write.jobs/by-due`), the stack's prefix left out.
    units: BTreeMap<String, f64>,
    write_units: f64,
    read_units: f64,
    /// Worker or API invocations.
    invocations: f64,
    /// Billed milliseconds of those invocations, by the model above.
    billed_ms: f64,
}

impl Share {
    fn from_ledger(ledger: &BTreeMap<String, u64>, runs: usize) -> Share {
        let per = per_run(ledger, runs);
        let counted = format!("{}.", sundial_aws::metrics::COUNTED);
        let units = per
            .iter()
            .filter_map(|(k, v)| {
                let rest = k.strip_prefix(&counted)?;
                // `write.bench<suffix>-jobs/by-due` → `write.jobs/by-due`
                let (kind, table) = rest.split_once('.')?;
                let table = table.split_once('-').map(|(_, t)| t).unwrap_or(table);
                Some((format!("{kind}.{table}"), v / 1000.0))
            })
            .collect();
        Share {
            write_units: reported_units(&per, "write"),
            read_units: reported_units(&per, "read"),
            requests: per.into_iter().filter(|(k, _)| k.starts_with("aws.")).collect(),
            units,
            ..Share::default()
        }
    }

    fn aws_requests(&self, service: &str) -> f64 {
        let prefix = format!("aws.{service}.");
        self.requests.iter().filter(|(k, _)| k.starts_with(&prefix)).map(|(_, v)| v).sum()
    }

    fn plus(&self, other: &Share) -> Share {
        let add = |a: &BTreeMap<String, f64>, b: &BTreeMap<String, f64>| {
            let mut sum = a.clone();
            for (k, v) in b {
                *sum.entry(k.clone()).or_default() += v;
            }
            sum
        };
        Share {
            requests: add(&self.requests, &other.requests),
            units: add(&self.units, &other.units),
            write_units: self.write_units + other.write_units,
            read_units: self.read_units + other.read_units,
            invocations: self.invocations + other.invocations,
            billed_ms: self.billed_ms + other.billed_ms,
        }
    }

    /// Dollars per million runs, by part.
    fn dollars(&self) -> Value {
        let dynamodb = self.write_units * price::WRITE_UNIT + self.read_units * price::READ_UNIT;
        let provisioned = self.write_units
            * price::provisioned_per_million(price::PROVISIONED_WRITE_UNIT_HOUR)
            + self.read_units * price::provisioned_per_million(price::PROVISIONED_READ_UNIT_HOUR);
        let sqs = self.aws_requests("SQS") * price::SQS_REQUEST;
        let sns = self.aws_requests("SNS") * price::SNS_PUBLISH;
        let lambda = self.invocations * price::LAMBDA_REQUEST
            + self.billed_ms / 1000.0 * MEMORY_GB * price::LAMBDA_GB_S * 1e6;
        json!({
            "dynamodb": dynamodb, "sqs": sqs, "sns": sns, "lambda": lambda,
            "total": dynamodb + sqs + sns + lambda,
            "dynamodb_provisioned": provisioned,
            "total_provisioned": provisioned + sqs + sns + lambda,
        })
    }

    fn to_json(&self) -> Value {
        json!({
            "write_units": self.write_units,
            "read_units": self.read_units,
            "lambda_invocations": self.invocations,
            "lambda_gb_s": self.billed_ms / 1000.0 * MEMORY_GB,
            "aws_requests": self.requests,
            "units_by_table": self.units,
            "dollars_per_million_runs": self.dollars(),
        })
    }
}

fn document(schedule: Value, url: &str) -> Value {
    json!({"schedule": schedule, "target": {"type": "http", "url": url}, "retry": {"max_attempts": 3, "backoff_s": 1}})
}

/// How a path's jobs are run: what the target answers, and the job's concurrency policy.
#[derive(Debug, Clone, Copy)]
struct Execution {
    path: &'static str,
    /// The loopback target's behaviour (`ok`, `fail-once`, `accept`).
    behaviour: &'static str,
    /// `allow`, or `forbid`: each run's start passes the job's start fence (its read of the
    /// fence and of the holder's run, and its take).
    concurrency: &'static str,
}

/// A schedule document, given the simulated start.
type ScheduleFrom = fn(DateTime<Utc>) -> Value;

/// Simulated minutes the claim phase ticks over.
const MINUTES: i64 = 10;

/// What the tick's passes over `MINUTES` minutes ask of AWS with nothing due: a fixed cost per
/// minute whatever the load (its queries of every shard of the minutes it reads), taken out of
/// the claim phase's per-run figures.
async fn idle_ticks(start: DateTime<Utc>) -> anyhow::Result<BTreeMap<String, u64>> {
    let clock = Arc::new(ManualClock::new(start));
    let (services, clients) = stack::stack(&[], clock.clone(), Capacity::Counted).await?;
    clients.ledger.reset();
    for minute in 0..MINUTES {
        clock.set(start + Duration::minutes(minute));
        services.use_cases.tick.run().await?;
    }
    Ok(clients.ledger.snapshot())
}

/// `a − b`, counter by counter, never below zero.
fn minus(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    a.iter().map(|(k, v)| (k.clone(), v.saturating_sub(b.get(k).copied().unwrap_or(0)))).collect()
}

/// One schedule of the claim phase: its jobs, and the configuration its stack runs with.
struct Kind {
    name: &'static str,
    schedule: ScheduleFrom,
    jobs: usize,
    vars: &'static [(&'static str, &'static str)],
    /// Bytes of payload each job carries (its item's size is what its writes cost).
    payload: usize,
}

/// Claiming and dispatching the runs of `kind.jobs` jobs over ten simulated minutes.
async fn claim(kind: &Kind) -> anyhow::Result<(Share, Value)> {
    let Kind { name: kind, schedule, jobs: count, vars, payload } = *kind;
    let document = |schedule: Value| {
        let mut doc = document(schedule, "http://127.0.0.1:9/ok");
        if payload > 0 {
            doc["payload"] = json!({"filler": "x".repeat(payload)});
        }
        doc
    };
    let start: DateTime<Utc> = ceil_second(Utc::now()) + Duration::days(1);
    let schedule = schedule(start);
    let idle = idle_ticks(start).await?;
    let clock = Arc::new(ManualClock::new(start));
    let (services, clients) = stack::stack(vars, clock.clone(), Capacity::Counted).await?;
    let mut jobs: Vec<Job> = Vec::with_capacity(count);
    let one_time = schedule.get("at").is_some();
    // What creating a one-time job's definition costs (its job item, name lock and owner count,
    // and their index entries), apart from claiming its run.
    let mut creation: Option<Share> = None;
    clients.ledger.reset();
    if one_time {
        // Created through the API's use case: a one-time run needs its job created.
        for i in 0..count {
            let mut doc = document(schedule.clone());
            doc["name"] = json!(format!("{kind}-{i:04}"));
            let doc: JobDocument = serde_json::from_value(doc)?;
            jobs.push(services.use_cases.jobs.create(&OWNER.to_string(), doc).await?);
        }
        creation = Some(Share::from_ledger(&clients.ledger.snapshot(), count));
    } else {
        for i in 0..count {
            let mut job = stack::job(&format!("{kind}-{i:04}"), document(schedule.clone()), start, None)?;
            job.next_run_at = stored_schedule(&job)?.and_then(|s| s.first_at_or_after(start));
            jobs.push(job);
        }
        import(&services, &clients, &jobs).await?;
        clients.ledger.reset();
    }
    let mut claimed = 0;
    for minute in 0..MINUTES {
        clock.set(start + Duration::minutes(minute));
        claimed += services.use_cases.tick.run().await?.claims.claimed;
    }
    let mut share = Share::from_ledger(&minus(&clients.ledger.snapshot(), &idle), claimed);
    // A one-time job's creation is one API invocation; the tick's invocations are a fixed cost
    // per minute, not per run (see the notes).
    if one_time {
        share.invocations = 1.0;
        share.billed_ms = share.requests.values().sum::<f64>() * AWS_REQUEST_MS;
    }
    let idle = Share::from_ledger(&idle, MINUTES as usize);
    Ok((
        share,
        json!({
            "jobs": count, "simulated_minutes": MINUTES, "runs_claimed": claimed,
            "idle_tick_per_minute": idle.to_json(),
            "job_creation": creation.map(|c| c.to_json()),
        }),
    ))
}

/// How long the state machine of the Step Functions path runs: its looks at 2, 5, 10, 20 and
/// 40 s see it running four times and ended the fifth.
const EXECUTION_S: u64 = 25;

/// A state machine that waits [`EXECUTION_S`] and succeeds; its ARN.
async fn waiting_state_machine() -> anyhow::Result<String> {
    let sfn = aws_sdk_sfn::Client::new(&sundial_wiring::config::aws_sdk_config().await);
    let definition = json!({"StartAt": "Work", "States": {
        "Work": {"Type": "Wait", "Seconds": EXECUTION_S, "Next": "Done"},
        "Done": {"Type": "Succeed"}
    }});
    let made = sfn
        .create_state_machine()
        .name(format!("bench-machine-{}", stack::unique_suffix()))
        .definition(definition.to_string())
        .role_arn("arn:aws:iam::000000000000:role/bench-machine")
        .send()
        .await?;
    Ok(made.state_machine_arn)
}

/// Executing `n` runs due now whose target answers as `behaviour` says (`stepfunctions`: a
/// state machine's execution of [`EXECUTION_S`], followed to its end).
async fn execute(execution: Execution, n: usize) -> anyhow::Result<(Share, Value)> {
    let Execution { behaviour, concurrency, .. } = execution;
    let machines = [("SUNDIAL_ALLOWED_STATE_MACHINES", "arn:aws:states:*:*:stateMachine:bench-machine-*")];
    let (services, clients) = stack::stack(&machines, Arc::new(SystemClock), Capacity::Counted).await?;
    let machine = if behaviour == "stepfunctions" { Some(waiting_state_machine().await?) } else { None };
    let target = Target::start().await?;
    let now = Utc::now();
    let due = ceil_second(now) + Duration::seconds(3);
    let jobs: Vec<Job> = (0..n)
        .map(|i| {
            let mut document = document(json!({"at": format_instant(due)}), &target.url(behaviour));
            document["concurrency"] = json!(concurrency);
            if let Some(machine) = &machine {
                document["target"] = json!({"type": "stepfunctions", "state_machine_arn": machine});
            }
            stack::job(&format!("{behaviour}-{i:03}"), document, now, Some(due))
        })
        .collect::<anyhow::Result<_>>()?;
    import(&services, &clients, &jobs).await?;
    services.use_cases.tick.run().await?;
    clients.ledger.reset();
    let workers = Workers::start(&services);
    let attempts = if behaviour == "fail-once" { 2 } else { 1 };
    let limit = std::time::Duration::from_secs(60);
    let arrived = match machine {
        Some(_) => ended(&services, &jobs, limit + std::time::Duration::from_secs(EXECUTION_S)).await?,
        None => target.wait_until(limit, |hits| hits.len() >= n * attempts).await,
    };
    // The API's share: heartbeats and the completion of accepted runs, counted apart.
    let mut api_requests = 0.0;
    if behaviour == "accept" {
        // The worker records the acceptance after the request: wait until every run shows it.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let before: u64 =
            clients.ledger.snapshot().iter().filter(|(k, _)| k.starts_with("aws.")).map(|(_, v)| v).sum();
        for hit in target.hits() {
            let id = RunId::parse(&hit.run_id).ok_or_else(|| anyhow::anyhow!("run id {}", hit.run_id))?;
            services.use_cases.run_control.heartbeat(&id, &hit.token).await?;
            services.use_cases.run_control.heartbeat(&id, &hit.token).await?;
            let done =
                Completion { succeeded: true, output: Some("done".into()), error: None, permanent: false };
            services.use_cases.run_control.complete(&id, &hit.token, done).await?;
        }
        let after: u64 =
            clients.ledger.snapshot().iter().filter(|(k, _)| k.starts_with("aws.")).map(|(_, v)| v).sum();
        api_requests = (after - before) as f64 / n as f64;
    }
    workers.stop().await;
    let mut share = Share::from_ledger(&clients.ledger.snapshot(), n);
    // The local pollers' receives (idle ones included) and single deletes stand in for the
    // Lambda event source's: at low load one receive and one batch delete per attempt.
    share.requests.remove("aws.SQS.ReceiveMessage");
    share.requests.remove("aws.SQS.DeleteMessage");
    share.requests.insert("aws.SQS.ReceiveMessage (event source)".into(), attempts as f64);
    share.requests.insert("aws.SQS.DeleteMessageBatch (event source)".into(), attempts as f64);
    if machine.is_some() {
        // Each look is a message the event source receives and deletes: one invocation each.
        let looks = share.requests.get("aws.SFN.DescribeExecution").copied().unwrap_or_default();
        share.requests.insert("aws.SQS.ReceiveMessage (event source)".into(), attempts as f64 + looks);
        share.requests.insert("aws.SQS.DeleteMessageBatch (event source)".into(), attempts as f64 + looks);
    }
    let worker_requests = share.requests.values().sum::<f64>() - api_requests;
    // At low load every attempt's message is a batch of its own: one invocation per attempt.
    let api_calls = if behaviour == "accept" { 3.0 } else { 0.0 };
    let looks = share.requests.get("aws.SFN.DescribeExecution").copied().unwrap_or_default();
    share.invocations = attempts as f64 + api_calls + looks;
    share.billed_ms =
        worker_requests * AWS_REQUEST_MS + attempts as f64 * TARGET_ANSWER_MS + api_requests * AWS_REQUEST_MS;
    Ok((share, json!({"runs": n, "all_arrived": arrived, "requests": target.hits().len()})))
}

/// Waits until every run of `jobs` has ended; whether they did within `limit`. It reads the runs
/// through services of its own, whose requests are not counted as the runs' cost.
async fn ended(services: &Services, jobs: &[Job], limit: std::time::Duration) -> anyhow::Result<bool> {
    let sdk = sundial_wiring::config::aws_sdk_config().await;
    let uncounted = Clients::with_capacity(&sdk, Ledger::new(), Capacity::NotAsked);
    let watcher = Services::new(services.config.clone(), &uncounted, Arc::new(SystemClock));
    let deadline = std::time::Instant::now() + limit;
    loop {
        let mut open = 0;
        for job in jobs {
            let page = watcher.ports.runs.list(&job.id, 10, None, None).await?;
            open += page.items.iter().filter(|r| !r.state.is_terminal()).count()
                + usize::from(page.items.is_empty());
        }
        if open == 0 {
            return Ok(true);
        }
        if std::time::Instant::now() > deadline {
            return Ok(false);
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Every path's cost per run.
pub async fn paths() -> anyhow::Result<Value> {
    // Each schedule from the simulated start.
    // "every 5 minutes, claim-ahead 900 s" measures the lever for jobs a few minutes apart: the
    // job advanced once per three instants instead of once per instant (not the default; see
    // docs/decisions.md, Performance).
    // "every minute, 8 KB payload": a job's own writes cost by its item's size (its `by-due`
    // entries do not: the index holds keys only), runs do not (they do not copy the payload).
    let every_5_minutes: ScheduleFrom = |_| json!({"cron": "*/5 * * * *"});
    let every_minute: ScheduleFrom = |_| json!({"cron": "* * * * *"});
    let kinds = [
        Kind {
            // Beyond the lookahead, so that the tick claims it (a job due sooner is claimed by
            // its creation, through the same claim path) and its creation is measured apart.
            name: "one-time",
            schedule: |start| json!({"at": format_instant(start + Duration::minutes(5))}),
            jobs: 100,
            vars: &[],
            payload: 0,
        },
        Kind { name: "every minute", schedule: every_minute, jobs: 100, vars: &[], payload: 0 },
        Kind {
            name: "every 10 s",
            schedule: |_| json!({"cron": "*/10 * * * * *"}),
            jobs: 20,
            vars: &[],
            payload: 0,
        },
        Kind { name: "every 5 minutes", schedule: every_5_minutes, jobs: 100, vars: &[], payload: 0 },
        Kind {
            name: "every 5 minutes, claim-ahead 900 s",
            schedule: every_5_minutes,
            jobs: 100,
            vars: &[("SUNDIAL_CLAIM_AHEAD_S", "900")],
            payload: 0,
        },
        Kind {
            name: "every minute, 8 KB payload",
            schedule: every_minute,
            jobs: 100,
            vars: &[],
            payload: 8192,
        },
    ];
    let mut claims = Vec::new();
    for kind in &kinds {
        eprintln!("cost: claiming {}…", kind.name);
        claims.push((kind.name, claim(kind).await?));
    }
    let paths = [
        Execution { path: "happy", behaviour: "ok", concurrency: "allow" },
        Execution { path: "happy, forbid", behaviour: "ok", concurrency: "forbid" },
        Execution { path: "one retry", behaviour: "fail-once", concurrency: "allow" },
        Execution { path: "202 + 2 heartbeats", behaviour: "accept", concurrency: "allow" },
        Execution {
            path: "Step Functions, 25 s, followed",
            behaviour: "stepfunctions",
            concurrency: "allow",
        },
    ];
    let mut executions = Vec::new();
    for execution in paths {
        eprintln!("cost: executing {}…", execution.path);
        executions.push((execution.path, execute(execution, 20).await?));
    }
    let mut rows = Vec::new();
    for (kind, (claim, claim_info)) in &claims {
        for (path, (execution, execution_info)) in &executions {
            let total = claim.plus(execution);
            rows.push(json!({
                "schedule": kind, "path": path,
                "per_run": total.to_json(),
                "claim": claim.to_json(), "claim_run": claim_info,
                "execution": execution.to_json(), "execution_run": execution_info,
            }));
        }
    }
    Ok(json!({
        "rows": rows,
        "eventbridge_scheduler_per_million": price::EVENTBRIDGE_SCHEDULER,
        "eventbridge_scheduler_with_status_write_per_million": eventbridge_with_writes(1.0),
        "eventbridge_scheduler_with_ledger_per_million": eventbridge_with_writes(2.0),
        "units_source": "DynamoDB capacity as the emulator (ministack) reports it with ReturnConsumedCapacity=INDEXES: writes by DynamoDB's rules (item size rounded up to 1 KB, each index write counted); reads 1 unit a request (0.5 eventually consistent) whatever the size and number of the items read, which is DynamoDB's rule for a GetItem of an item up to 4 KB (the worker's reads) and under-counts larger items (an 8 KB job: 3 units a consistent read) and batch reads (a unit per item)",
        "model": {
            "aws_request_ms": AWS_REQUEST_MS,
            "target_answer_ms": TARGET_ANSWER_MS,
            "memory_gb": MEMORY_GB,
            "worker_invocations": "one per attempt (a batch of one, at low load; up to 10 messages share one under load)",
            "tick": "one invocation a minute whatever the load: a fixed cost, not per run",
            "status_write_comparison": "EventBridge Scheduler invoking a Lambda that writes one status item (1 WRU) and waits for the target",
            "ledger_comparison": "the same with the ledger Sundial keeps for a run on its happy path: a start write fenced against EventBridge's duplicate deliveries and an end write (2 WRU)",
            "provisioned": format!("DynamoDB at provisioned capacity, {} % of it used", price::PROVISIONED_UTILISATION * 100.0),
        },
    }))
}

/// EventBridge Scheduler invoking a Lambda that makes `writes` one-unit writes and waits for
/// the target, in dollars per million runs: DynamoDB on demand and at provisioned capacity.
fn eventbridge_with_writes(writes: f64) -> Value {
    let lambda = price::LAMBDA_REQUEST
        + ((writes + 1.0) * AWS_REQUEST_MS + TARGET_ANSWER_MS) / 1000.0
            * MEMORY_GB
            * price::LAMBDA_GB_S
            * 1e6;
    let fixed = price::EVENTBRIDGE_SCHEDULER + lambda;
    json!({
        "total": fixed + writes * price::WRITE_UNIT,
        "total_provisioned": fixed + writes * price::provisioned_per_million(price::PROVISIONED_WRITE_UNIT_HOUR),
    })
}

/// How many times each change is made, recorded and not, to measure what its record adds.
const CHANGES: usize = 10;

/// The write units each kind of change made through the API costs, unrecorded (as Sundial's own
/// writes are) and with its audit record (as an API request's are), measured on one stack: the
/// difference is what the audit trail adds. A change that was a single write becomes a
/// transaction with its record, which DynamoDB bills at two units per KB per item.
pub async fn audited_changes() -> anyhow::Result<Value> {
    use sundial_app::keys::Keys;
    use sundial_app::use_cases::UseCases;
    use sundial_domain::audit::{Actor, ActorKind, Stamp};
    use sundial_domain::keys::{KeyDocument, Principal, Role};
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let (services, clients) = stack::stack(&[], clock.clone(), Capacity::Counted).await?;
    let stamp = Stamp {
        actor: Actor { kind: ActorKind::Key, name: "bench-editor".into(), key_id: Some("0".repeat(20)) },
        action: "bench".into(),
        route: "POST /bench".into(),
        request_id: "bench".into(),
        source: Some("127.0.0.1".into()),
    };
    let plain = services.use_cases.clone();
    let recorded = plain.acting(stamp);
    let owner = OWNER.to_string();
    let admin = Principal::admin(OWNER);
    let units = |before: &BTreeMap<String, u64>| {
        let spent = minus(&clients.ledger.snapshot(), before);
        reported_units(&per_run(&spent, CHANGES), "write")
    };
    let mut rows = Vec::new();
    for (label, cases) in [("plain", &plain), ("recorded", &recorded)] {
        let uc: &UseCases = cases;
        let keys: &Keys = &uc.keys;
        let mut row = BTreeMap::new();
        let mut ids = Vec::new();
        let start = clients.ledger.snapshot();
        for n in 0..CHANGES {
            let doc = json!({"name": format!("audited-{label}-{n}"), "schedule": {"cron": "0 0 1 1 *"},
                "target": {"type": "http", "url": "http://127.0.0.1:9/ok"}});
            let doc: JobDocument = serde_json::from_value(doc)?;
            ids.push(uc.jobs.create(&owner, doc).await?.id);
        }
        row.insert("job create", units(&start));
        let start = clients.ledger.snapshot();
        for id in &ids {
            uc.jobs.patch(&owner, id, &json!({"description": "edited"}), Default::default()).await?;
        }
        row.insert("job edit", units(&start));
        let start = clients.ledger.snapshot();
        for id in &ids {
            uc.jobs.pause(&owner, id, Default::default()).await?;
        }
        row.insert("job pause", units(&start));
        for id in &ids {
            uc.jobs.resume(&owner, id, Default::default()).await?;
        }
        let start = clients.ledger.snapshot();
        let mut runs = Vec::new();
        for id in &ids {
            runs.push(uc.jobs.trigger(&owner, id, None).await?.id());
        }
        row.insert("trigger (its run's insert)", units(&start));
        let start = clients.ledger.snapshot();
        for run in &runs {
            uc.run_control.cancel(&owner, run).await?;
        }
        row.insert("run cancel", units(&start));
        let start = clients.ledger.snapshot();
        for n in 0..CHANGES {
            let group = sundial_domain::group::GroupDocument { max_running: 2 };
            uc.groups.put(&owner, &format!("g-{label}-{n}"), &group).await?;
        }
        row.insert("group put", units(&start));
        let start = clients.ledger.snapshot();
        let mut made = Vec::new();
        for n in 0..CHANGES {
            let document = KeyDocument {
                name: format!("k-{label}-{n}"),
                role: Role::Viewer,
                expires_at: None,
                subject: None,
            };
            made.push(keys.create(&admin, &document).await?.key.id);
        }
        row.insert("key create", units(&start));
        let start = clients.ledger.snapshot();
        for id in &made {
            keys.revoke(&owner, id).await?;
        }
        row.insert("key revoke", units(&start));
        rows.push((label, row));
    }
    let (without, with) = (&rows[0].1, &rows[1].1);
    let changes: Vec<Value> = without
        .iter()
        .map(|(change, plain)| {
            let recorded = with.get(change).copied().unwrap_or(0.0);
            json!({"change": change, "write_units": plain, "with_record": recorded, "added": recorded - plain})
        })
        .collect();
    Ok(json!({"changes": changes, "per": CHANGES}))
}
