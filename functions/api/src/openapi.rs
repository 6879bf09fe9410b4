//! The OpenAPI document, generated from the handlers and types; the checked-in copy
//! (`docs/openapi.json`) is compared with it by a test.

use axum::Json;
use serde_json::{Value, json};
use std::sync::LazyLock;
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
        crate::jobs::skip,
        crate::jobs::unskip,
        crate::jobs::graph,
        crate::jobs::trigger,
        crate::jobs::backfill,
        crate::jobs::rotate_secret,
        crate::instants::list,
        crate::runs::list,
        crate::observe::run_logs,
        crate::runs::get,
        crate::runs::cancel,
        crate::runs::rerun,
        crate::runs::heartbeat,
        crate::runs::complete,
        crate::groups::put,
        crate::groups::get,
        crate::groups::delete,
        crate::calendars::put,
        crate::calendars::get,
        crate::calendars::list,
        crate::calendars::delete,
        crate::versions::list,
        crate::versions::get,
        crate::versions::diff,
        crate::versions::rollback,
        crate::keys::create,
        crate::keys::list,
        crate::keys::revoke,
        crate::forecast::get,
        crate::audit::list,
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "jobs", description = "Job definitions and their schedules"),
        (name = "runs", description = "Run history and control"),
        (name = "groups", description = "Concurrency groups: how many runs of their jobs execute at once"),
        (name = "keys", description = "API keys and their roles: viewer, operator, editor, admin"),
        (name = "calendars", description = "Named business calendars that jobs' schedules share: an edit reaches every job that names one"),
        (name = "forecast", description = "The load the schedules will make, per minute"),
        (name = "audit", description = "Every change made through the API: who, what, when, and the request that carried it"),
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
    serde_json::to_string_pretty(published()).unwrap_or_default() + "\n"
}

/// `GET /v1/openapi.json`: public.
pub async fn serve() -> Json<&'static Value> {
    Json(published())
}

/// The published document: utoipa's, completed once with what its derive cannot say.
pub fn published() -> &'static Value {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(|| {
        let mut doc = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
        flatten_job_view(&mut doc);
        bound_target_headers(&mut doc);
        constrain_endpoints(&mut doc);
        constrain_parameters(&mut doc);
        add_common_responses(&mut doc);
        add_links(&mut doc);
        add_examples(&mut doc);
        doc
    });
    &DOCUMENT
}

/// `JobView` is the job document and what Sundial adds, in one object (serde's `flatten`).
/// utoipa writes it as `allOf` with `JobDocument`, whose `additionalProperties: false` (the
/// request's `deny_unknown_fields`) then refuses every field the view adds: one object instead.
fn flatten_job_view(doc: &mut Value) {
    let schemas = &mut doc["components"]["schemas"];
    let (Some(document), Some(own)) =
        (schemas["JobDocument"].as_object().cloned(), schemas["JobView"]["allOf"][1].as_object().cloned())
    else {
        return;
    };
    let mut properties = document.get("properties").cloned().unwrap_or_else(|| json!({}));
    if let (Some(merged), Some(added)) =
        (properties.as_object_mut(), own.get("properties").and_then(Value::as_object))
    {
        merged.extend(added.clone());
    }
    let required: Vec<Value> = [&document, &own]
        .iter()
        .filter_map(|schema| schema.get("required").and_then(Value::as_array))
        .flatten()
        .cloned()
        .collect();
    schemas["JobView"] = json!({
        "type": "object",
        "description": "A job as the API shows it: its document (secret header values removed) and what Sundial adds.",
        "required": required,
        "properties": properties,
    });
}

/// An HTTP target sets at most 50 headers (`maxProperties` has no utoipa attribute).
fn bound_target_headers(doc: &mut Value) {
    let Some(variants) = doc["components"]["schemas"]["TargetDocument"]["oneOf"].as_array_mut() else {
        return;
    };
    for variant in variants {
        if variant["properties"]["headers"].is_object() {
            variant["properties"]["headers"]["maxProperties"] =
                json!(sundial_domain::validation::MAX_TARGET_HEADERS);
        }
    }
}

/// The forms of `notify`'s endpoints (items of arrays, where utoipa's attributes do not reach).
fn constrain_endpoints(doc: &mut Value) {
    let properties = &mut doc["components"]["schemas"]["NotifySettings"]["properties"];
    let items = [
        ("email", json!({"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$"})),
        ("sms", json!({"type": "string", "pattern": r"^\+[1-9][0-9]{6,14}$"})),
        ("https", json!({"type": "string", "pattern": "^[Hh][Tt][Tt][Pp][Ss]://", "maxLength": 2048})),
        (
            "sqs",
            json!({"type": "string", "pattern": "^arn:aws(-[a-z0-9-]+)?:sqs:[a-z0-9-]+:[0-9]{12}:[^:]+$"}),
        ),
    ];
    for (kind, schema) in items {
        if properties[kind].is_object() {
            properties[kind]["items"] = schema;
        }
    }
}

