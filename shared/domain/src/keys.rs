//! API keys kept as data, and the roles they carry. A key is made through the API
//! (`POST /v1/keys`), its secret shown once and stored only as its SHA-256 digest; the secret
//! names the key's id (`sdl_<id>_<secret>`), so a presented key is found by one read of its id,
//! never by a scan, and is good only if its digest matches and it is neither expired nor revoked.
//! Revoking a key marks it so (it leaves its owner's list): the next request that presents it is
//! refused (no cache keeps it alive), and the refusal is recorded in the audit trail.
//!
//! Roles are ordered: each can do what the one before can and more ([`Role`]); every route
//! needs one, and the API checks it before the route runs.

use crate::auth::digest;
use crate::entropy::Entropy;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// What a key may do, each role all that the ones before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads: jobs, runs, groups, calendars, the ledger and the forecast.
    Viewer,
    /// A viewer who also pauses, resumes, triggers, skips, backfills, cancels and re-runs.
    Operator,
    /// An operator who also creates, edits and deletes jobs, groups and calendars.
    Editor,
    /// An editor who also manages API keys.
    Admin,
}

impl Role {
    /// Whether this role may make a call that needs `needed`.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Editor => "editor",
            Role::Admin => "admin",
        }
    }
}

/// Who is calling: the owner whose resources the call reaches, the role it holds, and the key
/// it presented (none for a configured key or a JWT subject).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub owner: String,
    pub role: Role,
    pub key: Option<KeyRef>,
}

/// A key as a call names it: its id and name, never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRef {
    pub id: String,
    pub name: String,
}

impl Principal {
    /// An owner with every right over its own resources: a configured key, or a JWT subject.
    pub fn admin(owner: impl Into<String>) -> Self {
        Principal { owner: owner.into(), role: Role::Admin, key: None }
    }

    /// Who made a change, as records say it: the key's name, or the owner.
    pub fn actor(&self) -> String {
        self.key.as_ref().map_or_else(|| self.owner.clone(), |k| k.name.clone())
    }
}

/// The most keys one owner keeps.
pub const MAX_KEYS_PER_OWNER: usize = 100;
/// The longest a key's name may be.
pub const MAX_NAME_LEN: usize = 64;
/// Every key Sundial issues starts so (configured keys never do).
pub const SECRET_PREFIX: &str = "sdl_";
/// How often a key's last use is written, at most.
pub const LAST_USED_EVERY: chrono::Duration = chrono::Duration::seconds(60);

/// What `POST /v1/keys` accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct KeyDocument {
    /// Who or what holds the key ("ci-deploy", "alice"): 1-64 letters, digits, '-', '_', '.'.
    pub name: String,
    pub role: Role,
    /// When the key stops working (RFC 3339, in the future); never, without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// A stored key: everything but its secret, which only its digest stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiKey {
    pub id: String,
    pub owner: String,
    pub name: String,
    pub role: Role,
    /// Who made it: the name of the key that did, or the owner for a configured key.
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_at: Option<DateTime<Utc>>,
    /// When it was revoked: it is refused from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
    /// The hex SHA-256 digest of the secret.
    pub digest: String,
}

impl ApiKey {
    /// Whether `presented` is this key's secret and the key is still good at `now`.
    pub fn accepts(&self, presented: &str, now: DateTime<Utc>) -> bool {
        self.is_secret(presented) && self.expires_at.is_none_or(|t| now < t) && self.revoked_at.is_none()
    }

    /// Whether `presented` is this key's secret, good or not.
    pub fn is_secret(&self, presented: &str) -> bool {
        digest(presented) == self.digest
    }

    /// Whether a use at `now` should be written as its last (at most every [`LAST_USED_EVERY`]).
    pub fn use_is_news(&self, now: DateTime<Utc>) -> bool {
        self.last_used_at.is_none_or(|t| now - t >= LAST_USED_EVERY)
    }
}

/// A new key's id and secret: the id is 20 lowercase hex digits (80 bits, unique among keys),
/// the secret `sdl_<id>_<64 hex digits>` (256 bits more).
pub fn new_secret(entropy: &dyn Entropy) -> (String, String) {
    let id = format!("{:020x}", entropy.bits() >> 48);
    let secret = format!("{SECRET_PREFIX}{id}_{}", crate::entropy::secret(entropy));
    (id, secret)
}

/// The id a presented secret names, if it has the shape of one Sundial issued.
pub fn id_of(presented: &str) -> Option<&str> {
    let rest = presented.strip_prefix(SECRET_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    (hex(id, 20) && hex(secret, 64)).then_some(id)
}

/// Whether `name` can name a key.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entropy::OsEntropy;

    #[test]
    fn roles_are_ordered_each_allowing_the_ones_before() {
        assert!(Role::Admin.allows(Role::Editor) && Role::Editor.allows(Role::Operator));
        assert!(Role::Operator.allows(Role::Viewer) && Role::Viewer.allows(Role::Viewer));
        assert!(!Role::Viewer.allows(Role::Operator) && !Role::Editor.allows(Role::Admin));
    }

    #[test]
    fn a_secret_names_its_id_and_only_its_digest_is_kept() {
        let (id, secret) = new_secret(&OsEntropy);
        assert_eq!(id_of(&secret), Some(id.as_str()));
        let now = Utc::now();
        let key = ApiKey {
            id: id.clone(),
            owner: "alice".into(),
            name: "ci".into(),
            role: Role::Viewer,
            created_by: "alice".into(),
            created_at: now,
            expires_at: Some(now + chrono::Duration::hours(1)),
            last_used_at: None,
            revoked_at: None,
            digest: digest(&secret),
        };
        assert!(!serde_json::to_string(&key).unwrap().contains(&secret[30..]), "the secret is not stored");
        assert!(key.accepts(&secret, now));
        assert!(!key.accepts(&secret, now + chrono::Duration::hours(1)), "expired");
        let revoked = ApiKey { revoked_at: Some(now), ..key.clone() };
        assert!(!revoked.accepts(&secret, now) && revoked.is_secret(&secret), "revoked, yet its secret");
        let other = format!("{SECRET_PREFIX}{id}_{}", "0".repeat(64));
        assert!(!key.accepts(&other, now), "another secret for the same id");
        for bad in ["alice-key", "sdl_", "sdl_abc_def", &secret[..secret.len() - 1], &format!("x{secret}")] {
            assert_eq!(id_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_use_is_written_at_most_every_minute() {
        let now = Utc::now();
        let key = |last: Option<DateTime<Utc>>| ApiKey {
            id: "0".repeat(20),
            owner: "o".into(),
            name: "n".into(),
            role: Role::Admin,
            created_by: "o".into(),
            created_at: now,
            expires_at: None,
            last_used_at: last,
            revoked_at: None,
            digest: String::new(),
        };
        assert!(key(None).use_is_news(now));
        assert!(!key(Some(now - chrono::Duration::seconds(59))).use_is_news(now));
        assert!(key(Some(now - chrono::Duration::seconds(60))).use_is_news(now));
    }
}
