//! A tool whose upstream is failing: the configured fallback answers and says so; without one, an open breaker
//! fails fast with `circuit_open`, telling how long it stays open and not inviting a retry.

use ballast_testkit::ConfigText;
use serde_json::json;

use crate::support::{Gateway, Upstream, header, read};

/// Two tools over a failing upstream, each with a fallback (a static answer, another tool), the tool they fall
/// back to, and a side effect whose breaker opens after two failures.
fn config() -> String {
    let retry = r#"per_try_timeout = "1s"
        retry = { max_attempts = 2, base = "10ms", cap = "10ms" }"#;
    ConfigText::new()
        .tool(
            "search_products",
            "http://chaos/tools/lookup_order",
            &format!("{retry}\nfallback_response = {{ results = [], note = \"search is down; try again later\" }}"),
        )
        .tool(
            "lookup_order",
            "http://chaos/tools/lookup_order",
            &format!("{retry}\nfallback_tool = \"lookup_order_mirror\""),
        )
        .tool(
            "lookup_order_mirror",
            "http://chaos/echo",
            "per_try_timeout = \"1s\"",
        )
        .tool(
            "create_refund",
            "http://chaos/tools/create_refund",
            r#"side_effects = true
            upstream_idempotency = "keyed"
            per_try_timeout = "1s"
            retry = { max_attempts = 1 }
            breaker = { consecutive_failures = 2, consecutive_spread = "0s", open_for = "30s", open_jitter = 0.0 }"#,
        )
        .build()
}

const FAILING: &str = r#"
[[scripts]]
endpoint = "lookup_order"
op = "o-down"
steps = ["503", "503", "503", "503"]
[[scripts]]
endpoint = "create_refund"
op = "o-open"
steps = ["500", "500", "500"]
"#;

#[tokio::test]
async fn a_failing_tool_is_answered_by_its_fallback_which_says_so() {
    let upstream = Upstream::chaos(FAILING);
    let gateway = Gateway::start(&config(), &upstream, &[]).await;
    let body = json!({"op": "o-down", "order_id": "A-1", "query": "red shoes"});
    let (status, headers, answer) = read(gateway.call("search_products", &body, &[]).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer,
        json!({"results": [], "note": "search is down; try again later"})
    );
    assert_eq!(header(&headers, "ballast-fallback"), "fallback_response");
    assert_eq!(
        header(&headers, "ballast-attempts"),
        "2",
        "the tool's own attempts are still reported"
    );
    // A fallback tool gets the same arguments.
    let (status, headers, answer) = read(gateway.call("lookup_order", &body, &[]).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(header(&headers, "ballast-fallback"), "lookup_order_mirror");
    assert_eq!(answer["body"], body, "{answer}");
}

/// Paused time: the breaker's 30 s open time does not pass while the test runs, whatever the machine's speed.
#[tokio::test(start_paused = true)]
async fn an_open_breaker_without_fallback_fails_fast_and_says_for_how_long() {
    let upstream = Upstream::chaos(FAILING);
    let gateway = Gateway::start(&config(), &upstream, &[]).await;
    let body = json!({"op": "o-open", "order_id": "A-1", "amount": 5});
    for key in ["k-open-1", "k-open-2"] {
        let (status, headers, answer) = read(
            gateway
                .call("create_refund", &body, &[("idempotency-key", key)])
                .await,
        )
        .await;
        assert_eq!(status, 500, "the upstream's own answer: {answer}");
        assert_eq!(header(&headers, "x-should-retry"), "false");
    }
    let (status, headers, answer) = read(
        gateway
            .call("create_refund", &body, &[("idempotency-key", "k-open-3")])
            .await,
    )
    .await;
    assert_eq!(
        (status, &answer["code"]),
        (503, &json!("circuit_open")),
        "{answer}"
    );
    assert_eq!(
        header(&headers, "x-should-retry"),
        "false",
        "a retry within the open time meets the same breaker"
    );
    let retry_after: u64 = header(&headers, "retry-after")
        .parse()
        .expect("Retry-After: the time left open");
    assert!((25..=31).contains(&retry_after), "{retry_after}");
    assert_eq!(header(&headers, "ballast-attempts"), "0");
    // Nothing was sent, so nothing was stored: the key is free for a later try.
    let operation = gateway.get_json("/v1/operations/k-open-3").await;
    assert_eq!(operation["status"], "not_found", "{operation}");
}
