//! `/mcp`: the gateway as an MCP server (docs/mcp.md), in process — what it serves and how a call is keyed and
//! answered (`mcp_faults` has the failures), over JSON-RPC POSTs as the MCP clients send
//! them. Its tools are the config's `[[tools]]` and the tools of an upstream MCP server: the chaos upstream's
//! `/mcp`, through the library's MCP client. The real clients (Python `mcp`, openai-agents, the TypeScript SDK)
//! are `ballast-cli`'s black-box tests.

use std::time::Duration;

use ballast_testkit::ConfigText;
use serde_json::{Value, json};

use crate::support::{Gateway, Upstream};

pub(crate) const V2025: &str = "2025-11-25";
pub(crate) const V2026: &str = "2026-07-28";

/// A gateway with one HTTP tool and the chaos upstream's MCP server under the prefix `shop_`, its `lookup_order`
/// declared read-only (an upstream MCP tool has side effects unless the config says otherwise).
pub(crate) fn config(server_extra: &str) -> String {
    ConfigText::new()
        .tool(
            "lookup_order",
            "http://chaos/tools/lookup_order",
            "description = \"Look up an order.\"\ninput_schema = { required = [\"order_id\"], properties = { order_id = { type = \"string\" } } }",
        )
        .raw(&format!(
            "[[mcp_servers]]\nname = \"shop\"\nurl = \"http://chaos/mcp\"\nprefix = \"shop_\"\nper_try_timeout = \"1s\"\n\
             retry = {{ max_attempts = 3, base = \"10ms\", cap = \"10ms\" }}\n{server_extra}\n\
             [mcp_servers.tools.lookup_order]\nside_effects = false\n"
        ))
        .build()
}

/// `method` with `params` to the gateway's `/mcp`, as a client of `version` with `headers`: the reply's last
/// JSON-RPC message (its JSON body, or the last event of its stream).
pub(crate) async fn rpc(
    gateway: &Gateway,
    version: &str,
    method: &str,
    params: Value,
    headers: &[(&str, &str)],
) -> Value {
    let mut messages = rpc_messages(gateway, version, method, params, headers).await;
    messages.pop().expect("a message")
}

