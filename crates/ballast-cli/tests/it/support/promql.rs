//! What the shipped alert rules and Grafana dashboard may name: the metrics the gateway exports, read from its
//! code, and the metrics and labels a PromQL expression names, read by a small tokenizer (no PromQL parser).
//!
//! The exported set comes from the source, not a hand list: every `counter!`, `gauge!`, `histogram!` and
//! `describe_*!` call in `crates/ballast/src` and `crates/ballast-gateway/src`, its first string literal the
//! name and each string literal before a `=>` a label. A live `/metrics` page cross-checks it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Labels every scraped series has, added by Prometheus from its scrape configuration.
const SCRAPE_LABELS: [&str; 2] = ["instance", "job"];

/// A metric the code emits: its labels, and whether it is a histogram (exported as `_bucket`, `_sum`,
/// `_count`).
#[derive(Debug, Default)]
pub(crate) struct Exported {
    pub(crate) labels: BTreeSet<String>,
    pub(crate) histogram: bool,
}

/// Every metric emitted by the `.rs` files under `dirs`, by name.
pub(crate) fn exported(dirs: &[&Path]) -> BTreeMap<String, Exported> {
    let mut metrics = BTreeMap::new();
    let mut files = Vec::new();
    for dir in dirs {
        rust_files(dir, &mut files);
    }
    for file in files {
        let source = std::fs::read_to_string(&file).expect("a source file");
        for (kind, args) in macro_calls(&source) {
            let literals = literals(args);
            let Some((name, _)) = literals.first() else {
                continue;
            };
            if !name.starts_with("ballast_") {
                continue;
            }
            let metric: &mut Exported = metrics.entry(name.clone()).or_default();
            metric.histogram |= kind == "histogram";
            let labels = literals.iter().skip(1).filter(|(_, is_key)| *is_key);
            metric.labels.extend(labels.map(|(label, _)| label.clone()));
        }
    }
    metrics
}

fn rust_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The arguments of each `counter!(..)`, `gauge!(..)`, `histogram!(..)` (and `describe_*!`), with its kind.
fn macro_calls(source: &str) -> Vec<(&'static str, &str)> {
    let mut calls = Vec::new();
    for (at, _) in source.match_indices("!(") {
        let Some(kind) = ["counter", "gauge", "histogram"]
            .into_iter()
            .find(|kind| source[..at].ends_with(kind))
        else {
            continue;
        };
        let mut depth = 0;
        let args = &source[at + 2..];
        let end = args.char_indices().find_map(|(i, c)| match c {
            '(' => {
                depth += 1;
                None
            }
            ')' if depth == 0 => Some(i),
            ')' => {
                depth -= 1;
                None
            }
            _ => None,
        });
        calls.push((kind, &args[..end.unwrap_or(args.len())]));
    }
    calls
}

/// The string literals of `code`, each with whether a `=>` follows it (a label's name).
fn literals(code: &str) -> Vec<(String, bool)> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let end = after.find('"').unwrap_or(after.len());
        let is_key = after[(end + 1).min(after.len())..].trim_start().starts_with("=>");
        found.push((after[..end].to_owned(), is_key));
        rest = &after[(end + 1).min(after.len())..];
    }
    found
}

/// What is wrong with `expr` against `exported`: each metric it names that is not exported, each label it
/// selects on a metric that does not have it, each label it groups or matches by that none of its metrics has.
/// Grafana's variables (`$__rate_interval`, `$target`) are skipped.
pub(crate) fn problems(expr: &str, exported: &BTreeMap<String, Exported>) -> Vec<String> {
    let tokens = tokens(expr);
    let mut problems = Vec::new();
    let mut names: Vec<(&Exported, bool)> = Vec::new();
    let mut grouped = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i].as_str();
        let next = tokens.get(i + 1).map(String::as_str);
        if token.starts_with("ballast_") {
            let current = resolve(token, exported);
            match current {
                Some((metric, bucket)) => names.push((metric, bucket)),
                None => problems.push(format!("{token} is not a metric the gateway exports")),
            }
            if next == Some("{") {
                i += 2;
                while i < tokens.len() && tokens[i] != "}" {
                    let is_label = tokens
                        .get(i + 1)
                        .is_some_and(|op| ["=", "!=", "=~", "!~"].contains(&op.as_str()));
                    if is_label && let Some((metric, bucket)) = current {
                        let label = &tokens[i];
                        if !has_label(metric, bucket, label) {
                            problems.push(format!("{token} has no label {label}"));
                        }
                    }
                    i += 1;
                }
            }
        } else if ["by", "without", "on", "ignoring", "group_left", "group_right"].contains(&token)
            && next == Some("(")
        {
            i += 2;
            while i < tokens.len() && tokens[i] != ")" {
                if tokens[i] != "," {
                    grouped.push(tokens[i].clone());
                }
                i += 1;
            }
        }
        i += 1;
    }
    for label in grouped {
        if !names
            .iter()
            .any(|(metric, bucket)| has_label(metric, *bucket, &label))
        {
            problems.push(format!(
                "no metric of the expression has the label {label} it groups by"
            ));
        }
    }
    problems
}

