//! `[deferred]` and `tools.defer`: defaults, inheritance, every rule with its message, and the callback's secret.

use std::collections::HashMap;

use super::*;

const REFUND: &str =
    "[[tools]]\nname = \"refund\"\nside_effects = true\nupstream = { url = \"http://h/refund\" }\n";

#[test]
fn defaults_and_a_tool_that_writes_no_defer() {
    let c = Config::embedded_default();
    assert_eq!(
        c.deferred,
        DeferredConfig {
            concurrency: DEFAULT_DEFER_CONCURRENCY,
            ttl: DEFAULT_DEFER_TTL,
            max_attempts: DEFAULT_DEFER_MAX_ATTEMPTS,
            base: DEFAULT_DEFER_BASE,
            cap: DEFAULT_DEFER_CAP,
            callback: None,
        }
    );
    assert_eq!((DEFAULT_DEFER_BASE, DEFAULT_DEFER_CAP), (secs(1), secs(60)));
    assert_eq!(
        (c.deferred.concurrency, c.deferred.ttl, c.deferred.max_attempts),
        (4, secs(15 * 60), 5)
    );
    let c = load(REFUND).unwrap();
    let expected = ToolDefer {
        accepted: false,
        ttl: secs(15 * 60),
        max_attempts: 5,
        concurrency: DEFAULT_TOOL_DEFER_CONCURRENCY,
    };
    assert_eq!(c.tools[0].defer, expected);
    assert_eq!(ToolDefer::default(), expected);
    assert_eq!(DEFAULT_TOOL_DEFER_CONCURRENCY, 2);
}

#[test]
fn a_tool_defer_is_accepted_and_takes_what_it_does_not_say_from_deferred() {
    let c = load(&format!(
        "[deferred]\nconcurrency = 8\nttl = \"30m\"\nmax_attempts = 7\nbase = \"2s\"\ncap = \"30s\"\n\
         callback_url = \"https://hooks.example.com/ballast\"\ncallback_secret_env = \"BALLAST_CALLBACK_SECRET\"\n\
         {REFUND}defer = {{}}\n\
         [[tools]]\nname = \"pay\"\nside_effects = true\nupstream = {{ url = \"http://h/pay\" }}\n\
         defer = {{ ttl = \"10m\", max_attempts = 8, concurrency = 3 }}\n\
         [[tools]]\nname = \"void\"\nside_effects = true\nupstream = {{ url = \"http://h/void\" }}\n\
         [[mcp_servers]]\nname = \"shop\"\nurl = \"http://h/mcp\"\n"
    ))
    .unwrap();
    assert_eq!(
        c.deferred,
        DeferredConfig {
            concurrency: 8,
            ttl: secs(30 * 60),
            max_attempts: 7,
            base: secs(2),
            cap: secs(30),
            callback: Some(DeferredCallback {
                url: "https://hooks.example.com/ballast".into(),
                secret_env: "BALLAST_CALLBACK_SECRET".into(),
            }),
        }
    );
    let defer = |i: usize| c.tools[i].defer;
    let (ttl, attempts) = (secs(30 * 60), 7);
    assert_eq!(
        defer(0),
        ToolDefer {
            accepted: true,
            ttl,
            max_attempts: attempts,
            concurrency: 2
        }
    );
    assert_eq!(
        defer(1),
        ToolDefer {
            accepted: true,
            ttl: secs(600),
            max_attempts: 8,
            concurrency: 3
        }
    );
    // No `defer`: only a caller that asks is deferred, under [deferred]'s settings.
    assert_eq!(defer(2), c.deferred.tool_default());
    assert!(!defer(2).accepted && defer(2).ttl == ttl && defer(2).max_attempts == attempts);
    // An MCP server's tools write none either.
    assert_eq!(c.mcp_servers[0].tool.defer, c.deferred.tool_default());
}

