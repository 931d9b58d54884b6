//! Who may call the gateway: no key, a wrong key and a right key; one principal never reads another's replay,
//! operation or run, and two principals sending one key are two operations at the upstream; the caller's
//! `Authorization` never reaches the upstream, the tool's own headers do; `/metrics` and `/status` behind an admin
//! principal.

use ballast_testkit::ConfigText;
use http::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{Gateway, Upstream, header, read};

/// The principals and tools of these tests: the point is the config (a key by hash, an admin, a tool whose
/// upstream has headers of its own), so it is written out.
const CONFIG: &str = r#"
version = 1
[store]
url = "sqlite::memory:"
[[principals]]
name = "agents"
key_env = "TEST_AGENTS_KEY"
[[principals]]
name = "ops"
key_hash_env = "TEST_OPS_KEY_HASH"
admin = true
[[tools]]
name = "process_payment"
upstream = { method = "POST", url = "http://chaos/tools/process_payment" }
side_effects = true
per_try_timeout = "1s"
[[tools]]
name = "echo"
upstream = { method = "POST", url = "http://chaos/echo", headers = { authorization = { env = "TEST_ECHO_TOKEN", prefix = "Bearer " }, x-api-version = "2024-01" } }
per_try_timeout = "1s"
"#;

const AGENTS: &str = "Bearer agents-secret-1";
const OPS: &str = "Bearer ops-secret-2";

async fn start(upstream: &Upstream) -> Gateway {
    let ops_hash: String = Sha256::digest(b"ops-secret-2")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    Gateway::start(
        CONFIG,
        upstream,
        &[
            ("TEST_AGENTS_KEY", "agents-secret-1"),
            ("TEST_OPS_KEY_HASH", &ops_hash),
            ("TEST_ECHO_TOKEN", "upstream-secret-3"),
        ],
    )
    .await
}

fn payment(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001", "amount": 500})
}

#[tokio::test]
async fn no_key_and_a_wrong_key_get_the_same_401_and_a_right_key_gets_through() {
    let upstream = Upstream::chaos("");
    let gateway = start(&upstream).await;
    let mut refusals = Vec::new();
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Basic agents-secret-1"),
        Some("Bearer agents-secret-1x"),
    ] {
        let mut headers = vec![("idempotency-key", "k-auth")];
        if let Some(auth) = auth {
            headers.push(("authorization", auth));
        }
        let (status, response_headers, body) = read(
            gateway
                .call("process_payment", &payment("o-auth"), &headers)
                .await,
        )
        .await;
        assert_eq!(
            (status, &body["code"]),
            (401, &json!("unauthorized")),
            "{auth:?}: {body}"
        );
        assert_eq!(header(&response_headers, "www-authenticate"), "Bearer");
        assert_eq!(header(&response_headers, "x-should-retry"), "false");
        let text = body.to_string();
        assert!(
            !text.contains("agents") && !text.contains("ops"),
            "no principal is named: {text}"
        );
        refusals.push(body);
    }
    assert!(
        refusals.windows(2).all(|w| w[0] == w[1]),
        "every refusal reads the same: {refusals:?}"
    );
    assert_eq!(upstream.executions("o-auth").await, 0);
    for (name, value) in [
        ("authorization", AGENTS),
        ("x-api-key", "ops-secret-2"),
        ("api-key", "agents-secret-1"),
    ] {
        let key = format!("k-ok-{name}");
        let headers = [(name, value), ("idempotency-key", key.as_str())];
        let (status, _, body) = read(gateway.call("process_payment", &payment(&key), &headers).await).await;
        assert_eq!(status, 200, "{name}: {body}");
    }
}

