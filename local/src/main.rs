//! The local runtime: provisions the emulator's resources from `infra/template.yaml`, then serves
//! the API (and, as they land, runs the tick, worker and watchdog loops) in one process until
//! Ctrl-C.

use anyhow::Context;
use std::net::SocketAddr;
use std::sync::Arc;
use sundial_api::{AppState, router};
use sundial_shared::clock::SystemClock;
use sundial_shared::config::{Config, Env, Vars, aws_sdk_config};
use sundial_shared::provision::provision;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    sundial_shared::telemetry::init();
    let stack = Env
        .var("SUNDIAL_STACK")
        .unwrap_or_else(|| "sundial-local".into());
    let listen: SocketAddr = Env
        .var("SUNDIAL_LISTEN")
        .unwrap_or_else(|| "127.0.0.1:8080".into())
        .parse()
        .context("SUNDIAL_LISTEN must be an address such as 127.0.0.1:8080")?;
    let endpoint = Env
        .var("AWS_ENDPOINT_URL")
        .context("AWS_ENDPOINT_URL must point at the emulator")?;

    let sdk = aws_sdk_config().await;
    let resources = provision(&sdk, &stack)
        .await
        .context("creating the stack's resources on the emulator")?;
    let config = Config::from_vars(&Env, Some(resources)).context("reading configuration")?;
    if config.api_keys.is_empty() {
        anyhow::bail!("SUNDIAL_API_KEYS is empty: set it to `key:owner[,key:owner…]`");
    }
    let state = AppState::from_config(
        &config,
        aws_sdk_dynamodb::Client::new(&sdk),
        Arc::new(SystemClock),
    );

    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    println!("Sundial is running.");
    println!("  API:      http://{}/v1/jobs", listener.local_addr()?);
    println!("  Emulator: {endpoint}");
    println!("  Stack:    {stack}");
    println!("Stop with Ctrl-C.");
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving the API")?;
    Ok(())
}
