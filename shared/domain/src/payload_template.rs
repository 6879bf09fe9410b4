//! Payload templates: a job that opts in (`payload_template: true`) has placeholders in the
//! string values of its payload filled for each attempt, as EventBridge Scheduler fills
//! `<aws.scheduler.scheduled-time>` and Airflow its logical date. A closed list of names, no
//! expressions:
//!
//! | placeholder | becomes |
//! |---|---|
//! | `{{scheduled_at}}` | the run's instant, RFC 3339 UTC (`2030-01-01T09:00:00Z`) |
//! | `{{previous_scheduled_at}}` | the schedule's instant before it (empty when there is none) |
//! | `{{run_id}}` | the run's id |
//! | `{{attempt}}` | the attempt's number, from 1 |
//! | `{{job.name}}`, `{{job.id}}` | the job's name and id |
//!
//! Spaces inside the braces are allowed (`{{ run_id }}`); `{{{{` is a literal `{{`. Anything
//! else between `{{` and `}}` is refused when the job is written, naming the payload's field.
//! Keys are never templated, only string values, at any depth.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

/// The names a placeholder may have.
pub const NAMES: [&str; 6] =
    ["scheduled_at", "previous_scheduled_at", "run_id", "attempt", "job.name", "job.id"];

/// What one attempt's placeholders become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub scheduled_at: DateTime<Utc>,
    pub previous_scheduled_at: Option<DateTime<Utc>>,
    pub run_id: String,
    pub attempt: u32,
    pub job_name: String,
    pub job_id: String,
}

impl Context {
    fn value(&self, name: &str) -> Option<String> {
        let time = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Secs, true);
        Some(match name {
            "scheduled_at" => time(self.scheduled_at),
            "previous_scheduled_at" => self.previous_scheduled_at.map(time).unwrap_or_default(),
            "run_id" => self.run_id.clone(),
            "attempt" => self.attempt.to_string(),
            "job.name" => self.job_name.clone(),
            "job.id" => self.job_id.clone(),
            _ => return None,
        })
    }
}

/// One piece of a templated string.
enum Piece<'a> {
    Text(&'a str),
    Placeholder(&'a str),
}

/// The pieces of `text`, or the placeholder that names nothing known.
fn pieces(text: &str) -> Result<Vec<Piece<'_>>, String> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        pieces.push(Piece::Text(&rest[..open]));
        let after = &rest[open + 2..];
        if let Some(escaped) = after.strip_prefix("{{") {
            pieces.push(Piece::Text("{{"));
            rest = escaped;
            continue;
        }
        let Some(close) = after.find("}}") else {
            return Err(format!(
                "`{{{{` at byte {open} is not closed by `}}}}`; write `{{{{{{{{` for a literal `{{{{`"
            ));
        };
        let name = after[..close].trim();
        if !NAMES.contains(&name) {
            return Err(format!("`{{{{{name}}}}}` is not a placeholder; these are: {}", NAMES.join(", ")));
        }
        pieces.push(Piece::Placeholder(name));
        rest = &after[close + 2..];
    }
    pieces.push(Piece::Text(rest));
    Ok(pieces)
}

/// A string of a payload that is not a template: its field's path and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub field: String,
    pub reason: String,
}

/// Checks every string of `payload` (its path under `field` named on error).
pub fn check(payload: &Value, field: &str) -> Result<(), Refused> {
    match payload {
        Value::String(text) => {
            pieces(text).map(|_| ()).map_err(|reason| Refused { field: field.to_string(), reason })
        }
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, item)| check(item, &format!("{field}[{i}]")))
        }
        Value::Object(map) => map.iter().try_for_each(|(key, item)| check(item, &format!("{field}.{key}"))),
        _ => Ok(()),
    }
}

/// `payload` with its placeholders filled from `context` (a string that does not parse, which a
/// checked payload never has, is left as it is).
pub fn render(payload: &Value, context: &Context) -> Value {
    match payload {
        Value::String(text) => match pieces(text) {
            Ok(pieces) => Value::String(
                pieces
                    .into_iter()
                    .map(|piece| match piece {
                        Piece::Text(text) => text.to_string(),
                        Piece::Placeholder(name) => context.value(name).unwrap_or_default(),
                    })
                    .collect(),
            ),
            Err(_) => payload.clone(),
        },
        Value::Array(items) => Value::Array(items.iter().map(|item| render(item, context)).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), render(v, context))).collect())
        }
        other => other.clone(),
    }
}

