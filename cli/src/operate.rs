//! The operations of the API beyond a job's own lifecycle, from a terminal: runs backfilled,
//! cancelled and re-run; concurrency groups; API keys and grants; a job's versions, their diffs and
//! a rollback. Each is one API call (or a page walk), printed as a table or, with `--json`, as the
//! API answered.

use crate::client::Client;
use crate::{CliError, print, table, text};
use clap::Subcommand;
use reqwest::Method;
use serde_json::{Value, json};

/// `sundial groups …`: concurrency groups, by name.
#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// A group: its limit, the attempts running and the jobs that name it.
    Get { name: String },
    /// Create a group, or set its limit.
    Set {
        name: String,
        /// How many attempts of its jobs may run at once (1-100).
        #[arg(long)]
        max_running: u32,
    },
    /// Delete a group; refused while a job names it.
    Delete { name: String },
}

/// `sundial keys …`: the owner's API keys (an admin key's to manage).
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// The owner's keys: never a secret.
    Ls,
    /// Make a key (its secret printed once), or a grant to a JWT subject with `--subject`.
    Create {
        name: String,
        /// `viewer`, `operator`, `editor` or `admin`.
        #[arg(long)]
        role: String,
        /// RFC 3339: when it stops working.
        #[arg(long)]
        expires_at: Option<String>,
        /// A JWT subject to grant the role to, instead of making a secret.
        #[arg(long)]
        subject: Option<String>,
    },
    /// Revoke a key: the next request that presents it is refused.
    Revoke { id: String },
}

/// A JSON argument (`--payload`), or a refusal naming it.
pub fn json_arg(text: &str, flag: &str) -> Result<Value, CliError> {
    serde_json::from_str(text)
        .map_err(|e| CliError::Rejected { message: format!("is not JSON: {e}"), field: Some(flag.into()) })
}

/// `sundial backfill JOB --from --to [--payload]`: a run for every instant of the range without
/// one.
pub async fn backfill(
    client: &Client,
    job: &str,
    range: (String, String),
    payload: Option<String>,
    json_output: bool,
) -> Result<(), CliError> {
    let (from, to) = range;
    let mut body = json!({"from": from, "to": to});
    if let Some(payload) = payload {
        body["payload"] = json_arg(&payload, "--payload")?;
    }
    let job = client.find_job(job).await?;
    let path = format!("/v1/jobs/{}/backfill", text(&job["id"]));
    let done = client.call(Method::POST, &path, Some(&body)).await?;
    print(json_output, &done, || {
        format!(
            "{} runs created; {} instants already had one",
            text(&done["created"]),
            text(&done["existing"])
        )
    });
    Ok(())
}

/// `sundial cancel RUN` and `sundial rerun RUN [--payload]`.
pub async fn run_action(
    client: &Client,
    run: &str,
    action: &str,
    payload: Option<String>,
    json_output: bool,
) -> Result<(), CliError> {
    let body = match payload {
        Some(payload) => json!({"payload": json_arg(&payload, "--payload")?}),
        None => json!({}),
    };
    let answered = client.call(Method::POST, &format!("/v1/runs/{run}/{action}"), Some(&body)).await?;
    print(json_output, &answered, || {
        format!("run {} is {}", text(&answered["id"]), text(&answered["state"]))
    });
    Ok(())
}

/// `sundial groups …`.
pub async fn groups(client: &Client, command: GroupsCommand, json_output: bool) -> Result<(), CliError> {
    let shown = |group: &Value| {
        let jobs: Vec<String> = group["jobs"].as_array().into_iter().flatten().map(text).collect();
        format!(
            "{}: {} running of {} at most; jobs (ids): {}",
            text(&group["name"]),
            text(&group["running"]),
            text(&group["max_running"]),
            if jobs.is_empty() { "-".into() } else { jobs.join(", ") }
        )
    };
    match command {
        GroupsCommand::Get { name } => {
            let group = client.get(&format!("/v1/groups/{name}")).await?;
            print(json_output, &group, || shown(&group));
        }
        GroupsCommand::Set { name, max_running } => {
            let body = json!({"max_running": max_running});
            let group = client.call(Method::PUT, &format!("/v1/groups/{name}"), Some(&body)).await?;
            print(json_output, &group, || shown(&group));
        }
        GroupsCommand::Delete { name } => {
            client.call(Method::DELETE, &format!("/v1/groups/{name}"), None).await?;
            print(json_output, &json!({"deleted": name}), || format!("deleted group {name}"));
        }
    }
    Ok(())
}

