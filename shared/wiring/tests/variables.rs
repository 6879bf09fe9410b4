//! The variables are declared once (`sundial_wiring::variables`): the README's configuration
//! table says what the declaration says, and the configuration reads exactly the declared
//! variables of the functions.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use sundial_wiring::config::{Config, Vars};
use sundial_wiring::variables::{Scope, VARIABLES, declared};

/// The rows of the README's configuration table: each `SUNDIAL_` name with its default and
/// meaning (a row may name several variables).
fn readme_rows() -> BTreeMap<String, (String, String)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(path).expect("the README is readable");
    let section = readme.split("## Configuration").nth(1).expect("a Configuration section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `SUNDIAL_") || l.starts_with("| `OTEL_")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(cells.len(), 3, "a row of three cells: {line}");
        for name in cells[0].split(", ") {
            let name = name.trim_matches('`').to_string();
            rows.insert(name, (cells[1].to_string(), cells[2].to_string()));
        }
    }
    rows
}

#[test]
fn the_readme_table_is_the_declaration() {
    let rows = readme_rows();
    for (name, (default, meaning)) in &rows {
        let variable =
            declared(name).unwrap_or_else(|| panic!("the README lists {name}, which is not declared"));
        assert_eq!((variable.default, variable.meaning), (default.as_str(), meaning.as_str()), "{name}");
    }
    for variable in VARIABLES.iter().filter(|v| v.scope != Scope::Cli) {
        assert!(
            rows.contains_key(variable.name),
            "{} is declared but not in the README's table",
            variable.name
        );
    }
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    for variable in VARIABLES.iter().filter(|v| v.scope == Scope::Cli) {
        assert!(readme.contains(variable.name), "the CLI's {} is not in the README", variable.name);
    }
}

/// Variables that answer nothing, and remember what was asked.
#[derive(Default)]
struct Asked {
    given: HashMap<&'static str, &'static str>,
    names: Mutex<BTreeSet<String>>,
}

impl Vars for Asked {
    fn var(&self, name: &str) -> Option<String> {
        self.names.lock().unwrap().insert(name.to_string());
        self.given.get(name).map(|v| v.to_string())
    }
}

#[test]
fn the_configuration_reads_exactly_the_declared_variables() {
    let given = HashMap::from([
        ("SUNDIAL_JOBS_TABLE", "j"),
        ("SUNDIAL_RUNS_TABLE", "r"),
        ("SUNDIAL_IDEMPOTENCY_TABLE", "i"),
        ("SUNDIAL_RUNS_QUEUE_URL", "q"),
        ("SUNDIAL_DLQ_URL", "d"),
        ("SUNDIAL_EVENTS_TOPIC_ARN", "t"),
    ]);
    let vars = Asked { given, ..Asked::default() };
    Config::from_vars(&vars, None).expect("configured");
    let asked: BTreeSet<String> = vars
        .names
        .into_inner()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("SUNDIAL_") || n.starts_with("OTEL_"))
        .collect();
    for name in &asked {
        let variable =
            declared(name).unwrap_or_else(|| panic!("the configuration reads {name}, which is not declared"));
        assert!(matches!(variable.scope, Scope::Functions | Scope::Api), "{name} is read by the functions");
    }
    for variable in VARIABLES.iter().filter(|v| matches!(v.scope, Scope::Functions | Scope::Api)) {
        assert!(
            asked.contains(variable.name),
            "{} is declared for the functions but never read",
            variable.name
        );
    }
}
