//! Bad input: every kind gets the right 4xx with the field named, and nothing is written.

use crate::api::{ALICE, Call, job};
use crate::harness::Harness;
use http::{Method, StatusCode};
use serde_json::{Value, json};

fn with(mut base: Value, key: &str, value: Value) -> Value {
    base[key] = value;
    base
}

fn target(t: Value) -> Value {
    with(job("bad"), "target", t)
}

fn schedule(s: Value) -> Value {
    with(job("bad"), "schedule", s)
}

/// Each case: a body, the status, and the field the error must name.
fn cases() -> Vec<(&'static str, Value, StatusCode, &'static str)> {
    use StatusCode as S;
    let unprocessable = S::UNPROCESSABLE_ENTITY;
    vec![
        ("empty name", with(job("x"), "name", json!("")), unprocessable, "name"),
        ("name with spaces", with(job("x"), "name", json!("a b")), unprocessable, "name"),
        ("name too long", with(job("x"), "name", json!("n".repeat(129))), unprocessable, "name"),
        ("name not a string", with(job("x"), "name", json!(5)), S::BAD_REQUEST, "name"),
        ("missing target", json!({"name": "x"}), S::BAD_REQUEST, "target"),
        ("unknown top-level field", with(job("x"), "colour", json!("red")), S::BAD_REQUEST, "colour"),
        (
            "unknown schedule field",
            schedule(json!({"cron": "@daily", "every": 5})),
            S::BAD_REQUEST,
            "schedule.every",
        ),
        ("cron out of range", schedule(json!({"cron": "61 * * * *"})), unprocessable, "schedule.cron"),
        ("cron wrong field count", schedule(json!({"cron": "* * *"})), unprocessable, "schedule.cron"),
        ("cron never fires", schedule(json!({"cron": "0 0 31 2 *"})), unprocessable, "schedule.cron"),
        ("cron every second", schedule(json!({"cron": "* * * * * *"})), unprocessable, "schedule.cron"),
        (
            "unknown time zone",
            schedule(json!({"cron": "@daily", "timezone": "Moon/Base"})),
            unprocessable,
            "schedule.timezone",
        ),
        ("rate too short", schedule(json!({"rate": "2 seconds"})), unprocessable, "schedule.rate"),
        ("rate unparseable", schedule(json!({"rate": "fortnightly"})), unprocessable, "schedule.rate"),
        ("at in the past", schedule(json!({"at": "2001-01-01T00:00:00Z"})), unprocessable, "schedule.at"),
        ("at not RFC 3339", schedule(json!({"at": "next tuesday"})), unprocessable, "schedule.at"),
        ("two recurrences", schedule(json!({"cron": "@daily", "rate": "1 day"})), unprocessable, "schedule"),
        (
            "end before start",
            schedule(
                json!({"rate": "1 hour", "start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"}),
            ),
            unprocessable,
            "schedule.end_at",
        ),
        (
            "jitter too large",
            schedule(json!({"cron": "@daily", "jitter_s": 5000})),
            unprocessable,
            "schedule.jitter_s",
        ),
        (
            "flexible window too large",
            with(job("x"), "flexible_window_s", json!(901)),
            unprocessable,
            "flexible_window_s",
        ),
        (
            "flexible window negative",
            with(job("x"), "flexible_window_s", json!(-1)),
            S::BAD_REQUEST,
            "flexible_window_s",
        ),
        (
            "flexible window with jitter",
            with(schedule(json!({"cron": "@daily", "jitter_s": 30})), "flexible_window_s", json!(60)),
            unprocessable,
            "flexible_window_s",
        ),
        ("unknown target type", target(json!({"type": "carrier-pigeon"})), S::BAD_REQUEST, "target.type"),
        (
            "target url not http",
            target(json!({"type": "http", "url": "file:///etc/passwd"})),
            unprocessable,
            "target.url",
        ),
        (
            "target method",
            target(json!({"type": "http", "url": "http://127.0.0.1:9/", "method": "CONNECT"})),
            unprocessable,
            "target.method",
        ),
        (
            "reserved header",
            target(json!({"type": "http", "url": "http://127.0.0.1:9/", "headers": {"Content-Length": "1"}})),
            unprocessable,
            "target.headers.Content-Length",
        ),
        (
            "lambda not allowed",
            target(json!({"type": "lambda", "function": "someone-elses-function"})),
            unprocessable,
            "target.function",
        ),
        (
            "sqs not allowed",
            target(json!({"type": "sqs", "queue_url": "http://127.0.0.1:4566/000000000000/q"})),
            unprocessable,
            "target.queue_url",
        ),
        (
            "sns not an arn",
            target(json!({"type": "sns", "topic_arn": "topic"})),
            unprocessable,
            "target.topic_arn",
        ),
        (
            "state machine ARN malformed",
            target(
                json!({"type": "stepfunctions", "state_machine_arn": "arn:aws:states:us-east-1:1234:stateMachine:m"}),
            ),
            unprocessable,
            "target.state_machine_arn",
        ),
        (
            "state machine not allowed",
            target(
                json!({"type": "stepfunctions", "state_machine_arn": "arn:aws:states:us-east-1:123456789012:stateMachine:theirs"}),
            ),
            unprocessable,
            "target.state_machine_arn",
        ),
        (
            "ecs fargate without a network",
            target(json!({"type": "ecs", "cluster": "c", "task_definition": "t"})),
            unprocessable,
            "target.network",
        ),
        (
            "ecs launch type unknown",
            target(json!({"type": "ecs", "cluster": "c", "task_definition": "t", "launch_type": "LAMBDA"})),
            S::BAD_REQUEST,
            "target",
        ),
        (
            "event bus source reserved",
            target(
                json!({"type": "eventbridge", "event_bus_arn": "arn:aws:events:us-east-1:123456789012:event-bus/b",
                "detail_type": "d", "source": "aws.ec2"}),
            ),
            unprocessable,
            "target.source",
        ),
        (
            "payload too large",
            with(job("x"), "payload", json!({"blob": "x".repeat(66_000)})),
            unprocessable,
            "payload",
        ),
        (
            "attempts above the cap",
            with(job("x"), "retry", json!({"max_attempts": 11})),
            unprocessable,
            "retry.max_attempts",
        ),
        (
            "attempts negative",
            with(job("x"), "retry", json!({"max_attempts": -1})),
            S::BAD_REQUEST,
            "retry.max_attempts",
        ),
        (
            "backoff wrong type",
            with(job("x"), "retry", json!({"backoff_s": "soon"})),
            S::BAD_REQUEST,
            "retry.backoff_s",
        ),
        ("timeout zero", with(job("x"), "timeout_s", json!(0)), unprocessable, "timeout_s"),
        ("timeout over 7 days", with(job("x"), "timeout_s", json!(700_000)), unprocessable, "timeout_s"),
        (
            "unknown concurrency",
            with(job("x"), "concurrency", json!("sometimes")),
            S::BAD_REQUEST,
            "concurrency",
        ),
        ("unknown catchup", with(job("x"), "catchup", json!("most")), S::BAD_REQUEST, "catchup"),
        ("unknown delivery", with(job("x"), "delivery", json!("exactly_once")), S::BAD_REQUEST, "delivery"),
        ("group not a string", with(job("x"), "group", json!(5)), S::BAD_REQUEST, "group"),
        ("group name with spaces", with(job("x"), "group", json!("a b")), unprocessable, "group"),
        ("group that does not exist", with(job("x"), "group", json!("nope")), unprocessable, "group"),
        (
            "bad email",
            with(job("x"), "notify", json!({"email": ["not-an-address"]})),
            unprocessable,
            "notify.email[0]",
        ),
        ("bad sms", with(job("x"), "notify", json!({"sms": ["12345"]})), unprocessable, "notify.sms[0]"),
        (
            "unknown event",
            with(job("x"), "notify", json!({"on": ["exploded"], "email": ["a@b.test"]})),
            S::BAD_REQUEST,
            "notify.on[0]",
        ),
        (
            "slack webhook over plain http",
            with(
                job("x"),
                "notify",
                json!({"slack": {"webhook_url": "http://hooks.slack.com/services/T/B/x"}}),
            ),
            unprocessable,
            "notify.slack.webhook_url",
        ),
        (
            "pagerduty routing key too short",
            with(job("x"), "notify", json!({"pagerduty": {"routing_key": "abc"}})),
            unprocessable,
            "notify.pagerduty.routing_key",
        ),
        (
            "unknown pagerduty severity",
            with(
                job("x"),
                "notify",
                json!({"pagerduty": {"routing_key": "k3y0000000000000000000000000000a", "severity": "loud"}}),
            ),
            S::BAD_REQUEST,
            "notify.pagerduty.severity",
        ),
        ("body is an array", json!([job("x")]), S::BAD_REQUEST, "body"),
    ]
}

