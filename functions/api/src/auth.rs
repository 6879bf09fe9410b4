//! Authentication middleware: every protected route learns its [`Caller`] here.
//!
//! In AWS, an API Gateway JWT authorizer may stand in front: its verified `sub` claim is the
//! owner, or, on a request that names another owner (`X-Sundial-Owner`), the principal that
//! owner's grant to the subject makes it (refused, 403, without one). Otherwise the `Authorization: Bearer <key>` header must carry a known API key: one made
//! through the API (`sdl_…`, read by its id, carrying its role) or a configured one (its owner's
//! admin); keys are compared by their SHA-256 digest, locally and in Lambda alike. Then the role
//! the route needs ([`roles::needed`]) is checked: a key without it is refused (403, naming the
//! role) before the route runs. The request is stamped ([`crate::audit::Stamped`]) with who made
//! it, so that its changes are recorded; a revoked or expired key's refusal is recorded too.

use crate::audit::{self, Stamped};
use crate::error::ApiError;
use crate::extract::{Acting, Caller};
use crate::roles;
use crate::state::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use lambda_http::request::RequestContext;
use std::sync::Arc;
use sundial_domain::audit::{Actor, ActorKind, Stamp};
use sundial_domain::keys::{self, Principal};

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

/// The header a JWT subject names the owner it acts for by.
pub const OWNER_HEADER: &str = "x-sundial-owner";

/// The owner the request's `X-Sundial-Owner` header names, if it has one.
fn acting_for(req: &Request) -> Option<String> {
    req.headers()
        .get(OWNER_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(str::to_string)
}

/// The refusal of a subject that `owner` granted nothing.
fn not_granted(owner: &str) -> ApiError {
    let message = format!("this subject has no grant of `{owner}`'s (POST /v1/keys with a `subject`)");
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", message).with_field("X-Sundial-Owner")
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
    let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
    // Who made the request is known below; the rest of its stamp now.
    let nobody = Actor { kind: ActorKind::Key, name: String::new(), key_id: None };
    let stamp = audit::stamp(nobody, req.method(), &route, req.extensions(), req.headers(), &state);
    let jwt = jwt_subject(&req);
    let principal = match &jwt {
        // A subject acts as itself, or in the name of an owner that granted it a role.
        Some(subject) => match acting_for(&req).filter(|owner| owner != subject) {
            None => Principal::admin(subject.clone()),
            Some(owner) => {
                let keys = state.use_cases.keys.acting(Arc::new(stamp.clone()));
                keys.granted(&owner, subject).await?.ok_or_else(|| not_granted(&owner))?
            }
        },
        None => {
            let key = bearer(&req).ok_or_else(ApiError::unauthorized)?;
            match keys::id_of(key) {
                // A key made through the API: read by its id; a refusal of a revoked or expired
                // one is recorded as this request's.
                Some(_) => {
                    let keys = state.use_cases.keys.acting(Arc::new(stamp.clone()));
                    keys.authenticate(key).await?.ok_or_else(ApiError::unauthorized)?
                }
                // A configured key: its owner's admin.
                None => state
                    .settings
                    .api_keys
                    .owner_of(key)
                    .map(Principal::admin)
                    .ok_or_else(ApiError::unauthorized)?,
            }
        }
    };
    // Only a JWT subject acts for another owner; a key acts for its own.
    if jwt.is_none()
        && let Some(owner) = acting_for(&req).filter(|owner| *owner != principal.owner)
    {
        let message =
            format!("a key acts for its own owner only, not `{owner}` (the header is for JWT subjects)");
        return Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", message).with_field("X-Sundial-Owner"));
    }
    let needed = roles::needed(req.method(), &route);
    if !principal.role.allows(needed) {
        let message =
            format!("this call needs the {} role; the key has {}", needed.as_str(), principal.role.as_str());
        return Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", message).with_field("role"));
    }
    let stamp = Stamp { actor: Actor::of(&principal, jwt.as_deref()), ..stamp };
    req.extensions_mut().insert(Stamped(stamp));
    req.extensions_mut().insert(Caller(principal.owner.clone()));
    req.extensions_mut().insert(Acting(principal));
    Ok(next.run(req).await)
}
