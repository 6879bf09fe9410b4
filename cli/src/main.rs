//! `sundial`: jobs as files under version control (`apply`), and jobs and runs from a terminal;
//! groups, keys, versions and the audit trail too ([`operate`]).
//!
//! The API's URL and key come from `--url`/`--key`, the `SUNDIAL_URL`/`SUNDIAL_API_KEY`
//! variables, or the config file (`SUNDIAL_CONFIG`, default `~/.config/sundial/config`, lines of
//! `url = …` and `key = …`), in that order. Output is a table for people, JSON with `--json`.
//!
//! Exit codes: 0 done; 1 the API could not be reached or failed; 2 bad usage; 3 invalid input
//! (a file or a request the API refused); 4 not found.

mod apply;
mod calendars;
mod client;
mod locate;
mod operate;

use clap::{Parser, Subcommand};
use client::Client;
use reqwest::Method;
use serde_json::{Value, json};
use std::process::ExitCode;

/// Why a command failed; each kind has its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Request(String),
    #[error("{}{}", field.as_deref().map(|f| format!("{f}: ")).unwrap_or_default(), message)]
    Rejected { message: String, field: Option<String> },
    #[error("{file}{}: {field}: {reason}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    File { file: String, line: Option<usize>, field: String, reason: String },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Usage(String),
}

impl CliError {
    fn exit_code(&self) -> u8 {
        match self {
            CliError::Request(_) => 1,
            CliError::Usage(_) => 2,
            CliError::Rejected { .. } | CliError::File { .. } => 3,
            CliError::NotFound(_) => 4,
        }
    }
}

