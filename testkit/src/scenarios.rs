//! Scenarios written once, over any [`crate::harness::Harness`]. Each module ends with a macro
//! (`<module>_scenarios!`) that instantiates all of its scenarios over one harness: the suites in
//! memory instantiate every one; the emulator's suites call the few that are its smoke tests by
//! name.

pub mod audit;
pub mod authz;
pub mod bad_input;
pub mod hostile_tenant;
pub mod idempotency;
pub mod jobs_api;
pub mod keys;
pub mod observe;
pub mod tick;
pub mod watchdog;
pub mod worker;

/// One `#[tokio::test]` per scenario of `$module`, named as the scenario, in a module named as
/// `$module`, each over the harness `$harness` (a scenario deploys what it runs on).
#[macro_export]
macro_rules! instantiate {
    ($harness:ty => $module:ident { $($scenario:ident),* $(,)? }) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                // Two threads, so that what a scenario runs side by side can really interleave.
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    $crate::scenarios::$module::$scenario::<$harness>().await;
                }
            )*
        }
    };
}
