//! Handlers of `/v1/jobs`: decode the request, call [`sundial_app::jobs::Jobs`], encode the
//! result with its `ETag`.

use crate::audit::Acts;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{
    Caller, IfMatch, JobPath, JsonBody, JsonObject, OptionalJsonBody, Origin, only_parameters, query_instant,
    query_number,
};
use crate::paging;
use crate::state::AppState;
use crate::view::{
    BACKFILL_RUNS_SHOWN, BackfillView, GraphResponse, JobList, JobView, Preview, RunView, after_parents,
};
use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use sundial_app::jobs::{EditTerms, JobFilter, JobState, MAX_PAGE, MAX_PREVIEW};
use sundial_app::skips::SkipAsk;
use sundial_domain::job::{CatchupPolicy, Job, JobDocument, PauseNote};
use sundial_domain::validation::{self, ValidationError};

/// The view of a job with its newest run (as a listing shows it: without its subscriptions,
/// which SNS is asked for one call a subscription).
async fn view(state: &AppState, job: &Job) -> Result<JobView, ApiError> {
    let last = state.use_cases.jobs.last_run(job).await?;
    let mut view = JobView::from(job).with_last_run(last.as_ref());
    if job.has_parents() {
        view.schedule_description = after_parents(&state.use_cases.jobs.parent_names(job).await?);
    }
    Ok(view)
}

/// The job's subscriptions, if it has endpoints; a failure to list them is logged and leaves
/// them out rather than failing the read.
async fn subscriptions(
    state: &AppState,
    job: &Job,
) -> Option<Vec<sundial_domain::ports::topics::Subscription>> {
    job.document.notify.as_ref()?;
    match state.use_cases.jobs.subscriptions(job).await {
        Ok(list) => Some(list),
        Err(e) => {
            tracing::warn!(job_id = %job.id, error = %e, "could not list the job's subscriptions");
            None
        }
    }
}

/// A job response (with its newest run and its schedule's warnings) and its version as `ETag`.
pub(crate) async fn job_response(
    state: &AppState,
    status: StatusCode,
    job: &Job,
) -> Result<Response, ApiError> {
    let mut view = view(state, job).await?;
    view.subscriptions = subscriptions(state, job).await;
    view.warnings = state.use_cases.jobs.warnings(job).await;
    Ok(job_response_with(status, job, view))
}

fn job_response_with(status: StatusCode, job: &Job, view: JobView) -> Response {
    let mut headers = HeaderMap::new();
    if let Ok(etag) = HeaderValue::from_str(&format!("\"{}\"", job.version)) {
        headers.insert(header::ETAG, etag);
    }
    if status == StatusCode::CREATED
        && let Ok(location) = HeaderValue::from_str(&format!("/v1/jobs/{}", job.id))
    {
        headers.insert(header::LOCATION, location);
    }
    (status, headers, Json(view)).into_response()
}

/// A `true` or `false` query parameter; absent is `false`.
fn query_flag(query: &HashMap<String, String>, name: &str) -> Result<bool, ApiError> {
    match query.get(name).map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(ApiError::bad_request(ValidationError::new(name, "must be `true` or `false`"))),
    }
}

