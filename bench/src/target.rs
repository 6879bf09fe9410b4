//! The benchmark's HTTP target: a child process (`sundial-bench target`) serving loopback, so
//! its CPU is not counted as Sundial's, that prints one JSON line per request it receives (the
//! run, the attempt, the scheduled instant, the callback token and when it arrived); and the
//! parent's side, which reads those lines as they come.
//!
//! The path says how the target answers: `/ok` 200, `/fail-once` 500 to a first attempt and 200
//! after, `/accept` 202 (the run is then completed through its callback token), `/slow` 200
//! after a second's work.

use anyhow::Context;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use sundial_domain::target::headers;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Notify;

/// One request the target received.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hit {
    pub run_id: String,
    pub job_id: String,
    pub attempt: u32,
    pub scheduled_at: DateTime<Utc>,
    pub token: String,
    /// When it arrived, in Unix milliseconds.
    pub at_ms: i64,
}

impl Hit {
    /// Milliseconds from the scheduled instant to the request's arrival.
    pub fn lag_ms(&self) -> f64 {
        (self.at_ms - self.scheduled_at.timestamp_millis()) as f64
    }
}

fn header(headers: &HeaderMap, name: &str) -> String {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

async fn answer(Path(behaviour): Path<String>, headers: HeaderMap) -> StatusCode {
    let at_ms = Utc::now().timestamp_millis();
    let attempt: u32 = header(&headers, headers::ATTEMPT).parse().unwrap_or(0);
    let hit = Hit {
        run_id: header(&headers, headers::RUN_ID),
        job_id: header(&headers, headers::JOB_ID),
        attempt,
        scheduled_at: DateTime::parse_from_rfc3339(&header(&headers, headers::SCHEDULED_AT))
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default(),
        token: header(&headers, headers::CALLBACK_TOKEN),
        at_ms,
    };
    if let Ok(line) = serde_json::to_string(&hit) {
        let mut out = tokio::io::stdout();
        let _ = out.write_all(format!("{line}\n").as_bytes()).await;
        let _ = out.flush().await;
    }
    match behaviour.as_str() {
        "fail-once" if attempt <= 1 => StatusCode::INTERNAL_SERVER_ERROR,
        "accept" => StatusCode::ACCEPTED,
        "slow" => {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            StatusCode::OK
        }
        _ => StatusCode::OK,
    }
}

/// The child process's main: serves until its parent closes its stdin.
pub async fn serve() -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening {}", listener.local_addr()?);
    let app = axum::Router::new().route("/{behaviour}", axum::routing::post(answer));
    let closed = async {
        let mut sink = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut tokio::io::stdin(), &mut sink).await;
    };
    axum::serve(listener, app).with_graceful_shutdown(closed).await?;
    Ok(())
}

/// The parent's handle on a running target.
#[derive(Debug)]
pub struct Target {
    pub base_url: String,
    hits: Arc<Mutex<Vec<Hit>>>,
    arrived: Arc<Notify>,
    _child: tokio::process::Child,
}

impl Target {
    pub async fn start() -> anyhow::Result<Target> {
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .arg("target")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting the target process")?;
        let stdout = child.stdout.take().context("the target's stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next_line().await?.context("the target exited before listening")?;
        let address = first.strip_prefix("listening ").context("the target's first line")?.to_string();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(Notify::new());
        let (sink, notify) = (hits.clone(), arrived.clone());
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(hit) = serde_json::from_str::<Hit>(&line) {
                    sink.lock().unwrap_or_else(|e| e.into_inner()).push(hit);
                    notify.notify_waiters();
                }
            }
        });
        Ok(Target { base_url: format!("http://{address}"), hits, arrived, _child: child })
    }

    /// The URL of a behaviour (`ok`, `fail-once`, `accept`).
    pub fn url(&self, behaviour: &str) -> String {
        format!("{}/{behaviour}", self.base_url)
    }

    /// Every request received so far.
    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until `done` holds of the requests received, or `limit` passed; whether it held.
    pub async fn wait_until(&self, limit: std::time::Duration, done: impl Fn(&[Hit]) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let notified = self.arrived.notified();
            if done(&self.hits.lock().unwrap_or_else(|e| e.into_inner())) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return done(&self.hits.lock().unwrap_or_else(|e| e.into_inner()));
            }
        }
    }
}