/// At least 20 kinds of bad input on create: each gets the right 4xx naming the field, and the
/// jobs table stays empty.
pub async fn bad_documents_are_rejected_with_the_field_and_nothing_is_written<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let cases = cases();
    assert!(cases.len() >= 20);
    for (what, body, status, field) in cases {
        let reply = deployment.api().post(ALICE, "/v1/jobs", &body).await;
        assert_eq!(reply.status, status, "{what}: {}", reply.body);
        assert_eq!(reply.error_field(), field, "{what}: {}", reply.body);
        assert!(reply.body["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}");
        assert!(reply.body["error"]["code"].is_string(), "{what}");
    }
    assert!(deployment.stores_nothing().await, "a rejected request wrote something");
}

/// Bad groups: each gets a 4xx naming the field, and no group is written.
pub async fn bad_groups_are_rejected_with_the_field<H: Harness>() {
    use StatusCode as S;
    let deployment = H::deploy(&[]).await;
    let cases = [
        ("limit zero", "etl", json!({"max_running": 0}), S::UNPROCESSABLE_ENTITY, "max_running"),
        ("limit too large", "etl", json!({"max_running": 1001}), S::UNPROCESSABLE_ENTITY, "max_running"),
        ("limit not a number", "etl", json!({"max_running": "two"}), S::BAD_REQUEST, "max_running"),
        ("limit missing", "etl", json!({}), S::BAD_REQUEST, "max_running"),
        ("unknown field", "etl", json!({"max_running": 1, "colour": "red"}), S::BAD_REQUEST, "colour"),
        ("name with a space", "a%20b", json!({"max_running": 1}), S::UNPROCESSABLE_ENTITY, "name"),
        ("name too long", &"g".repeat(65), json!({"max_running": 1}), S::UNPROCESSABLE_ENTITY, "name"),
    ];
    for (what, name, body, status, field) in cases {
        let put = Call::new(Method::PUT, format!("/v1/groups/{name}")).key(ALICE).json(&body);
        let reply = deployment.api().call(put).await;
        assert_eq!(reply.status, status, "{what}: {}", reply.body);
        assert_eq!(reply.error_field(), field, "{what}: {}", reply.body);
    }
    assert!(deployment.stores_nothing().await, "a rejected group was written");
    let missing = deployment.api().get(ALICE, "/v1/groups/etl").await;
    assert_eq!(missing.status, S::NOT_FOUND);
}