#[derive(Debug, Parser)]
#[command(name = "sundial", version, about = "Sundial jobs and runs from a terminal")]
struct Cli {
    /// The API's base URL.
    #[arg(long, env = "SUNDIAL_URL", global = true)]
    url: Option<String>,
    /// An API key.
    #[arg(long, env = "SUNDIAL_API_KEY", global = true, hide_env_values = true)]
    key: Option<String>,
    /// JSON output, for scripts.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make the caller's jobs what a YAML file says (matched by name).
    ///
    /// `depends_on` names parents by name, in any order within the file: parents are written
    /// before the children that name them and, with `--prune`, deleted after them. A cycle
    /// within the file is refused before anything is written.
    Apply {
        /// The jobs file: a list of job documents, or a mapping with a `jobs` list.
        #[arg(short = 'f', long = "file")]
        file: String,
        /// Also delete the caller's jobs that the file does not name.
        #[arg(long)]
        prune: bool,
        /// Print what would change, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Jobs.
    Jobs {
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// Named calendars that jobs' schedules share (written with `apply`).
    Calendars {
        #[command(subcommand)]
        command: CalendarsCommand,
    },
    /// A job's recent runs, newest first.
    Runs {
        job: String,
        #[arg(short = 'n', long, default_value_t = 20)]
        limit: u32,
    },
    /// One run with its attempts.
    Run { id: String },
    /// Run a job now.
    Trigger {
        job: String,
        /// JSON the run delivers instead of the job's payload.
        #[arg(long)]
        payload: Option<String>,
    },
    /// Stop scheduling a job.
    Pause {
        job: String,
        /// Why (kept with the pause, shown in the ledger).
        #[arg(long)]
        reason: Option<String>,
        /// RFC 3339: resume by itself then.
        #[arg(long)]
        until: Option<String>,
    },
    /// Schedule a paused job again.
    Resume {
        job: String,
        /// The instants the pause covered: `skip` (default), `latest` or `all` run now.
        #[arg(long)]
        catchup: Option<String>,
    },
    /// Skip instants without pausing: the next N, or the ones given; `--undo` takes skips back.
    Skip {
        job: String,
        /// The next N instants.
        #[arg(long, conflicts_with_all = ["instants", "undo"])]
        next: Option<usize>,
        /// These instants (RFC 3339), comma-separated.
        #[arg(long, value_delimiter = ',', conflicts_with = "undo")]
        instants: Vec<String>,
        /// Take back the skip of `--instant`, or every skip not yet due.
        #[arg(long)]
        undo: bool,
        /// With `--undo`: the one instant to take back.
        #[arg(long, requires = "undo")]
        instant: Option<String>,
    },
    /// A job's next instants.
    Preview {
        job: String,
        #[arg(short = 'n', long, default_value_t = 10)]
        count: u32,
    },
    /// Runs due per minute over a window (at most 7 days), from the schedules: per hour, then
    /// the peak minutes and the jobs that make them.
    Forecast {
        /// RFC 3339; default now.
        #[arg(long)]
        from: Option<String>,
        /// RFC 3339; default 24 hours after `from`.
        #[arg(long)]
        to: Option<String>,
        /// Every owner's jobs (an operator's key only).
        #[arg(long)]
        stack: bool,
    },
    /// Every scheduled instant of a job in a range (at most 7 days) and what became of it: ran,
    /// skipped, missed (and why) or pending; manual runs after them.
    Instants {
        job: String,
        /// RFC 3339; default 24 hours before `to`.
        #[arg(long)]
        from: Option<String>,
        /// RFC 3339; default 24 hours after `from`, or now.
        #[arg(long)]
        to: Option<String>,
    },
    /// Runs for every instant of a range (at most now) that has none.
    Backfill {
        job: String,
        /// RFC 3339: the first instant considered.
        #[arg(long)]
        from: String,
        /// RFC 3339: the last instant considered.
        #[arg(long)]
        to: String,
        /// JSON each run delivers instead of the job's payload.
        #[arg(long)]
        payload: Option<String>,
    },
    /// Cancel a run that has not ended.
    Cancel { run: String },
    /// Start a new manual run of a finished run's job.
    Rerun {
        run: String,
        /// JSON the run delivers instead of the job's payload.
        #[arg(long)]
        payload: Option<String>,
    },
    /// Concurrency groups.
    Groups {
        #[command(subcommand)]
        command: operate::GroupsCommand,
    },
    /// API keys, and grants to JWT subjects (an admin key's).
    Keys {
        #[command(subcommand)]
        command: operate::KeysCommand,
    },
    /// A job's kept versions, newest first.
    Versions { job: String },
    /// The fields that differ between two versions of a job (`--to`: the current one, without).
    Diff {
        job: String,
        #[arg(long)]
        from: u64,
        #[arg(long)]
        to: Option<u64>,
    },
    /// Make a job's next version equal to a kept one.
    Rollback {
        job: String,
        #[arg(long)]
        version: u64,
    },
    /// The audit trail, newest first: who changed what, when, with the fields changed.
    Audit {
        /// A job's records (its name or id).
        #[arg(long)]
        job: Option<String>,
        /// A key's name or id, a JWT subject, or the owner.
        #[arg(long)]
        actor: Option<String>,
        /// Such as `job.update` or `run.cancel`.
        #[arg(long)]
        action: Option<String>,
        /// RFC 3339: records at or after.
        #[arg(long)]
        from: Option<String>,
        /// RFC 3339: records before.
        #[arg(long)]
        to: Option<String>,
        /// The most records shown.
        #[arg(short = 'n', long, default_value_t = 50)]
        limit: usize,
    },
    /// Follow a job's runs, printing each state change (Ctrl-C stops).
    Tail {
        job: String,
        /// Stop after this many seconds.
        #[arg(long)]
        seconds: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
enum CalendarsCommand {
    /// List the caller's calendars.
    Ls,
    /// One calendar, with the jobs that name it.
    Get { name: String },
    /// Delete a calendar; refused while a job names it.
    Delete { name: String },
}

#[derive(Debug, Subcommand)]
enum JobsCommand {
    /// List the caller's jobs, filtered by the API when asked.
    Ls {
        /// `key:value`; repeat for jobs with every one.
        #[arg(long)]
        tag: Vec<String>,
        /// `active`, `paused` or `failing`.
        #[arg(long)]
        state: Option<String>,
        /// Jobs of this concurrency group.
        #[arg(long)]
        group: Option<String>,
        /// Name or description contains.
        #[arg(long)]
        q: Option<String>,
    },
    /// One job, by name or id.
    Get { job: String },
}

/// `url = …` and `key = …` from the config file, if it exists.
/// The config file's path: `SUNDIAL_CONFIG`, or `~/.config/sundial/config`.
fn config_path() -> Option<String> {
    std::env::var("SUNDIAL_CONFIG")
        .ok()
        .or_else(|| std::env::var("HOME").ok().map(|home| format!("{home}/.config/sundial/config")))
}

fn config_file() -> (Option<String>, Option<String>) {
    let Some(text) = config_path().and_then(|p| std::fs::read_to_string(p).ok()) else { return (None, None) };
    let mut found = (None, None);
    for line in text.lines() {
        if let Some((name, value)) = line.split_once('=') {
            let value = Some(value.trim().trim_matches('"').to_string());
            match name.trim() {
                "url" => found.0 = value,
                "key" => found.1 = value,
                _ => {}
            }
        }
    }
    found
}

fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = vec![line(headers.iter().map(|h| h.to_string()).collect())];
    out.extend(rows.iter().map(|r| line(r.clone())));
    out.join("\n")
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn print(json_output: bool, value: &Value, human: impl FnOnce() -> String) {
    if json_output {
        println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
    } else {
        println!("{}", human());
    }
}

fn run_rows(runs: &[Value]) -> Vec<Vec<String>> {
    runs.iter()
        .map(|r| {
            let attempts = r["attempts"].as_array().map_or(0, Vec::len);
            vec![text(&r["id"]), text(&r["state"]), text(&r["scheduled_at"]), attempts.to_string()]
        })
        .collect()
}

async fn execute(cli: Cli) -> Result<(), CliError> {
    let (file_url, file_key) = config_file();
    let url = cli.url.or(file_url).unwrap_or_else(|| "http://127.0.0.1:8080".into());
    let key = cli.key.or(file_key).ok_or_else(|| {
        let file = config_path().unwrap_or_else(|| "~/.config/sundial/config".into());
        CliError::Usage(format!("no API key: pass --key, set SUNDIAL_API_KEY, or put `key = …` in {file}"))
    })?;
    let client = Client::new(&url, &key)?;
    let json_output = cli.json;
    match cli.command {
        Command::Apply { file, prune, dry_run } => {
            apply_file(&client, &file, prune, dry_run, json_output).await?
        }
        Command::Jobs { command: JobsCommand::Ls { tag, state, group, q } } => {
            let mut filter: Vec<(&str, String)> = tag.into_iter().map(|t| ("tag", t)).collect();
            filter.extend(state.map(|s| ("state", s)));
            filter.extend(group.map(|g| ("group", g)));
            filter.extend(q.map(|q| ("q", q)));
            list_jobs(&client, &filter, json_output).await?
        }
        Command::Calendars { command } => calendar_command(&client, command, json_output).await?,
        Command::Jobs { command: JobsCommand::Get { job } } => show_job(&client, &job, json_output).await?,
        Command::Runs { job, limit } => {
            let job = client.find_job(&job).await?;
            let page = client
                .get(&format!("/v1/jobs/{}/runs?limit={}", text(&job["id"]), limit.clamp(1, 100)))
                .await?;
            let runs = page["runs"].as_array().cloned().unwrap_or_default();
            print(json_output, &Value::Array(runs.clone()), || {
                table(&["RUN", "STATE", "SCHEDULED", "ATTEMPTS"], &run_rows(&runs))
            });
        }
        Command::Run { id } => show_run(&client, &id, json_output).await?,
        Command::Trigger { job, payload } => {
            let body = match payload {
                None => json!({}),
                Some(text) => json!({"payload": operate::json_arg(&text, "--payload")?}),
            };
            let job = client.find_job(&job).await?;
            let run = client
                .call(Method::POST, &format!("/v1/jobs/{}/trigger", text(&job["id"])), Some(&body))
                .await?;
            print(json_output, &run, || {
                format!("triggered run {} ({})", text(&run["id"]), text(&run["state"]))
            });
        }
        Command::Pause { job, reason, until } => {
            let body = json!({"reason": reason, "until": until});
            state_change(&client, &job, "pause", without_nulls(body), json_output).await?
        }
        Command::Resume { job, catchup } => {
            state_change(&client, &job, "resume", without_nulls(json!({"catchup": catchup})), json_output)
                .await?
        }
        Command::Skip { job, next, instants, undo, instant } => {
            skip(&client, &job, SkipArgs { next, instants, undo, instant }, json_output).await?
        }
        Command::Preview { job, count } => preview(&client, &job, count, json_output).await?,
        Command::Tail { job, seconds } => tail(&client, &job, seconds, json_output).await?,
        Command::Forecast { from, to, stack } => forecast(&client, from, to, stack, json_output).await?,
        Command::Instants { job, from, to } => instants(&client, &job, from, to, json_output).await?,
        Command::Backfill { job, from, to, payload } => {
            operate::backfill(&client, &job, (from, to), payload, json_output).await?
        }
        Command::Cancel { run } => operate::run_action(&client, &run, "cancel", None, json_output).await?,
        Command::Rerun { run, payload } => {
            operate::run_action(&client, &run, "rerun", payload, json_output).await?
        }
        Command::Groups { command } => operate::groups(&client, command, json_output).await?,
        Command::Keys { command } => operate::keys(&client, command, json_output).await?,
        Command::Versions { job } => operate::versions(&client, &job, json_output).await?,
        Command::Diff { job, from, to } => operate::diff(&client, &job, from, to, json_output).await?,
        Command::Rollback { job, version } => operate::rollback(&client, &job, version, json_output).await?,
        Command::Audit { job, actor, action, from, to, limit } => {
            // An id as it is (a deleted job's trail is still read); a name, looked up.
            let is_id = |j: &str| j.len() == 26 && j.bytes().all(|b| b.is_ascii_alphanumeric());
            let job = match job {
                Some(job) if is_id(&job) => Some(job.to_ascii_lowercase()),
                Some(job) => Some(text(&client.find_job(&job).await?["id"])),
                None => None,
            };
            let filter = [("job", job), ("actor", actor), ("action", action), ("from", from), ("to", to)];
            let filter: Vec<(&str, String)> =
                filter.into_iter().filter_map(|(n, v)| v.map(|v| (n, v))).collect();
            let records = client.audit(&filter, limit).await?;
            print(json_output, &Value::Array(records.clone()), || {
                let rows: Vec<Vec<String>> = records.iter().map(audit_row).collect();
                table(&["AT", "WHO", "ACTION", "WHAT", "FIELDS"], &rows)
            });
        }
    }
    Ok(())
}

/// One audit record as a row: when, who, what, which fields changed (their values in `--json`).
fn audit_row(record: &Value) -> Vec<String> {
    let fields: Vec<String> =
        record["changes"].as_array().into_iter().flatten().map(|c| text(&c["field"])).collect();
    let target = &record["target"];
    let what = match target["name"].as_str() {
        Some(name) => format!("{} {name}", text(&target["kind"])),
        None => format!("{} {}", text(&target["kind"]), text(&target["id"])),
    };
    vec![
        text(&record["at"]),
        text(&record["actor"]["name"]),
        text(&record["action"]),
        what,
        fields.join(", "),
    ]
}

/// `sundial calendars …`.
async fn calendar_command(
    client: &Client,
    command: CalendarsCommand,
    json_output: bool,
) -> Result<(), CliError> {
    let holidays = |c: &Value| c["holidays"].as_array().map_or(0, Vec::len).to_string();
    match command {
        CalendarsCommand::Ls => {
            let listed = client.get("/v1/calendars").await?;
            let calendars = listed["calendars"].as_array().cloned().unwrap_or_default();
            print(json_output, &Value::Array(calendars.clone()), || {
                let rows: Vec<Vec<String>> = calendars
                    .iter()
                    .map(|c| {
                        vec![text(&c["name"]), text(&c["version"]), holidays(c), text(&c["description"])]
                    })
                    .collect();
                table(&["NAME", "VERSION", "HOLIDAYS", "DESCRIPTION"], &rows)
            });
        }
        CalendarsCommand::Get { name } => {
            let calendar = client.get(&format!("/v1/calendars/{name}")).await?;
            print(json_output, &calendar, || {
                let jobs = calendar["jobs"].as_array().cloned().unwrap_or_default();
                let rows: Vec<Vec<String>> =
                    jobs.iter().map(|j| vec![text(&j["name"]), text(&j["id"]), text(&j["holds"])]).collect();
                format!(
                    "{} v{}: {} holiday entries\n{}",
                    text(&calendar["name"]),
                    text(&calendar["version"]),
                    holidays(&calendar),
                    table(&["JOB", "ID", "HOLDS VERSION"], &rows)
                )
            });
        }
        CalendarsCommand::Delete { name } => {
            client.call(Method::DELETE, &format!("/v1/calendars/{name}"), None).await?;
            print(json_output, &json!({"deleted": name}), || format!("deleted calendar {name}"));
        }
    }
    Ok(())
}

/// `sundial apply`: the plan that makes the calendars and jobs as `file` says, shown, then
/// carried out (calendars first: jobs name them) unless it is a dry run.
async fn apply_file(
    client: &Client,
    file: &str,
    prune: bool,
    dry_run: bool,
    json_output: bool,
) -> Result<(), CliError> {
    let source = std::fs::read_to_string(file).map_err(|e| CliError::File {
        file: file.to_string(),
        line: None,
        field: String::new(),
        reason: e.to_string(),
    })?;
    let desired = apply::read(file, &source)?;
    let root: serde_yaml::Value = serde_yaml::from_str(&source).unwrap_or_default();
    let calendars = calendars::read(file, &source, &root)?;
    let calendar_plan = match calendars.is_empty() {
        true => calendars::CalendarPlan::default(),
        false => {
            let listed = client.get("/v1/calendars").await?;
            calendars::plan(calendars, listed["calendars"].as_array().map_or(&[][..], Vec::as_slice))
        }
    };
    let plan = apply::plan(desired, &client.jobs().await?, prune).map_err(|r| r.located(file, &source))?;
    let summary = || {
        let mut summary = plan.summary();
        let (created, updated): (Vec<_>, Vec<_>) = calendar_plan.put.iter().partition(|(_, new)| *new);
        let names = |list: Vec<&(calendars::DesiredCalendar, bool)>| -> Vec<String> {
            list.into_iter().map(|(c, _)| c.name.clone()).collect()
        };
        summary["calendars"] = json!({"created": names(created), "updated": names(updated), "unchanged": calendar_plan.unchanged});
        summary
    };
    let nothing = plan.is_empty() && calendar_plan.put.is_empty();
    let describe = || match nothing {
        true => "no changes\n".to_string(),
        false => format!(
            "{}{}",
            calendar_plan.describe(),
            if plan.is_empty() { String::new() } else { plan.describe() }
        ),
    };
    if dry_run {
        print(json_output, &json!({"dry_run": true, "plan": summary()}), || {
            describe().trim_end().to_string()
        });
        return Ok(());
    }
    if !json_output {
        eprint!("{}", describe());
    }
    calendar_plan.execute(client, file, &source, json_output).await?;
    plan.execute(client, file, &source, json_output).await?;
    print(json_output, &summary(), || {
        let s = summary();
        let count = |k: &str| s[k].as_array().map_or(0, Vec::len);
        let calendars = |k: &str| s["calendars"][k].as_array().map_or(0, Vec::len);
        format!(
            "{} created, {} updated, {} deleted, {} unchanged; calendars: {} created, {} updated, {} unchanged",
            count("created"),
            count("updated"),
            count("deleted"),
            count("unchanged"),
            calendars("created"),
            calendars("updated"),
            calendars("unchanged")
        )
    });
    Ok(())
}

/// `sundial jobs ls`.
async fn list_jobs(client: &Client, filter: &[(&str, String)], json_output: bool) -> Result<(), CliError> {
    let jobs = client.jobs_where(filter).await?;
    print(json_output, &Value::Array(jobs.clone()), || {
        let rows: Vec<Vec<String>> = jobs
            .iter()
            .map(|j| {
                vec![
                    text(&j["name"]),
                    text(&j["schedule_description"]),
                    text(&j["next_run_at"]),
                    text(&j["last_run"]["state"]),
                    if j["paused"] == true { "paused".into() } else { String::new() },
                ]
            })
            .collect();
        table(&["NAME", "SCHEDULE", "NEXT RUN", "LAST RUN", ""], &rows)
    });
    Ok(())
}

/// `sundial run ID`: the run, its attempts, and its alerts' deliveries to Slack and PagerDuty.
async fn show_run(client: &Client, id: &str, json_output: bool) -> Result<(), CliError> {
    let run = client.get(&format!("/v1/runs/{id}")).await?;
    print(json_output, &run, || {
        let attempts: Vec<Vec<String>> = run["attempts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                vec![
                    text(&a["n"]),
                    text(&a["started_at"]),
                    text(&a["finished_at"]),
                    text(&a["worker"]),
                    text(&a["outcome"]),
                    text(&a["status_code"]),
                    text(&a["error"]),
                ]
            })
            .collect();
        let alerts: Vec<Vec<String>> = run["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                vec![
                    text(&d["event"]),
                    text(&d["channel"]),
                    text(&d["state"]),
                    text(&d["tries"]),
                    text(&d["error"]),
                ]
            })
            .collect();
        let mut shown = format!(
            "{} {}\nscheduled {}\n\n{}",
            text(&run["id"]),
            text(&run["state"]),
            text(&run["scheduled_at"]),
            table(&["#", "STARTED", "ENDED", "WORKER", "OUTCOME", "STATUS", "ERROR"], &attempts)
        );
        if !alerts.is_empty() {
            shown.push_str(&format!(
                "\n\nalerts\n{}",
                table(&["EVENT", "CHANNEL", "STATE", "TRIES", "ERROR"], &alerts)
            ));
        }
        shown
    });
    Ok(())
}

