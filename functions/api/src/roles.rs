//! The role each route needs ([`needed`]), checked by the authentication middleware before the
//! route runs: reads need `viewer`; the one-off actions on jobs and runs `operator`; changes of
//! jobs, groups and calendars `editor`; keys `admin`. A route the table does not know needs
//! `admin`, so a route added without a row here is closed, not open.

use axum::http::Method;
use sundial_domain::keys::Role;

/// The role a call of `method` on the route `template` (as the router spells it) needs.
pub fn needed(method: &Method, template: &str) -> Role {
    if template.starts_with("/v1/keys") {
        return Role::Admin;
    }
    if *method == Method::GET || *method == Method::HEAD {
        return Role::Viewer;
    }
    match (method.as_str(), template) {
        (
            "POST",
            "/v1/jobs/{id}/pause"
            | "/v1/jobs/{id}/resume"
            | "/v1/jobs/{id}/skip"
            | "/v1/jobs/{id}/trigger"
            | "/v1/jobs/{id}/backfill"
            | "/v1/runs/{id}/cancel"
            | "/v1/runs/{id}/rerun",
        )
        | ("DELETE", "/v1/jobs/{id}/skip") => Role::Operator,
        ("POST", "/v1/jobs" | "/v1/jobs/{id}/rotate-secret" | "/v1/jobs/{id}/rollback")
        | ("PATCH", "/v1/jobs/{id}")
        | ("DELETE", "/v1/jobs/{id}" | "/v1/groups/{name}" | "/v1/calendars/{name}")
        | ("PUT", "/v1/groups/{name}" | "/v1/calendars/{name}") => Role::Editor,
        _ => Role::Admin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_one_off_actions_changes_and_keys_need_rising_roles() {
        assert_eq!(needed(&Method::GET, "/v1/jobs/{id}/runs"), Role::Viewer);
        assert_eq!(needed(&Method::POST, "/v1/jobs/{id}/trigger"), Role::Operator);
        assert_eq!(needed(&Method::DELETE, "/v1/jobs/{id}/skip"), Role::Operator);
        assert_eq!(needed(&Method::PATCH, "/v1/jobs/{id}"), Role::Editor);
        assert_eq!(needed(&Method::PUT, "/v1/calendars/{name}"), Role::Editor);
        assert_eq!(needed(&Method::GET, "/v1/keys"), Role::Admin, "even a read of keys");
        assert_eq!(needed(&Method::POST, "/v1/something-new"), Role::Admin, "unknown: closed");
    }
}
