//! docs/config.md against the schema: every key, and every default.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

/// Keys whose values are free-form data, not schema.
const OPAQUE: [&str; 2] = ["tools.fallback_response", "tools.input_schema"];

/// Tables whose keys are names the user chooses (header names): documented once, as `NAME`.
const NAMED: [&str; 3] = [
    "tools.upstream.headers",
    "mcp_servers.headers",
    "mcp_servers.tools",
];

/// Every (table path, key) in a TOML value; array indexes dropped (`tools.retry`, `max_attempts`), the keys of a
/// `NAMED` table replaced by `NAME` (`tools.upstream.headers.NAME`, `env`).
fn key_paths(table: &toml::Table, path: &str, out: &mut BTreeSet<(String, String)>) {
    if NAMED.contains(&path) {
        for value in table.values() {
            if let toml::Value::Table(t) = value {
                key_paths(t, &format!("{path}.NAME"), out);
            }
        }
        return;
    }
    for (key, value) in table {
        out.insert((path.to_owned(), key.clone()));
        let child = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        if OPAQUE.contains(&child.as_str()) {
            continue;
        }
        match value {
            toml::Value::Table(t) => key_paths(t, &child, out),
            toml::Value::Array(items) => {
                for item in items {
                    if let toml::Value::Table(t) = item {
                        key_paths(t, &child, out);
                    }
                }
            }
            _ => {}
        }
    }
}

fn to_table(raw: &RawConfig) -> toml::Table {
    toml::Table::try_from(raw).unwrap()
}

/// docs/config.md's tables: section (table path) -> key -> its "default" cell. A section's paths are the
/// backticked words of its heading, brackets dropped; "Top-level keys" is the root.
fn documented() -> BTreeMap<String, BTreeMap<String, String>> {
    let mut sections: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut current: Vec<String> = Vec::new();
    for line in DOCS.lines() {
        if line.starts_with('#') {
            current = line
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|w| w.trim_matches(['[', ']']).to_owned())
                .collect();
            if line.contains("Top-level keys") {
                current = vec![String::new()];
            }
        } else if line.starts_with("| `") {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let key = cells[1].trim_matches('`').to_owned();
            for section in &current {
                sections
                    .entry(section.clone())
                    .or_default()
                    .insert(key.clone(), cells[3].to_owned());
            }
        }
    }
    sections
}

#[test]
fn every_key_is_documented_and_every_documented_key_exists() {
    let mut keys = BTreeSet::new();
    key_paths(&to_table(&fully_populated()), "", &mut keys);
    let docs = documented();
    let undocumented: Vec<_> = keys
        .iter()
        .filter(|(table, key)| !docs.get(table).is_some_and(|section| section.contains_key(key)))
        .collect();
    assert!(
        undocumented.is_empty(),
        "keys missing from docs/config.md: {undocumented:?}"
    );
    let stale: Vec<_> = docs
        .iter()
        .flat_map(|(table, section)| section.keys().map(move |key| (table.clone(), key.clone())))
        .filter(|entry| !keys.contains(entry))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/config.md documents keys that do not exist: {stale:?}"
    );
    assert!(keys.len() > 60, "the walk found only {} keys", keys.len());
}

/// The first value of `key` in any table at `path` (arrays searched entry by entry).
fn find<'a>(table: &'a toml::Table, path: &[&str], key: &str) -> Option<&'a toml::Value> {
    let Some((first, rest)) = path.split_first() else {
        return table.get(key);
    };
    match table.get(*first)? {
        toml::Value::Table(t) => find(t, rest, key),
        toml::Value::Array(items) => items.iter().find_map(|item| match item {
            toml::Value::Table(t) => find(t, rest, key),
            _ => None,
        }),
        _ => None,
    }
}

fn same_default(documented: &toml::Value, actual: &toml::Value) -> bool {
    use toml::Value::{Float, Integer, String};
    match (documented, actual) {
        (String(a), String(b)) => {
            a == b
                || matches!((parse_duration(a), parse_duration(b)), (Ok(x), Ok(y)) if x == y)
                || matches!((parse_size(a), parse_size(b)), (Ok(x), Ok(y)) if x == y)
        }
        (Integer(a), Float(b)) | (Float(b), Integer(a)) => *a as f64 == *b,
        _ => documented == actual,
    }
}

#[test]
fn documented_defaults_are_the_defaults() {
    let minimal = "version = 1\n[[principals]]\nname = \"p\"\nkey_env = \"K\"\n[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"http://h/v1\" } ]\n\
                   [[models]]\nname = \"n\"\ndeployments = [ { base_url = \"http://h/v1\", limits = { requests_per_minute = 10 } } ]\n\
                   budget = { kind = \"token_bucket\" }\n\
                   [[tools]]\nname = \"t\"\nupstream = { url = \"http://h/t\" }\n\
                   [[tools]]\nname = \"u\"\nside_effects = true\nupstream = { url = \"http://h/u\" }\ndefer = {}\n\
                   budget = { kind = \"token_bucket\" }\n\
                   [[mcp_servers]]\nname = \"r\"\nurl = \"http://h/mcp\"\n\
                   [[mcp_servers]]\nname = \"s\"\nurl = \"http://h/mcp\"\n\
                   budget = { kind = \"token_bucket\" }\n\
                   [telemetry]\nendpoint = \"http://h:4318\"\n";
    let defaults = to_table(&RawConfig::from(&Config::from_toml_str(minimal).unwrap()));
    let mut compared = 0;
    for (section, keys) in documented() {
        let path: Vec<&str> = section.split('.').filter(|s| !s.is_empty()).collect();
        for (key, cell) in keys {
            let Some(literal) = cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
                continue;
            };
            let parsed: toml::Table = toml::from_str(&format!("v = {literal}"))
                .unwrap_or_else(|e| panic!("{section}.{key}: default cell {cell} is not a TOML value: {e}"));
            let actual =
                find(&defaults, &path, &key).unwrap_or_else(|| panic!("{section}.{key}: no default in code"));
            assert!(
                same_default(&parsed["v"], actual),
                "{section}.{key}: documented {literal}, code {actual}"
            );
            compared += 1;
        }
    }
    assert!(compared >= 35, "only {compared} defaults compared");
}
