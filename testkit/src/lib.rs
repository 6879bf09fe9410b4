//! What the test suites share, so that a behaviour is written once and tested on every harness.
//!
//! - [`world`]: one deployment in memory: the use cases and the API wired as `Services` wires
//!   them, over the in-memory ports, on a manual clock;
//! - [`api`]: the real router called in process, and its replies;
//! - [`faults`]: one fault layer for the storage roles and the runs queue, driven by a script;
//! - [`logs`]: the process's log lines, captured for a test to search;
//! - [`harness`]: what a scenario needs of a deployment, implemented by the [`world::World`] here
//!   and by the emulator's `Stack` in `sundial-tests`, so that one scenario runs on both.
//!
//! Where a new test goes: the table at the top of `docs/testing.md`.

// Test code: a panic is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod api;
pub mod faults;
pub mod harness;
pub mod logs;
pub mod scenarios;
pub mod world;
