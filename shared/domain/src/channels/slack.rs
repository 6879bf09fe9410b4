//! The message a Slack incoming webhook is posted for an event: a plain `text` (what
//! notifications and clients without blocks show) and Block Kit blocks (a header naming the job
//! and what happened, the run's facts as fields, the error as code, the numbers behind a health
//! event, a button to the run), each within Slack's documented limits, user text escaped for
//! `mrkdwn`.

use crate::events::{Notification, human_duration, truncate_chars};
use serde_json::{Value, json};

/// Slack's limits: a header's text, a section's text, one field, a button's URL.
pub const MAX_HEADER_CHARS: usize = 150;
pub const MAX_SECTION_CHARS: usize = 3_000;
pub const MAX_FIELD_CHARS: usize = 2_000;
pub const MAX_URL_CHARS: usize = 3_000;

/// The message for notification `n`.
pub fn message(n: &Notification) -> Value {
    let mut header = format!("{} {}: {}", emoji(n.event), n.job_name, n.event.replace('_', " "));
    truncate_chars(&mut header, MAX_HEADER_CHARS);
    let mut fields = vec![
        field("Run", &format!("`{}`", escape(&n.run_id))),
        field("State", &format!("{} after attempt {}", n.state, n.attempt)),
        field("Scheduled", &n.scheduled_at.to_rfc3339()),
    ];
    if let Some(ms) = n.duration_ms {
        fields.push(field("Duration", &human_duration(ms)));
    }
    let mut summary =
        format!("Job *{}* (`{}`), owner `{}`.", escape(&n.job_name), n.job_id, escape(&n.owner));
    truncate_chars(&mut summary, MAX_SECTION_CHARS);
    let mut blocks = vec![
        json!({"type": "header", "text": {"type": "plain_text", "text": header, "emoji": true}}),
        json!({"type": "section", "text": mrkdwn(summary), "fields": fields}),
    ];
    if let Some(error) = &n.error {
        // Inside a code block only the escapes matter; ``` itself is cut off at the limit.
        let mut error = escape(error).replace("```", "'''");
        truncate_chars(&mut error, MAX_SECTION_CHARS - 20);
        blocks.push(json!({"type": "section", "text": mrkdwn(format!("*Error*\n```{error}```"))}));
    }
    if let Some(mut detail) = n.detail_text().map(|d| escape(&d)) {
        truncate_chars(&mut detail, MAX_SECTION_CHARS);
        blocks.push(json!({"type": "context", "elements": [mrkdwn(detail)]}));
    }
    if let Some(link) = n.link.as_ref().filter(|l| l.chars().count() <= MAX_URL_CHARS) {
        blocks.push(json!({"type": "actions", "elements": [{
            "type": "button",
            "text": {"type": "plain_text", "text": "Open the run"},
            "url": link,
        }]}));
    }
    json!({"text": n.subject(), "blocks": blocks})
}

/// A `mrkdwn` text object.
fn mrkdwn(text: String) -> Value {
    json!({"type": "mrkdwn", "text": text})
}

/// A section field: its name in bold over its value.
fn field(name: &str, value: &str) -> Value {
    let mut text = format!("*{name}*\n{value}");
    truncate_chars(&mut text, MAX_FIELD_CHARS);
    mrkdwn(text)
}

/// `text` with the three characters Slack's `mrkdwn` reads as control escaped, as Slack asks.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The emoji a header starts with: red for trouble, green for good news, grey otherwise.
fn emoji(event: &str) -> &'static str {
    match event {
        "failed" | "timed_out" | "failing" | "failure_rate" => ":red_circle:",
        "succeeded" | "recovered" => ":large_green_circle:",
        "sla_missed" | "late_start" | "duration_anomaly" | "too_fast" | "retrying" => ":large_yellow_circle:",
        _ => ":white_circle:",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{at, job};
    use crate::job::EventKind;
    use crate::run::{RunEvent, RunKey, RunState};

    fn notification(error: Option<String>, name: &str) -> Notification {
        let mut j = job(json!({}));
        j.document.name = name.to_string();
        let t = at("2026-11-27T10:00:00Z");
        let mut run =
            crate::run::transition::claim(&j, RunKey::scheduled(t), t, t, chrono::Duration::days(1));
        run.state = RunState::Failed;
        run.attempt = 2;
        let mut n = Notification::new(
            Some(&j),
            &run,
            &RunEvent::new(EventKind::Failed, 2, t),
            Some("https://s.test"),
        );
        n.error = error;
        n
    }

    #[test]
    fn a_message_has_a_fallback_text_and_blocks_within_slacks_limits() {
        let m = message(&notification(Some("HTTP 500: <b>boom</b> & ```more```".into()), "nightly"));
        assert_eq!(m["text"], "nightly: failed (attempt 2)");
        let blocks = m["blocks"].as_array().unwrap();
        let types: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["header", "section", "section", "actions"]);
        assert_eq!(blocks[0]["text"]["text"], ":red_circle: nightly: failed");
        assert_eq!(blocks[1]["fields"].as_array().unwrap().len(), 3);
        let error = blocks[2]["text"]["text"].as_str().unwrap();
        assert!(error.contains("&lt;b&gt;boom&lt;/b&gt; &amp; '''more'''"), "{error}");
        assert!(blocks[3]["elements"][0]["url"].as_str().unwrap().starts_with("https://s.test/ui/"));
    }

    #[test]
    fn long_names_and_errors_are_cut_to_the_limits() {
        let m = message(&notification(Some("e".repeat(10_000)), &"n".repeat(500)));
        let blocks = m["blocks"].as_array().unwrap();
        assert!(blocks[0]["text"]["text"].as_str().unwrap().chars().count() <= MAX_HEADER_CHARS);
        for block in blocks.iter().filter(|b| b["type"] == "section") {
            assert!(block["text"]["text"].as_str().unwrap().chars().count() <= MAX_SECTION_CHARS);
        }
    }
}
