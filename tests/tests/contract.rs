//! One contract, two implementations: each port's promises (`sundial_tests::contract`) checked
//! against the in-memory doubles of `sundial-memory` and against the DynamoDB and SQS adapters
//! on the emulator, each emulator test on a fresh stack of its own. The in-memory queue runs on
//! a manual clock; SQS on real time.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::sync::Arc;
use sundial_domain::clock::ManualClock;
use sundial_memory::queue::MAX_RECEIVE_COUNT;
use sundial_memory::{
    MemoryFenceStore, MemoryGroupStore, MemoryIdempotencyStore, MemoryJobStore, MemoryQueue, MemoryRunStore,
    MemoryTickStateStore,
};
use sundial_tests::Stack;
use sundial_tests::contract::{self, ManualPace, RealPace};

/// The in-memory stores' partitions: the configuration's default, as the emulator's stacks use.
const SHARDS: u16 = 8;

/// The runs queue's `maxReceiveCount` in `infra/template.yaml` (its default).
const TEMPLATE_MAX_RECEIVES: u32 = 15;

#[tokio::test]
async fn memory_job_store_keeps_its_promises() {
    contract::job_store_keeps_its_promises(&MemoryJobStore::new(SHARDS), SHARDS).await;
}

#[tokio::test]
async fn memory_job_store_with_one_partition_keeps_its_promises() {
    contract::job_store_keeps_its_promises(&MemoryJobStore::new(1), 1).await;
}

#[tokio::test]
async fn dynamo_job_store_keeps_its_promises() {
    let stack = Stack::new().await;
    contract::job_store_keeps_its_promises(stack.services.ports.jobs.as_ref(), stack.config.due_shards).await;
}

#[tokio::test]
async fn memory_run_store_keeps_its_promises() {
    contract::run_store_keeps_its_promises(&MemoryRunStore::new(SHARDS), SHARDS).await;
}

#[tokio::test]
async fn dynamo_run_store_keeps_its_promises() {
    let stack = Stack::new().await;
    contract::run_store_keeps_its_promises(stack.services.ports.runs.as_ref(), stack.config.due_shards).await;
}

#[tokio::test]
async fn memory_tick_state_store_keeps_its_promises() {
    contract::tick_state_store_keeps_its_promises(&MemoryTickStateStore::new()).await;
}

#[tokio::test]
async fn dynamo_tick_state_store_keeps_its_promises() {
    let stack = Stack::new().await;
    contract::tick_state_store_keeps_its_promises(stack.services.ports.tick_state.as_ref()).await;
}

#[tokio::test]
async fn memory_key_store_keeps_its_promises() {
    contract::key_store_keeps_its_promises(&sundial_memory::MemoryKeyStore::new()).await;
}

#[tokio::test]
async fn dynamo_key_store_keeps_its_promises() {
    let stack = Stack::new().await;
    contract::key_store_keeps_its_promises(stack.services.ports.keys.as_ref()).await;
}

#[tokio::test]
async fn memory_audit_records_land_with_their_changes() {
    let trail = sundial_memory::MemoryAuditTrail::new();
    let jobs = sundial_memory::MemoryJobStore::new(4).recording_to(trail.clone());
    let runs = sundial_memory::MemoryRunStore::new(4).recording_to(trail.clone());
    let keys = sundial_memory::MemoryKeyStore::new().recording_to(trail.clone());
    contract::audit_records_land_with_their_changes(&jobs, &runs, &keys, &trail).await;
}

#[tokio::test]
async fn dynamo_audit_records_land_with_their_changes() {
    let stack = Stack::new().await;
    let ports = &stack.services.ports;
    contract::audit_records_land_with_their_changes(
        ports.jobs.as_ref(),
        ports.runs.as_ref(),
        ports.keys.as_ref(),
        ports.audit.as_ref(),
    )
    .await;
}

#[tokio::test]
async fn memory_calendar_store_keeps_its_promises() {
    contract::calendar_store_keeps_its_promises(&sundial_memory::MemoryCalendarStore::new()).await;
}

#[tokio::test]
async fn dynamo_calendar_store_keeps_its_promises() {
    let stack = Stack::new().await;
    contract::calendar_store_keeps_its_promises(stack.services.ports.calendars.as_ref()).await;
}

#[tokio::test]
async fn memory_group_store_keeps_its_promises() {
    contract::group_store_keeps_its_promises(&MemoryGroupStore::new()).await;
}

#[tokio::test]
async fn dynamo_group_store_keeps_its_promises() {
    let stack = Stack::new().await;
    contract::group_store_keeps_its_promises(stack.services.ports.groups.as_ref()).await;
}

#[tokio::test]
async fn memory_fence_store_keeps_its_promises() {
    contract::fence_store_keeps_its_promises(&MemoryFenceStore::new()).await;
}

#[tokio::test]
async fn dynamo_fence_store_keeps_its_promises() {
    let stack = Stack::new().await;
    contract::fence_store_keeps_its_promises(stack.services.ports.fences.as_ref()).await;
}

#[tokio::test]
async fn memory_idempotency_store_keeps_its_promises() {
    contract::idempotency_store_keeps_its_promises(&MemoryIdempotencyStore::new()).await;
}

#[tokio::test]
async fn dynamo_idempotency_store_keeps_its_promises() {
    let stack = Stack::new().await;
    contract::idempotency_store_keeps_its_promises(stack.services.idempotency.as_ref()).await;
}

#[tokio::test]
async fn memory_queue_keeps_its_promises() {
    assert_eq!(MAX_RECEIVE_COUNT, TEMPLATE_MAX_RECEIVES, "the double's redrive policy is the template's");
    let clock = Arc::new(ManualClock::new("2031-01-01T00:00:00Z".parse().unwrap()));
    let queue = MemoryQueue::new(clock.clone());
    contract::run_queue_keeps_its_promises(&queue, &queue, &ManualPace::new(clock), MAX_RECEIVE_COUNT).await;
}

#[tokio::test]
async fn sqs_queue_keeps_its_promises() {
    let stack = Stack::new().await;
    let s = &stack.services;
    contract::run_queue_keeps_its_promises(
        s.ports.queue.as_ref(),
        s.inbox.as_ref(),
        &RealPace::new(),
        TEMPLATE_MAX_RECEIVES,
    )
    .await;
}
