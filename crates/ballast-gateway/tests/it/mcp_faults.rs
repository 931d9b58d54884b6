//! `/mcp` when an upstream MCP server fails: lost answers, garbage, its own errors, a breaker, a deadline, a server
//! that is down, untrusted annotations, and a client's cancellation — each a bounded, clear answer.

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::{RUN, V2025, call, config, refund, rpc};
use crate::support::{Gateway, Upstream};

#[tokio::test(start_paused = true)]
async fn an_answer_the_upstream_lost_is_outcome_unknown_and_never_sent_again() {
    let upstream = Upstream::chaos(
        "[[scripts]]\nendpoint = \"create_refund\"\nop = \"r-6\"\nsteps = [\"commit_then_lose\"]\n\
         [endpoints.create_refund]\nlose_with = \"hang\"",
    );
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let lost = call(&gateway, "shop_create_refund", refund("r-6"), &[RUN]).await;
    assert_eq!(lost["structuredContent"]["code"], "outcome_unknown", "{lost}");
    let operation = lost["structuredContent"]["operation"].as_str().unwrap();
    assert!(operation.starts_with("/v1/operations/"), "{lost}");
    assert!(
        lost["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Check whether it happened")
    );
    // The agent calls it again: the same operation, not a second refund.
    let again = call(&gateway, "shop_create_refund", refund("r-6"), &[RUN]).await;
    assert_eq!(again["structuredContent"]["code"], "outcome_unknown", "{again}");
    assert_eq!(upstream.executions("r-6").await, 1);
}

#[tokio::test(start_paused = true)]
async fn garbage_is_retried_for_a_read_and_never_for_a_side_effect() {
    let upstream = Upstream::chaos(
        "[[scripts]]\nendpoint = \"lookup_order\"\nop = \"l-8\"\nsteps = [\"garbage\", \"ok\"]\n\
         [[scripts]]\nendpoint = \"create_refund\"\nop = \"r-8\"\nsteps = [\"garbage\"]",
    );
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let read = call(
        &gateway,
        "shop_lookup_order",
        json!({"op": "l-8", "order_id": "A-8"}),
        &[],
    )
    .await;
    assert_eq!(
        (read["isError"].clone(), read["_meta"]["ballast/attempts"].clone()),
        (json!(false), json!(2)),
        "{read}"
    );
    let written = call(&gateway, "shop_create_refund", refund("r-8"), &[RUN]).await;
    assert_eq!(
        written["structuredContent"]["code"], "outcome_unknown",
        "{written}"
    );
    assert_eq!(written["_meta"]["ballast/attempts"], 1);
}

#[tokio::test(start_paused = true)]
async fn a_tools_own_error_is_an_answer_never_retried() {
    let upstream =
        Upstream::chaos("[[scripts]]\nendpoint = \"lookup_order\"\nop = \"l-9\"\nsteps = [\"is_error\"]");
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let answer = call(
        &gateway,
        "shop_lookup_order",
        json!({"op": "l-9", "order_id": "A-9"}),
        &[],
    )
    .await;
    assert_eq!(answer["isError"], true, "{answer}");
    assert_eq!(answer["_meta"]["ballast/attempts"], 1);
}

#[tokio::test(start_paused = true)]
async fn a_failing_server_opens_its_breaker_and_calls_fail_fast_with_advice() {
    let upstream = Upstream::chaos("[endpoints.lookup_order]\nerrors = { 503 = 1.0 }");
    let gateway = Gateway::start(
        &config("breaker = { consecutive_failures = 3, min_calls = 1000 }"),
        &upstream,
        &[],
    )
    .await;
    let mut last = Value::Null;
    // Failures in a row over time (a crowd failing at one instant is not a dead upstream).
    for i in 0..8 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        last = call(
            &gateway,
            "shop_lookup_order",
            json!({"op": format!("l-10-{i}"), "order_id": "A"}),
            &[],
        )
        .await;
        assert_eq!(last["isError"], true, "{last}");
    }
    assert_eq!(last["structuredContent"]["code"], "circuit_open", "{last}");
    assert!(
        last["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Nothing happened")
    );
    let status = gateway.get_json("/status").await;
    assert_eq!(
        status["mcp_servers"]["shop"]["breaker"]["state"], "open",
        "{status}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_calls_deadline_from_meta_bounds_it() {
    let upstream = Upstream::chaos("[endpoints.lookup_order]\nhang = 1.0");
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let started = ballast::clock::now();
    let params = json!({"name": "shop_lookup_order", "arguments": {"order_id": "A"}, "_meta": {"ballast/timeout_ms": 300}});
    let reply = rpc(&gateway, V2025, "tools/call", params, &[]).await;
    assert_eq!(
        reply["result"]["structuredContent"]["code"], "deadline_exceeded",
        "{reply}"
    );
    let took = ballast::clock::now().saturating_duration_since(started);
    assert!(took <= Duration::from_millis(400), "{took:?}");
}

