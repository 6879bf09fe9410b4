//! `sundial apply`: a file of jobs is the desired state. Jobs are matched by name; each is
//! created, updated (with the merge patch from what the API holds to what the file says) or left
//! alone, and with `--prune` the caller's jobs missing from the file are deleted. The whole file
//! is decoded and validated before anything is written, and errors name the file, the line and
//! the field.
//!
//! `depends_on` names parents by name (an id works too), in any order within the file: creates
//! and updates are written parents first, deletes children first. The API shows parents by id, so
//! the comparison reads the ids of the caller's jobs as their names.

use crate::CliError;
use crate::client::Client;
use crate::locate::Lines;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::HashMap;
use sundial_domain::job::{JobDocument, JobId};
use sundial_domain::limits::{Limits, TargetAllowList};
use sundial_domain::merge_patch;
use sundial_domain::validation::{self, Rules};
use sundial_domain::versions::{self, FieldChange};

/// One job of the file, decoded and validated.
#[derive(Debug)]
pub struct Desired {
    pub name: String,
    pub document: Value,
    /// Where the job starts in the file (its path, for locating errors).
    pub path: String,
}

/// A job of the file to write.
#[derive(Debug)]
pub enum Write {
    Create(Desired),
    /// The job's id, the file's job, and the merge patch from what the API holds to it.
    Update {
        id: String,
        desired: Desired,
        patch: Value,
        /// Each field that changes, with its stored value and the file's.
        changes: Vec<FieldChange>,
    },
}

impl Write {
    pub fn desired(&self) -> &Desired {
        match self {
            Write::Create(d) | Write::Update { desired: d, .. } => d,
        }
    }
}

/// What applying the file does.
#[derive(Debug, Default)]
pub struct Plan {
    /// Creates and updates, in the order they are written: parents before their children.
    pub writes: Vec<Write>,
    pub unchanged: Vec<String>,
    /// (job id, name), children before their parents.
    pub delete: Vec<(String, String)>,
}

/// Reads and checks a jobs file: a list of job documents, or a mapping with a `jobs` list (and
/// a `calendars` list, read by [`crate::calendars::read`]).
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
            // A file of calendars only.
            None if map.contains_key("calendars") => (Vec::new(), "jobs".to_string()),
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
        sns: everything.clone(),
        state_machines: everything.clone(),
        ecs_clusters: everything.clone(),
        ecs_task_definitions: everything.clone(),
        event_buses: everything,
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
/// through the document type so that defaults compare equal. Every member the API's job view
/// adds is listed: one left (`warnings`, say) fails the document's decoding, and the job would
/// differ from its file at every apply.
fn current_document(job: &Value) -> Value {
    let mut document = job.clone();
    if let Some(map) = document.as_object_mut() {
        for added in [
            "id",
            "owner",
            "version",
            "calendars",
            "created_at",
            "updated_at",
            "next_run_at",
            "last_run",
            "pause",
            "baseline",
            "remaining_runs",
            "skips",
            "signing_secret",
            "webhook_secret",
            "subscriptions",
            "schedule_description",
            "warnings",
        ] {
            map.remove(added);
        }
    }
    serde_json::from_value::<JobDocument>(document.clone())
        .ok()
        .and_then(|d| serde_json::to_value(d).ok())
        .unwrap_or(document)
}

/// Why the file cannot be applied against the caller's jobs, found before anything is written:
/// `path` is the field in the file (`jobs[2].depends_on`).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub path: String,
    pub reason: String,
}

impl Refusal {
    /// The refusal as an error naming the file's line.
    pub fn located(self, file: &str, text: &str) -> CliError {
        CliError::File {
            file: file.to_string(),
            line: Lines::of(text).line(&self.path),
            field: self.path,
            reason: self.reason,
        }
    }
}

