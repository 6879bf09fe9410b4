//! Pagination cursors: the key of the last item a listing returned (what DynamoDB takes as
//! `ExclusiveStartKey`) as an opaque string, and back. A cursor is checked against the listing
//! it is read for: one of another partition, or that does not decode, is `BadCursor`.
//!
//! A cursor is the key's string attributes, in the order the listing names them, as a JSON array
//! in unpadded URL-safe base64 (every key of Sundial's tables is made of strings).

use super::item::{Item, get_s, s};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sundial_domain::ports::store::{StoreError, StoreResult};

/// One attribute of the key a listing's cursors hold.
#[derive(Debug, Clone, Copy)]
pub enum Part<'a> {
    /// An attribute the listing's query fixes (the partition it reads), with its value: a cursor
    /// holding any other value was issued for another listing.
    Fixed(&'a str, &'a str),
    /// An attribute that says where the listing stopped, with what a valid value is.
    Free(&'a str, fn(&str) -> bool),
}

impl Part<'_> {
    fn name(&self) -> &str {
        match self {
            Part::Fixed(name, _) | Part::Free(name, _) => name,
        }
    }

    fn accepts(&self, value: &str) -> bool {
        // DynamoDB refuses an empty key attribute: no cursor of ours holds one.
        !value.is_empty()
            && match self {
                Part::Fixed(_, fixed) => value == *fixed,
                Part::Free(_, valid) => valid(value),
            }
    }
}

/// Any value: for attributes whose values the table alone vouches for.
pub fn any(_: &str) -> bool {
    true
}

/// The cursor of `item`'s key: the attributes of `key`, read from the item.
pub fn encode(key: &[Part], item: &Item) -> StoreResult<String> {
    let values = key.iter().map(|part| get_s(item, part.name())).collect::<StoreResult<Vec<&str>>>()?;
    let json = serde_json::to_string(&values).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(URL_SAFE_NO_PAD.encode(json))
}

/// The key `cursor` holds, if it was issued for a listing of `key`: the same attributes, in the
/// same order, each with a value `key` accepts (the same partition).
pub fn decode(key: &[Part], cursor: &str) -> StoreResult<Item> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| StoreError::BadCursor)?;
    let values: Vec<String> = serde_json::from_slice(&bytes).map_err(|_| StoreError::BadCursor)?;
    if values.len() != key.len() {
        return Err(StoreError::BadCursor);
    }
    key.iter()
        .zip(values)
        .map(|(part, value)| match part.accepts(&value) {
            true => Ok((part.name().to_string(), s(value))),
            false => Err(StoreError::BadCursor),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(value: &str) -> bool {
        value.bytes().all(|b| b.is_ascii_digit())
    }

    fn owned_by(owner: &str) -> [Part<'_>; 3] {
        [Part::Free("id", digits), Part::Fixed("owner", owner), Part::Free("name", any)]
    }

    fn item(pairs: &[(&str, &str)]) -> Item {
        pairs.iter().map(|(name, value)| (name.to_string(), s(*value))).collect()
    }

    #[test]
    fn a_cursor_gives_back_the_key_it_was_made_of() {
        let key = item(&[("id", "42"), ("owner", "alice"), ("name", "nightly"), ("other", "x")]);
        let cursor = encode(&owned_by("alice"), &key).unwrap();
        assert_eq!(
            decode(&owned_by("alice"), &cursor).unwrap(),
            item(&[("id", "42"), ("owner", "alice"), ("name", "nightly")]),
            "only the listing's attributes"
        );
        // The jobs-by-owner cursor keeps the format it had before this module.
        let before = URL_SAFE_NO_PAD.encode(r#"["42","alice","nightly"]"#);
        assert_eq!(cursor, before);
    }

    #[test]
    fn another_partitions_cursor_is_refused() {
        let cursor = encode(&owned_by("alice"), &item(&[("id", "1"), ("owner", "alice"), ("name", "n")]));
        assert_eq!(decode(&owned_by("bob"), &cursor.unwrap()), Err(StoreError::BadCursor));
    }

    #[test]
    fn cursors_that_are_not_ours_are_refused() {
        let json = |text: &str| URL_SAFE_NO_PAD.encode(text);
        for forged in [
            "not a cursor!".to_string(),
            json("2031-08-01T00:00:00Z#x"),
            json(r#"{"id":"1"}"#),
            json(r#"["1","alice"]"#),
            json(r#"["1","alice","n","extra"]"#),
            json(r#"["x1","alice","n"]"#),
            json(r#"["1","alice",""]"#),
            json(r#"[1,"alice","n"]"#),
        ] {
            assert_eq!(decode(&owned_by("alice"), &forged), Err(StoreError::BadCursor), "{forged}");
        }
    }

    #[test]
    fn a_key_missing_from_the_item_is_corrupt() {
        let missing = encode(&owned_by("alice"), &item(&[("id", "1"), ("owner", "alice")]));
        assert!(matches!(missing, Err(StoreError::Corrupt(_))));
    }
}
