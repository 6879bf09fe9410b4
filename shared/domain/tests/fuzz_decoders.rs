//! Property tests of what Sundial decodes at its edge (cargo-fuzz needs nightly, so proptest
//! stands in for it): cron, rate and time-zone text, the schedule maths run on whatever they
//! accept, and the job decoder (`jobs::decode` then `validation::validate`, as `POST` and `PATCH
//! /v1/jobs` run them).
//!
//! The properties: nothing panics; a rejection is a typed error that names the field and the
//! problem; an accepted schedule yields strictly increasing instants after any instant.
//!
//! Every property runs a fixed number of cases, named in its doc comment. Failure persistence is
//! off (`failure_persistence: None`): a failure found here is kept as a plain regression
//! `#[test]` at the end of this file rather than as a `proptest-regressions` file.

use chrono::{DateTime, Duration, SubsecRound, Utc};
use chrono_tz::{TZ_VARIANTS, Tz};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Map, Number, Value, json};
use sundial_domain::job::{JobDocument, ScheduleDocument};
use sundial_domain::limits::{Limits, TargetAllowList};
use sundial_domain::merge_patch;
use sundial_domain::schedule::describe::{cron_in_words, describe};
use sundial_domain::schedule::rate::MAX_SECONDS;
use sundial_domain::schedule::{CronExpr, Rate, Recurrence, Schedule};
use sundial_domain::validation::decode;
use sundial_domain::validation::{Rules, ValidationError, parse_schedule, validate};

/// A fixed number of cases, no failure files, and a bounded shrink.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, max_shrink_iters: 2_000, ..ProptestConfig::default() }
}

// ---------------------------------------------------------------------------------------------
// Instants and zones

/// Zones with interesting offset changes: an hour (New York, London), half an hour (Lord Howe),
/// at midnight (Havana, Santiago), a 45-minute offset (Chatham), none (Kolkata, UTC).
const ZONES: &[&str] = &[
    "UTC",
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "America/Havana",
    "America/Santiago",
    "Pacific/Chatham",
    "Africa/Casablanca",
];

/// The 2026 offset changes of New York, London and Lord Howe, in UTC.
const DST_CHANGES: &[&str] = &[
    "2026-03-08T07:00:00Z",
    "2026-11-01T06:00:00Z",
    "2026-03-29T01:00:00Z",
    "2026-10-25T01:00:00Z",
    "2026-04-04T15:00:00Z",
    "2026-10-03T15:30:00Z",
];

fn zone() -> BoxedStrategy<Tz> {
    prop_oneof![
        3 => prop::sample::select(ZONES).prop_map(|z| z.parse().unwrap_or(Tz::UTC)),
        1 => (0..TZ_VARIANTS.len()).prop_map(|i| TZ_VARIANTS[i]),
    ]
    .boxed()
}

fn at(secs: i64, nanos: u32) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, nanos).unwrap_or_default()
}

/// 9999-12-31T23:59:59Z, the last instant RFC 3339 can write.
const END_OF_9999: i64 = 253_402_300_799;

/// Instants anywhere chrono can represent, weighted towards offset changes, the end of year 9999
/// and chrono's own bounds.
fn instant() -> BoxedStrategy<DateTime<Utc>> {
    let min = DateTime::<Utc>::MIN_UTC.timestamp();
    let max = DateTime::<Utc>::MAX_UTC.timestamp();
    let dst = prop::sample::select(DST_CHANGES)
        .prop_flat_map(|t| {
            let t = t.parse::<DateTime<Utc>>().map(|t| t.timestamp()).unwrap_or_default();
            (t - 2 * 86_400)..(t + 2 * 86_400)
        })
        .prop_map(|s| at(s, 0));
    prop_oneof![
        3 => dst,
        2 => (1_700_000_000i64..2_000_000_000).prop_map(|s| at(s, 0)),
        2 => ((END_OF_9999 - 3 * 86_400)..=(END_OF_9999 + 86_400), 0u32..1_000_000_000)
            .prop_map(|(s, n)| at(s, n)),
        1 => ((max - 20 * 366 * 86_400)..=max, 0u32..1_000_000_000).prop_map(|(s, n)| at(s, n)),
        1 => (min..=(min + 2 * 366 * 86_400), 0u32..1_000_000_000).prop_map(|(s, n)| at(s, n)),
        1 => Just(DateTime::<Utc>::MAX_UTC),
        1 => Just(DateTime::<Utc>::MIN_UTC),
        1 => (min..=max).prop_map(|s| at(s, 0)),
    ]
    .boxed()
}

/// Instants on a whole second: schedules hold only those (`start_at`, `at` and a rate's anchor
/// are rounded up by validation), and `first_at_or_after` relies on it.
fn whole_second() -> BoxedStrategy<DateTime<Utc>> {
    instant().prop_map(|t| t.trunc_subsecs(0)).boxed()
}

/// The next few instants of `schedule` after `t` are each later than the one before, and
/// `first_at_or_after` is not before `t`.
fn check_instants(schedule: &Schedule, t: DateTime<Utc>) -> Result<(), TestCaseError> {
    let mut previous = t;
    for next in schedule.upcoming(t, 4) {
        prop_assert!(next > previous, "{schedule:?}: {next} after {previous} from {t}");
        previous = next;
    }
    if let Some(first) = schedule.first_at_or_after(t) {
        prop_assert!(first >= t, "{schedule:?}: first_at_or_after({t}) = {first}");
    }
    let _ = schedule.min_interval_seconds();
    Ok(())
}