/// Bad calendars: each gets a 4xx naming the field, and no calendar is written; a job that names
/// a calendar and gives days of its own, or names one that does not exist, is refused too.
pub async fn bad_calendars_are_rejected_with_the_field<H: Harness>() {
    use StatusCode as S;
    let deployment = H::deploy(&[]).await;
    let long = "d".repeat(501);
    let cases = [
        ("not a date", "nyse", json!({"holidays": ["2027-02-30"]}), S::UNPROCESSABLE_ENTITY, "holidays[0]"),
        (
            "a range backwards",
            "nyse",
            json!({"holidays": ["2027-01-01", {"from": "2027-12-31", "to": "2027-12-24"}]}),
            S::UNPROCESSABLE_ENTITY,
            "holidays[1]",
        ),
        (
            "not a weekday",
            "nyse",
            json!({"business_days": ["mon", "funday"]}),
            S::UNPROCESSABLE_ENTITY,
            "business_days[1]",
        ),
        ("no business day", "nyse", json!({"business_days": []}), S::UNPROCESSABLE_ENTITY, "business_days"),
        ("not a zone", "nyse", json!({"timezone": "Mars/Olympus"}), S::UNPROCESSABLE_ENTITY, "timezone"),
        (
            "description too long",
            "nyse",
            json!({"description": long}),
            S::UNPROCESSABLE_ENTITY,
            "description",
        ),
        ("holidays not a list", "nyse", json!({"holidays": "2027-01-01"}), S::BAD_REQUEST, "holidays"),
        ("unknown field", "nyse", json!({"colour": "red"}), S::BAD_REQUEST, "colour"),
        ("on_holiday is a job's", "nyse", json!({"on_holiday": "skip"}), S::BAD_REQUEST, "on_holiday"),
        ("name with a space", "a%20b", json!({}), S::UNPROCESSABLE_ENTITY, "name"),
        ("name too long", &"c".repeat(65), json!({}), S::UNPROCESSABLE_ENTITY, "name"),
    ];
    for (what, name, body, status, field) in cases {
        let put = Call::new(Method::PUT, format!("/v1/calendars/{name}")).key(ALICE).json(&body);
        let reply = deployment.api().call(put).await;
        assert_eq!(reply.status, status, "{what}: {}", reply.body);
        assert_eq!(reply.error_field(), field, "{what}: {}", reply.body);
    }
    let listed = deployment.api().get(ALICE, "/v1/calendars").await;
    assert_eq!(listed.body["calendars"], json!([]), "a rejected calendar was written: {}", listed.body);

    let put =
        Call::new(Method::PUT, "/v1/calendars/nyse").key(ALICE).json(&json!({"holidays": ["2027-01-01"]}));
    assert_eq!(deployment.api().call(put).await.status, S::CREATED);
    let jobs = [
        (
            "days beside a name",
            json!({"name": "nyse", "holidays": ["2027-07-05"]}),
            "schedule.calendar.holidays",
        ),
        ("a version beside a name", json!({"name": "nyse", "version": 1}), "schedule.calendar.version"),
        ("no such calendar", json!({"name": "lse"}), "schedule.calendar.name"),
    ];
    for (what, calendar, field) in jobs {
        let mut document = job("named");
        document["schedule"]["calendar"] = calendar;
        let reply = deployment.api().post(ALICE, "/v1/jobs", &document).await;
        assert_eq!(
            (reply.status, reply.error_field()),
            (S::UNPROCESSABLE_ENTITY, field),
            "{what}: {}",
            reply.body
        );
    }
    let listed = deployment.api().get(ALICE, "/v1/jobs").await;
    assert_eq!(listed.body["jobs"], json!([]), "a rejected job was written: {}", listed.body);
    let calendar = deployment.api().get(ALICE, "/v1/calendars/nyse").await;
    assert_eq!(calendar.body["jobs"], json!([]), "{}", calendar.body);

    // An edit a job naming the calendar could not take (its union past 1,000 holidays in all)
    // is refused, naming the job, and changes nothing.
    let dates = |from: &str, n: i64| -> Vec<String> {
        let first: chrono::NaiveDate = from.parse().unwrap();
        (0..n).map(|d| (first + chrono::Duration::days(d)).to_string()).collect()
    };
    let mut union = job("big-union");
    union["schedule"] = json!({"any": [
        {"cron": "0 9 * * *", "calendar": {"holidays": dates("2031-01-01", 900)}},
        {"cron": "0 13 * * *", "calendar": {"name": "nyse"}},
    ]});
    deployment.api().create_job(ALICE, &union).await;
    let grown = json!({"holidays": dates("2035-01-01", 200)});
    let reply =
        deployment.api().call(Call::new(Method::PUT, "/v1/calendars/nyse").key(ALICE).json(&grown)).await;
    assert_eq!((reply.status, reply.error_field()), (S::UNPROCESSABLE_ENTITY, "holidays"), "{}", reply.body);
    assert!(
        reply.body["error"]["message"].as_str().is_some_and(|m| m.contains("big-union")),
        "{}",
        reply.body
    );
    let calendar = deployment.api().get(ALICE, "/v1/calendars/nyse").await;
    assert_eq!(
        (&calendar.body["version"], &calendar.body["holidays"]),
        (&json!(1), &json!(["2027-01-01"])),
        "unchanged"
    );
}

