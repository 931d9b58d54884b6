//! docs/config.md and examples/ballast.toml kept in step with the code, and round trips.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ballast_core::{Priority, UpstreamIdempotency};

use crate::*;

const DOCS: &str = include_str!("../../../docs/config.md");
const EXAMPLE: &str = include_str!("../../../examples/ballast.toml");

fn text(s: &str) -> Option<HumanValue> {
    Some(HumanValue::from(s))
}

fn retry() -> Option<RawRetry> {
    Some(RawRetry {
        max_attempts: Some(2),
        base: text("50ms"),
        cap: text("1s"),
        jitter: Some("decorrelated".into()),
    })
}

fn breaker() -> Option<RawBreaker> {
    Some(RawBreaker {
        consecutive_failures: Some(4),
        failure_rate: Some(0.4),
        window: text("20s"),
        min_calls: Some(10),
        slow_call: text("2s"),
        open_for: text("15s"),
        open_jitter: Some(0.2),
        half_open_probes: Some(4),
        success_threshold: Some(2),
    })
}

/// Every field of every raw struct set. Struct literals without `..`: a field added to a raw struct does not
/// compile until it is added here, and then the tests below ask for its documentation.
fn fully_populated() -> RawConfig {
    let tool = |name: &str, budget: RawBudget, fallback_tool: Option<String>, fallback_response| RawTool {
        name: Some(name.into()),
        upstream: Some(RawUpstream {
            method: Some("PUT".into()),
            url: Some(format!("http://127.0.0.1:9000/{name}")),
        }),
        side_effects: Some(true),
        upstream_idempotency: Some("keyed".into()),
        priority: Some("sheddable_plus".into()),
        per_try_timeout: text("1.5s"),
        retry: retry(),
        budget: Some(budget),
        breaker: breaker(),
        concurrency: Some(8),
        queue: Some(16),
        fallback_tool,
        fallback_response,
    };
    RawConfig {
        version: 1,
        server: RawServer {
            listen: Some("0.0.0.0:9090".into()),
            default_timeout: text("20s"),
            max_timeout: text("1m"),
            reserve: text("20ms"),
            min_attempt: text("30ms"),
            body_limit: text("1MiB"),
            grace: text("5s"),
            max_retry_after: text("30s"),
        },
        principals: vec![
            RawPrincipal {
                name: Some("a".into()),
                key_env: Some("KEY_A".into()),
                key_hash_env: None,
            },
            RawPrincipal {
                name: Some("b".into()),
                key_env: None,
                key_hash_env: Some("KEY_B_SHA256".into()),
            },
        ],
        // `url` and `url_env` exclude each other; both are set here only so that both keys are seen.
        store: RawStore {
            url: Some("sqlite::memory:".into()),
            url_env: Some("STORE_URL".into()),
            retention: text("1h"),
        },
        run: RawRun {
            retry_allowance: Some(5),
            ttl: text("15m"),
        },
        models: vec![
            RawModel {
                name: Some("gpt-4.1".into()),
                deployments: vec![
                    RawDeployment {
                        base_url: Some("https://api.openai.com/v1".into()),
                        model: Some("gpt-4.1".into()),
                        api_key_env: Some("OPENAI_API_KEY".into()),
                        per_try_timeout: text("10s"),
                    },
                    RawDeployment {
                        base_url: Some("http://127.0.0.1:9000/v1".into()),
                        model: Some("mock".into()),
                        ..Default::default()
                    },
                ],
                per_try_timeout: text("12s"),
                primary_share: Some(0.7),
                retry: retry(),
                budget: Some(RawBudget::Ratio {
                    ratio: Some(0.1),
                    min_per_sec: Some(5),
                    window: text("30s"),
                }),
                breaker: breaker(),
                context: Some(RawContext {
                    on_overflow: Some("fallback".into()),
                }),
            },
            RawModel {
                name: Some("small".into()),
                deployments: vec![RawDeployment {
                    base_url: Some("http://127.0.0.1:9001/v1".into()),
                    ..Default::default()
                }],
                budget: Some(RawBudget::TokenBucket {
                    capacity: Some(20),
                    refill_per_sec: Some(2.0),
                }),
                ..Default::default()
            },
        ],
        tools: vec![
            tool(
                "refund",
                RawBudget::TokenBucket {
                    capacity: Some(5),
                    refill_per_sec: Some(0.5),
                },
                Some("refund_later".into()),
                None,
            ),
            tool(
                "refund_later",
                RawBudget::Ratio {
                    ratio: Some(0.3),
                    min_per_sec: Some(1),
                    window: text("5s"),
                },
                None,
                Some(toml::Value::Table(toml::toml! { queued = true })),
            ),
        ],
    }
}

/// Keys whose values are free-form data, not schema.
const OPAQUE: [&str; 1] = ["tools.fallback_response"];

