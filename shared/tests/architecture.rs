//! The shape of `shared`, read from its sources: which top-level modules use which (`crate::x`
//! paths outside each file's tests), and the cycles among them.
//!
//! A ratchet: the cycles that remain are listed here and may only go. A new cycle, or a listed
//! one that is gone but still listed, fails the test, so the list always says what is true.

#![allow(clippy::expect_used)] // test code: a panic is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Cycles between top-level modules still to break, each as its sorted members.
const KNOWN_CYCLES: &[&[&str]] = &[&["events", "run", "store"]];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).expect("shared/src is readable").flatten().collect();
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to: `tick/claim.rs` → `tick`, `jobs.rs` → `jobs`.
fn module_of(root: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(root).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then(|| name.to_string())
}

/// The modules `text` names as `crate::<module>`, outside comments and the file's tests.
fn uses(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut found = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for (at, _) in line.match_indices("crate::") {
            let name: String = line[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(&root, &file) else { continue };
        let text = std::fs::read_to_string(&file).expect("a source file is readable");
        let edges = graph.entry(module.clone()).or_default();
        edges.extend(uses(&text).into_iter().filter(|used| *used != module));
    }
    graph
}

/// The strongly connected components with more than one module (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: BTreeSet<Vec<String>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, node: &'a str) {
        let n = walk.index.len();
        walk.index.insert(node, n);
        walk.low.insert(node, n);
        walk.stack.push(node);
        for next in walk.graph.get(node).into_iter().flatten() {
            let next = next.as_str();
            if !walk.graph.contains_key(next) {
                continue;
            }
            if !walk.index.contains_key(next) {
                visit(walk, next);
                let low = walk.low[next].min(walk.low[node]);
                walk.low.insert(node, low);
            } else if walk.stack.contains(&next) {
                let low = walk.index[next].min(walk.low[node]);
                walk.low.insert(node, low);
            }
        }
        if walk.low[node] == walk.index[node] {
            let mut component = Vec::new();
            while let Some(member) = walk.stack.pop() {
                component.push(member.to_string());
                if member == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                walk.found.insert(component);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: BTreeSet::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            visit(&mut walk, node);
        }
    }
    walk.found
}

#[test]
fn module_cycles_only_shrink() {
    let graph = graph();
    assert!(graph.len() > 20, "the sources were not found: {graph:?}");
    let found = cycles(&graph);
    let known: BTreeSet<Vec<String>> =
        KNOWN_CYCLES.iter().map(|c| c.iter().map(|m| m.to_string()).collect()).collect();
    assert_eq!(
        found, known,
        "cycles between shared's modules changed: break a new one, or strike one that is gone from \
         KNOWN_CYCLES"
    );
}

#[test]
fn the_reader_finds_edges_and_cycles() {
    let text = "use crate::a::B;\n// crate::commented\nfn f() { crate::c::d(); }\n#[cfg(test)]\nmod tests { use crate::e; }";
    assert_eq!(uses(text), BTreeSet::from(["a".to_string(), "c".to_string()]));
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["a", "c"]),
        ("c", vec![]),
        ("d", vec!["e"]),
        ("e", vec!["f"]),
        ("f", vec!["d"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
    .collect();
    let expected: BTreeSet<Vec<String>> = [vec!["a", "b"], vec!["d", "e", "f"]]
        .into_iter()
        .map(|c| c.into_iter().map(str::to_string).collect())
        .collect();
    assert_eq!(cycles(&graph), expected);
}
