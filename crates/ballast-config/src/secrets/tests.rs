//! The secrets a config names: presence, form, and values that never leak into messages.

use super::*;

const CONFIG: &str = r#"
version = 1
[[principals]]
name = "agents"
key_env = "KEY_AGENTS"
[[principals]]
name = "ops"
key_hash_env = "KEY_OPS_SHA256"
[store]
url_env = "STORE_URL"
[[models]]
name = "m"
deployments = [ { base_url = "https://a/v1", api_key_env = "A_KEY" }, { base_url = "http://b/v1" },
            { base_url = "https://c/v1", api_key_env = "C_KEY" } ]
"#;

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn validation_needs_no_environment_and_missing_secrets_lists_each() {
    // It validates with nothing set: `ballast plan` runs anywhere.
    let config = Config::from_toml_str(CONFIG).unwrap();
    let missing = config.missing_secrets(&env(&[("A_KEY", "")]));
    let lines: Vec<String> = missing.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "principals[0].key_env: environment variable KEY_AGENTS is not set",
            "principals[1].key_hash_env: environment variable KEY_OPS_SHA256 is not set",
            "models[0].deployments[0].api_key_env: environment variable A_KEY is empty",
            "models[0].deployments[2].api_key_env: environment variable C_KEY is not set",
            "store.url_env: environment variable STORE_URL is not set",
        ]
    );
}

#[test]
fn a_complete_environment_has_nothing_missing_and_values_never_leak() {
    let config = Config::from_toml_str(CONFIG).unwrap();
    let hash = "a".repeat(64);
    let full = env(&[
        ("KEY_AGENTS", "sk-agents"),
        ("KEY_OPS_SHA256", &hash),
        ("A_KEY", "sk-a"),
        ("C_KEY", "sk-c"),
        ("STORE_URL", "postgres://app:pw@db/ballast"),
    ]);
    assert_eq!(config.missing_secrets(&full), []);
    assert_eq!(
        config.store.url(&full),
        Ok(("postgres://app:pw@db/ballast".to_owned(), StoreKind::Postgres))
    );

    let mut wrong = full.clone();
    wrong.insert("KEY_OPS_SHA256".into(), "not-a-hash".into());
    wrong.insert("STORE_URL".into(), "mysql://app:pw@db/x".into());
    let lines: Vec<String> = config
        .missing_secrets(&wrong)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        lines,
        [
            "principals[1].key_hash_env: environment variable KEY_OPS_SHA256 does not hold a SHA-256 hash (64 hex digits)",
            "store.url_env: environment variable STORE_URL does not hold a supported store URL (sqlite://, sqlite::memory:, redis://, postgres://)",
        ]
    );
    assert!(
        lines
            .iter()
            .all(|l| !l.contains("not-a-hash") && !l.contains("pw"))
    );
}

const HEADERS: &str = r#"
version = 1
[[tools]]
name = "lookup"
upstream = { url = "http://h/lookup", headers = { x-api-version = "2024-01" } }
[[tools]]
name = "pay"
upstream = { url = "http://h/pay", headers = { x-api-version = "2024-01", authorization = { env = "PAY_TOKEN", prefix = "Bearer " }, x-tenant = { env = "TENANT" } } }
"#;

#[test]
fn every_header_variable_is_checked_and_values_never_leak() {
    let config = Config::from_toml_str(HEADERS).unwrap();
    let lines = |env: &HashMap<String, String>| -> Vec<String> {
        config
            .missing_secrets(env)
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(
        lines(&env(&[("TENANT", "")])),
        [
            "tools[1].upstream.headers.authorization.env: environment variable PAY_TOKEN is not set",
            "tools[1].upstream.headers.x-tenant.env: environment variable TENANT is empty",
        ]
    );
    // A value that, after its prefix, an HTTP header cannot carry: reported, never shown.
    let broken = lines(&env(&[("PAY_TOKEN", "tok\r\nx-evil: 1"), ("TENANT", "acmé")]));
    assert_eq!(
        broken,
        [
            "tools[1].upstream.headers.authorization.env: environment variable PAY_TOKEN holds characters an HTTP header cannot carry",
            "tools[1].upstream.headers.x-tenant.env: environment variable TENANT holds characters an HTTP header cannot carry",
        ]
    );
    assert!(broken.iter().all(|l| !l.contains("evil") && !l.contains("acm")));
    assert_eq!(
        lines(&env(&[("PAY_TOKEN", "tok"), ("TENANT", "acme")])),
        Vec::<String>::new()
    );
}

#[test]
fn header_values_are_resolved_and_secrets_marked_sensitive() {
    let config = Config::from_toml_str(HEADERS).unwrap();
    let full = env(&[("PAY_TOKEN", "tok"), ("TENANT", "acme")]);
    let pay = &config.tools[1].upstream.headers;
    let values: Vec<_> = pay.iter().map(|h| h.value(&full).unwrap()).collect();
    assert_eq!(values, ["2024-01", "Bearer tok", "acme"]);
    let sensitive: Vec<bool> = values.iter().map(http::HeaderValue::is_sensitive).collect();
    assert_eq!(sensitive, [false, true, true]);
    assert!(!format!("{:?}", values[1]).contains("tok"));
}

#[test]
fn header_text_is_visible_ascii_spaces_and_tabs() {
    assert!(is_header_text("Bearer ") && is_header_text("") && is_header_text("a\tb ~!"));
    assert!(!is_header_text("a\r\nb") && !is_header_text("é") && !is_header_text("\u{7f}"));
}

#[test]
fn a_closure_is_an_environment() {
    let config = Config::from_toml_str(CONFIG).unwrap();
    let everything = |name: &str| match name {
        "KEY_OPS_SHA256" => Some("0123456789abcdef".repeat(4)),
        "STORE_URL" => Some("sqlite::memory:".to_owned()),
        _ => Some(format!("value-of-{name}")),
    };
    assert_eq!(config.missing_secrets(&everything), []);
    let nothing = |_: &str| None;
    assert_eq!(config.missing_secrets(&nothing).len(), 5);
    assert_eq!(
        Config::embedded_default().store.url(&nothing),
        Ok(("sqlite://ballast.db".to_owned(), StoreKind::Sqlite)),
        "a URL written in the config needs no environment"
    );
}
