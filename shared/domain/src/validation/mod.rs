//! Validation: turning a [`JobDocument`] into a schedule Sundial can run, or an error that names
//! the field and the reason. Nothing is written for a document that fails here. [`validate`]
//! checks a document field by field, in a fixed order, one named step each; the target's checks,
//! one file per kind, are in `target/`.

mod target;

pub use target::{HTTP_METHODS, MAX_TARGET_HEADERS};

use crate::calendar::{self, Calendar, CalendarDocument, HolidayEntry, NamedCalendarDocument};
use crate::job::{JobDocument, NotifySettings, ScheduleDocument};
use crate::limits::{self, Limits, TargetAllowList};
use crate::schedule::days::{DayRule, DaySelect};
use crate::schedule::{DstPolicy, Recurrence, Schedule, ceil_second};
use chrono::{DateTime, NaiveDate, Utc, Weekday};
use chrono_tz::Tz;
use serde::de::DeserializeOwned;

/// A rejected field: `field` is a dotted path into the document (`schedule.cron`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ValidationError {
    pub field: String,
    pub reason: String,
}

impl ValidationError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ValidationError { field: field.into(), reason: reason.into() }
    }
}

type Result<T> = std::result::Result<T, ValidationError>;

/// What validation needs besides the document.
#[derive(Debug, Clone)]
pub struct Rules<'a> {
    pub limits: &'a Limits,
    pub targets: &'a TargetAllowList,
}

