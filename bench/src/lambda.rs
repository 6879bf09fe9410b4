//! `lambda`: the size and cold start of each of the four Lambda functions' binaries.
//!
//! For each binary in a directory (`sundial-api`, `-tick`, `-worker`, `-watchdog`): its size
//! before and after `strip --strip-all` (of a copy), and the time from spawning it to its first
//! `GET /2018-06-01/runtime/invocation/next`, over [`SAMPLES`] cold starts. The Runtime API is a
//! stub served here that records when that request arrives and never answers it, so the time is
//! the function's init alone. The functions get the environment Lambda and `infra/template.yaml`
//! give them, with dummy credentials and `AWS_ENDPOINT_URL` on a closed loopback port: an init
//! that called AWS would fail or stall, and show as such.

use anyhow::{Context, bail};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::Command;
use tokio::sync::mpsc;

const FUNCTIONS: [&str; 4] = ["sundial-api", "sundial-tick", "sundial-worker", "sundial-watchdog"];
/// Cold starts measured per binary.
const SAMPLES: usize = 7;
/// How long one start may take to ask for its first invocation.
const START_TIMEOUT: Duration = Duration::from_secs(10);
const NEXT: &str = "/2018-06-01/runtime/invocation/next";

/// The stub Runtime API: where it listens, and the instants at which `/next` was asked for.
struct Stub {
    addr: SocketAddr,
    asked: mpsc::UnboundedReceiver<Instant>,
}

/// Records the instant, then holds the request open: the function waits there, as for an event.
async fn next(State(asked): State<mpsc::UnboundedSender<Instant>>) -> StatusCode {
    let _ = asked.send(Instant::now());
    std::future::pending().await
}

async fn stub() -> anyhow::Result<Stub> {
    let (tx, asked) = mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new().route(NEXT, get(next)).with_state(tx);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("stub Runtime API stopped: {e}");
        }
    });
    Ok(Stub { addr, asked })
}

