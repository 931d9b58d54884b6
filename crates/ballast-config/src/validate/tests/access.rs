//! Who can reach the gateway and what reaches an upstream: `listen` and `admin_listen`, admin principals, the
//! shutdown's drain delay, and a tool upstream's `headers`.

use super::*;

const PRINCIPAL: &str = "[[principals]]\nname = \"agents\"\nkey_env = \"KEY_AGENTS\"\n";

/// A tool whose upstream sends `headers` (an inline table's contents).
fn headers(headers: &str) -> String {
    format!(
        "[[tools]]\nname = \"pay\"\nupstream = {{ url = \"http://127.0.0.1:9000/pay\", headers = {{ {headers} }} }}\n"
    )
}

#[test]
fn headers_are_read_in_file_order_with_names_lower_cased() {
    let c = load(&headers(
        r#"X-Api-Version = "2024-01", Authorization = { env = "PAY_TOKEN", prefix = "Bearer " }, x-trace-tag = { env = "TAG" }, accept = "application/json""#,
    ))
    .unwrap();
    let h = &c.tools[0].upstream.headers;
    let names: Vec<&str> = h.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["x-api-version", "authorization", "x-trace-tag", "accept"]);
    assert_eq!(h[0].value, HeaderValueSource::Literal("2024-01".into()));
    assert_eq!(
        h[1].value,
        HeaderValueSource::Env {
            env: "PAY_TOKEN".into(),
            prefix: "Bearer ".into()
        }
    );
    assert_eq!(
        h[2].value,
        HeaderValueSource::Env {
            env: "TAG".into(),
            prefix: String::new()
        }
    );
    // Without headers, none.
    assert!(load(TOOL).unwrap().tools[0].upstream.headers.is_empty());
}

