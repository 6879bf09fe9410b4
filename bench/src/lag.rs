//! Start lag through the whole local pipeline: the tick claims and dispatches, the workers (as
//! many as the template's event source runs at once) start the runs and call a loopback target,
//! which notes when each request arrived. Lag is (arrival − scheduled instant).
//!
//! - `burst(n)`: n one-time jobs due in the same second, claimed by a tick 60 s before it (what
//!   the minute tick gives an instant at the top of the next minute, the least lead it gives).
//! - `steady()`: a mix of jobs every minute, every 10 s, on a rate and once, with the tick every
//!   minute, measured over the instants of 90 s after a minute's warm-up.
//! - `trigger_now(n)`: runs triggered through the API's use case, one after another; lag is
//!   from the call to the target's request.

use crate::stack::{self, OWNER, Workers, cpu_seconds, per_run, percentiles};
use crate::target::{Hit, Target};
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use sundial_aws::dynamo::DynamoJobStore;
use sundial_aws::metrics::{Capacity, Clients, Ledger};
use sundial_domain::clock::SystemClock;
use sundial_domain::due_index::format_instant;
use sundial_domain::job::Job;
use sundial_domain::schedule::ceil_second;
use sundial_domain::validation::stored_schedule;
use sundial_wiring::services::Services;

/// How long before the burst's instant the tick claims it.
const BURST_LEAD_S: i64 = 60;

/// How long after the last instant the figures wait for stragglers before counting a loss.
const GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Writes `jobs` as the API would have (in batches: creating them is not what is measured).
pub async fn import(services: &Services, clients: &Clients, jobs: &[Job]) -> anyhow::Result<()> {
    let store = DynamoJobStore::new(
        clients.dynamo.clone(),
        &services.config.resources.jobs_table,
        &services.config.resources.runs_table,
        services.config.due_shards,
        Ledger::new(),
    );
    store.import(jobs).await?;
    Ok(())
}

/// Lag figures of `hits` against the runs `expected` ((job, instant) pairs): the first request
/// of each run counts; a second request for a run is a duplicate; a run never requested a loss.
fn lag_figures(hits: &[Hit], expected: &HashSet<(String, i64)>) -> Value {
    let mut first: HashMap<(String, i64), f64> = HashMap::new();
    let mut duplicates = 0;
    for hit in hits {
        let key = (hit.job_id.clone(), hit.scheduled_at.timestamp());
        if !expected.contains(&key) {
            continue;
        }
        if first.insert(key, hit.lag_ms()).is_some() {
            duplicates += 1;
        }
    }
    let losses = expected.len() - first.len();
    let mut lags: Vec<f64> = first.values().map(|ms| ms / 1000.0).collect();
    let at: Vec<i64> = hits.iter().map(|h| h.at_ms).collect();
    let span_s = match (at.iter().min(), at.iter().max()) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1000.0,
        _ => 0.0,
    };
    json!({
        "runs": expected.len(),
        "lag_s": percentiles(&mut lags),
        "duplicates": duplicates,
        "losses": losses,
        "first_to_last_request_s": span_s,
        "runs_per_second": if span_s > 0.0 { first.len() as f64 / span_s } else { 0.0 },
    })
}