/// Every (table path, key) in a TOML value; array indexes dropped (`tools.retry`, `max_attempts`).
fn key_paths(table: &toml::Table, path: &str, out: &mut BTreeSet<(String, String)>) {
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
    let minimal = "version = 1\n[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"http://h/v1\" } ]\n\
                   [[models]]\nname = \"n\"\ndeployments = [ { base_url = \"http://h/v1\" } ]\n\
                   budget = { kind = \"token_bucket\" }\n\
                   [[tools]]\nname = \"t\"\nupstream = { url = \"http://h/t\" }\n\
                   [[tools]]\nname = \"u\"\nside_effects = true\nupstream = { url = \"http://h/u\" }\n\
                   budget = { kind = \"token_bucket\" }\n";
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

#[test]
fn raw_config_round_trips_through_toml() {
    for raw in [fully_populated(), RawConfig::default(), parse(EXAMPLE).unwrap()] {
        let text = toml::to_string(&raw).unwrap();
        assert_eq!(parse(&text).unwrap(), raw, "{text}");
    }
}

#[test]
fn typed_config_round_trips_with_every_value_written_out() {
    let mut valid = fully_populated();
    valid.tools[0].fallback_tool = None; // fallback_tool and fallback_response are exclusive per tool
    valid.tools[0].fallback_response = Some(toml::Value::String("later".into()));
    valid.tools[1].fallback_tool = Some("refund".into());
    valid.tools[1].fallback_response = None;
    valid.store.url_env = None;
    for config in [
        validate(&valid).unwrap(),
        Config::from_toml_str(EXAMPLE).unwrap(),
        Config::embedded_default(),
    ] {
        let written = toml::to_string(&RawConfig::from(&config)).unwrap();
        assert_eq!(Config::from_toml_str(&written).unwrap(), config, "{written}");
    }
}

#[test]
fn the_example_loads_and_is_the_flash_sale_setup() {
    let config = Config::from_toml_str(EXAMPLE).unwrap();
    assert_eq!(config.principals.len(), 1);
    assert!(matches!(
        config.store.location,
        StoreLocation::Url {
            kind: StoreKind::Sqlite,
            ..
        }
    ));
    let model = config.model("gpt-4.1").unwrap();
    assert_eq!(model.deployments.len(), 2);
    assert_eq!(model.deployments[1].base_url, "http://127.0.0.1:9000/v1");

    let tool = |name| config.tool(name).unwrap();
    let lookup = tool("lookup_order");
    assert!(!lookup.side_effects);
    assert_eq!(lookup.priority, Priority::SheddablePlus);
    let refund = tool("create_refund");
    assert!(refund.side_effects);
    assert_eq!(
        (refund.upstream_idempotency, refund.priority),
        (UpstreamIdempotency::Keyed, Priority::Critical)
    );
    let payment = tool("process_payment");
    assert!(payment.side_effects);
    assert_eq!(
        payment.upstream_idempotency,
        UpstreamIdempotency::KeyedReplaysErrors
    );
    assert_eq!(
        (payment.priority, payment.concurrency, payment.queue),
        (Priority::CriticalPlus, 32, 256)
    );
    let search = tool("search_products");
    assert!(!search.side_effects);
    assert_eq!(search.priority, Priority::Sheddable);
    assert!(matches!(search.fallback, Some(ToolFallback::Response(_))));

    let env = |name: &str| {
        ["BALLAST_KEY_SHOP_AGENTS", "OPENAI_API_KEY"]
            .contains(&name)
            .then(|| "set".to_owned())
    };
    assert_eq!(config.missing_secrets(&env), []);
}

/// The longest a call can take if every try times out and every sleep is at its cap.
fn naive_worst(per_try: Duration, retry: &RetryConfig) -> Duration {
    crate::plan::naive_worst_case(per_try, retry)
}

/// The example teaches good settings: every call's worst case fits the default deadline, and the model's
/// primary fits its share and leaves the fallback enough (what `ballast plan` would warn about otherwise).
#[test]
fn the_example_fits_its_own_deadline() {
    let config = Config::from_toml_str(EXAMPLE).unwrap();
    let deadline = config.server.default_timeout - config.server.reserve;
    for tool in &config.tools {
        assert!(
            naive_worst(tool.per_try_timeout, &tool.retry) <= deadline,
            "{}",
            tool.name
        );
    }
    let model = config.model("gpt-4.1").unwrap();
    let primary = naive_worst(model.deployments[0].per_try_timeout, &model.retry);
    let fallback = naive_worst(model.deployments[1].per_try_timeout, &model.retry);
    assert!(primary <= deadline.mul_f64(model.primary_share));
    assert!(fallback <= deadline - deadline.mul_f64(model.primary_share));
}