/// Transport-level bad input: not JSON, wrong content type, body over the limit.
pub async fn malformed_bodies_are_rejected<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let not_json = deployment
        .api()
        .call(Call::new(Method::POST, "/v1/jobs").key(ALICE).raw("application/json", "{name:"))
        .await;
    assert_eq!(not_json.status, StatusCode::BAD_REQUEST);
    assert_eq!(not_json.error_field(), "body");

    let text =
        deployment.api().call(Call::new(Method::POST, "/v1/jobs").key(ALICE).raw("text/plain", "{}")).await;
    assert_eq!(text.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(text.error_field(), "Content-Type");

    let huge = format!("{{\"name\": \"x\", \"payload\": \"{}\"}}", "x".repeat(200_000));
    let too_big = deployment
        .api()
        .call(Call::new(Method::POST, "/v1/jobs").key(ALICE).raw("application/json", huge))
        .await;
    assert_eq!(too_big.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", too_big.body);
    assert_eq!(too_big.error_field(), "body");
    assert!(deployment.stores_nothing().await);
}

/// A bad patch is refused and the job is unchanged (same version, same document).
pub async fn bad_patches_change_nothing<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id = deployment.api().create_job(ALICE, &job("stable")).await;
    let path = format!("/v1/jobs/{id}");
    let before = deployment.api().get(ALICE, &path).await.body;
    for (patch, status, field) in [
        (json!({"schedule": {"cron": "not cron"}}), StatusCode::UNPROCESSABLE_ENTITY, "schedule.cron"),
        (json!({"retry": {"max_attempts": 0}}), StatusCode::UNPROCESSABLE_ENTITY, "retry.max_attempts"),
        (json!({"unknown": 1}), StatusCode::BAD_REQUEST, "unknown"),
        (json!({"target": null}), StatusCode::BAD_REQUEST, "target"),
        (json!({"name": "no spaces allowed"}), StatusCode::UNPROCESSABLE_ENTITY, "name"),
    ] {
        let reply = deployment.api().patch(ALICE, &path, &patch).await;
        assert_eq!(reply.status, status, "{patch}: {}", reply.body);
        assert_eq!(reply.error_field(), field, "{patch}: {}", reply.body);
    }
    let bad_if_match = deployment
        .api()
        .call(
            Call::new(Method::PATCH, path.clone())
                .key(ALICE)
                .header("if-match", "yesterday")
                .json(&json!({})),
        )
        .await;
    assert_eq!(bad_if_match.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_if_match.error_field(), "If-Match");
    assert_eq!(deployment.api().get(ALICE, &path).await.body, before);
}

