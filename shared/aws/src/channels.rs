//! The alert channels Sundial posts to itself (Slack webhooks, PagerDuty's Events API): one
//! JSON POST through the same egress guard as HTTP targets, its answer classified. 2xx is taken;
//! 429, 5xx, a timeout or an unreachable host may pass, so they are worth another try; any other
//! answer, or a refused destination, is final.

use crate::targets::outbound::{Blocked, Outbound, refusal_in};
use async_trait::async_trait;
use std::time::Duration;
use sundial_domain::channels::DeliveryError;
use sundial_domain::ports::channels::AlertChannels;

/// How long one post may take, the name's lookup and connecting included.
const POST_TIMEOUT: Duration = Duration::from_secs(3);
/// The most of an answer's body read and kept in an error.
const ANSWER_BYTES: usize = 200;

/// Posts alerts over HTTP(S), only to destinations the deployment's egress policy allows.
#[derive(Debug, Clone)]
pub struct HttpChannels {
    outbound: Outbound,
}

impl HttpChannels {
    pub fn new(outbound: Outbound) -> Self {
        HttpChannels { outbound }
    }
}

#[async_trait]
impl AlertChannels for HttpChannels {
    async fn post(&self, url: &str, body: &serde_json::Value) -> Result<(), DeliveryError> {
        // One limit over the whole post: the name's lookup, connecting, sending, the answer.
        match tokio::time::timeout(POST_TIMEOUT, self.post_once(url, body)).await {
            Ok(outcome) => outcome,
            Err(_) => {
                Err(DeliveryError::Unavailable(format!("no answer within {} s", POST_TIMEOUT.as_secs())))
            }
        }
    }
}

impl HttpChannels {
    async fn post_once(&self, url: &str, body: &serde_json::Value) -> Result<(), DeliveryError> {
        let url = url::Url::parse(url).map_err(|e| DeliveryError::Refused(format!("not a URL: {e}")))?;
        // The URL is a secret (a Slack webhook's path): errors name its host only.
        let host = url.host_str().unwrap_or_default().to_string();
        match self.outbound.check(&url).await {
            Ok(()) => {}
            Err(Blocked::Refused(refused)) => return Err(DeliveryError::Refused(refused.to_string())),
            Err(unresolved @ Blocked::Unresolved { .. }) => {
                return Err(DeliveryError::Unavailable(unresolved.to_string()));
            }
        }
        let client = self.outbound.client().map_err(|e| DeliveryError::Unavailable(e.to_string()))?;
        let sent = client.post(url).json(body).send().await;
        let mut answer = match sent {
            Ok(answer) => answer,
            Err(e) => {
                return Err(match refusal_in(&e) {
                    Some(refused) => DeliveryError::Refused(refused.to_string()),
                    None => DeliveryError::Unavailable(format!("{host}: {}", without_url(&e))),
                });
            }
        };
        let status = answer.status();
        if status.is_success() {
            return Ok(());
        }
        // The start of the answer only: a hostile endpoint's body is never read whole.
        let mut head = Vec::new();
        while head.len() < ANSWER_BYTES {
            match answer.chunk().await {
                Ok(Some(chunk)) => head.extend_from_slice(&chunk),
                _ => break,
            }
        }
        head.truncate(ANSWER_BYTES);
        let text = String::from_utf8_lossy(&head);
        let error = format!("{host} answered HTTP {}: {}", status.as_u16(), text.trim());
        match status.as_u16() {
            429 | 500..=599 => Err(DeliveryError::Unavailable(error)),
            _ => Err(DeliveryError::Refused(error)),
        }
    }
}

/// A request error in words, without the URL reqwest puts in them.
fn without_url(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "could not connect"
    } else {
        "the request failed"
    };
    let mut cause = std::error::Error::source(error);
    let mut deepest = None;
    while let Some(e) = cause {
        deepest = Some(e.to_string());
        cause = e.source();
    }
    match deepest {
        Some(reason) => format!("{kind}: {reason}"),
        None => kind.to_string(),
    }
}
