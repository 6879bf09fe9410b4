//! The Markdown summary of the figures in the results folder: the machine, then one table per
//! benchmark whose file is there (start lag, cost per run, CPU profile, Lambda, schedule maths,
//! watchdog).

use serde_json::Value;
use std::fmt::Write;
use std::path::Path;

fn read(dir: &Path, name: &str) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join(format!("{name}.json"))).ok()?;
    serde_json::from_str(&text).ok()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// A figure with `decimals` decimals, or a dash where the scenario has none.
fn or_dash(v: &Value, decimals: usize) -> String {
    if v.is_null() { "–".to_string() } else { format!("{:.decimals$}", f(v)) }
}

/// The machine the figures were measured on.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kib| kib / 1024.0 / 1024.0)
        .unwrap_or(0.0);
    let emulator = std::env::var("SUNDIAL_BENCH_EMULATOR").unwrap_or_else(|_| "the emulator".into());
    format!("{cores} cores ({model}), {mem_gib:.0} GiB; AWS emulated by {emulator} on loopback")
}

/// The summary of everything in `dir`.
pub fn markdown(dir: &Path) -> anyhow::Result<String> {
    let mut out = String::new();
    writeln!(out, "Measured on {}.\n", machine())?;
    if let Some(lag) = read(dir, "lag") {
        writeln!(out, "### Start lag (target request − scheduled instant)\n")?;
        writeln!(out, "Workers: {}.\n", lag["worker_concurrency"].as_str().unwrap_or(""))?;
        writeln!(
            out,
            "| scenario | runs | p50 s | p95 s | p99 s | max s | runs/s | duplicates | losses | CPU ms/run |"
        )?;
        writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
        for s in lag["scenarios"].as_array().into_iter().flatten() {
            let l = &s["lag_s"];
            let (rate, cpu) = (or_dash(&s["runs_per_second"], 0), or_dash(&s["cpu_ms_per_run"], 2));
            writeln!(
                out,
                "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {rate} | {} | {} | {cpu} |",
                s["scenario"].as_str().unwrap_or(""),
                s["runs"],
                f(&l["p50"]),
                f(&l["p95"]),
                f(&l["p99"]),
                f(&l["max"]),
                s["duplicates"],
                s["losses"],
            )?;
        }
        writeln!(out)?;
    }
    if let Some(cost) = read(dir, "cost") {
        writeln!(out, "### Cost per run\n")?;
        writeln!(
            out,
            "| schedule | path | write units | of which the job's creation | read units | DynamoDB req | SQS req | Lambda inv | GB-s | $ per million runs | $, DynamoDB provisioned |"
        )?;
        writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
        for r in cost["rows"].as_array().into_iter().flatten() {
            let p = &r["per_run"];
            let requests = |service: &str| -> f64 {
                p["aws_requests"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter(|(k, _)| k.starts_with(&format!("aws.{service}.")))
                            .map(|(_, v)| f(v))
                            .sum()
                    })
                    .unwrap_or(0.0)
            };
            writeln!(
                out,
                "| {} | {} | {:.2} | {} | {:.2} | {:.2} | {:.2} | {:.1} | {:.4} | {:.2} | {:.2} |",
                r["schedule"].as_str().unwrap_or(""),
                r["path"].as_str().unwrap_or(""),
                f(&p["write_units"]),
                or_dash(&r["claim_run"]["job_creation"]["write_units"], 2),
                f(&p["read_units"]),
                requests("DynamoDB"),
                requests("SQS"),
                f(&p["lambda_invocations"]),
                f(&p["lambda_gb_s"]),
                f(&p["dollars_per_million_runs"]["total"]),
                f(&p["dollars_per_million_runs"]["total_provisioned"]),
            )?;
        }
        writeln!(
            out,
            "\nEventBridge Scheduler: ${:.2} per million (no run history); with a status write per run (a Lambda writing one item): ${:.2} (${:.2} provisioned); with the ledger Sundial keeps on the happy path (a fenced start write and an end write): ${:.2} (${:.2} provisioned). Units as the emulator reports them (`ReturnConsumedCapacity`: writes by DynamoDB's size rules, reads a unit per request whatever the size: exact for items up to 4 KB); provisioned: {}; Lambda duration modelled at {} ms per AWS request plus a {} ms target answer, {} GB.\n",
            f(&cost["eventbridge_scheduler_per_million"]),
            f(&cost["eventbridge_scheduler_with_status_write_per_million"]["total"]),
            f(&cost["eventbridge_scheduler_with_status_write_per_million"]["total_provisioned"]),
            f(&cost["eventbridge_scheduler_with_ledger_per_million"]["total"]),
            f(&cost["eventbridge_scheduler_with_ledger_per_million"]["total_provisioned"]),
            cost["model"]["provisioned"].as_str().unwrap_or(""),
            cost["model"]["aws_request_ms"],
            cost["model"]["target_answer_ms"],
            cost["model"]["memory_gb"],
        )?;
    }
    if let Some(audited) = read(dir, "audit") {
        writeln!(
            out,
            "### Write units each audited change adds
"
        )?;
        writeln!(out, "| change | write units, unrecorded | with its audit record | added |")?;
        writeln!(out, "|---|---:|---:|---:|")?;
        for c in audited["changes"].as_array().into_iter().flatten() {
            writeln!(
                out,
                "| {} | {:.2} | {:.2} | {:.2} |",
                c["change"].as_str().unwrap_or(""),
                f(&c["write_units"]),
                f(&c["with_record"]),
                f(&c["added"]),
            )?;
        }
        writeln!(out)?;
    }
    if let Some(profile) = read(dir, "profile") {
        writeln!(out, "### Where the CPU goes (perf, {} samples)\n", profile["samples"])?;
        writeln!(out, "| part | share of samples |")?;
        writeln!(out, "|---|---:|")?;
        for c in profile["categories"].as_array().into_iter().flatten() {
            writeln!(out, "| {} | {:.1} % |", c["category"].as_str().unwrap_or(""), f(&c["percent"]))?;
        }
        writeln!(out)?;
    }
    if let Some(floor) = read(dir, "floor") {
        bound_by_requests(&mut out, &floor, read(dir, "lag").as_ref())?;
    }
    if let Some(lambda) = read(dir, "lambda") {
        writeln!(out, "### Lambda binaries\n")?;
        writeln!(out, "| function | profile | stripped MiB | init median ms | init max ms |")?;
        writeln!(out, "|---|---|---:|---:|---:|")?;
        for set in lambda.as_array().into_iter().flatten() {
            for b in set.as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "| {} | {} | {:.1} | {:.1} | {:.1} |",
                    b["function"].as_str().unwrap_or(""),
                    b["profile"].as_str().unwrap_or(""),
                    f(&b["stripped_bytes"]) / 1_048_576.0,
                    f(&b["init_ms"]["median"]),
                    f(&b["init_ms"]["max"]),
                )?;
            }
        }
        writeln!(out)?;
    }
    if let Some(schedule) = read(dir, "schedule") {
        writeln!(out, "### Schedule maths\n")?;
        writeln!(out, "| schedule | next instants / s | ns each |")?;
        writeln!(out, "|---|---:|---:|")?;
        for r in schedule.as_array().into_iter().flatten() {
            writeln!(
                out,
                "| {} | {:.0} | {:.0} |",
                r["schedule"].as_str().unwrap_or(""),
                f(&r["per_second"]),
                f(&r["ns_each"])
            )?;
        }
        writeln!(out)?;
    }
    if let Some(watchdog) = read(dir, "watchdog") {
        writeln!(out, "### Watchdog over {} in-flight runs\n", watchdog["runs"])?;
        writeln!(out, "| pass | seconds | CPU ms/run | write units/run | read units/run |")?;
        writeln!(out, "|---|---:|---:|---:|---:|")?;
        for p in watchdog["passes"].as_array().into_iter().flatten() {
            writeln!(
                out,
                "| {} | {:.1} | {:.3} | {:.2} | {:.2} |",
                p["pass"].as_str().unwrap_or(""),
                f(&p["seconds"]),
                f(&p["cpu_ms_per_run"]),
                f(&p["dynamodb_write_units_per_run"]),
                f(&p["dynamodb_read_units_per_run"]),
            )?;
        }
        writeln!(out)?;
    }
    Ok(out)
}

