//! Named calendars: business days and holidays an owner keeps once, under a name, and many
//! jobs' schedule entries share (`"calendar": {"name": "nyse"}`). The calendar is one stored
//! record written under its version; each job that names it holds a copy of its days, stamped
//! with the version copied ([`CalendarDocument::version`]), so the tick computes instants from
//! the job alone. An edit of the calendar is copied into every job that names it (an edit of
//! each job, from the next unclaimed instant on); the jobs are found by their links (as groups
//! keep theirs: [`crate::group::Links`]).
//!
//! What is copied, and what the user wrote, are told apart here: [`resolve`] fills a job
//! document's named entries from the calendars, [`written`] takes the copies out again (what the
//! API shows and a merge patch applies to), and [`names`] lists the calendars a document names.

use crate::calendar::{CalendarDocument, NamedCalendarDocument};
use crate::job::{JobDocument, ScheduleDocument};
use crate::validation::ValidationError;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The most calendars one owner keeps.
pub const MAX_CALENDARS_PER_OWNER: usize = 100;
/// A stored named calendar.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedCalendar {
    pub owner: String,
    pub name: String,
    pub document: NamedCalendarDocument,
    /// Bumped by every edit; the ETag, and the stamp of the copies jobs hold. A new calendar
    /// starts at 1.
    pub version: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl NamedCalendar {
    /// The calendar as a schedule entry holds its copy: its days, stamped with its name and
    /// version, under the entry's own `on_holiday`.
    pub fn copy_for(&self, entry: &CalendarDocument) -> CalendarDocument {
        CalendarDocument {
            name: Some(self.name.clone()),
            version: Some(self.version),
            business_days: self.document.business_days.clone(),
            holidays: self.document.holidays.clone(),
            on_holiday: entry.on_holiday,
        }
    }
}

/// The calendars `document`'s schedule entries name, each once.
pub fn names(document: &JobDocument) -> BTreeSet<String> {
    entries(document.schedule.as_ref()).filter_map(|entry| entry.calendar.as_ref()?.name.clone()).collect()
}

/// Each named calendar `document` uses with the zone of an entry that uses it (`UTC` for an
/// entry without one), each pair once.
pub fn zones(document: &JobDocument) -> BTreeSet<(String, String)> {
    entries(document.schedule.as_ref())
        .filter_map(|entry| {
            let name = entry.calendar.as_ref()?.name.clone()?;
            Some((name, entry.timezone.clone().unwrap_or_else(|| "UTC".to_string())))
        })
        .collect()
}

/// The version of each named calendar `document` holds a copy of (the lowest, should two
/// entries hold different ones).
pub fn held_versions(document: &JobDocument) -> BTreeMap<String, u64> {
    let mut held = BTreeMap::new();
    for calendar in entries(document.schedule.as_ref()).filter_map(|e| e.calendar.as_ref()) {
        if let (Some(name), Some(version)) = (&calendar.name, calendar.version) {
            let lowest = held.entry(name.clone()).or_insert(version);
            *lowest = (*lowest).min(version);
        }
    }
    held
}

/// `document` as its owner wrote it: each named calendar entry without the days and version
/// copied into it. What the API shows, and what a merge patch applies to.
pub fn written(document: &JobDocument) -> JobDocument {
    let mut written = document.clone();
    for calendar in entries_mut(written.schedule.as_mut()).filter_map(|e| e.calendar.as_mut()) {
        if calendar.name.is_some() {
            calendar.version = None;
            calendar.business_days = None;
            calendar.holidays = Vec::new();
        }
    }
    written
}

/// Fills each named calendar entry of `document`, as its owner wrote it, with a copy of the
/// calendar `lookup` finds by name. An entry that names a calendar and also gives days or a
/// version, or names one `lookup` does not find, is an error naming the field.
pub fn resolve(
    document: &mut JobDocument,
    lookup: impl Fn(&str) -> Option<NamedCalendar>,
) -> Result<(), ValidationError> {
    let Some(schedule) = document.schedule.as_mut() else { return Ok(()) };
    let prefixed: Vec<(String, &mut ScheduleDocument)> = match schedule.any.as_mut() {
        Some(any) => any.iter_mut().enumerate().map(|(i, e)| (format!("schedule.any[{i}]"), e)).collect(),
        None => vec![("schedule".to_string(), schedule)],
    };
    for (prefix, entry) in prefixed {
        let Some(calendar) = entry.calendar.as_mut() else { continue };
        let Some(name) = calendar.name.clone() else { continue };
        let field = |f: &str| format!("{prefix}.calendar.{f}");
        let given = [
            ("business_days", calendar.business_days.is_some()),
            ("holidays", !calendar.holidays.is_empty()),
            ("version", calendar.version.is_some()),
        ];
        if let Some((f, _)) = given.into_iter().find(|(_, set)| *set) {
            return Err(ValidationError::new(
                field(f),
                format!(
                    "not beside `name`: the days of `{name}` are the calendar's; edit it with PUT /v1/calendars/{name}"
                ),
            ));
        }
        let Some(named) = lookup(&name) else {
            return Err(ValidationError::new(
                field("name"),
                format!("there is no calendar `{name}`; create it first with PUT /v1/calendars/{name}"),
            ));
        };
        *calendar = named.copy_for(calendar);
    }
    Ok(())
}