fn cron_schedule(expr: CronExpr, timezone: Tz) -> Schedule {
    Schedule {
        recurrence: Recurrence::Cron(expr),
        timezone,
        dst: Default::default(),
        days: None,
        start_at: None,
        end_at: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Cron text

/// What a cron error must name: the field, or the shape of the whole expression.
const CRON_PROBLEMS: &[&str] = &[
    "second field",
    "minute field",
    "hour field",
    "day-of-month field",
    "month field",
    "day-of-week field",
    "expected 5 fields",
    "unknown macro",
];

/// Parses `text`; a rejection must name its problem. Returns the expression if accepted.
fn parse_cron(text: &str) -> Result<Option<CronExpr>, TestCaseError> {
    match text.parse::<CronExpr>() {
        Ok(expr) => Ok(Some(expr)),
        Err(e) => {
            let message = e.to_string();
            prop_assert!(
                CRON_PROBLEMS.iter().any(|p| message.contains(p)),
                "{text:?} was rejected with {message:?}, which names no field"
            );
            Ok(None)
        }
    }
}

/// Numbers and words a cron field may be fed: in range, at the edges of `u32`/`u64`, negative,
/// signed, non-ASCII digits, Quartz's `L`/`W`/`#`.
fn cron_atom() -> BoxedStrategy<String> {
    prop_oneof![
        4 => (0u32..64).prop_map(|n| n.to_string()),
        2 => prop::sample::select(vec![
            "4294967295", "4294967296", "18446744073709551615", "18446744073709551616",
            "99999999999999999999999999999999", "-1", "-0", "+5", "+0", "00", "007", "1e3", "0x10",
            "\u{663}", "\u{ff15}", "", " ", "1.5",
        ])
        .prop_map(str::to_string),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        2 => prop::sample::select(vec![
            "JAN", "dec", "Mon", "sun", "SAT", "FOO", "L", "W", "15W", "LW", "5L", "5#3", "#", "?",
            "*", "MON#2", "6L", "janvier", "\u{17f}un",
        ])
        .prop_map(str::to_string),
    ]
    .boxed()
}

/// One list item: a value, a range, a step over either, or debris.
fn cron_item() -> BoxedStrategy<String> {
    let range = || (cron_atom(), cron_atom()).prop_map(|(a, b)| format!("{a}-{b}"));
    let base = prop_oneof![Just("*".to_string()), Just("?".to_string()), cron_atom(), range()];
    prop_oneof![
        3 => cron_atom(),
        2 => Just("*".to_string()),
        2 => range(),
        3 => (base, cron_atom()).prop_map(|(r, s)| format!("{r}/{s}")),
        1 => "[-/,*?LW#0-9]{0,8}",
    ]
    .boxed()
}

fn cron_field() -> BoxedStrategy<String> {
    prop::collection::vec(cron_item(), 1..4).prop_map(|items| items.join(",")).boxed()
}

const MACROS: &[&str] = &[
    "@hourly",
    "@daily",
    "@midnight",
    "@weekly",
    "@monthly",
    "@yearly",
    "@annually",
    "@HOURLY",
    "@reboot",
    "@",
    "@daily 0",
    " @weekly ",
    "@every 5m",
];

/// Near-valid cron text: 5 or 6 fields of adversarial items, other field counts, macros, odd
/// separators, and arbitrary strings.
fn cron_text() -> BoxedStrategy<String> {
    let separator = prop::sample::select(vec![" ", "  ", "\t", "\n", "\u{a0}", "\u{3000}", "\u{2003}"]);
    prop_oneof![
        8 => prop::collection::vec(cron_field(), 5..=6).prop_map(|f| f.join(" ")),
        2 => prop::collection::vec(cron_field(), 0..12).prop_map(|f| f.join(" ")),
        2 => (prop::collection::vec(cron_field(), 5..=6), separator)
            .prop_map(|(f, sep)| f.join(sep)),
        1 => prop::sample::select(MACROS).prop_map(str::to_string),
        2 => any::<String>(),
        1 => "\\PC{0,60}",
        1 => "[0-9*/,\\- ]{0,40}",
    ]
    .boxed()
}

/// Values of one field within its bounds.
fn value_in(min: u32, max: u32) -> impl Strategy<Value = u32> {
    min..=max
}

/// Steps: small, and at the top of `u32` where `v + step` overflows.
fn step() -> BoxedStrategy<u32> {
    prop_oneof![6 => 1u32..=70, 1 => any::<u32>(), 1 => (u32::MAX - 70)..=u32::MAX].boxed()
}

/// A field whose every value is in bounds and every range runs forwards: what the parser accepts
/// (a step may still be anything in `u32`).
fn field_in(min: u32, max: u32) -> BoxedStrategy<String> {
    let pair = move || (value_in(min, max), value_in(min, max)).prop_map(|(a, b)| (a.min(b), a.max(b)));
    let item = prop_oneof![
        3 => value_in(min, max).prop_map(|a| a.to_string()),
        3 => Just("*".to_string()),
        2 => pair().prop_map(|(a, b)| format!("{a}-{b}")),
        2 => step().prop_map(|s| format!("*/{s}")),
        2 => (value_in(min, max), step()).prop_map(|(a, s)| format!("{a}/{s}")),
        2 => (pair(), step()).prop_map(|((a, b), s)| format!("{a}-{b}/{s}")),
    ];
    prop::collection::vec(item, 1..3).prop_map(|items| items.join(",")).boxed()
}

/// Cron text the parser should accept.
fn valid_cron() -> BoxedStrategy<String> {
    let five = || (field_in(0, 59), field_in(0, 23), field_in(1, 31), field_in(1, 12), field_in(0, 7));
    prop_oneof![
        6 => five().prop_map(|(m, h, d, mo, w)| format!("{m} {h} {d} {mo} {w}")),
        2 => (field_in(0, 59), five()).prop_map(|(s, (m, h, d, mo, w))| format!("{s} {m} {h} {d} {mo} {w}")),
        1 => prop::sample::select(&MACROS[..7]).prop_map(str::to_string),
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------------
// Rate text

fn rate_text() -> BoxedStrategy<String> {
    let n = prop_oneof![
        3 => (0u64..1_000).prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        2 => prop::sample::select(vec![
            "31622400", "31622401", "527040", "527041", "8784", "8785", "366", "367",
            "18446744073709551615", "18446744073709551616", "99999999999999999999999", "-1", "+5", "0",
            "1.5", "1e3", "", "\u{ff15}",
        ])
        .prop_map(str::to_string),
    ];
    let unit = prop::sample::select(vec![
        "second",
        "seconds",
        "minute",
        "minutes",
        "hour",
        "hours",
        "day",
        "days",
        "Days",
        "MINUTES",
        "week",
        "weeks",
        "s",
        "secondsss",
        "",
        "\u{17f}econds",
        "minute\u{301}",
    ]);
    prop_oneof![
        5 => (n.clone(), unit.clone()).prop_map(|(n, u)| format!("{n} {u}")),
        2 => (n, unit).prop_map(|(n, u)| format!("rate({n} {u})")),
        2 => any::<String>(),
        1 => "[0-9 a-z()]{0,30}",
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------------
// Time-zone and instant text

fn zone_text() -> BoxedStrategy<String> {
    prop_oneof![
        2 => prop::sample::select(ZONES).prop_map(str::to_string),
        2 => (0..TZ_VARIANTS.len()).prop_map(|i| TZ_VARIANTS[i].name().to_string()),
        2 => prop::sample::select(vec![
            "america/new_york", "UTC ", " UTC", "Etc/GMT+14", "Etc/GMT-15", "EST5EDT", "Z", "+05:00",
            "../../etc/passwd", "", "Mars/Olympus", "Europe/London\u{0}", "Local", "localtime",
        ])
        .prop_map(str::to_string),
        1 => any::<String>(),
    ]
    .boxed()
}

/// RFC 3339-ish instants: ordinary, at the year 9999 edge, with extreme offsets, leap seconds,
/// nanoseconds, signed or five-digit years, and debris.
fn instant_text() -> BoxedStrategy<String> {
    let offset =
        prop::sample::select(vec!["Z", "z", "+00:00", "-00:00", "+23:59", "-23:59", "+24:00", "+14:00"]);
    prop_oneof![
        4 => (2000i32..2100, 1u32..=12, 1u32..=31, 0u32..24, 0u32..60, 0u32..=60, offset.clone())
            .prop_map(|(y, mo, d, h, mi, s, o)| format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{o}")),
        2 => (0u32..24, 0u32..=60, prop::sample::select(vec!["", ".5", ".999999999", ".0000000001"]), offset)
            .prop_map(|(h, s, frac, o)| format!("9999-12-31T{h:02}:59:{s:02}{frac}{o}")),
        1 => prop::sample::select(vec![
            "0000-01-01T00:00:00+23:59", "0000-01-01T00:00:00Z", "+10000-01-01T00:00:00Z",
            "-0001-01-01T00:00:00Z", "262143-12-31T23:59:59Z", "+262143-12-31T23:59:59Z",
            "-262143-01-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-01-01 00:00:00Z", "2026-01-01",
            "tomorrow", "",
        ])
        .prop_map(str::to_string),
        1 => any::<String>(),
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------------
// JSON

fn string_value() -> BoxedStrategy<String> {
    prop_oneof![
        4 => "\\PC{0,24}",
        2 => cron_text(),
        1 => rate_text(),
        1 => zone_text(),
        1 => instant_text(),
        1 => prop::sample::select(vec![
            "https://example.test/hook", "http://127.0.0.1:9/x", "http://10.0.0.8/", "https://",
            "ftp://example.test/", "http://[::ffff:a9fe:a9fe]/", "http://2852039166/latest/",
            "arn:aws:sns:us-east-1:000000000000:allowed-t", "allowed-fn", "allowed-but-sundial-test-x",
            "http://127.0.0.1:4566/000000000000/allowed-q", "GET", "post", "TRACE", "allow", "forbid",
            "replace", "skip", "latest", "all", "failed", "timed_out", "sla_missed", "a@b.test",
            "+14155550100", "arn:aws:sqs:us-east-1:000000000000:q", "http", "lambda", "sqs", "sns",
        ])
        .prop_map(str::to_string),
    ]
    .boxed()
}

/// Text at and just past the lengths the validator bounds (name, URL, header value, payload).
fn long_text() -> BoxedStrategy<String> {
    prop::sample::select(vec![128usize, 129, 2_048, 2_049, 4_096, 4_097, 65_536, 70_000])
        .prop_map(|n| "x".repeat(n))
        .boxed()
}

fn number_value() -> BoxedStrategy<Value> {
    prop_oneof![
        12 => (1u64..100).prop_map(Value::from),
        6 => (0u64..1_000_000).prop_map(Value::from),
        2 => prop::sample::select(vec![
            0u64, 1, 9, 10, 11, 899, 900, 901, 43_200, 43_201, 604_800, 604_801, 2_592_000,
            2_592_001, 4_294_967_295, 4_294_967_296, u64::MAX,
        ])
        .prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        1 => prop::sample::select(vec![1e308, -0.0, 0.5, 1e-308, 4_294_967_296.0, 10.0])
            .prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
    .boxed()
}

fn leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        3 => number_value(),
        3 => string_value().prop_map(Value::String),
    ]
    .boxed()
}

/// A value nested `depth` arrays or objects deep (serde_json reads at most 128 levels from bytes).
fn deep() -> BoxedStrategy<Value> {
    (1usize..140, leaf(), any::<bool>())
        .prop_map(|(depth, leaf, arrays)| {
            (0..depth).fold(leaf, |v, _| if arrays { Value::Array(vec![v]) } else { json!({ "k": v }) })
        })
        .boxed()
}

const KEYS: &[&str] = &[
    "name",
    "schedule",
    "target",
    "payload",
    "retry",
    "timeout_s",
    "sla_s",
    "start_deadline_s",
    "flexible_window_s",
    "concurrency",
    "catchup",
    "alert_after_failures",
    "notify",
    "paused",
    "cron",
    "rate",
    "at",
    "timezone",
    "start_at",
    "end_at",
    "jitter_s",
    "type",
    "url",
    "method",
    "headers",
    "function",
    "queue_url",
    "topic_arn",
    "value",
    "secret",
    "max_attempts",
    "backoff_s",
    "max_backoff_s",
    "on",
    "email",
    "sms",
    "https",
    "sqs",
    "",
    "extra",
    "\u{0}",
];

/// Any JSON value, object keys mostly the document's own.
fn any_json() -> BoxedStrategy<Value> {
    let key = prop_oneof![4 => prop::sample::select(KEYS).prop_map(str::to_string), 1 => "\\PC{0,8}"];
    let tree = leaf().prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    });
    prop_oneof![8 => tree, 1 => deep()].boxed()
}

/// A field's value: absent, plausible, or anything at all.
fn slot<S>(plausible: S) -> BoxedStrategy<Option<Value>>
where
    S: Strategy<Value = Value> + 'static,
{
    prop_oneof![8 => Just(None), 16 => plausible.prop_map(Some), 1 => any_json().prop_map(Some)].boxed()
}

fn object(fields: Vec<(&'static str, Option<Value>)>) -> Value {
    Value::Object(fields.into_iter().filter_map(|(k, v)| v.map(|v| (k.to_string(), v))).collect())
}

fn schedule_value() -> BoxedStrategy<Value> {
    let cron = prop_oneof![3 => valid_cron(), 2 => cron_text()].prop_map(Value::String);
    (
        slot(cron),
        slot(rate_text().prop_map(Value::String)),
        slot(instant_text().prop_map(Value::String)),
        slot(zone_text().prop_map(Value::String)),
        slot(instant_text().prop_map(Value::String)),
        slot(instant_text().prop_map(Value::String)),
        slot(number_value()),
    )
        .prop_map(|(cron, rate, at, timezone, start_at, end_at, jitter_s)| {
            object(vec![
                ("cron", cron),
                ("rate", rate),
                ("at", at),
                ("timezone", timezone),
                ("start_at", start_at),
                ("end_at", end_at),
                ("jitter_s", jitter_s),
            ])
        })
        .boxed()
}

/// A field the document needs: mostly there and plausible.
fn required<S>(plausible: S) -> BoxedStrategy<Option<Value>>
where
    S: Strategy<Value = Value> + 'static,
{
    prop_oneof![1 => Just(None), 24 => plausible.prop_map(Some), 1 => any_json().prop_map(Some)].boxed()
}

fn url_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "https://example.test/hook", "http://127.0.0.1:9/x", "http://10.0.0.8/", "https://",
            "ftp://example.test/", "http://[::ffff:a9fe:a9fe]/", "http://2852039166/latest/",
            "http://169.254.169.254/latest/meta-data/", "https://user:pass@example.test:65535/a?b#c",
            "https://example.test:99999/", "http://[fd00:ec2::254]/", "https://xn--nxasmq6b.test/",
            "http://127.0.0.1:4566/000000000000/allowed-q", "http://127.0.0.1:4566/000000000000/other",
        ])
        .prop_map(str::to_string),
        2 => string_value(),
        1 => long_text().prop_map(|path| format!("https://example.test/{path}")),
    ]
    .boxed()
}

/// A target: one of the four kinds with its own fields, or a mix of all fields.
fn target_value() -> BoxedStrategy<Value> {
    let text = || string_value().prop_map(Value::String);
    let header = prop_oneof![
        3 => string_value().prop_map(Value::String),
        1 => long_text().prop_map(Value::String),
        2 => (slot(string_value().prop_map(Value::String)), slot(any::<bool>().prop_map(Value::Bool)))
            .prop_map(|(value, secret)| object(vec![("value", value), ("secret", secret)])),
        1 => any_json(),
    ];
    let header_name = prop_oneof![
        "[A-Za-z0-9-]{0,12}",
        prop::sample::select(vec!["Host", "X-Sundial-Run", "Authorization", "a b", "\u{e9}", ""])
            .prop_map(str::to_string),
    ];
    let headers = prop::collection::vec((header_name, header), 0..4)
        .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>()));
    let method = prop_oneof![
        3 => prop::sample::select(vec!["GET", "post", "PUT", "patch", "DELETE", "TRACE", "", "G\u{0}T"])
            .prop_map(Value::from),
        1 => any_json(),
    ];
    let http = (required(url_text().prop_map(Value::String)), slot(method), slot(headers)).prop_map(
        |(url, method, headers)| {
            object(vec![
                ("type", Some(json!("http"))),
                ("url", url),
                ("method", method),
                ("headers", headers),
            ])
        },
    );
    let lambda =
        required(text()).prop_map(|f| object(vec![("type", Some(json!("lambda"))), ("function", f)]));
    let sqs = required(url_text().prop_map(Value::String))
        .prop_map(|q| object(vec![("type", Some(json!("sqs"))), ("queue_url", q)]));
    let sns = required(text()).prop_map(|t| object(vec![("type", Some(json!("sns"))), ("topic_arn", t)]));
    let mixed = (slot(any_json()), slot(text()), slot(text()), slot(text()), slot(text())).prop_map(
        |(kind, url, method, function, topic_arn)| {
            object(vec![
                ("type", kind),
                ("url", url),
                ("method", method),
                ("function", function),
                ("topic_arn", topic_arn),
            ])
        },
    );
    prop_oneof![4 => http, 1 => lambda, 1 => sqs, 1 => sns, 1 => mixed].boxed()
}

fn notify_value() -> BoxedStrategy<Value> {
    // Up to 11 endpoints: one past the limit of 10 per kind.
    let list = || {
        prop_oneof![
            6 => prop::collection::vec(string_value().prop_map(Value::String), 0..3),
            1 => prop::collection::vec(Just(Value::from("a@b.test")), 9..12),
        ]
        .prop_map(Value::Array)
    };
    let event = prop_oneof![
        6 => prop::sample::select(vec![
            "succeeded", "failed", "retrying", "timed_out", "sla_missed", "late_start", "skipped", "failing",
        ])
        .prop_map(Value::from),
        1 => leaf(),
    ];
    let on = prop::collection::vec(event, 0..10).prop_map(Value::Array);
    (slot(on), slot(list()), slot(list()), slot(list()), slot(list()))
        .prop_map(|(on, email, sms, https, sqs)| {
            object(vec![("on", on), ("email", email), ("sms", sms), ("https", https), ("sqs", sqs)])
        })
        .boxed()
}

/// A job document as a client might send it: the real field names, values plausible or not.
fn job_value() -> BoxedStrategy<Value> {
    let name = prop_oneof![6 => "[a-zA-Z0-9._-]{1,130}", 2 => string_value(), 1 => long_text()]
        .prop_map(Value::String);
    let payload = prop_oneof![6 => any_json(), 1 => long_text().prop_map(|blob| json!({ "blob": blob }))];
    let retry = (slot(number_value()), slot(number_value()), slot(number_value())).prop_map(
        |(max_attempts, backoff_s, max_backoff_s)| {
            object(vec![
                ("max_attempts", max_attempts),
                ("backoff_s", backoff_s),
                ("max_backoff_s", max_backoff_s),
            ])
        },
    );
    let policy = |names: Vec<&'static str>| {
        prop_oneof![
            8 => prop::sample::select(names).prop_map(Value::from),
            1 => string_value().prop_map(Value::String),
        ]
    };
    let extra = prop_oneof![12 => Just(None), 1 => any_json().prop_map(Some)];
    (
        (required(name), slot(schedule_value()), required(target_value()), slot(payload), slot(retry)),
        (slot(number_value()), slot(number_value()), slot(number_value()), slot(number_value())),
        (
            slot(policy(vec!["allow", "forbid", "replace", "ALLOW"])),
            slot(policy(vec!["skip", "latest", "all", ""])),
            slot(notify_value()),
            slot(any::<bool>().prop_map(Value::Bool)),
        ),
        extra,
    )
        .prop_map(|((name, schedule, target, payload, retry), numbers, rest, extra)| {
            let (timeout_s, sla_s, start_deadline_s, alert_after_failures) = numbers;
            let (concurrency, catchup, notify, paused) = rest;
            object(vec![
                ("name", name),
                ("schedule", schedule),
                ("target", target),
                ("payload", payload),
                ("retry", retry),
                ("timeout_s", timeout_s),
                ("sla_s", sla_s),
                ("start_deadline_s", start_deadline_s),
                ("alert_after_failures", alert_after_failures),
                ("concurrency", concurrency),
                ("catchup", catchup),
                ("notify", notify),
                ("paused", paused),
                ("extra", extra),
            ])
        })
        .boxed()
}