/// `sundial jobs get JOB`: the job as YAML (JSON with `--json`). Its warnings (the DST changes
/// of the next year that move, skip or double an instant) go to stderr, one `warning:` line
/// each, so that the YAML on stdout stays the job's; the JSON keeps them in `warnings`.
async fn show_job(client: &Client, job: &str, json_output: bool) -> Result<(), CliError> {
    let job = client.job(job).await?;
    let mut shown = job.clone();
    let warnings = shown.as_object_mut().and_then(|j| j.remove("warnings"));
    print(json_output, &job, || serde_yaml::to_string(&shown).unwrap_or_default());
    if !json_output {
        for warning in warnings.as_ref().and_then(Value::as_array).into_iter().flatten() {
            eprintln!("warning: {}", text(warning));
        }
    }
    Ok(())
}

/// `sundial preview JOB`: its next instants, in UTC and in its zone, each marked when it is
/// skipped or a DST change touched it; then the DST changes in the span, in words.
async fn preview(client: &Client, job: &str, count: u32, json_output: bool) -> Result<(), CliError> {
    let job = client.find_job(job).await?;
    let preview = client.get(&format!("/v1/jobs/{}/preview?count={count}", text(&job["id"]))).await?;
    print(json_output, &preview, || preview_text(&preview));
    Ok(())
}