/// Create a job.
#[utoipa::path(post, path = "/v1/jobs", operation_id = "createJob", tag = "jobs", request_body = JobDocument,
    params(("Idempotency-Key" = Option<String>, Header, description = "Replays return the first response")),
    responses(
        (status = 201, description = "Created", body = JobView),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown key", body = ErrorBody),
        (status = 403, description = "Jobs-per-owner limit reached", body = ErrorBody),
        (status = 409, description = "Name taken, or Idempotency-Key reused", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 415, description = "Not JSON", body = ErrorBody),
        (status = 422, description = "Invalid field", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    acts: Acts,
    Caller(owner): Caller,
    origin: Origin,
    JsonBody(document): JsonBody<JobDocument>,
) -> Result<Response, ApiError> {
    let job = acts.jobs_at(&origin).create(&owner, document).await?;
    let last = state.use_cases.jobs.last_run(&job).await?;
    let mut view = JobView::with_secret(&job).with_last_run(last.as_ref());
    view.subscriptions = subscriptions(&state, &job).await;
    view.warnings = state.use_cases.jobs.warnings(&job).await;
    Ok(job_response_with(StatusCode::CREATED, &job, view))
}

/// The filter of a listing's query: `tag` (repeatable), `state`, `group`, `q`; a bad one is a
/// 400 naming it.
fn job_filter(pairs: &[(String, String)]) -> Result<JobFilter, ApiError> {
    let bad = |name: &str, reason: &str| ApiError::bad_request(ValidationError::new(name, reason));
    let mut filter = JobFilter::default();
    for (name, value) in pairs {
        match name.as_str() {
            "tag" => {
                let (key, tag) =
                    value.split_once(':').filter(|(key, _)| validation::valid_tag_key(key)).ok_or_else(
                        || bad("tag", "must be key:value, the key 1-64 of a-z, 0-9, '-', '_', '.', '/'"),
                    )?;
                filter.tags.push((key.to_string(), tag.to_string()));
            }
            "state" => {
                filter.state = Some(match value.as_str() {
                    "active" => JobState::Active,
                    "paused" => JobState::Paused,
                    "failing" => JobState::Failing,
                    _ => return Err(bad("state", "must be active, paused or failing")),
                })
            }
            "group" => filter.group = Some(value.clone()),
            "q" if value.chars().count() > 200 => return Err(bad("q", "at most 200 characters")),
            "q" => filter.q = Some(value.clone()),
            _ => {}
        }
    }
    if filter.tags.len() > validation::MAX_TAGS {
        return Err(bad("tag", "at most 20"));
    }
    Ok(filter)
}

/// List the caller's jobs by name, filtered by tags, state, group and text when asked.
#[utoipa::path(get, path = "/v1/jobs", operation_id = "listJobs", tag = "jobs",
    params(
        ("limit" = Option<u32>, Query, description = "Page size, 1-100 (default 50)"),
        ("next" = Option<String>, Query, description = "Token from the previous page"),
        ("tag" = Option<Vec<String>>, Query, description = "`key:value`; repeat for jobs with every one", explode),
        ("state" = Option<String>, Query, description = "`active`, `paused`, or `failing` (its newest run FAILED or TIMED_OUT)"),
        ("group" = Option<String>, Query, description = "Jobs of this concurrency group"),
        ("q" = Option<String>, Query, description = "Name or description contains (case aside), at most 200 characters"),
    ),
    responses((status = 200, body = JobList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    Caller(owner): Caller,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<Json<JobList>, ApiError> {
    let filter = job_filter(&pairs)?;
    let query: HashMap<String, String> = pairs.into_iter().collect();
    let limit = query_number(&query, "limit", 50, MAX_PAGE)?;
    let token = query.get("next").map(String::as_str);
    let mut limit = limit;
    loop {
        let page = state.use_cases.jobs.list_filtered(&owner, &filter, limit, token).await?;
        let mut jobs = Vec::with_capacity(page.items.len());
        for job in &page.items {
            jobs.push(view(&state, job).await?);
        }
        match paging::shrink(&jobs) {
            None => return Ok(Json(JobList { jobs, next: page.next })),
            Some(fit) => limit = fit,
        }
    }
}

/// Get one job.
#[utoipa::path(get, path = "/v1/jobs/{id}", operation_id = "getJob", tag = "jobs", params(("id" = String, Path)),
    responses((status = 200, body = JobView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get(
    State(state): State<AppState>,
    Caller(owner): Caller,
    JobPath(id): JobPath,
) -> Result<Response, ApiError> {
    let job = state.use_cases.jobs.get(&owner, &id).await?;
    job_response(&state, StatusCode::OK, &job).await
}

/// Change a job with a JSON merge patch (RFC 7396).
///
/// The patch is sent as `application/merge-patch+json` or `application/json`.
#[utoipa::path(patch, path = "/v1/jobs/{id}", operation_id = "updateJob", tag = "jobs",
    params(("id" = String, Path), ("If-Match" = Option<String>, Header, description = "The ETag this edit is based on; compared strongly (a weak W/ tag never matches)"),
        ("break_joins" = Option<bool>, Query, description = "`true` makes an edit that a join below the job would never run after (its parents' instants no longer coincide; its instants then end SKIPPED upstream_missing); refused with 422 otherwise")),
    request_body(description = "A merge patch of the job document",
        content((Object = "application/merge-patch+json"), (Object = "application/json"))),
    responses(
        (status = 200, body = JobView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
        (status = 412, description = "If-Match names an older version", body = ErrorBody),
        (status = 422, body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn patch(
    State(state): State<AppState>,
    acts: Acts,
    JobPath(id): JobPath,
    IfMatch(if_match): IfMatch,
    Query(query): Query<HashMap<String, String>>,
    origin: Origin,
    JsonObject(patch): JsonObject,
) -> Result<Response, ApiError> {
    let terms = EditTerms { if_match, break_joins: query_flag(&query, "break_joins")?, pause: None };
    let job = acts.jobs_at(&origin).patch(&acts.owner, &id, &patch, terms).await?;
    job_response(&state, StatusCode::OK, &job).await
}

/// Delete a job (its runs' history is kept until it expires); refused while other jobs run after it.
#[utoipa::path(delete, path = "/v1/jobs/{id}", operation_id = "deleteJob", tag = "jobs", params(("id" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Other jobs name this one in depends_on; the message names them", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete(acts: Acts, Caller(owner): Caller, JobPath(id): JobPath) -> Result<StatusCode, ApiError> {
    acts.jobs.delete(&owner, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// What a pause says; every field optional (so is the body).
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    /// Why (at most 500 characters); shown with the pause and in the instant ledger.
    pub reason: Option<String>,
    /// RFC 3339: the job resumes by itself then (in the future, at most 366 days ahead).
    pub until: Option<DateTime<Utc>>,
}

/// How a resume treats the instants the pause covered; the body is optional.
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// `skip` (default): none of them run; `latest`: the latest runs now; `all`: each runs now,
    /// as a backfill (at most 1,000).
    pub catchup: Option<CatchupPolicy>,
}

/// Pause a job: it leaves the due index and nothing new is claimed. With `until`, it resumes by
/// itself then; `reason` and who paused it are kept with the pause. Pausing a paused job again
/// replaces what its pause says.
#[utoipa::path(post, path = "/v1/jobs/{id}/pause", operation_id = "pauseJob", tag = "jobs", params(("id" = String, Path)),
    request_body(content = Option<PauseRequest>, content_type = "application/json"),
    responses((status = 200, body = JobView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, description = "A reason too long, or an until not ahead", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn pause(
    State(state): State<AppState>,
    acts: Acts,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    OptionalJsonBody(request): OptionalJsonBody<PauseRequest>,
) -> Result<Response, ApiError> {
    let request = request.unwrap_or_default();
    let note = PauseNote { reason: request.reason, by: Some(owner.clone()), until: request.until };
    let job = acts.jobs.pause(&owner, &id, note).await?;
    job_response(&state, StatusCode::OK, &job).await
}

/// Resume a job from now. The instants missed while paused are skipped, unless `catchup` asks
/// for the latest of them or all of them to run now.
#[utoipa::path(post, path = "/v1/jobs/{id}/resume", operation_id = "resumeJob", tag = "jobs", params(("id" = String, Path)),
    request_body(content = Option<ResumeRequest>, content_type = "application/json"),
    responses((status = 200, body = JobView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, description = "catchup all over more than 1,000 instants", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn resume(
    State(state): State<AppState>,
    acts: Acts,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    OptionalJsonBody(request): OptionalJsonBody<ResumeRequest>,
) -> Result<Response, ApiError> {
    let catchup = request.and_then(|r| r.catchup).unwrap_or(CatchupPolicy::Skip);
    let job = acts.jobs.resume(&owner, &id, catchup).await?;
    job_response(&state, StatusCode::OK, &job).await
}

/// Which instants to skip: exactly one of `next` and `instants`.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SkipRequest {
    /// The next N instants from now (1-100).
    pub next: Option<usize>,
    /// These instants of the schedule (RFC 3339), each still ahead (1-100).
    pub instants: Option<Vec<DateTime<Utc>>>,
}

/// Skip instants of a job's schedule without pausing it: the next N, or the ones listed. Their
/// runs are SKIPPED at their start, saying who asked; the preview and the instant ledger show
/// them. A skip can be taken back until its instant is due.
#[utoipa::path(post, path = "/v1/jobs/{id}/skip", operation_id = "skipJobInstants", tag = "jobs", params(("id" = String, Path)),
    request_body = SkipRequest,
    responses((status = 200, body = JobView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, description = "An instant not of the schedule or already due, a count out of bounds, a job without a schedule", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn skip(
    State(state): State<AppState>,
    acts: Acts,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    JsonBody(request): JsonBody<SkipRequest>,
) -> Result<Response, ApiError> {
    let ask = match (request.next, request.instants) {
        (Some(n), None) => SkipAsk::Next(n),
        (None, Some(instants)) => SkipAsk::Instants(instants),
        _ => return Err(ApiError::bad_request(ValidationError::new("next", "give either next or instants"))),
    };
    let job = acts.skips.skip(&owner, &id, &ask, &owner).await?;
    job_response(&state, StatusCode::OK, &job).await
}

/// Take back skips before their instants are due: the one `instant` names, or every one.
#[utoipa::path(delete, path = "/v1/jobs/{id}/skip", operation_id = "unskipJobInstants", tag = "jobs",
    params(("id" = String, Path), ("instant" = Option<String>, Query, description = "RFC 3339; default every skip ahead")),
    responses((status = 200, body = JobView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, description = "The instant is already due, or not skipped", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn unskip(
    State(state): State<AppState>,
    acts: Acts,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    only_parameters(&query, &["instant"])?;
    let instant = query_instant(&query, "instant")?;
    let job = acts.skips.unskip(&owner, &id, instant).await?;
    job_response(&state, StatusCode::OK, &job).await
}

/// The next instants of a job, in UTC and in its zone, paused or not.
#[utoipa::path(get, path = "/v1/jobs/{id}/preview", operation_id = "previewJob", tag = "jobs",
    params(("id" = String, Path), ("count" = Option<u32>, Query, description = "1-500 (default 10)")),
    responses((status = 200, body = Preview), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn preview(
    State(state): State<AppState>,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Preview>, ApiError> {
    let count = query_number(&query, "count", 10, MAX_PREVIEW as u32)?;
    let preview = state.use_cases.jobs.preview(&owner, &id, count as usize).await?;
    Ok(Json(Preview::new(&preview.job, &preview.instants, preview.dst)))
}

/// Start a manual run now; obeys the concurrency policy (409 naming the active run under `forbid`).
#[utoipa::path(post, path = "/v1/jobs/{id}/trigger", operation_id = "triggerJob", tag = "jobs",
    request_body(content = Option<RunRequest>, description = "Optional: `{\"payload\": …}`, what this run delivers instead of the job's payload"),
    params(("id" = String, Path), ("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key is the same run")),
    responses(
        (status = 202, description = "Run queued", body = RunView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, description = "The payload is too large, or names an unknown placeholder", body = ErrorBody), (status = 409, description = "A run is active under forbid, or the job is paused", body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn trigger(
    State(state): State<AppState>,
    acts: Acts,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    request: Option<axum::Extension<sundial_app::jobs::RequestKey>>,
    OptionalJsonBody(body): OptionalJsonBody<RunRequest>,
) -> Result<(StatusCode, Json<RunView>), ApiError> {
    let input = body.unwrap_or_default().payload;
    let run = acts.jobs.trigger_with(&owner, &id, request.as_deref(), input).await?;
    Ok((StatusCode::ACCEPTED, Json(state.run_view(&run))))
}

/// The range of a backfill.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    /// RFC 3339; the first instant considered.
    pub from: chrono::DateTime<chrono::Utc>,
    /// RFC 3339; the last instant considered (at most now).
    pub to: chrono::DateTime<chrono::Utc>,
    /// What each run delivers instead of the job's payload (bounded as the payload is).
    #[serde(default)]
    #[schema(value_type = Option<Value>)]
    pub payload: Option<serde_json::Value>,
}

/// A manual run's own input; the body is optional.
#[derive(Debug, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// What the run delivers instead of the job's payload (bounded as the payload is; its
    /// placeholders filled if the job asks), shown on the run.
    #[serde(default)]
    #[schema(value_type = Option<Value>)]
    pub payload: Option<serde_json::Value>,
}

/// Run every scheduled instant in a range that has no run yet (at most 1000, paced 10/s).
#[utoipa::path(post, path = "/v1/jobs/{id}/backfill", operation_id = "backfillJob", tag = "jobs", params(("id" = String, Path)),
    request_body = BackfillRequest,
    responses((status = 202, body = BackfillView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, description = "The job is paused", body = ErrorBody),
        (status = 422, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn backfill(
    State(state): State<AppState>,
    acts: Acts,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    JsonBody(range): JsonBody<BackfillRequest>,
) -> Result<(StatusCode, Json<BackfillView>), ApiError> {
    let (runs, existing) = acts.jobs.backfill_with(&owner, &id, range.from, range.to, range.payload).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(BackfillView {
            // Without the payload they share (the request holds it): the answer stays small.
            runs: runs
                .iter()
                .take(BACKFILL_RUNS_SHOWN)
                .map(|r| RunView { payload: None, ..state.run_view(r) })
                .collect(),
            created: runs.len(),
            existing,
        }),
    ))
}

/// Issue a new signing secret for the job's HTTP targets; the response is the only place it shows.
#[utoipa::path(post, path = "/v1/jobs/{id}/rotate-secret", operation_id = "rotateJobSecret", tag = "jobs", params(("id" = String, Path)),
    responses((status = 200, body = JobView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn rotate_secret(
    acts: Acts,
    Caller(owner): Caller,
    JobPath(id): JobPath,
) -> Result<Response, ApiError> {
    let job = acts.jobs.rotate_secret(&owner, &id).await?;
    Ok(job_response_with(StatusCode::OK, &job, JobView::with_secret(&job)))
}

/// The jobs connected to this one through `depends_on` (parents, children and theirs), each with
/// its newest run, and the edges from parent to child.
#[utoipa::path(get, path = "/v1/jobs/{id}/graph", operation_id = "jobGraph", tag = "jobs", params(("id" = String, Path)),
    responses((status = 200, body = GraphResponse), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn graph(
    State(state): State<AppState>,
    Caller(owner): Caller,
    JobPath(id): JobPath,
) -> Result<Json<GraphResponse>, ApiError> {
    let graph = state.use_cases.jobs.graph(&owner, &id).await?;
    Ok(Json(GraphResponse::new(&id, &graph)))
}