/// The order to write jobs in: each after the ones it names (`parents[i]` holds the indices of
/// job `i`'s parents), otherwise in index order (a job's parents are placed just before it). `Err` is a cycle, as indices each naming the next
/// as a parent, starting at the lowest index (the cycle is closed by that first one again).
fn parents_first(parents: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    const NEW: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; parents.len()];
    let mut order = Vec::with_capacity(parents.len());
    for start in 0..parents.len() {
        if state[start] != NEW {
            continue;
        }
        // Depth first, without recursion: each entry is a job and how many of its parents have
        // been looked at; a job is placed once all of its parents are.
        state[start] = OPEN;
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        while let Some(top) = stack.last_mut() {
            let (job, seen) = *top;
            match parents[job].get(seen) {
                Some(&parent) => {
                    top.1 += 1;
                    match state.get(parent).copied() {
                        Some(NEW) => {
                            state[parent] = OPEN;
                            stack.push((parent, 0));
                        }
                        Some(OPEN) => {
                            // The stack holds each job just above the child that named it,
                            // and `job` names `parent`: from `parent` up, each names the next.
                            let from = stack.iter().position(|(j, _)| *j == parent).unwrap_or(0);
                            let mut cycle: Vec<usize> = stack[from..].iter().map(|(j, _)| *j).collect();
                            let lowest =
                                cycle.iter().enumerate().min_by_key(|(_, j)| **j).map_or(0, |(i, _)| i);
                            cycle.rotate_left(lowest);
                            return Err(cycle);
                        }
                        _ => {}
                    }
                }
                None => {
                    state[job] = DONE;
                    order.push(job);
                    stack.pop();
                }
            }
        }
    }
    Ok(order)
}

/// An entry of `depends_on` as a name: the API shows parents by id, a file names them (or may give
/// an id), so an id of one of the caller's jobs becomes that job's name, as the API would resolve
/// it; anything else already is a name.
fn parent_name(entry: &str, names_by_id: &HashMap<String, String>) -> String {
    JobId::parse(entry)
        .and_then(|id| names_by_id.get(id.as_str()))
        .cloned()
        .unwrap_or_else(|| entry.to_string())
}

/// The document's `depends_on` entries, each as a name (see [`parent_name`]).
fn name_parents(document: &mut Value, names_by_id: &HashMap<String, String>) {
    if let Some(Value::Array(entries)) = document.get_mut("depends_on") {
        for entry in entries.iter_mut() {
            if let Value::String(text) = entry {
                *text = parent_name(text, names_by_id);
            }
        }
    }
}