/// Checks `doc` and normalises it in place (HTTP method upper-cased). Returns the job's schedule
/// (`None`: run once, now; or, with `depends_on`, at its parents' instants, which the use case
/// checks against the owner's other jobs). `created_at` anchors a rate without `start_at`; `now` decides
/// whether the schedule still has a future instant.
pub fn validate(
    doc: &mut JobDocument,
    rules: &Rules<'_>,
    created_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Option<Schedule>> {
    checked(doc, rules, created_at, now, Ahead::Required)
}

/// Checks `doc` as [`validate`] does, but keeps a schedule that has no instant left: a document
/// whose schedule its owner did not edit (a pause, a payload edit, an edit of a calendar it
/// names copied in) may have run out of instants, and the job ends as at its `end_at`.
pub fn validate_kept(
    doc: &mut JobDocument,
    rules: &Rules<'_>,
    created_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Option<Schedule>> {
    checked(doc, rules, created_at, now, Ahead::MayEnd)
}

/// Whether a schedule must still have an instant ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ahead {
    Required,
    MayEnd,
}

fn checked(
    doc: &mut JobDocument,
    rules: &Rules<'_>,
    created_at: DateTime<Utc>,
    now: DateTime<Utc>,
    ahead: Ahead,
) -> Result<Option<Schedule>> {
    validate_name(&doc.name)?;
    validate_labels(doc)?;
    target::validate_target(&mut doc.target, rules.targets)?;
    validate_payload(&doc.payload, rules)?;
    if doc.payload_template {
        template_fits(&doc.payload, rules)?;
    }
    target::payload_fits(doc)?;
    validate_durations(doc, rules)?;
    validate_window(doc, created_at, now)?;
    if let Some(n) = doc.alert_after_failures {
        in_range("alert_after_failures", n, 1, limits::MAX_ALERT_AFTER_FAILURES)?;
    }
    if let Some(notify) = &doc.notify {
        validate_notify(notify, rules.targets)?;
    }
    if let Some(group) = &doc.group {
        validate_group(group)?;
    }
    validate_parents(doc)?;
    let Some(schedule_doc) = &doc.schedule else {
        return Ok(None);
    };
    validate_schedule(schedule_doc, rules, created_at, now, ahead).map(Some)
}

/// A run's own payload (a trigger's, re-run's or backfill's), checked as a job's is: at most the
/// limit's bytes, and with known placeholders when `templated`; named `payload`.
pub fn run_input(input: &serde_json::Value, rules: &Rules<'_>, templated: bool) -> Result<()> {
    validate_payload(input, rules)?;
    // A run's own payload is kept on its item, beside its attempts: bounded to the default
    // limit whatever a deployment allows its jobs (see `limits::RUN_INPUT_BYTES`).
    let bytes = serde_json::to_vec(input).map(|v| v.len()).unwrap_or(usize::MAX);
    if bytes > limits::RUN_INPUT_BYTES {
        return Err(ValidationError::new(
            "payload",
            format!("is {bytes} bytes; a run's own payload is at most {} bytes", limits::RUN_INPUT_BYTES),
        ));
    }
    if templated {
        template_fits(input, rules)?;
    }
    Ok(())
}

/// A templated payload: its placeholders known, and filled in still within the limit.
fn template_fits(payload: &serde_json::Value, rules: &Rules<'_>) -> Result<()> {
    crate::payload_template::check(payload, "payload")
        .map_err(|r| ValidationError::new(r.field, r.reason))?;
    let bytes = serde_json::to_vec(payload).map(|v| v.len()).unwrap_or(usize::MAX);
    let filled = bytes.saturating_add(crate::payload_template::growth(payload));
    if filled > rules.limits.max_payload_bytes {
        return Err(ValidationError::new(
            "payload",
            format!(
                "filled in, it could reach {filled} bytes; the limit is {} bytes",
                rules.limits.max_payload_bytes
            ),
        ));
    }
    Ok(())
}

/// `payload`: at most the limit's bytes as JSON.
fn validate_payload(payload: &serde_json::Value, rules: &Rules<'_>) -> Result<()> {
    let payload_bytes = serde_json::to_vec(payload).map(|v| v.len()).unwrap_or(usize::MAX);
    if payload_bytes > rules.limits.max_payload_bytes {
        return Err(ValidationError::new(
            "payload",
            format!("is {payload_bytes} bytes; the limit is {} bytes", rules.limits.max_payload_bytes),
        ));
    }
    Ok(())
}

/// The attempts and their timing: `retry.*`, `timeout_s`, `sla_s`, `start_deadline_s`.
fn validate_durations(doc: &JobDocument, rules: &Rules<'_>) -> Result<()> {
    let retry = &doc.retry;
    in_range("retry.max_attempts", retry.max_attempts, 1, rules.limits.max_attempts)?;
    in_range("retry.backoff_s", retry.backoff_s, 1, limits::MAX_BACKOFF_S)?;
    in_range("retry.max_backoff_s", retry.max_backoff_s, retry.backoff_s, limits::MAX_BACKOFF_S)?;
    in_range("timeout_s", doc.timeout_s, 1, limits::MAX_TIMEOUT_S)?;
    if let Some(sla) = doc.sla_s {
        in_range("sla_s", sla, 1, limits::MAX_DEADLINE_S)?;
    }
    if let Some(deadline) = doc.start_deadline_s {
        in_range("start_deadline_s", deadline, 1, limits::MAX_DEADLINE_S)?;
    }
    if let Some(window) = doc.catchup_window_s {
        in_range("catchup_window_s", window, 1, limits::MAX_DEADLINE_S)?;
    }
    Ok(())
}

/// `flexible_window_s`: in range, and only on a job that has no jitter and no parents.
fn validate_window(doc: &JobDocument, created_at: DateTime<Utc>, now: DateTime<Utc>) -> Result<()> {
    let Some(window) = doc.flexible_window_s else {
        return Ok(());
    };
    in_range("flexible_window_s", window, 0, limits::MAX_FLEXIBLE_WINDOW_S)?;
    if doc.schedule.as_ref().is_some_and(|s| s.jitter_s.is_some()) {
        return Err(ValidationError::new(
            "flexible_window_s",
            "takes the place of schedule.jitter_s: set one of them (the other to null when patching)",
        ));
    }
    if !doc.depends_on.is_empty() {
        return Err(ValidationError::new(
            "flexible_window_s",
            "a job with depends_on starts when its parents end and has no window of its own",
        ));
    }
    // Past SQS's longest delay a run is claimed when its start comes within reach; the job's
    // instants are claimed in order, so windows must not overlap (as EventBridge Scheduler asks
    // a window to be shorter than the schedule's interval).
    if window > limits::MAX_MESSAGE_DELAY_S
        && let Some(schedule) = &doc.schedule
    {
        if schedule.any.is_some() {
            return Err(ValidationError::new(
                "flexible_window_s",
                format!(
                    "over {} s, a window needs one schedule, not a union (its instants may fall closer)",
                    limits::MAX_MESSAGE_DELAY_S
                ),
            ));
        }
        let shorter = parse_schedule(schedule, created_at)
            .ok()
            .and_then(|s| s.gap_shorter_than(chrono::Duration::seconds(i64::from(window)), now));
        if let Some(interval) = shorter.map(|gap| gap.num_seconds()) {
            return Err(ValidationError::new(
                "flexible_window_s",
                format!(
                    "over {} s, a window must not be longer than the time between two instants ({interval} s apart in the next year)",
                    limits::MAX_MESSAGE_DELAY_S
                ),
            ));
        }
    }
    Ok(())
}

/// `group`: a concurrency group's name.
fn validate_group(group: &str) -> Result<()> {
    if !crate::group::valid_name(group) {
        return Err(ValidationError::new(
            "group",
            format!(
                "must be 1-{} characters of letters, digits, '-', '_' and '.'",
                crate::group::MAX_NAME_LEN
            ),
        ));
    }
    Ok(())
}

/// `depends_on`: no schedule beside it, and no more parents than a job may have.
fn validate_parents(doc: &JobDocument) -> Result<()> {
    if doc.depends_on.is_empty() {
        return Ok(());
    }
    if doc.schedule.is_some() {
        return Err(ValidationError::new(
            "schedule",
            "a job with depends_on runs at its parents' instants and has no schedule of its own",
        ));
    }
    if doc.depends_on.len() > crate::workflow::MAX_PARENTS {
        let reason = crate::workflow::GraphError::TooMany(doc.depends_on.len());
        return Err(ValidationError::new("depends_on", reason.to_string()));
    }
    Ok(())
}

/// `schedule`: parsed, its instants no closer than the minimum interval, and one of them still
/// ahead of `now`.
fn validate_schedule(
    schedule_doc: &ScheduleDocument,
    rules: &Rules<'_>,
    created_at: DateTime<Utc>,
    now: DateTime<Utc>,
    ahead: Ahead,
) -> Result<Schedule> {
    let schedule = parse_schedule(schedule_doc, created_at)?;
    // Each schedule of a union on its own: the union's rate is bounded by its entries' sum.
    let entries: Vec<(String, &ScheduleDocument, &Schedule)> = match (&schedule.recurrence, &schedule_doc.any)
    {
        (Recurrence::Any(parsed), Some(docs)) => docs
            .iter()
            .zip(parsed)
            .enumerate()
            .map(|(i, (doc, entry))| (format!("schedule.any[{i}]"), doc, entry))
            .collect(),
        _ => vec![("schedule".to_string(), schedule_doc, &schedule)],
    };
    for (prefix, doc, entry) in &entries {
        if let Some(gap) = entry.min_interval_seconds()
            && gap < rules.limits.min_interval_s
        {
            let field = if doc.cron.is_some() { "cron" } else { "rate" };
            return Err(ValidationError::new(
                format!("{prefix}.{field}"),
                format!(
                    "instants can be {gap} s apart; the minimum interval is {} s",
                    rules.limits.min_interval_s
                ),
            ));
        }
    }
    // A union's entries may fall closer together than any one of them: its own instants keep
    // the minimum interval too.
    if matches!(schedule.recurrence, Recurrence::Any(_))
        && let Some(gap) = schedule.gap_shorter_than(
            chrono::Duration::seconds(i64::try_from(rules.limits.min_interval_s).unwrap_or(i64::MAX)),
            now,
        )
    {
        return Err(ValidationError::new(
            "schedule.any",
            format!(
                "two of its schedules fall {} s apart; the minimum interval is {} s",
                gap.num_seconds(),
                rules.limits.min_interval_s
            ),
        ));
    }
    if ahead == Ahead::Required && schedule.first_at_or_after(now).is_none() {
        let field = match (&schedule.recurrence, schedule.end_at) {
            (_, Some(end)) if end <= now => "schedule.end_at",
            (Recurrence::At(_), _) => "schedule.at",
            (Recurrence::Cron(_), _) => "schedule.cron",
            (Recurrence::Any(_), _) => "schedule.any",
            _ => "schedule",
        };
        return Err(ValidationError::new(field, "the schedule has no instant in the future"));
    }
    Ok(schedule)
}

/// A stored job's schedule (`None`: run once), as its document was validated when written.
pub fn stored_schedule(job: &crate::job::Job) -> Result<Option<Schedule>> {
    job.document.schedule.as_ref().map(|s| parse_schedule(s, job.created_at)).transpose()
}

/// Builds the [`Schedule`] a (syntactically valid) schedule document stands for.
pub fn parse_schedule(doc: &ScheduleDocument, created_at: DateTime<Utc>) -> Result<Schedule> {
    if let Some(max_runs) = doc.max_runs {
        if !(1..=limits::MAX_RUNS).contains(&max_runs) {
            return Err(ValidationError::new(
                "schedule.max_runs",
                format!("{max_runs} is outside 1..={}", limits::MAX_RUNS),
            ));
        }
        if doc.at.is_some() {
            return Err(ValidationError::new(
                "schedule.max_runs",
                "a one-time schedule runs once: leave it out",
            ));
        }
    }
    if let Some(jitter) = doc.jitter_s {
        in_range("schedule.jitter_s", jitter, 0, limits::MAX_JITTER_S)?;
    }
    let Some(entries) = &doc.any else { return parse_entry(doc, created_at, "schedule") };
    let beside = [("cron", doc.cron.is_some()), ("rate", doc.rate.is_some()), ("at", doc.at.is_some())];
    let beside = beside.into_iter().chain([("timezone", doc.timezone.is_some()), ("dst", doc.dst.is_some())]);
    let beside = beside.chain([
        ("calendar", doc.calendar.is_some()),
        ("business_days_only", doc.business_days_only.is_some()),
    ]);
    let beside = beside.chain([("business_day", doc.business_day.is_some())]);
    if let Some((name, _)) = beside.into_iter().find(|(_, set)| *set) {
        return Err(ValidationError::new(
            format!("schedule.{name}"),
            "not beside `any`: each of its schedules has its own (set it to null when patching)",
        ));
    }
    if entries.is_empty() || entries.len() > limits::MAX_SCHEDULES {
        return Err(ValidationError::new(
            "schedule.any",
            format!("holds 1 to {} schedules, not {}", limits::MAX_SCHEDULES, entries.len()),
        ));
    }
    let (start_at, end_at) = bounds(doc, "schedule")?;
    // The job's item holds the document (and an edit's gap a copy): holidays are bounded in all,
    // the entry that passes the bound named.
    let mut holidays = 0;
    for (i, entry) in entries.iter().enumerate() {
        holidays += entry.calendar.as_ref().map_or(0, |c| c.holidays.len());
        if holidays > calendar::MAX_HOLIDAYS {
            return Err(ValidationError::new(
                format!("schedule.any[{i}].calendar.holidays"),
                format!("takes the union's calendars past {} holiday entries in all", calendar::MAX_HOLIDAYS),
            ));
        }
    }
    let mut parsed = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let prefix = format!("schedule.any[{i}]");
        let refused = [("any", entry.any.is_some()), ("jitter_s", entry.jitter_s.is_some())];
        let refused = refused.into_iter().chain([("max_runs", entry.max_runs.is_some())]);
        if let Some((name, _)) = refused.into_iter().find(|(_, set)| *set) {
            return Err(ValidationError::new(
                format!("{prefix}.{name}"),
                "belongs to the whole schedule, beside `any`",
            ));
        }
        parsed.push(parse_entry(entry, created_at, &prefix)?);
    }
    Ok(Schedule {
        recurrence: Recurrence::Any(parsed),
        timezone: Tz::UTC,
        dst: DstPolicy::default(),
        days: None,
        start_at,
        end_at,
    })
}

