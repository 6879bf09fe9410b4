//! The process's metrics: every [`Record`] a component observes is added to in-process series
//! (served locally at `/metrics` in Prometheus text) and, in Lambda, written to stdout as an EMF
//! line for CloudWatch. One place, so the local counters and the CloudWatch metrics cannot
//! differ.

use crate::emf::{Record, Unit};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex};

/// One series: a metric of one function.
#[derive(Debug, Clone, Default, PartialEq)]
struct Series {
    unit: Option<&'static str>,
    count: u64,
    sum: f64,
    last: f64,
}

/// One metric's unit and its series, by function.
type Family<'a> = (Option<&'static str>, Vec<(&'a str, Series)>);

/// Metrics shown as a gauge (their latest value) rather than a total.
const GAUGES: [&str; 1] = [crate::emf::names::SCHEDULER_MINUTES_BEHIND];

/// The metrics of one process.
#[derive(Debug, Default)]
pub struct Meter {
    /// Write EMF lines to stdout (in Lambda).
    emf: bool,
    series: Mutex<BTreeMap<(&'static str, &'static str), Series>>,
}

impl Meter {
    pub fn new(emf: bool) -> Arc<Self> {
        Arc::new(Meter { emf, series: Mutex::default() })
    }

    /// Adds a record to the series, and writes it as EMF when configured to.
    pub fn observe(&self, record: &Record) {
        if self.emf {
            record.emit();
        }
        // A poisoned lock only means a panic elsewhere; the series are still usable.
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        for (name, unit, values) in record.metrics() {
            let s = series.entry((name, record.function())).or_default();
            s.unit = Some(unit.as_str());
            for v in values {
                s.count += 1;
                s.sum += v;
                s.last = *v;
            }
        }
    }

    /// The series in the Prometheus text format (version 0.0.4): counts as `_total` counters,
    /// durations as summaries (`_sum`, `_count`), the scheduler's lag as a gauge; the function is
    /// the `function` label.
    pub fn prometheus(&self) -> String {
        let series = self.series.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // Every family from the start (a scrape before the first tick names them all), then the
        // series observed.
        let mut by_metric: BTreeMap<&str, Family> = crate::emf::names::ALL
            .iter()
            .map(|(name, unit)| (*name, (Some(unit.as_str()), Vec::new())))
            .collect();
        for ((name, function), s) in series {
            let family = by_metric.entry(name).or_insert((s.unit, Vec::new()));
            family.1.push((function, s));
        }
        let mut out = String::new();
        for (name, (unit, series)) in by_metric {
            let base = format!("sundial_{}", snake(name));
            if GAUGES.contains(&name) {
                let _ = writeln!(out, "# HELP {base} {name} (latest value).\n# TYPE {base} gauge");
                for (function, s) in &series {
                    let _ = writeln!(out, "{base}{{function=\"{function}\"}} {}", s.last);
                }
            } else if unit == Some(Unit::Milliseconds.as_str()) {
                let base = format!("{base}_milliseconds");
                let _ = writeln!(out, "# HELP {base} {name} in milliseconds.\n# TYPE {base} summary");
                for (function, s) in &series {
                    let _ = writeln!(out, "{base}_sum{{function=\"{function}\"}} {}", s.sum);
                    let _ = writeln!(out, "{base}_count{{function=\"{function}\"}} {}", s.count);
                }
            } else {
                let base = format!("{base}_total");
                let _ =
                    writeln!(out, "# HELP {base} {name} since the process started.\n# TYPE {base} counter");
                for (function, s) in &series {
                    let _ = writeln!(out, "{base}{{function=\"{function}\"}} {}", s.sum);
                }
            }
        }
        out
    }
}

/// `RunsClaimed` → `runs_claimed`.
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emf::names;

    #[test]
    fn records_add_up_into_prometheus_series() {
        let meter = Meter::new(false);
        let at = chrono::Utc::now();
        meter.observe(&Record::new("worker", at).count(names::RUNS_SUCCEEDED, 1).values(
            names::DISPATCH_LAG,
            Unit::Milliseconds,
            vec![100.0, 50.0],
        ));
        meter.observe(&Record::new("worker", at).count(names::RUNS_SUCCEEDED, 2));
        meter.observe(&Record::new("watchdog", at).values(
            names::SCHEDULER_MINUTES_BEHIND,
            Unit::Count,
            vec![4.0],
        ));
        meter.observe(&Record::new("watchdog", at).values(
            names::SCHEDULER_MINUTES_BEHIND,
            Unit::Count,
            vec![0.0],
        ));
        let text = meter.prometheus();
        assert!(text.contains("# TYPE sundial_runs_succeeded_total counter\n"), "{text}");
        assert!(text.contains("sundial_runs_succeeded_total{function=\"worker\"} 3\n"), "{text}");
        assert!(text.contains("sundial_dispatch_lag_milliseconds_sum{function=\"worker\"} 150\n"), "{text}");
        assert!(text.contains("sundial_dispatch_lag_milliseconds_count{function=\"worker\"} 2\n"), "{text}");
        assert!(text.contains("sundial_scheduler_minutes_behind{function=\"watchdog\"} 0\n"), "{text}");
    }

    #[test]
    fn every_family_is_named_before_any_value() {
        let text = Meter::new(false).prometheus();
        for (name, unit) in names::ALL {
            let base = format!("sundial_{}", snake(name));
            let family = match (name, unit) {
                (names::SCHEDULER_MINUTES_BEHIND, _) => format!("# TYPE {base} gauge"),
                (_, Unit::Milliseconds) => format!("# TYPE {base}_milliseconds summary"),
                _ => format!("# TYPE {base}_total counter"),
            };
            assert!(text.contains(&family), "{family} missing from:\n{text}");
        }
        assert!(!text.contains("function="), "no series before a value: {text}");
    }

    #[test]
    fn every_component_writes_valid_emf() {
        use sundial_domain::run::{Attempt, Outcome, Run, RunKey, RunState};
        let at: chrono::DateTime<chrono::Utc> = "2026-11-22T10:00:05Z".parse().unwrap();
        let instant: chrono::DateTime<chrono::Utc> = "2026-11-22T10:00:00Z".parse().unwrap();
        let run = Run {
            job_id: sundial_domain::job::JobId::generate(),
            owner: "o".into(),
            key: RunKey::scheduled(instant),
            state: RunState::Succeeded,
            due_at: instant,
            attempt: 1,
            attempts: vec![Attempt {
                n: 1,
                started_at: instant + chrono::Duration::milliseconds(1500),
                finished_at: Some(at),
                worker: "w".into(),
                outcome: Some(Outcome::Succeeded),
                status_code: Some(200),
                error: None,
                output: None,
                callback: None,
                call_until: None,
                handle: None,
                followed_at: None,
                looks: 0,
                look_tag: None,
                logs_url: None,
            }],
            job_version: 1,
            created_at: instant,
            updated_at: at,
            reason: None,
            lease_until: None,
            retry_at: None,
            resent_at: None,
            call_ended: None,
            workflow: None,
            backfill: false,
            input: None,
            expires_at: at,
            events: Vec::new(),
        };
        let records = [
            crate::tick::TickReport::default().metrics(at, std::time::Duration::from_millis(120)).to_json(),
            crate::watchdog::WatchdogReport::default().metrics(at).to_json(),
            crate::worker::started_metrics(&run, at).to_json(),
            crate::worker::ended_metrics(&run, at).to_json(),
        ];
        for record in &records {
            crate::emf::validate(record).unwrap_or_else(|e| panic!("{e}: {record}"));
        }
        assert_eq!(records[2][names::DISPATCH_LAG], 1500.0);
        assert_eq!(records[3][names::RUN_DURATION], 3500.0);
        assert_eq!(records[3][names::RUNS_SUCCEEDED], 1.0);
        assert_eq!(records[1]["_aws"]["CloudWatchMetrics"][0]["Namespace"], crate::emf::NAMESPACE);
    }
}