/// Unknown or malformed ids and routes are 404 with a JSON body.
pub async fn unknown_ids_are_not_found<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    for path in ["/v1/jobs/not-a-ulid", "/v1/jobs/01JCZZZZZZZZZZZZZZZZZZZZZZ", "/v1/nothing-here"] {
        let reply = deployment.api().get(ALICE, path).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(reply.body["error"]["code"], "not_found", "{path}");
    }
    let preview = deployment.api().create_job(ALICE, &job("p")).await;
    let reply = deployment.api().get(ALICE, &format!("/v1/jobs/{preview}/preview?count=501")).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.error_field(), "count");
}

/// A forecast's window: malformed or out-of-range `from`, `to` and `scope` are 400 naming them;
/// `scope=stack` from a key that is not an operator's is 403 naming `scope`.
pub async fn bad_forecast_windows_name_the_field<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    for (query, status, field) in [
        ("from=yesterday", StatusCode::BAD_REQUEST, "from"),
        ("from=2026-03-01T00:00:00Z&to=2026-03-01", StatusCode::BAD_REQUEST, "to"),
        ("from=2026-03-01T00:00:00Z&to=2026-03-01T00:00:00Z", StatusCode::BAD_REQUEST, "to"),
        ("from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z", StatusCode::BAD_REQUEST, "to"),
        ("from=2026-03-01T00:00:00Z&to=2026-03-08T00:00:01Z", StatusCode::BAD_REQUEST, "to"),
        ("scope=everyone", StatusCode::BAD_REQUEST, "scope"),
        ("scope=stack", StatusCode::FORBIDDEN, "scope"),
    ] {
        let reply = deployment.api().get(ALICE, &format!("/v1/forecast?{query}")).await;
        assert_eq!(reply.status, status, "{query}: {}", reply.body);
        assert_eq!(reply.error_field(), field, "{query}");
    }
}