/// A schedule's `start_at` and `end_at`, each optional.
type Bounds = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// `start_at` and `end_at` of the schedule document at `prefix`, the end after the start.
fn bounds(doc: &ScheduleDocument, prefix: &str) -> Result<Bounds> {
    let start_at = doc.start_at.as_deref().map(|s| instant(&format!("{prefix}.start_at"), s)).transpose()?;
    let end_at = doc.end_at.as_deref().map(|s| instant(&format!("{prefix}.end_at"), s)).transpose()?;
    if let (Some(start), Some(end)) = (start_at, end_at)
        && end <= start
    {
        return Err(ValidationError::new(format!("{prefix}.end_at"), "must be later than start_at"));
    }
    Ok((start_at, end_at))
}

/// One `cron`, `rate` or `at` schedule, its fields named under `prefix`.
fn parse_entry(doc: &ScheduleDocument, created_at: DateTime<Utc>, prefix: &str) -> Result<Schedule> {
    let field = |name: &str| format!("{prefix}.{name}");
    let timezone = match &doc.timezone {
        None => Tz::UTC,
        Some(name) => name.parse::<Tz>().map_err(|_| {
            ValidationError::new(field("timezone"), format!("`{name}` is not an IANA time zone name"))
        })?,
    };
    let (start_at, end_at) = bounds(doc, prefix)?;
    let recurrence = match (&doc.cron, &doc.rate, &doc.at) {
        (Some(expr), None, None) => {
            Recurrence::Cron(expr.parse().map_err(|e| ValidationError::new(field("cron"), format!("{e}")))?)
        }
        (None, Some(rate), None) => Recurrence::Rate {
            rate: rate.parse().map_err(|e| ValidationError::new(field("rate"), format!("{e}")))?,
            anchor: start_at.unwrap_or_else(|| ceil_second(created_at)),
        },
        (None, None, Some(at)) => Recurrence::At(instant(&field("at"), at)?),
        (None, None, None) => {
            return Err(ValidationError::new(
                prefix,
                "needs one of cron, rate or at (omit schedule to run once, now)",
            ));
        }
        _ => {
            return Err(ValidationError::new(
                prefix,
                "takes only one of cron, rate or at (set the others to null when patching)",
            ));
        }
    };
    if doc.dst.is_some() && !matches!(recurrence, Recurrence::Cron(_)) {
        return Err(ValidationError::new(
            field("dst"),
            "only a cron meets DST changes: a rate and an instant are fixed in real time",
        ));
    }
    let days = day_rule(doc, prefix)?;
    if days.is_some() && !matches!(recurrence, Recurrence::Cron(_)) {
        let name =
            [("calendar", doc.calendar.is_some()), ("business_days_only", doc.business_days_only.is_some())]
                .into_iter()
                .find(|(_, set)| *set)
                .map_or("business_day", |(name, _)| name);
        return Err(ValidationError::new(
            field(name),
            "only a cron has dates to pick: a rate runs by elapsed time, and `at` names its one instant",
        ));
    }
    Ok(Schedule { recurrence, timezone, dst: doc.dst.unwrap_or_default(), days, start_at, end_at })
}

/// The dates a schedule entry's cron fires on, from its `calendar`, `business_days_only` and
/// `business_day` (`None`: every date its cron names).
fn day_rule(doc: &ScheduleDocument, prefix: &str) -> Result<Option<DayRule>> {
    let field = |name: &str| format!("{prefix}.{name}");
    let only = doc.business_days_only.unwrap_or(false);
    if doc.calendar.is_none() && !only && doc.business_day.is_none() {
        return Ok(None);
    }
    let calendar = match &doc.calendar {
        None => Calendar::default(),
        Some(calendar) => business_calendar(calendar, &field("calendar"))?,
    };
    let on_holiday = doc.calendar.as_ref().and_then(|c| c.on_holiday);
    let select = match doc.business_day {
        Some(n) if n == 0 || !(-MAX_BUSINESS_DAY..=MAX_BUSINESS_DAY).contains(&n) => {
            return Err(ValidationError::new(
                field("business_day"),
                format!(
                    "{n} is not a business day of a month: 1 to {MAX_BUSINESS_DAY} from the first, -1 to -{MAX_BUSINESS_DAY} from the last"
                ),
            ));
        }
        Some(_) if on_holiday.is_some() => {
            return Err(ValidationError::new(
                field("calendar.on_holiday"),
                "not with `business_day`: the N-th business day is one already",
            ));
        }
        Some(n) => DaySelect::NthBusinessDay(n),
        None => DaySelect::BusinessDays(on_holiday.unwrap_or_default()),
    };
    if calendar.is_empty_week() {
        return Err(ValidationError::new(field("calendar.business_days"), "names no business day"));
    }
    Ok(Some(DayRule { calendar: std::sync::Arc::new(calendar), select }))
}

/// The most N of `business_day`: a month has 31 days, all business days in a week of seven.
const MAX_BUSINESS_DAY: i32 = 31;

/// A named calendar's document (`PUT /v1/calendars/{name}`) checked: its description, its
/// zone, and its days as a schedule entry's own calendar is checked, errors naming the field.
pub fn named_calendar(doc: &NamedCalendarDocument) -> Result<Calendar> {
    if let Some(description) = &doc.description {
        let chars = description.chars().count();
        if chars > calendar::MAX_DESCRIPTION_CHARS {
            return Err(ValidationError::new(
                "description",
                format!("holds {chars} characters, more than {}", calendar::MAX_DESCRIPTION_CHARS),
            ));
        }
    }
    if let Some(zone) = &doc.timezone {
        zone.parse::<Tz>().map_err(|_| {
            ValidationError::new("timezone", format!("`{zone}` is not an IANA time zone name"))
        })?;
    }
    let days = CalendarDocument {
        business_days: doc.business_days.clone(),
        holidays: doc.holidays.clone(),
        ..CalendarDocument::default()
    };
    let calendar = business_calendar(&days, "")?;
    if calendar.is_empty_week() {
        return Err(ValidationError::new("business_days", "names no business day"));
    }
    Ok(calendar)
}

