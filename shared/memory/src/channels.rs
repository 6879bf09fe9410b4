//! Alert channels in memory: every post kept, by URL, and answers scripted per URL (a URL with
//! no script takes every post).

use async_trait::async_trait;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use sundial_domain::channels::DeliveryError;
use sundial_domain::ports::channels::AlertChannels;

/// Posts kept, answers scripted.
#[derive(Debug, Default)]
pub struct MemoryChannels {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Each post taken: (URL, body), oldest first.
    taken: Vec<(String, serde_json::Value)>,
    /// Answers still to give, per URL: each post takes the next one.
    script: HashMap<String, VecDeque<Result<(), DeliveryError>>>,
    /// Posts tried per URL, taken or not.
    tries: HashMap<String, usize>,
}

impl MemoryChannels {
    /// The next posts to `url` get `answers`, in order, then are taken.
    pub fn answer(&self, url: &str, answers: impl IntoIterator<Item = Result<(), DeliveryError>>) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.script.entry(url.to_string()).or_default().extend(answers);
    }

    /// The bodies taken at `url`, oldest first.
    pub fn taken(&self, url: &str) -> Vec<serde_json::Value> {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.taken.iter().filter(|(u, _)| u == url).map(|(_, body)| body.clone()).collect()
    }

    /// Posts tried at `url`, taken or not.
    pub fn tries(&self, url: &str) -> usize {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.tries.get(url).copied().unwrap_or(0)
    }
}

#[async_trait]
impl AlertChannels for MemoryChannels {
    async fn post(&self, url: &str, body: &serde_json::Value) -> Result<(), DeliveryError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *state.tries.entry(url.to_string()).or_default() += 1;
        let answer = state.script.get_mut(url).and_then(VecDeque::pop_front).unwrap_or(Ok(()));
        if answer.is_ok() {
            state.taken.push((url.to_string(), body.clone()));
        }
        answer
    }
}