/// A preview for people: a table of its instants, with a last column saying `skipped` or
/// `DST moved`/`doubled`/`first_only`, and under it a `DST:` line per note of the preview.
fn preview_text(preview: &Value) -> String {
    let rows: Vec<Vec<String>> = preview["instants"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            let skipped = (i["skipped"] == true).then(|| "skipped".to_string());
            let dst = i["dst"].as_str().map(|kind| format!("DST {kind}"));
            let marks: Vec<String> = skipped.into_iter().chain(dst).collect();
            vec![text(&i["utc"]), text(&i["local"]), marks.join(", ")]
        })
        .collect();
    let mut out = table(&["UTC", &format!("LOCAL ({})", text(&preview["timezone"])), ""], &rows);
    let notes: Vec<String> = preview["dst"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| format!("DST: {}", text(&n["detail"])))
        .collect();
    if !notes.is_empty() {
        out.push_str("\n\n");
        out.push_str(&notes.join("\n"));
    }
    out
}

/// `sundial instants JOB`: the job's instant ledger, every page of it.
async fn instants(
    client: &Client,
    job: &str,
    from: Option<String>,
    to: Option<String>,
    json_output: bool,
) -> Result<(), CliError> {
    let job = client.find_job(job).await?;
    let (mut entries, mut manual) = (Vec::new(), Vec::new());
    // Pages continue from `next` to the same end: settle the default end before the first.
    let to = to.or_else(|| match &from {
        None => Some(chrono::Utc::now().to_rfc3339()),
        Some(from) => chrono::DateTime::parse_from_rfc3339(from)
            .ok()
            .map(|f| (f + chrono::Duration::hours(24)).to_rfc3339()),
    });
    let mut from = from;
    loop {
        let query: Vec<String> = [("from", &from), ("to", &to)]
            .into_iter()
            .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name}={}", v.replace('+', "%2B"))))
            .collect();
        let page = client.get(&format!("/v1/jobs/{}/instants?{}", text(&job["id"]), query.join("&"))).await?;
        entries.extend(page["instants"].as_array().cloned().unwrap_or_default());
        manual.extend(page["manual"].as_array().cloned().unwrap_or_default());
        match page["next"].as_str() {
            Some(next) => from = Some(next.to_string()),
            None => break,
        }
    }
    let ledger = json!({"job_id": job["id"], "instants": entries, "manual": manual});
    print(json_output, &ledger, || {
        let rows = |list: &[Value]| -> Vec<Vec<String>> {
            list.iter()
                .map(|e| {
                    let outcome = match e["reason"].as_str() {
                        Some(reason) => format!("{} ({reason})", text(&e["outcome"])),
                        None => text(&e["outcome"]),
                    };
                    vec![text(&e["at"]), outcome, text(&e["run_id"]), text(&e["detail"])]
                })
                .collect()
        };
        let mut out = table(&["INSTANT", "OUTCOME", "RUN", "DETAIL"], &rows(&entries));
        if !manual.is_empty() {
            out.push_str("\n\nmanual runs\n");
            out.push_str(&table(&["ASKED AT", "OUTCOME", "RUN", "DETAIL"], &rows(&manual)));
        }
        out
    });
    Ok(())
}