/// Where a mutation lands in an otherwise valid document.
const PATHS: &[&str] = &[
    "name",
    "timeout_s",
    "sla_s",
    "start_deadline_s",
    "flexible_window_s",
    "alert_after_failures",
    "concurrency",
    "catchup",
    "paused",
    "payload",
    "retry.max_attempts",
    "retry.backoff_s",
    "retry.max_backoff_s",
    "schedule",
    "schedule.cron",
    "schedule.rate",
    "schedule.at",
    "schedule.timezone",
    "schedule.start_at",
    "schedule.end_at",
    "schedule.jitter_s",
    "target",
    "target.url",
    "target.method",
    "target.headers",
    "target.headers.X-A",
    "target.type",
    "notify",
    "notify.on",
    "notify.email",
    "notify.sms",
    "notify.https",
    "notify.sqs",
    "extra",
];

/// A valid job document.
fn valid_job() -> BoxedStrategy<Value> {
    let schedule = prop_oneof![
        1 => Just(None),
        4 => (valid_cron(), zone()).prop_map(|(c, z)| Some(json!({"cron": c, "timezone": z.name()}))),
        2 => (1u64..1_000, prop::sample::select(vec!["minutes", "hours", "days"]))
            .prop_map(|(n, u)| Some(json!({"rate": format!("{n} {u}")}))),
        1 => ((2_000_000_000i64..END_OF_9999), zone())
            .prop_map(|(s, z)| Some(json!({"at": at(s, 0).to_rfc3339(), "timezone": z.name()}))),
    ];
    let notify = prop_oneof![
        3 => Just(None),
        1 => Just(Some(json!({"on": ["failed"], "email": ["a@b.test"], "sms": ["+14155550100"],
            "https": ["https://example.test/n"], "sqs": ["arn:aws:sqs:us-east-1:000000000000:q"]}))),
    ];
    ("[a-zA-Z0-9._-]{1,40}", schedule, notify, 1u32..=10, 1u32..600)
        .prop_map(|(name, schedule, notify, attempts, timeout)| {
            object(vec![
                ("name", Some(json!(name))),
                ("schedule", schedule),
                (
                    "target",
                    Some(json!({"type": "http", "url": "https://example.test/hook", "method": "put",
                    "headers": {"Authorization": {"value": "Bearer x", "secret": true}}})),
                ),
                ("retry", Some(json!({"max_attempts": attempts, "backoff_s": 5, "max_backoff_s": 60}))),
                ("timeout_s", Some(json!(timeout))),
                ("notify", notify),
            ])
        })
        .boxed()
}

