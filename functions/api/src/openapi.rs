//! The OpenAPI document, generated from the handlers and types; the checked-in copy
//! (`docs/openapi.json`) is compared with it by a test.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(Debug, OpenApi)]
#[openapi(
    info(title = "Sundial", description = "A serverless job scheduler: jobs, schedules, runs."),
    paths(
        crate::jobs::create,
        crate::jobs::list,
        crate::jobs::get,
        crate::jobs::patch,
        crate::jobs::delete,
        crate::jobs::pause,
        crate::jobs::resume,
        crate::jobs::preview,
        crate::jobs::trigger,
        crate::jobs::backfill,
        crate::jobs::rotate_secret,
        crate::runs::list,
        crate::observe::run_logs,
        crate::runs::get,
        crate::runs::cancel,
        crate::runs::rerun,
        crate::runs::heartbeat,
        crate::runs::complete,
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "jobs", description = "Job definitions and their schedules"),
        (name = "runs", description = "Run history and control"),
        (name = "callbacks", description = "Called by targets that answered 202, with the run's callback token"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document as pretty JSON, as checked in.
pub fn document() -> String {
    ApiDoc::openapi().to_pretty_json().unwrap_or_default() + "\n"
}

/// `GET /v1/openapi.json`: public.
pub async fn serve() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
