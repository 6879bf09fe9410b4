//! `sundial-local`: the local runtime's command line. `sundial-local` serves until Ctrl-C;
//! `sundial-local tick` runs one tick on demand and prints its summary, `sundial-local watchdog`
//! one watchdog pass and its report; `sundial-local redrive` moves the dead-letter queue's
//! messages back to the runs queue.

use anyhow::Context;
use std::net::SocketAddr;
use sundial_wiring::config::{Env, Vars};

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
        sundial_wiring::telemetry::init_with_writer(std::io::stdout.and(std::sync::Mutex::new(log_file)));
    }
    let command = std::env::args().nth(1).unwrap_or_else(|| "serve".into());
    let stack = Env.var("SUNDIAL_STACK").unwrap_or_else(|| "sundial-local".into());
    let endpoint = Env.var("AWS_ENDPOINT_URL").context("AWS_ENDPOINT_URL must point at the emulator")?;
    let listen = Env.var("SUNDIAL_LISTEN").unwrap_or_else(|| "127.0.0.1:8080".into());
    let services = sundial_local::services(&Env, &stack, log_path.into(), &listen).await?;

    match command.as_str() {
        "tick" => {
            let report = services.use_cases.tick.run().await?;
            println!("{}", serde_json::to_string_pretty(&sundial_tick::Summary::from(&report))?);
            Ok(())
        }
        "watchdog" => {
            let report = services.use_cases.watchdog.run().await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
        "redrive" => {
            let moved = services.inbox.redrive().await?;
            println!("moved {moved} message(s) from the dead-letter queue back to the runs queue");
            Ok(())
        }
        "serve" => {
            let listen: SocketAddr =
                listen.parse().context("SUNDIAL_LISTEN must be an address such as 127.0.0.1:8080")?;
            let listener =
                tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
            let workers: usize = Env.var("SUNDIAL_LOCAL_WORKERS").and_then(|n| n.parse().ok()).unwrap_or(4);
            let at = listener.local_addr()?;
            println!("Sundial is running.");
            println!("  API:      http://{at}/v1/jobs");
            println!("  Dashboard: http://{at}/ui/");
            println!("  Emulator: {endpoint}");
            println!("  Stack:    {stack}");
            // The keys configured here, each with its owner (this machine's own: shown to its user).
            let configured = Env.var("SUNDIAL_API_KEYS").unwrap_or_default();
            for (key, owner) in sundial_domain::auth::entries(&configured).unwrap_or_default() {
                println!("  API key:  {key}  (owner {owner})");
            }
            println!("  Tick:     every minute (run one now: target/debug/sundial-local tick)");
            println!(
                "  Watchdog: every minute, 30 s after the tick (run one now: target/debug/sundial-local watchdog)"
            );
            println!("  Workers:  {workers} polling the runs queue");
            let sink = Env.var("SUNDIAL_SINK_LISTEN").unwrap_or_else(|| "127.0.0.1:8099".into());
            if sink != "off" {
                // A target to try jobs with; a port in use (another runtime's sink) only skips it.
                match tokio::net::TcpListener::bind(&sink).await {
                    Ok(sink) => {
                        println!(
                            "  Sink:     http://{}/ (a target that logs what it receives)",
                            sink.local_addr()?
                        );
                        tokio::spawn(sundial_local::sink::serve(sink, async {
                            let _ = tokio::signal::ctrl_c().await;
                        }));
                    }
                    Err(e) => println!("  Sink:     not started ({sink}: {e})"),
                }
            }
            println!("Stop with Ctrl-C.");
            let ctrl_c = async {
                let _ = tokio::signal::ctrl_c().await;
            };
            sundial_local::serve(services, listener, workers, ctrl_c).await
        }
        other => {
            anyhow::bail!("unknown command `{other}`: use `serve` (default), `tick`, `watchdog` or `redrive`")
        }
    }
}
