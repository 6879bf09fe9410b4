//! Sundial's ports in memory, for tests of the use cases that need no emulator: every store,
//! the runs queue, the event bus, the per-job topics and a scripted target caller.
//!
//! Each double behaves as its adapter in `sundial-aws` does in every way a use case can
//! observe: the same conditional writes failing with the same [`StoreError`] variants, the same
//! fences, the same sparse indexes (due jobs, in-flight runs), the same orders and page sizes,
//! instants kept to the precision the adapter keeps them at, and the queue's delays, holds,
//! receive counts and dead letters measured against an injected [`Clock`], so a `ManualClock`
//! drives them. The contract suite of `sundial-tests` (`tests/src/contract.rs`) holds a double and
//! its adapter to the same promises.
//!
//! - [`jobs`]: [`MemoryJobStore`]; [`runs`]: [`MemoryRunStore`]; [`tick`]:
//!   [`MemoryTickStateStore`]; [`idempotency`]: [`MemoryIdempotencyStore`]; [`groups`]:
//!   [`MemoryGroupStore`]; [`fences`]: [`MemoryFenceStore`]; [`calendars`]: [`MemoryCalendarStore`];
//!   [`keys`]: [`MemoryKeyStore`]; [`audit`]: [`MemoryAuditTrail`], which the stores write
//!   records into with their changes;
//! - [`queue`]: [`MemoryQueue`], the runs queue and its dead-letter queue;
//! - [`bus`]: [`MemoryEventBus`]; [`topics`]: [`MemoryTopics`]; [`caller`]: [`ScriptedCaller`];
//!   [`spans`]: [`MemorySpans`];
//! - [`guard`]: the one way this crate takes its locks.
//!
//! [`StoreError`]: sundial_domain::ports::store::StoreError
//! [`Clock`]: sundial_domain::clock::Clock

pub mod audit;
pub mod bus;
pub mod calendars;
pub mod caller;
pub mod channels;
pub mod fences;
pub mod groups;
pub mod guard;
pub mod idempotency;
pub mod jobs;
pub mod keys;
pub mod queue;
pub mod runs;
pub mod spans;
pub mod tick;
pub mod topics;

pub use audit::MemoryAuditTrail;
pub use bus::MemoryEventBus;
pub use calendars::MemoryCalendarStore;
pub use caller::ScriptedCaller;
pub use fences::MemoryFenceStore;
pub use groups::MemoryGroupStore;
pub use idempotency::MemoryIdempotencyStore;
pub use jobs::MemoryJobStore;
pub use keys::MemoryKeyStore;
pub use queue::MemoryQueue;
pub use runs::MemoryRunStore;
pub use spans::MemorySpans;
pub use tick::MemoryTickStateStore;
pub use topics::MemoryTopics;
