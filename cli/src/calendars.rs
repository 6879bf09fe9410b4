//! Named calendars in a jobs file (`calendars:` beside `jobs:`), applied before the jobs that
//! name them: each is created or replaced (`PUT /v1/calendars/{name}`, which brings its edit to
//! every job naming it) or left alone when the API holds it as the file says. Calendars the file
//! does not name are never deleted by `apply`: `sundial calendars delete` does that, refused
//! while a job names one.

use crate::CliError;
use crate::client::Client;
use crate::locate::Lines;
use reqwest::Method;
use serde_json::Value;
use sundial_domain::calendar::NamedCalendarDocument;
use sundial_domain::validation;

/// One calendar of the file, decoded and validated.
#[derive(Debug, Clone)]
pub struct DesiredCalendar {
    pub name: String,
    pub document: NamedCalendarDocument,
    /// Where it starts in the file (`calendars[1]`).
    pub path: String,
}

/// What applying the file's calendars does, in the file's order.
#[derive(Debug, Default)]
pub struct CalendarPlan {
    /// Calendars to write: (calendar, whether it is new).
    pub put: Vec<(DesiredCalendar, bool)>,
    pub unchanged: Vec<String>,
}

/// The file's `calendars` list (empty without one), each checked as the API checks it; errors
/// name the file, the line and the field (`calendars[0].holidays[2]`).
pub fn read(file: &str, text: &str, root: &serde_yaml::Value) -> Result<Vec<DesiredCalendar>, CliError> {
    let lines = Lines::of(text);
    let fail = |path: &str, reason: String| CliError::File {
        file: file.to_string(),
        line: lines.line(path),
        field: path.to_string(),
        reason,
    };
    let items = match root.get("calendars") {
        None => return Ok(Vec::new()),
        Some(serde_yaml::Value::Sequence(items)) => items,
        Some(_) => return Err(fail("calendars", "must be a list of calendars".into())),
    };
    let mut desired: Vec<DesiredCalendar> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("calendars[{i}]");
        let at = |field: &str| if field.is_empty() { path.clone() } else { format!("{path}.{field}") };
        let mut value = serde_json::to_value(item).map_err(|e| fail(&path, e.to_string()))?;
        let name = match value.as_object_mut().map(|map| map.remove("name")) {
            Some(Some(Value::String(name))) => name,
            _ => return Err(fail(&at("name"), "each calendar needs a `name`".into())),
        };
        if !sundial_domain::group::valid_name(&name) {
            let reason = format!("`{name}` must be 1-64 characters of letters, digits, '-', '_' and '.'");
            return Err(fail(&at("name"), reason));
        }
        if desired.iter().any(|d| d.name == name) {
            return Err(fail(&at("name"), format!("`{name}` appears twice in the file")));
        }
        let document: NamedCalendarDocument =
            validation::decode(value).map_err(|e| fail(&at(&e.field), e.reason.clone()))?;
        validation::named_calendar(&document).map_err(|e| fail(&at(&e.field), e.reason.clone()))?;
        desired.push(DesiredCalendar { name, document, path });
    }
    Ok(desired)
}

/// The calendars to write: those the API (`existing`, as `GET /v1/calendars` lists them) lacks or
/// holds otherwise.
pub fn plan(desired: Vec<DesiredCalendar>, existing: &[Value]) -> CalendarPlan {
    let mut plan = CalendarPlan::default();
    for calendar in desired {
        let held = existing.iter().find(|c| c["name"] == calendar.name.as_str()).map(held_document);
        match held {
            Some(Some(held)) if held == calendar.document => plan.unchanged.push(calendar.name),
            held => plan.put.push((calendar, held.is_none())),
        }
    }
    plan
}

/// A listed calendar's document: what the API adds taken away.
fn held_document(calendar: &Value) -> Option<NamedCalendarDocument> {
    let mut document = calendar.clone();
    let map = document.as_object_mut()?;
    for added in ["name", "version", "jobs", "created_at", "updated_at"] {
        map.remove(added);
    }
    serde_json::from_value(document).ok()
}

impl CalendarPlan {
    /// The plan as people read it: `+ calendar nyse`, `~ calendar nyse`.
    pub fn describe(&self) -> String {
        let lines =
            self.put.iter().map(|(c, new)| format!("{} calendar {}\n", if *new { "+" } else { "~" }, c.name));
        lines.collect()
    }

    /// Writes the calendars, reporting progress on stderr unless quiet; an error the API returns
    /// for one names the file's line, and nothing after it is attempted.
    pub async fn execute(
        &self,
        client: &Client,
        file: &str,
        text: &str,
        quiet: bool,
    ) -> Result<(), CliError> {
        let lines = Lines::of(text);
        for (calendar, new) in &self.put {
            if !quiet {
                eprintln!("{} calendar {}", if *new { "create" } else { "update" }, calendar.name);
            }
            let body =
                serde_json::to_value(&calendar.document).map_err(|e| CliError::Request(e.to_string()))?;
            let path = format!("/v1/calendars/{}", calendar.name);
            client.call(Method::PUT, &path, Some(&body)).await.map_err(|e| match e {
                CliError::Rejected { message, field } => {
                    let full = match field.as_deref() {
                        Some(f) if !f.is_empty() && f != "body" && f != "name" => {
                            format!("{}.{f}", calendar.path)
                        }
                        _ => calendar.path.clone(),
                    };
                    CliError::File {
                        file: file.to_string(),
                        line: lines.line(&full),
                        field: full,
                        reason: message,
                    }
                }
                other => other,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read_text(text: &str) -> Result<Vec<DesiredCalendar>, CliError> {
        let root: serde_yaml::Value = serde_yaml::from_str(text).expect("YAML");
        read("jobs.yaml", text, &root)
    }

    #[test]
    fn calendars_are_read_and_planned_against_the_api() {
        let text = "calendars:\n  - name: nyse\n    holidays: [2027-01-01]\n  - name: sun-thu\n    business_days: [sun, mon, tue, wed, thu]\njobs: []\n";
        let desired = read_text(text).expect("valid");
        let existing = [
            json!({"name": "nyse", "version": 3, "holidays": ["2027-01-01"], "jobs": [], "created_at": "2030-01-01T00:00:00Z", "updated_at": "2030-01-01T00:00:00Z"}),
        ];
        let plan = plan(desired, &existing);
        assert_eq!(plan.unchanged, ["nyse"], "held as the file says");
        let put: Vec<(&str, bool)> = plan.put.iter().map(|(c, new)| (c.name.as_str(), *new)).collect();
        assert_eq!(put, [("sun-thu", true)]);
        assert_eq!(plan.describe(), "+ calendar sun-thu\n");
    }

    #[test]
    fn a_bad_calendar_names_its_line_and_field() {
        let text = "calendars:\n  - name: nyse\n    holidays:\n      - 2027-01-01\n      - 2027-02-30\n";
        match read_text(text) {
            Err(CliError::File { line, field, .. }) => {
                assert_eq!((line, field.as_str()), (Some(5), "calendars[0].holidays[1]"));
            }
            other => panic!("{other:?}"),
        }
        let twice = "calendars:\n  - name: a\n  - name: a\n";
        assert!(matches!(read_text(twice), Err(CliError::File { line: Some(3), .. })), "named twice");
        let unnamed = "calendars:\n  - holidays: []\n";
        assert!(matches!(read_text(unnamed), Err(CliError::File { .. })), "no name");
    }
}
