//! The local runtime: provisions the emulator's resources from `infra/template.yaml`, then runs
//! Sundial in one process until Ctrl-C: the API, the tick and the watchdog every minute, and
//! worker tasks that long-poll the runs queue and call the same handler as the Lambda function.
//!
//! `sundial-local` serves; `sundial-local tick` runs one tick on demand and prints its summary,
//! `sundial-local watchdog` one watchdog pass and its report;
//! `sundial-local redrive` moves the dead-letter queue's messages back to the runs queue.

use anyhow::Context;
use std::net::SocketAddr;
use std::sync::Arc;
use sundial_adapters::metrics::{Clients, Ledger};
use sundial_adapters::provision::provision;
use sundial_api::{AppState, router};
use sundial_domain::clock::SystemClock;
use sundial_shared::config::{Config, Env, Vars, aws_sdk_config};
use sundial_shared::services::Services;
use tokio::sync::watch;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Logs go to stdout and to a file the dashboard reads a run's lines from.
    let log_path = Env.var("SUNDIAL_LOCAL_LOG").unwrap_or_else(|| ".local/sundial.log".into());
    if let Some(dir) = std::path::Path::new(&log_path).parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening the log file {log_path}"))?;
    {
        use tracing_subscriber::fmt::writer::MakeWriterExt;
        sundial_shared::telemetry::init_with_writer(std::io::stdout.and(std::sync::Mutex::new(log_file)));
    }
    let command = std::env::args().nth(1).unwrap_or_else(|| "serve".into());
    let stack = Env.var("SUNDIAL_STACK").unwrap_or_else(|| "sundial-local".into());
    let endpoint = Env.var("AWS_ENDPOINT_URL").context("AWS_ENDPOINT_URL must point at the emulator")?;

    let sdk = aws_sdk_config().await;
    let resources =
        provision(&sdk, &stack).await.context("creating the stack's resources on the emulator")?;
    let mut config = Config::from_vars(&Env, Some(resources)).context("reading configuration")?;
    config.logs = sundial_shared::logs::LogLocation::Local(log_path.into());
    if config.public_url.is_none() {
        // Links in notifications point at the local dashboard.
        let listen = Env.var("SUNDIAL_LISTEN").unwrap_or_else(|| "127.0.0.1:8080".into());
        config.public_url = Some(format!("http://{listen}"));
    }
    // Targets on this machine are the point of running locally: loopback is allowed unless
    // SUNDIAL_ALLOWED_NETWORKS says otherwise. The API itself and the emulator stay refused.
    let mut network = std::mem::take(&mut config.targets.network);
    if Env.var("SUNDIAL_ALLOWED_NETWORKS").is_none() {
        network = network.allowing_loopback();
    }
    if let Some(url) = &config.public_url {
        network = network.refusing(url);
    }
    config.targets.network = network;
    let clients = Clients::with_capacity_log(&sdk, Ledger::new(), config.capacity_log);
    let services = Services::new(config, &clients, Arc::new(SystemClock));

    match command.as_str() {
        "tick" => {
            let report = services.tick.run().await?;
            println!("{}", serde_json::to_string_pretty(&sundial_tick::Summary::from(&report))?);
            Ok(())
        }
        "watchdog" => {
            let report = services.watchdog.run().await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
        "redrive" => {
            let moved = services.inbox.redrive().await?;
            println!("moved {moved} message(s) from the dead-letter queue back to the runs queue");
            Ok(())
        }
        "serve" => serve(services, &stack, &endpoint).await,
        other => {
            anyhow::bail!("unknown command `{other}`: use `serve` (default), `tick`, `watchdog` or `redrive`")
        }
    }
}

