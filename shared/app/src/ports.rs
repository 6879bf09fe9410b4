//! The ports one process's use cases run over, in one bundle: the wiring builds it from the
//! adapters (DynamoDB, SQS, SNS, the real targets, the system clock and randomness), a test from
//! in-memory ones or from faulty wrappers around either, and every use case takes the ports it
//! needs from it.

use crate::meter::Meter;
use crate::timer::Timer;
use std::sync::Arc;
use sundial_domain::clock::Clock;
use sundial_domain::entropy::Entropy;
use sundial_domain::ports::bus::EventBus;
use sundial_domain::ports::channels::AlertChannels;
use sundial_domain::ports::queue::RunQueue;
use sundial_domain::ports::store::{
    AuditTrail, CalendarStore, FenceStore, GroupStore, JobStore, KeyStore, RunStore, TickStateStore,
};
use sundial_domain::ports::targets::Caller;
use sundial_domain::ports::topics::JobTopics;

/// Storage, queue, notifications, targets, time, chance and metrics, as the use cases see them.
#[derive(Debug, Clone)]
pub struct Ports {
    pub jobs: Arc<dyn JobStore>,
    pub runs: Arc<dyn RunStore>,
    pub groups: Arc<dyn GroupStore>,
    pub calendars: Arc<dyn CalendarStore>,
    pub keys: Arc<dyn KeyStore>,
    /// The audit trail, read (its records are written by the stores, with their changes).
    pub audit: Arc<dyn AuditTrail>,
    pub fences: Arc<dyn FenceStore>,
    pub tick_state: Arc<dyn TickStateStore>,
    pub queue: Arc<dyn RunQueue>,
    pub bus: Arc<dyn EventBus>,
    /// The alert channels Sundial posts to itself (Slack, PagerDuty).
    pub channels: Arc<dyn AlertChannels>,
    pub topics: Arc<dyn JobTopics>,
    pub caller: Arc<dyn Caller>,
    /// Where the spans of runs' traces go (nowhere unless a collector is configured).
    pub spans: Arc<dyn sundial_domain::ports::spans::Spans>,
    pub clock: Arc<dyn Clock>,
    pub timer: Arc<dyn Timer>,
    pub entropy: Arc<dyn Entropy>,
    pub meter: Arc<Meter>,
}
