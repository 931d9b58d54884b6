//! Versions, unknown keys, wrong types, syntax errors and files.

use super::*;

#[test]
fn version_is_required_and_must_be_one() {
    let err = |text: &str| Config::from_toml_str(text).unwrap_err().to_string();
    assert_eq!(
        err(""),
        "version: is missing: a Ballast config starts with the line `version = 1`"
    );
    assert_eq!(
        err("[server]\n"),
        "version: is missing: a Ballast config starts with the line `version = 1`"
    );
    assert_eq!(
        err("version = 2"),
        "version: 2 is not supported: this Ballast reads `version = 1` (line 1)"
    );
    assert_eq!(
        err("version = \"1\""),
        "version: \"1\" is not supported: this Ballast reads `version = 1` (line 1)"
    );
    // A file for another version is refused for its version, not for the keys this version does not know.
    assert_eq!(
        err("# for Ballast 2\nversion = 2\n[limits]\nrps = 5\n"),
        "version: 2 is not supported: this Ballast reads `version = 1` (line 2)"
    );
    let raw = RawConfig {
        version: 0,
        ..RawConfig::default()
    };
    assert_eq!(
        validate(&raw).unwrap_err().to_string(),
        "version: 0 is not supported: this Ballast reads `version = 1`"
    );
}

#[test]
fn unknown_keys_name_their_table_path_and_line() {
    let cases = [
        (
            "tmeout = \"1s\"\n",
            "tmeout: unknown field `tmeout`, expected one of `version`, `server`, `principals`, `store`, `run`, `deferred`, `models`, `tools`, `mcp_servers`, `telemetry` (line 2, column 1)",
        ),
        (
            "[server]\nlisen = \"x\"\n",
            "server.lisen: unknown field `lisen`, expected one of `listen`, `admin_listen`, `default_timeout`, `max_timeout`, `reserve`, `min_attempt`, `body_limit`, `grace`, `drain_delay`, `max_retry_after`, `repeat_window`, `header_timeout`, `body_timeout`, `idle_timeout`, `send_timeout`, `max_connections` (line 3, column 1)",
        ),
        (
            "[metrics]\n",
            "metrics: unknown field `metrics`, expected one of `version`, `server`, `principals`, `store`, `run`, `deferred`, `models`, `tools`, `mcp_servers`, `telemetry` (line 2, column 2)",
        ),
        (
            "[[tools]]\nname = \"a\"\n[[tools]]\nname = \"b\"\n[tools.upstream]\nurll = \"x\"\n",
            "tools[1].upstream.urll: unknown field `urll`, expected one of `method`, `url`, `headers` (line 7, column 1)",
        ),
        (
            "[[tools]]\nname = \"t\"\nupstream = { method = \"GET\", urll = \"x\" }\n",
            "tools[0].upstream.urll: unknown field `urll`, expected one of `method`, `url`, `headers` (line 4, column 30)",
        ),
        (
            &model("retry = { attempts = 3 }")[..],
            "models[0].retry.attempts: unknown field `attempts`, expected one of `max_attempts`, `base`, `cap`, `jitter` (line 5, column 11)",
        ),
        (
            &model("breaker = { threshold = 3 }")[..],
            "models[0].breaker.threshold: unknown field `threshold`, expected one of `consecutive_failures`, `consecutive_spread`, `failure_rate`, `window`, `min_calls`, `slow_call`, `open_for`, `open_jitter`, `half_open_probes`, `success_threshold` (line 5, column 13)",
        ),
        (
            &model("context = { overflow = \"error\" }")[..],
            "models[0].context.overflow: unknown field `overflow`, expected `on_overflow` (line 5, column 13)",
        ),
        (
            "[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"http://h/v1\" }, { url = \"http://h/v1\" } ]\n",
            "models[0].deployments[1].url: unknown field `url`, expected one of `base_url`, `model`, `api_key_env`, `per_try_timeout`, `api`, `limits` (line 4, column 49)",
        ),
        (
            &tool("budget = { kind = \"token_bucket\", ratio = 0.2 }")[..],
            "tools[0].budget: unknown field `ratio`, expected `capacity` or `refill_per_sec` (line 5, column 10)",
        ),
        (
            "[deferred]\nconcurency = 4\n",
            "deferred.concurency: unknown field `concurency`, expected one of `concurrency`, `ttl`, `max_attempts`, `base`, `cap`, `callback_url`, `callback_secret_env` (line 3, column 1)",
        ),
        (
            &tool("side_effects = true\ndefer = { attempts = 8 }")[..],
            "tools[0].defer.attempts: unknown field `attempts`, expected one of `ttl`, `max_attempts`, `concurrency` (line 6, column 11)",
        ),
        (
            &tool("budget = { kind = \"leaky\" }")[..],
            "tools[0].budget.kind: unknown variant `leaky`, expected `ratio` or `token_bucket` (line 5, column 19)",
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(error(body), expected, "for:\n{body}");
    }
}

#[test]
fn wrong_types_and_bad_toml_say_where() {
    assert_eq!(
        error("[[tools]]\nname = 3\n"),
        "tools[0].name: invalid type: integer `3`, expected a string (line 3, column 8)"
    );
    assert_eq!(
        error(&tool("per_try_timeout = true")),
        "tools[0].per_try_timeout: invalid type: boolean `true`, expected a string such as \"10s\" or \"8MiB\" (line 5, column 19)"
    );
    assert_eq!(
        error("[server\n"),
        "line 2, column 8: unclosed table, expected `]`"
    );
    assert_eq!(
        error("[server]\ngrace = \"1s\"\ngrace = \"2s\"\n"),
        "line 4, column 1: duplicate key `grace`"
    );
    assert!(matches!(
        load("[server\n").unwrap_err().errors()[0],
        ConfigError::Syntax { line: Some(2), .. }
    ));
}

#[test]
fn files_are_read_or_the_error_names_them() {
    let dir = std::env::temp_dir().join(format!("ballast-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ballast.toml");
    std::fs::write(&file, format!("version = 1\n{TOOL}")).unwrap();
    assert_eq!(Config::load(&file).unwrap().tools[0].name, "t");
    let missing = dir.join("missing.toml");
    let err = Config::load(&missing).unwrap_err();
    assert!(matches!(err.errors()[0], ConfigError::Read { .. }));
    assert!(
        err.to_string()
            .starts_with(&format!("cannot read {}: ", missing.display())),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