/// `sundial keys …`.
pub async fn keys(client: &Client, command: KeysCommand, json_output: bool) -> Result<(), CliError> {
    match command {
        KeysCommand::Ls => {
            let listed = client.get("/v1/keys").await?;
            let keys = listed["keys"].as_array().cloned().unwrap_or_default();
            print(json_output, &Value::Array(keys.clone()), || {
                let rows: Vec<Vec<String>> = keys
                    .iter()
                    .map(|k| {
                        let holder =
                            k["subject"].as_str().map_or_else(|| "key".into(), |s| format!("subject {s}"));
                        vec![
                            text(&k["id"]),
                            text(&k["name"]),
                            text(&k["role"]),
                            holder,
                            text(&k["expires_at"]),
                            text(&k["last_used_at"]),
                        ]
                    })
                    .collect();
                table(&["ID", "NAME", "ROLE", "HOLDER", "EXPIRES", "LAST USED"], &rows)
            });
        }
        KeysCommand::Create { name, role, expires_at, subject } => {
            let mut body = json!({"name": name, "role": role});
            if let Some(at) = expires_at {
                body["expires_at"] = json!(at);
            }
            if let Some(subject) = subject {
                body["subject"] = json!(subject);
            }
            let made = client.call(Method::POST, "/v1/keys", Some(&body)).await?;
            print(json_output, &made, || match made["secret"].as_str() {
                Some(secret) => format!(
                    "key {} ({}): {secret}\nthe secret is shown this once",
                    text(&made["id"]),
                    text(&made["role"])
                ),
                None => format!(
                    "grant {} of {} to subject {}",
                    text(&made["id"]),
                    text(&made["role"]),
                    text(&made["subject"])
                ),
            });
        }
        KeysCommand::Revoke { id } => {
            client.call(Method::DELETE, &format!("/v1/keys/{id}"), None).await?;
            print(json_output, &json!({"revoked": id}), || format!("revoked key {id}"));
        }
    }
    Ok(())
}

/// `sundial versions JOB`: its kept versions, newest first, with the fields each changed.
pub async fn versions(client: &Client, job: &str, json_output: bool) -> Result<(), CliError> {
    let job = client.find_job(job).await?;
    let listed = client.get(&format!("/v1/jobs/{}/versions", text(&job["id"]))).await?;
    let versions = listed["versions"].as_array().cloned().unwrap_or_default();
    print(json_output, &Value::Array(versions.clone()), || {
        let rows: Vec<Vec<String>> = versions
            .iter()
            .map(|v| {
                let changed: Vec<String> = v["changed"].as_array().into_iter().flatten().map(text).collect();
                vec![text(&v["version"]), text(&v["at"]), changed.join(", ")]
            })
            .collect();
        table(&["VERSION", "AT", "CHANGED"], &rows)
    });
    Ok(())
}

/// `sundial diff JOB --from N [--to M]`: each field that differs, old and new.
pub async fn diff(
    client: &Client,
    job: &str,
    from: u64,
    to: Option<u64>,
    json_output: bool,
) -> Result<(), CliError> {
    let job = client.find_job(job).await?;
    let to = to.map(|to| format!("&to={to}")).unwrap_or_default();
    let answered = client.get(&format!("/v1/jobs/{}/diff?from={from}{to}", text(&job["id"]))).await?;
    let changes = answered["changes"].as_array().cloned().unwrap_or_default();
    print(json_output, &answered, || {
        let rows: Vec<Vec<String>> =
            changes.iter().map(|c| vec![text(&c["field"]), text(&c["old"]), text(&c["new"])]).collect();
        table(&["FIELD", "OLD", "NEW"], &rows)
    });
    Ok(())
}

/// `sundial rollback JOB --version N`: a new version equal to version N.
pub async fn rollback(client: &Client, job: &str, version: u64, json_output: bool) -> Result<(), CliError> {
    let job = client.find_job(job).await?;
    let path = format!("/v1/jobs/{}/rollback", text(&job["id"]));
    let rolled = client.call(Method::POST, &path, Some(&json!({"version": version}))).await?;
    print(json_output, &rolled, || {
        format!(
            "{} is version {}, equal to version {version}",
            text(&rolled["name"]),
            text(&rolled["version"])
        )
    });
    Ok(())
}