/// The floor (CPU per AWS request) and, for each start-lag scenario, what its requests per run
/// alone cost at that floor beside the CPU per run measured.
fn bound_by_requests(out: &mut String, floor: &Value, lag: Option<&Value>) -> anyhow::Result<()> {
    writeln!(
        out,
        "### What bounds CPU per run: the AWS request
"
    )?;
    writeln!(out, "| request (alone, {} of each) | CPU ms |", floor["requests_each"])?;
    writeln!(out, "|---|---:|")?;
    let each = floor["cpu_ms_per_request"].as_object().cloned().unwrap_or_default();
    for (request, ms) in &each {
        writeln!(out, "| {request} | {:.3} |", f(ms))?;
    }
    let mean = each.values().map(f).sum::<f64>() / each.len().max(1) as f64;
    let scenarios = lag.and_then(|l| l["scenarios"].as_array()).cloned().unwrap_or_default();
    if !scenarios.is_empty() {
        writeln!(
            out,
            "
| scenario | AWS requests per run | × {mean:.3} ms | CPU ms/run measured |"
        )?;
        writeln!(out, "|---|---:|---:|---:|")?;
    }
    for s in &scenarios {
        let requests: f64 = s["aws_requests_per_run"]
            .as_object()
            .map(|m| m.iter().filter(|(k, _)| k.starts_with("aws.")).map(|(_, v)| f(v)).sum())
            .unwrap_or(0.0);
        if requests == 0.0 {
            continue;
        }
        writeln!(
            out,
            "| {} | {requests:.1} | {:.2} | {} |",
            s["scenario"].as_str().unwrap_or(""),
            requests * mean,
            or_dash(&s["cpu_ms_per_run"], 2),
        )?;
    }
    writeln!(out)?;
    Ok(())
}
