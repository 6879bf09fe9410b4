//! `GET /v1/jobs/{id}/instants`: the job's instant ledger, every scheduled instant in a range
//! and what became of it, a page at a time.

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Caller, JobPath, only_parameters, query_instant, query_number};
use crate::paging::{MAX_PAGE_BYTES, fitting};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Query, State};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use std::collections::HashMap;
use sundial_app::ledger::LedgerQuery;
use sundial_domain::ledger::{InstantEntry, Ledger, MAX_LIMIT};
use utoipa::ToSchema;

/// The query parameters this endpoint reads.
const PARAMETERS: [&str; 3] = ["from", "to", "limit"];

/// One page of a job's instant ledger.
#[derive(Debug, Serialize, ToSchema)]
pub struct LedgerView {
    pub job_id: String,
    /// The scheduled instants, oldest first, each with its outcome: `ran` (with its run and
    /// state), `skipped` (the run's reason in `detail`), `missed` (`reason` says why:
    /// `catchup_dropped`, `paused`, `before_start`, `after_end`, `edited`, `unrecorded`) or
    /// `pending`.
    pub instants: Vec<InstantEntry>,
    /// Manual runs (triggers, reruns) in the range, listed apart: asked for, not scheduled.
    pub manual: Vec<InstantEntry>,
    /// Pass as `from` (with the same `to`) for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

impl LedgerView {
    /// The view of `ledger`, cut where its bytes would cross a page's budget (half each for
    /// the instants and the manual runs); the cut becomes `next`.
    fn new(job_id: String, mut ledger: Ledger) -> Self {
        let cut_at = |entries: &[InstantEntry]| {
            let sizes: Vec<usize> =
                entries.iter().map(|e| serde_json::to_vec(e).map_or(0, |b| b.len())).collect();
            let fit = fitting(&sizes, MAX_PAGE_BYTES / 2);
            entries.get(fit).map(|e| e.at)
        };
        let cut = [cut_at(&ledger.instants), cut_at(&ledger.manual)].into_iter().flatten().min();
        if let Some(cut) = cut {
            ledger.instants.retain(|e| e.at < cut);
            ledger.manual.retain(|e| e.at < cut);
            ledger.next = Some(ledger.next.map_or(cut, |next| next.min(cut)));
        }
        LedgerView {
            job_id,
            instants: ledger.instants,
            manual: ledger.manual,
            next: ledger.next.map(|t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
        }
    }
}

/// Every scheduled instant of the job in a range and what became of it: ran, skipped, missed
/// (and why), or pending. Computed from the schedule, the job's recorded pauses and gaps, and
/// its runs.
#[utoipa::path(get, path = "/v1/jobs/{id}/instants", operation_id = "listJobInstants", tag = "jobs",
    params(
        ("id" = String, Path),
        ("from" = Option<String>, Query, description = "RFC 3339; default to - 24 h"),
        ("to" = Option<String>, Query, description = "RFC 3339, not before from and at most 7 days after it; default from + 24 h, or now"),
        ("limit" = Option<u32>, Query, description = "Instants per page, 1-1000 (default 500)"),
    ),
    responses(
        (status = 200, body = LedgerView),
        (status = 400, description = "A malformed or out-of-range from, to or limit (a range upside down or wider than 7 days), or an unknown parameter", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    Caller(owner): Caller,
    JobPath(id): JobPath,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<LedgerView>, ApiError> {
    only_parameters(&query, &PARAMETERS)?;
    let limit = match query.contains_key("limit") {
        true => Some(query_number(&query, "limit", 0, MAX_LIMIT as u32)? as usize),
        false => None,
    };
    let query = LedgerQuery { from: query_instant(&query, "from")?, to: query_instant(&query, "to")?, limit };
    let ledger = state.use_cases.ledgers.instants(&owner, &id, &query).await?;
    Ok(Json(LedgerView::new(id.to_string(), ledger)))
}
