//! `ballast serve` on an open network, as a careless or hostile caller meets it: two tenants' keys kept apart at
//! the upstream, slow and idle callers bounded, runs bounded in memory, a store that goes away noticed, and
//! answers that say what happened.

mod support;

use serde_json::{Value, json};
use support::gateway::{Gateway, call, chaos, client, executions, header, read};

/// Two principals, `dev` and `other`, and tools at the chaos upstream: a deduplicating refund, and a
/// side-effecting tool that answers what it received (`echo_write`).
const TENANTS: &str = r#"
version = 1
[store]
url = "sqlite://{dir}/ballast.db"
[[principals]]
name = "dev"
key_env = "TEST_DEV_KEY"
[[principals]]
name = "other"
key_env = "TEST_OTHER_KEY"
[[tools]]
name = "create_refund"
upstream = { method = "POST", url = "{chaos}/tools/create_refund" }
side_effects = true
upstream_idempotency = "keyed"
per_try_timeout = "2s"
[[tools]]
name = "echo_write"
upstream = { method = "POST", url = "{chaos}/echo" }
side_effects = true
per_try_timeout = "2s"
"#;

const KEYED: &str = "[endpoints.create_refund]\nkey_mode = \"keyed\"\n";
const DEV: &str = "Bearer dev-secret";
const OTHER: &str = "Bearer other-secret";

fn start_tenants(upstream: &ballast_chaos::ChaosServer) -> Gateway {
    Gateway::start(
        TENANTS,
        upstream,
        &[("TEST_DEV_KEY", "dev-secret"), ("TEST_OTHER_KEY", "other-secret")],
    )
}

/// Regression: principal `other` reusing `dev`'s key with the same body got `dev`'s refund back as its own 200
/// while nothing ran for it (the upstream saw one key for both).
#[tokio::test(flavor = "multi_thread")]
async fn two_principals_with_one_caller_key_are_two_operations_at_the_upstream() {
    let upstream = chaos(KEYED).await;
    let gateway = start_tenants(&upstream);
    let client = client();
    let refund = json!({"op": "r-shared", "order_id": "A-1", "amount": 42.5});
    let mut answers = Vec::new();
    for auth in [DEV, OTHER] {
        let headers = [("authorization", auth), ("idempotency-key", "dev")];
        let (status, headers, body) =
            read(call(&client, &gateway, "create_refund", &refund, &headers).await).await;
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
        executions(&upstream, "r-shared").await,
        2,
        "each principal's refund ran once"
    );
    // Each principal's retry replays its own answer.
    for (auth, first) in [DEV, OTHER].iter().zip(&answers) {
        let headers = [("authorization", *auth), ("idempotency-key", "dev")];
        let (status, headers, body) =
            read(call(&client, &gateway, "create_refund", &refund, &headers).await).await;
        assert_eq!((status, header(&headers, "idempotent-replayed")), (200, "true"));
        assert_eq!(&body, first);
    }
    assert_eq!(executions(&upstream, "r-shared").await, 2);
}

/// The same with keys derived from (run, step): two principals' runs with one id are two operations.
#[tokio::test(flavor = "multi_thread")]
async fn two_principals_with_one_run_and_step_are_two_operations_at_the_upstream() {
    let upstream = chaos(KEYED).await;
    let gateway = start_tenants(&upstream);
    let client = client();
    let refund = json!({"op": "r-derived", "order_id": "A-2", "amount": 7});
    for auth in [DEV, OTHER] {
        let headers = [
            ("authorization", auth),
            ("ballast-run-id", "run-1"),
            ("ballast-step-id", "refund"),
        ];
        let (status, headers, body) =
            read(call(&client, &gateway, "create_refund", &refund, &headers).await).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(header(&headers, "idempotent-replayed"), "");
    }
    assert_eq!(executions(&upstream, "r-derived").await, 2);
}

/// What the upstream sees: a key of the principal's own — not the caller's, 36 printable characters, another for
/// another principal — and the same one after a restart (and on a fresh store), so a deduplicating upstream
/// still recognises a retry.
#[tokio::test(flavor = "multi_thread")]
async fn the_upstream_sees_the_principals_own_key_the_same_after_a_restart() {
    let upstream = chaos("").await;
    let gateway = start_tenants(&upstream);
    let client = client();
    let seen = |echoed: &Value| {
        echoed["headers"]["idempotency-key"][0]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let send = |gateway: &Gateway, auth: &'static str| {
        let (client, url) = (client.clone(), gateway.url("/v1/tools/echo_write"));
        async move {
            let response = client
                .post(url)
                .header("authorization", auth)
                .header("idempotency-key", "k-1")
                .json(&json!({"op": "e-1"}))
                .send()
                .await
                .expect("an answer");
            let (status, _, body) = read(response).await;
            assert_eq!(status, 200, "{body}");
            body
        }
    };
    let dev_key = seen(&send(&gateway, DEV).await);
    let other_key = seen(&send(&gateway, OTHER).await);
    assert_ne!(dev_key, "k-1", "the caller's key is not sent verbatim");
    assert_eq!(dev_key.len(), 36, "{dev_key}");
    assert!(dev_key.bytes().all(|b| b.is_ascii_graphic()));
    assert_ne!(dev_key, other_key, "two principals, two keys");
    // A restart on a fresh store: the call reaches the upstream again, under the same key.
    gateway.signal("-TERM");
    assert_eq!(gateway.wait_for_exit(), Some(0));
    for entry in std::fs::read_dir(gateway.dir()).expect("the gateway's directory") {
        let path = entry.expect("an entry").path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("ballast.db"))
        {
            std::fs::remove_file(path).expect("the store is removed");
        }
    }
    let gateway = gateway.restart();
    assert_eq!(seen(&send(&gateway, DEV).await), dev_key);
}
