//! `sundial-bench`: Sundial's benchmarks, run through `scripts/bench` (which builds them,
//! starts the emulator, runs every command and records the CPU profile). Each command writes
//! its figures to `bench/results/<name>.json`; `table` prints the Markdown summary of what the
//! files hold (also written to `bench/results/summary.md`).
//!
//! - `lag`: start lag through the whole local pipeline ([`lag`]).
//! - `burst N`: only the burst of N of `lag` (to compare a change quickly).
//! - `cost`: units, requests, invocations and dollars per run, by path ([`cost`]);
//!   `audit`: the write units each audited change adds ([`cost::audited_changes`]).
//! - `group N MAX`: N one-second runs drained through a group of MAX ([`group`]).
//! - `watchdog N`: the watchdog's passes over N in-flight runs ([`watchdog`]).
//! - `floor N`: the CPU one AWS request costs, N of each kind ([`floor`]).
//! - `schedule`: next-instant computations a second ([`schedule`]).
//! - `lambda DIR PROFILE…`: the functions' stripped sizes and init times ([`lambda`]).
//! - `profile-summary FILE`: a `perf report` of the `lag` run sorted into parts ([`profile`]).
//! - `target`: the loopback target's child process ([`target`]).
//!
//! Wall-clock figures are bound by the emulator (a Python process serving every request); CPU
//! per run and the units and requests are Sundial's own.

mod cost;
mod floor;
mod group;
mod lag;
mod lambda;
mod profile;
mod report;
mod schedule;
mod stack;
mod target;
mod watchdog;

use anyhow::{Context, bail};

use serde_json::{Value, json};

/// Where the figures go.
fn results_dir() -> std::path::PathBuf {
    std::env::var("SUNDIAL_BENCH_RESULTS").unwrap_or_else(|_| "bench/results".into()).into()
}

/// Writes `figures` to `<results>/<name>.json`.
fn save(name: &str, figures: &Value) -> anyhow::Result<()> {
    let dir = results_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(figures)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!("figures written to {}", path.display());
    Ok(())
}

fn needs_emulator() -> anyhow::Result<()> {
    if std::env::var("AWS_ENDPOINT_URL").is_err() {
        bail!("AWS_ENDPOINT_URL is not set: run through scripts/bench, which starts the emulator");
    }
    Ok(())
}

async fn lag_all() -> anyhow::Result<Value> {
    let mut scenarios = Vec::new();
    for n in [100, 1000] {
        eprintln!("lag: a burst of {n} runs due in the same second…");
        scenarios.push(lag::burst(n).await?);
    }
    eprintln!("lag: the steady mix…");
    scenarios.push(lag::steady().await?);
    eprintln!("lag: trigger now…");
    scenarios.push(lag::trigger_now(50).await?);
    Ok(json!({
        "worker_concurrency": format!("{} pollers × {} messages in hand (the template's MaximumConcurrency × BatchSize)", stack::WORKER_INVOCATIONS, stack::BATCH_SIZE),
        "scenarios": scenarios,
    }))
}

// The functions' runtime (one thread), so that the CPU figures are theirs.
#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    if arg(0) != Some("target") {
        // Logs formatted as a function formats them (JSON, INFO), so that their cost is in the
        // CPU figures, and dropped.
        sundial_wiring::telemetry::init_with_writer(std::io::sink);
    }
    // `scripts/bench` records this process with perf and reports on it by its pid; the target's
    // child process inherits the variable and must not take its place.
    if let Ok(path) = std::env::var("SUNDIAL_BENCH_PID_FILE")
        && arg(0) != Some("target")
    {
        std::fs::write(path, std::process::id().to_string())?;
    }
    match arg(0) {
        Some("target") => target::serve().await,
        Some("lag") => {
            needs_emulator()?;
            save("lag", &lag_all().await?)
        }
        Some("burst") => {
            needs_emulator()?;
            let n = arg(1).unwrap_or("1000").parse().context("burst N")?;
            save("burst", &lag::burst(n).await?)
        }
        Some("cost") => {
            needs_emulator()?;
            save("cost", &cost::paths().await?)
        }
        Some("audit") => {
            needs_emulator()?;
            save("audit", &cost::audited_changes().await?)
        }
        Some("group") => {
            needs_emulator()?;
            let n = arg(1).unwrap_or("300").parse().context("group N")?;
            let max_running = arg(2).unwrap_or("5").parse().context("group MAX_RUNNING")?;
            save("group", &group::drain(n, max_running).await?)
        }
        Some("watchdog") => {
            needs_emulator()?;
            let n = arg(1).unwrap_or("1000").parse().context("watchdog N")?;
            save("watchdog", &watchdog::passes(n).await?)
        }
        Some("floor") => {
            needs_emulator()?;
            let n = arg(1).unwrap_or("2000").parse().context("floor N")?;
            save("floor", &floor::requests(n).await?)
        }
        Some("schedule") => save("schedule", &schedule::next_instants(200_000)?),
        Some("lambda") => {
            let mut all = Vec::new();
            for pair in args[1..].chunks(2) {
                let [dir, profile] = pair else { bail!("lambda DIR PROFILE [DIR PROFILE…]") };
                all.push(lambda::measure(profile, std::path::Path::new(dir)).await?);
            }
            save("lambda", &json!(all))
        }
        Some("profile-summary") => {
            let path = arg(1).context("profile-summary PERF_REPORT")?;
            let report = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
            save("profile", &profile::summarise(&report))
        }
        Some("table") => print_table(),
        _ => bail!(
            "usage: sundial-bench lag | burst N | cost | audit | watchdog [N] | floor [N] | schedule | lambda DIR PROFILE… | profile-summary FILE | table | target"
        ),
    }
}

fn print_table() -> anyhow::Result<()> {
    let table = report::markdown(&results_dir())?;
    std::fs::write(results_dir().join("summary.md"), &table)?;
    println!("{table}");
    Ok(())
}
