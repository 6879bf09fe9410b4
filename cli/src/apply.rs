//! `sundial apply`: a file of jobs is the desired state. Jobs are matched by name; each is
//! created, updated (with the merge patch from what the API holds to what the file says) or left
//! alone, and with `--prune` the caller's jobs missing from the file are deleted. The whole file
//! is decoded and validated before anything is written, and errors name the file, the line and
//! the field.

use crate::CliError;
use crate::client::Client;
use crate::locate::Lines;
use reqwest::Method;
use serde_json::{Value, json};
use sundial_domain::job::JobDocument;
use sundial_domain::limits::{Limits, TargetAllowList};
use sundial_domain::merge_patch;
use sundial_domain::validation::{self, Rules};

/// One job of the file, decoded and validated.
#[derive(Debug)]
pub struct Desired {
    pub name: String,
    pub document: Value,
    /// Where the job starts in the file (its path, for locating errors).
    pub path: String,
}

/// What applying the file does.
#[derive(Debug, Default)]
pub struct Plan {
    pub create: Vec<Desired>,
    /// (job id, the file's job, merge patch)
    pub update: Vec<(String, Desired, Value)>,
    pub unchanged: Vec<String>,
    /// (job id, name)
    pub delete: Vec<(String, String)>,
}

/// Reads and checks a jobs file: a list of job documents, or a mapping with a `jobs` list.
pub fn read(file: &str, text: &str) -> Result<Vec<Desired>, CliError> {
    let at = |line: Option<usize>, field: &str, reason: String| CliError::File {
        file: file.to_string(),
        line,
        field: field.to_string(),
        reason,
    };
    let root: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| at(e.location().map(|l| l.line()), "", e.to_string()))?;
    let (items, base) = match &root {
        serde_yaml::Value::Sequence(items) => (items.clone(), String::new()),
        serde_yaml::Value::Mapping(map) => match map.get("jobs") {
            Some(serde_yaml::Value::Sequence(items)) => (items.clone(), "jobs".to_string()),
            _ => return Err(at(Some(1), "jobs", "must be a list of jobs".into())),
        },
        serde_yaml::Value::Null => (Vec::new(), String::new()),
        _ => return Err(at(Some(1), "", "must be a list of jobs, or a mapping with a `jobs` list".into())),
    };
    let lines = Lines::of(text);
    let limits = Limits::default();
    // The server's allow-list is not known here: targets are checked when the API applies them.
    let everything = vec!["*".to_string()];
    let targets = TargetAllowList {
        lambda: everything.clone(),
        sqs: everything.clone(),
        sns: everything,
        own_prefix: String::new(),
        network: sundial_domain::egress::Egress::new(&["0.0.0.0/0".into(), "::/0".into()], &[])
            .unwrap_or_default(),
    };
    let now = chrono::Utc::now();
    let mut desired: Vec<Desired> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let path = format!("{base}[{i}]");
        let fail = |field: &str, reason: String| {
            let full = if field.is_empty() { path.clone() } else { format!("{path}.{field}") };
            at(lines.line(&full), &full, reason)
        };
        let value = serde_json::to_value(&item).map_err(|e| fail("", e.to_string()))?;
        let mut document: JobDocument =
            sundial_domain::validation::decode(value).map_err(|e| fail(&e.field, e.reason.clone()))?;
        validation::validate(&mut document, &Rules { limits: &limits, targets: &targets }, now, now)
            .map_err(|e| fail(&e.field, e.reason.clone()))?;
        if desired.iter().any(|d| d.name == document.name) {
            return Err(fail("name", format!("`{}` appears twice in the file", document.name)));
        }
        let document = serde_json::to_value(&document).map_err(|e| fail("", e.to_string()))?;
        desired.push(Desired {
            name: document["name"].as_str().unwrap_or_default().to_string(),
            document,
            path,
        });
    }
    Ok(desired)
}

