//! The audit trail at the API edge: each authenticated request's [`Stamp`] (who, which action of
//! which route, its request id and the caller's address), the use cases acting for it ([`Acts`]),
//! and `GET /v1/audit`, the trail read back by its owner.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Acting, Caller, Origin, only_parameters, query_instant, query_number};
use crate::paging;
use crate::state::AppState;
use axum::Json;
use axum::extract::{FromRequestParts, MatchedPath, Query, State};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, Method};
use lambda_http::request::RequestContext;
use serde::Serialize;
use std::collections::HashMap;
use sundial_app::audit::AuditError;
use sundial_app::jobs::Jobs;
use sundial_app::use_cases::UseCases;
use sundial_domain::audit::{self, Actor, ActorKind, AuditQuery, AuditRecord, Stamp, TargetKind};
use sundial_domain::job::{JobId, Owner};
use sundial_domain::keys::Role;
use sundial_domain::validation::ValidationError;
use utoipa::ToSchema;

/// The header a caller may name its request by (at most 128 visible ASCII characters); Sundial
/// makes an id up otherwise (in AWS: API Gateway's own).
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// What a changing route does, as its audit records name it (`job.update`, …); a route the
/// table does not know is named by its method and template.
pub fn action(method: &Method, template: &str) -> String {
    let known = match (method.as_str(), template) {
        ("POST", "/v1/jobs") => "job.create",
        ("PATCH", "/v1/jobs/{id}") => "job.update",
        ("DELETE", "/v1/jobs/{id}") => "job.delete",
        ("POST", "/v1/jobs/{id}/pause") => "job.pause",
        ("POST", "/v1/jobs/{id}/resume") => "job.resume",
        ("POST", "/v1/jobs/{id}/skip") => "job.skip",
        ("DELETE", "/v1/jobs/{id}/skip") => "job.unskip",
        ("POST", "/v1/jobs/{id}/trigger") => "job.trigger",
        ("POST", "/v1/jobs/{id}/backfill") => "job.backfill",
        ("POST", "/v1/jobs/{id}/rotate-secret") => "job.rotate_secret",
        ("POST", "/v1/jobs/{id}/rollback") => "job.rollback",
        ("PUT", "/v1/groups/{name}") => "group.put",
        ("DELETE", "/v1/groups/{name}") => "group.delete",
        ("PUT", "/v1/calendars/{name}") => "calendar.put",
        ("DELETE", "/v1/calendars/{name}") => "calendar.delete",
        ("POST", "/v1/keys") => "key.create",
        ("DELETE", "/v1/keys/{id}") => "key.revoke",
        ("POST", "/v1/runs/{id}/cancel") => "run.cancel",
        ("POST", "/v1/runs/{id}/rerun") => "run.rerun",
        ("POST", "/v1/runs/{id}/complete") => "run.complete",
        _ => return format!("{method} {template}"),
    };
    known.to_string()
}

/// The request's id and the caller's address, as the request carries them.
fn request_of(extensions: &Extensions, headers: &HeaderMap, state: &AppState) -> (String, Option<String>) {
    let gateway = match extensions.get::<RequestContext>() {
        Some(RequestContext::ApiGatewayV2(ctx)) => Some((ctx.request_id.clone(), ctx.http.source_ip.clone())),
        #[allow(unreachable_patterns)]
        _ => None,
    };
    let named = headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|id| !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string);
    let connected = extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|axum::extract::ConnectInfo(addr)| addr.ip().to_string());
    let (gateway_id, gateway_source) = gateway.unwrap_or_default();
    let id = gateway_id
        .or(named)
        .unwrap_or_else(|| audit::record_id(state.ports.clock.now(), state.ports.entropy.as_ref()));
    (id, gateway_source.or(connected))
}

/// The stamp of a request of `actor` on the route `template`.
pub fn stamp(
    actor: Actor,
    method: &Method,
    template: &str,
    extensions: &Extensions,
    headers: &HeaderMap,
    state: &AppState,
) -> Stamp {
    let (request_id, source) = request_of(extensions, headers, state);
    Stamp {
        actor,
        action: action(method, template),
        route: format!("{method} {template}"),
        request_id,
        source,
    }
}

/// The request's stamp, put into it by the authentication middleware.
#[derive(Debug, Clone)]
pub struct Stamped(pub Stamp);

/// The use cases acting for this request: every change they make is written with its record;
/// and the owner the request acts for.
#[derive(Debug)]
pub struct Acts {
    use_cases: UseCases,
    pub owner: Owner,
}

impl FromRequestParts<AppState> for Acts {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Stamped(stamp) = parts.extensions.get::<Stamped>().cloned().ok_or_else(ApiError::unauthorized)?;
        let Caller(owner) = parts.extensions.get::<Caller>().cloned().ok_or_else(ApiError::unauthorized)?;
        Ok(Acts { use_cases: state.use_cases.acting(stamp), owner })
    }
}

