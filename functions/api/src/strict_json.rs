//! Request bodies decoded as JSON that means one thing: an object that names a key twice is
//! refused, where `serde_json` would keep the last value and a proxy or a signature checker in
//! front of Sundial might have read the first.
//!
//! `serde_json` has no switch for this, so the document is read through a [`Value`] visitor that
//! checks each object's keys as they arrive; everything else is `serde_json`'s own parsing.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// `bytes` as one JSON value, or why not (`serde_json`'s message, or the repeated key with its
/// line and column).
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = StrictValue.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// Builds a [`Value`], refusing a key an object already has.
#[derive(Debug, Clone, Copy)]
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!("the key `{key}` appears twice")));
            }
            let value = map.next_value_seed(StrictValue)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::from_slice;
    use serde_json::json;

    #[test]
    fn a_repeated_key_is_refused_at_any_depth() {
        for text in [r#"{"a": 1, "a": 2}"#, r#"{"t": {"url": "x", "url": "y"}}"#, r#"[{"k": 1, "k": 1}]"#] {
            let error = from_slice(text.as_bytes()).unwrap_err().to_string();
            assert!(error.contains("appears twice"), "{text}: {error}");
        }
    }

    #[test]
    fn anything_else_reads_as_serde_json_reads_it() {
        let text = r#"{"a": [1, -2, 3.5, "s", null, true, {"b": {}}], "big": 18446744073709551615}"#;
        assert_eq!(
            from_slice(text.as_bytes()).unwrap(),
            serde_json::from_str::<serde_json::Value>(text).unwrap()
        );
        assert_eq!(from_slice(br#"{"a": 1, "b": {"a": 2}}"#).unwrap(), json!({"a": 1, "b": {"a": 2}}));
        assert!(from_slice(b"{} trailing").is_err());
        assert!(from_slice(b"").is_err());
    }
}
