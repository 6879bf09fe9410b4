//! The API's scenarios (`sundial_testkit::scenarios`), every one over the deployment in memory:
//! the audit trail, the authorization matrix, bad input, the jobs API, idempotency keys, what a hostile tenant's
//! probes find, and what operators see (metrics, logs, the dashboard's assets). The
//! emulator runs a smoke test of each family (`tests/tests/api.rs`).

use sundial_testkit::world::World;

sundial_testkit::audit_scenarios!(World);
sundial_testkit::authz_scenarios!(World);
sundial_testkit::bad_input_scenarios!(World);
sundial_testkit::hostile_tenant_scenarios!(World);
sundial_testkit::idempotency_scenarios!(World);
sundial_testkit::jobs_api_scenarios!(World);
sundial_testkit::keys_scenarios!(World);
sundial_testkit::observe_scenarios!(World);
