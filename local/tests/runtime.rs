//! The local runtime started and stopped as a library: it serves the API over the emulator until
//! its shutdown signal, then stops and gives its port back.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::HashMap;
use std::time::Duration;

#[tokio::test]
async fn the_runtime_serves_until_its_shutdown_signal() {
    assert!(
        std::env::var("AWS_ENDPOINT_URL").is_ok(),
        "AWS_ENDPOINT_URL is not set: run the suite with scripts/test, which starts the emulator"
    );
    let stack = format!("l{}", ulid::Ulid::generate().to_string().to_ascii_lowercase());
    let vars: HashMap<&str, &str> =
        HashMap::from([("SUNDIAL_STACK", stack.as_str()), ("SUNDIAL_API_KEYS", "k1:alice")]);
    let log = std::env::temp_dir().join(format!("{stack}.log"));
    let services = sundial_local::services(&vars, &stack, log, "127.0.0.1:0").await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(sundial_local::serve(services, listener, 1, async {
        let _ = stopped.await;
    }));

    let client = reqwest::Client::new();
    let jobs = client.get(format!("http://{at}/v1/jobs")).bearer_auth("k1").send().await.unwrap();
    assert_eq!(jobs.status(), 200);
    let body: serde_json::Value = jobs.json().await.unwrap();
    assert_eq!(body["jobs"], serde_json::json!([]), "{body}");
    let anonymous = client.get(format!("http://{at}/v1/jobs")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);

    // What the HTTP layer refuses before any route is JSON too: 101 header fields (past
    // hyper's 100), a header section past its buffer, a request that is not HTTP.
    let many: String = (0..101).map(|i| format!("x-field-{i}: v\r\n")).collect();
    let huge = format!("x-big: {}\r\n", "a".repeat(500 * 1024));
    for (request, status, code) in [
        (format!("GET /v1/jobs HTTP/1.1\r\nhost: x\r\n{many}\r\n"), 431, "headers_too_large"),
        (format!("GET /v1/jobs HTTP/1.1\r\nhost: x\r\n{huge}\r\n"), 431, "headers_too_large"),
        ("NOT HTTP AT ALL\r\n\r\n".to_string(), 400, "malformed_request"),
    ] {
        let (answered, body) = raw_exchange(&at, &request).await;
        assert_eq!(answered, status, "{body}");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
        assert_eq!(body["error"]["code"], code, "{body}");
    }

    stop.send(()).unwrap();
    // A worker's long poll lasts at most a second; a loaded machine gets ample room.
    let stopped = tokio::time::timeout(Duration::from_secs(60), running).await;
    stopped.expect("the runtime stops").expect("its task ends").expect("cleanly");
    let refused = client.get(format!("http://{at}/v1/jobs")).timeout(Duration::from_secs(5)).send().await;
    assert!(refused.is_err(), "the port is still served: {refused:?}");
}

/// Writes `request` on a fresh connection and reads the answer to its end: its status and body.
async fn raw_exchange(at: &std::net::SocketAddr, request: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(at).await.unwrap();
    // The server may answer and close before it has read all of a long request.
    let _ = stream.write_all(request.as_bytes()).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer)).await;
    read.expect("answered in time").ok();
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// The binary's start message names where everything is, and each configured key with its owner;
/// the sink it names answers.
#[tokio::test]
async fn the_start_message_lists_each_key_and_its_owner() {
    use tokio::io::AsyncBufReadExt;
    assert!(std::env::var("AWS_ENDPOINT_URL").is_ok(), "run the suite with scripts/test");
    let stack = format!("l{}", ulid::Ulid::generate().to_string().to_ascii_lowercase());
    let log = std::env::temp_dir().join(format!("{stack}.log"));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sundial-local"))
        .arg("serve")
        .env("SUNDIAL_STACK", &stack)
        .env("SUNDIAL_API_KEYS", "k1:alice, k2:bob")
        .env("SUNDIAL_LISTEN", "127.0.0.1:0")
        .env("SUNDIAL_LOCAL_LOG", &log)
        .env("SUNDIAL_LOCAL_WORKERS", "1")
        // A port of its own: another runtime's sink may hold the default.
        .env("SUNDIAL_SINK_LISTEN", "127.0.0.1:0")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let done = line.starts_with("Stop with Ctrl-C");
            said.push(line);
            if done {
                break;
            }
        }
    };
    // Bounded: a slow first provisioning of the stack's tables takes seconds, not minutes.
    tokio::time::timeout(Duration::from_secs(120), read).await.expect("the start message in time");
    let said = said.join("\n");
    assert!(
        said.contains("API key:  k1  (owner alice)") && said.contains("API key:  k2  (owner bob)"),
        "{said}"
    );
    assert!(said.contains("/ui/"), "{said}");
    // The sink beside it answers any request 200: a target to try jobs with.
    let sink = said.lines().find_map(|l| l.strip_prefix("  Sink:     ")).and_then(|l| l.split(' ').next());
    let sink = sink.unwrap_or_else(|| panic!("no sink in: {said}"));
    let answer = reqwest::Client::new().post(format!("{sink}hooks/report")).body("{}").send().await.unwrap();
    assert_eq!(answer.status(), 200);
    child.kill().await.unwrap();
}