#[tokio::test(start_paused = true)]
async fn one_principal_never_reads_another_s_replay_operation_or_run() {
    let upstream = Upstream::chaos("[endpoints.process_payment]\nkey_mode = \"none\"\n");
    let gateway = start(&upstream).await;
    let as_agents = [("authorization", AGENTS), ("idempotency-key", "k-shared")];
    let (status, _, _) = read(
        gateway
            .call("process_payment", &payment("o-shared"), &as_agents)
            .await,
    )
    .await;
    assert_eq!(status, 200);
    // The same key from another principal is another operation: its own execution, never the first one's answer.
    let as_ops = [("authorization", OPS), ("idempotency-key", "k-shared")];
    let operation = gateway
        .without_body(Method::GET, "/v1/operations/k-shared", &[("authorization", OPS)])
        .await;
    assert_eq!(operation.status(), 404, "ops cannot see agents' operation");
    let (status, headers, _) = read(
        gateway
            .call("process_payment", &payment("o-shared"), &as_ops)
            .await,
    )
    .await;
    assert_eq!((status, header(&headers, "idempotent-replayed")), (200, ""));
    assert_eq!(upstream.executions("o-shared").await, 2);
    let operation = gateway.get_json_with("/v1/operations/k-shared", AGENTS).await;
    assert_eq!(operation["status"], "completed", "{operation}");
    // A run id is per principal too: agents' 800 ms deadline is not ops' deadline.
    let body = json!({"anything": 1});
    let (status, _, _) = read(
        gateway
            .call(
                "echo",
                &body,
                &[
                    ("authorization", AGENTS),
                    ("ballast-run-id", "run-x"),
                    ("ballast-timeout-ms", "800"),
                ],
            )
            .await,
    )
    .await;
    assert_eq!(status, 200);
    let (_, headers, _) = read(
        gateway
            .call(
                "echo",
                &body,
                &[("authorization", OPS), ("ballast-run-id", "run-x")],
            )
            .await,
    )
    .await;
    let remaining: u64 = header(&headers, "ballast-remaining-ms")
        .parse()
        .expect("remaining");
    assert!(
        remaining > 20_000,
        "ops' run-x has the default deadline, not agents': {remaining}"
    );
}

#[tokio::test]
async fn the_callers_authorization_never_reaches_the_upstream_and_the_tools_own_headers_do() {
    let upstream = Upstream::chaos("");
    let gateway = start(&upstream).await;
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let (status, _, echoed) = read(
        gateway
            .call(
                "echo",
                &json!({"order_id": "A-1"}),
                &[
                    ("authorization", AGENTS),
                    ("x-custom", "kept-back"),
                    ("cookie", "session=1"),
                    ("traceparent", traceparent),
                ],
            )
            .await,
    )
    .await;
    assert_eq!(status, 200, "{echoed}");
    let headers = &echoed["headers"];
    assert_eq!(
        headers["authorization"],
        json!(["Bearer upstream-secret-3"]),
        "{headers}"
    );
    assert_eq!(headers["x-api-version"], json!(["2024-01"]));
    assert!(
        headers.get("x-custom").is_none() && headers.get("cookie").is_none(),
        "an allow-list: {headers}"
    );
    assert!(
        !echoed.to_string().contains("agents-secret-1"),
        "the caller's key never leaves: {echoed}"
    );
    assert_eq!(headers["ballast-attempt"], json!(["1"]));
    assert!(headers.get("ballast-timeout-ms").is_some(), "{headers}");
    let sent = headers["traceparent"][0].as_str().expect("traceparent sent");
    assert!(
        sent.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
        "the caller's trace: {sent}"
    );
    assert_eq!(echoed["body"], json!({"order_id": "A-1"}));
}

#[tokio::test]
async fn the_arguments_reach_the_upstream_byte_for_byte() {
    let upstream = Upstream::chaos("");
    let gateway = start(&upstream).await;
    // A number no f64 holds, and keys out of order: a proxy that parsed and re-encoded would change both.
    let arguments = r#"{"z_last": 1, "amount": 123456789012345678901234.50, "a_first": [1.0, 2e3]}"#;
    let headers: [(&str, &[u8]); 2] = [
        ("authorization", AGENTS.as_bytes()),
        ("content-type", b"application/json"),
    ];
    let response = gateway
        .request(Method::POST, "/v1/tools/echo", &headers, arguments)
        .await;
    let (status, _, echoed) = read(response).await;
    assert_eq!(status, 200, "{echoed}");
    assert_eq!(echoed["raw"], arguments);
}

