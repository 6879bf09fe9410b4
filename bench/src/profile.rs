//! Where Sundial's CPU goes: `scripts/bench` records a burst of 1,000 runs through the
//! whole pipeline with `perf record` and hands the flat report (`perf report --no-children
//! --sort symbol`, self time per symbol, user space only) to [`summarise`], which sorts the
//! symbols into parts: signing, the SDK's request pipeline, serialisation, HTTP, memory, the
//! async runtime, logging, Sundial's own code and the kernel.

use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Parts of the work and the symbol fragments that place a symbol in one, first match wins;
/// kernel symbols (`[k]`) are a part of their own.
const PARTS: &[(&str, &[&str])] = &[
    (
        "signing (SigV4: canonical request, HMAC-SHA256)",
        &["aws_sigv4", "sha2", "hmac", "SigV4", "sha256", "ring::", "aws_lc"],
    ),
    (
        "AWS SDK request pipeline (orchestrator, config bag, interceptors, endpoints)",
        &[
            "aws_smithy_runtime",
            "config_bag",
            "type_erasure",
            "aws_runtime",
            "aws_sdk_",
            "aws_smithy_http",
            "aws_endpoint",
            "aws_types",
        ],
    ),
    (
        "serialisation (JSON, DynamoDB attribute maps)",
        &["serde", "aws_smithy_json", "protocol_serde", "from_item", "to_item", "item::"],
    ),
    (
        "HTTP (hyper, headers, bodies)",
        &["hyper", "http::", "h2::", "httparse", "bytes::", "reqwest", "tower"],
    ),
    (
        "memory (allocation, copies)",
        &[
            "malloc",
            "free",
            "memcpy",
            "memmove",
            "realloc",
            "alloc::",
            "_int_",
            "unlink_chunk",
            "memcmp",
            "memset",
        ],
    ),
    (
        "async runtime (tokio, clocks, epoll)",
        &["tokio::", "futures", "epoll", "clock_gettime", "syscall", "mio::"],
    ),
    ("logging (tracing)", &["tracing"]),
    ("Sundial's own code", &["sundial"]),
];

/// The part of kernel samples.
const KERNEL: &str = "kernel (scheduling, loopback TCP)";

/// Sorts a flat `perf report` into parts.
pub fn summarise(report: &str) -> Value {
    let mut parts: BTreeMap<&str, f64> = BTreeMap::new();
    let mut top = Vec::new();
    let mut samples = 0u64;
    for line in report.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("# Samples: ") {
            samples = parse_count(rest.split_whitespace().next().unwrap_or("0"));
            continue;
        }
        let Some((percent, symbol)) = line.split_once('%') else { continue };
        let Ok(percent) = percent.trim().parse::<f64>() else { continue };
        let symbol = symbol.trim();
        let part = match symbol.strip_prefix("[k]") {
            Some(_) => KERNEL,
            None => PARTS
                .iter()
                .find(|(_, fragments)| fragments.iter().any(|f| symbol.contains(f)))
                .map(|(name, _)| *name)
                .unwrap_or("other"),
        };
        let symbol = symbol.trim_start_matches("[.]").trim_start_matches("[k]").trim();
        *parts.entry(part).or_default() += percent;
        if top.len() < 25 {
            top.push(json!({"symbol": symbol, "percent": percent, "part": part}));
        }
    }
    let mut categories: Vec<(&str, f64)> = parts.into_iter().collect();
    categories.sort_by(|a, b| b.1.total_cmp(&a.1));
    json!({
        "samples": samples,
        "method": "perf record (user space, self time per symbol) of the `profile` scenario; symbol names sorted into parts",
        "categories": categories.iter().map(|(c, p)| json!({"category": c, "percent": p})).collect::<Vec<_>>(),
        "top_symbols": top,
    })
}

/// `12K` or `1234` as a number.
fn parse_count(text: &str) -> u64 {
    let (digits, scale) = match text.chars().last() {
        Some('K') => (&text[..text.len() - 1], 1_000.0),
        Some('M') => (&text[..text.len() - 1], 1_000_000.0),
        _ => (text, 1.0),
    };
    (digits.parse::<f64>().unwrap_or(0.0) * scale) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_are_sorted_into_parts() {
        let report = "# Samples: 12K of event 'cpu-clock:u'\n\
                      #\n\
                      30.00%  [.] sha2::sha256::soft::compress\n\
                      20.00%  [.] serde_json::de::Deserializer::parse\n\
                      10.00%  [.] tracing_subscriber::fmt::format::json\n\
                      5.00%  [.] something_else\n\
                      4.00%  [k] finish_task_switch\n";
        let summary = summarise(report);
        assert_eq!(summary["samples"], 12_000);
        let categories = summary["categories"].as_array().cloned().unwrap_or_default();
        assert_eq!(categories[0]["category"], PARTS[0].0);
        assert_eq!(categories[0]["percent"], 30.0);
        assert!(categories.iter().any(|c| c["category"] == "other" && c["percent"] == 5.0));
        assert!(categories.iter().any(|c| c["category"] == KERNEL && c["percent"] == 4.0));
    }
}
