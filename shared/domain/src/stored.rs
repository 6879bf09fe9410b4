//! Decoding documents as stored, leniently: a field the reading version does not know (written
//! by a newer version during a rolling deploy, or by one rolled back from) is dropped and
//! reported, never poison. The API's input keeps `deny_unknown_fields`: a person's typo is an
//! error; a stored field from another version is not.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// The most unknown fields one document may shed before it counts as undecodable.
const MAX_DROPPED: usize = 32;

/// `value` decoded as `T`, with the unknown fields dropped (each named by its path, as
/// `target.retries`); any other error is returned as it is.
pub fn decode_lenient<T: DeserializeOwned>(mut value: Value) -> Result<(T, Vec<String>), String> {
    let mut dropped = Vec::new();
    loop {
        let error = match serde_path_to_error::deserialize::<_, T>(&value) {
            Ok(decoded) => return Ok((decoded, dropped)),
            Err(error) => error,
        };
        let text = error.inner().to_string();
        let unknown = unknown_field(&text);
        let (Some(field), true) = (unknown, dropped.len() < MAX_DROPPED) else {
            return Err(format!("{}: {text}", error.path()));
        };
        let path: Vec<String> = error.path().iter().map(|segment| segment.to_string()).collect();
        if !remove(&mut value, &path, field) {
            return Err(format!("{}: {text}", error.path()));
        }
        let mut named: Vec<&str> = path.iter().map(String::as_str).filter(|s| *s != ".").collect();
        if named.last() != Some(&field) {
            named.push(field);
        }
        dropped.push(named.join("."));
    }
}

/// The field an "unknown field `x`, expected …" error names.
fn unknown_field(text: &str) -> Option<&str> {
    text.strip_prefix("unknown field `")?.split('`').next()
}

/// Removes `field` from the object at `path` (the path may end at the field itself).
fn remove(value: &mut Value, path: &[String], field: &str) -> bool {
    let mut at = value;
    for segment in path {
        if let Some(object) = at.as_object_mut()
            && segment == field
            && object.contains_key(field)
        {
            break;
        }
        at = match at {
            Value::Object(map) => match map.get_mut(segment.as_str()) {
                Some(next) => next,
                None => return false,
            },
            Value::Array(items) => {
                match segment.trim_matches(['[', ']']).parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                    Some(next) => next,
                    None => return false,
                }
            }
            _ => return false,
        };
    }
    at.as_object_mut().is_some_and(|object| object.remove(field).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobDocument;
    use serde_json::json;

    #[test]
    fn unknown_fields_of_another_version_are_dropped_and_named() {
        let stored = json!({
            "name": "n", "schedule": {"cron": "0 * * * *", "exchange": "uk"},
            "target": {"type": "http", "url": "https://example.com/", "mtls": true},
            "retry": {"max_attempts": 2, "strategy": "linear"},
            "owner_team": "data",
        });
        let (document, dropped): (JobDocument, _) = decode_lenient(stored).unwrap();
        assert_eq!(document.name, "n");
        assert_eq!(document.retry.max_attempts, 2);
        let mut dropped = dropped;
        dropped.sort();
        assert_eq!(dropped, ["owner_team", "retry.strategy", "schedule.exchange", "target.mtls"]);
    }

    #[test]
    fn other_errors_stay_errors() {
        let stored = json!({"name": "n", "target": {"type": "http", "url": 7}});
        assert!(decode_lenient::<JobDocument>(stored).is_err());
        assert!(decode_lenient::<JobDocument>(json!({"target": {"type": "ftp"}})).is_err());
    }
}