/// `sundial forecast`: runs per minute over a window.
async fn forecast(
    client: &Client,
    from: Option<String>,
    to: Option<String>,
    stack: bool,
    json_output: bool,
) -> Result<(), CliError> {
    let mut query = Vec::new();
    for (name, value) in [("from", from), ("to", to)] {
        if let Some(value) = value {
            query.push(format!("{name}={}", value.replace('+', "%2B")));
        }
    }
    if stack {
        query.push("scope=stack".into());
    }
    let forecast = client.get(&format!("/v1/forecast?{}", query.join("&"))).await?;
    print(json_output, &forecast, || forecast_text(&forecast));
    Ok(())
}

/// A forecast for people: a summary line, runs per hour with each hour's busiest minute, and
/// the peak minutes with their top jobs.
fn forecast_text(forecast: &Value) -> String {
    let counts: Vec<u64> =
        forecast["counts"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
    let from = chrono::DateTime::parse_from_rfc3339(&text(&forecast["from"])).ok();
    let mut out = format!(
        "{} .. {} ({}): {} runs, {} a minute on average, busiest minute {}; peaks: {} minutes with {} runs or more\n\n",
        text(&forecast["from"]),
        text(&forecast["to"]),
        text(&forecast["scope"]),
        forecast["total"],
        forecast["average"],
        forecast["busiest"],
        forecast["peak_minutes"],
        forecast["peak_threshold"],
    );
    let widest = counts.chunks(60).map(|h| h.iter().sum::<u64>()).max().unwrap_or(0).max(1);
    let hours: Vec<Vec<String>> = counts
        .chunks(60)
        .enumerate()
        .map(|(i, hour)| {
            let start =
                from.map(|f| (f + chrono::Duration::hours(i as i64)).format("%Y-%m-%d %H:%M").to_string());
            let runs: u64 = hour.iter().sum();
            let bar = "#".repeat(((runs * 40).div_ceil(widest)) as usize);
            vec![
                start.unwrap_or_default(),
                runs.to_string(),
                hour.iter().max().unwrap_or(&0).to_string(),
                bar,
            ]
        })
        .collect();
    out.push_str(&table(&["HOUR (UTC)", "RUNS", "BUSIEST MINUTE", ""], &hours));
    let peaks: Vec<Vec<String>> = forecast["peaks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let jobs: Vec<String> = p["jobs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|j| format!("{} ({})", text(&j["name"]), j["runs"]))
                .collect();
            vec![text(&p["minute"]), p["runs"].to_string(), jobs.join(", ")]
        })
        .collect();
    if !peaks.is_empty() {
        out.push_str("\n\n");
        out.push_str(&table(&["PEAK MINUTE", "RUNS", "TOP JOBS"], &peaks));
    }
    if forecast["after_parents"].as_u64().unwrap_or(0) > 0 {
        out.push_str(&format!(
            "\n{} more runs of jobs with depends_on start when their parents end\n",
            forecast["after_parents"]
        ));
    }
    for change in forecast["dst"].as_array().into_iter().flatten() {
        out.push_str(&format!("\nDST: {}: {}", text(&change["name"]), text(&change["detail"])));
    }
    out
}

