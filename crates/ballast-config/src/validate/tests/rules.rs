//! Every rule with its message; every error collected, typed, with its path.

use ballast_core::InvalidBreaker;

use super::*;

/// Every rule, with its message: (file body, the one error it produces).
#[test]
fn every_rule_has_its_message() {
    let cases: Vec<(String, &str)> = vec![
        // [server]
        ("[server]\nlisten = \"localhost:80\"".into(),
         r#"server.listen: "localhost:80" is not an IP address and port (e.g. "127.0.0.1:8080" or "[::1]:8080")"#),
        ("[server]\ndefault_timeout = \"0s\"".into(), r#"server.default_timeout: "0s" must be more than zero"#),
        ("[server]\nmax_timeout = \"0s\"".into(), r#"server.max_timeout: "0s" must be more than zero"#),
        ("[server]\ndefault_timeout = \"400s\"".into(),
         "server.default_timeout: 400s must be at most server.max_timeout (5m)"),
        ("[server]\ndefault_timeout = \"100ms\"".into(),
         "server.default_timeout: 100ms must be more than server.reserve + server.min_attempt (100ms)"),
        ("[server]\nmin_attempt = \"0s\"".into(), r#"server.min_attempt: "0s" must be more than zero"#),
        ("[server]\nreserve = \"-1s\"".into(),
         r#"server.reserve: "-1s" is not a duration: durations cannot be negative"#),
        ("[server]\ngrace = \"10\"".into(),
         r#"server.grace: "10" is not a duration: units are required (e.g. "10s" or "10ms")"#),
        ("[server]\nmax_retry_after = 60".into(),
         r#"server.max_retry_after: 60 is not a duration: units are required (e.g. "60s" or "60ms")"#),
        ("[server]\nbody_limit = \"0B\"".into(), r#"server.body_limit: "0B" must be more than zero"#),
        ("[server]\nbody_limit = \"8mb\"".into(),
         r#"server.body_limit: "8mb" is not a size: unknown unit "mb" (use B, KiB, MiB, GiB, TiB, kB, MB, GB or TB)"#),
        // [[principals]]
        ("[[principals]]\nkey_env = \"K\"".into(), "principals[0].name: is required"),
        ("[[principals]]\nname = \"a.b\"\nkey_env = \"K\"".into(),
         r#"principals[0].name: "a.b" is not a valid name: use 1 to 64 of A-Z, a-z, 0-9, _ and -"#),
        ("[[principals]]\nname = \"a\"".into(), "principals[0]: needs one of key_env or key_hash_env"),
        ("[[principals]]\nname = \"a\"\nkey_env = \"K\"\nkey_hash_env = \"H\"".into(),
         "principals[0].key_hash_env: cannot be set together with key_env"),
        ("[[principals]]\nname = \"a\"\nkey_env = \"\"".into(),
         r#"principals[0].key_env: "" is not an environment variable name (ASCII letters, digits and _, not starting with a digit)"#),
        ("[[principals]]\nname = \"a\"\nkey_env = \"K\"\n[[principals]]\nname = \"a\"\nkey_env = \"L\"".into(),
         r#"principals[1].name: "a" is already used by principals[0]"#),
        ("[[principals]]\nname = \"a\"\nkey_env = \"K\"\n[[principals]]\nname = \"b\"\nkey_hash_env = \"K\"".into(),
         r#"principals[1].key_hash_env: "K" is already used by principals[0].key_env"#),
        // [store]
        ("[store]\nurl = \"mysql://db/x\"".into(),
         r#"store.url: "mysql://db/x" is not a supported store URL (use sqlite://PATH, sqlite::memory:, redis://, postgres:// or postgresql://)"#),
        ("[store]\nurl = \"sqlite://\"".into(),
         r#"store.url: "sqlite://" is not a supported store URL (use sqlite://PATH, sqlite::memory:, redis://, postgres:// or postgresql://)"#),
        ("[store]\nurl = \"redis://:hunter2@cache:6379\"".into(),
         r#"store.url: "redis://***@cache:6379" contains credentials, which must not be in the config file: put the whole URL in an environment variable and name it in store.url_env"#),
        ("[store]\nurl = \"sqlite://x.db\"\nurl_env = \"U\"".into(), "store.url_env: cannot be set together with store.url"),
        ("[store]\nurl_env = \"1U\"".into(),
         r#"store.url_env: "1U" is not an environment variable name (ASCII letters, digits and _, not starting with a digit)"#),
        ("[store]\nretention = \"0s\"".into(), r#"store.retention: "0s" must be more than zero"#),
        // [run]
        ("[run]\nretry_allowance = -1".into(), "run.retry_allowance: -1 must be at least 0"),
        ("[run]\nretry_allowance = 4294967296".into(), "run.retry_allowance: 4294967296 must be at most 4294967295"),
        ("[run]\nttl = \"1m\"".into(), "run.ttl: 1m must be at least server.max_timeout (5m)"),
        ("[server]\nmax_timeout = \"300s\"\n[run]\nttl = \"299s\"".into(),
         "run.ttl: 299s must be at least server.max_timeout (300s)"),
        // [[models]]
        ("[[models]]\ndeployments = [ { base_url = \"http://h/v1\" } ]".into(), "models[0].name: is required"),
        ("[[models]]\nname = \"gpt 4\"\ndeployments = [ { base_url = \"http://h/v1\" } ]".into(),
         r#"models[0].name: "gpt 4" is not a valid name: use 1 to 256 printable ASCII characters, no spaces"#),
        ("[[models]]\nname = \"m\"".into(), "models[0].deployments: must not be empty"),
        (format!("{MODEL}{MODEL}"), r#"models[1].name: "m" is already used by models[0]"#),
        ("[[models]]\nname = \"m\"\ndeployments = [ { model = \"x\" } ]".into(),
         "models[0].deployments[0].base_url: is required"),
        ("[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"https://k:s@api/v1\" } ]".into(),
         r#"models[0].deployments[0].base_url: "https://***@api/v1" contains credentials, which must not be in the config file: put the API key in the environment and name its variable in api_key_env"#),
        ("[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"http://h/v1\", model = \"\" } ]".into(),
         r#"models[0].deployments[0].model: "" is not a valid name: use 1 to 256 printable ASCII characters, no spaces"#),
        ("[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"http://h/v1\", api_key_env = \"MY-KEY\" } ]".into(),
         r#"models[0].deployments[0].api_key_env: "MY-KEY" is not an environment variable name (ASCII letters, digits and _, not starting with a digit)"#),
        ("[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"http://h/v1\", per_try_timeout = \"0s\" } ]".into(),
         r#"models[0].deployments[0].per_try_timeout: "0s" must be more than zero"#),
        ("[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"http://h/v1\", api = [] } ]".into(),
         "models[0].deployments[0].api: must not be empty"),
        ("[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"http://h/v1\", api = [\"chat\", \"completions\"] } ]".into(),
         r#"models[0].deployments[0].api[1]: "completions" is not one of responses, chat, embeddings, messages"#),
        ("[[models]]\nname = \"m\"\ndeployments = [ { base_url = \"http://h/v1\", api = [\"chat\", \"chat\"] } ]".into(),
         r#"models[0].deployments[0].api[1]: "chat" is already used by models[0].deployments[0].api[0]"#),
        (model("per_try_timeout = \"0ms\""), r#"models[0].per_try_timeout: "0ms" must be more than zero"#),
        (model("primary_share = 0"), "models[0].primary_share: 0 must be more than 0 and at most 1"),
        (model("primary_share = 1.5"), "models[0].primary_share: 1.5 must be more than 0 and at most 1"),
        (model("primary_share = nan"), "models[0].primary_share: NaN must be more than 0 and at most 1"),
        (model("context = { on_overflow = \"fallback\" }"),
         r#"models[0].context.on_overflow: "fallback" needs a second deployment to fall back to"#),
        (model("context = { on_overflow = \"drop\" }"),
         r#"models[0].context.on_overflow: "drop" is not one of error, fallback, truncate"#),
        // retry (models and tools share the table); the rules are ballast-core's Backoff::new and RetryPolicy::new
        (model("retry = { max_attempts = 0 }"),
         "models[0].retry.max_attempts: 0 must be at least 1"),
        (model("retry = { max_attempts = -1 }"), "models[0].retry.max_attempts: -1 must be at least 0"),
        (model("retry = { max_attempts = 101 }"), "models[0].retry.max_attempts: 101 must be at most 100"),
        (tool("retry = { max_attempts = 4294967295 }"),
         "tools[0].retry.max_attempts: 4294967295 must be at most 100"),
        (tool("retry = { base = \"0s\" }"), r#"tools[0].retry.base: "0s" must be more than zero"#),
        (tool("retry = { base = \"0s\", cap = \"0s\" }"), r#"tools[0].retry.base: "0s" must be more than zero"#),
        (tool("retry = { cap = \"0s\" }"), "tools[0].retry.cap: 0s must be at least tools[0].retry.base (100ms)"),
        (tool("retry = { cap = \"50ms\" }"), "tools[0].retry.cap: 50ms must be at least tools[0].retry.base (100ms)"),
        (tool("retry = { base = \"3s\" }"), "tools[0].retry.base: 3s must be at most tools[0].retry.cap (2s)"),
        (tool("retry = { base = \"1s\", cap = \"500ms\" }"),
         "tools[0].retry.base: 1s must be at most tools[0].retry.cap (500ms)"),
        (tool("retry = { jitter = \"equal\" }"), r#"tools[0].retry.jitter: "equal" is not one of full, decorrelated"#),
        // budget: the rules are ballast-core's RatioBudget::new and TokenBucket::new, the bounds its constants
        (tool("budget = { kind = \"ratio\", ratio = 1.01 }"), "tools[0].budget.ratio: 1.01 must be between 0 and 1"),
        (tool("budget = { kind = \"ratio\", ratio = -0.1 }"), "tools[0].budget.ratio: -0.1 must be between 0 and 1"),
        (tool("budget = { kind = \"ratio\", ratio = nan }"), "tools[0].budget.ratio: NaN must be between 0 and 1"),
        (tool("budget = { kind = \"ratio\", min_per_sec = -1 }"), "tools[0].budget.min_per_sec: -1 must be at least 0"),
        (tool("budget = { kind = \"ratio\", window = \"999ms\" }"),
         r#"tools[0].budget.window: "999ms" must be between 1s and 1h"#),
        (tool("budget = { kind = \"ratio\", window = \"1h0.001s\" }"),
         r#"tools[0].budget.window: "1h0.001s" must be between 1s and 1h"#),
        (tool("budget = { kind = \"token_bucket\", capacity = 0 }"), "tools[0].budget.capacity: 0 must be at least 1"),
        (tool("budget = { kind = \"token_bucket\", refill_per_sec = -1 }"),
         "tools[0].budget.refill_per_sec: -1 must be 0 (never refill) or between 0.000001 and 1000000000"),
        (tool("budget = { kind = \"token_bucket\", refill_per_sec = inf }"),
         "tools[0].budget.refill_per_sec: inf must be 0 (never refill) or between 0.000001 and 1000000000"),
        (tool("budget = { kind = \"token_bucket\", refill_per_sec = 1e-7 }"),
         "tools[0].budget.refill_per_sec: 0.0000001 must be 0 (never refill) or between 0.000001 and 1000000000"),
        (tool("budget = { kind = \"token_bucket\", refill_per_sec = 2e9 }"),
         "tools[0].budget.refill_per_sec: 2000000000 must be 0 (never refill) or between 0.000001 and 1000000000"),
        // breaker: the rules and their words are ballast-core's BreakerConfig builder's
        (tool("breaker = { consecutive_failures = -1 }"), "tools[0].breaker.consecutive_failures: -1 must be at least 0"),
        (tool("breaker = { failure_rate = 1.5 }"),
         "tools[0].breaker.failure_rate: 1.5 is not in (0, 1] (0 turns the rate trigger off)"),
        (tool("breaker = { failure_rate = -0.5 }"),
         "tools[0].breaker.failure_rate: -0.5 is not in (0, 1] (0 turns the rate trigger off)"),
        (tool("breaker = { window = \"0s\" }"), "tools[0].breaker.window: 0ns is shorter than 10 buckets of at least 1ms"),
        (tool("breaker = { window = \"9ms\" }"), "tools[0].breaker.window: 9ms is shorter than 10 buckets of at least 1ms"),
        (tool("breaker = { min_calls = 0 }"), "tools[0].breaker.min_calls: 0 must be at least 1"),
        (tool("breaker = { slow_call = \"0s\" }"),
         "tools[0].breaker.slow_call: 0ns must be greater than zero (leave it out to turn slow calls off)"),
        (tool("breaker = { open_for = \"0s\" }"), "tools[0].breaker.open_for: 0ns must be greater than zero"),
        (tool("breaker = { open_for = \"25h\" }"),
         "tools[0].breaker.open_for: 90000s is longer than 1 day, the most a breaker stays open"),
        (tool("breaker = { open_for = \"30\" }"),
         r#"tools[0].breaker.open_for: "30" is not a duration: units are required (e.g. "30s" or "30ms")"#),
        (tool("breaker = { open_jitter = 1.0 }"), "tools[0].breaker.open_jitter: 1 is not in [0, 1)"),
        (tool("breaker = { open_jitter = -0.1 }"), "tools[0].breaker.open_jitter: -0.1 is not in [0, 1)"),
        (tool("breaker = { half_open_probes = 0 }"), "tools[0].breaker.half_open_probes: 0 must be at least 1"),
        (tool("breaker = { success_threshold = 0 }"), "tools[0].breaker.success_threshold: 0 must be at least 1"),
        (tool("breaker = { half_open_probes = 4294967296 }"),
         "tools[0].breaker.half_open_probes: 4294967296 must be at most 4294967295"),
        // [[tools]]
        ("[[tools]]\nupstream = { url = \"http://h/x\" }".into(), "tools[0].name: is required"),
        ("[[tools]]\nname = \"get.order\"\nupstream = { url = \"http://h/x\" }".into(),
         r#"tools[0].name: "get.order" is not a valid name: use 1 to 64 of A-Z, a-z, 0-9, _ and -"#),
        (format!("{TOOL}{TOOL}"), r#"tools[1].name: "t" is already used by tools[0]"#),
        ("[[tools]]\nname = \"t\"".into(), "tools[0].upstream: is required"),
        ("[[tools]]\nname = \"t\"\nupstream = { method = \"GET\" }".into(), "tools[0].upstream.url: is required"),
        ("[[tools]]\nname = \"t\"\nupstream = { method = \"get\", url = \"http://h/x\" }".into(),
         r#"tools[0].upstream.method: "get" is not one of GET, POST, PUT, PATCH, DELETE"#),
        ("[[tools]]\nname = \"t\"\nupstream = { url = \"h/x\" }".into(),
         r#"tools[0].upstream.url: "h/x" is not a valid URL: it must start with http:// or https://"#),
        ("[[tools]]\nname = \"t\"\nupstream = { url = \"http://u:p@h/x\" }".into(),
         r#"tools[0].upstream.url: "http://***@h/x" contains credentials, which must not be in the config file: tool upstreams take no credentials in their URL"#),
        (tool("upstream_idempotency = \"keyed\""),
         r#"tools[0].upstream_idempotency: "keyed" only applies to side-effecting tools: set side_effects = true if this call changes anything (then it gets an idempotency key), or remove upstream_idempotency"#),
        (tool("side_effects = true\nupstream_idempotency = \"stripe\""),
         r#"tools[0].upstream_idempotency: "stripe" is not one of none, keyed, keyed_replays_errors"#),
        (tool("priority = \"urgent\""),
         r#"tools[0].priority: "urgent" is not one of critical_plus, critical, sheddable_plus, sheddable"#),
        (tool("per_try_timeout = \"12x\""),
         r#"tools[0].per_try_timeout: "12x" is not a duration: unknown unit "x" (use d, h, m, s, ms, us or ns)"#),
        (tool("per_try_timeout = \"0s\""), r#"tools[0].per_try_timeout: "0s" must be more than zero"#),
        (tool("concurrency = 0"), "tools[0].concurrency: 0 must be at least 1"),
        (tool("queue = -1"), "tools[0].queue: -1 must be at least 0"),
        (tool("fallback_tool = \"t\""), r#"tools[0].fallback_tool: "t" is this tool itself; a tool cannot fall back to itself"#),
        (tool("fallback_tool = \"nope\""), r#"tools[0].fallback_tool: "nope" is not a configured tool"#),
        (tool("fallback_tool = \"u\"\nfallback_response = \"busy\"\n[[tools]]\nname = \"u\"\nupstream = { url = \"http://h/u\" }"),
         "tools[0].fallback_response: cannot be set together with fallback_tool"),
        (tool("fallback_response = { items = [1, nan] }"),
         "tools[0].fallback_response.items[1]: NaN cannot be written as JSON"),
        (tool("side_effects = true\nfallback_response = { status = \"refunded\" }"),
         "tools[0].fallback_response: a static fallback_response on a tool with side_effects = true would answer as if the operation had run when it did not (a payment reported done); remove it, or use fallback_tool (called only when no attempt of the operation was sent)"),
    ];
    for (body, expected) in cases {
        assert_eq!(error(&body), expected, "for:\n{body}");
    }
}

#[test]
fn all_errors_are_collected_one_per_line() {
    let body = "[server]\nlisten = \"nowhere\"\nmax_timeout = \"5x\"\n[[tools]]\nname = \"a\"\n\
                upstream = { url = \"http://h/a\" }\nper_try_timeout = \"12x\"\n[[tools]]\nname = \"b\"\n\
                upstream = { url = \"http://h/b\" }\nretry = { max_attempts = 0 }\npriority = \"urgent\"\n";
    let err = load(body).unwrap_err();
    let text = err.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert_eq!(lines.len(), err.errors().len());
    assert!(lines[0].starts_with("server.listen: \"nowhere\""));
    assert!(lines[1].starts_with("server.max_timeout: \"5x\" is not a duration"));
    assert!(lines[2].starts_with("tools[0].per_try_timeout: \"12x\" is not a duration"));
    assert!(text.contains("tools[1].retry.max_attempts: 0 must be at least 1"));
    assert!(text.contains("tools[1].priority: \"urgent\" is not one of"));
    // An invalid max_timeout is not compared with default_timeout: no second error from the same value.
    assert!(!text.contains("must be at most server.max_timeout"));
}

#[test]
fn errors_are_typed_and_carry_their_path() {
    let err = load(&tool("budget = { kind = \"token_bucket\", capacity = 0 }")).unwrap_err();
    match &err.errors()[0] {
        ConfigError::Invalid {
            path,
            problem: Problem::Range { value, must_be },
            ..
        } => {
            assert_eq!(
                (path.as_str(), value.as_str(), must_be.as_str()),
                ("tools[0].budget.capacity", "0", "at least 1")
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(err.errors()[0].path(), Some("tools[0].budget.capacity"));
    // The breaker's refusals keep ballast-core's type.
    let err = load(&model("breaker = { failure_rate = 1.5 }")).unwrap_err();
    assert!(matches!(
        &err.errors()[0],
        ConfigError::Invalid { path, problem: Problem::Breaker(InvalidBreaker::FailureRate(rate)), .. }
            if path == "models[0].breaker.failure_rate" && *rate == 1.5
    ));
    let err = load(&tool("priority = \"urgent\"")).unwrap_err();
    assert!(
        matches!(&err.errors()[0], ConfigError::Invalid { problem: Problem::NotOneOf(u), .. } if u.value == "urgent")
    );
}

#[test]
fn paths_index_nested_arrays() {
    let body = "[[models]]\nname = \"a\"\ndeployments = [ { base_url = \"http://h/v1\" } ]\n\
                [[models]]\nname = \"b\"\ndeployments = [ { base_url = \"http://h/v1\" }, { base_url = \"http://h/v1\" },\n  \
                { base_url = \"http://h:0/v1\" } ]\n";
    assert_eq!(
        error(body),
        r#"models[1].deployments[2].base_url: "http://h:0/v1" is not a valid URL: its port is not a number from 1 to 65535"#
    );
    let body = "[[tools]]\nname = \"t\"\nupstream = { url = \"http://h/t\" }\n\
                fallback_response = { pages = [ { items = [ 1.0, inf ] } ] }\n";
    assert_eq!(
        error(body),
        "tools[0].fallback_response.pages[0].items[1]: inf cannot be written as JSON"
    );
}

#[test]
fn fallback_tools_form_no_cycle() {
    let chain = |targets: [&str; 3]| {
        let names = ["a", "b", "c"];
        let mut body = String::new();
        for (name, target) in names.iter().zip(targets) {
            body += &format!("[[tools]]\nname = \"{name}\"\nupstream = {{ url = \"http://h/{name}\" }}\n");
            if !target.is_empty() {
                body += &format!("fallback_tool = \"{target}\"\n");
            }
        }
        body
    };
    let c = load(&chain(["b", "c", ""])).unwrap();
    assert_eq!(c.tools[0].fallback, Some(ToolFallback::Tool("b".into())));
    assert_eq!(
        error(&chain(["b", "c", "a"])),
        "tools[0].fallback_tool: fallback cycle: a -> b -> c -> a"
    );
    assert_eq!(
        error(&chain(["", "c", "b"])),
        "tools[1].fallback_tool: fallback cycle: b -> c -> b"
    );
    // A tail leading into a cycle: the cycle is reported once, on its first tool.
    assert_eq!(
        error(&chain(["b", "c", "b"])),
        "tools[1].fallback_tool: fallback cycle: b -> c -> b"
    );
}

#[test]
fn fallback_response_becomes_json() {
    let c = load(&tool(
        "[tools.fallback_response]\nresults = []\ndegraded = true\ncount = 0\nscore = 0.5\n\
         at = 1979-05-27T07:32:00Z\nnested = { message = \"busy\" }",
    ))
    .unwrap();
    let expected = serde_json::json!({
        "results": [], "degraded": true, "count": 0, "score": 0.5, "at": "1979-05-27T07:32:00Z",
        "nested": { "message": "busy" }
    });
    assert_eq!(c.tools[0].fallback, Some(ToolFallback::Response(expected)));
    let c = load(&tool("fallback_response = \"Search is busy.\"")).unwrap();
    assert_eq!(
        c.tools[0].fallback,
        Some(ToolFallback::Response("Search is busy.".into()))
    );
}

#[test]
fn upstream_idempotency_none_is_fine_on_a_read_only_tool() {
    let c = load(&tool("upstream_idempotency = \"none\"")).unwrap();
    assert_eq!(c.tools[0].upstream_idempotency, UpstreamIdempotency::None);
}

/// ballast-core stops at its first refusal; validation asks again without the refused value, so every bad value
/// of one table is reported, each at its own path.
#[test]
fn every_refusal_in_one_table_is_reported() {
    let all = errors(&tool(
        "breaker = { failure_rate = 2, min_calls = 0, open_for = \"0s\", half_open_probes = 0, window = \"1x\" }",
    ));
    assert_eq!(
        all,
        [
            r#"tools[0].breaker.window: "1x" is not a duration: unknown unit "x" (use d, h, m, s, ms, us or ns)"#,
            "tools[0].breaker.failure_rate: 2 is not in (0, 1] (0 turns the rate trigger off)",
            "tools[0].breaker.min_calls: 0 must be at least 1",
            "tools[0].breaker.open_for: 0ns must be greater than zero",
            "tools[0].breaker.half_open_probes: 0 must be at least 1",
        ]
    );
    let all = errors(&model(
        "budget = { kind = \"ratio\", ratio = 2, window = \"0s\" }\nretry = { max_attempts = 0, base = \"0s\" }",
    ));
    assert_eq!(
        all,
        [
            r#"models[0].retry.base: "0s" must be more than zero"#,
            "models[0].retry.max_attempts: 0 must be at least 1",
            "models[0].budget.ratio: 2 must be between 0 and 1",
            r#"models[0].budget.window: "0s" must be between 1s and 1h"#,
        ]
    );
    let all = errors(&tool(
        "budget = { kind = \"token_bucket\", capacity = 0, refill_per_sec = -1 }",
    ));
    assert_eq!(all.len(), 2, "{all:?}");
}

/// The breaker's messages are ballast-core's, after the field name it starts them with; the one reworded is
/// the failure rate's advice, which is about the builder's `None` while the file turns the trigger off with 0.
/// If ballast-core changes the rate's rule, this fails and the rewording is looked at again.
#[test]
fn breaker_messages_are_ballast_cores() {
    let core = InvalidBreaker::FailureRate(1.5).to_string();
    assert!(core.starts_with("failure_rate: 1.5 is not in (0, 1] "), "{core}");
    let core = ballast_core::BreakerConfig::builder()
        .min_calls(0)
        .build()
        .unwrap_err();
    let config = error(&tool("breaker = { min_calls = 0 }"));
    assert_eq!(config, format!("tools[0].breaker.{core}"));
}