/// `document` (as stored, with its copies) with `calendar`'s days copied over the entries that
/// name it: what the document becomes when the calendar is edited.
pub fn recopied(document: &JobDocument, calendar: &NamedCalendar) -> JobDocument {
    let mut recopied = document.clone();
    for entry in entries_mut(recopied.schedule.as_mut()).filter_map(|e| e.calendar.as_mut()) {
        if entry.name.as_deref() == Some(calendar.name.as_str()) {
            *entry = calendar.copy_for(entry);
        }
    }
    recopied
}

/// The entries of a schedule: those of its union, or itself.
fn entries(schedule: Option<&ScheduleDocument>) -> impl Iterator<Item = &ScheduleDocument> {
    schedule.into_iter().flat_map(|s| match &s.any {
        Some(any) => any.iter().collect::<Vec<_>>(),
        None => vec![s],
    })
}

fn entries_mut(schedule: Option<&mut ScheduleDocument>) -> impl Iterator<Item = &mut ScheduleDocument> {
    schedule
        .into_iter()
        .flat_map(|s| if s.any.is_some() { s.any.iter_mut().flatten().collect::<Vec<_>>() } else { vec![s] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calendar::HolidayEntry;
    use serde_json::json;

    fn nyse(version: u64) -> NamedCalendar {
        NamedCalendar {
            owner: "alice".into(),
            name: "nyse".into(),
            document: NamedCalendarDocument {
                holidays: vec![HolidayEntry::Date("2027-01-01".into())],
                ..NamedCalendarDocument::default()
            },
            version,
            created_at: DateTime::UNIX_EPOCH,
            updated_at: DateTime::UNIX_EPOCH,
        }
    }

    fn doc(schedule: serde_json::Value) -> JobDocument {
        serde_json::from_value(json!({
            "name": "j", "target": {"type": "http", "url": "https://example.com/"}, "schedule": schedule
        }))
        .expect("a job document")
    }

    fn lookup(name: &str) -> Option<NamedCalendar> {
        (name == "nyse").then(|| nyse(3))
    }

    #[test]
    fn a_named_entry_is_filled_with_a_copy_and_written_shows_it_as_given() {
        let given = doc(json!({"any": [
            {"cron": "0 9 * * *", "calendar": {"name": "nyse", "on_holiday": "next_business_day"}},
            {"cron": "0 13 * * *", "calendar": {"holidays": ["2027-07-05"]}},
        ]}));
        let mut resolved = given.clone();
        resolve(&mut resolved, lookup).expect("resolves");
        let entry = &resolved.schedule.as_ref().and_then(|s| s.any.clone()).expect("a union")[0];
        let copy = entry.calendar.clone().expect("a calendar");
        assert_eq!(copy.version, Some(3));
        assert_eq!(copy.holidays, vec![HolidayEntry::Date("2027-01-01".into())]);
        assert_eq!(
            copy.on_holiday,
            Some(crate::calendar::OnHoliday::NextBusinessDay),
            "the entry's rule kept"
        );
        assert_eq!(written(&resolved), given, "the copy taken out again; the inline calendar kept");
        let edited = recopied(&resolved, &nyse(4));
        assert_eq!(held_versions(&edited), BTreeMap::from([("nyse".to_string(), 4)]), "the new copy");
        assert_eq!(written(&edited), given, "nothing else changed");
        assert_eq!(names(&resolved), BTreeSet::from(["nyse".to_string()]));
        assert_eq!(zones(&resolved), BTreeSet::from([("nyse".to_string(), "UTC".to_string())]));
        assert_eq!(held_versions(&resolved), BTreeMap::from([("nyse".to_string(), 3)]));
    }

    #[test]
    fn a_named_entry_with_days_of_its_own_or_an_unknown_name_is_refused() {
        let field = |schedule| resolve(&mut doc(schedule), lookup).expect_err("refused").field;
        assert_eq!(
            field(json!({"cron": "0 9 * * *", "calendar": {"name": "nyse", "holidays": ["2027-01-02"]}})),
            "schedule.calendar.holidays"
        );
        assert_eq!(
            field(json!({"cron": "0 9 * * *", "calendar": {"name": "nyse", "version": 1}})),
            "schedule.calendar.version"
        );
        assert_eq!(
            field(
                json!({"any": [{"cron": "0 9 * * *"}, {"cron": "0 1 * * *", "calendar": {"name": "lse"}}]})
            ),
            "schedule.any[1].calendar.name"
        );
    }
}