/// Bounds of the query and header parameters, as the handlers check them.
fn constrain_parameters(doc: &mut Value) {
    let bounds = [
        ("limit", json!({"minimum": 1, "maximum": sundial_app::jobs::MAX_PAGE})),
        ("count", json!({"minimum": 1, "maximum": sundial_app::jobs::MAX_PREVIEW})),
        ("from", json!({"format": "date-time"})),
        ("to", json!({"format": "date-time"})),
        ("scope", json!({"enum": ["owner", "stack"]})),
        ("Idempotency-Key", json!({"minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7E]+$"})),
    ];
    // The instant ledger pages by instants, up to its own limit.
    let ledger_limit = json!({"minimum": 1, "maximum": sundial_domain::ledger::MAX_LIMIT});
    let Some(paths) = doc["paths"].as_object_mut() else { return };
    for (path, item) in paths.iter_mut() {
        let operations = item.as_object_mut().into_iter().flat_map(|item| item.values_mut());
        for operation in operations {
            let Some(parameters) = operation.get_mut("parameters").and_then(Value::as_array_mut) else {
                continue;
            };
            for parameter in parameters {
                for (name, bound) in &bounds {
                    let bound = match *name {
                        "limit" if path == "/v1/jobs/{id}/instants" => &ledger_limit,
                        _ => bound,
                    };
                    if parameter["name"] == *name
                        && let (Some(schema), Some(bound)) =
                            (parameter["schema"].as_object_mut(), bound.as_object())
                    {
                        schema.extend(bound.clone());
                    }
                }
            }
        }
    }
}

/// Answers any operation may give, written once: a storage outage (503), and for an operation
/// with a body the body's own refusals (400, 413, 415); for a protected one, 401; for one that
/// takes an `Idempotency-Key`, its refusals (400, 409).
fn add_common_responses(doc: &mut Value) {
    let error = json!({"$ref": "#/components/schemas/ErrorBody"});
    let answer = |description: &str| json!({"description": description, "content": {"application/json": {"schema": error}}});
    let Some(paths) = doc["paths"].as_object_mut() else { return };
    for operation in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|item| item.values_mut()) {
        let has_body = operation.get("requestBody").is_some();
        let idempotent = operation
            .get("parameters")
            .and_then(Value::as_array)
            .is_some_and(|parameters| parameters.iter().any(|p| p["name"] == "Idempotency-Key"));
        let protected = operation.get("security").is_some();
        let Some(responses) = operation.get_mut("responses").and_then(Value::as_object_mut) else { continue };
        let mut add = |status: &str, description: &str| {
            responses.entry(status).or_insert_with(|| answer(description));
        };
        add("503", "Storage is unavailable; retry");
        if has_body {
            add("400", "Malformed body: not JSON, a key named twice, a wrong type or an unknown field");
            add("413", "Body too large");
            add("415", "Not application/json");
        }
        if protected {
            add("401", "Missing or unknown key");
        }
        if idempotent {
            add("400", "Malformed Idempotency-Key");
            add("409", "Idempotency-Key used for another request, or its first request is still running");
        }
    }
}

/// Links from the operations that create a resource to the ones that use it, so a client (or a
/// fuzzer) can follow a created job or run.
fn add_links(doc: &mut Value) {
    let job_id = json!({"id": "$response.body#/id"});
    let run_id = json!({"run_id": "$response.body#/id"});
    let to_job = [
        "getJob",
        "updateJob",
        "deleteJob",
        "pauseJob",
        "resumeJob",
        "previewJob",
        "triggerJob",
        "backfillJob",
        "rotateJobSecret",
        "listRuns",
    ];
    let to_run = ["getRun", "cancelRun", "rerunRun", "getRunLogs"];
    let from: [(&str, &str, &str, &[&str], &Value); 4] = [
        ("/v1/jobs", "post", "201", &to_job, &job_id),
        ("/v1/jobs/{id}/trigger", "post", "202", &to_run, &run_id),
        ("/v1/runs/{run_id}/rerun", "post", "202", &to_run, &run_id),
        ("/v1/jobs/{id}", "get", "200", &to_job, &job_id),
    ];
    for (path, method, status, targets, parameters) in from {
        let response = &mut doc["paths"][path][method]["responses"][status];
        if !response.is_object() {
            continue;
        }
        let links: serde_json::Map<String, Value> = targets
            .iter()
            .map(|operation| {
                (operation.to_string(), json!({"operationId": operation, "parameters": parameters}))
            })
            .collect();
        response["links"] = Value::Object(links);
    }
}

/// A job that uses most of the document, as the example of `createJob`: a reader sees a whole
/// job, and a contract fuzzer sends it first, so the full `JobView` of its answer is checked.
fn add_examples(doc: &mut Value) {
    let example = json!({
        "name": "nightly-report",
        "schedule": {"cron": "30 2 * * 1-5", "timezone": "Europe/Paris", "jitter_s": 30},
        "target": {
            "type": "http",
            "url": "https://reports.example.com/hooks/nightly",
            "method": "POST",
            "headers": {"Authorization": {"value": "Bearer s3cr3t", "secret": true}, "X-Team": "reports"}
        },
        "payload": {"report": "daily", "recipients": 3},
        "retry": {"max_attempts": 4, "backoff_s": 30, "max_backoff_s": 600},
        "timeout_s": 900,
        "sla_s": 1800,
        "start_deadline_s": 120,
        "concurrency": "forbid",
        "catchup": "latest",
        "alert_after_failures": 3,
        "notify": {"on": ["failed", "sla_missed"], "email": ["ops@example.com"]}
    });
    let body = &mut doc["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"];
    if body.is_object() {
        body["example"] = example;
    }
}
