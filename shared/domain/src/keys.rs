//! API keys kept as data, and the roles they carry. A key is made through the API
//! (`POST /v1/keys`), its secret shown once and stored only as its SHA-256 digest; the secret
//! names the key's id (`sdl_<id>_<secret>`), so a presented key is found by one read of its id,
//! never by a scan, and is good only if its digest matches and it is neither expired nor revoked.
//! Revoking a key marks it so (it leaves its owner's list): the next request that presents it is
//! refused (no cache keeps it alive), and the refusal is recorded in the audit trail.
//!
//! Roles are ordered: each can do what the one before can and more ([`Role`]); every route
//! needs one, and the API checks it before the route runs.
//!
//! A key may instead be a grant to a JWT subject (`subject`): it has no secret, and lets the
//! holder of a token an API Gateway JWT authorizer verified for that subject act in the granting
//! owner's name, with its role, when a request names that owner (`X-Sundial-Owner`). It is found
//! by one read too: its id derives from the owner and the subject ([`grant_id`]).

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
    /// A JWT subject (`sub`) to grant the role to, instead of making a secret: its token then
    /// acts for this owner when a request says `X-Sundial-Owner: <owner>` (1-256 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
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
    /// When a refused use of it (revoked or expired) was last recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_refused_at: Option<DateTime<Utc>>,
    /// The JWT subject a grant is for (a grant has no secret: its digest is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The hex SHA-256 digest of the secret.
    pub digest: String,
}

impl ApiKey {
    /// Whether `presented` is this key's secret and the key is still good at `now`.
    pub fn accepts(&self, presented: &str, now: DateTime<Utc>) -> bool {
        self.is_secret(presented) && self.expires_at.is_none_or(|t| now < t) && self.revoked_at.is_none()
    }

    /// Whether `presented` is this key's secret, good or not (never, for a grant).
    pub fn is_secret(&self, presented: &str) -> bool {
        self.subject.is_none() && digest(presented) == self.digest
    }

    /// Whether this is a good grant, at `now`, of `owner`'s to the JWT subject `subject`.
    pub fn grants(&self, owner: &str, subject: &str, now: DateTime<Utc>) -> bool {
        self.owner == owner
            && self.subject.as_deref() == Some(subject)
            && self.expires_at.is_none_or(|t| now < t)
            && self.revoked_at.is_none()
    }

    /// Whether a refused use at `now` should be recorded (at most every [`LAST_USED_EVERY`]).
    pub fn refusal_is_news(&self, now: DateTime<Utc>) -> bool {
        self.last_refused_at.is_none_or(|t| now - t >= LAST_USED_EVERY)
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

/// The longest JWT subject a grant may name.
pub const MAX_SUBJECT_LEN: usize = 256;

/// The id of `owner`'s grant to the JWT subject `subject`: 20 hex digits of a digest of both, so
/// a request naming the owner finds it with one read, and each owner grants a subject once.
pub fn grant_id(owner: &str, subject: &str) -> String {
    digest(&format!("grant\n{owner}\n{subject}"))[..20].to_string()
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
            last_refused_at: None,
            subject: None,
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
    fn a_grant_is_its_owners_to_its_subject_and_has_no_secret() {
        let now = Utc::now();
        let grant = ApiKey {
            id: grant_id("acme", "auth0|bob"),
            owner: "acme".into(),
            name: "bob".into(),
            role: Role::Viewer,
            created_by: "acme".into(),
            created_at: now,
            expires_at: None,
            last_used_at: None,
            revoked_at: None,
            last_refused_at: None,
            subject: Some("auth0|bob".into()),
            digest: String::new(),
        };
        assert!(grant.grants("acme", "auth0|bob", now));
        assert!(!grant.grants("other", "auth0|bob", now) && !grant.grants("acme", "auth0|eve", now));
        assert!(!grant.accepts("", now) && !grant.is_secret(""), "no secret opens a grant");
        assert_ne!(grant_id("acme", "auth0|bob"), grant_id("acme2", "auth0|bob"));
        assert_eq!(grant_id("acme", "x").len(), 20);
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
            last_refused_at: None,
            subject: None,
            digest: String::new(),
        };
        assert!(key(None).use_is_news(now));
        assert!(!key(Some(now - chrono::Duration::seconds(59))).use_is_news(now));
        assert!(key(Some(now - chrono::Duration::seconds(60))).use_is_news(now));
    }
}