/// What a function finds in Lambda: the runtime's variables, the template's, dummy credentials.
fn environment(runtime_api: SocketAddr, function: &str) -> Vec<(&'static str, String)> {
    let arn = "arn:aws:sns:eu-west-1:000000000000:bench-events";
    let queue = "https://sqs.eu-west-1.amazonaws.com/000000000000/bench-runs";
    let fixed = [
        ("AWS_REGION", "eu-west-1"),
        ("AWS_DEFAULT_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        ("AWS_SESSION_TOKEN", "bench"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512"),
        ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST"),
        ("AWS_LAMBDA_LOG_STREAM_NAME", "2030/01/01/[$LATEST]0123456789abcdef"),
        ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand"),
        ("AWS_EXECUTION_ENV", "AWS_Lambda_provided.al2023"),
        ("LAMBDA_TASK_ROOT", "/var/task"),
        ("_HANDLER", "bootstrap"),
        ("TZ", ":UTC"),
        ("SUNDIAL_STACK", "bench"),
        ("SUNDIAL_JOBS_TABLE", "bench-jobs"),
        ("SUNDIAL_RUNS_TABLE", "bench-runs"),
        ("SUNDIAL_IDEMPOTENCY_TABLE", "bench-idempotency"),
        ("SUNDIAL_RUNS_QUEUE_URL", queue),
        ("SUNDIAL_DLQ_URL", "https://sqs.eu-west-1.amazonaws.com/000000000000/bench-runs-dlq"),
        ("SUNDIAL_EVENTS_TOPIC_ARN", arn),
        ("SUNDIAL_DUE_SHARDS", "8"),
        ("SUNDIAL_RETENTION_DAYS", "30"),
        ("SUNDIAL_CAPACITY_LOG", "0"),
        ("SUNDIAL_ALLOWED_NETWORKS", ""),
        ("SUNDIAL_ALLOWED_LAMBDA", ""),
        ("SUNDIAL_ALLOWED_SQS", ""),
        ("SUNDIAL_ALLOWED_SNS", ""),
        ("SUNDIAL_ALLOWED_STATE_MACHINES", ""),
        ("SUNDIAL_ALLOWED_ECS_CLUSTERS", ""),
        ("SUNDIAL_ALLOWED_ECS_TASK_DEFINITIONS", ""),
        ("SUNDIAL_ALLOWED_EVENT_BUSES", ""),
        // The API's own (it refuses to start without the page token key); harmless to the others.
        ("SUNDIAL_API_KEY_HASHES", ""),
        ("SUNDIAL_OPERATORS", ""),
        ("SUNDIAL_PAGE_TOKEN_KEY", "bench-page-token-key-of-at-least-32-bytes"),
        ("SUNDIAL_PUBLIC_URL", "https://bench.execute-api.eu-west-1.amazonaws.com"),
    ];
    let name = function.replacen("sundial-", "bench-", 1);
    let mut vars: Vec<(&'static str, String)> = fixed.iter().map(|(k, v)| (*k, v.to_string())).collect();
    vars.push(("AWS_LAMBDA_RUNTIME_API", runtime_api.to_string()));
    vars.push(("AWS_LAMBDA_LOG_GROUP_NAME", format!("/aws/lambda/{name}")));
    vars.push(("AWS_LAMBDA_FUNCTION_NAME", name));
    vars
}

/// Milliseconds from spawning `binary` to its first `/next`; the child is killed afterwards.
async fn cold_start(binary: &Path, function: &str, stub: &mut Stub) -> anyhow::Result<f64> {
    while stub.asked.try_recv().is_ok() {}
    let began = Instant::now();
    let mut child = Command::new(binary)
        .env_clear()
        .envs(environment(stub.addr, function))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let outcome = tokio::time::timeout(START_TIMEOUT, async {
        tokio::select! {
            at = stub.asked.recv() => Ok(at),
            status = child.wait() => Err(status),
        }
    })
    .await;
    let why = match outcome {
        Ok(Ok(Some(at))) => {
            child.kill().await.with_context(|| format!("stopping {}", binary.display()))?;
            return Ok(at.duration_since(began).as_secs_f64() * 1000.0);
        }
        Ok(Ok(None)) => "the stub Runtime API stopped".to_string(),
        Ok(Err(Ok(status))) => format!("exited ({status}) before asking for an invocation"),
        Ok(Err(Err(e))) => format!("could not be waited for: {e}"),
        Err(_) => format!("did not ask for an invocation within {} s", START_TIMEOUT.as_secs()),
    };
    let _ = child.start_kill();
    let output = child.wait_with_output().await?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    bail!("{}: {why}; stderr tail:\n{}", binary.display(), tail.join("\n"))
}

/// Bytes of `binary` stripped of every symbol: a copy in `scratch`, stripped by `strip`
/// (binutils) or, failing that, `objcopy`.
async fn stripped_bytes(binary: &Path, scratch: &Path) -> anyhow::Result<u64> {
    let copy = scratch.join(binary.file_name().context("a binary path without a file name")?);
    tokio::fs::copy(binary, &copy).await.with_context(|| format!("copying {}", binary.display()))?;
    for tool in ["strip", "objcopy"] {
        let status = Command::new(tool).arg("--strip-all").arg(&copy).status().await;
        if status.is_ok_and(|s| s.success()) {
            return Ok(tokio::fs::metadata(&copy).await?.len());
        }
    }
    bail!("neither `strip --strip-all` nor `objcopy --strip-all` could strip {}", copy.display())
}

/// Sizes and init times of the four functions' binaries in `dir`, built with `profile`.
pub async fn measure(profile: &str, dir: &Path) -> anyhow::Result<Value> {
    let scratch = std::env::temp_dir().join(format!("sundial-bench-lambda-{}", std::process::id()));
    tokio::fs::create_dir_all(&scratch).await?;
    let results = measure_in(profile, dir, &scratch).await;
    let _ = tokio::fs::remove_dir_all(&scratch).await;
    results
}

async fn measure_in(profile: &str, dir: &Path, scratch: &Path) -> anyhow::Result<Value> {
    let mut stub = stub().await?;
    let mut results = Vec::new();
    for function in FUNCTIONS {
        // A cargo profile folder holds `<function>`; cargo lambda's holds `<function>/bootstrap`.
        let binary: PathBuf = match dir.join(function) {
            folder if folder.is_dir() => folder.join("bootstrap"),
            file => file,
        };
        let bytes = tokio::fs::metadata(&binary)
            .await
            .with_context(|| format!("no binary at {}", binary.display()))?
            .len();
        let stripped = stripped_bytes(&binary, scratch).await?;
        let mut samples = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            samples.push(cold_start(&binary, function, &mut stub).await?);
        }
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let (min, median, max) = (sorted[0], sorted[SAMPLES / 2], sorted[SAMPLES - 1]);
        results.push(json!({
            "function": function,
            "profile": profile,
            "bytes": bytes,
            "stripped_bytes": stripped,
            "init_ms": {"min": min, "median": median, "max": max},
            "samples": samples,
        }));
    }
    Ok(Value::Array(results))
}