#[test]
fn every_deferral_rule_has_its_message() {
    let cases: Vec<(String, &str)> = vec![
        (
            "[deferred]\nconcurrency = 0".into(),
            "deferred.concurrency: 0 must be at least 1",
        ),
        (
            "[deferred]\nconcurrency = 1025".into(),
            "deferred.concurrency: 1025 must be at most 1024",
        ),
        (
            "[deferred]\nttl = \"500ms\"".into(),
            r#"deferred.ttl: "500ms" must be between 1s and 7d"#,
        ),
        (
            "[deferred]\nttl = \"8d\"".into(),
            r#"deferred.ttl: "8d" must be between 1s and 7d"#,
        ),
        (
            "[deferred]\nttl = 60".into(),
            r#"deferred.ttl: 60 is not a duration: units are required (e.g. "60s" or "60ms")"#,
        ),
        (
            "[deferred]\nmax_attempts = 0".into(),
            "deferred.max_attempts: 0 must be at least 1",
        ),
        (
            "[deferred]\nmax_attempts = 101".into(),
            "deferred.max_attempts: 101 must be at most 100",
        ),
        (
            "[deferred]\ncallback_url = \"https://hooks.example.com/b\"".into(),
            "deferred.callback_url: needs deferred.callback_secret_env too: callbacks are signed (HMAC) with the \
          secret it names, so that their receiver can tell them from anyone else's POST",
        ),
        (
            "[deferred]\ncallback_secret_env = \"S\"".into(),
            "deferred.callback_secret_env: needs deferred.callback_url too: the secret only signs callbacks, and \
          without a URL none is sent",
        ),
        (
            "[deferred]\ncallback_url = \"ftp://hooks/b\"\ncallback_secret_env = \"S\"".into(),
            r#"deferred.callback_url: "ftp://hooks/b" is not a valid URL: it must start with http:// or https://"#,
        ),
        (
            "[deferred]\ncallback_url = \"https://u:pw@hooks/b\"\ncallback_secret_env = \"S\"".into(),
            r#"deferred.callback_url: "https://***@hooks/b" contains credentials, which must not be in the config file: a callback is authenticated by its signature, made with the secret named in deferred.callback_secret_env"#,
        ),
        (
            "[deferred]\ncallback_url = \"https://hooks/b\"\ncallback_secret_env = \"MY-SECRET\"".into(),
            r#"deferred.callback_secret_env: "MY-SECRET" is not an environment variable name (ASCII letters, digits and _, not starting with a digit)"#,
        ),
        (
            tool("defer = {}"),
            "tools[0].defer: only a side-effecting tool can be deferred: its idempotency key is what the operation \
          is kept and answered by, while a read-only call is simply retried by its caller; set side_effects = \
          true if this call changes anything, or remove defer",
        ),
        (
            format!("{REFUND}defer = {{ ttl = \"0s\" }}"),
            r#"tools[0].defer.ttl: "0s" must be between 1s and 7d"#,
        ),
        (
            format!("{REFUND}defer = {{ max_attempts = 0 }}"),
            "tools[0].defer.max_attempts: 0 must be at least 1",
        ),
        (
            format!("{REFUND}defer = {{ max_attempts = 101 }}"),
            "tools[0].defer.max_attempts: 101 must be at most 100",
        ),
        (
            format!("{REFUND}defer = {{ concurrency = 0 }}"),
            "tools[0].defer.concurrency: 0 must be at least 1",
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(error(&body), expected, "for:\n{body}");
    }
    // The bounds themselves are allowed.
    let c = load(&format!(
        "[deferred]\nconcurrency = 1024\nttl = \"7d\"\nmax_attempts = 100\n{REFUND}defer = {{ ttl = \"1s\", max_attempts = 1, concurrency = 1 }}"
    ))
    .unwrap();
    assert_eq!(
        (c.deferred.concurrency, c.deferred.ttl, c.deferred.max_attempts),
        (1024, secs(7 * 86_400), 100)
    );
    assert_eq!(
        (c.tools[0].defer.ttl, c.tools[0].defer.max_attempts),
        (secs(1), 1)
    );
}

#[test]
fn deferral_errors_carry_their_line_and_are_all_reported() {
    let err = load(&format!(
        "[deferred]\nttl = \"0s\"\ncallback_url = \"https://hooks/b\"\n{TOOL}defer = {{ max_attempts = 0 }}\n"
    ))
    .unwrap_err();
    let lines: Vec<String> = err.errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            r#"deferred.ttl: "0s" must be between 1s and 7d (line 3)"#,
            "deferred.callback_url: needs deferred.callback_secret_env too: callbacks are signed (HMAC) with the \
             secret it names, so that their receiver can tell them from anyone else's POST (line 4)",
            "tools[0].defer: only a side-effecting tool can be deferred: its idempotency key is what the operation \
             is kept and answered by, while a read-only call is simply retried by its caller; set side_effects = \
             true if this call changes anything, or remove defer (line 8)",
            "tools[0].defer.max_attempts: 0 must be at least 1 (line 8)",
        ]
    );
}

#[test]
fn the_callback_secret_is_checked_for_presence_and_never_shown() {
    let c = load(
        "[deferred]\ncallback_url = \"https://hooks.example.com/ballast\"\ncallback_secret_env = \"CB_SECRET\"\n",
    )
    .unwrap();
    let missing = |env: &HashMap<String, String>| -> Vec<String> {
        c.missing_secrets(env).iter().map(ToString::to_string).collect()
    };
    assert_eq!(
        missing(&HashMap::new()),
        ["deferred.callback_secret_env: environment variable CB_SECRET is not set"]
    );
    let set = HashMap::from([("CB_SECRET".to_owned(), "s3cret".to_owned())]);
    assert_eq!(missing(&set), Vec::<String>::new());
    // Without a callback nothing is asked of the environment.
    assert_eq!(Config::embedded_default().missing_secrets(&HashMap::new()), []);
}

#[test]
fn the_backoff_base_is_positive_and_at_most_the_cap() {
    let error = load("[deferred]\nbase = \"2m\"\n").unwrap_err().to_string();
    assert!(
        error.contains("deferred.base") && error.contains("at most") && error.contains("deferred.cap"),
        "{error}"
    );
    let error = load("[deferred]\ncap = \"0s\"\n").unwrap_err().to_string();
    assert!(error.contains("deferred.cap"), "{error}");
}
