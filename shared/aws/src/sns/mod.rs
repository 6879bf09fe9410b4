//! SNS: the shared events topic (the event bus) and the per-job notification topics.

pub mod bus;
pub mod topics;
