//! The local runtime as a library: [`services`] provisions the emulator's resources from
//! `infra/template.yaml` and builds Sundial's services over them; [`serve`] runs Sundial in this
//! process until its shutdown signal: the API, the tick and the watchdog every minute, and worker
//! tasks that long-poll the runs queue and call the same handler as the Lambda function. `main`
//! reads the command line and the environment; a test starts and stops the runtime itself.
//! [`sink`]: a loopback target that logs what it receives, to try jobs with.

pub mod sink;
pub mod wire_errors;

use anyhow::Context;
use axum::serve::IncomingStream;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use sundial_api::{AppState, router};
use sundial_aws::metrics::{Clients, Ledger};
use sundial_aws::provision::provision;
use sundial_domain::clock::SystemClock;
use sundial_wiring::config::{Config, Vars, aws_sdk_config};
use sundial_wiring::services::Services;
use tokio::sync::watch;

/// Provisions `stack`'s resources on the emulator and builds the services over them, with
/// configuration from `vars` (the environment, for `main`). Run logs are read from `log_path`;
/// links point at `listen` unless `SUNDIAL_PUBLIC_URL` says otherwise.
pub async fn services(
    vars: &dyn Vars,
    stack: &str,
    log_path: PathBuf,
    listen: &str,
) -> anyhow::Result<Services> {
    let sdk = aws_sdk_config().await;
    let resources = provision(&sdk, stack).await.context("creating the stack's resources on the emulator")?;
    let mut config = Config::from_vars(vars, Some(resources)).context("reading configuration")?;
    config.logs = sundial_wiring::logs::LogLocation::Local(log_path);
    if config.public_url.is_none() {
        // Links in notifications point at the local dashboard.
        config.public_url = Some(format!("http://{listen}"));
    }
    // Targets on this machine are the point of running locally: loopback is allowed unless
    // SUNDIAL_ALLOWED_NETWORKS says otherwise. The API itself and the emulator stay refused.
    let mut network = std::mem::take(&mut config.targets.network);
    if vars.var("SUNDIAL_ALLOWED_NETWORKS").is_none() {
        network = network.allowing_loopback();
    }
    if let Some(url) = &config.public_url {
        network = network.refusing(url);
    }
    config.targets.network = network;
    let clients = Clients::with_capacity_log(&sdk, Ledger::new(), config.capacity_log);
    Ok(Services::new(config, &clients, Arc::new(SystemClock)))
}

/// Serves the API on `listener` and runs the tick, the watchdog and `workers` queue pollers
/// until `shutdown` completes; then stops taking work, lets the attempts in hand finish, and
/// returns.
pub async fn serve(
    services: Services,
    listener: tokio::net::TcpListener,
    workers: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if services.config.api_keys.is_empty() {
        anyhow::bail!("SUNDIAL_API_KEYS is empty: set it to `key:owner[,key:owner…]`");
    }
    let (stop, stopped) = watch::channel(false);
    let tick = tokio::spawn(every_minute(services.clone(), stopped.clone(), Periodic::Tick));
    let watchdog = tokio::spawn(every_minute(services.clone(), stopped.clone(), Periodic::Watchdog));
    let pollers: Vec<_> =
        (0..workers).map(|n| tokio::spawn(poll_runs_queue(services.clone(), n, stopped.clone()))).collect();
    let mut api_stopped = stopped.clone();
    let listener = wire_errors::JsonErrorListener(listener);
    // Each request knows the address it came from: the audit trail records it.
    let app = router(AppState::new(&services));
    let per_connection =
        tower::service_fn(move |stream: IncomingStream<'_, wire_errors::JsonErrorListener>| {
            let peer = axum::extract::ConnectInfo(*stream.remote_addr());
            let app = app.clone().layer(axum::Extension(peer));
            async move { Ok::<_, std::convert::Infallible>(app) }
        });
    let served = axum::serve(listener, per_connection).with_graceful_shutdown(async move {
        let _ = api_stopped.wait_for(|s| *s).await;
    });
    let api = tokio::spawn(async move { served.await });
    shutdown.await;
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
        services.use_cases.worker.clone(),
        services.ports.queue.clone(),
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
        let mut next = sundial_domain::due_index::minute_of(now) + offset;
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
                Periodic::Tick => match services.use_cases.tick.run().await {
                    Ok(report) => tracing::info!(jobs = report.jobs, claimed = report.claims.claimed, "tick"),
                    Err(e) => tracing::error!(error = %e, "tick failed; the next one catches up"),
                },
                Periodic::Watchdog => match services.use_cases.watchdog.run().await {
                    Ok(report) => tracing::info!(report = ?report, "watchdog"),
                    Err(e) => tracing::error!(error = %e, "watchdog pass failed; the next one retries"),
                },
            }
        });
    }
}
