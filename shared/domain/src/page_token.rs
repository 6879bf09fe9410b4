//! Pagination tokens a caller cannot forge or carry elsewhere: the store's cursor, bound to what
//! it pages through (an owner's jobs, one job's runs under one filter) and sealed with an
//! HMAC-SHA256 under the deployment's key. A token that was not issued for this listing is refused
//! before the store reads it, so a forged one is the caller's mistake (400), never a storage
//! error.
//!
//! A token is `<cursor>.<tag>`, both base64url: the cursor stays readable (it holds only what
//! the page already showed), the tag makes it unforgeable.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::fmt;

type HmacSha256 = Hmac<Sha256>;

/// The shortest key accepted, in bytes.
pub const MIN_KEY_BYTES: usize = 32;

/// Seals and opens page tokens under one key.
#[derive(Clone)]
pub struct PageTokens {
    mac: HmacSha256,
}

impl fmt::Debug for PageTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PageTokens { key: <redacted> }")
    }
}

/// A key too short to seal tokens with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a page token key needs at least {MIN_KEY_BYTES} bytes")]
pub struct ShortKey;

impl PageTokens {
    /// Tokens under `key`, at least [`MIN_KEY_BYTES`] bytes.
    pub fn new(key: &[u8]) -> Result<Self, ShortKey> {
        if key.len() < MIN_KEY_BYTES {
            return Err(ShortKey);
        }
        <HmacSha256 as Mac>::new_from_slice(key).map(|mac| PageTokens { mac }).map_err(|_| ShortKey)
    }

    /// Tokens under a fresh random key: for one process that issues and reads its own tokens
    /// (the local runtime, tests), where tokens need not survive a restart.
    pub fn random() -> Self {
        let key: [u8; 64] = rand::random();
        PageTokens { mac: <HmacSha256 as Mac>::new(&key.into()) }
    }

    fn tag(&self, scope: &str, cursor: &str) -> HmacSha256 {
        // Each field after its length: no scope and cursor pair can be read as another.
        let mut mac = self.mac.clone();
        for field in [scope, cursor] {
            mac.update(&(field.len() as u64).to_be_bytes());
            mac.update(field.as_bytes());
        }
        mac
    }

    /// The token for the store's `cursor` of the listing `scope`.
    pub fn seal(&self, scope: &str, cursor: &str) -> String {
        let tag = self.tag(scope, cursor).finalize().into_bytes();
        format!("{}.{}", URL_SAFE_NO_PAD.encode(cursor), URL_SAFE_NO_PAD.encode(tag))
    }

    /// The store's cursor in `token`, if this deployment issued it for `scope`.
    pub fn open(&self, scope: &str, token: &str) -> Option<String> {
        let (cursor, tag) = token.split_once('.')?;
        let cursor = String::from_utf8(URL_SAFE_NO_PAD.decode(cursor).ok()?).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        self.tag(scope, &cursor).verify_slice(&tag).ok()?;
        Some(cursor)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_token_opens_only_for_its_scope_and_key() {
        let tokens = PageTokens::new(&[7u8; 32]).unwrap();
        let token = tokens.seal("jobs\nalice", "cursor-1");
        assert_eq!(tokens.open("jobs\nalice", &token).as_deref(), Some("cursor-1"));
        assert_eq!(tokens.open("jobs\nbob", &token), None, "another owner's listing");
        assert_eq!(PageTokens::new(&[8u8; 32]).unwrap().open("jobs\nalice", &token), None, "another key");
    }

    #[test]
    fn a_scope_and_cursor_cannot_be_read_as_another_pair() {
        let tokens = PageTokens::random();
        let (_, tag) = tokens
            .seal("jobs\nalice\nX", "Y")
            .split_once('.')
            .map(|(c, t)| (c.to_string(), t.to_string()))
            .unwrap();
        let moved = format!("{}.{tag}", URL_SAFE_NO_PAD.encode("X\nY"));
        assert_eq!(tokens.open("jobs\nalice", &moved), None);
    }

    #[test]
    fn a_short_key_is_refused() {
        assert_eq!(PageTokens::new(&[1u8; 31]).err(), Some(ShortKey));
    }

    #[test]
    fn a_changed_token_does_not_open() {
        let tokens = PageTokens::random();
        let token = tokens.seal("runs\nj", "2026-01-01T00:00:00Z#s");
        let (cursor, tag) = token.split_once('.').unwrap_or_default();
        let forged_cursor = format!("{}.{tag}", URL_SAFE_NO_PAD.encode("2099-01-01T00:00:00Z#s"));
        for forged in
            [forged_cursor, format!("{cursor}.AAAA"), cursor.to_string(), String::new(), "..".into()]
        {
            assert_eq!(tokens.open("runs\nj", &forged), None, "{forged}");
        }
    }
}
