//! Where a run's logs are. Every log line written while handling a run carries its `run_id` as a
//! structured field (of the worker's and the watchdog's spans, or of the line itself), so finding
//! them is one filter on that field: a CloudWatch Logs Insights query over the functions' log
//! groups in AWS, or the matching lines of the local runtime's log file. A line that merely
//! *contains* the id (a target's error body, another tenant's URL) is not the run's.

use serde::Serialize;
use std::io::BufRead;
use std::path::PathBuf;
use utoipa::ToSchema;

/// Where this deployment's logs go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogLocation {
    /// The local runtime's log file (`SUNDIAL_LOCAL_LOG`).
    Local(PathBuf),
    /// CloudWatch Logs: the functions' log groups in a region.
    CloudWatch { region: String, groups: Vec<String> },
    /// Nowhere Sundial can point at.
    Unknown,
}

/// How to find one run's logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct LogsLink {
    /// A CloudWatch Logs Insights query (in AWS) or a description of the filter (locally).
    pub query: String,
    /// The CloudWatch Logs Insights console (in AWS), or the API path that returns the run's
    /// lines of the local log.
    pub url: Option<String>,
    /// The log groups to run the query on (in AWS).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub log_groups: Vec<String>,
}

impl LogLocation {
    /// The local log file if `local` is set; CloudWatch in Lambda; else unknown.
    pub fn new(local: Option<String>, region: Option<String>, in_lambda: bool, stack: &str) -> Self {
        match (local, region) {
            (Some(path), _) => LogLocation::Local(PathBuf::from(path)),
            (None, Some(region)) if in_lambda => LogLocation::CloudWatch {
                region,
                groups: ["worker", "watchdog", "api", "tick"]
                    .iter()
                    .map(|f| format!("/aws/lambda/{stack}-{f}"))
                    .collect(),
            },
            _ => LogLocation::Unknown,
        }
    }

    pub fn link(&self, run_id: &str) -> LogsLink {
        match self {
            LogLocation::Local(_) => LogsLink {
                query: format!("lines of the local log whose run_id is {run_id}"),
                url: Some(format!("/v1/runs/{run_id}/logs")),
                log_groups: Vec::new(),
            },
            LogLocation::CloudWatch { region, groups } => LogsLink {
                query: format!(
                    "fields @timestamp, level, fields.message | filter span.run_id = \"{run_id}\" or fields.run_id = \"{run_id}\" | sort @timestamp asc"
                ),
                url: Some(format!(
                    "https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#logsV2:logs-insights"
                )),
                log_groups: groups.clone(),
            },
            LogLocation::Unknown => LogsLink {
                query: format!("log lines whose run_id is {run_id}"),
                url: None,
                log_groups: Vec::new(),
            },
        }
    }

    /// The lines of the local log whose `run_id` field (of the line, its span or an enclosing
    /// span) is `run_id`, at most `max` (the newest kept).
    pub fn local_lines(&self, run_id: &str, max: usize) -> std::io::Result<Option<Vec<String>>> {
        let LogLocation::Local(path) = self else { return Ok(None) };
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(Vec::new())),
            Err(e) => return Err(e),
        };
        let mut lines = std::collections::VecDeque::new();
        for line in std::io::BufReader::new(file).lines() {
            let line = line?;
            // Most lines do not mention the id at all: only those are parsed.
            if line.contains(run_id) && line_of_run(&line, run_id) {
                if lines.len() == max {
                    lines.pop_front();
                }
                lines.push_back(line);
            }
        }
        Ok(Some(lines.into()))
    }
}

/// Whether the JSON log line `line` was written for `run_id`: its own field, its span's, or an
/// enclosing span's.
fn line_of_run(line: &str, run_id: &str) -> bool {
    let Ok(line) = serde_json::from_str::<serde_json::Value>(line) else { return false };
    let names = |v: &serde_json::Value| v.get("run_id").and_then(serde_json::Value::as_str) == Some(run_id);
    let spans = line.get("spans").and_then(serde_json::Value::as_array);
    line.get("fields").is_some_and(names)
        || line.get("span").is_some_and(names)
        || spans.is_some_and(|spans| spans.iter().any(names))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_point_where_the_logs_are() {
        let aws = LogLocation::new(None, Some("eu-west-1".into()), true, "sundial");
        let link = aws.link("r1");
        assert!(link.query.contains("span.run_id = \"r1\""), "{}", link.query);
        assert_eq!(link.log_groups[0], "/aws/lambda/sundial-worker");
        assert!(link.url.unwrap().starts_with("https://eu-west-1.console.aws.amazon.com/cloudwatch/"));
        let local = LogLocation::new(Some("/tmp/x.log".into()), None, false, "s");
        assert_eq!(local.link("r1").url.as_deref(), Some("/v1/runs/r1/logs"));
        assert_eq!(LogLocation::new(None, Some("r".into()), false, "s"), LogLocation::Unknown);
    }

    /// A run's lines are those whose `run_id` field is the run's: a line of another run whose
    /// message contains the id (a target's error body, another tenant's URL) is not among them.
    #[test]
    fn local_lines_are_those_of_the_run() {
        let path = std::env::temp_dir().join(format!("sundial-logs-{}.log", ulid::Ulid::generate()));
        let lines = [
            r#"{"fields":{"message":"a"},"span":{"run_id":"r1","name":"run"}}"#,
            r#"{"fields":{"message":"b"},"span":{"run_id":"r2","name":"run"}}"#,
            r#"{"fields":{"message":"target said: r1 is mine"},"span":{"run_id":"r2","name":"run"}}"#,
            r#"{"fields":{"message":"http://evil.example/r1"}}"#,
            r#"{"fields":{"message":"c","run_id":"r1"}}"#,
            r#"{"fields":{"message":"d"},"span":{"name":"attempt"},"spans":[{"run_id":"r1","name":"run"}]}"#,
            "not json r1",
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let local = LogLocation::Local(path.clone());
        assert_eq!(local.local_lines("r1", 10).unwrap().unwrap(), [lines[0], lines[4], lines[5]]);
        assert_eq!(local.local_lines("r1", 1).unwrap().unwrap(), [lines[5]]);
        std::fs::remove_file(path).unwrap();
    }
}