/// The longest each placeholder's value may be, in bytes (a job's name is at most 128; a run's
/// id is its job's id, its instant and a manual key's 26 characters, with separators).
fn longest(name: &str) -> usize {
    match name {
        "scheduled_at" | "previous_scheduled_at" => 20,
        "run_id" => 80,
        "attempt" => 3,
        "job.name" => 128,
        _ => 26,
    }
}

/// How many bytes filling `payload`'s placeholders may add to it at most: a payload within its
/// limit filled in stays within the limit plus this.
pub fn growth(payload: &Value) -> usize {
    match payload {
        Value::String(text) => pieces(text).map_or(0, |pieces| {
            let placeholders = pieces.iter().filter_map(|p| match p {
                Piece::Placeholder(name) => Some(longest(name).saturating_sub(name.len() + 4)),
                Piece::Text(_) => None,
            });
            placeholders.sum()
        }),
        Value::Array(items) => items.iter().map(growth).sum(),
        Value::Object(map) => map.values().map(growth).sum(),
        _ => 0,
    }
}

/// Whether `payload` uses the placeholder `name` anywhere.
pub fn uses(payload: &Value, name: &str) -> bool {
    match payload {
        Value::String(text) => pieces(text)
            .is_ok_and(|p| p.iter().any(|piece| matches!(piece, Piece::Placeholder(n) if *n == name))),
        Value::Array(items) => items.iter().any(|item| uses(item, name)),
        Value::Object(map) => map.values().any(|item| uses(item, name)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn context() -> Context {
        Context {
            scheduled_at: "2030-01-02T09:00:00Z".parse().unwrap(),
            previous_scheduled_at: Some("2030-01-01T09:00:00Z".parse().unwrap()),
            run_id: "j.r".into(),
            attempt: 2,
            job_name: "nightly".into(),
            job_id: "j".into(),
        }
    }

    #[test]
    fn placeholders_in_string_values_are_filled_at_any_depth() {
        let payload = json!({
            "day": "{{scheduled_at}}", "since": "{{ previous_scheduled_at }}",
            "nested": [{"who": "{{job.name}} ({{job.id}}) try {{attempt}} of {{run_id}}"}],
            "{{run_id}}": "keys are kept", "n": 3, "literal": "{{{{scheduled_at}}"
        });
        assert!(check(&payload, "payload").is_ok());
        let rendered = render(&payload, &context());
        assert_eq!(
            rendered,
            json!({
                "day": "2030-01-02T09:00:00Z", "since": "2030-01-01T09:00:00Z",
                "nested": [{"who": "nightly (j) try 2 of j.r"}],
                "{{run_id}}": "keys are kept", "n": 3, "literal": "{{scheduled_at}}"
            })
        );
        let first = Context { previous_scheduled_at: None, ..context() };
        assert_eq!(render(&json!("[{{previous_scheduled_at}}]"), &first), json!("[]"));
        assert!(uses(&payload, "previous_scheduled_at") && !uses(&json!("{{run_id}}"), "attempt"));
    }

    #[test]
    fn filling_in_grows_a_payload_by_at_most_its_placeholders_longest_values() {
        assert_eq!(growth(&json!("{{job.name}}")), 128 - 12);
        assert_eq!(growth(&json!({"a": ["{{attempt}}", "{{scheduled_at}} {{run_id}}"], "b": 1})), 4 + 70);
        assert_eq!(growth(&json!("no placeholders {{{{")), 0);
        // A job named as long as names go: what it delivers stays within the bound.
        let payload = json!({"who": "{{job.name}}/{{job.name}}"});
        let filled = render(&payload, &Context { job_name: "n".repeat(128), ..context() });
        let size = |v: &Value| serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
        assert!(size(&filled) <= size(&payload) + growth(&payload));
    }

    #[test]
    fn an_unknown_or_unclosed_placeholder_is_refused_naming_its_field() {
        let field = |payload: Value| check(&payload, "payload").expect_err("refused").field;
        assert_eq!(field(json!({"a": ["ok", "{{now}}"]})), "payload.a[1]");
        assert_eq!(field(json!({"b": {"c": "{{scheduled_at"}})), "payload.b.c");
        let reason = check(&json!("{{ job.owner }}"), "payload").expect_err("refused").reason;
        assert!(reason.contains("job.owner") && reason.contains("scheduled_at"), "{reason}");
    }
}