/// `/metrics` and `/status` on the main router, behind an admin principal; health, readiness and the dashboard's
/// page (which holds no data: it reads `/status` with the operator's key) for anyone. (On their own address,
/// `server.admin_listen`, they are the binary's: `ballast-cli`'s `serve_auth`.)
#[tokio::test]
async fn metrics_and_status_are_for_admin_principals() {
    let upstream = Upstream::chaos("");
    let gateway = start(&upstream).await;
    for path in ["/metrics", "/status"] {
        let status = |auth: Option<&'static str>| {
            let headers: Vec<(&str, &str)> = auth.map(|a| ("authorization", a)).into_iter().collect();
            let gateway = &gateway;
            async move {
                gateway
                    .without_body(Method::GET, path, &headers)
                    .await
                    .status()
                    .as_u16()
            }
        };
        assert_eq!(status(None).await, 401, "{path}");
        assert_eq!(status(Some(AGENTS)).await, 403, "{path}: agents is not an admin");
        assert_eq!(status(Some(OPS)).await, 200, "{path}");
    }
    for path in ["/healthz", "/readyz", "/dashboard"] {
        assert_eq!(
            gateway.without_body(Method::GET, path, &[]).await.status(),
            200,
            "{path}"
        );
    }
    let page = gateway.without_body(Method::GET, "/dashboard", &[]).await;
    assert_eq!(header(page.headers(), "content-type"), "text/html; charset=utf-8");
    let policy = header(page.headers(), "content-security-policy");
    assert!(
        policy.starts_with("default-src 'none'; script-src 'sha256-"),
        "{policy}"
    );
    let status = gateway.get_json_with("/status", OPS).await;
    assert_eq!(
        (&status["history"], &status["failures"]),
        (&Value::Null, &Value::Null),
        "no recorder, no history"
    );
}

/// Two principals, `dev` and `other`, and a deduplicating refund tool at the chaos upstream.
fn tenants() -> String {
    ConfigText::new()
        .principal("dev", "TEST_DEV_KEY")
        .principal("other", "TEST_OTHER_KEY")
        .tool(
            "create_refund",
            "http://chaos/tools/create_refund",
            "side_effects = true\nupstream_idempotency = \"keyed\"\nper_try_timeout = \"2s\"",
        )
        .build()
}

const KEYED: &str = "[endpoints.create_refund]\nkey_mode = \"keyed\"\n";
const DEV: &str = "Bearer dev-secret";
const OTHER: &str = "Bearer other-secret";

async fn start_tenants(upstream: &Upstream) -> Gateway {
    Gateway::start(
        &tenants(),
        upstream,
        &[("TEST_DEV_KEY", "dev-secret"), ("TEST_OTHER_KEY", "other-secret")],
    )
    .await
}

/// Regression: principal `other` reusing `dev`'s key with the same body got `dev`'s refund back as its own 200
/// while nothing ran for it (the upstream saw one key for both).
#[tokio::test]
async fn two_principals_with_one_caller_key_are_two_operations_at_the_upstream() {
    let upstream = Upstream::chaos(KEYED);
    let gateway = start_tenants(&upstream).await;
    let refund = json!({"op": "r-shared", "order_id": "A-1", "amount": 42.5});
    let mut answers = Vec::new();
    for auth in [DEV, OTHER] {
        let headers = [("authorization", auth), ("idempotency-key", "dev")];
        let (status, headers, body) = read(gateway.call("create_refund", &refund, &headers).await).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            header(&headers, "idempotent-replayed"),
            "",
            "{auth}: its own execution, not a replay"
        );
        assert_eq!(
            header(&headers, "ballast-idempotency-key"),
            "dev",
            "the caller's key, as it sent it"
        );
        answers.push(body);
    }
    assert_eq!(
        upstream.executions("r-shared").await,
        2,
        "each principal's refund ran once"
    );
    // Each principal's retry replays its own answer.
    for (auth, first) in [DEV, OTHER].iter().zip(&answers) {
        let headers = [("authorization", *auth), ("idempotency-key", "dev")];
        let (status, headers, body) = read(gateway.call("create_refund", &refund, &headers).await).await;
        assert_eq!((status, header(&headers, "idempotent-replayed")), (200, "true"));
        assert_eq!(&body, first);
    }
    assert_eq!(upstream.executions("r-shared").await, 2);
}

/// The same with keys derived from (run, step): two principals' runs with one id are two operations.
#[tokio::test]
async fn two_principals_with_one_run_and_step_are_two_operations_at_the_upstream() {
    let upstream = Upstream::chaos(KEYED);
    let gateway = start_tenants(&upstream).await;
    let refund = json!({"op": "r-derived", "order_id": "A-2", "amount": 7});
    for auth in [DEV, OTHER] {
        let headers = [
            ("authorization", auth),
            ("ballast-run-id", "run-1"),
            ("ballast-step-id", "refund"),
        ];
        let (status, headers, body) = read(gateway.call("create_refund", &refund, &headers).await).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(header(&headers, "idempotent-replayed"), "");
    }
    assert_eq!(upstream.executions("r-derived").await, 2);
}
