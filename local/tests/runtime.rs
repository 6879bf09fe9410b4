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

    stop.send(()).unwrap();
    // A worker's long poll lasts at most a second; a loaded machine gets ample room.
    let stopped = tokio::time::timeout(Duration::from_secs(60), running).await;
    stopped.expect("the runtime stops").expect("its task ends").expect("cleanly");
    let refused = client.get(format!("http://{at}/v1/jobs")).timeout(Duration::from_secs(5)).send().await;
    assert!(refused.is_err(), "the port is still served: {refused:?}");
}