async fn serve(services: Services, stack: &str, endpoint: &str) -> anyhow::Result<()> {
    if services.config.api_keys.is_empty() {
        anyhow::bail!("SUNDIAL_API_KEYS is empty: set it to `key:owner[,key:owner…]`");
    }
    let listen: SocketAddr = Env
        .var("SUNDIAL_LISTEN")
        .unwrap_or_else(|| "127.0.0.1:8080".into())
        .parse()
        .context("SUNDIAL_LISTEN must be an address such as 127.0.0.1:8080")?;
    let listener =
        tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    let (stop, stopped) = watch::channel(false);
    let tick = tokio::spawn(every_minute(services.clone(), stopped.clone(), Periodic::Tick));
    let watchdog = tokio::spawn(every_minute(services.clone(), stopped.clone(), Periodic::Watchdog));
    let workers: usize = Env.var("SUNDIAL_LOCAL_WORKERS").and_then(|n| n.parse().ok()).unwrap_or(4);
    let pollers: Vec<_> =
        (0..workers).map(|n| tokio::spawn(poll_runs_queue(services.clone(), n, stopped.clone()))).collect();

    println!("Sundial is running.");
    println!("  API:      http://{}/v1/jobs", listener.local_addr()?);
    println!("  Dashboard: http://{}/ui/", listener.local_addr()?);
    println!("  Emulator: {endpoint}");
    println!("  Stack:    {stack}");
    println!("  Tick:     every minute (run one now: target/debug/sundial-local tick)");
    println!(
        "  Watchdog: every minute, 30 s after the tick (run one now: target/debug/sundial-local watchdog)"
    );
    println!("  Workers:  {workers} polling the runs queue");
    println!("Stop with Ctrl-C.");
    let mut api_stopped = stopped.clone();
    let served = axum::serve(listener, router(AppState::new(&services))).with_graceful_shutdown(async move {
        let _ = api_stopped.wait_for(|s| *s).await;
    });
    let api = tokio::spawn(async move { served.await });
    let _ = tokio::signal::ctrl_c().await;
    let _ = stop.send(true);
    api.await?.context("serving the API")?;
    tick.await?;
    watchdog.await?;
    for poller in pollers {
        poller.await?;
    }
    Ok(())
}

/// One local worker: long-polls the runs queue and handles messages like the Lambda function,
/// ten at a time, each slot refilled as soon as its message is done. Stopping lets the attempts
/// in hand finish (a poll waits at most a second for messages).
async fn poll_runs_queue(services: Services, n: usize, stopped: watch::Receiver<bool>) {
    let identity = format!("local:{}/worker-{n}", std::process::id());
    sundial_app::worker::poll::consume(
        services.worker.clone(),
        services.queue.clone(),
        services.inbox.clone(),
        identity,
        10,
        stopped,
    )
    .await;
}

/// The jobs EventBridge schedules every minute in AWS.
#[derive(Debug, Clone, Copy)]
enum Periodic {
    /// At the start of the minute.
    Tick,
    /// Half a minute later, so it sees the tick's work settled.
    Watchdog,
}

/// Runs the tick or the watchdog once a minute, as the EventBridge schedules do in AWS.
async fn every_minute(services: Services, mut stopped: watch::Receiver<bool>, job: Periodic) {
    let offset = match job {
        Periodic::Tick => chrono::Duration::zero(),
        Periodic::Watchdog => chrono::Duration::seconds(30),
    };
    loop {
        let now = chrono::Utc::now();
        let mut next = sundial_domain::due::minute_of(now) + offset;
        if next <= now {
            next += chrono::Duration::minutes(1);
        }
        let wait = (next - now).to_std().unwrap_or_default();
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
        // Each pass is a task of its own, as each EventBridge invocation is a Lambda of its
        // own: a pass that outlasts its minute never makes the next one wait or skip.
        let services = services.clone();
        tokio::spawn(async move {
            match job {
                Periodic::Tick => match services.tick.run().await {
                    Ok(report) => tracing::info!(jobs = report.jobs, claimed = report.claims.claimed, "tick"),
                    Err(e) => tracing::error!(error = %e, "tick failed; the next one catches up"),
                },
                Periodic::Watchdog => match services.watchdog.run().await {
                    Ok(report) => tracing::info!(report = ?report, "watchdog"),
                    Err(e) => tracing::error!(error = %e, "watchdog pass failed; the next one retries"),
                },
            }
        });
    }
}
