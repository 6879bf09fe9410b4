//! The events PagerDuty's Events API v2 is sent for a run's event, and which incident each is
//! about. Two kinds of incident:
//!
//! - **the job's** (`sundial/job/<job id>`): opened by `failing` and `failure_rate`, and by each
//!   `failed` and `timed_out` unless the job set `alert_after_failures` (then it is paged only
//!   once that many failed in a row), so that a job failing every minute is one incident, not
//!   one per run; resolved by `recovered` (a job with a PagerDuty channel and no threshold is
//!   told `failing` at its first failure, see [`crate::job::JobDocument::failing_threshold`], so
//!   its next success recovers);
//! - **a run's** (`sundial/run/<run id>`): opened by `sla_missed`, `late_start` and
//!   `duration_anomaly`; resolved when that run ends (its `succeeded` is recorded for this,
//!   asked for or not; its `skipped` resolves it too, and its `failed` moves the trouble to the
//!   job's incident). A cancelled run records no event, so its incident is left to whoever
//!   cancelled it. A run-level
//!   event told of a run that has already ended is opened and resolved at once: on the record,
//!   without paging anyone for work that is over.
//!
//! Triggers go only for events the job asked for; resolves always. A repeated trigger or
//! resolve of one key is the same to PagerDuty, so a retried delivery is harmless.

use crate::events::{Notification, truncate_chars};
use crate::job::{EventKind, Severity};
use crate::run::Run;
use serde_json::{Value, json};

/// PagerDuty's limits: a summary, a dedup key.
pub const MAX_SUMMARY_CHARS: usize = 1_024;
pub const MAX_DEDUP_KEY_CHARS: usize = 255;

/// The incident of a job's failures.
pub fn job_incident(job_id: &str) -> String {
    format!("sundial/job/{job_id}")
}

/// The incident of one run's lateness.
pub fn run_incident(run_id: &str) -> String {
    let mut key = format!("sundial/run/{run_id}");
    truncate_chars(&mut key, MAX_DEDUP_KEY_CHARS);
    key
}

/// The Events API bodies event `kind` of `run` (notification `n`) sends with `routing_key`;
/// `asked`: the job asked for the event (triggers need it).
pub fn requests(
    severity: Severity,
    routing_key: &str,
    asked: bool,
    run: &Run,
    kind: EventKind,
    n: &Notification,
) -> Vec<Value> {
    let job = job_incident(&n.job_id);
    let this_run = run_incident(&n.run_id);
    let trigger = |key: &str| asked.then(|| trigger(severity, routing_key, key, n));
    let resolve = |key: &str| Some(resolve(routing_key, key));
    let requests = match kind {
        EventKind::Failed | EventKind::TimedOut => {
            vec![trigger(&job), run.told_run_trouble().then(|| resolve(&this_run)).flatten()]
        }
        EventKind::Failing | EventKind::FailureRate => vec![trigger(&job)],
        EventKind::Recovered => vec![resolve(&job)],
        k if k.is_run_trouble() => match n.state.is_terminal() {
            false => vec![trigger(&this_run)],
            true => vec![trigger(&this_run), resolve(&this_run)],
        },
        EventKind::Succeeded | EventKind::Skipped if run.told_run_trouble() => vec![resolve(&this_run)],
        // Good news and passing states (`retrying`, `skipped`, `too_fast`) open nothing.
        _ => Vec::new(),
    };
    requests.into_iter().flatten().collect()
}

/// A `trigger` of incident `key`.
fn trigger(severity: Severity, routing_key: &str, key: &str, n: &Notification) -> Value {
    let mut summary = format!("{}: {}", n.job_name, n.event.replace('_', " "));
    if let Some(error) = &n.error {
        summary.push_str(&format!(" ({error})"));
    }
    truncate_chars(&mut summary, MAX_SUMMARY_CHARS);
    let mut event = json!({
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": key,
        "payload": {
            "summary": summary,
            "source": "sundial",
            "severity": severity.as_str(),
            "timestamp": n.at.to_rfc3339(),
            "component": n.job_name,
            "group": n.owner,
            "class": n.event,
            "custom_details": {
                "job_id": n.job_id,
                "run_id": n.run_id,
                "state": n.state,
                "attempt": n.attempt,
                "scheduled_at": n.scheduled_at.to_rfc3339(),
                "duration_ms": n.duration_ms,
                "error": n.error,
                "detail": n.detail_text(),
            },
        },
        "client": "Sundial",
    });
    if let Some(link) = &n.link {
        event["client_url"] = json!(link);
        event["links"] = json!([{"href": link, "text": "The run in Sundial"}]);
    }
    event
}

