//! The shape of the library, read from its sources and its manifests: within each of its crates
//! no two modules use each other, even through others (`crate::x` paths outside each file's
//! tests), and the domain crate depends on no AWS, HTTP-client, runtime or OpenAPI crate.

#![allow(clippy::expect_used)] // test code: a panic is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's crates, by folder under `shared/`: wiring, domain, use cases, AWS adapters.
const CRATES: &[&str] = &["wiring/src", "domain/src", "app/src", "aws/src"];

/// The folder of the library's crates, `shared/` (this crate is `shared/wiring`).
fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("shared/").to_path_buf()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).expect("the crate's sources are readable").flatten().collect();
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

fn graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(root, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(root, &file) else { continue };
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
fn no_module_cycles_in_any_crate() {
    let shared = shared();
    for folder in CRATES {
        let graph = graph(&shared.join(folder));
        assert!(graph.len() >= 4, "the sources of {folder} were not found: {graph:?}");
        let found = cycles(&graph);
        assert!(found.is_empty(), "modules of shared/{folder} use each other: {found:?}");
    }
}

/// The crates the domain may not depend on: AWS, HTTP clients and servers, async runtimes,
/// OpenAPI (which only its optional `openapi` feature brings in).
const NOT_IN_THE_DOMAIN: &[&str] =
    &["aws-", "aws_", "reqwest", "hyper", "tokio", "utoipa", "lambda_", "axum", "tracing"];

#[test]
fn the_domain_depends_on_no_aws_http_runtime_or_openapi_crate() {
    let manifest = shared().join("domain/Cargo.toml");
    // Everything the domain builds with, by default features, as `cargo tree` resolves it.
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--edges", "normal", "--prefix", "none", "--format", "{p}"])
        .arg("--manifest-path")
        .arg(&manifest)
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    let tree = String::from_utf8_lossy(&out.stdout);
    let crates: BTreeSet<&str> = tree.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(crates.contains("sundial-domain") && crates.contains("chrono"), "{tree}");
    let banned: Vec<&&str> =
        crates.iter().filter(|c| NOT_IN_THE_DOMAIN.iter().any(|b| c.starts_with(b))).collect();
    assert!(banned.is_empty(), "the domain depends on {banned:?}:\n{tree}");
}

/// The files the folder map of `docs/architecture.md` lists: its `text` block, where a line
/// ending in `/` opens a folder (by its indent) and `name.rs` names a file of the open folder.
fn mapped_files(doc: &str) -> BTreeSet<String> {
    let block = doc.split("```text").nth(1).and_then(|rest| rest.split("```").next()).unwrap_or_default();
    let mut folders: Vec<(usize, String)> = Vec::new();
    let mut files = BTreeSet::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let indent = line.len() - line.trim_start().len();
        let name = line.split_whitespace().next().unwrap_or_default();
        folders.retain(|(depth, _)| *depth < indent);
        let parent = folders.last().map(|(_, path)| path.clone()).unwrap_or_default();
        if let Some(folder) = name.strip_suffix('/') {
            folders.push((indent, format!("{parent}{folder}/")));
        } else if name.ends_with(".rs") {
            files.insert(format!("{parent}{name}"));
        }
    }
    files
}

/// The `(crate, folder)` rows of the crate table of `docs/architecture.md`: its rows whose first
/// two cells are code.
fn crate_table(doc: &str) -> BTreeSet<(String, String)> {
    doc.lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let code = |cell: &str| cell.strip_prefix('`')?.strip_suffix('`').map(str::to_string);
            Some((code(cells.get(1)?)?, code(cells.get(2)?)?))
        })
        .collect()
}

/// Every library crate is named for what it is, and the table in the docs says so: each folder
/// under `shared/` holds the crate the table names for it, and no other crate is there.
#[test]
fn each_library_crate_is_the_one_the_docs_name_for_its_folder() {
    let shared = shared();
    let doc = std::fs::read_to_string(shared.join("../docs/architecture.md")).expect("docs/architecture.md");
    let mut actual = BTreeSet::new();
    for entry in std::fs::read_dir(&shared).expect("shared/ is readable").flatten() {
        let Ok(manifest) = std::fs::read_to_string(entry.path().join("Cargo.toml")) else { continue };
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \"").and_then(|rest| rest.strip_suffix('"')))
            .expect("a package name");
        actual.insert((name.to_string(), format!("shared/{}", entry.file_name().to_string_lossy())));
    }
    let expected: BTreeSet<(String, String)> = [
        ("sundial-domain", "shared/domain"),
        ("sundial-app", "shared/app"),
        ("sundial-aws", "shared/aws"),
        ("sundial-memory", "shared/memory"),
        ("sundial-wiring", "shared/wiring"),
    ]
    .iter()
    .map(|(name, folder)| (name.to_string(), folder.to_string()))
    .collect();
    assert_eq!(actual, expected, "the library's crates and their folders");
    assert_eq!(crate_table(&doc), expected, "the crate table of docs/architecture.md");
}

#[test]
fn the_folder_map_in_docs_matches_the_tree() {
    let shared = shared();
    let doc = std::fs::read_to_string(shared.join("../docs/architecture.md")).expect("docs/architecture.md");
    let mut actual = BTreeSet::new();
    for folder in CRATES.iter().chain(&["memory/src"]) {
        let mut files = Vec::new();
        sources(&shared.join(folder), &mut files);
        for file in files {
            let relative = file.strip_prefix(shared.parent().expect("the repository")).expect("under it");
            actual.insert(relative.to_string_lossy().replace('\\', "/"));
        }
    }
    let mapped = mapped_files(&doc);
    let missing: Vec<_> = actual.difference(&mapped).collect();
    let stale: Vec<_> = mapped.difference(&actual).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "map the new files {missing:?}; strike the gone {stale:?}"
    );
}

#[test]
fn the_map_reader_follows_folders_by_indent() {
    let doc = "x\n```text\nshared/a/src/\n  lib.rs   map\n  run/\n    mod.rs  r\n  job.rs  j\nshared/wiring/src/\n  lib.rs\n```\n";
    let expected: BTreeSet<String> =
        ["shared/a/src/lib.rs", "shared/a/src/run/mod.rs", "shared/a/src/job.rs", "shared/wiring/src/lib.rs"]
            .into_iter()
            .map(str::to_string)
            .collect();
    assert_eq!(mapped_files(doc), expected);
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
