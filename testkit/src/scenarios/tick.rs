//! The tick over time, on a manual clock: the catch-up policies after an outage, and cron jobs
//! in a time zone across both DST changes of a year.

use crate::api::ALICE;
use crate::harness::Harness;
use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};
use sundial_domain::due::format_instant;
use sundial_domain::run::Run;

fn t(s: &str) -> DateTime<Utc> {
    s.parse().expect("an RFC 3339 instant")
}

/// A job calling a loopback target that is never reached (the tick only claims).
fn job(name: &str, schedule: Value) -> Value {
    json!({"name": name, "schedule": schedule, "target": {"type": "http", "url": "http://127.0.0.1:9/"}})
}

/// The instants runs are scheduled at, as stored.
fn instants(runs: &[Run]) -> Vec<String> {
    runs.iter().map(|r| format_instant(r.scheduled_at())).collect()
}

/// A job every minute, the tick down for five minutes: `skip` runs none of the missed
/// instants, `latest` the latest one, `all` every one.
pub async fn catchup_policies_after_downtime<H: Harness>() {
    let deployment = H::deploy_at("2030-01-01T11:58:00Z", &[("SUNDIAL_CLAIM_AHEAD_S", "60")]).await;
    let mut ids = Vec::new();
    for policy in ["skip", "latest", "all"] {
        let mut job = job(policy, json!({"cron": "* * * * *"}));
        job["catchup"] = json!(policy);
        ids.push(deployment.api().create_job(ALICE, &job).await);
    }
    // Ticks run normally until 12:00, then nothing until 12:06.
    for minute in ["2030-01-01T11:59:00Z", "2030-01-01T12:00:00Z", "2030-01-01T12:06:00Z"] {
        deployment.set_clock(t(minute));
        deployment.use_cases().tick.run().await.unwrap();
    }

    // 11:58 was due at creation and claimed by the API; 12:01 by the 12:00 tick's lookahead.
    let before_outage =
        ["2030-01-01T11:58:00Z", "2030-01-01T11:59:00Z", "2030-01-01T12:00:00Z", "2030-01-01T12:01:00Z"];
    let after = ["2030-01-01T12:06:00Z", "2030-01-01T12:07:00Z"];
    let missed =
        ["2030-01-01T12:02:00Z", "2030-01-01T12:03:00Z", "2030-01-01T12:04:00Z", "2030-01-01T12:05:00Z"];
    let expect = |kept: &[&str]| -> Vec<String> {
        before_outage.iter().chain(kept).chain(after.iter()).map(|s| s.to_string()).collect()
    };
    assert_eq!(instants(&deployment.runs_of(&ids[0]).await), expect(&[]), "skip");
    assert_eq!(instants(&deployment.runs_of(&ids[1]).await), expect(&missed[3..]), "latest");
    assert_eq!(instants(&deployment.runs_of(&ids[2]).await), expect(&missed), "all");
}

/// Ticks every minute across a DST change of New York (from `from` to `to`, UTC); returns each
/// job's run instants in UTC: 02:30, 01:30 and every hour at :30, local time.
async fn tick_across<H: Harness>(from: &str, to: &str) -> Vec<Vec<String>> {
    let start = t(from);
    let begin = (start - Duration::minutes(5)).to_rfc3339();
    let deployment =
        H::deploy_at(&begin, &[("SUNDIAL_CLAIM_AHEAD_S", "60"), ("SUNDIAL_DUE_SHARDS", "1")]).await;
    let mut ids = Vec::new();
    for (name, cron) in [("at-0230", "30 2 * * *"), ("at-0130", "30 1 * * *"), ("every-hour", "30 * * * *")] {
        let job = job(name, json!({"cron": cron, "timezone": "America/New_York"}));
        ids.push(deployment.api().create_job(ALICE, &job).await);
    }
    let mut now = start - Duration::minutes(4);
    while now < t(to) {
        deployment.set_clock(now);
        deployment.use_cases().tick.run().await.unwrap();
        now += Duration::minutes(1);
    }
    let mut out = Vec::new();
    for id in ids {
        out.push(instants(&deployment.runs_of(&id).await).into_iter().filter(|i| i.as_str() < to).collect());
    }
    out
}

/// 2026-03-08, New York springs forward 02:00 EST → 03:00 EDT: 02:30 fires once at 03:00,
/// 01:30 is unaffected, the `*` hour has no 02:30.
pub async fn dst_spring_forward<H: Harness>() {
    let fired = tick_across::<H>("2026-03-08T05:00:00Z", "2026-03-08T08:00:00Z").await;
    assert_eq!(fired[0], ["2026-03-08T07:00:00Z"], "02:30 → 03:00 EDT");
    assert_eq!(fired[1], ["2026-03-08T06:30:00Z"], "01:30 EST");
    assert_eq!(fired[2], ["2026-03-08T05:30:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z"], "* hour");
}

/// 2026-11-01, New York falls back 02:00 EDT → 01:00 EST: 01:30 fires once (EDT), 02:30 once
/// (EST), the `*` hour fires in both passes of 01:30.
pub async fn dst_fall_back<H: Harness>() {
    let fired = tick_across::<H>("2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z").await;
    assert_eq!(fired[0], ["2026-11-01T07:30:00Z"], "02:30 EST");
    assert_eq!(fired[1], ["2026-11-01T05:30:00Z"], "01:30 EDT only");
    assert_eq!(
        fired[2],
        ["2026-11-01T04:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:30:00Z"],
        "* hour, both passes"
    );
}

/// One test per scenario of this module, over the harness `$harness`.
#[macro_export]
macro_rules! tick_scenarios {
    ($harness:ty) => {
        $crate::instantiate!($harness => tick { catchup_policies_after_downtime, dst_spring_forward, dst_fall_back });
    };
}