/// A `resolve` of incident `key`.
fn resolve(routing_key: &str, key: &str) -> Value {
    json!({"routing_key": routing_key, "event_action": "resolve", "dedup_key": key})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{at, job};
    use crate::run::{RunEvent, RunKey, RunState};

    fn case(state: RunState, earlier: &[EventKind]) -> (Run, impl Fn(EventKind, bool) -> Vec<Value>) {
        let j = job(json!({}));
        let t = at("2026-11-27T10:00:00Z");
        let mut run =
            crate::run::transition::claim(&j, RunKey::scheduled(t), t, t, chrono::Duration::days(1));
        run.state = state;
        run.events = earlier.iter().map(|k| RunEvent::new(*k, 1, t)).collect();
        let r = run.clone();
        (run, move |kind, asked| {
            let n = Notification::new(Some(&j), &r, &RunEvent::new(kind, 1, t), Some("https://s.test"));
            requests(Severity::Critical, "R0UTINGKEY0000000000000000000000", asked, &r, kind, &n)
        })
    }

    fn actions(requests: &[Value]) -> Vec<(String, String)> {
        requests
            .iter()
            .map(|r| {
                (
                    r["event_action"].as_str().unwrap().to_string(),
                    r["dedup_key"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn failures_open_the_jobs_incident_and_recovered_resolves_it() {
        let (run, send) = case(RunState::Failed, &[]);
        let job_key = job_incident(&run.job_id.to_string());
        let failed = send(EventKind::Failed, true);
        assert_eq!(actions(&failed), [("trigger".into(), job_key.clone())]);
        let payload = &failed[0]["payload"];
        assert_eq!(
            (payload["severity"].as_str(), payload["source"].as_str()),
            (Some("critical"), Some("sundial"))
        );
        assert_eq!(payload["custom_details"]["run_id"], run.id().to_string());
        assert!(failed[0]["links"][0]["href"].as_str().unwrap().ends_with(&run.id().to_string()));
        assert_eq!(actions(&send(EventKind::Failing, true)), [("trigger".into(), job_key.clone())]);
        assert!(send(EventKind::Failed, false).is_empty(), "no trigger the job did not ask for");
        assert_eq!(
            actions(&send(EventKind::Recovered, false)),
            [("resolve".into(), job_key)],
            "resolves always"
        );
    }

    #[test]
    fn a_runs_lateness_is_its_own_incident_resolved_by_its_end() {
        let (running, send) = case(RunState::Running, &[]);
        let run_key = run_incident(&running.id().to_string());
        assert_eq!(actions(&send(EventKind::SlaMissed, true)), [("trigger".into(), run_key.clone())]);
        let (ended_run, ended) = case(RunState::Succeeded, &[EventKind::SlaMissed]);
        let run_key = run_incident(&ended_run.id().to_string());
        assert_eq!(actions(&ended(EventKind::Succeeded, false)), [("resolve".into(), run_key.clone())]);
        let failed = actions(&ended(EventKind::Failed, true));
        assert_eq!(failed[1], ("resolve".into(), run_key.clone()), "{failed:?}");
        // Told as the run ends: on the record, resolved at once.
        let (late_run, late) = case(RunState::Succeeded, &[]);
        let run_key = run_incident(&late_run.id().to_string());
        let both = actions(&late(EventKind::SlaMissed, true));
        assert_eq!(both, [("trigger".into(), run_key.clone()), ("resolve".into(), run_key)]);
        assert!(late(EventKind::Succeeded, true).is_empty(), "a success with no incident sends nothing");
        assert!(late(EventKind::Retrying, true).is_empty());
    }

    #[test]
    fn a_summary_is_cut_to_pagerdutys_limit() {
        let (run, _) = case(RunState::Failed, &[]);
        let j = job(json!({}));
        let mut n = Notification::new(Some(&j), &run, &RunEvent::new(EventKind::Failed, 1, run.due_at), None);
        n.error = Some("x".repeat(5_000));
        let sent = requests(Severity::Error, "k", true, &run, EventKind::Failed, &n);
        assert_eq!(sent[0]["payload"]["summary"].as_str().unwrap().chars().count(), MAX_SUMMARY_CHARS);
        assert!(sent[0].get("links").is_none(), "no link without a public URL");
    }
}
