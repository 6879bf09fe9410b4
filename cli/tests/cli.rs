//! The `sundial` binary against a real API over loopback HTTP (backed by the emulator): `apply`
//! is idempotent, a file with an error changes nothing and names its line and field, `--dry-run`
//! writes nothing, a workflow named by `depends_on` in any order is written parents first and
//! pruned children first, `--json` output parses, exit codes say what went wrong, and calendars
//! (the shipped example files among them) are written before the jobs that name them; groups,
//! keys, backfills, cancels, re-runs, versions and the audit trail are operated too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::process::Output;
use sundial_tests::{ALICE, Stack};

/// Runs `sundial` with the stack's URL and Alice's key.
async fn sundial(url: &str, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args(args)
        .env("SUNDIAL_URL", url)
        .env("SUNDIAL_API_KEY", ALICE)
        .env("SUNDIAL_CONFIG", "/nonexistent")
        .output()
        .await
        .unwrap()
}

fn json(output: &Output) -> Value {
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stdout)))
}

fn file(text: &str) -> tempfile_path::Path {
    tempfile_path::Path::write(text)
}

/// A file under the system's temporary directory, removed when dropped.
mod tempfile_path {
    pub struct Path(pub std::path::PathBuf);
    impl Path {
        pub fn write(text: &str) -> Path {
            let path = std::env::temp_dir().join(format!("sundial-cli-{}.yaml", ulid::Ulid::generate()));
            std::fs::write(&path, text).unwrap();
            Path(path)
        }
        pub fn as_str(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }
    impl Drop for Path {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

const JOBS: &str = r#"jobs:
  - name: nightly-report
    schedule: {cron: "30 2 * * *", timezone: America/New_York}
    target: {type: http, url: "https://reports.example.test/run"}
    retry: {max_attempts: 5}
  - name: heartbeat
    schedule: {rate: "10 minutes"}
    target: {type: http, url: "https://hb.example.test/"}
    payload: {source: cli}
"#;

async fn names_and_versions(url: &str) -> Vec<(String, u64)> {
    let listed = json(&sundial(url, &["jobs", "ls", "--json"]).await);
    let mut jobs: Vec<(String, u64)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["name"].as_str().unwrap().to_string(), j["version"].as_u64().unwrap()))
        .collect();
    jobs.sort();
    jobs
}

#[tokio::test]
async fn apply_twice_changes_nothing_the_second_time() {
    let stack = Stack::new().await;
    let url = stack.serve().await;
    let jobs = file(JOBS);
    let first = json(&sundial(&url, &["apply", "-f", jobs.as_str(), "--json"]).await);
    assert_eq!(first["created"], serde_json::json!(["nightly-report", "heartbeat"]));
    let before = names_and_versions(&url).await;
    assert_eq!(before, [("heartbeat".to_string(), 1), ("nightly-report".to_string(), 1)]);

    let second = json(&sundial(&url, &["apply", "-f", jobs.as_str(), "--json"]).await);
    assert_eq!(second["created"], serde_json::json!([]));
    assert_eq!(second["updated"], serde_json::json!([]));
    assert_eq!(second["unchanged"], serde_json::json!(["nightly-report", "heartbeat"]));
    assert_eq!(names_and_versions(&url).await, before, "no job was written again");

    // An edit is one update, with only the changed field sent.
    let edited = file(&JOBS.replace("max_attempts: 5", "max_attempts: 7"));
    let third = json(&sundial(&url, &["apply", "-f", edited.as_str(), "--json"]).await);
    assert_eq!(third["updated"], serde_json::json!(["nightly-report"]));
    let after = names_and_versions(&url).await;
    assert_eq!(after, [("heartbeat".to_string(), 1), ("nightly-report".to_string(), 2)]);
    let job = json(&sundial(&url, &["jobs", "get", "nightly-report", "--json"]).await);
    assert_eq!(job["retry"]["max_attempts"], 7);
    assert_eq!(job["schedule_description"], "every day at 02:30 America/New_York");
}

/// A shipped example calendar file, by its name under `examples/calendars`.
fn example(name: &str) -> String {
    format!("{}/../examples/calendars/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The shipped calendar files apply as they are; a jobs file with calendars writes them before
/// the jobs that name them, a second apply changes nothing, an edit of the calendar in the file
/// reaches the job, and a calendar a job names cannot be deleted.
#[tokio::test]
async fn calendars_apply_before_the_jobs_that_name_them() {
    let stack = Stack::new().await;
    let url = stack.serve().await;
    for shipped in ["nyse-2027.yaml", "sun-thu.yaml"] {
        let applied = json(&sundial(&url, &["apply", "-f", &example(shipped), "--json"]).await);
        assert_eq!(applied["calendars"]["created"].as_array().map(Vec::len), Some(1), "{shipped}: {applied}");
    }
    let listed = json(&sundial(&url, &["calendars", "ls", "--json"]).await);
    let names: Vec<&str> = listed.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["nyse", "sun-thu"]);

    let with_job = |holiday: &str| {
        format!(
            "calendars:\n  - name: desk\n    holidays: [{holiday}]\njobs:\n  - name: desk-report\n    schedule: {{cron: \"0 9 * * *\", calendar: {{name: desk, on_holiday: next_business_day}}}}\n    target: {{type: http, url: \"https://reports.example.test/run\"}}\n"
        )
    };
    let first = file(&with_job("2031-01-01"));
    let applied = json(&sundial(&url, &["apply", "-f", first.as_str(), "--json"]).await);
    assert_eq!(
        (&applied["calendars"]["created"], &applied["created"]),
        (&serde_json::json!(["desk"]), &serde_json::json!(["desk-report"])),
        "{applied}"
    );
    let again = json(&sundial(&url, &["apply", "-f", first.as_str(), "--json"]).await);
    assert_eq!(again["calendars"]["unchanged"], serde_json::json!(["desk"]), "{again}");
    assert_eq!(again["unchanged"], serde_json::json!(["desk-report"]), "{again}");

    let edited = file(&with_job("2031-01-02"));
    let applied = json(&sundial(&url, &["apply", "-f", edited.as_str(), "--json"]).await);
    assert_eq!(applied["calendars"]["updated"], serde_json::json!(["desk"]), "{applied}");
    assert_eq!(applied["updated"], serde_json::json!([]), "the job's own file entry is as it was");
    let job = json(&sundial(&url, &["jobs", "get", "desk-report", "--json"]).await);
    assert_eq!(job["calendars"], serde_json::json!({"desk": 2}), "the edit reached the job: {job}");
    let calendar = json(&sundial(&url, &["calendars", "get", "desk", "--json"]).await);
    assert_eq!(calendar["jobs"][0]["holds"], 2, "{calendar}");

    // Listings filtered by the API: text, state.
    let found = json(&sundial(&url, &["jobs", "ls", "--q", "DESK", "--state", "active", "--json"]).await);
    let names: Vec<&str> = found.as_array().unwrap().iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["desk-report"]);
    let none = json(&sundial(&url, &["jobs", "ls", "--tag", "team:billing", "--json"]).await);
    assert_eq!(none, serde_json::json!([]));
    let bad = sundial(&url, &["jobs", "ls", "--state", "sleeping"]).await;
    assert_eq!(bad.status.code(), Some(3), "{}", String::from_utf8_lossy(&bad.stderr));

    // A manual run with its own payload, shown on the run; a payload that is not JSON is refused.
    let run = json(
        &sundial(&url, &["trigger", "desk-report", "--payload", r#"{"month": "2031-01"}"#, "--json"]).await,
    );
    assert_eq!(run["payload"], serde_json::json!({"month": "2031-01"}), "{run}");
    let not_json = sundial(&url, &["trigger", "desk-report", "--payload", "{month"]).await;
    assert_eq!(not_json.status.code(), Some(3), "{}", String::from_utf8_lossy(&not_json.stderr));
    assert!(String::from_utf8_lossy(&not_json.stderr).contains("--payload"));

    // The audit trail of the job: its creation by apply, the trigger with its payload's digest.
    let trail = json(&sundial(&url, &["audit", "--job", "desk-report", "--json"]).await);
    let actions: Vec<&str> =
        trail.as_array().unwrap().iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(actions.first(), Some(&"job.trigger"), "{trail}");
    assert_eq!(actions.last(), Some(&"job.create"), "{trail}");
    let calendar_puts =
        json(&sundial(&url, &["audit", "--action", "calendar.put", "-n", "1", "--json"]).await);
    assert_eq!(calendar_puts.as_array().map(Vec::len), Some(1), "{calendar_puts}");
    let bad = sundial(&url, &["audit", "--from", "yesterday"]).await;
    assert_eq!(bad.status.code(), Some(3), "{}", String::from_utf8_lossy(&bad.stderr));

    let refused = sundial(&url, &["calendars", "delete", "desk"]).await;
    assert_eq!(refused.status.code(), Some(3), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("desk-report"));
    let bad = file("calendars:\n  - name: desk\n    holidays: [2031-02-30]\n");
    let out = sundial(&url, &["apply", "-f", bad.as_str()]).await;
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:3: calendars[0].holidays[0]:", bad.as_str())), "{stderr}");
}

#[tokio::test]
async fn a_file_with_an_error_changes_nothing_and_names_line_and_field() {
    let stack = Stack::new().await;
    let url = stack.serve().await;
    let broken = JOBS.replace("payload: {source: cli}", "payload: {source: cli}\n  - name: third\n    target: {type: http, url: \"https://x.example.test/\"}\n    retry:\n      max_attempts: 99");
    let jobs = file(&broken);
    let out = sundial(&url, &["apply", "-f", jobs.as_str()]).await;
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{}:13: jobs[2].retry.max_attempts:", jobs.as_str())), "{stderr}");
    assert!(names_and_versions(&url).await.is_empty(), "nothing was created");

    let syntax = file("jobs:\n  - name: a\n    target: [unclosed\n");
    let out = sundial(&url, &["apply", "-f", syntax.as_str()]).await;
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{}:", syntax.as_str())));

    let unknown = file("- name: a\n  target: {type: http, url: \"https://x.example.test/\"}\n  retries: 3\n");
    let out = sundial(&url, &["apply", "-f", unknown.as_str()]).await;
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(":3: [0].retries:"), "{stderr}");
    assert!(names_and_versions(&url).await.is_empty());
}

#[tokio::test]
async fn dry_run_writes_nothing() {
    let stack = Stack::new().await;
    let url = stack.serve().await;
    let jobs = file(JOBS);
    json(&sundial(&url, &["apply", "-f", jobs.as_str(), "--json"]).await);
    let before = names_and_versions(&url).await;

    let next = JOBS.replace("10 minutes", "15 minutes").replace("  - name: nightly-report", "  - name: new-one\n    target: {type: http, url: \"https://n.example.test/\"}\n  - name: nightly-report");
    let next = file(&next.replace("  - name: heartbeat\n    schedule: {rate: \"15 minutes\"}\n    target: {type: http, url: \"https://hb.example.test/\"}\n    payload: {source: cli}\n", ""));
    let out = sundial(&url, &["apply", "-f", next.as_str(), "--prune", "--dry-run"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(plan.contains("+ create new-one"), "{plan}");
    assert!(plan.contains("- delete heartbeat"), "{plan}");
    assert_eq!(names_and_versions(&url).await, before, "a dry run writes nothing");

    let planned =
        json(&sundial(&url, &["apply", "-f", next.as_str(), "--prune", "--dry-run", "--json"]).await);
    assert_eq!(planned["plan"]["created"], serde_json::json!(["new-one"]));
    assert_eq!(planned["plan"]["deleted"], serde_json::json!(["heartbeat"]));
    assert_eq!(planned["plan"]["unchanged"], serde_json::json!(["nightly-report"]));

    // An update is shown as its fields, the stored value and the file's.
    let edited = file(&JOBS.replace("max_attempts: 5", "max_attempts: 7"));
    let out = sundial(&url, &["apply", "-f", edited.as_str(), "--dry-run"]).await;
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(plan.contains("~ update nightly-report") && plan.contains("retry.max_attempts: 5 → 7"), "{plan}");
}

/// A diamond, listed child first: `report` runs after `left` and `right`, both after `extract`.
const WORKFLOW: &str = r#"jobs:
  - name: report
    depends_on: [left, right]
    target: {type: http, url: "https://report.example.test/"}
  - name: right
    depends_on: [extract]
    target: {type: http, url: "https://right.example.test/"}
  - name: left
    depends_on: [extract]
    target: {type: http, url: "https://left.example.test/"}
  - name: extract
    schedule: {cron: "0 3 * * *"}
    target: {type: http, url: "https://extract.example.test/"}
"#;

#[tokio::test]
async fn a_workflow_in_any_order_is_written_parents_first_and_pruned_children_first() {
    let stack = Stack::new().await;
    let url = stack.serve().await;
    let jobs = file(WORKFLOW);
    let planned = sundial(&url, &["apply", "-f", jobs.as_str(), "--dry-run"]).await;
    let planned = String::from_utf8_lossy(&planned.stdout).to_string();
    let at = |line: &str| planned.find(line).unwrap_or_else(|| panic!("no `{line}` in {planned}"));
    assert!(at("+ create extract") < at("+ create left") && at("+ create right") < at("+ create report"));

    let first = json(&sundial(&url, &["apply", "-f", jobs.as_str(), "--json"]).await);
    assert_eq!(first["created"], serde_json::json!(["extract", "left", "right", "report"]));
    let id = |job: &Value| job["id"].as_str().unwrap().to_string();
    let get = |name: &'static str| {
        let url = url.clone();
        async move { json(&sundial(&url, &["jobs", "get", name, "--json"]).await) }
    };
    let (left, right) = (id(&get("left").await), id(&get("right").await));
    assert_eq!(get("report").await["depends_on"], serde_json::json!([left, right]), "stored as ids");
    let before = names_and_versions(&url).await;

    // The API shows ids where the file has names: the same file again writes nothing.
    let second = json(&sundial(&url, &["apply", "-f", jobs.as_str(), "--json"]).await);
    assert_eq!(second["created"], serde_json::json!([]));
    assert_eq!(second["updated"], serde_json::json!([]));
    assert_eq!(second["unchanged"], serde_json::json!(["report", "right", "left", "extract"]));
    assert_eq!(names_and_versions(&url).await, before, "no job was written again");

    // One parent fewer is one update.
    let edited_text = WORKFLOW.replace("[left, right]", "[left]");
    let edited = file(&edited_text);
    let third = json(&sundial(&url, &["apply", "-f", edited.as_str(), "--json"]).await);
    assert_eq!(third["updated"], serde_json::json!(["report"]));
    assert_eq!(get("report").await["depends_on"], serde_json::json!([left]));
    let after_edit = names_and_versions(&url).await;

    // A cycle within the file is refused, named, before anything is written.
    let cyclic = file(&edited_text.replace("schedule: {cron: \"0 3 * * *\"}", "depends_on: [report]"));
    let out = sundial(&url, &["apply", "-f", cyclic.as_str()]).await;
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let named = format!(
        "{}:3: jobs[0].depends_on: makes a cycle: report -> left -> extract -> report",
        cyclic.as_str()
    );
    assert!(stderr.contains(&named), "{stderr}");
    assert_eq!(names_and_versions(&url).await, after_edit, "nothing was written");

    // A name outside the file is an existing job, passed through.
    let audit = file(
        "- name: audit\n  depends_on: [extract]\n  target: {type: http, url: \"https://audit.example.test/\"}\n",
    );
    let created = json(&sundial(&url, &["apply", "-f", audit.as_str(), "--json"]).await);
    assert_eq!(created["created"], serde_json::json!(["audit"]));
    assert_eq!(get("audit").await["depends_on"], serde_json::json!([id(&get("extract").await)]));

    // Pruning the whole workflow: the API refuses to delete a job that still has children, so it
    // goes through only children first.
    let other = file("- name: other\n  target: {type: http, url: \"https://other.example.test/\"}\n");
    let pruned = json(&sundial(&url, &["apply", "-f", other.as_str(), "--prune", "--json"]).await);
    let deleted: Vec<&str> =
        pruned["deleted"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let at = |name: &str| deleted.iter().position(|n| *n == name).unwrap_or_else(|| panic!("{deleted:?}"));
    assert_eq!(deleted.len(), 5, "{deleted:?}");
    assert!(
        at("report") < at("left") && at("left") < at("extract") && at("right") < at("extract"),
        "{deleted:?}"
    );
    assert!(at("audit") < at("extract"), "{deleted:?}");
    assert_eq!(names_and_versions(&url).await, [("other".to_string(), 1)]);
}

#[tokio::test]
async fn json_output_parses_and_exit_codes_say_what_went_wrong() {
    let stack = Stack::new().await;
    let url = stack.serve().await;
    let jobs = file(JOBS);
    json(&sundial(&url, &["apply", "-f", jobs.as_str(), "--json"]).await);

    let preview = json(&sundial(&url, &["preview", "nightly-report", "-n", "3", "--json"]).await);
    assert_eq!(preview["instants"].as_array().unwrap().len(), 3);
    let run = json(&sundial(&url, &["trigger", "heartbeat", "--json"]).await);
    assert_eq!(run["state"], "QUEUED");
    let runs = json(&sundial(&url, &["runs", "heartbeat", "--json"]).await);
    assert!(runs.as_array().unwrap().iter().any(|r| r["id"] == run["id"]), "{runs}");
    let one = json(&sundial(&url, &["run", run["id"].as_str().unwrap(), "--json"]).await);
    assert_eq!(one["id"], run["id"]);
    let paused = json(&sundial(&url, &["pause", "heartbeat", "--json"]).await);
    assert_eq!(paused["paused"], true);
    let until = (chrono::Utc::now() + chrono::Duration::days(30)).to_rfc3339();
    let noted = json(
        &sundial(&url, &["pause", "heartbeat", "--reason", "maintenance", "--until", &until, "--json"]).await,
    );
    assert_eq!(noted["pause"]["reason"], "maintenance", "{noted}");
    let human = sundial(&url, &["pause", "heartbeat", "--reason", "maintenance", "--until", &until]).await;
    assert!(String::from_utf8_lossy(&human.stdout).contains("is paused until"), "{human:?}");
    let skipped = json(&sundial(&url, &["skip", "nightly-report", "--next", "2", "--json"]).await);
    assert_eq!(skipped["skips"].as_array().map(Vec::len), Some(2), "{skipped}");
    let undone = json(&sundial(&url, &["skip", "nightly-report", "--undo", "--json"]).await);
    assert!(undone.get("skips").is_none(), "{undone}");
    assert_eq!(
        sundial(&url, &["skip", "nightly-report"]).await.status.code(),
        Some(2),
        "nothing to skip: usage"
    );
    let refused = sundial(&url, &["skip", "nightly-report", "--instants", "2031-01-01T00:00:00Z"]).await;
    assert_eq!(refused.status.code(), Some(3), "not an instant of the schedule");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("instants[0]"), "{refused:?}");
    let tail = sundial(&url, &["tail", "heartbeat", "--seconds", "0", "--json"]).await;
    let lines: Vec<Value> =
        String::from_utf8_lossy(&tail.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.iter().any(|l| l["run_id"] == run["id"] && l["state"] == "QUEUED"), "{lines:?}");

    let forecast = json(&sundial(&url, &["forecast", "--json"]).await);
    assert_eq!(forecast["scope"], "owner");
    assert!(forecast["total"].as_u64().unwrap() > 0, "{forecast}");
    let human =
        sundial(&url, &["forecast", "--from", "2031-01-01T00:00:00+00:00", "--to", "2031-01-01T06:00:00Z"])
            .await;
    let printed = String::from_utf8_lossy(&human.stdout);
    assert!(human.status.success(), "{printed}");
    assert!(printed.starts_with("2031-01-01T00:00:00Z .. 2031-01-01T06:00:00Z (owner)"), "{printed}");
    assert!(printed.contains("HOUR (UTC)") && printed.contains("2031-01-01 05:00"), "{printed}");
    let refused = sundial(&url, &["forecast", "--stack"]).await;
    assert_eq!(refused.status.code(), Some(3), "{}", String::from_utf8_lossy(&refused.stderr));

    // The ledger over a week, read across its pages (500 instants each): every instant once, in
    // order, the first ran and the rest pending (the job is paused). A rate has no instants before its job; a cron does,
    // and those were never due.
    let now = chrono::Utc::now();
    let (from, to) =
        ((now - chrono::Duration::days(1)).to_rfc3339(), (now + chrono::Duration::days(6)).to_rfc3339());
    let ledger =
        json(&sundial(&url, &["instants", "heartbeat", "--from", &from, "--to", &to, "--json"]).await);
    let instants = ledger["instants"].as_array().unwrap();
    assert!((863..=865).contains(&instants.len()), "six days every 10 minutes: {}", instants.len());
    let mut at: Vec<&str> = instants.iter().map(|e| e["at"].as_str().unwrap()).collect();
    at.dedup();
    assert_eq!(at.len(), instants.len(), "each instant once");
    assert!(at.windows(2).all(|w| w[0] < w[1]), "oldest first");
    assert_eq!(instants[0]["outcome"], "ran", "its first instant, claimed at its creation");
    let pending = instants[1..].iter().filter(|e| e["outcome"] == "pending").count();
    assert_eq!(pending, instants.len() - 1, "the rest wait: the job is paused");
    let before =
        json(&sundial(&url, &["instants", "nightly-report", "--to", &now.to_rfc3339(), "--json"]).await);
    let outcomes: Vec<(&str, &str)> = before["instants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["outcome"].as_str().unwrap(), e["reason"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(outcomes, [("missed", "before_start")], "the last day's 02:30, before the job existed");
    assert!(ledger["manual"].as_array().unwrap().iter().any(|m| m["run_id"] == run["id"]), "{ledger}");
    let soon = (now + chrono::Duration::hours(1)).to_rfc3339();
    let human = sundial(&url, &["instants", "heartbeat", "--to", &soon]).await;
    let printed = String::from_utf8_lossy(&human.stdout);
    assert!(printed.starts_with("INSTANT") && printed.contains("manual runs"), "{printed}");
    let refused = sundial(&url, &["instants", "heartbeat", "--from", &to, "--to", &from]).await;
    assert_eq!(refused.status.code(), Some(3), "a range upside down");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("to: must not be before from"));

    let human = sundial(&url, &["jobs", "ls"]).await;
    let table = String::from_utf8_lossy(&human.stdout);
    assert!(table.starts_with("NAME") && table.contains("every day at 02:30 America/New_York"), "{table}");

    assert_eq!(sundial(&url, &["jobs", "get", "no-such-job"]).await.status.code(), Some(4));
    assert_eq!(sundial(&url, &["apply"]).await.status.code(), Some(2), "usage");
    let refused = tokio::process::Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args(["jobs", "ls"])
        .env("SUNDIAL_URL", "http://127.0.0.1:9")
        .env("SUNDIAL_API_KEY", ALICE)
        .output()
        .await
        .unwrap();
    assert_eq!(refused.status.code(), Some(1), "unreachable API");
}

/// A cron at 02:30 in New York, on a clock two days before the 2031 spring change (02:00 jumps
/// to 03:00 on March 9; the next is 371 days later, past the year the warnings look ahead):
/// `apply` prints the job's DST warning as it creates it, `preview` marks
/// the instant the gap moved to 03:00 and says why under the list, and `jobs get` prints the
/// warning on stderr (the YAML on stdout stays the job's; `--json` keeps it in `warnings`).
#[tokio::test]
async fn preview_and_get_say_what_dst_does_to_a_new_york_0230_job() {
    let clock =
        std::sync::Arc::new(sundial_domain::clock::ManualClock::new("2031-03-07T12:00:00Z".parse().unwrap()));
    let stack = Stack::at(&clock, &[]).await;
    let url = stack.serve().await;
    let warning = "DST: 2031-03-09: 02:30 does not exist in America/New_York; runs at 03:00";
    let jobs = file(
        "- name: early\n  schedule: {cron: \"30 2 * * *\", timezone: America/New_York}\n  target: {type: http, url: \"https://early.example.test/\"}\n",
    );
    let applied = sundial(&url, &["apply", "-f", jobs.as_str()]).await;
    assert!(applied.status.success(), "{applied:?}");
    let progress = String::from_utf8_lossy(&applied.stderr);
    assert!(progress.contains(&format!("[1/1] create early\n  warning: {warning}\n")), "{progress}");

    let preview = sundial(&url, &["preview", "early", "-n", "4"]).await;
    assert!(preview.status.success(), "{preview:?}");
    assert_eq!(
        String::from_utf8_lossy(&preview.stdout),
        "UTC                   LOCAL (America/New_York)\n\
         2031-03-08T07:30:00Z  2031-03-08T02:30:00-05:00\n\
         2031-03-09T07:00:00Z  2031-03-09T03:00:00-04:00  DST moved\n\
         2031-03-10T06:30:00Z  2031-03-10T02:30:00-04:00\n\
         2031-03-11T06:30:00Z  2031-03-11T02:30:00-04:00\n\
         \n\
         DST: 2031-03-09: 02:30 does not exist in America/New_York; runs at 03:00\n"
    );
    let marked = json(&sundial(&url, &["preview", "early", "-n", "4", "--json"]).await);
    assert_eq!(marked["instants"][1]["dst"], "moved", "{marked}");
    assert_eq!(marked["dst"][0]["runs_at"], "2031-03-09T07:00:00Z", "{marked}");

    let got = sundial(&url, &["jobs", "get", "early"]).await;
    assert!(got.status.success(), "{got:?}");
    assert_eq!(String::from_utf8_lossy(&got.stderr), format!("warning: {warning}\n"));
    let yaml = String::from_utf8_lossy(&got.stdout);
    assert!(yaml.contains("name: early") && !yaml.contains("warnings"), "{yaml}");
    let viewed = json(&sundial(&url, &["jobs", "get", "early", "--json"]).await);
    assert_eq!(viewed["warnings"], serde_json::json!([warning]), "{viewed}");
}

/// The operations beyond a job's own lifecycle: groups set, shown and deleted; a key and a grant
/// made, listed and revoked (the secret printed once); a backfill, a cancel of its queued run and
/// a re-run; a job's versions, a diff and a rollback; refusals exit 3 naming their field.
#[tokio::test]
async fn groups_keys_runs_and_versions_are_operated_from_the_terminal() {
    let stack = Stack::new().await;
    let url = stack.serve().await;
    let set = json(&sundial(&url, &["groups", "set", "etl", "--max-running", "2", "--json"]).await);
    assert_eq!(set["max_running"], 2, "{set}");
    let shown = sundial(&url, &["groups", "get", "etl"]).await;
    assert!(String::from_utf8_lossy(&shown.stdout).contains("0 running of 2 at most"), "{shown:?}");
    let bad = sundial(&url, &["groups", "set", "etl", "--max-running", "0"]).await;
    assert_eq!(bad.status.code(), Some(3), "{}", String::from_utf8_lossy(&bad.stderr));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("max_running"));
    json(&sundial(&url, &["groups", "delete", "etl", "--json"]).await);
    assert_eq!(sundial(&url, &["groups", "get", "etl"]).await.status.code(), Some(4));

    let made = json(&sundial(&url, &["keys", "create", "ci", "--role", "viewer", "--json"]).await);
    assert!(made["secret"].as_str().unwrap().starts_with("sdl_"), "{made}");
    let grant = json(
        &sundial(
            &url,
            &["keys", "create", "sso-bob", "--role", "operator", "--subject", "auth0|bob", "--json"],
        )
        .await,
    );
    assert_eq!((grant["subject"].as_str(), grant.get("secret")), (Some("auth0|bob"), None), "{grant}");
    let listed = sundial(&url, &["keys", "ls"]).await;
    let text = String::from_utf8_lossy(&listed.stdout).to_string();
    assert!(text.contains("ci") && text.contains("subject auth0|bob") && !text.contains("sdl_"), "{text}");
    json(&sundial(&url, &["keys", "revoke", made["id"].as_str().unwrap(), "--json"]).await);
    let unknown_role = sundial(&url, &["keys", "create", "x", "--role", "root"]).await;
    assert_eq!(unknown_role.status.code(), Some(3), "{}", String::from_utf8_lossy(&unknown_role.stderr));

    let jobs = file(
        "- name: nightly\n  schedule: {cron: \"0 2 * * *\"}\n  target: {type: http, url: \"https://x.example.test/\"}\n  retry: {max_attempts: 3}\n",
    );
    json(&sundial(&url, &["apply", "-f", jobs.as_str(), "--json"]).await);
    let now = chrono::Utc::now();
    let from = (now - chrono::Duration::days(2)).to_rfc3339();
    let to = now.to_rfc3339();
    let filled = json(&sundial(&url, &["backfill", "nightly", "--from", &from, "--to", &to, "--json"]).await);
    assert_eq!(filled["created"], 2, "{filled}");
    let run = filled["runs"][0]["id"].as_str().unwrap().to_string();
    let cancelled = json(&sundial(&url, &["cancel", &run, "--json"]).await);
    assert_eq!(cancelled["state"], "CANCELLED", "{cancelled}");
    let again = sundial(&url, &["cancel", &run]).await;
    assert_eq!(again.status.code(), Some(3), "an ended run: {}", String::from_utf8_lossy(&again.stderr));
    let rerun = json(&sundial(&url, &["rerun", &run, "--payload", r#"{"again": true}"#, "--json"]).await);
    assert_eq!(rerun["payload"], serde_json::json!({"again": true}), "{rerun}");

    json(
        &sundial(
            &url,
            &[
                "apply",
                "-f",
                file(
                    &std::fs::read_to_string(jobs.as_str())
                        .unwrap()
                        .replace("max_attempts: 3", "max_attempts: 5"),
                )
                .as_str(),
                "--json",
            ],
        )
        .await,
    );
    let versions = json(&sundial(&url, &["versions", "nightly", "--json"]).await);
    assert_eq!(versions[0]["version"], 2, "{versions}");
    let diff = json(&sundial(&url, &["diff", "nightly", "--from", "1", "--json"]).await);
    assert_eq!(diff["changes"][0]["field"], "retry.max_attempts", "{diff}");
    let rolled = json(&sundial(&url, &["rollback", "nightly", "--version", "1", "--json"]).await);
    assert_eq!(
        (rolled["version"].as_u64(), rolled["retry"]["max_attempts"].as_u64()),
        (Some(3), Some(3)),
        "{rolled}"
    );
    let missing = sundial(&url, &["rollback", "nightly", "--version", "9"]).await;
    assert_eq!(missing.status.code(), Some(4), "{}", String::from_utf8_lossy(&missing.stderr));
}

/// Without a key, the CLI says where it looked: the flag, the variable, and the config file by its
/// path; and exits 2 (usage).
#[tokio::test]
async fn a_missing_key_names_the_config_file() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sundial"))
        .args(["jobs", "ls"])
        .env_remove("SUNDIAL_API_KEY")
        .env("SUNDIAL_CONFIG", "/nonexistent/sundial.conf")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/sundial.conf") && stderr.contains("--key"), "{stderr}");
}