fn parents_of(document: &Value) -> Vec<String> {
    document["depends_on"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// Compares the file with the caller's jobs. Creates and updates are written parents first (a
/// job after the jobs of the file it names in `depends_on`; a name the file does not hold must be
/// one of the caller's jobs already), and deletes children first. Refused before anything is
/// written: a cycle within the file, a parent that is neither in the file nor among the caller's
/// jobs, and (with `prune`) a parent that the prune would delete.
pub fn plan(mut desired: Vec<Desired>, existing: &[Value], prune: bool) -> Result<Plan, Refusal> {
    let id_of = |job: &Value| job["id"].as_str().unwrap_or_default().to_string();
    let name_of = |job: &Value| job["name"].as_str().unwrap_or_default().to_string();
    let names_by_id: HashMap<String, String> = existing.iter().map(|j| (id_of(j), name_of(j))).collect();
    let by_name: HashMap<String, &Value> = existing.iter().map(|j| (name_of(j), j)).collect();
    for d in &mut desired {
        name_parents(&mut d.document, &names_by_id);
    }
    let in_file: HashMap<&str, usize> =
        desired.iter().enumerate().map(|(i, d)| (d.name.as_str(), i)).collect();
    let gone: Vec<&Value> = if prune {
        existing.iter().filter(|j| !in_file.contains_key(name_of(j).as_str())).collect()
    } else {
        Vec::new()
    };
    let gone_index: HashMap<String, usize> = gone.iter().enumerate().map(|(i, j)| (id_of(j), i)).collect();

    // Parents within the file, and the others checked against the caller's jobs.
    let mut parents: Vec<Vec<usize>> = Vec::with_capacity(desired.len());
    for d in &desired {
        let mut mine = Vec::new();
        for name in parents_of(&d.document) {
            let path = format!("{}.depends_on", d.path);
            if let Some(&i) = in_file.get(name.as_str()) {
                mine.push(i);
            } else if by_name.get(&name).is_some_and(|j| gone_index.contains_key(&id_of(j))) {
                let reason = format!("`{name}` is not in the file, so --prune would delete it");
                return Err(Refusal { path, reason });
            } else if !by_name.contains_key(&name) {
                let reason = format!("`{name}` is neither a job of the file nor one of your jobs");
                return Err(Refusal { path, reason });
            }
        }
        parents.push(mine);
    }
    let order = parents_first(&parents).map_err(|cycle| cycle_refusal(&desired, &cycle))?;
    let mut plan = Plan { delete: children_first(&gone, &gone_index), ..Plan::default() };

    let mut slots: Vec<Option<Write>> = Vec::with_capacity(desired.len());
    for d in desired {
        let write = match by_name.get(&d.name) {
            None => Some(Write::Create(d)),
            Some(job) => {
                let mut current = current_document(job);
                name_parents(&mut current, &names_by_id);
                match merge_patch::diff(&current, &d.document) {
                    None => {
                        plan.unchanged.push(d.name);
                        None
                    }
                    Some(patch) => {
                        let changes = versions::changes(&current, &d.document);
                        Some(Write::Update { id: id_of(job), desired: d, patch, changes })
                    }
                }
            }
        };
        slots.push(write);
    }
    plan.writes = order.into_iter().filter_map(|i| slots.get_mut(i).and_then(Option::take)).collect();
    Ok(plan)
}

/// The refusal of a `cycle` among the file's jobs (indexes into `desired`).
fn cycle_refusal(desired: &[Desired], cycle: &[usize]) -> Refusal {
    let first = &desired[cycle[0]];
    let mut names: Vec<&str> = cycle.iter().map(|&i| desired[i].name.as_str()).collect();
    names.push(first.name.as_str());
    let reason = if cycle.len() == 1 {
        format!("`{}` names itself; a job cannot depend on itself", first.name)
    } else {
        format!("makes a cycle: {} (each runs after the next)", names.join(" -> "))
    };
    Refusal { path: format!("{}.depends_on", first.path), reason }
}

/// The jobs to delete (id, name), children before parents: each after the children it has among
/// them, by the stored `depends_on`, in the listing's order otherwise. The API refuses cycles, so
/// the stored jobs have none; were there one, the listing's order.
fn children_first(gone: &[&Value], gone_index: &HashMap<String, usize>) -> Vec<(String, String)> {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); gone.len()];
    for (child, job) in gone.iter().enumerate() {
        for parent in parents_of(job).iter().filter_map(|p| gone_index.get(p.as_str())) {
            children[*parent].push(child);
        }
    }
    let order = parents_first(&children).unwrap_or_else(|_| (0..gone.len()).collect());
    let text = |job: &Value, key: &str| job[key].as_str().unwrap_or_default().to_string();
    order.into_iter().map(|i| (text(gone[i], "id"), text(gone[i], "name"))).collect()
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.delete.is_empty()
    }

    fn created(&self) -> impl Iterator<Item = &str> {
        self.writes.iter().filter(|w| matches!(w, Write::Create(_))).map(|w| w.desired().name.as_str())
    }

    fn updated(&self) -> impl Iterator<Item = &str> {
        self.writes.iter().filter(|w| matches!(w, Write::Update { .. })).map(|w| w.desired().name.as_str())
    }

    /// The plan as people read it, in the order it is carried out: `+ create`, `~ update` with
    /// the changed fields, `- delete`.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for write in &self.writes {
            match write {
                Write::Create(d) => out.push_str(&format!("+ create {}\n", d.name)),
                Write::Update { desired, changes, .. } => {
                    out.push_str(&format!("~ update {}\n", desired.name));
                    let shown = |v: &Option<Value>| v.as_ref().map_or("(none)".to_string(), Value::to_string);
                    for change in changes {
                        out.push_str(&format!(
                            "    {}: {} → {}\n",
                            change.field,
                            shown(&change.old),
                            shown(&change.new)
                        ));
                    }
                }
            }
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
            "created": self.created().collect::<Vec<_>>(),
            "updated": self.updated().collect::<Vec<_>>(),
            "deleted": self.delete.iter().map(|(_, n)| n).collect::<Vec<_>>(),
            "unchanged": self.unchanged,
        })
    }

    /// Carries the plan out, reporting progress on stderr (`[3/120] create nightly`) with the
    /// warnings the API gives a job written (`  warning: DST: …`), unless quiet. An error
    /// the API returns for one job names the file's line; later jobs are not attempted.
    pub async fn execute(
        &self,
        client: &Client,
        file: &str,
        text: &str,
        quiet: bool,
    ) -> Result<(), CliError> {
        let total = self.writes.len() + self.delete.len();
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
        for write in &self.writes {
            let (d, result) = match write {
                Write::Create(d) => {
                    progress("create", &d.name);
                    (d, client.call(Method::POST, "/v1/jobs", Some(&d.document)).await)
                }
                Write::Update { id, desired, patch, .. } => {
                    progress("update", &desired.name);
                    (desired, client.call(Method::PATCH, &format!("/v1/jobs/{id}"), Some(patch)).await)
                }
            };
            let written = result.map_err(|e| located(&d.path, e))?;
            if !quiet {
                for warning in written["warnings"].as_array().into_iter().flatten() {
                    eprintln!("  warning: {}", warning.as_str().unwrap_or_default());
                }
            }
        }
        for (id, name) in &self.delete {
            progress("delete", name);
            client.call(Method::DELETE, &format!("/v1/jobs/{id}"), None).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: &str = r#"target: {type: http, url: "https://x.example.test/"}"#;

    /// A file of jobs, each `(name, parents)`; a job without parents runs hourly.
    fn file(jobs: &[(&str, &[&str])]) -> String {
        let mut text = String::from("jobs:\n");
        for (name, parents) in jobs {
            text.push_str(&format!("  - name: {name}\n    {TARGET}\n"));
            if parents.is_empty() {
                text.push_str("    schedule: {cron: \"0 * * * *\"}\n");
            } else {
                text.push_str(&format!("    depends_on: [{}]\n", parents.join(", ")));
            }
        }
        text
    }

    fn desired(text: &str) -> Vec<Desired> {
        read("jobs.yaml", text).unwrap()
    }

    /// The caller's jobs as `GET /v1/jobs` lists them: parents by id, and what Sundial adds.
    fn existing(jobs: &[(&str, &[&str])]) -> Vec<Value> {
        let ids: HashMap<&str, String> =
            jobs.iter().map(|(name, _)| (*name, JobId::generate().to_string())).collect();
        jobs.iter()
            .map(|(name, parents)| {
                let mut job = json!({
                    "id": ids[name], "owner": "alice", "version": 1, "name": name,
                    "target": {"type": "http", "url": "https://x.example.test/", "method": "POST"},
                    "created_at": "2030-01-01T00:00:00Z", "updated_at": "2030-01-01T00:00:00Z",
                    "next_run_at": null, "last_run": null,
                    "schedule_description": "every hour",
                });
                if parents.is_empty() {
                    job["schedule"] = json!({"cron": "0 * * * *"});
                } else {
                    // An id for a parent that is not listed stays a name, as a gone parent would.
                    let parents: Vec<String> =
                        parents.iter().map(|p| ids.get(p).cloned().unwrap_or(p.to_string())).collect();
                    job["depends_on"] = json!(parents);
                }
                job
            })
            .collect()
    }

    fn writes(plan: &Plan) -> Vec<String> {
        plan.writes
            .iter()
            .map(|w| match w {
                Write::Create(d) => format!("+{}", d.name),
                Write::Update { desired, .. } => format!("~{}", desired.name),
            })
            .collect()
    }

    fn deletes(plan: &Plan) -> Vec<&str> {
        plan.delete.iter().map(|(_, name)| name.as_str()).collect()
    }

    const DIAMOND_CHILD_FIRST: &[(&str, &[&str])] =
        &[("report", &["left", "right"]), ("right", &["extract"]), ("left", &["extract"]), ("extract", &[])];

    #[test]
    fn a_diamond_listed_child_first_is_written_parents_first() {
        let plan = plan(desired(&file(DIAMOND_CHILD_FIRST)), &[], false).unwrap();
        assert_eq!(writes(&plan), ["+extract", "+left", "+right", "+report"]);
        assert_eq!(plan.summary()["created"], json!(["extract", "left", "right", "report"]));
        let described = plan.describe();
        let at = |line: &str| described.find(line).unwrap();
        assert!(at("+ create extract") < at("+ create left") && at("+ create right") < at("+ create report"));
    }

    #[test]
    fn without_depends_on_the_file_order_stays() {
        let jobs: &[(&str, &[&str])] = &[("c", &[]), ("a", &[]), ("b", &[])];
        let plan = plan(desired(&file(jobs)), &[], false).unwrap();
        assert_eq!(writes(&plan), ["+c", "+a", "+b"]);
    }

    #[test]
    fn creates_and_updates_interleave_parents_first() {
        // `extract` exists and changes; `left` is new and names it; `report` exists and now also
        // names `left`: the update of the parent, the create, then the child's update.
        let before: &[(&str, &[&str])] = &[("report", &["extract"]), ("extract", &[])];
        let text = file(&[("report", &["extract", "left"]), ("left", &["extract"]), ("extract", &[])])
            .replace("cron: \"0 * * * *\"", "cron: \"30 * * * *\"");
        let plan = plan(desired(&text), &existing(before), false).unwrap();
        assert_eq!(writes(&plan), ["~extract", "+left", "~report"]);
        let Write::Update { patch, .. } = &plan.writes[2] else { panic!("{:?}", plan.writes[2]) };
        assert_eq!(patch, &json!({"depends_on": ["extract", "left"]}), "parents sent by name");
    }

    #[test]
    fn a_cycle_within_the_file_is_refused_naming_it() {
        let text = file(&[("a", &["c"]), ("b", &["a"]), ("c", &["b"]), ("d", &["a"])]);
        let refusal = plan(desired(&text), &[], false).unwrap_err();
        assert_eq!(refusal.path, "jobs[0].depends_on");
        assert!(refusal.reason.contains("a -> c -> b -> a"), "{}", refusal.reason);
        let error = refusal.located("jobs.yaml", &text).to_string();
        assert!(
            error.starts_with("jobs.yaml:4: jobs[0].depends_on: makes a cycle: a -> c -> b -> a"),
            "{error}"
        );

        // Found wherever the walk enters it, named from the job the file lists first.
        let text = file(&[("d", &["c"]), ("c", &["b"]), ("b", &["c"])]);
        let refusal = plan(desired(&text), &[], false).unwrap_err();
        assert_eq!(refusal.path, "jobs[1].depends_on");
        assert!(refusal.reason.contains("c -> b -> c"), "{}", refusal.reason);

        let text = file(&[("a", &[]), ("self", &["a", "self"])]);
        let refusal = plan(desired(&text), &[], false).unwrap_err();
        assert_eq!(refusal.path, "jobs[1].depends_on");
        assert!(refusal.reason.contains("`self` names itself"), "{}", refusal.reason);
    }

    #[test]
    fn parents_outside_the_file_must_exist_and_survive_the_prune() {
        let before: &[(&str, &[&str])] = &[("upstream", &[])];
        let text = file(&[("child", &["upstream"])]);
        let plan_of = |prune| plan(desired(&text), &existing(before), prune);
        assert_eq!(writes(&plan_of(false).unwrap()), ["+child"], "an existing job is passed through");

        let refusal = plan_of(true).unwrap_err();
        assert_eq!(refusal.path, "jobs[0].depends_on");
        assert!(refusal.reason.contains("`upstream` is not in the file, so --prune would delete it"));

        let unknown = plan(desired(&file(&[("child", &["nowhere"])])), &existing(before), false).unwrap_err();
        assert!(unknown.reason.contains("`nowhere` is neither a job of the file nor one of your jobs"));
    }

    #[test]
    fn prune_deletes_children_before_parents() {
        // Listed parents first (as they were created), one chain and one diamond.
        let before: &[(&str, &[&str])] = &[
            ("root", &[]),
            ("extract", &[]),
            ("mid", &["root"]),
            ("left", &["extract"]),
            ("right", &["extract"]),
            ("leaf", &["mid"]),
            ("report", &["left", "right"]),
            ("kept", &[]),
        ];
        let plan = plan(desired(&file(&[("kept", &[])])), &existing(before), true).unwrap();
        assert_eq!(deletes(&plan), ["leaf", "mid", "root", "report", "left", "right", "extract"]);
        assert_eq!(plan.unchanged, ["kept"]);
        assert!(plan.writes.is_empty());
    }

    #[test]
    fn an_unchanged_workflow_is_a_no_op() {
        let plan = plan(desired(&file(DIAMOND_CHILD_FIRST)), &existing(DIAMOND_CHILD_FIRST), true).unwrap();
        assert!(plan.is_empty(), "{}", plan.describe());
        assert_eq!(plan.unchanged, ["report", "right", "left", "extract"]);
        assert_eq!(plan.describe(), "no changes\n");
    }

    #[test]
    fn what_the_view_adds_to_a_job_is_no_change() {
        let mut current = existing(&[("nightly", &[])]);
        let added = json!({
            "pause": {"from": "2030-01-01T00:00:00Z", "by": "alice"},
            "baseline": {"typical_ms": 900, "p95_ms": 1300, "runs": 5, "at": "2030-01-01T00:00:00Z"},
            "remaining_runs": 3,
            "skips": [{"at": "2030-01-02T00:00:00Z", "by": "alice"}],
            "webhook_secret": "whsec_c2VjcmV0",
            "warnings": ["DST: 2030-03-10: 02:30 does not exist in America/New_York; runs at 03:00"],
        });
        for (member, value) in added.as_object().unwrap() {
            current[0][member] = value.clone();
        }
        let plan = plan(desired(&file(&[("nightly", &[])])), &current, false).unwrap();
        assert!(plan.is_empty(), "{}", plan.describe());
    }

    #[test]
    fn parents_given_by_id_compare_by_the_job_they_name() {
        let current = existing(DIAMOND_CHILD_FIRST);
        let id = |name: &str| current.iter().find(|j| j["name"] == name).unwrap()["id"].clone();
        let text = file(DIAMOND_CHILD_FIRST)
            .replace("[left, right]", &format!("[{}, right]", id("left").as_str().unwrap().to_uppercase()));
        let plan = plan(desired(&text), &current, false).unwrap();
        assert!(plan.is_empty(), "{}", plan.describe());
    }

    #[test]
    fn a_changed_depends_on_is_an_update() {
        let current = existing(DIAMOND_CHILD_FIRST);
        // One parent fewer.
        let text = file(DIAMOND_CHILD_FIRST).replace("[left, right]", "[left]");
        let plan_of = |text: &str| plan(desired(text), &current, false).unwrap();
        let plan = plan_of(&text);
        assert_eq!(writes(&plan), ["~report"]);
        let Write::Update { patch, id, .. } = &plan.writes[0] else { panic!() };
        assert_eq!(patch, &json!({"depends_on": ["left"]}));
        assert_eq!(id, current[0]["id"].as_str().unwrap());
        // Another order of the same parents is what the API would store and show.
        assert_eq!(
            writes(&plan_of(&file(DIAMOND_CHILD_FIRST).replace("[left, right]", "[right, left]"))),
            ["~report"]
        );
        // Another parent.
        let text = file(DIAMOND_CHILD_FIRST).replace("name: right\n    target: {type: http, url: \"https://x.example.test/\"}\n    depends_on: [extract]", "name: right\n    target: {type: http, url: \"https://x.example.test/\"}\n    depends_on: [left]");
        let changed = plan_of(&text);
        assert_eq!(writes(&changed), ["~right"]);
        let Write::Update { patch, .. } = &changed.writes[0] else { panic!() };
        assert_eq!(patch, &json!({"depends_on": ["left"]}));
        // From a schedule to parents: the schedule goes in the same patch.
        let current = existing(&[("report", &[]), ("left", &[])]);
        let text = file(&[("report", &["left"]), ("left", &[])]);
        let to_child = super::plan(desired(&text), &current, false).unwrap();
        let Write::Update { patch, .. } = &to_child.writes[0] else { panic!() };
        assert_eq!(patch, &json!({"schedule": null, "depends_on": ["left"]}));
    }
}