/// [`rpc`], every message of the reply in order.
pub(crate) async fn rpc_messages(
    gateway: &Gateway,
    version: &str,
    method: &str,
    params: Value,
    headers: &[(&str, &str)],
) -> Vec<Value> {
    let mut params = params;
    if version == V2026 {
        params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(V2026);
        params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    }
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut all: Vec<(&str, &str)> = vec![
        ("host", "127.0.0.1"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", version),
        ("mcp-method", method),
    ];
    let name = params["name"].as_str().unwrap_or_default().to_owned();
    if !name.is_empty() {
        all.push(("mcp-name", &name));
    }
    all.extend_from_slice(headers);
    let response = gateway.post("/mcp", &message, &all).await;
    let status = response.status();
    let text = crate::support::text(response).await;
    assert_eq!(status, 200, "{text}");
    let events: Vec<&str> = (text.lines())
        .filter_map(|line| line.strip_prefix("data:"))
        .filter(|data| !data.trim().is_empty())
        .collect();
    let messages = if events.is_empty() {
        vec![text.as_str()]
    } else {
        events
    };
    (messages.into_iter())
        .map(|m| serde_json::from_str(m).unwrap_or_else(|e| panic!("{e}: {text}")))
        .collect()
}

/// `tools/call` of `tool` with `arguments`, the result (panics on a JSON-RPC error).
pub(crate) async fn call(gateway: &Gateway, tool: &str, arguments: Value, headers: &[(&str, &str)]) -> Value {
    let reply = rpc(
        gateway,
        V2025,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
        headers,
    )
    .await;
    assert!(reply.get("error").is_none(), "{reply}");
    reply["result"].clone()
}

pub(crate) fn refund(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001", "amount": 500})
}

pub(crate) const RUN: (&str, &str) = ("ballast-run-id", "run-1");

#[tokio::test]
async fn tools_of_the_config_and_of_the_upstream_server_are_listed_together_and_called() {
    let upstream = Upstream::chaos("");
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    for version in [V2025, V2026] {
        let listed = rpc(&gateway, version, "tools/list", json!({}), &[]).await;
        let tools = listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"));
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(
            names,
            [
                "lookup_order",
                "shop_lookup_order",
                "shop_create_refund",
                "shop_process_payment"
            ]
        );
        assert_eq!(tools[0]["description"], "Look up an order.");
        assert_eq!(
            tools[0]["inputSchema"]["type"], "object",
            "the object type is written for the client"
        );
        assert!(
            tools[1]["inputSchema"]["properties"]["order_id"].is_object(),
            "the upstream's schema: {}",
            tools[1]
        );
    }
    let own = call(
        &gateway,
        "lookup_order",
        json!({"op": "l-1", "order_id": "A-1"}),
        &[],
    )
    .await;
    assert_eq!(
        (
            own["isError"].clone(),
            own["structuredContent"]["order_id"].clone()
        ),
        (json!(false), json!("A-1"))
    );
    let proxied = call(
        &gateway,
        "shop_lookup_order",
        json!({"op": "l-2", "order_id": "A-2"}),
        &[],
    )
    .await;
    assert_eq!(proxied["structuredContent"]["order_id"], "A-2", "{proxied}");
    assert_eq!(proxied["_meta"]["ballast/attempts"], 1);
    // A 2026-07-28 client requires `resultType`, which a 2025-11-25 server's result does not carry.
    let params = json!({"name": "shop_lookup_order", "arguments": {"op": "l-3", "order_id": "A-3"}});
    let stateless = rpc(&gateway, V2026, "tools/call", params, &[]).await;
    assert_eq!(stateless["result"]["resultType"], "complete", "{stateless}");
    let refunded = call(&gateway, "shop_create_refund", refund("r-1"), &[RUN]).await;
    assert_eq!(refunded["structuredContent"]["status"], "succeeded", "{refunded}");
    assert_eq!(upstream.executions("r-1").await, 1);
}

#[tokio::test]
async fn the_same_side_effect_in_the_same_run_runs_once_and_replays() {
    let upstream = Upstream::chaos("");
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let first = call(&gateway, "shop_create_refund", refund("r-2"), &[RUN]).await;
    let again = call(&gateway, "shop_create_refund", refund("r-2"), &[RUN]).await;
    assert_eq!(again["structuredContent"], first["structuredContent"]);
    assert_eq!(again["_meta"]["ballast/replayed"], true, "{again}");
    assert_eq!(upstream.executions("r-2").await, 1);
    // Another run is another operation; so is a step, or a key in `_meta`.
    call(
        &gateway,
        "shop_create_refund",
        refund("r-2"),
        &[("ballast-run-id", "run-2")],
    )
    .await;
    assert_eq!(upstream.executions("r-2").await, 2);
    let keyed = json!({"name": "shop_create_refund", "arguments": refund("r-3"), "_meta": {"ballast/idempotency_key": "k-r-3"}});
    for _ in 0..2 {
        let reply = rpc(&gateway, V2025, "tools/call", keyed.clone(), &[]).await;
        assert_eq!(
            reply["result"]["_meta"]["ballast/idempotency_key"], "k-r-3",
            "{reply}"
        );
    }
    assert_eq!(upstream.executions("r-3").await, 1);
}

#[tokio::test]
async fn a_side_effect_with_nothing_to_key_it_is_refused_with_advice_and_runs_nowhere() {
    let upstream = Upstream::chaos("");
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let refused = call(&gateway, "shop_create_refund", refund("r-4"), &[]).await;
    assert_eq!(refused["isError"], true);
    assert_eq!(refused["structuredContent"]["code"], "idempotency_key_missing");
    assert!(
        refused["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("ballast-run-id"),
        "{refused}"
    );
    assert_eq!(upstream.executions("r-4").await, 0);
}

#[tokio::test]
async fn protocol_mistakes_are_json_rpc_errors() {
    let upstream = Upstream::chaos("");
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let reply = rpc(
        &gateway,
        V2025,
        "tools/call",
        json!({"name": "nope", "arguments": {}}),
        &[],
    )
    .await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(
        reply["error"]["data"]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("shop_create_refund"))
    );
}

#[tokio::test(start_paused = true)]
async fn sixteen_concurrent_calls_of_one_operation_execute_once() {
    let upstream =
        Upstream::chaos("[endpoints.create_refund]\nlatency = { p50 = \"200ms\", p99 = \"200ms\" }");
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let calls = (0..16).map(|_| call(&gateway, "shop_create_refund", refund("r-5"), &[RUN]));
    let results = futures::future::join_all(calls).await;
    for result in &results {
        let done = result["structuredContent"]["status"] == "succeeded";
        let waiting = result["structuredContent"]["code"] == "idempotency_in_progress";
        assert!(done || waiting, "{result}");
    }
    assert!(results.iter().any(|r| r["isError"] == false));
    assert_eq!(upstream.executions("r-5").await, 1);
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_goes_away_mid_side_effect_leaves_it_to_finish_and_the_retry_replays() {
    let upstream =
        Upstream::chaos("[endpoints.create_refund]\nlatency = { p50 = \"500ms\", p99 = \"500ms\" }");
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let gone = tokio::time::timeout(
        Duration::from_millis(100),
        call(&gateway, "shop_create_refund", refund("r-7"), &[RUN]),
    )
    .await;
    assert!(gone.is_err(), "the caller gave up before the answer");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        upstream.executions("r-7").await,
        1,
        "the refund ran on to its answer"
    );
    let again = call(&gateway, "shop_create_refund", refund("r-7"), &[RUN]).await;
    assert_eq!(again["_meta"]["ballast/replayed"], true, "{again}");
    assert_eq!(upstream.executions("r-7").await, 1);
}

/// The chaos tools claim `idempotentHint: true`: it never makes a sent side effect safe to send again.
#[tokio::test]
async fn an_upstream_tools_progress_reaches_the_caller_on_its_stream() {
    let upstream = Upstream::chaos("");
    let gateway = Gateway::start(&config(""), &upstream, &[]).await;
    let params = json!({"name": "shop_lookup_order", "arguments": {"order_id": "A"}, "_meta": {"progressToken": "p-1"}});
    let messages = rpc_messages(&gateway, V2025, "tools/call", params, &[]).await;
    let (result, notifications) = messages.split_last().expect("messages");
    assert_eq!(
        result["result"]["structuredContent"]["order_id"], "A",
        "{messages:?}"
    );
    let progress: Vec<(Value, Value)> = (notifications.iter())
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| {
            (
                m["params"]["progressToken"].clone(),
                m["params"]["progress"].clone(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        [(json!("p-1"), json!(0.0)), (json!("p-1"), json!(1.0))],
        "{messages:?}"
    );
    // Without a token, no progress is asked for and the answer is one JSON body.
    let plain = rpc_messages(
        &gateway,
        V2025,
        "tools/call",
        json!({"name": "shop_lookup_order", "arguments": {"order_id": "A"}}),
        &[],
    )
    .await;
    assert_eq!(plain.len(), 1, "{plain:?}");
}

#[tokio::test]
async fn two_tenants_with_the_same_run_and_arguments_are_two_operations() {
    let upstream = Upstream::chaos("");
    let config = format!(
        "{}[[principals]]\nname = \"a\"\nkey_env = \"KEY_A\"\n[[principals]]\nname = \"b\"\nkey_env = \"KEY_B\"\n",
        config("")
    );
    let gateway = Gateway::start(&config, &upstream, &[("KEY_A", "key-a"), ("KEY_B", "key-b")]).await;
    let unauthorized = gateway
        .post(
            "/mcp",
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            &[],
        )
        .await;
    assert_eq!(unauthorized.status(), 401);
    let mut ids = Vec::new();
    for key in ["Bearer key-a", "Bearer key-b", "Bearer key-a"] {
        let result = call(
            &gateway,
            "shop_create_refund",
            refund("r-12"),
            &[RUN, ("authorization", key)],
        )
        .await;
        ids.push(result["structuredContent"]["id"].clone());
    }
    assert_ne!(ids[0], ids[1], "b's refund is its own, never a's replayed");
    assert_eq!(ids[0], ids[2], "a's second call is a's first operation");
    assert_eq!(upstream.executions("r-12").await, 2);
}