/// `n` one-time jobs due in the same second.
pub async fn burst(n: usize) -> anyhow::Result<Value> {
    let (services, clients) = stack::stack(&[], Arc::new(SystemClock), Capacity::NotAsked).await?;
    let target = Target::start().await?;
    let now = Utc::now();
    let due = ceil_second(now) + Duration::seconds(BURST_LEAD_S);
    let document =
        json!({"schedule": {"at": format_instant(due)}, "target": {"type": "http", "url": target.url("ok")}});
    let jobs: Vec<Job> = (0..n)
        .map(|i| stack::job(&format!("burst-{i:05}"), document.clone(), now, Some(due)))
        .collect::<anyhow::Result<_>>()?;
    import(&services, &clients, &jobs).await?;
    let expected: HashSet<(String, i64)> = jobs.iter().map(|j| (j.id.to_string(), due.timestamp())).collect();

    clients.ledger.reset();
    let cpu_before_tick = cpu_seconds();
    let began = std::time::Instant::now();
    let (mut claimed, mut invocations) = (0, 0);
    while claimed < n && invocations < 10 {
        claimed += services.use_cases.tick.run().await?.claims.claimed;
        invocations += 1;
    }
    let claim_s = began.elapsed().as_secs_f64();
    let cpu_tick = cpu_seconds() - cpu_before_tick;

    // The workers start a second before the instant: the event source's polling is AWS's, not
    // a cost of Sundial's, so idle receives are kept out of the CPU figure.
    let start_workers = due - Duration::seconds(1) - Utc::now();
    tokio::time::sleep(start_workers.to_std().unwrap_or_default()).await;
    let cpu_before_work = cpu_seconds();
    let workers = Workers::start(&services);
    tokio::time::sleep(lead_time(due)).await;
    let (emulator_before, wall) = (stack::emulator_cpu_seconds(), std::time::Instant::now());
    let all_in = target
        .wait_until(GRACE, |hits| hits.iter().map(|h| &h.run_id).collect::<HashSet<_>>().len() >= n)
        .await;
    // How busy the emulator was from the instant to the last request: one Python process, so a
    // share near 1 core means it, not Sundial, bounds the rate.
    let emulator_cores = stack::emulator_cpu_seconds()
        .zip(emulator_before)
        .map(|(after, before)| (after - before) / wall.elapsed().as_secs_f64().max(1e-3));
    workers.stop().await;
    let cpu_work = cpu_seconds() - cpu_before_work;
    let cpu = cpu_tick + cpu_work;
    let ledger = clients.ledger.snapshot();
    let mut figures = lag_figures(&target.hits(), &expected);
    figures["scenario"] = json!(format!("burst of {n}"));
    figures["all_arrived"] = json!(all_in);
    figures["tick_invocations"] = json!(invocations);
    figures["claim_and_dispatch_s"] = json!(claim_s);
    figures["cpu_ms_per_run"] = json!(cpu * 1000.0 / n.max(1) as f64);
    figures["tick_cpu_ms_per_run"] = json!(cpu_tick * 1000.0 / n.max(1) as f64);
    figures["worker_cpu_ms_per_run"] = json!(cpu_work * 1000.0 / n.max(1) as f64);
    figures["emulator_cores_busy"] = json!(emulator_cores);
    figures["aws_requests_per_run"] = json!(per_run(&ledger, n));
    Ok(figures)
}

/// Time until `t` from now, at least zero.
fn lead_time(t: DateTime<Utc>) -> std::time::Duration {
    (t - Utc::now()).to_std().unwrap_or_default()
}

/// The mix of jobs of the steady scenario, by name prefix: (count, schedule).
fn mix(window_start: DateTime<Utc>, window_s: i64) -> Vec<(String, Value)> {
    let mut mix = Vec::new();
    for i in 0..200 {
        mix.push((format!("minute-{i:03}"), json!({"cron": "* * * * *"})));
    }
    for i in 0..30 {
        mix.push((format!("ten-seconds-{i:03}"), json!({"cron": "*/10 * * * * *"})));
    }
    for i in 0..50 {
        mix.push((format!("rate-{i:03}"), json!({"rate": "2 minutes"})));
    }
    for i in 0..100 {
        let at = window_start + Duration::seconds((i * 7919) % window_s);
        mix.push((format!("once-{i:03}"), json!({"at": format_instant(at)})));
    }
    mix
}