/// A calendar document checked: weekday names, dates and ranges, at most
/// [`calendar::MAX_HOLIDAYS`] dates. Fields are named under `prefix` (none when empty).
fn business_calendar(doc: &CalendarDocument, prefix: &str) -> Result<Calendar> {
    let prefix = if prefix.is_empty() { String::new() } else { format!("{prefix}.") };
    let days = match &doc.business_days {
        Some(names) if names.len() > 7 => {
            return Err(ValidationError::new(
                format!("{prefix}business_days"),
                "names a week's days, 7 at most",
            ));
        }
        None => vec![Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri],
        Some(names) => names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                name.parse::<Weekday>().map_err(|_| {
                    ValidationError::new(
                        format!("{prefix}business_days[{i}]"),
                        format!("`{name}` is not a weekday (mon … sun)"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?,
    };
    let date = |field: String, text: &str| {
        NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .map_err(|_| ValidationError::new(field, format!("`{text}` is not a date (YYYY-MM-DD)")))
    };
    if doc.holidays.len() > calendar::MAX_HOLIDAYS {
        return Err(ValidationError::new(
            format!("{prefix}holidays"),
            format!("holds {} entries, more than {}", doc.holidays.len(), calendar::MAX_HOLIDAYS),
        ));
    }
    let mut holidays = Vec::new();
    for (i, entry) in doc.holidays.iter().enumerate() {
        let field = format!("{prefix}holidays[{i}]");
        match entry {
            HolidayEntry::Date(text) => holidays.push(date(field, text)?),
            HolidayEntry::Range { from, to } => {
                let (from, to) = (date(format!("{field}.from"), from)?, date(format!("{field}.to"), to)?);
                let dates = calendar::range_dates(from, to).ok_or_else(|| {
                    ValidationError::new(
                        field.clone(),
                        format!("runs from {from} to {to}: a range goes forward, a year at most"),
                    )
                })?;
                holidays.extend(dates);
            }
        }
        if holidays.len() > calendar::MAX_HOLIDAYS {
            return Err(ValidationError::new(
                format!("{prefix}holidays"),
                format!("holds more than {} dates", calendar::MAX_HOLIDAYS),
            ));
        }
    }
    Ok(Calendar::new(&days, holidays))
}

/// Parses an RFC 3339 instant, rounding fractions of a second up: a run never starts early.
fn instant(field: &str, text: &str) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text).map(|t| ceil_second(t.with_timezone(&Utc))).map_err(|_| {
        ValidationError::new(
            field,
            format!("`{text}` is not an RFC 3339 instant such as 2026-05-01T09:30:00Z"),
        )
    })
}

fn in_range(field: &str, value: u32, min: u32, max: u32) -> Result<()> {
    if value < min || value > max {
        return Err(ValidationError::new(field, format!("{value} is outside {min}..={max}")));
    }
    Ok(())
}

/// The most tags a job has.
pub const MAX_TAGS: usize = 20;
/// The longest a job's description may be, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1000;
/// The longest a tag's value may be, in characters.
pub const MAX_TAG_VALUE_CHARS: usize = 256;

/// Whether `key` can be a tag's key: 1-64 of `a-z`, `0-9`, `-`, `_`, `.`, `/`.
pub fn valid_tag_key(key: &str) -> bool {
    (1..=64).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.' | b'/'))
}

/// `description` and `tags`: bounded, keys named as tags may be, values printable.
fn validate_labels(doc: &JobDocument) -> Result<()> {
    if let Some(description) = &doc.description {
        let chars = description.chars().count();
        if chars > MAX_DESCRIPTION_CHARS {
            let reason = format!("holds {chars} characters, more than {MAX_DESCRIPTION_CHARS}");
            return Err(ValidationError::new("description", reason));
        }
    }
    if doc.tags.len() > MAX_TAGS {
        return Err(ValidationError::new(
            "tags",
            format!("holds {} tags, more than {MAX_TAGS}", doc.tags.len()),
        ));
    }
    for (key, value) in &doc.tags {
        if !valid_tag_key(key) {
            return Err(ValidationError::new(
                format!("tags.{key}"),
                "a tag's key is 1-64 of a-z, 0-9, '-', '_', '.' and '/'",
            ));
        }
        if value.chars().count() > MAX_TAG_VALUE_CHARS || value.chars().any(char::is_control) {
            return Err(ValidationError::new(
                format!("tags.{key}"),
                format!(
                    "a tag's value is at most {MAX_TAG_VALUE_CHARS} characters, none of them a control character"
                ),
            ));
        }
    }
    Ok(())
}

fn validate_name(name: &str) -> Result<()> {
    let ok_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if name.is_empty() || name.len() > 128 || !ok_chars {
        return Err(ValidationError::new(
            "name",
            "must be 1-128 characters of letters, digits, '-', '_' and '.'",
        ));
    }
    Ok(())
}

fn validate_notify(notify: &NotifySettings, list: &TargetAllowList) -> Result<()> {
    let kinds: [(&str, &Vec<String>); 4] =
        [("email", &notify.email), ("sms", &notify.sms), ("https", &notify.https), ("sqs", &notify.sqs)];
    for (kind, endpoints) in kinds {
        if endpoints.len() > limits::MAX_ENDPOINTS_PER_KIND {
            return Err(ValidationError::new(
                format!("notify.{kind}"),
                format!("at most {} endpoints", limits::MAX_ENDPOINTS_PER_KIND),
            ));
        }
        for (i, endpoint) in endpoints.iter().enumerate() {
            let field = format!("notify.{kind}[{i}]");
            let ok = match kind {
                "email" => endpoint.split_once('@').is_some_and(|(user, domain)| {
                    let (name, top) = domain.rsplit_once('.').unwrap_or_default();
                    !user.is_empty()
                        && !name.is_empty()
                        && !top.is_empty()
                        && !domain.contains('@')
                        && !endpoint.contains(|c: char| c.is_whitespace() || c == '\u{feff}')
                }),
                "sms" => endpoint.strip_prefix('+').is_some_and(|digits| {
                    (7..=15).contains(&digits.len())
                        && digits.bytes().all(|b| b.is_ascii_digit())
                        && !digits.starts_with('0')
                }),
                // A URL SNS will call: a refused destination is named as such.
                "https" => match target::http_url(&field, endpoint, true) {
                    Ok(url) => {
                        list.network
                            .check_url(&url)
                            .map_err(|refused| ValidationError::new(&field, refused.to_string()))?;
                        true
                    }
                    Err(_) => false,
                },
                _ => {
                    let is_arn = limits::QueueArn::parse(endpoint).is_some();
                    if is_arn {
                        // SNS delivers into the queue: the same rules as an SQS target.
                        list.check_queue_arn(endpoint).map_err(|refusal| {
                            target::refused(&field, endpoint, refusal, "SUNDIAL_ALLOWED_SQS")
                        })?;
                    }
                    is_arn
                }
            };
            if !ok {
                let want = match kind {
                    "email" => "an e-mail address",
                    "sms" => "an E.164 phone number such as +14155550100",
                    "https" => "an https URL",
                    _ => "an SQS queue ARN",
                };
                return Err(ValidationError::new(field, format!("`{endpoint}` is not {want}")));
            }
        }
    }
    if notify.on.is_empty() {
        return Err(ValidationError::new("notify.on", "must name at least one event"));
    }
    if let Some(slack) = &notify.slack {
        validate_slack_webhook(slack.webhook_url.as_deref(), list)?;
    }
    if let Some(pagerduty) = &notify.pagerduty {
        let field = "notify.pagerduty.routing_key";
        let key = pagerduty.routing_key.as_deref().ok_or_else(|| {
            ValidationError::new(
                field,
                "needs the integration's routing key (write-only: responses never show it)",
            )
        })?;
        if key.len() != 32 || !key.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(ValidationError::new(
                field,
                "must be the 32-character routing key of a PagerDuty Events API v2 integration",
            ));
        }
    }
    Ok(())
}

/// A Slack webhook's URL: https, or plain http to an address the deployment's allow-list opened
/// (a stand-in on a private network); never echoed in the error, since the URL is the secret.
fn validate_slack_webhook(url: Option<&str>, list: &TargetAllowList) -> Result<()> {
    let field = "notify.slack.webhook_url";
    let text = url.ok_or_else(|| {
        ValidationError::new(field, "needs the incoming webhook's URL (write-only: responses never show it)")
    })?;
    let url = target::http_url(field, text, false)
        .map_err(|_| ValidationError::new(field, "is not an https URL with a host"))?;
    list.network.check_url(&url).map_err(|refused| ValidationError::new(field, refused.to_string()))?;
    let inside = match url.host() {
        Some(url::Host::Ipv4(ip)) => crate::egress::class(ip.into()).is_some(),
        Some(url::Host::Ipv6(ip)) => crate::egress::class(ip.into()).is_some(),
        _ => false,
    };
    if url.scheme() == "http" && !inside {
        return Err(ValidationError::new(
            field,
            "must be https (plain http only to an address the deployment's SUNDIAL_ALLOWED_NETWORKS opens)",
        ));
    }
    Ok(())
}

/// Decodes a JSON object into `T`, naming the offending field (`retry.max_attempts`) on failure.
pub fn decode<T: DeserializeOwned>(value: serde_json::Value) -> std::result::Result<T, ValidationError> {
    if !value.is_object() {
        return Err(ValidationError::new("body", "must be a JSON object"));
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        let reason = e.into_inner().to_string();
        // serde names an unknown or missing field only in its message: lift it into the path.
        let named = ["unknown field `", "missing field `"]
            .iter()
            .find_map(|prefix| reason.strip_prefix(prefix))
            .and_then(|r| r.split('`').next());
        let field = match named {
            Some(unknown) if field.is_empty() => unknown.to_string(),
            Some(unknown) if !field.ends_with(unknown) => format!("{field}.{unknown}"),
            _ if field.is_empty() => "body".to_string(),
            _ => field,
        };
        ValidationError::new(&field, without_secrets(&field, reason))
    })
}