/// The exported metric a series name belongs to (a histogram's `_bucket`, `_sum`, `_count` its own), and
/// whether it is a bucket series (which has `le`).
fn resolve<'a>(name: &str, exported: &'a BTreeMap<String, Exported>) -> Option<(&'a Exported, bool)> {
    if let Some(metric) = exported.get(name) {
        return (!metric.histogram).then_some((metric, false));
    }
    ["_bucket", "_sum", "_count"].into_iter().find_map(|suffix| {
        let metric = exported.get(name.strip_suffix(suffix)?)?;
        metric.histogram.then_some((metric, suffix == "_bucket"))
    })
}

fn has_label(metric: &Exported, bucket: bool, label: &str) -> bool {
    metric.labels.contains(label) || SCRAPE_LABELS.contains(&label) || (bucket && label == "le")
}

/// `expr` as identifiers, strings (kept quoted), numbers and durations, operators and brackets; Grafana's
/// `$variables` dropped.
fn tokens(expr: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':' || c == '.';
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
            continue;
        } else if c == '"' || c == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '$' {
            i += 1;
            while i < chars.len() && word(chars[i]) {
                i += 1;
            }
            continue;
        } else if word(c) {
            while i < chars.len() && word(chars[i]) {
                i += 1;
            }
        } else if i + 1 < chars.len()
            && ["!=", "=~", "!~", "==", ">=", "<="].contains(&&*format!("{c}{}", chars[i + 1]))
        {
            i += 2;
        } else {
            i += 1;
        }
        tokens.push(chars[start..i.min(chars.len())].iter().collect());
    }
    tokens
}

/// One label matcher of an expression: `metric{label op "value"}`.
#[derive(Debug)]
pub(crate) struct Matcher {
    pub(crate) metric: String,
    pub(crate) label: String,
    pub(crate) op: String,
    /// Unquoted.
    pub(crate) value: String,
}

/// Every label matcher `expr` puts on a metric of Ballast's.
pub(crate) fn matchers(expr: &str) -> Vec<Matcher> {
    let tokens = tokens(expr);
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i].starts_with("ballast_") && tokens.get(i + 1).is_some_and(|t| t == "{") {
            let metric = tokens[i].clone();
            i += 2;
            while i + 2 < tokens.len() && tokens[i] != "}" {
                if ["=", "!=", "=~", "!~"].contains(&tokens[i + 1].as_str()) {
                    found.push(Matcher {
                        metric: metric.clone(),
                        label: tokens[i].clone(),
                        op: tokens[i + 1].clone(),
                        value: tokens[i + 2].trim_matches(['"', '\'']).to_owned(),
                    });
                    i += 3;
                } else {
                    i += 1;
                }
            }
        }
        i += 1;
    }
    found
}

/// The label values of each metric and label in a `/metrics` page's series (`name{label="value",...}`).
pub(crate) fn label_values<'a>(
    series: impl Iterator<Item = &'a str>,
) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut values: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for one in series {
        let Some((name, mut rest)) = one.split_once('{') else {
            continue;
        };
        while let Some((label, after)) = rest.split_once("=\"") {
            let mut end = 0;
            let bytes = after.as_bytes();
            while end < bytes.len() && bytes[end] != b'"' {
                end += if bytes[end] == b'\\' { 2 } else { 1 };
            }
            let label = label.trim_start_matches(',');
            values
                .entry((name.to_owned(), label.to_owned()))
                .or_default()
                .insert(after[..end.min(after.len())].to_owned());
            rest = after.get(end + 1..).unwrap_or("");
        }
    }
    values
}