/// A few hundred jobs of every kind, the tick every minute.
pub async fn steady() -> anyhow::Result<Value> {
    const WARM_UP_S: i64 = 60;
    const WINDOW_S: i64 = 90;
    let (services, clients) = stack::stack(&[], Arc::new(SystemClock), Capacity::NotAsked).await?;
    let target = Target::start().await?;
    let start = ceil_second(Utc::now());
    let (from, to) = (start + Duration::seconds(WARM_UP_S), start + Duration::seconds(WARM_UP_S + WINDOW_S));
    let mut jobs = Vec::new();
    let mut expected = HashSet::new();
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for (name, schedule) in mix(from, WINDOW_S) {
        let document = json!({"schedule": schedule, "target": {"type": "http", "url": target.url("ok")}});
        let mut job = stack::job(&name, document, start, None)?;
        let schedule = stored_schedule(&job)?.ok_or_else(|| anyhow::anyhow!("{name} has no schedule"))?;
        job.next_run_at = schedule.first_at_or_after(start);
        let mut cursor = from - Duration::seconds(1);
        while let Some(next) = schedule.next_after(cursor).filter(|t| *t < to) {
            expected.insert((job.id.to_string(), next.timestamp()));
            *kinds
                .entry(name.rsplit_once('-').map(|(k, _)| k.to_string()).unwrap_or_default())
                .or_default() += 1;
            cursor = next;
        }
        jobs.push(job);
    }
    import(&services, &clients, &jobs).await?;
    let workers = Workers::start(&services);
    clients.ledger.reset();
    let cpu_before = cpu_seconds();
    // The tick at the start and every minute after, each pass a task of its own as in Lambda.
    let ticks = {
        let services = services.clone();
        tokio::spawn(async move {
            let mut at = start;
            let mut passes = Vec::new();
            while at < to {
                tokio::time::sleep(lead_time(at)).await;
                let services = services.clone();
                passes.push(tokio::spawn(async move {
                    services.use_cases.tick.run().await.map(|r| r.claims.claimed)
                }));
                at += Duration::seconds(60);
            }
            let mut claimed = 0;
            for pass in passes {
                claimed += pass.await??;
            }
            anyhow::Ok(claimed)
        })
    };
    let all_in = target
        .wait_until(lead_time(to) + GRACE, |hits| {
            let seen: HashSet<_> =
                hits.iter().map(|h| (h.job_id.clone(), h.scheduled_at.timestamp())).collect();
            expected.iter().all(|k| seen.contains(k))
        })
        .await;
    let claimed = ticks.await??;
    workers.stop().await;
    let cpu = cpu_seconds() - cpu_before;
    let hits = target.hits();
    let runs_total = hits.len().max(1);
    let mut figures = lag_figures(&hits, &expected);
    figures["scenario"] = json!("steady mix");
    figures["jobs"] = json!(jobs.len());
    figures["runs_in_window_by_kind"] = json!(kinds);
    figures["window_s"] = json!(WINDOW_S);
    figures["all_arrived"] = json!(all_in);
    figures["runs_claimed"] = json!(claimed);
    figures["cpu_ms_per_run"] = json!(cpu * 1000.0 / runs_total as f64);
    figures["aws_requests_per_run"] = json!(per_run(&clients.ledger.snapshot(), runs_total));
    Ok(figures)
}

/// `n` runs triggered now, one after another.
pub async fn trigger_now(n: usize) -> anyhow::Result<Value> {
    let (services, clients) = stack::stack(&[], Arc::new(SystemClock), Capacity::NotAsked).await?;
    let target = Target::start().await?;
    let now = Utc::now();
    let document =
        json!({"schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": target.url("ok")}});
    let job = stack::job("trigger", document, now, Some(now + Duration::days(365)))?;
    import(&services, &clients, std::slice::from_ref(&job)).await?;
    let workers = Workers::start(&services);
    // The pollers' first receives are under way before the first trigger.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let mut lags = Vec::with_capacity(n);
    let mut missing = 0;
    for _ in 0..n {
        let called = Utc::now().timestamp_millis();
        let run = services.use_cases.jobs.trigger(&OWNER.to_string(), &job.id, None).await?;
        let id = run.id().to_string();
        let arrived = target
            .wait_until(std::time::Duration::from_secs(30), |hits| hits.iter().any(|h| h.run_id == id))
            .await;
        match target.hits().iter().find(|h| h.run_id == id) {
            Some(hit) if arrived => lags.push((hit.at_ms - called) as f64 / 1000.0),
            _ => missing += 1,
        }
    }
    workers.stop().await;
    let hits = target.hits();
    let distinct: HashSet<&str> = hits.iter().map(|h| h.run_id.as_str()).collect();
    Ok(json!({
        "scenario": format!("trigger now × {n}"),
        "runs": n,
        "lag_s": percentiles(&mut lags),
        "duplicates": hits.len() - distinct.len(),
        "losses": missing,
    }))
}
