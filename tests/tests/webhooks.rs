//! HTTP targets are signed as Standard Webhooks sign (`webhook-id`, `webhook-timestamp`,
//! `webhook-signature` over id, time and body), checked here by the Standard Webhooks reference
//! verifier from PyPI (`scripts/test` installs it into `.venv`): a delivery verifies, the same
//! delivery replayed later is refused, and so is one whose timestamp was refreshed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};
use sundial_app::worker::poll::poll_once;
use sundial_domain::target::headers;
use sundial_tests::{ALICE, Answer, Stack, TargetServer};

/// What the reference verifier says of `body` and `headers` under `secret`, `later_s` seconds
/// after now: `Ok(())` or its reason.
fn verify(secret: &str, body: &[u8], headers: &Value, later_s: i64) -> Result<(), String> {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/verify_webhook.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{python}: {e}; run scripts/test, which installs standardwebhooks into .venv")
        });
    let request = json!({"secret": secret, "body": String::from_utf8_lossy(body), "headers": headers, "later_s": later_s});
    child.stdin.take().unwrap().write_all(request.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match (out.status.success(), said.as_str()) {
        (true, "verified") => Ok(()),
        (false, reason) if reason.starts_with("refused: ") => Err(reason.to_string()),
        _ => panic!("the verifier failed: {said} {}", String::from_utf8_lossy(&out.stderr)),
    }
}

#[tokio::test]
async fn a_delivery_verifies_with_the_reference_verifier_and_a_replay_does_not() {
    let stack = Stack::new().await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let job = json!({"name": "hook", "schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": target.url},
                     "payload": {"report": "daily"}});
    let created = stack.api.post(ALICE, "/v1/jobs", &job).await;
    let id = created.body["id"].as_str().unwrap().to_string();
    let secret = created.body["webhook_secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"), "{}", created.body);
    let run_id = stack.trigger(&id).await;
    let s = &stack.services;
    while target.hits().is_empty() {
        poll_once(&s.use_cases.worker, s.ports.queue.as_ref(), s.inbox.as_ref(), "hook-test", 1)
            .await
            .unwrap();
    }
    let hit = &target.hits()[0];
    let header = |name: &str| hit.headers[name].to_str().unwrap().to_string();
    assert_eq!(header(headers::WEBHOOK_ID), format!("{run_id}_1"));
    let sent: i64 = header(headers::WEBHOOK_TIMESTAMP).parse().unwrap();
    assert!((sent - hit.at.timestamp()).abs() <= 5, "sent {sent}, received {}", hit.at);
    let delivered = json!({
        "webhook-id": header(headers::WEBHOOK_ID),
        "webhook-timestamp": header(headers::WEBHOOK_TIMESTAMP),
        "webhook-signature": header(headers::WEBHOOK_SIGNATURE),
    });

    assert_eq!(verify(&secret, &hit.body, &delivered, 0), Ok(()));
    // The same delivery six minutes later: outside the verifier's five-minute tolerance.
    let replayed = verify(&secret, &hit.body, &delivered, 360);
    assert!(replayed.as_ref().is_err_and(|why| why.contains("too old")), "{replayed:?}");
    // Replayed with a fresh timestamp: the signature no longer matches.
    let mut refreshed = delivered.clone();
    refreshed["webhook-timestamp"] = json!((sent + 360).to_string());
    let forged = verify(&secret, &hit.body, &refreshed, 360);
    assert!(forged.as_ref().is_err_and(|why| why.contains("No matching signature")), "{forged:?}");
    // A changed body does not verify either.
    let tampered = verify(&secret, br#"{"report":"weekly"}"#, &delivered, 0);
    assert!(tampered.is_err(), "{tampered:?}");
}