async fn state_change(
    client: &Client,
    job: &str,
    action: &str,
    body: Value,
    json_output: bool,
) -> Result<(), CliError> {
    let job = client.find_job(job).await?;
    let after =
        client.call(Method::POST, &format!("/v1/jobs/{}/{action}", text(&job["id"])), Some(&body)).await?;
    print(json_output, &after, || {
        let mut line = match after["paused"] == true {
            true => format!("{} is paused", text(&after["name"])),
            false => format!("{} is active; next run {}", text(&after["name"]), text(&after["next_run_at"])),
        };
        if let Some(until) = after["pause"]["until"].as_str() {
            line.push_str(&format!(" until {until}"));
        }
        line
    });
    Ok(())
}

/// An object without its null members: options not given are not sent.
fn without_nulls(mut value: Value) -> Value {
    if let Some(map) = value.as_object_mut() {
        map.retain(|_, v| !v.is_null());
    }
    value
}

/// What `sundial skip` was asked.
struct SkipArgs {
    next: Option<usize>,
    instants: Vec<String>,
    undo: bool,
    instant: Option<String>,
}

/// `sundial skip JOB`: skips instants, or takes skips back; prints the job's skips.
async fn skip(client: &Client, job: &str, args: SkipArgs, json_output: bool) -> Result<(), CliError> {
    let job = client.find_job(job).await?;
    let path = format!("/v1/jobs/{}/skip", text(&job["id"]));
    let after = match (args.undo, args.next, args.instants.is_empty()) {
        (true, ..) => {
            let query =
                args.instant.map(|i| format!("?instant={}", i.replace('+', "%2B"))).unwrap_or_default();
            client.call(Method::DELETE, &format!("{path}{query}"), None).await?
        }
        (false, Some(next), true) => client.call(Method::POST, &path, Some(&json!({"next": next}))).await?,
        (false, None, false) => {
            client.call(Method::POST, &path, Some(&json!({"instants": args.instants}))).await?
        }
        _ => return Err(CliError::Usage("give --next N, --instants A,B or --undo".into())),
    };
    print(json_output, &after, || {
        let skips: Vec<String> =
            after["skips"].as_array().into_iter().flatten().map(|s| text(&s["at"])).collect();
        match skips.is_empty() {
            true => format!("{} skips no instant", text(&after["name"])),
            false => format!("{} skips {}", text(&after["name"]), skips.join(", ")),
        }
    });
    Ok(())
}