/// Fields whose values are, or may hold, write-only secrets: an error about them never quotes
/// what was sent (serde quotes a mistyped string, names an unknown variant, spells a number).
const WRITE_ONLY: [&str; 3] = ["notify", "notify.slack", "notify.pagerduty"];

/// `reason` as told of `field`: about a write-only field, only what was expected.
fn without_secrets(field: &str, reason: String) -> String {
    let holds_secret =
        WRITE_ONLY.contains(&field) || WRITE_ONLY[1..].iter().any(|w| field.starts_with(&format!("{w}.")));
    if !holds_secret {
        return reason;
    }
    match reason.find("expected") {
        Some(at) => format!("not a valid value (not shown: it may be a secret); {}", &reason[at..]),
        None => "not a valid value (not shown: it may be a secret)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_mistyped_channel_secret_is_not_quoted_back() {
        let hook = "https://hooks.slack.com/services/T0/B0/s3cret";
        let cases = [
            json!({"slack": hook}),
            json!({"pagerduty": "r0utingk3y"}),
            json!({"slack": {"webhook_url": 5_123_456}}),
            json!({"pagerduty": {"routing_key": "k", "severity": "r0utingk3y"}}),
            json!(hook),
        ];
        for notify in cases {
            let doc =
                json!({"name": "n", "target": {"type": "http", "url": "https://x.test/"}, "notify": notify});
            let error = decode::<JobDocument>(doc).unwrap_err();
            assert!(error.field.starts_with("notify"), "{error:?}");
            let leaked = ["s3cret", "r0utingk3y", "5123456"].iter().any(|s| error.reason.contains(s));
            assert!(!leaked && error.reason.contains("expected"), "{error:?}");
        }
    }

    fn check(doc: serde_json::Value) -> std::result::Result<Option<Schedule>, ValidationError> {
        let mut doc: JobDocument = serde_json::from_value(doc).unwrap();
        let limits = Limits::default();
        let targets = TargetAllowList {
            lambda: vec!["allowed-*".into()],
            sqs: vec!["http://127.0.0.1:4566/000000000000/allowed-*".into()],
            sns: vec!["arn:aws:sns:*:*:allowed-*".into()],
            state_machines: vec!["arn:aws:states:*:*:stateMachine:allowed-*".into()],
            ecs_clusters: vec!["allowed-*".into()],
            ecs_task_definitions: vec![
                "report*".into(),
                "t".into(),
                "t:*".into(),
                "arn:aws:ecs:*:*:task-definition/report:*".into(),
            ],
            event_buses: vec!["arn:aws:events:*:*:event-bus/allowed-*".into()],
            own_prefix: "sundial-test-".into(),
            network: crate::egress::Egress::default().allowing_loopback(),
        };
        let now: DateTime<Utc> = "2026-06-01T00:00:00Z".parse().unwrap();
        validate(&mut doc, &Rules { limits: &limits, targets: &targets }, now, now)
    }

    fn field_of(doc: serde_json::Value) -> String {
        check(doc).err().map(|e| e.field).unwrap_or_else(|| "<accepted>".into())
    }

    /// A target URL means one host to every parser: no backslash (read as `/` by some and as
    /// part of a user name by others), no `@` in the written authority, no port 0.
    #[test]
    fn a_target_url_names_one_host_and_a_real_port() {
        let url = |text: &str| check(job(json!({"target": {"type": "http", "url": text}}))).err();
        for hostile in [
            "http://a.example\\@10.0.0.1/",
            "http://a.example\\@10.0.0.1",
            "http://user@a.example/",
            "https://a.example:0/hook",
            "http://a.example:0",
        ] {
            let refused = url(hostile);
            assert_eq!(refused.map(|e| e.field), Some("target.url".to_string()), "{hostile}");
        }
        assert!(
            url("https://a.example:8443/hook?next=@later").is_none(),
            "an @ after the authority is a path's"
        );
    }

    /// A union's faults are named by the entry and field at fault; nothing else is allowed
    /// beside `any`, nor inside an entry what belongs to the whole.
    #[test]
    fn a_union_names_the_entry_at_fault() {
        let union = |any: serde_json::Value, extra: serde_json::Value| {
            let mut schedule = json!({"any": any});
            if let (Some(schedule), Some(extra)) = (schedule.as_object_mut(), extra.as_object()) {
                schedule.extend(extra.clone());
            }
            field_of(job(json!({"schedule": schedule})))
        };
        let daily = json!({"cron": "0 9 * * *", "timezone": "America/New_York"});
        let monthly = json!({"cron": "0 13 1 * *"});
        assert_eq!(union(json!([daily, monthly]), json!({"jitter_s": 60, "max_runs": 5})), "<accepted>");
        assert_eq!(union(json!([]), json!({})), "schedule.any");
        assert_eq!(union(json!(vec![daily.clone(); 11]), json!({})), "schedule.any");
        assert_eq!(union(json!([daily]), json!({"cron": "* * * * *"})), "schedule.cron");
        assert_eq!(union(json!([daily]), json!({"timezone": "UTC"})), "schedule.timezone");
        assert_eq!(union(json!([daily, {"cron": "61 * * * *"}]), json!({})), "schedule.any[1].cron");
        assert_eq!(
            union(json!([daily, {"cron": "0 9 * * *", "timezone": "Mars/Olympus"}]), json!({})),
            "schedule.any[1].timezone"
        );
        assert_eq!(union(json!([{"rate": "1 hour", "jitter_s": 5}]), json!({})), "schedule.any[0].jitter_s");
        assert_eq!(union(json!([{"any": [daily]}]), json!({})), "schedule.any[0].any");
        assert_eq!(
            union(json!([{"at": "2030-01-01T00:00:00Z", "max_runs": 1}]), json!({})),
            "schedule.any[0].max_runs"
        );
        assert_eq!(union(json!([{}]), json!({})), "schedule.any[0]");
        assert_eq!(union(json!([{"cron": "* * * * *", "rate": "1 hour"}]), json!({})), "schedule.any[0]");
        assert_eq!(
            union(json!([{"rate": "5 seconds"}]), json!({})),
            "schedule.any[0].rate",
            "each entry keeps the minimum interval"
        );
        assert_eq!(
            union(
                json!([{"at": "2030-01-01T00:00:00Z", "start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"}]),
                json!({})
            ),
            "schedule.any[0].end_at"
        );
        assert_eq!(
            union(json!([{"at": "2020-01-01T00:00:00Z"}]), json!({})),
            "schedule.any",
            "no instant ahead"
        );
        assert_eq!(
            union(
                json!([{"rate": "10 seconds", "start_at": "2026-07-01T00:00:00Z"}, {"rate": "10 seconds", "start_at": "2026-07-01T00:00:01Z"}]),
                json!({})
            ),
            "schedule.any",
            "each keeps the minimum interval, the two together do not"
        );
    }

    /// A business calendar's faults are named down to the holiday at fault; its rules go with a
    /// cron only, and not beside `any`.
    #[test]
    fn a_calendar_names_the_entry_at_fault() {
        let cron = |extra: serde_json::Value| {
            let mut schedule = json!({"cron": "0 9 * * *", "timezone": "America/New_York"});
            if let (Some(schedule), Some(extra)) = (schedule.as_object_mut(), extra.as_object()) {
                schedule.extend(extra.clone());
            }
            field_of(job(json!({"schedule": schedule})))
        };
        let holidays = json!(["2026-12-25", {"from": "2026-12-28", "to": "2026-12-31"}]);
        let good = json!({"holidays": holidays, "on_holiday": "next_business_day", "business_days": ["sun", "mon", "tue", "wed", "thu"]});
        assert_eq!(cron(json!({"calendar": good})), "<accepted>");
        assert_eq!(cron(json!({"business_days_only": true})), "<accepted>");
        assert_eq!(cron(json!({"business_day": -1, "calendar": {"holidays": ["2026-12-31"]}})), "<accepted>");
        assert_eq!(
            cron(json!({"calendar": {"holidays": ["2026-12-25", "25/12/2026"]}})),
            "schedule.calendar.holidays[1]"
        );
        assert_eq!(
            cron(json!({"calendar": {"holidays": [{"from": "2026-12-31", "to": "2026-12-01"}]}})),
            "schedule.calendar.holidays[0]"
        );
        assert_eq!(
            cron(json!({"calendar": {"holidays": [{"from": "2026-01-01", "to": "2027-06-01"}]}})),
            "schedule.calendar.holidays[0]",
            "a range of more than a year"
        );
        assert_eq!(
            cron(
                json!({"calendar": {"holidays": [{"from": "2026-01-01", "to": "2026-12-01"}, {"from": "2027-01-01", "to": "2027-12-01"}, {"from": "2028-01-01", "to": "2028-12-01"}]}})
            ),
            "schedule.calendar.holidays",
            "more than 1,000 dates"
        );
        assert_eq!(
            cron(json!({"calendar": {"business_days": ["mon", "funday"]}})),
            "schedule.calendar.business_days[1]"
        );
        assert_eq!(cron(json!({"calendar": {"business_days": []}})), "schedule.calendar.business_days");
        assert_eq!(cron(json!({"business_day": 0})), "schedule.business_day");
        assert_eq!(cron(json!({"business_day": 32})), "schedule.business_day");
        let eight = json!({"business_days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun", "mon"]});
        assert_eq!(cron(json!({"calendar": eight})), "schedule.calendar.business_days");
        assert_eq!(
            cron(json!({"business_day": 1, "calendar": {"on_holiday": "next_business_day"}})),
            "schedule.calendar.on_holiday"
        );
        let rate = field_of(job(json!({"schedule": {"rate": "1 hour", "business_days_only": true}})));
        assert_eq!(rate, "schedule.business_days_only");
        let beside = field_of(job(json!({"schedule": {"any": [{"cron": "0 9 * * *"}], "calendar": {}}})));
        assert_eq!(beside, "schedule.calendar");
        let many: Vec<String> =
            (0..600).map(|d| format!("2027-{:02}-{:02}", d % 12 + 1, d % 28 + 1)).collect();
        let halves = json!({"any": [{"cron": "0 9 * * *", "calendar": {"holidays": many}}, {"cron": "0 13 * * *", "calendar": {"holidays": many}}]});
        assert_eq!(
            field_of(job(json!({"schedule": halves}))),
            "schedule.any[1].calendar.holidays",
            "1,200 holiday entries in all"
        );
        let entry = field_of(job(
            json!({"schedule": {"any": [{"cron": "0 9 * * *"}, {"at": "2030-01-01T00:00:00Z", "business_day": 1}]}}),
        ));
        assert_eq!(entry, "schedule.any[1].business_day");
    }

    fn job(extra: serde_json::Value) -> serde_json::Value {
        let mut base =
            json!({"name": "job-1", "target": {"type": "http", "url": "https://example.test/hook"}});
        if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                base.insert(k.clone(), v.clone());
            }
        }
        base
    }

    #[test]
    fn a_good_job_passes() {
        let schedule =
            check(job(json!({"schedule": {"cron": "30 2 * * *", "timezone": "America/New_York"}})));
        assert!(matches!(schedule, Ok(Some(_))));
        assert!(matches!(check(job(json!({}))), Ok(None)));
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases = [
            (job(json!({"name": ""})), "name"),
            (job(json!({"name": "has space"})), "name"),
            (job(json!({"name": "x".repeat(129)})), "name"),
            (job(json!({"schedule": {"cron": "61 * * * *"}})), "schedule.cron"),
            (job(json!({"schedule": {"cron": "0 0 30 2 *"}})), "schedule.cron"),
            (job(json!({"schedule": {"cron": "* * * * * *"}})), "schedule.cron"),
            (job(json!({"schedule": {"rate": "5 seconds"}})), "schedule.rate"),
            (job(json!({"schedule": {"rate": "often"}})), "schedule.rate"),
            (job(json!({"schedule": {"at": "tomorrow"}})), "schedule.at"),
            (job(json!({"schedule": {"at": "2020-01-01T00:00:00Z"}})), "schedule.at"),
            (job(json!({"schedule": {"cron": "@daily", "timezone": "Mars/Olympus"}})), "schedule.timezone"),
            (job(json!({"schedule": {"cron": "@daily", "rate": "1 day"}})), "schedule"),
            (job(json!({"schedule": {}})), "schedule"),
            (
                job(json!({"schedule": {"cron": "@daily", "end_at": "2026-01-01T00:00:00Z"}})),
                "schedule.end_at",
            ),
            (
                job(
                    json!({"schedule": {"cron": "@daily", "start_at": "2027-01-01T00:00:00Z", "end_at": "2026-12-01T00:00:00Z"}}),
                ),
                "schedule.end_at",
            ),
            (job(json!({"schedule": {"cron": "@daily", "jitter_s": 901}})), "schedule.jitter_s"),
            (job(json!({"target": {"type": "http", "url": "ftp://example.test/"}})), "target.url"),
            (job(json!({"target": {"type": "http", "url": "https://"}})), "target.url"),
            // Inside addresses, however spelled, and the metadata endpoint (loopback is allowed here).
            (job(json!({"target": {"type": "http", "url": "http://10.0.0.8/"}})), "target.url"),
            (job(json!({"target": {"type": "http", "url": "http://[fd00:ec2::254]/"}})), "target.url"),
            (job(json!({"target": {"type": "http", "url": "http://2852039166/latest/"}})), "target.url"),
            (job(json!({"target": {"type": "http", "url": "http://[::ffff:a9fe:a9fe]/"}})), "target.url"),
            (
                job(json!({"notify": {"https": ["https://192.168.0.9/hook"], "on": ["failed"]}})),
                "notify.https[0]",
            ),
            (
                job(json!({"target": {"type": "http", "url": "https://x.test/", "method": "TRACE"}})),
                "target.method",
            ),
            (
                job(json!({"target": {"type": "http", "url": "https://x.test/", "headers": {"Host": "h"}}})),
                "target.headers.Host",
            ),
            (
                job(
                    json!({"target": {"type": "http", "url": "https://x.test/", "headers": {"X-Sundial-Run": "h"}}}),
                ),
                "target.headers.X-Sundial-Run",
            ),
            (
                job(
                    json!({"target": {"type": "http", "url": "https://x.test/", "headers": {"A": {"secret": true}}}}),
                ),
                "target.headers.A",
            ),
            (job(json!({"target": {"type": "lambda", "function": "other"}})), "target.function"),
            (
                job(json!({"target": {"type": "lambda", "function": "allowed-but-sundial-test-worker"}})),
                "target.function",
            ),
            (
                job(
                    json!({"target": {"type": "sqs", "queue_url": "http://127.0.0.1:4566/000000000000/other"}}),
                ),
                "target.queue_url",
            ),
            (job(json!({"target": {"type": "sns", "topic_arn": "not-an-arn"}})), "target.topic_arn"),
            (
                job(
                    json!({"target": {"type": "stepfunctions", "state_machine_arn": "arn:aws:states:us-east-1:000000000000:activity:allowed-a"}}),
                ),
                "target.state_machine_arn",
            ),
            (
                job(
                    json!({"target": {"type": "stepfunctions", "state_machine_arn": "arn:aws:states:us-east-1:000000000000:stateMachine:other"}}),
                ),
                "target.state_machine_arn",
            ),
            (
                job(
                    json!({"target": {"type": "stepfunctions", "state_machine_arn": "arn:aws:states:us-east-1:000000000000:stateMachine:allowed-sm:prod"}}),
                ),
                "target.state_machine_arn",
            ),
            (
                job(
                    json!({"target": {"type": "ecs", "cluster": "allowed-c", "task_definition": "other:1", "launch_type": "EC2"}}),
                ),
                "target.task_definition",
            ),
            (
                job(
                    json!({"target": {"type": "stepfunctions", "state_machine_arn": "arn:aws:states:us-east-1:000000000000:stateMachine:allowed-sundial-test-x"}}),
                ),
                "target.state_machine_arn",
            ),
            (
                job(
                    json!({"target": {"type": "ecs", "cluster": "other", "task_definition": "t", "launch_type": "EC2"}}),
                ),
                "target.cluster",
            ),
            (
                job(
                    json!({"target": {"type": "ecs", "cluster": "allowed-c", "task_definition": "t:0", "launch_type": "EC2"}}),
                ),
                "target.task_definition",
            ),
            (
                job(json!({"target": {"type": "ecs", "cluster": "allowed-c", "task_definition": "t"}})),
                "target.network",
            ),
            (
                job(
                    json!({"target": {"type": "ecs", "cluster": "allowed-c", "task_definition": "t", "network": {"subnets": ["10.0.0.0/24"]}}}),
                ),
                "target.network.subnets",
            ),
            (
                job(
                    json!({"target": {"type": "ecs", "cluster": "allowed-c", "task_definition": "t", "launch_type": "EC2",
                    "overrides": {"container": "app", "environment": {"SUNDIAL_RUN_ID": "x"}}}}),
                ),
                "target.overrides.environment.SUNDIAL_RUN_ID",
            ),
            (
                job(
                    json!({"target": {"type": "ecs", "cluster": "allowed-c", "task_definition": "t", "launch_type": "EC2",
                    "overrides": {"container": "app"}}, "payload": {"blob": "x".repeat(8_000)}}),
                ),
                "payload",
            ),
            (
                job(
                    json!({"target": {"type": "eventbridge", "event_bus_arn": "arn:aws:events:us-east-1:000000000000:rule/allowed-r", "detail_type": "d", "source": "s"}}),
                ),
                "target.event_bus_arn",
            ),
            (
                job(
                    json!({"target": {"type": "eventbridge", "event_bus_arn": "arn:aws:events:us-east-1:000000000000:event-bus/allowed-b", "detail_type": "d", "source": "aws.states"}}),
                ),
                "target.source",
            ),
            (
                job(
                    json!({"target": {"type": "eventbridge", "event_bus_arn": "arn:aws:events:us-east-1:000000000000:event-bus/allowed-b", "detail_type": "", "source": "s"}}),
                ),
                "target.detail_type",
            ),
            (job(json!({"payload": {"blob": "x".repeat(70_000)}})), "payload"),
            (job(json!({"retry": {"max_attempts": 0}})), "retry.max_attempts"),
            (job(json!({"retry": {"max_attempts": 11}})), "retry.max_attempts"),
            (job(json!({"retry": {"backoff_s": 100, "max_backoff_s": 10}})), "retry.max_backoff_s"),
            (job(json!({"timeout_s": 0})), "timeout_s"),
            (job(json!({"timeout_s": 604_801})), "timeout_s"),
            (job(json!({"sla_s": 0})), "sla_s"),
            (job(json!({"start_deadline_s": 0})), "start_deadline_s"),
            (job(json!({"catchup_window_s": 0})), "catchup_window_s"),
            (job(json!({"catchup_window_s": 2_592_001})), "catchup_window_s"),
            (job(json!({"flexible_window_s": 14_401})), "flexible_window_s"),
            (
                job(json!({"flexible_window_s": 7_200, "schedule": {"cron": "0 * * * *"}})),
                "flexible_window_s",
            ),
            // Hourly, but 02:30 New York moves to 03:00 on the spring night: 30 minutes apart,
            // nine months ahead (past the walk from now of a schedule this frequent).
            (
                job(
                    json!({"flexible_window_s": 2_700, "schedule": {"cron": "30 0-23 * * *", "timezone": "America/New_York"}}),
                ),
                "flexible_window_s",
            ),
            (
                job(json!({"flexible_window_s": 7_200, "schedule": {"any": [{"cron": "0 0 * * *"}]}})),
                "flexible_window_s",
            ),
            (
                job(json!({"flexible_window_s": 60, "schedule": {"cron": "@daily", "jitter_s": 30}})),
                "flexible_window_s",
            ),
            (
                job(json!({"flexible_window_s": 60, "depends_on": ["01J00000000000000000000000"]})),
                "flexible_window_s",
            ),
            (job(json!({"alert_after_failures": 0})), "alert_after_failures"),
            (job(json!({"notify": {"email": ["nobody"]}})), "notify.email[0]"),
            (job(json!({"notify": {"slack": {}}})), "notify.slack.webhook_url"),
            (
                job(json!({"notify": {"slack": {"webhook_url": "hooks.slack.com/x"}}})),
                "notify.slack.webhook_url",
            ),
            (
                job(json!({"notify": {"slack": {"webhook_url": "http://hooks.slack.com/x"}}})),
                "notify.slack.webhook_url",
            ),
            (
                job(json!({"notify": {"slack": {"webhook_url": "https://10.0.0.1/x"}}})),
                "notify.slack.webhook_url",
            ),
            (job(json!({"notify": {"pagerduty": {}}})), "notify.pagerduty.routing_key"),
            (job(json!({"notify": {"pagerduty": {"routing_key": "short"}}})), "notify.pagerduty.routing_key"),
            (job(json!({"notify": {"sms": ["555-1234"]}})), "notify.sms[0]"),
            (job(json!({"notify": {"https": ["http://plain.test/"]}})), "notify.https[0]"),
            (job(json!({"notify": {"sqs": ["https://queue"]}})), "notify.sqs[0]"),
            (job(json!({"notify": {"on": [], "email": ["a@b.test"]}})), "notify.on"),
            // Queues SNS would deliver into obey the SQS allow-list and never name Sundial's own.
            (job(json!({"notify": {"sqs": ["arn:aws:sqs:us-east-1:000000000000:other"]}})), "notify.sqs[0]"),
            (
                job(
                    json!({"notify": {"sqs": ["arn:aws:sqs:us-east-1:000000000000:allowed-sundial-test-runs"]}}),
                ),
                "notify.sqs[0]",
            ),
            // Credentials never travel in a URL.
            (job(json!({"target": {"type": "http", "url": "https://user:pw@x.test/"}})), "target.url"),
            (job(json!({"target": {"type": "http", "url": "https://user@x.test/"}})), "target.url"),
            (job(json!({"notify": {"https": ["https://u:p@x.test/"]}})), "notify.https[0]"),
            // Headers: hop-by-hop and Idempotency-Key are reserved; no control characters.
            (
                job(
                    json!({"target": {"type": "http", "url": "https://x.test/", "headers": {"Idempotency-Key": "k"}}}),
                ),
                "target.headers.Idempotency-Key",
            ),
            (
                job(
                    json!({"target": {"type": "http", "url": "https://x.test/", "headers": {"Upgrade": "h2c"}}}),
                ),
                "target.headers.Upgrade",
            ),
            (
                job(
                    json!({"target": {"type": "http", "url": "https://x.test/", "headers": {"A": "a\u{7f}b"}}}),
                ),
                "target.headers.A",
            ),
            (
                job(
                    json!({"target": {"type": "http", "url": "https://x.test/", "headers": {"X-Team": "café"}}}),
                ),
                "target.headers.X-Team",
            ),
            (job(json!({"target": {"type": "http", "url": "https://x.test/a b"}})), "target.url"),
            (job(json!({"target": {"type": "http", "url": "https://bücher.test/"}})), "target.url"),
            (
                job(
                    json!({"target": {"type": "http", "url": "https://x.test/", "headers": {"A": "a\u{1b}[31m"}}}),
                ),
                "target.headers.A",
            ),
            (
                job(
                    json!({"target": {"type": "http", "url": "https://x.test/", "headers": {"A": {"value": "x\ny", "secret": true}}}}),
                ),
                "target.headers.A",
            ),
            (
                job(json!({"target": {"type": "http", "url": "https://x.test/", "headers":
                    (0..51).map(|i| (format!("X-H{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}})),
                "target.headers",
            ),
        ];
        for (doc, field) in cases {
            assert_eq!(field_of(doc.clone()), field, "{doc}");
        }
    }

    #[test]
    fn allowed_targets_pass() {
        for target in [
            json!({"type": "lambda", "function": "allowed-fn"}),
            json!({"type": "sqs", "queue_url": "http://127.0.0.1:4566/000000000000/allowed-q"}),
            json!({"type": "sns", "topic_arn": "arn:aws:sns:us-east-1:000000000000:allowed-t"}),
            json!({"type": "stepfunctions", "state_machine_arn": "arn:aws:states:us-east-1:000000000000:stateMachine:allowed-sm"}),
            json!({"type": "stepfunctions", "state_machine_arn": "arn:aws:states:us-east-1:000000000000:stateMachine:allowed-sm", "input": "payload"}),
            json!({"type": "stepfunctions", "state_machine_arn": "arn:aws:states:us-east-1:000000000000:stateMachine:allowed-Report.v2+(EU)"}),
            json!({"type": "ecs", "cluster": "allowed-c", "task_definition": "report:3", "network": {"subnets": ["subnet-0a1b"], "security_groups": ["sg-12ab"]},
                "overrides": {"container": "app", "command": ["run", "report"], "environment": {"MODE": "full"}}}),
            json!({"type": "ecs", "cluster": "allowed-c", "task_definition": "arn:aws:ecs:us-east-1:000000000000:task-definition/report:3", "launch_type": "EC2"}),
            json!({"type": "eventbridge", "event_bus_arn": "arn:aws:events:us-east-1:000000000000:event-bus/allowed-bus", "detail_type": "report due", "source": "acme.reports"}),
            json!({"type": "http", "url": "http://127.0.0.1:9/x", "method": "put"}),
            json!({"type": "http", "url": "https://x.test/", "headers":
                (0..50).map(|i| (format!("X-H{i}"), json!("a\tb"))).collect::<serde_json::Map<_, _>>()}),
        ] {
            assert_eq!(field_of(job(json!({"target": target.clone()}))), "<accepted>", "{target}");
        }
        let allowed_queue = json!({"notify": {"sqs": ["arn:aws:sqs:us-east-1:000000000000:allowed-q"], "https": ["HTTPS://x.test/"]}});
        assert_eq!(field_of(job(allowed_queue)), "<accepted>");
    }

    #[test]
    fn fractional_at_rounds_up() {
        let schedule = check(job(json!({"schedule": {"at": "2026-07-01T00:00:00.250Z"}}))).unwrap().unwrap();
        assert_eq!(schedule.recurrence, Recurrence::At("2026-07-01T00:00:01Z".parse().unwrap()));
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        inner: Inner,
    }
    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    #[test]
    fn decode_names_the_field() {
        let field = |v| decode::<Outer>(v).err().map(|e| e.field).unwrap_or_default();
        assert_eq!(field(serde_json::json!({"inner": {"n": "x"}})), "inner.n");
        assert_eq!(field(serde_json::json!({"inner": {"n": 1, "m": 2}})), "inner.m");
        assert_eq!(field(serde_json::json!({"inner": {"n": 1}, "extra": 2})), "extra");
        assert_eq!(field(serde_json::json!({})), "inner");
        assert_eq!(field(serde_json::json!({"inner": {}})), "inner.n");
        assert_eq!(field(serde_json::json!([1])), "body");
    }
}