/// A valid job document with one to three fields set to something else (`null` removes).
fn mutated_job() -> BoxedStrategy<Value> {
    let value = prop_oneof![
        3 => number_value(),
        3 => string_value().prop_map(Value::String),
        1 => cron_text().prop_map(Value::String),
        1 => instant_text().prop_map(Value::String),
        2 => any_json(),
        1 => Just(Value::Null),
        1 => long_text().prop_map(Value::String),
    ];
    (valid_job(), prop::collection::vec((prop::sample::select(PATHS), value), 1..4))
        .prop_map(|(mut job, changes)| {
            for (path, value) in changes {
                let patch = path.rsplit('.').fold(value, |v, key| json!({ key: v }));
                merge_patch::apply(&mut job, &patch);
            }
            job
        })
        .boxed()
}

/// The instants a job is validated at: ordinary ones and the end of year 9999.
fn validation_now() -> BoxedStrategy<DateTime<Utc>> {
    prop_oneof![
        3 => Just(at(1_780_272_000, 0)),
        2 => (1_700_000_000i64..2_000_000_000).prop_map(|s| at(s, 0)),
        1 => ((END_OF_9999 - 86_400)..=END_OF_9999).prop_map(|s| at(s, 0)),
    ]
    .boxed()
}

fn allow_list() -> TargetAllowList {
    TargetAllowList {
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
        network: sundial_domain::egress::Egress::default().allowing_loopback(),
    }
}

