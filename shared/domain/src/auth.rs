//! API keys: who is calling. Keys are kept only as SHA-256 digests, locally and in Lambda alike.
//! Operators are owners named in configuration, whose keys also read the whole stack's forecast.

use crate::job::Owner;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// Why a key list from configuration was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyListError {
    #[error("entry {0} is not `key:owner`")]
    Malformed(usize),
    #[error("entry {0} is not a 64-digit hex SHA-256 digest followed by `:owner`")]
    BadDigest(usize),
}

/// The hex SHA-256 digest of a key, as stored.
pub fn digest(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The known keys, by digest.
#[derive(Debug, Clone, Default)]
pub struct ApiKeys {
    owners_by_digest: HashMap<String, Owner>,
}

impl ApiKeys {
    /// Parses `key:owner,key:owner` (plain keys, hashed here).
    pub fn from_plain_list(list: &str) -> Result<Self, KeyListError> {
        let mut keys = ApiKeys::default();
        for (i, (key, owner)) in entries(list)?.into_iter().enumerate() {
            if key.is_empty() {
                return Err(KeyListError::Malformed(i + 1));
            }
            keys.owners_by_digest.insert(digest(key), owner.to_string());
        }
        Ok(keys)
    }

    /// Parses `sha256hex:owner,...` (digests only, so configuration never holds a key).
    pub fn add_digest_list(&mut self, list: &str) -> Result<(), KeyListError> {
        for (i, (hash, owner)) in entries(list)?.into_iter().enumerate() {
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(KeyListError::BadDigest(i + 1));
            }
            self.owners_by_digest.insert(hash.to_ascii_lowercase(), owner.to_string());
        }
        Ok(())
    }

    /// The owner of a presented key.
    pub fn owner_of(&self, key: &str) -> Option<&Owner> {
        self.owners_by_digest.get(&digest(key))
    }

    pub fn is_empty(&self) -> bool {
        self.owners_by_digest.is_empty()
    }
}

/// The owners whose keys are operators': they may read the whole stack's load forecast (every
/// owner's jobs, counted), and nothing else more than any owner. An owner is named, not a key, so
/// the same list serves API keys and a JWT authorizer's subjects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Operators(std::collections::BTreeSet<Owner>);

impl Operators {
    /// Parses `owner,owner` (blank entries ignored).
    pub fn from_list(list: &str) -> Self {
        Operators(list.split(',').map(str::trim).filter(|o| !o.is_empty()).map(str::to_string).collect())
    }

    pub fn contains(&self, owner: &str) -> bool {
        self.0.contains(owner)
    }
}

/// The `(key, owner)` pairs of a `key:owner,key:owner` list, blank entries skipped.
pub fn entries(list: &str) -> Result<Vec<(&str, &str)>, KeyListError> {
    list.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .enumerate()
        .map(|(i, entry)| {
            entry
                .rsplit_once(':')
                .filter(|(_, owner)| !owner.is_empty())
                .ok_or(KeyListError::Malformed(i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_keys_are_hashed_and_found() {
        let keys = ApiKeys::from_plain_list("k1:alice, k2:bob").unwrap();
        assert_eq!(keys.owner_of("k1").map(String::as_str), Some("alice"));
        assert_eq!(keys.owner_of("k2").map(String::as_str), Some("bob"));
        assert_eq!(keys.owner_of("k3"), None);
        assert!(!format!("{keys:?}").contains("k1:"));
    }

    #[test]
    fn digest_lists_hold_no_keys() {
        let mut keys = ApiKeys::default();
        keys.add_digest_list(&format!("{}:carol", digest("secret"))).unwrap();
        assert_eq!(keys.owner_of("secret").map(String::as_str), Some("carol"));
        assert_eq!(keys.add_digest_list("abc:dave"), Err(KeyListError::BadDigest(1)));
    }

    #[test]
    fn operators_are_named_owners() {
        let ops = Operators::from_list(" ops , ,sre");
        assert!(ops.contains("ops") && ops.contains("sre"));
        assert!(!ops.contains("alice") && !ops.contains(""));
        assert!(!Operators::default().contains("ops"));
    }

    #[test]
    fn malformed_lists_are_rejected() {
        assert_eq!(ApiKeys::from_plain_list("nokey").err(), Some(KeyListError::Malformed(1)));
        assert_eq!(ApiKeys::from_plain_list("a:b,c:").err(), Some(KeyListError::Malformed(2)));
    }
}
