//! Sundial's HTTP API: one axum [`Router`], served by `lambda_http` in Lambda (`main.rs`) and by
//! axum in the local runtime.
//!
//! - [`jobs`]: the `/v1/jobs` handlers; [`runs`]: run history, control and target callbacks;
//!   [`groups`]: the owner's concurrency groups; [`calendars`]: the owner's named calendars;
//!   [`keys`]: the owner's API keys; [`versions`]: a job's kept versions, diffs and rollback;
//!   [`forecast`]: runs due per minute, from the schedules; [`instants`]: a job's instant
//!   ledger;
//! - [`auth`] and [`idempotency`]: the middleware in front of every protected route; [`roles`]:
//!   the role each route needs; [`audit`]: each request's stamp, the use cases acting for it, and
//!   the trail read back (`/v1/audit`);
//! - [`extract`]: request decoding with field-named errors, through [`strict_json`] (no repeated
//!   keys); [`error`]: error responses;
//! - [`view`]: response bodies; [`paging`]: pages bounded by bytes (Lambda's 6 MB response); [`openapi`]: the OpenAPI document generated from all of these;
//! - [`state`]: what the handlers share; [`edge`]: bounds on every request, and the router's own
//!   errors (404, 405, 414, 431) as JSON.
//!
//! - [`dashboard`]: the web dashboard's assets; [`observe`]: `/metrics` and a run's local logs.
//!
//! Exempt from authentication: the OpenAPI document, the run callbacks (which carry the run's
//! own token) and the dashboard's assets (the page then calls the API with the user's key).

pub mod audit;
pub mod auth;
pub mod calendars;
pub mod dashboard;
pub mod edge;
pub mod error;
pub mod extract;
pub mod forecast;
pub mod groups;
pub mod idempotency;
pub mod instants;
pub mod jobs;
pub mod keys;
pub mod observe;
pub mod openapi;
pub mod paging;
pub mod roles;
pub mod runs;
pub mod state;
pub mod strict_json;
pub mod versions;
pub mod view;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
pub use state::{ApiSettings, AppState};

/// The whole API.
pub fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/v1/jobs", post(jobs::create).get(jobs::list))
        .route("/v1/jobs/{id}", get(jobs::get).patch(jobs::patch).delete(jobs::delete))
        .route("/v1/jobs/{id}/pause", post(jobs::pause))
        .route("/v1/jobs/{id}/resume", post(jobs::resume))
        .route("/v1/jobs/{id}/preview", get(jobs::preview))
        .route("/v1/jobs/{id}/skip", post(jobs::skip).delete(jobs::unskip))
        .route("/v1/jobs/{id}/graph", get(jobs::graph))
        .route("/v1/jobs/{id}/trigger", post(jobs::trigger))
        .route("/v1/jobs/{id}/backfill", post(jobs::backfill))
        .route("/v1/jobs/{id}/rotate-secret", post(jobs::rotate_secret))
        .route("/v1/jobs/{id}/versions", get(versions::list))
        .route("/v1/jobs/{id}/versions/{version}", get(versions::get))
        .route("/v1/jobs/{id}/diff", get(versions::diff))
        .route("/v1/jobs/{id}/rollback", post(versions::rollback))
        .route("/v1/jobs/{id}/runs", get(runs::list))
        .route("/v1/jobs/{id}/instants", get(instants::list))
        .route("/v1/groups/{name}", get(groups::get).put(groups::put).delete(groups::delete))
        .route("/v1/keys", post(keys::create).get(keys::list))
        .route("/v1/keys/{id}", axum::routing::delete(keys::revoke))
        .route("/v1/calendars", get(calendars::list))
        .route("/v1/calendars/{name}", get(calendars::get).put(calendars::put).delete(calendars::delete))
        .route("/v1/runs/{id}", get(runs::get))
        .route("/v1/runs/{id}/cancel", post(runs::cancel))
        .route("/v1/runs/{id}/rerun", post(runs::rerun))
        .route("/v1/runs/{id}/logs", get(observe::run_logs))
        .route("/v1/forecast", get(forecast::get))
        .route("/v1/audit", get(audit::list))
        .route("/metrics", get(observe::metrics))
        // Layers run bottom-up: authenticate, then the idempotency check that needs the caller.
        .layer(middleware::from_fn_with_state(state.clone(), idempotency::idempotent))
        .layer(middleware::from_fn_with_state(state.clone(), auth::authenticate));
    Router::new()
        .route("/v1/openapi.json", get(openapi::serve))
        .route("/", get(dashboard::to_dashboard))
        .route("/ui", get(dashboard::to_dashboard))
        .route("/ui/", get(dashboard::index))
        .route("/ui/index.html", get(dashboard::index))
        .route("/ui/app.js", get(dashboard::script))
        .route("/ui/app.css", get(dashboard::styles))
        // Callbacks carry the run's own token instead of an API key.
        .route("/v1/runs/{id}/heartbeat", post(runs::heartbeat))
        .route("/v1/runs/{id}/complete", post(runs::complete))
        .merge(protected)
        .fallback(edge::no_route)
        .method_not_allowed_fallback(edge::method_not_allowed)
        .layer(DefaultBodyLimit::max(state.settings.body_limit()))
        .layer(middleware::from_fn(edge::bounded))
        .with_state(state)
}
