//! The watchdog over N in-flight runs: one pass with nothing to repair (the steady state), then
//! one where every run's worker was lost (each attempt ended `lost` and the next dispatched).
//! Figures per run: AWS requests by operation, DynamoDB writes, CPU; pass time.

use crate::stack::{self, counted_writes, cpu_seconds, per_run, reported_units};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use std::sync::Arc;
use sundial_aws::metrics::Capacity;
use sundial_domain::clock::ManualClock;
use sundial_domain::job::Job;
use sundial_domain::run::RunKey;
use sundial_domain::schedule::ceil_second;

/// The watchdog over `n` in-flight runs: a quiet pass, then a pass that repairs every run.
pub async fn passes(n: usize) -> anyhow::Result<Value> {
    use sundial_domain::run::{Attempt, RunState};
    let start: DateTime<Utc> = ceil_second(Utc::now());
    let clock = Arc::new(ManualClock::new(start));
    let (services, clients) = stack::stack(&[], clock.clone(), Capacity::Counted).await?;
    let later = start + Duration::days(365);
    let document =
        json!({"schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": "http://127.0.0.1:9/"}});
    let jobs: Vec<Job> = (0..n)
        .map(|i| stack::job(&format!("watched-{i:05}"), document.clone(), start, Some(later)))
        .collect::<anyhow::Result<_>>()?;
    crate::lag::import(&services, &clients, &jobs).await?;
    // Each job has one run whose attempt started, with a lease of a minute.
    let mut runs = Vec::with_capacity(n);
    for job in &jobs {
        let mut run = services.use_cases.claimer.new_run(job, RunKey::manual(start), start, start);
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
            call_until: None,
            handle: None,
            followed_at: None,
            looks: 0,
            look_tag: None,
            logs_url: None,
        }];
        services.ports.runs.insert(&run, None).await?;
        runs.push(run);
    }
    let pass = |label: &'static str| {
        let (services, clients) = (&services, &clients);
        async move {
            clients.ledger.reset();
            let cpu = cpu_seconds();
            let began = std::time::Instant::now();
            let report = services.use_cases.watchdog.run().await?;
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
                "dynamodb_writes_counted_per_run": counted_writes(&per),
                "dynamodb_write_units_per_run": reported_units(&per, "write"),
                "dynamodb_read_units_per_run": reported_units(&per, "read"),
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
