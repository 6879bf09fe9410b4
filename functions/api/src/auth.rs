//! Authentication middleware: every protected route learns its [`Caller`] here.
//!
//! In AWS, an API Gateway JWT authorizer may stand in front: its verified `sub` claim is the
//! owner. Otherwise the `Authorization: Bearer <key>` header must carry a known API key; keys are
//! compared by their SHA-256 digest, locally and in Lambda alike.

use crate::error::ApiError;
use crate::extract::Caller;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use lambda_http::request::RequestContext;

/// The owner named by an API Gateway JWT authorizer, if one ran for this request.
fn jwt_subject(req: &Request) -> Option<String> {
    match req.extensions().get::<RequestContext>()? {
        RequestContext::ApiGatewayV2(ctx) => {
            ctx.authorizer.as_ref()?.jwt.as_ref()?.claims.get("sub").cloned()
        }
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The key of the request's one `Authorization: Bearer` header; none if there is no such header
/// or more than one (which to believe would be a guess).
fn bearer(req: &Request) -> Option<&str> {
    let mut values = req.headers().get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else { return None };
    let value = value.to_str().ok()?;
    let (scheme, key) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| key.trim())
}

pub async fn authenticate(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let owner = match jwt_subject(&req) {
        Some(subject) => subject,
        None => bearer(&req)
            .and_then(|key| state.settings.api_keys.owner_of(key))
            .cloned()
            .ok_or_else(ApiError::unauthorized)?,
    };
    req.extensions_mut().insert(Caller(owner));
    Ok(next.run(req).await)
}