/// The document part of a job as the API shows it (what Sundial adds taken away), normalised
/// through the document type so that defaults compare equal.
fn current_document(job: &Value) -> Value {
    let mut document = job.clone();
    if let Some(map) = document.as_object_mut() {
        for added in [
            "id",
            "owner",
            "version",
            "created_at",
            "updated_at",
            "next_run_at",
            "last_run",
            "signing_secret",
            "subscriptions",
            "schedule_description",
        ] {
            map.remove(added);
        }
    }
    serde_json::from_value::<JobDocument>(document.clone())
        .ok()
        .and_then(|d| serde_json::to_value(d).ok())
        .unwrap_or(document)
}

/// Compares the file with the caller's jobs.
pub fn plan(desired: Vec<Desired>, existing: &[Value], prune: bool) -> Plan {
    let mut plan = Plan::default();
    for job in existing {
        let name = job["name"].as_str().unwrap_or_default();
        if prune && !desired.iter().any(|d| d.name == name) {
            plan.delete.push((job["id"].as_str().unwrap_or_default().to_string(), name.to_string()));
        }
    }
    for d in desired {
        match existing.iter().find(|j| j["name"] == d.name.as_str()) {
            None => plan.create.push(d),
            Some(job) => match merge_patch::diff(&current_document(job), &d.document) {
                None => plan.unchanged.push(d.name),
                Some(patch) => {
                    plan.update.push((job["id"].as_str().unwrap_or_default().to_string(), d, patch))
                }
            },
        }
    }
    plan
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }

    /// The plan as people read it: `+ create`, `~ update` with the changed fields, `- delete`.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for d in &self.create {
            out.push_str(&format!("+ create {}\n", d.name));
        }
        for (_, d, patch) in &self.update {
            out.push_str(&format!("~ update {}: {patch}\n", d.name));
        }
        for (_, name) in &self.delete {
            out.push_str(&format!("- delete {name}\n"));
        }
        if self.is_empty() {
            out.push_str("no changes\n");
        }
        out
    }

    pub fn summary(&self) -> Value {
        json!({
            "created": self.create.iter().map(|d| &d.name).collect::<Vec<_>>(),
            "updated": self.update.iter().map(|(_, d, _)| &d.name).collect::<Vec<_>>(),
            "deleted": self.delete.iter().map(|(_, n)| n).collect::<Vec<_>>(),
            "unchanged": self.unchanged,
        })
    }

    /// Carries the plan out, reporting progress on stderr (`[3/120] create nightly`). An error
    /// the API returns for one job names the file's line; later jobs are not attempted.
    pub async fn execute(
        &self,
        client: &Client,
        file: &str,
        text: &str,
        quiet: bool,
    ) -> Result<(), CliError> {
        let total = self.create.len() + self.update.len() + self.delete.len();
        let lines = Lines::of(text);
        let mut done = 0;
        let mut progress = |what: &str, name: &str| {
            done += 1;
            if !quiet {
                eprintln!("[{done}/{total}] {what} {name}");
            }
        };
        let located = |path: &str, e: CliError| match e {
            CliError::Rejected { message, field } => {
                let full = match field.as_deref() {
                    Some(f) if !f.is_empty() && f != "body" => format!("{path}.{f}"),
                    _ => path.to_string(),
                };
                CliError::File {
                    file: file.to_string(),
                    line: lines.line(&full),
                    field: full,
                    reason: message,
                }
            }
            other => other,
        };
        for d in &self.create {
            progress("create", &d.name);
            client
                .call(Method::POST, "/v1/jobs", Some(&d.document))
                .await
                .map_err(|e| located(&d.path, e))?;
        }
        for (id, d, patch) in &self.update {
            progress("update", &d.name);
            client
                .call(Method::PATCH, &format!("/v1/jobs/{id}"), Some(patch))
                .await
                .map_err(|e| located(&d.path, e))?;
        }
        for (id, name) in &self.delete {
            progress("delete", name);
            client.call(Method::DELETE, &format!("/v1/jobs/{id}"), None).await?;
        }
        Ok(())
    }
}
