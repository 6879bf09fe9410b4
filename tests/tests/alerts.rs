//! Alerts Sundial delivers itself, over real HTTP: a job's Slack webhook and PagerDuty's Events
//! API are loopback servers that check each body against the shape those services document
//! (Slack: an incoming webhook's `text` and Block Kit blocks within their limits; PagerDuty:
//! Events API v2 `trigger` and `resolve`). A failure opens the job's incident and tells Slack,
//! once per event though Slack's first answer was a 503; the next success resolves the incident.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::collections::HashMap;
use sundial_tests::{ALICE, Answer, Options, Stack, TargetServer};

const ROUTING_KEY: &str = "R0UTINGKEY0123456789abcdefABCDEF";

/// Slack's incoming-webhook message (api.slack.com/messaging/webhooks, Block Kit reference):
/// a `text`, at most 50 blocks of known types, each text object within its limit.
fn assert_slack_message(body: &Value) {
    let text = |t: &Value, kind: &str, max: usize| {
        assert_eq!(t["type"], kind, "{t}");
        let s = t["text"].as_str().expect("a text object's text");
        assert!(!s.is_empty() && s.chars().count() <= max, "{s}");
    };
    assert!(body["text"].as_str().is_some_and(|t| !t.is_empty()), "the fallback text: {body}");
    let blocks = body["blocks"].as_array().expect("blocks");
    assert!(!blocks.is_empty() && blocks.len() <= 50);
    for block in blocks {
        match block["type"].as_str().unwrap() {
            "header" => text(&block["text"], "plain_text", 150),
            "section" => {
                text(&block["text"], "mrkdwn", 3_000);
                let fields = block["fields"].as_array().map_or(&[][..], |f| f.as_slice());
                assert!(fields.len() <= 10);
                fields.iter().for_each(|f| text(f, "mrkdwn", 2_000));
            }
            "context" => {
                let elements = block["elements"].as_array().unwrap();
                assert!(!elements.is_empty() && elements.len() <= 10);
                elements.iter().for_each(|e| text(e, "mrkdwn", 3_000));
            }
            "actions" => {
                for button in block["elements"].as_array().unwrap() {
                    assert_eq!(button["type"], "button");
                    text(&button["text"], "plain_text", 75);
                    assert!(button["url"].as_str().is_some_and(|u| u.len() <= 3_000));
                }
            }
            other => panic!("a block type Sundial does not send: {other}"),
        }
    }
}

/// PagerDuty's Events API v2 (developer.pagerduty.com, "Send an Alert Event"): a 32-character
/// routing key, an action, a dedup key of at most 255 characters; a trigger's payload with a
/// summary of at most 1,024 characters, a source, a known severity and an ISO 8601 timestamp.
fn assert_pagerduty_event(body: &Value) -> (String, String) {
    assert_eq!(body["routing_key"], ROUTING_KEY);
    let action = body["event_action"].as_str().unwrap().to_string();
    let key = body["dedup_key"].as_str().unwrap().to_string();
    assert!(!key.is_empty() && key.chars().count() <= 255);
    match action.as_str() {
        "trigger" => {
            let payload = &body["payload"];
            let summary = payload["summary"].as_str().unwrap();
            assert!(!summary.is_empty() && summary.chars().count() <= 1_024);
            assert!(payload["source"].as_str().is_some_and(|s| !s.is_empty()));
            assert!(
                ["critical", "error", "warning", "info"].contains(&payload["severity"].as_str().unwrap())
            );
            chrono::DateTime::parse_from_rfc3339(payload["timestamp"].as_str().unwrap()).unwrap();
            for link in body["links"].as_array().into_iter().flatten() {
                assert!(link["href"].as_str().is_some_and(|h| h.starts_with("http")));
            }
        }
        "resolve" => assert!(body.get("payload").is_none(), "a resolve needs only its key"),
        other => panic!("an action Sundial does not send: {other}"),
    }
    (action, key)
}

