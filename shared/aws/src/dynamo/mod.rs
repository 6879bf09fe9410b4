//! The storage ports in DynamoDB. Each store maps its SDK errors onto
//! [`sundial_domain::ports::store::StoreError`], which says whether a retry can help, with
//! [`crate::errors::store_error`]. The idioms the stores share have one home each: typed
//! attributes, partition queries and transactions in `item`, batch reads in `batch`, pagination
//! cursors in `cursor`, update expressions in `update`; an audit record's item, which every audited change adds to
//! its own transaction, in `audit`.

pub mod audit;
mod batch;
pub mod calendars;
mod cursor;
pub mod fences;
pub mod groups;
pub mod idempotency;
mod item;
pub mod jobs;
pub mod keys;
mod links;
pub mod runs;
pub mod tick;
mod update;

pub use audit::DynamoAuditTrail;
pub use calendars::DynamoCalendarStore;
pub use fences::DynamoFenceStore;
pub use groups::DynamoGroupStore;
pub use idempotency::DynamoIdempotencyStore;
pub use jobs::DynamoJobStore;
pub use keys::DynamoKeyStore;
pub use runs::DynamoRunStore;
pub use tick::DynamoTickStateStore;