/// The use cases acting for a target's callback, which authenticates with its run's own token:
/// its changes are recorded as the token's.
#[derive(Debug)]
pub struct ActsForRun(pub UseCases);

impl FromRequestParts<AppState> for ActsForRun {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let route = parts.extensions.get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
        // Named by its run: `/v1/runs/{id}/complete`.
        let run = parts.uri.path().split('/').nth(3).unwrap_or_default().chars().take(128).collect();
        let actor = Actor { kind: ActorKind::RunToken, name: run, key_id: None };
        let stamp = stamp(actor, &parts.method, &route, &parts.extensions, &parts.headers, state);
        Ok(ActsForRun(state.use_cases.acting(stamp)))
    }
}

impl Acts {
    /// The jobs service acting for this request, which came in on `origin` (counted among
    /// Sundial's own endpoints).
    pub fn jobs_at(&self, origin: &Origin) -> Jobs {
        match &origin.0 {
            Some(url) => self.use_cases.jobs.reached_at(url),
            None => self.use_cases.jobs.clone(),
        }
    }
}

impl std::ops::Deref for Acts {
    type Target = UseCases;

    fn deref(&self) -> &UseCases {
        &self.use_cases
    }
}

/// A page of the trail.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditPage {
    pub records: Vec<AuditRecord>,
    /// The token of the next page, if the trail may hold more (a page can be short, even empty,
    /// when its read budget ran out first: follow `next` until it is absent).
    pub next: Option<String>,
}

impl From<AuditError> for ApiError {
    fn from(e: AuditError) -> Self {
        match e {
            AuditError::BadToken => {
                ApiError::bad_request(ValidationError::new("next", "is not a token this listing issued"))
            }
            AuditError::Store(s) => s.into(),
        }
    }
}

/// `record` as a caller of `role` sees it: the life of keys, and the addresses requests came
/// from, are an admin's to read (as keys are); the rest is every role's.
fn shown_to(role: Role, mut record: AuditRecord) -> Option<AuditRecord> {
    if role.allows(Role::Admin) {
        return Some(record);
    }
    if record.target.kind == TargetKind::Key {
        return None;
    }
    record.source = None;
    Some(record)
}

/// The caller's audit trail, newest first, filtered. Records of keys, and the callers'
/// addresses, are shown to admin keys only.
#[utoipa::path(get, path = "/v1/audit", operation_id = "listAudit", tag = "audit",
    params(
        ("job" = Option<String>, Query, description = "Records of this job (its id): its changes and its runs'"),
        ("actor" = Option<String>, Query, description = "Records of this actor: a key's name or id, a JWT subject, or the owner (a configured key)"),
        ("action" = Option<String>, Query, description = "Records of this action, such as `job.update` or `run.cancel`"),
        ("from" = Option<String>, Query, description = "Records at or after this RFC 3339 instant"),
        ("to" = Option<String>, Query, description = "Records before this RFC 3339 instant"),
        ("limit" = Option<u32>, Query, description = "Page size, 1-50 (default 50)"),
        ("next" = Option<String>, Query, description = "Token from the previous page"),
    ),
    responses((status = 200, body = AuditPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    Acting(principal): Acting,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<AuditPage>, ApiError> {
    let owner = principal.owner;
    only_parameters(&query, &["job", "actor", "action", "from", "to", "limit", "next"])?;
    let text = |name: &str| -> Result<Option<String>, ApiError> {
        match query.get(name) {
            Some(v) if v.is_empty() || v.len() > 200 => {
                Err(ApiError::bad_request(ValidationError::new(name, "must be 1-200 characters")))
            }
            other => Ok(other.cloned()),
        }
    };
    let job = match query.get("job") {
        // An id no job can have has no records.
        Some(text) => Some(
            JobId::parse(text)
                .ok_or_else(|| ApiError::bad_request(ValidationError::new("job", "is not a job id")))?,
        ),
        None => None,
    };
    let filter = AuditQuery {
        job,
        actor: text("actor")?,
        action: text("action")?,
        from: query_instant(&query, "from")?,
        to: query_instant(&query, "to")?,
    };
    if let (Some(from), Some(to)) = (filter.from, filter.to)
        && from >= to
    {
        return Err(ApiError::bad_request(ValidationError::new("to", "must be after from")));
    }
    let mut limit = query_number(&query, "limit", audit::MAX_PAGE, audit::MAX_PAGE)?;
    let token = query.get("next").map(String::as_str);
    loop {
        let page = state.use_cases.audit.page(&owner, &filter, limit, token).await?;
        match paging::shrink(&page.items) {
            None => {
                let records = page.items.into_iter().filter_map(|r| shown_to(principal.role, r)).collect();
                return Ok(Json(AuditPage { records, next: page.next }));
            }
            Some(fit) => limit = fit,
        }
    }
}