#[tokio::test]
async fn an_upstream_servers_annotations_are_believed_only_when_trusted() {
    let lying = "[mcp]\nlying_annotations = true";
    for (trust, keyed) in [("", true), ("trust_annotations = true", false)] {
        let upstream = Upstream::chaos(lying);
        let gateway = Gateway::start(&config(trust), &upstream, &[]).await;
        let answer = call(&gateway, "shop_create_refund", refund("r-11"), &[]).await;
        let refused = answer["structuredContent"]["code"] == "idempotency_key_missing";
        assert_eq!(refused, keyed, "{trust}: {answer}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_server_that_is_down_is_named_when_its_tool_is_called() {
    let down = Upstream::router(axum::Router::new().route(
        "/mcp",
        axum::routing::post(|| async { http::StatusCode::SERVICE_UNAVAILABLE }),
    ));
    let gateway = Gateway::start(&config(""), &down, &[]).await;
    let listed = rpc(&gateway, V2025, "tools/list", json!({}), &[]).await;
    let names: Vec<&str> = (listed["result"]["tools"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["lookup_order"],
        "the gateway's own tools are still served"
    );
    let reply = rpc(
        &gateway,
        V2025,
        "tools/call",
        json!({"name": "shop_lookup_order", "arguments": {}}),
        &[],
    )
    .await;
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("shop") && message.contains("503"), "{reply}");
}

#[tokio::test(start_paused = true)]
async fn a_read_only_call_is_cancelled_by_its_clients_notification() {
    let upstream = Upstream::chaos("[endpoints.lookup_order]\nhang = 1.0");
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let caller = gateway.clone();
    let started = ballast::clock::now();
    let call = tokio::spawn(async move {
        let params = json!({"name": "shop_lookup_order", "arguments": {"order_id": "A"}});
        rpc(&caller, V2025, "tools/call", params, &[RUN]).await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Another client's notification (another run) names the same request id: it cancels nothing of this one's.
    for run in ["run-other", RUN.1] {
        let cancelled =
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
        let headers = [
            ("host", "127.0.0.1"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", V2025),
            ("ballast-run-id", run),
        ];
        let answer = gateway.post("/mcp", &cancelled, &headers).await;
        assert_eq!(answer.status(), 202);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(call.is_finished(), run == RUN.1, "{run}");
    }
    let reply = call.await.unwrap();
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("cancelled"),
        "{reply}"
    );
    let took = ballast::clock::now().saturating_duration_since(started);
    assert!(
        took < Duration::from_secs(1),
        "cancelled, not timed out: {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_declared_to_deduplicate_has_a_lost_answer_retried_under_the_same_key() {
    let upstream = Upstream::chaos(
        "[[scripts]]\nendpoint = \"create_refund\"\nop = \"r-13\"\nsteps = [\"commit_then_lose\", \"ok\"]\n\
         [endpoints.create_refund]\nlose_with = \"hang\"\nkey_mode = \"keyed\"",
    );
    let gateway = Gateway::start(&config("upstream_idempotency = \"keyed\""), &upstream, &[]).await;
    let refunded = call(&gateway, "shop_create_refund", refund("r-13"), &[RUN]).await;
    assert_eq!(refunded["isError"], false, "{refunded}");
    assert_eq!(refunded["_meta"]["ballast/attempts"], 2, "{refunded}");
    assert_eq!(
        upstream.executions("r-13").await,
        1,
        "the server replayed the first execution"
    );
}

#[tokio::test(start_paused = true)]
async fn metrics_say_each_servers_breaker_and_tools() {
    let upstream = Upstream::chaos("[endpoints.lookup_order]\nerrors = { 503 = 1.0 }");
    let config = config("breaker = { consecutive_failures = 3, min_calls = 1000 }")
        .replace("name = \"shop\"", "name = \"metered_shop\"");
    let gateway = Gateway::metered(&config, &[("chaos", &upstream)], &[]).await;
    for i in 0..8 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let op = format!("l-14-{i}");
        call(
            &gateway,
            "shop_lookup_order",
            json!({"op": op, "order_id": "A"}),
            &[],
        )
        .await;
    }
    let page = gateway.metrics().await;
    assert!(
        page.contains("ballast_mcp_server_breaker_state{server=\"metered_shop\"} 2"),
        "{page}"
    );
    assert!(
        page.contains("ballast_mcp_server_tools{server=\"metered_shop\"} 3"),
        "{page}"
    );
}
