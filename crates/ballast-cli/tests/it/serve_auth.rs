//! `ballast serve` and who may call it: no key, a wrong key and a right key; one principal never reads another's
//! replay, operation or run; the caller's `Authorization` never reaches the upstream, the tool's own headers do;
//! `/metrics` and `/status` behind an admin principal or on their own address.

use crate::support;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::gateway::{Gateway, call, chaos, client, executions, header, read};

const CONFIG: &str = r#"
version = 1
[store]
url = "sqlite://{dir}/ballast.db"
[[principals]]
name = "agents"
key_env = "TEST_AGENTS_KEY"
[[principals]]
name = "ops"
key_hash_env = "TEST_OPS_KEY_HASH"
admin = true
[[tools]]
name = "process_payment"
upstream = { method = "POST", url = "{chaos}/tools/process_payment" }
side_effects = true
per_try_timeout = "1s"
[[tools]]
name = "echo"
upstream = { method = "POST", url = "{chaos}/echo", headers = { authorization = { env = "TEST_ECHO_TOKEN", prefix = "Bearer " }, x-api-version = "2024-01" } }
per_try_timeout = "1s"
"#;

const AGENTS: &str = "Bearer agents-secret-1";
const OPS: &str = "Bearer ops-secret-2";

fn start(upstream: &ballast_chaos::ChaosServer) -> Gateway {
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
}

fn payment(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001", "amount": 500})
}

#[tokio::test(flavor = "multi_thread")]
async fn no_key_and_a_wrong_key_get_the_same_401_and_a_right_key_gets_through() {
    let upstream = chaos("").await;
    let gateway = start(&upstream);
    let client = client();
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
        let (status, response_headers, body) =
            read(call(&client, &gateway, "process_payment", &payment("o-auth"), &headers).await).await;
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
    assert_eq!(executions(&upstream, "o-auth").await, 0);
    for (name, value) in [
        ("authorization", AGENTS),
        ("x-api-key", "ops-secret-2"),
        ("api-key", "agents-secret-1"),
    ] {
        let key = format!("k-ok-{name}");
        let (status, _, body) = read(
            call(
                &client,
                &gateway,
                "process_payment",
                &payment(&key),
                &[(name, value), ("idempotency-key", &key)],
            )
            .await,
        )
        .await;
        assert_eq!(status, 200, "{name}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_principal_never_reads_another_s_replay_operation_or_run() {
    let upstream = chaos("[endpoints.process_payment]\nkey_mode = \"none\"\n").await;
    let gateway = start(&upstream);
    let client = client();
    let as_agents = [("authorization", AGENTS), ("idempotency-key", "k-shared")];
    let (status, _, _) = read(
        call(
            &client,
            &gateway,
            "process_payment",
            &payment("o-shared"),
            &as_agents,
        )
        .await,
    )
    .await;
    assert_eq!(status, 200);
    // The same key from another principal is another operation: its own execution, never the first one's answer.
    let as_ops = [("authorization", OPS), ("idempotency-key", "k-shared")];
    let operation = client
        .get(gateway.url("/v1/operations/k-shared"))
        .header("authorization", OPS)
        .send()
        .await
        .expect("answered");
    assert_eq!(operation.status(), 404, "ops cannot see agents' operation");
    let (status, headers, _) = read(
        call(
            &client,
            &gateway,
            "process_payment",
            &payment("o-shared"),
            &as_ops,
        )
        .await,
    )
    .await;
    assert_eq!((status, header(&headers, "idempotent-replayed")), (200, ""));
    assert_eq!(executions(&upstream, "o-shared").await, 2);
    let operation: Value = client
        .get(gateway.url("/v1/operations/k-shared"))
        .header("authorization", AGENTS)
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("json");
    assert_eq!(operation["status"], "completed", "{operation}");
    // A run id is per principal too: agents' 800 ms deadline is not ops' deadline.
    let body = json!({"anything": 1});
    let (status, _, _) = read(
        call(
            &client,
            &gateway,
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
        call(
            &client,
            &gateway,
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

#[tokio::test(flavor = "multi_thread")]
async fn the_callers_authorization_never_reaches_the_upstream_and_the_tools_own_headers_do() {
    let upstream = chaos("").await;
    let gateway = start(&upstream);
    let client = client();
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let (status, _, echoed) = read(
        call(
            &client,
            &gateway,
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

#[tokio::test(flavor = "multi_thread")]
async fn the_arguments_reach_the_upstream_byte_for_byte() {
    let upstream = chaos("").await;
    let gateway = start(&upstream);
    // A number no f64 holds, and keys out of order: a proxy that parsed and re-encoded would change both.
    let arguments = r#"{"z_last": 1, "amount": 123456789012345678901234.50, "a_first": [1.0, 2e3]}"#;
    let response = client()
        .post(gateway.url("/v1/tools/echo"))
        .header("authorization", AGENTS)
        .header("content-type", "application/json")
        .body(arguments)
        .send()
        .await
        .expect("answered");
    let (status, _, echoed) = read(response).await;
    assert_eq!(status, 200, "{echoed}");
    assert_eq!(echoed["raw"], arguments);
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_and_status_are_for_admin_principals_or_their_own_address() {
    let upstream = chaos("").await;
    let gateway = start(&upstream);
    let client = client();
    for path in ["/metrics", "/status"] {
        let status = |auth: Option<&'static str>| {
            let mut request = client.get(gateway.url(path));
            if let Some(auth) = auth {
                request = request.header("authorization", auth);
            }
            async move { request.send().await.expect("answered").status().as_u16() }
        };
        assert_eq!(status(None).await, 401, "{path}");
        assert_eq!(status(Some(AGENTS)).await, 403, "{path}: agents is not an admin");
        assert_eq!(status(Some(OPS)).await, 200, "{path}");
    }
    for path in ["/healthz", "/readyz"] {
        assert_eq!(
            client
                .get(gateway.url(path))
                .send()
                .await
                .expect("answered")
                .status(),
            200,
            "{path}"
        );
    }

    let separate = CONFIG.replace("[store]", "[server]\nadmin_listen = \"127.0.0.1:0\"\n[store]");
    let ops_hash: String = Sha256::digest(b"ops-secret-2")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let gateway = Gateway::start(
        &separate,
        &upstream,
        &[
            ("TEST_AGENTS_KEY", "agents-secret-1"),
            ("TEST_OPS_KEY_HASH", &ops_hash),
            ("TEST_ECHO_TOKEN", "t"),
        ],
    );
    let line = gateway.printed("admin endpoints");
    let admin = line
        .rsplit("http://")
        .next()
        .expect("an address")
        .trim()
        .to_owned();
    let metrics = client
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .expect("answered");
    assert_eq!(metrics.status(), 200, "the admin address needs no key");
    assert!(metrics.text().await.expect("text").contains("ballast_"));
    let on_main = client
        .get(gateway.url("/metrics"))
        .header("authorization", OPS)
        .send()
        .await
        .expect("answered");
    assert_eq!(
        on_main.status(),
        404,
        "not served on the main address when admin_listen is set"
    );
}
