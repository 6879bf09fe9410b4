//! The API on the emulator: one smoke test per route family of the scenarios every one of which
//! runs in memory (`sundial_testkit::scenarios`, instantiated in `functions/api/tests`). These
//! are the ones whose answer depends on the real adapters: DynamoDB's items, conditions, indexes
//! and cursors, and the idempotency table.

use sundial_testkit::scenarios::{audit, bad_input, hostile_tenant, idempotency, jobs_api, keys};
use sundial_tests::Stack;

/// Jobs: create, read, merge patch, If-Match, pause and resume through the due index, delete.
#[tokio::test]
async fn job_lifecycle() {
    jobs_api::job_lifecycle::<Stack>().await;
}

/// The audit trail: every change recorded with who, what and when, in DynamoDB with its change.
#[tokio::test]
async fn every_change_is_recorded_with_who_what_and_when() {
    audit::every_change_is_recorded_with_who_what_and_when::<Stack>().await;
}

/// A job's Slack webhook and PagerDuty routing key are stored in DynamoDB and shown nowhere.
#[tokio::test]
async fn alert_channel_secrets_are_write_only() {
    audit::alert_channel_secrets_are_write_only::<Stack>().await;
}

/// Racing edits each land with exactly their own record, in one transaction each.
#[tokio::test]
async fn racing_edits_each_land_with_their_own_record() {
    audit::racing_edits_each_land_with_their_own_record::<Stack>().await;
}

/// Keys: made, read by their id on every request, refused by role, once revoked and once expired.
#[tokio::test]
async fn keys_carry_roles_and_are_refused_once_revoked_or_expired() {
    keys::keys_carry_roles_and_are_refused_once_revoked_or_expired::<Stack>().await;
}

/// Jobs: pages of a listing follow DynamoDB's cursors, sealed.
#[tokio::test]
async fn list_paginates() {
    jobs_api::list_paginates::<Stack>().await;
}

/// Jobs: listings filtered by tags, state, group and text continue over DynamoDB's cursors,
/// from the place a filtered page stopped.
#[tokio::test]
async fn listings_filter_by_tags_state_group_and_text() {
    jobs_api::listings_filter_by_tags_state_group_and_text::<Stack>().await;
}

/// Jobs: versions are kept in the transaction that writes the job, compared, rolled back to.
#[tokio::test]
async fn versions_are_kept_compared_and_rolled_back_to() {
    jobs_api::versions_are_kept_compared_and_rolled_back_to::<Stack>().await;
}

/// Jobs: a refused document writes no item.
#[tokio::test]
async fn bad_documents_are_rejected_with_the_field_and_nothing_is_written() {
    bad_input::bad_documents_are_rejected_with_the_field_and_nothing_is_written::<Stack>().await;
}

/// Jobs: a forged page token (a cursor naming a key DynamoDB refuses) never reaches the table.
#[tokio::test]
async fn forged_page_tokens_are_refused() {
    bad_input::forged_page_tokens_are_refused::<Stack>().await;
}

/// Idempotency keys: a replay is answered from the idempotency table.
#[tokio::test]
async fn replay_returns_the_same_response() {
    idempotency::replay_returns_the_same_response::<Stack>().await;
}

/// Callbacks: a run's callbacks answer alike whether the run is stored or not.
#[tokio::test]
async fn callbacks_answer_alike_whether_the_run_exists_or_not() {
    hostile_tenant::callbacks_answer_alike_whether_the_run_exists_or_not::<Stack>().await;
}