/// A ledger's range: malformed or out-of-range `from`, `to` and `limit`, and parameters it does
/// not read, are 400 naming them.
pub async fn bad_ledger_ranges_name_the_field<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id = deployment.api().create_job(ALICE, &job("ledger")).await;
    for (query, field) in [
        ("from=yesterday", "from"),
        ("from=2026-03-01T00:00:00Z&to=2026-03-01", "to"),
        ("from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z", "to"),
        ("from=2026-03-01T00:00:00Z&to=2026-03-08T00:00:01Z", "to"),
        ("from=1969-12-31T00:00:00Z&to=1970-01-01T00:00:00Z", "from"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("since=2026-03-01T00:00:00Z", "since"),
    ] {
        let reply = deployment.api().get(ALICE, &format!("/v1/jobs/{id}/instants?{query}")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{query}: {}", reply.body);
        assert_eq!(reply.error_field(), field, "{query}");
    }
    let reply = deployment
        .api()
        .get(ALICE, &format!("/v1/jobs/{id}/instants?from=2026-03-01T00:00:00Z&to=2026-03-08T00:00:00Z"))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "seven days exactly: {}", reply.body);
}

/// A key named twice is refused, at any depth, where a JSON parser that keeps the last value
/// and a proxy that keeps the first would disagree about what was asked.
pub async fn a_key_named_twice_is_refused<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let url = "http://127.0.0.1:9/hook";
    for body in [
        format!(r#"{{"name": "one", "name": "two", "target": {{"type": "http", "url": "{url}"}}}}"#),
        format!(
            r#"{{"name": "one", "target": {{"type": "http", "url": "{url}", "url": "http://127.0.0.1:8/"}}}}"#
        ),
    ] {
        let reply = deployment
            .api()
            .call(Call::new(Method::POST, "/v1/jobs").key(ALICE).raw("application/json", body.clone()))
            .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}: {}", reply.body);
        assert_eq!(reply.error_field(), "body");
        assert!(reply.body["error"]["message"].as_str().unwrap().contains("appears twice"), "{}", reply.body);
    }
    let id = deployment.api().create_job(ALICE, &job("kept")).await;
    let patch = r#"{"payload": 1, "payload": 2}"#;
    let reply = deployment
        .api()
        .call(Call::new(Method::PATCH, format!("/v1/jobs/{id}")).key(ALICE).raw("application/json", patch))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert_eq!(deployment.api().get(ALICE, &format!("/v1/jobs/{id}")).await.body["version"], 1);
    let listed = deployment.api().get(ALICE, "/v1/jobs").await.body;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1, "a refused create was stored: {listed}");
}

/// What the router refuses is JSON too: a method the route lacks (405 with `Allow`), a URI too
/// long (414), too many or too large header fields (431).
pub async fn the_routers_own_refusals_are_json<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id = deployment.api().create_job(ALICE, &job("routes")).await;

    let reply = deployment
        .api()
        .call(Call::new(Method::PUT, format!("/v1/jobs/{id}")).key(ALICE).json(&job("x")))
        .await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], "method_not_allowed");
    let allow = reply.headers["allow"].to_str().unwrap().to_string();
    for method in ["GET", "PATCH", "DELETE"] {
        assert!(allow.contains(method), "{allow}");
    }

    let long = format!("/v1/jobs?next={}", "a".repeat(9 * 1024));
    let reply = deployment.api().get(ALICE, &long).await;
    assert_eq!(reply.status, StatusCode::URI_TOO_LONG, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], "uri_too_long");

    let names: Vec<String> = (0..70).map(|i| format!("x-extra-{i}")).collect();
    let mut many = Call::new(Method::GET, "/v1/jobs").key(ALICE);
    for name in &names {
        many = many.header(name, "v");
    }
    let reply = deployment.api().call(many).await;
    assert_eq!(reply.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], "headers_too_large");
    let large = Call::new(Method::GET, "/v1/jobs").key(ALICE).header("x-large", "v".repeat(11 * 1024));
    let reply = deployment.api().call(large).await;
    assert_eq!(reply.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "{}", reply.body);

    assert_eq!(deployment.api().get(ALICE, &format!("/v1/jobs/{id}")).await.body["version"], 1);
}