/// Polls the job's newest runs every two seconds and prints each change of state (with
/// `--json`, one object per line).
async fn tail(client: &Client, job: &str, seconds: Option<u64>, json_output: bool) -> Result<(), CliError> {
    let job = client.find_job(job).await?;
    let id = text(&job["id"]);
    let until = seconds.map(|s| std::time::Instant::now() + std::time::Duration::from_secs(s));
    let mut seen: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    loop {
        let page = client.get(&format!("/v1/jobs/{id}/runs?limit=20")).await?;
        let mut runs = page["runs"].as_array().cloned().unwrap_or_default();
        runs.reverse();
        for run in runs {
            let (run_id, state) = (text(&run["id"]), text(&run["state"]));
            if seen.get(&run_id) != Some(&state) {
                seen.insert(run_id.clone(), state.clone());
                if json_output {
                    // One JSON object per line, so a script can read the stream as it comes.
                    println!("{}", json!({"at": chrono::Utc::now(), "run_id": run_id, "state": state}));
                } else {
                    println!("{}  {run_id}  {state}", chrono::Utc::now().format("%H:%M:%S"));
                }
            }
        }
        if until.is_some_and(|u| std::time::Instant::now() >= u) {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match execute(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sundial: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forecast_prints_the_dst_changes_it_lists() {
        let forecast = serde_json::json!({
            "from": "2030-03-10T00:00:00Z", "to": "2030-03-10T01:00:00Z", "scope": "owner",
            "total": 0, "average": 0.0, "busiest": 0, "peak_minutes": 0, "peak_threshold": 2,
            "counts": [0], "peaks": [], "after_parents": 0,
            "dst": [{"job_id": "j", "name": "half-past-two", "effect": "moved",
                     "detail": "2030-03-10: 02:30 does not exist in America/New_York; runs at 03:00"}]
        });
        assert!(
            forecast_text(&forecast).ends_with(
                "\nDST: half-past-two: 2030-03-10: 02:30 does not exist in America/New_York; runs at 03:00"
            ),
            "{}",
            forecast_text(&forecast)
        );
    }
}