/// The top-level fields a validation error may name.
const DOCUMENT_FIELDS: &[&str] = &[
    "name",
    "schedule",
    "target",
    "payload",
    "retry",
    "timeout_s",
    "sla_s",
    "start_deadline_s",
    "flexible_window_s",
    "alert_after_failures",
    "notify",
];

fn check_typed(e: &ValidationError, input: &Value) -> Result<(), TestCaseError> {
    prop_assert!(!e.field.trim().is_empty(), "no field in {e:?} for {input}");
    prop_assert!(!e.reason.trim().is_empty(), "no reason in {e:?} for {input}");
    Ok(())
}

/// What `POST /v1/jobs` does with a decoded body: decode, validate, and for an accepted schedule
/// compute the first instants (and the words the API shows for it).
fn decode_and_validate(value: &Value, now: DateTime<Utc>) -> Result<(), TestCaseError> {
    let mut document: JobDocument = match decode(value.clone()) {
        Ok(document) => document,
        Err(e) => return check_typed(&e, value),
    };
    let limits = Limits::default();
    let targets = allow_list();
    let rules = Rules { limits: &limits, targets: &targets };
    match validate(&mut document, &rules, now, now) {
        Err(e) => {
            check_typed(&e, value)?;
            let top = e.field.split(['.', '[']).next().unwrap_or_default();
            prop_assert!(DOCUMENT_FIELDS.contains(&top), "{e:?} names no field of the document");
        }
        Ok(schedule) => {
            let _ = describe(document.schedule.as_ref());
            if let Some(schedule) = schedule {
                check_instants(&schedule, now)?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(config(10_000))]

    /// 10 000 cases: near-valid and arbitrary cron text is accepted or rejected with an error
    /// naming the field; never a panic. Accepted text also goes through `min_gap_seconds` and
    /// the schedule's words.
    #[test]
    fn cron_parser_never_panics(text in cron_text()) {
        if let Some(expr) = parse_cron(&text)? {
            let _ = expr.min_gap_seconds();
            let _ = expr.to_string();
        }
        let _ = cron_in_words(&text);
    }

    /// 10 000 cases: rate text, bare (`5 minutes`) or AWS-style (`rate(5 minutes)`), with huge
    /// and signed numbers: a typed error, or a rate of 1 s to 366 days whose instants increase.
    #[test]
    fn rate_parser_never_panics(text in rate_text(), anchor in whole_second(), t in instant()) {
        match text.parse::<Rate>() {
            Ok(rate) => {
                prop_assert!((1..=MAX_SECONDS).contains(&rate.seconds()), "{text:?} -> {rate:?}");
                let schedule = Schedule {
                    recurrence: Recurrence::Rate { rate, anchor },
                    timezone: Tz::UTC,
                    dst: Default::default(),
                    days: None,
                    start_at: None,
                    end_at: None,
                };
                check_instants(&schedule, t)?;
            }
            // Every rate error quotes the part of the input it rejects.
            Err(e) => prop_assert!(e.to_string().contains('`'), "{text:?}: {e}"),
        }
        let doc = ScheduleDocument { rate: Some(text.clone()), ..Default::default() };
        if let Err(e) = parse_schedule(&doc, anchor) {
            prop_assert_eq!(e.field.as_str(), "schedule.rate", "{:?}", e);
        }
        let _ = describe(Some(&doc));
    }

    /// 10 000 cases: `Rate::from_seconds` with any `u64`, any anchor, any instant: increasing
    /// instants, never a panic.
    #[test]
    fn any_rate_instants_increase(seconds in any::<u64>(), anchor in whole_second(), t in instant()) {
        let rate = Rate::from_seconds(seconds);
        let recurrence = Recurrence::Rate { rate, anchor };
        let schedule =
            Schedule { recurrence, timezone: Tz::UTC, dst: Default::default(), days: None, start_at: None, end_at: None };
        check_instants(&schedule, t)?;
    }

    /// 10 000 cases: time-zone names, real and not: `schedule.timezone` or accepted.
    #[test]
    fn time_zone_names_are_checked(name in zone_text()) {
        let cron = Some("@daily".to_string());
        let doc = ScheduleDocument { cron, timezone: Some(name), ..Default::default() };
        if let Err(e) = parse_schedule(&doc, at(1_780_272_000, 0)) {
            prop_assert_eq!(e.field.as_str(), "schedule.timezone", "{:?}", e);
        }
    }
}

proptest! {
    #![proptest_config(config(5_000))]

    /// 5 000 cases: accepted cron text (steps anywhere in `u32`) in a zone with offset changes:
    /// the next instants after any instant chrono can hold (offset changes, year 9999, chrono's
    /// bounds) increase strictly; never a panic.
    #[test]
    fn cron_instants_increase(text in valid_cron(), tz in zone(), t in instant()) {
        if let Some(expr) = parse_cron(&text)? {
            check_instants(&cron_schedule(expr, tz), t)?;
        }
    }
}

proptest! {
    #![proptest_config(config(2_000))]

    /// 2 000 cases: schedule documents (cron, rate, at, zone, start/end, jitter; near-valid text
    /// in every field) through `parse_schedule`: a typed `schedule.*` error, or a schedule
    /// whose instants increase after any instant.
    #[test]
    fn schedule_documents_decode_or_name_the_field(
        value in schedule_value(),
        created in validation_now(),
        t in instant(),
    ) {
        let doc: ScheduleDocument = match decode(value.clone()) {
            Ok(doc) => doc,
            Err(e) => return check_typed(&e, &value),
        };
        match parse_schedule(&doc, created) {
            Ok(schedule) => check_instants(&schedule, t)?,
            Err(e) => {
                check_typed(&e, &value)?;
                prop_assert!(e.field.starts_with("schedule"), "{e:?}");
            }
        }
        let _ = describe(Some(&doc));
    }

    /// 2 000 cases: job documents (real field names, values of any type: huge numbers, deep
    /// nesting, long strings) through `jobs::decode` and `validation::validate`, as
    /// `POST /v1/jobs` runs them; and the same document as bytes through `serde_json`, whole and
    /// cut short. A typed error (field and reason) or a valid job; never a panic.
    #[test]
    fn job_decoder_never_panics(
        value in prop_oneof![1 => job_value(), 2 => mutated_job()],
        now in validation_now(),
        cut in any::<prop::sample::Index>(),
    ) {
        decode_and_validate(&value, now)?;
        let text = value.to_string();
        let cut = cut.index(text.len() + 1);
        for bytes in [text.as_bytes(), &text.as_bytes()[..cut]] {
            if let Ok(parsed) = serde_json::from_slice::<Value>(bytes) {
                if parsed.is_object() {
                    decode_and_validate(&parsed, now)?;
                } else {
                    prop_assert!(decode::<JobDocument>(parsed).is_err());
                }
            }
        }
    }

    /// 2 000 cases: a merge patch of any shape applied to a valid job, then decoded and
    /// validated as `PATCH /v1/jobs/{id}` does: a typed error or a valid job; never a panic.
    #[test]
    fn job_patch_never_panics(
        patch in job_value(),
        nulls in prop::collection::vec(prop::sample::select(KEYS), 0..3),
        now in validation_now(),
    ) {
        let mut document = json!({
            "name": "job-1",
            "schedule": {"cron": "30 2 * * *", "timezone": "America/New_York"},
            "target": {"type": "http", "url": "https://example.test/hook"},
        });
        let mut patch = patch;
        if let Value::Object(map) = &mut patch {
            for key in nulls {
                map.insert(key.to_string(), Value::Null);
            }
        }
        merge_patch::apply(&mut document, &patch);
        decode_and_validate(&document, now)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Regressions: failures the properties found, kept as plain tests.

/// An instant from RFC 3339 text (the epoch for a typo, which no assertion expects).
fn utc(text: &str) -> DateTime<Utc> {
    text.parse().unwrap_or_default()
}

/// Found by `cron_parser_never_panics` and `cron_instants_increase`: a step near `u32::MAX`
/// overflowed `v + step` in `FieldSpec::parse` (before the fix: "attempt to add with overflow"
/// at cron.rs:128 in debug; in release the sum wrapped and value 0 joined the field:
/// `1/4294967295` fired at minute 0 as well as minute 1).
#[test]
fn regression_a_step_near_u32_max_is_not_an_overflow() {
    let expr: CronExpr = "1/4294967295 0 * * *".parse().expect("a huge step is still a step");
    let s = cron_schedule(expr, Tz::UTC);
    assert_eq!(s.next_after(utc("2025-12-31T23:59:30Z")), Some(utc("2026-01-01T00:01:00Z")));
    let expr: CronExpr = "5-10/4294967291 * * * *".parse().expect("a huge step over a range");
    assert_eq!(
        expr.next_local_at_or_after(utc("2026-01-01T00:00:00Z").naive_utc()).map(|t| t.and_utc()),
        Some(utc("2026-01-01T00:05:00Z"))
    );
    let err = "0 * */4294967295 0 0".parse::<CronExpr>().map(|e| e.to_string()).unwrap_err().to_string();
    assert!(err.contains("month field"), "{err}");
}

/// Found by `cron_instants_increase`, `rate_parser_never_panics` and
/// `schedule_documents_decode_or_name_the_field`: at the end of chrono's range (year 262142) the
/// schedule maths panicked before the fix ("`DateTime + TimeDelta` overflowed": `ceil_second` and
/// `first_at_or_after` in schedule/mod.rs, `after + MAX_SHIFT` in zoned.rs:63, the instant
/// arithmetic of `Rate::next_after` in rate.rs:32). The API reaches such instants: the backfill
/// body's `from`/`to` are `DateTime<Utc>` read by chrono's serde, which accepts
/// `+262142-12-31T23:00:00Z`.
#[test]
fn regression_no_panic_at_the_ends_of_time() {
    let end = DateTime::<Utc>::MAX_UTC;
    let start = DateTime::<Utc>::MIN_UTC;
    let zones = ["UTC", "America/New_York", "Australia/Lord_Howe", "Pacific/Kiritimati", "Etc/GMT+12"];
    for expr in ["0 0 1 1 0", "* * * * * *", "30 2 * * *", "0 0 29 2 *"] {
        for zone in zones {
            let tz: Tz = zone.parse().expect(zone);
            let s = cron_schedule(expr.parse().expect(expr), tz);
            for t in
                [end, end - Duration::hours(1), end - Duration::days(400), start, start + Duration::hours(1)]
            {
                let fires = s.upcoming(t, 4);
                assert!(
                    fires.windows(2).all(|w| w[0] < w[1]) && fires.iter().all(|f| *f > t),
                    "{expr} {zone} {t}"
                );
                assert!(s.first_at_or_after(t).is_none_or(|f| f >= t), "{expr} {zone} {t}");
            }
        }
    }
    let from: DateTime<Utc> =
        serde_json::from_value(json!("+262142-12-31T23:00:00Z")).expect("chrono reads it");
    let every_minute = cron_schedule("* * * * *".parse().expect("cron"), Tz::UTC);
    // Searched without a panic, and past the last instant a schedule yields (9999-12-31T23:59:59Z).
    assert_eq!(every_minute.next_after(from - Duration::seconds(1)), None);
    assert_eq!(every_minute.next_after(utc("9999-12-31T23:58:00Z")), Some(utc("9999-12-31T23:59:00Z")));
    let rate = Schedule {
        recurrence: Recurrence::Rate {
            rate: "1 second".parse().expect("rate"),
            anchor: utc("2026-03-06T07:00:00Z"),
        },
        timezone: Tz::UTC,
        dst: Default::default(),
        days: None,
        start_at: None,
        end_at: None,
    };
    assert!(rate.upcoming(end, 2).is_empty());
    assert_eq!(rate.first_at_or_after(end), None);
}

/// Found by `any_rate_instants_increase`: `Rate::from_seconds(2_736_095_246_980)` (and any
/// `u64` past `i64::MAX`, which turned negative) overflowed the instant arithmetic of
/// `Rate::next_after` ("`DateTime + TimeDelta` overflowed" at rate.rs:32).
#[test]
fn regression_rate_from_any_seconds() {
    for seconds in [2_736_095_246_980, u64::MAX, 1 << 63] {
        let rate = Rate::from_seconds(seconds);
        let s = Schedule {
            recurrence: Recurrence::Rate { rate, anchor: utc("2026-03-06T07:00:00Z") },
            timezone: Tz::UTC,
            dst: Default::default(),
            days: None,
            start_at: None,
            end_at: None,
        };
        let t = utc("2026-03-06T07:00:00Z");
        let fires = s.upcoming(t, 4);
        assert!(
            fires.windows(2).all(|w| w[0] < w[1]) && fires.iter().all(|f| *f > t),
            "{seconds}: {fires:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Found while fuzzing, outside the parsers. (The backfill whose `from` was chrono's first instant,
// which panicked, is tested through the API: testkit/src/scenarios/bad_input.rs.)

/// Instants are stored as RFC 3339 text, whose years have four digits: a schedule whose next
/// instant would fall after 9999-12-31T23:59:59Z has none, and so is refused at create, where it
/// used to be stored as `+10000-01-01T00:00:00Z`, which read back as no next run at all.
#[test]
fn no_schedule_yields_an_instant_after_year_9999() {
    let doc = ScheduleDocument {
        cron: Some("@yearly".into()),
        start_at: Some("9999-12-31T23:59:59Z".into()),
        ..Default::default()
    };
    let now = utc("2026-06-01T00:00:00Z");
    let schedule = parse_schedule(&doc, now).expect("a schedule that parses");
    assert_eq!(schedule.first_at_or_after(now), None);
    let last = utc("9999-12-31T23:59:59Z");
    let written = sundial_domain::due_index::format_instant(last);
    assert_eq!(
        sundial_domain::due_index::parse_instant(&written),
        Some(last),
        "{written} does not read back"
    );
}