/// Triggering (or re-running a run of) a paused job is a 409 naming the pause, not a run that
/// is queued only to end SKIPPED; no run is written.
pub async fn a_paused_job_cannot_be_triggered<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id = deployment
        .api()
        .create_job(ALICE, &with(job("resting"), "schedule", json!({"cron": "0 0 1 1 *"})))
        .await;
    let first = deployment.trigger(&id).await;
    let paused = deployment.api().post(ALICE, &format!("/v1/jobs/{id}/pause"), &json!({})).await;
    assert_eq!(paused.status, StatusCode::OK);

    let reply = deployment.api().post(ALICE, &format!("/v1/jobs/{id}/trigger"), &json!({})).await;
    assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], "job_paused");
    assert_eq!(reply.error_field(), "paused");
    let runs_before = deployment.runs_of(&id).await.len();
    assert_eq!(runs_before, 1);

    deployment.api().post(ALICE, &format!("/v1/runs/{first}/cancel"), &json!({})).await;
    let rerun = deployment.api().post(ALICE, &format!("/v1/runs/{first}/rerun"), &json!({})).await;
    assert_eq!(rerun.status, StatusCode::CONFLICT, "{}", rerun.body);
    assert_eq!(rerun.body["error"]["code"], "job_paused");
    assert_eq!(deployment.runs_of(&id).await.len(), 1, "a refused trigger wrote a run");

    let range = json!({"from": "2026-01-01T00:00:00Z", "to": "2026-03-01T00:00:00Z"});
    let backfill = deployment.api().post(ALICE, &format!("/v1/jobs/{id}/backfill"), &range).await;
    assert_eq!(backfill.status, StatusCode::CONFLICT, "{}", backfill.body);
    assert_eq!(backfill.body["error"]["code"], "job_paused");
    assert_eq!(deployment.runs_of(&id).await.len(), 1, "a refused backfill wrote runs");

    deployment.api().post(ALICE, &format!("/v1/jobs/{id}/resume"), &json!({})).await;
    let reply = deployment.api().post(ALICE, &format!("/v1/jobs/{id}/trigger"), &json!({})).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.body);
}

/// A trigger retried with its `Idempotency-Key` after the job was paused (its first answer lost
/// after the run was written) gets the run it wrote, not a 409; a new key gets the 409.
pub async fn a_retried_trigger_finds_its_run_after_a_pause<H: Harness>() {
    use sundial_app::jobs::{JobsError, RequestKey};
    let deployment = H::deploy(&[]).await;
    let id = deployment
        .api()
        .create_job(ALICE, &with(job("retried"), "schedule", json!({"cron": "0 0 1 1 *"})))
        .await;
    let job_id = sundial_domain::job::JobId::parse(&id).unwrap();
    let owner = "alice".to_string();
    let request = RequestKey { key: "k-1".into(), first_seen: chrono::Utc::now() };
    let jobs = &deployment.use_cases().jobs;
    let first = jobs.trigger(&owner, &job_id, Some(&request)).await.unwrap();
    deployment.api().post(ALICE, &format!("/v1/jobs/{id}/pause"), &json!({})).await;

    let retried = jobs.trigger(&owner, &job_id, Some(&request)).await.unwrap();
    assert_eq!(retried.id(), first.id());
    let other = RequestKey { key: "k-2".into(), first_seen: chrono::Utc::now() };
    assert!(matches!(jobs.trigger(&owner, &job_id, Some(&other)).await, Err(JobsError::Paused)));
    assert_eq!(deployment.runs_of(&id).await.len(), 1);
}

