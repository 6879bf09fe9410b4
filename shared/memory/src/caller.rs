//! A scripted target caller: [`ScriptedCaller`], a [`Caller`] that answers each call from a
//! script (then a default answer) and records every call it was given, for tests of the worker
//! without a target. Work it "started" ([`Answer::Started`]) is described from a second script
//! (then as still running), and the looks and stops it was asked for are recorded.

use crate::guard::lock;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use sundial_domain::job::JobId;
use sundial_domain::ports::targets::{Answer, Caller, Invocation, Progress};

/// One call a target received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub job_id: JobId,
    /// What the attempt delivered.
    pub payload: serde_json::Value,
    pub run_id: String,
    pub attempt: u32,
    pub scheduled_at: DateTime<Utc>,
    pub callback_token: String,
    pub timeout: Duration,
    pub sent_at: DateTime<Utc>,
}

#[derive(Debug)]
struct State {
    script: VecDeque<Answer>,
    default: Answer,
    calls: Vec<Call>,
    /// How looks at started work are answered, in order; then `Running`.
    progress: VecDeque<Progress>,
    /// The handles looked at, in order.
    looks: Vec<String>,
    /// The handles stopped, with the reason, in order.
    stops: Vec<(String, String)>,
}

/// Answers calls by script.
#[derive(Debug)]
pub struct ScriptedCaller {
    state: Mutex<State>,
}

impl ScriptedCaller {
    /// A caller that answers every call with `default` once its script is spent.
    pub fn new(default: Answer) -> Self {
        let state = State {
            script: VecDeque::new(),
            default,
            calls: Vec::new(),
            progress: VecDeque::new(),
            looks: Vec::new(),
            stops: Vec::new(),
        };
        ScriptedCaller { state: Mutex::new(state) }
    }

    /// A caller whose every call succeeds.
    pub fn succeeding() -> Self {
        ScriptedCaller::new(Answer::Succeeded { status: Some(200), output: None })
    }

    /// Answers the next unscripted call with `answer`.
    pub fn then(self, answer: Answer) -> Self {
        lock(&self.state).script.push_back(answer);
        self
    }

    /// Adds `answer` to the script.
    pub fn push(&self, answer: Answer) {
        lock(&self.state).script.push_back(answer);
    }

    /// Every call made so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.state).calls.clone()
    }

    /// Answers the next look at started work with `progress`.
    pub fn push_progress(&self, progress: Progress) {
        lock(&self.state).progress.push_back(progress);
    }

    /// The handles looked at so far, in order.
    pub fn looks(&self) -> Vec<String> {
        lock(&self.state).looks.clone()
    }

    /// The handles stopped so far, with their reasons, in order.
    pub fn stops(&self) -> Vec<(String, String)> {
        lock(&self.state).stops.clone()
    }
}

#[async_trait]
impl Caller for ScriptedCaller {
    async fn call(&self, invocation: &Invocation<'_>) -> Answer {
        let mut state = lock(&self.state);
        state.calls.push(Call {
            job_id: invocation.job.id.clone(),
            payload: invocation.payload.clone(),
            run_id: invocation.run_id.clone(),
            attempt: invocation.attempt,
            scheduled_at: invocation.scheduled_at,
            callback_token: invocation.callback_token.clone(),
            timeout: invocation.timeout,
            sent_at: invocation.sent_at,
        });
        let scripted = state.script.pop_front();
        scripted.unwrap_or_else(|| state.default.clone())
    }

    async fn follow(&self, handle: &str) -> Progress {
        let mut state = lock(&self.state);
        state.looks.push(handle.to_string());
        state.progress.pop_front().unwrap_or(Progress::Running)
    }

    async fn stop(&self, handle: &str, reason: &str) -> Result<(), String> {
        lock(&self.state).stops.push((handle.to_string(), reason.to_string()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn answers_by_script_then_by_default_and_records_calls() {
        let document = serde_json::from_value(serde_json::json!({
            "name": "n", "target": {"type": "http", "url": "https://x.test/"}
        }))
        .unwrap();
        let job = sundial_domain::job::Job {
            id: JobId::generate(),
            owner: "o".into(),
            document,
            version: 1,
            created_at: DateTime::UNIX_EPOCH,
            updated_at: DateTime::UNIX_EPOCH,
            next_run_at: None,
            signing_secret: String::new(),
            pauses: Vec::new(),
            children: Vec::new(),
            gaps: Vec::new(),
            skips: Vec::new(),
            counted: Default::default(),
            baseline: None,
            versions: Vec::new(),
        };
        let caller = ScriptedCaller::succeeding().then(Answer::TimedOut);
        let call = |attempt| Invocation {
            job: &job,
            payload: serde_json::Value::Null,
            run_id: "r".into(),
            attempt,
            scheduled_at: DateTime::UNIX_EPOCH,
            callback_token: "t".into(),
            timeout: Duration::from_secs(1),
            sent_at: DateTime::UNIX_EPOCH,
        };
        assert_eq!(caller.call(&call(1)).await, Answer::TimedOut);
        assert_eq!(caller.call(&call(2)).await, Answer::Succeeded { status: Some(200), output: None });
        let attempts: Vec<u32> = caller.calls().iter().map(|c| c.attempt).collect();
        assert_eq!(attempts, [1, 2]);
    }
}