/// The bodies `server` received, once it has received `n` (the announcement may still be
/// posting when the run reads ended); panics after 30 s.
async fn bodies(server: &TargetServer, n: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while server.hits().len() < n {
        assert!(std::time::Instant::now() < deadline, "{} of {n} posts after 30 s", server.hits().len());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    server.hits().iter().map(|h| serde_json::from_slice(&h.body).unwrap()).collect()
}

#[tokio::test]
async fn a_failure_and_its_recovery_reach_slack_and_pagerduty_in_their_shapes() {
    let slack = TargetServer::start(|_| Answer::Status(200)).await;
    let pagerduty = TargetServer::start(|_| Answer::Status(202)).await;
    let vars = HashMap::from([
        ("SUNDIAL_PAGERDUTY_URL", pagerduty.url.clone()),
        ("SUNDIAL_PUBLIC_URL", "https://sundial.example".to_string()),
    ]);
    let stack = Stack::with(Options { vars, clock: None }).await;
    let target = TargetServer::start(|_| Answer::Status(200)).await;
    let notify = json!({"slack": {"webhook_url": slack.url}, "pagerduty": {"routing_key": ROUTING_KEY}});
    let job = json!({"name": "nightly", "schedule": {"cron": "0 0 1 1 *"}, "target": {"type": "http", "url": target.url},
                     "retry": {"max_attempts": 1}, "notify": notify});
    let created = stack.api.post(ALICE, "/v1/jobs", &job).await;
    assert_eq!(created.status, http::StatusCode::CREATED, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_string();
    let worker = &stack.services.use_cases.worker;

    // A failure: Slack answers its first post 503, and takes the retry.
    target.answer_next(&[500]);
    slack.answer_next(&[503]);
    let failed = stack.trigger(&id).await;
    assert_eq!(stack.drive(worker, &failed, 60).await.state.as_str(), "FAILED");
    let incident = format!("sundial/job/{id}");
    let told: Vec<(String, String)> =
        bodies(&pagerduty, 2).await.iter().map(assert_pagerduty_event).collect();
    let trigger = ("trigger".to_string(), incident.clone());
    assert_eq!(told, [trigger.clone(), trigger], "failed, then failing: one incident");
    let messages = bodies(&slack, 3).await;
    messages.iter().for_each(assert_slack_message);
    let headers: Vec<&str> =
        messages.iter().map(|m| m["blocks"][0]["text"]["text"].as_str().unwrap()).collect();
    assert_eq!(
        headers,
        [":red_circle: nightly: failed", ":red_circle: nightly: failed", ":red_circle: nightly: failing"]
    );
    assert_eq!(messages[0], messages[1], "the 503'd post, then its retry: the same message");
    let link = format!("https://sundial.example/ui/index.html#/runs/{failed}");
    assert_eq!(messages[1]["blocks"].as_array().unwrap().last().unwrap()["elements"][0]["url"], json!(link));

    // The run shows each delivery.
    // Marked once the announcement has posted all it had to.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let shown = loop {
        let shown = stack.api.get(ALICE, &format!("/v1/runs/{failed}")).await.body;
        if shown["alerts"].as_array().is_some_and(|a| a.len() >= 4) || std::time::Instant::now() > deadline {
            break shown;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let alerts = shown["alerts"].as_array().unwrap();
    let slack_failed = alerts.iter().find(|a| a["event"] == "failed" && a["channel"] == "slack").unwrap();
    assert_eq!((&slack_failed["state"], &slack_failed["tries"]), (&json!("delivered"), &json!(2)), "{shown}");
    assert_eq!(alerts.len(), 4, "two events, two channels each: {shown}");

    // The next success recovers: the incident is resolved, Slack told. It must be scheduled
    // after the failure (a success of the same second says nothing of the job since): a
    // trigger's instant is the next whole second, so a second and a bit later.
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    let recovered = stack.trigger(&id).await;
    assert_eq!(stack.drive(worker, &recovered, 60).await.state.as_str(), "SUCCEEDED");
    let told: Vec<(String, String)> =
        bodies(&pagerduty, 3).await.iter().map(assert_pagerduty_event).collect();
    assert_eq!(told.last(), Some(&("resolve".to_string(), incident)));
    assert_eq!(told.len(), 3);
    let messages = bodies(&slack, 4).await;
    messages.iter().for_each(assert_slack_message);
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[3]["blocks"][0]["text"]["text"], ":large_green_circle: nightly: recovered");
    let text = messages[3]["blocks"].to_string();
    assert!(text.contains("Recovered from: failing"), "{text}");
}