/// Page tokens are sealed by the deployment and bound to their listing: a forged one (here a
/// cursor in the format pages used to carry, naming a key DynamoDB refuses), a changed one, or
/// one from another listing is a 400 naming `next`, never a storage error.
pub async fn forged_page_tokens_are_refused<H: Harness>() {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let deployment = H::deploy(&[]).await;
    let mut ids = Vec::new();
    for name in ["a", "b", "c"] {
        ids.push(deployment.api().create_job(ALICE, &job(name)).await);
    }
    for _ in 0..3 {
        deployment.trigger(&ids[0]).await;
    }
    let jobs_page = deployment.api().get(ALICE, "/v1/jobs?limit=1").await.body;
    let jobs_token = jobs_page["next"].as_str().unwrap().to_string();
    let runs_path = format!("/v1/jobs/{}/runs", ids[0]);
    let runs_page = deployment.api().get(ALICE, &format!("{runs_path}?limit=1")).await.body;
    let runs_token = runs_page["next"].as_str().unwrap().to_string();
    // The tokens work where they were issued.
    let second = deployment.api().get(ALICE, &format!("/v1/jobs?limit=1&next={jobs_token}")).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);
    assert_eq!(second.body["jobs"][0]["name"], "b");
    let second = deployment.api().get(ALICE, &format!("{runs_path}?limit=1&next={runs_token}")).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.body);

    let forged_jobs = URL_SAFE_NO_PAD.encode(json!([ids[0], "alice", "n".repeat(2_000)]).to_string());
    let forged_runs = URL_SAFE_NO_PAD.encode(format!("2026-01-01T00:00:00Z#{}", "x".repeat(2_000)));
    let mut changed = runs_token.clone();
    changed.replace_range(0..1, if changed.starts_with('A') { "B" } else { "A" });
    for (path, token) in [
        ("/v1/jobs?limit=1".to_string(), forged_jobs),
        (format!("{runs_path}?limit=1"), forged_runs),
        (format!("{runs_path}?limit=1"), changed),
        (format!("{runs_path}?limit=1"), jobs_token.clone()),
        ("/v1/jobs?limit=1".to_string(), runs_token.clone()),
        (format!("{runs_path}?limit=1&state=QUEUED"), runs_token.clone()),
        (format!("/v1/jobs/{}/runs?limit=1", ids[1]), runs_token.clone()),
    ] {
        let reply = deployment.api().get(ALICE, &format!("{path}&next={token}")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{path} with {token}: {}", reply.body);
        assert_eq!(reply.error_field(), "next", "{}", reply.body);
    }
}

/// A backfill range is checked before it is searched: `from` at chrono's first instant (which the
/// JSON decoder accepts) once panicked the handler; before 1970 it is a 422 naming `from`.
pub async fn a_backfill_from_before_the_epoch_is_refused<H: Harness>() {
    let deployment = H::deploy(&[]).await;
    let id =
        deployment.api().create_job(ALICE, &with(job("old"), "schedule", json!({"cron": "@daily"}))).await;
    for from in ["-262143-01-01T00:00:00Z", "1969-12-31T23:59:59Z"] {
        let range = json!({"from": from, "to": "2026-01-01T00:00:00Z"});
        let reply = deployment.api().post(ALICE, &format!("/v1/jobs/{id}/backfill"), &range).await;
        assert_eq!(reply.status, StatusCode::UNPROCESSABLE_ENTITY, "{from}: {}", reply.body);
        assert_eq!(reply.error_field(), "from", "{}", reply.body);
    }
    assert!(deployment.runs_of(&id).await.is_empty(), "a refused backfill wrote runs");
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! bad_input_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => bad_input { bad_documents_are_rejected_with_the_field_and_nothing_is_written, bad_groups_are_rejected_with_the_field, bad_calendars_are_rejected_with_the_field, malformed_bodies_are_rejected, bad_patches_change_nothing, unknown_ids_are_not_found, bad_forecast_windows_name_the_field, bad_ledger_ranges_name_the_field, a_key_named_twice_is_refused, the_routers_own_refusals_are_json, a_paused_job_cannot_be_triggered, a_retried_trigger_finds_its_run_after_a_pause, forged_page_tokens_are_refused, a_backfill_from_before_the_epoch_is_refused });
    };
}