#[test]
fn every_header_rule_has_its_message() {
    let env_rule =
        "is not an environment variable name (ASCII letters, digits and _, not starting with a digit)";
    let cases: Vec<(String, String)> = vec![
        (headers(r#""x y" = "1""#),
         r#"tools[0].upstream.headers.x y: "x y" is not an HTTP header name (RFC 9110: letters, digits and !#$%&'*+-.^_`|~, at least one)"#.into()),
        (headers(r#""" = "1""#),
         r#"tools[0].upstream.headers.: "" is not an HTTP header name (RFC 9110: letters, digits and !#$%&'*+-.^_`|~, at least one)"#.into()),
        (headers(r#""x:y" = "1""#),
         r#"tools[0].upstream.headers.x:y: "x:y" is not an HTTP header name (RFC 9110: letters, digits and !#$%&'*+-.^_`|~, at least one)"#.into()),
        (headers(r#"Host = "example.com""#),
         r#"tools[0].upstream.headers.Host: "host" cannot be configured: Ballast sets it from the request it sends (the upstream's URL and the call's body)"#.into()),
        (headers(r#"content-length = "3""#),
         r#"tools[0].upstream.headers.content-length: "content-length" cannot be configured: Ballast sets it from the request it sends (the upstream's URL and the call's body)"#.into()),
        (headers(r#"idempotency-key = "k""#),
         r#"tools[0].upstream.headers.idempotency-key: "idempotency-key" cannot be configured: Ballast sends the call's own idempotency key"#.into()),
        (headers(r#"traceparent = { env = "TP" }"#),
         r#"tools[0].upstream.headers.traceparent: "traceparent" cannot be configured: Ballast sends the call's own trace context"#.into()),
        (headers(r#"Ballast-Deadline = "1""#),
         r#"tools[0].upstream.headers.Ballast-Deadline: "ballast-deadline" cannot be configured: ballast- headers are Ballast's own (attempt, deadline, run, step, priority)"#.into()),
        (headers(r#"x-envoy-expected-rq-timeout-ms = "100""#),
         r#"tools[0].upstream.headers.x-envoy-expected-rq-timeout-ms: "x-envoy-expected-rq-timeout-ms" cannot be configured: Ballast sends what is left of the call's deadline"#.into()),
        (headers(r#"x-note = "line\nbreak""#),
         "tools[0].upstream.headers.x-note: is not a valid header value: use visible ASCII characters, spaces and tabs (no line breaks or control characters)".into()),
        (headers(r#"x-note = "café""#),
         "tools[0].upstream.headers.x-note: is not a valid header value: use visible ASCII characters, spaces and tabs (no line breaks or control characters)".into()),
        (headers(r#"x-a = "1", X-A = "2""#),
         r#"tools[0].upstream.headers.X-A: "x-a" is already used by tools[0].upstream.headers.x-a"#.into()),
        (headers(r#"authorization = { prefix = "Bearer " }"#),
         "tools[0].upstream.headers.authorization.env: is required".into()),
        (headers(r#"authorization = { env = "PAY-TOKEN" }"#),
         format!(r#"tools[0].upstream.headers.authorization.env: "PAY-TOKEN" {env_rule}"#)),
        (headers(r#"authorization = { env = "T", prefix = "Bearer\r\n" }"#),
         r#"tools[0].upstream.headers.authorization.prefix: "Bearer\r\n" cannot begin a header value: use visible ASCII characters, spaces and tabs (no line breaks or control characters)"#.into()),
    ];
    for (body, expected) in cases {
        assert_eq!(error(&body), expected, "for:\n{body}");
    }
}

#[test]
fn a_literal_credential_is_refused_and_never_repeated() {
    for name in [
        "authorization",
        "Proxy-Authorization",
        "api-key",
        "X-API-Key",
        "cookie",
    ] {
        let e = error(&headers(&format!(r#""{name}" = "Bearer sk-live-123""#)));
        let lower = name.to_ascii_lowercase();
        assert_eq!(
            e,
            format!(
                r#"tools[0].upstream.headers.{name}: a literal value for "{lower}" would put a secret in the config file; secrets belong in the environment: {lower} = {{ env = "VAR" }} (with prefix = "Bearer " for a bearer token)"#
            )
        );
        assert!(!e.contains("sk-live"), "{e}");
    }
    // From the environment, they are fine.
    load(&headers(
        r#"cookie = { env = "SESSION" }, x-api-key = { env = "KEY" }"#,
    ))
    .unwrap();
}

#[test]
fn header_errors_carry_the_line_of_their_header() {
    let body = "[[tools]]\nname = \"pay\"\n[tools.upstream]\nurl = \"http://h/pay\"\n[tools.upstream.headers]\n\
                x-ok = \"1\"\nAuthorization = \"Bearer x\"\n";
    let errors = load(body).unwrap_err();
    let lines: Vec<_> = errors.errors().iter().map(|e| (e.path(), e.line())).collect();
    assert_eq!(
        lines,
        [(Some("tools[0].upstream.headers.Authorization"), Some(8))]
    );
}

#[test]
fn a_header_value_of_another_type_or_an_unknown_key_is_a_syntax_error_with_its_path() {
    let e = error(&headers("x-n = 3"));
    assert!(
        e.starts_with(r#"tools[0].upstream.headers.x-n: invalid type: integer `3`, expected a string, or a table such as { env = "VAR", prefix = "Bearer " }"#),
        "{e}"
    );
    let e = error(&headers(r#"authorization = { evn = "T" }"#));
    assert!(
        e.starts_with(
            "tools[0].upstream.headers.authorization.evn: unknown field `evn`, expected `env` or `prefix`"
        ),
        "{e}"
    );
}

#[test]
fn listen_off_loopback_needs_a_principal() {
    let open = "server.listen: 0.0.0.0:8080 is not a loopback address and no [[principals]] are configured: \
                anyone who can reach it could call every tool; add a principal or listen on 127.0.0.1";
    assert_eq!(error("[server]\nlisten = \"0.0.0.0:8080\""), open);
    assert_eq!(
        error("[server]\nlisten = \"[::]:9000\""),
        "server.listen: [::]:9000 is not a loopback address and no [[principals]] are configured: anyone who \
         can reach it could call every tool; add a principal or listen on 127.0.0.1"
    );
    assert!(error("[server]\nlisten = \"10.1.2.3:8080\"").starts_with("server.listen: 10.1.2.3:8080 is not"));
    // Loopback, in any of its forms, needs none.
    for listen in [
        "127.0.0.1:8080",
        "127.0.0.2:80",
        "[::1]:8080",
        "[::ffff:127.0.0.1]:8080",
    ] {
        load(&format!("[server]\nlisten = \"{listen}\"")).unwrap();
    }
    // With a principal, any address.
    let c = load(&format!("[server]\nlisten = \"0.0.0.0:8080\"\n{PRINCIPAL}")).unwrap();
    assert_eq!(c.server.listen.to_string(), "0.0.0.0:8080");
    // A principal that is itself broken is reported alone: one was written.
    assert_eq!(
        error("[server]\nlisten = \"0.0.0.0:8080\"\n[[principals]]\nname = \"a\""),
        "principals[0]: needs one of key_env or key_hash_env"
    );
    // An unparsable listen is reported as such, not also as open.
    assert!(error("[server]\nlisten = \"0.0.0.0\"").contains("is not an IP address and port"));
}

#[test]
fn admin_listen_has_an_address_of_its_own_and_may_be_off_loopback() {
    let c = load("[server]\nadmin_listen = \"0.0.0.0:9091\"").unwrap();
    assert_eq!(c.server.admin_listen, Some("0.0.0.0:9091".parse().unwrap()));
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:8080");
    let shared = |admin: &str, listen: &str| {
        format!(
            "server.admin_listen: {admin} overlaps server.listen ({listen}): /metrics and /status need an address \
             of their own (another port), or leave admin_listen out to serve them on listen"
        )
    };
    assert_eq!(
        error("[server]\nadmin_listen = \"127.0.0.1:8080\""),
        shared("127.0.0.1:8080", "127.0.0.1:8080")
    );
    assert_eq!(
        error("[server]\nadmin_listen = \"0.0.0.0:8080\""),
        shared("0.0.0.0:8080", "127.0.0.1:8080")
    );
    assert_eq!(
        error(&format!(
            "[server]\nlisten = \"[::]:80\"\nadmin_listen = \"127.0.0.1:80\"\n{PRINCIPAL}"
        )),
        shared("127.0.0.1:80", "[::]:80")
    );
    assert_eq!(
        error("[server]\nadmin_listen = \"localhost:9091\""),
        r#"server.admin_listen: "localhost:9091" is not an IP address and port (e.g. "127.0.0.1:8080" or "[::1]:8080")"#
    );
    load("[server]\nadmin_listen = \"127.0.0.1:8081\"").unwrap();
}

#[test]
fn principals_are_not_admins_unless_they_say_so() {
    let c = load(&format!(
        "{PRINCIPAL}[[principals]]\nname = \"ops\"\nkey_hash_env = \"KEY_OPS\"\nadmin = true\n"
    ))
    .unwrap();
    let admins: Vec<(&str, bool)> = c.principals.iter().map(|p| (p.name.as_str(), p.admin)).collect();
    assert_eq!(admins, [("agents", false), ("ops", true)]);
    let e = error("[[principals]]\nname = \"ops\"\nkey_env = \"K\"\nadmin = \"yes\"");
    assert!(
        e.starts_with("principals[0].admin: invalid type: string \"yes\", expected a boolean"),
        "{e}"
    );
}

#[test]
fn drain_delay_is_at_most_grace() {
    let c = load("[server]\ndrain_delay = \"5s\"\ngrace = \"5s\"").unwrap();
    assert_eq!((c.server.drain_delay, c.server.grace), (secs(5), secs(5)));
    let c = load("[server]\ndrain_delay = \"0s\"").unwrap();
    assert_eq!(c.server.drain_delay, Duration::ZERO);
    assert_eq!(
        error("[server]\ndrain_delay = \"11s\""),
        "server.drain_delay: 11s must be at most server.grace (10s)"
    );
    assert_eq!(
        error("[server]\ndrain_delay = \"2s\"\ngrace = \"1500ms\""),
        "server.drain_delay: 2s must be at most server.grace (1500ms)"
    );
    assert_eq!(
        error("[server]\ndrain_delay = \"1\""),
        r#"server.drain_delay: "1" is not a duration: units are required (e.g. "1s" or "1ms")"#
    );
    // Left out with a shorter grace, it is the grace: shortening one does not break the other.
    let c = load("[server]\ngrace = \"300ms\"").unwrap();
    assert_eq!(c.server.drain_delay, ms(300));
}
