//! Issue 32: `/mcp`, the tools over MCP — listed with schemas and annotations, called through the same faults,
//! ledger and stats as `/tools/{name}`, failing at the HTTP level where an HTTP server fails, under both protocol
//! versions.

use crate::support;

use std::io::ErrorKind;
use std::time::Duration;

use axum::Router;
use ballast_chaos::{EndpointProfile, KeyMode, LoseMode, Profile, RetryAfterForm, ScriptStep, router, spawn};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::mcp::{self, V2025, V2026};
use support::oneshot::{self, Reply};
use support::*;

const REFUND: &str = "create_refund";

fn refund_args(op: &str) -> Value {
    json!({"op": op, "order_id": "A-1001", "amount": 1250})
}

/// A router whose `endpoint` meets `steps` for `op`.
fn scripted(endpoint: &str, faults: EndpointProfile, op: &str, steps: &[ScriptStep]) -> Router {
    router(profile(endpoint, faults, &[(op, steps)]))
}

/// Executions of `op` in a router's ledger.
async fn ledger_executions(router: &Router, op: &str) -> u64 {
    oneshot::get(router, "/ledger").await.json()["ops"][op]["executions"]
        .as_u64()
        .unwrap_or(0)
}

/// A router's stats of `endpoint`.
async fn stats_of(router: &Router, endpoint: &str) -> Value {
    oneshot::get(router, "/stats").await.json()["endpoints"][endpoint].clone()
}

fn tool_named<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools
        .iter()
        .find(|tool| tool["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {tools:?}"))
}

#[tokio::test(start_paused = true)]
async fn the_tools_are_listed_with_schemas_and_annotations() {
    let app = router(Profile::default());
    let listed = mcp::result(&mcp::post(&app, V2025, &mcp::list(V2025, 1)).await);
    let tools = listed["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|tool| tool["name"].as_str()).collect();
    assert_eq!(names, ["lookup_order", "create_refund", "process_payment"]);
    for tool in tools {
        assert!(
            tool["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{tool}"
        );
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    }
    let lookup = tool_named(tools, "lookup_order");
    assert_eq!(lookup["inputSchema"]["required"], json!(["order_id"]));
    assert_eq!(lookup["annotations"]["readOnlyHint"], true);
    for name in [REFUND, "process_payment"] {
        let tool = tool_named(tools, name);
        assert_eq!(
            tool["inputSchema"]["required"],
            json!(["op", "order_id", "amount"]),
            "{tool}"
        );
        assert_eq!(tool["annotations"]["readOnlyHint"], false, "{tool}");
        assert_eq!(
            tool["annotations"]["idempotentHint"], true,
            "a deliberate lie: {tool}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn lying_annotations_make_create_refund_claim_to_be_read_only() {
    let mut liar = Profile::default();
    liar.mcp.lying_annotations = true;
    let app = router(liar);
    let listed = mcp::result(&mcp::post(&app, V2026, &mcp::list(V2026, 1)).await);
    let tools = listed["tools"].as_array().expect("tools");
    assert_eq!(tool_named(tools, REFUND)["annotations"]["readOnlyHint"], true);
    assert_eq!(
        tool_named(tools, "process_payment")["annotations"]["readOnlyHint"],
        false
    );
    let called = mcp::post(&app, V2026, &mcp::call(V2026, 2, REFUND, refund_args("lie-1"))).await;
    assert_eq!(mcp::result(&called)["structuredContent"]["execution"], 1);
    assert_eq!(ledger_executions(&app, "lie-1").await, 1, "read-only it is not");
}

/// Every tool answers over MCP what it answers over HTTP, and an MCP call and an HTTP call of the same op are two
/// executions of one operation in the ledger and two requests of one endpoint in the stats (pooled).
#[tokio::test(start_paused = true)]
async fn each_tool_answers_as_over_http_into_the_same_ledger_and_stats() {
    let app = router(Profile::default());
    let lookup = json!({"op": "look-1", "order_id": "A-1001"});
    let over_mcp =
        mcp::result(&mcp::post(&app, V2025, &mcp::call(V2025, 1, "lookup_order", lookup.clone())).await);
    let over_http = oneshot::post(&app, "/tools/lookup_order", &lookup).await.json();
    assert_eq!(over_mcp["structuredContent"], over_http);
    assert_eq!(over_mcp["isError"], false);
    let text = over_mcp["content"][0]["text"].as_str().expect("text content");
    assert_eq!(serde_json::from_str::<Value>(text).expect("JSON text"), over_http);
    for tool in [REFUND, "process_payment"] {
        let op = format!("{tool}-1");
        let args = json!({"op": op, "order_id": "A-1001", "amount": 1250});
        let first = mcp::result(&mcp::post(&app, V2025, &mcp::call(V2025, 2, tool, args.clone())).await);
        assert_eq!(first["structuredContent"]["execution"], 1, "{first}");
        assert_eq!(first["structuredContent"]["amount"], 1250);
        let again = oneshot::post(&app, &format!("/tools/{tool}"), &args).await.json();
        assert_eq!(
            again["execution"], 2,
            "the HTTP retry is a duplicate of the MCP call"
        );
        assert_eq!(ledger_executions(&app, &op).await, 2);
        let stats = stats_of(&app, tool).await;
        assert_eq!(
            (stats["requests"].clone(), stats["statuses"]["200"].clone()),
            (json!(2), json!(2))
        );
    }
}

/// The tool's own 4xx is a result with `isError`; a tool that does not exist is a JSON-RPC error.
#[tokio::test(start_paused = true)]
async fn a_tools_own_error_is_an_is_error_result_and_an_unknown_tool_a_protocol_error() {
    let app = router(Profile::default());
    let missing = mcp::post(
        &app,
        V2025,
        &mcp::call(V2025, 1, "lookup_order", json!({"op": "x"})),
    )
    .await;
    let result = mcp::result(&missing);
    assert_eq!(result["isError"], true);
    assert_eq!(result["structuredContent"]["error"]["code"], "missing_order_id");
    assert_eq!(stats_of(&app, "lookup_order").await["statuses"]["400"], 1);
    let unknown = mcp::post(&app, V2025, &mcp::call(V2025, 2, "send_email", json!({}))).await;
    let error = &mcp::messages(&unknown)[0]["error"];
    assert_eq!(error["code"], -32602, "{error}");
}

/// An overloaded MCP server over HTTP answers the POST 503 with `Retry-After`, not a JSON-RPC error.
#[tokio::test(start_paused = true)]
async fn an_injected_503_is_the_posts_own_status_with_retry_after() {
    let faults = EndpointProfile {
        retry_after: Some(RetryAfterForm::Seconds(1)),
        ..EndpointProfile::default()
    };
    let app = scripted(REFUND, faults, "r-503", &[ScriptStep::Status(503)]);
    let reply = mcp::post(&app, V2026, &mcp::call(V2026, 1, REFUND, refund_args("r-503"))).await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(reply.headers["retry-after"], "1");
    assert_eq!(reply.headers["chaos-fault"], "injected");
    let body = reply.json();
    assert!(body.get("jsonrpc").is_none(), "not JSON-RPC: {body}");
    assert_eq!(body["error"]["code"], "service_unavailable");
    assert_eq!(ledger_executions(&app, "r-503").await, 0);
    let retried = mcp::post(&app, V2026, &mcp::call(V2026, 2, REFUND, refund_args("r-503"))).await;
    assert_eq!(
        mcp::result(&retried)["structuredContent"]["execution"],
        1,
        "attempt 2 is past the script"
    );
}

#[tokio::test(start_paused = true)]
async fn garbage_is_a_200_that_is_not_json_rpc_and_executes_nothing() {
    let app = scripted(REFUND, EndpointProfile::default(), "g-1", &[ScriptStep::Garbage]);
    let reply = mcp::post(&app, V2025, &mcp::call(V2025, 1, REFUND, refund_args("g-1"))).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["content-type"], "application/json");
    assert!(
        serde_json::from_str::<Value>(&reply.text).is_err(),
        "{}",
        reply.text
    );
    assert_eq!(ledger_executions(&app, "g-1").await, 0);
    assert_eq!(stats_of(&app, REFUND).await["statuses"]["garbage"], 1);
    let http = oneshot::post(&app, "/tools/create_refund", &refund_args("g-1")).await;
    assert_eq!(http.status, StatusCode::OK, "attempt 2, past the script");
}

#[tokio::test(start_paused = true)]
async fn is_error_is_the_tools_own_error_and_executes_nothing() {
    let app = scripted(REFUND, EndpointProfile::default(), "e-1", &[ScriptStep::IsError]);
    let reply = mcp::post(&app, V2026, &mcp::call(V2026, 1, REFUND, refund_args("e-1"))).await;
    assert_eq!(reply.status, StatusCode::OK);
    let result = mcp::result(&reply);
    assert_eq!(result["isError"], true);
    assert_eq!(
        result["structuredContent"]["error"]["code"],
        "injected_tool_error"
    );
    assert_eq!(ledger_executions(&app, "e-1").await, 0);
    assert_eq!(stats_of(&app, REFUND).await["statuses"]["is_error"], 1);
}

/// Only MCP plays garbage and is-error: over HTTP the same draw is served normally.
#[tokio::test(start_paused = true)]
async fn over_http_garbage_and_is_error_are_served_normally() {
    let app = scripted(
        REFUND,
        EndpointProfile::default(),
        "h-1",
        &[ScriptStep::Garbage, ScriptStep::IsError],
    );
    for _ in 0..2 {
        let reply = oneshot::post(&app, "/tools/create_refund", &refund_args("h-1")).await;
        assert_eq!(reply.status, StatusCode::OK);
    }
    assert_eq!(ledger_executions(&app, "h-1").await, 2);
}

/// A 2025-11-25 client: `initialize` (no session id comes back), `notifications/initialized`, then a call on the
/// version header alone.
#[tokio::test(start_paused = true)]
async fn a_2025_11_25_client_initializes_then_calls() {
    let app = router(Profile::default());
    let initialize = mcp::request(
        1,
        "initialize",
        json!({
            "protocolVersion": V2025,
            "capabilities": {},
            "clientInfo": {"name": "chaos-tests", "version": "1"},
        }),
    );
    let reply = mcp::post(&app, V2025, &initialize).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert!(
        reply.headers.get("mcp-session-id").is_none(),
        "stateless: no session"
    );
    let info = mcp::result(&reply);
    assert_eq!(info["protocolVersion"], V2025);
    assert_eq!(info["serverInfo"]["name"], "ballast-chaos");
    assert!(info["capabilities"]["tools"].is_object(), "{info}");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        mcp::post(&app, V2025, &initialized).await.status,
        StatusCode::ACCEPTED
    );
    let called = mcp::post(&app, V2025, &mcp::call(V2025, 2, REFUND, refund_args("v25"))).await;
    let result = mcp::result(&called);
    assert_eq!(result["structuredContent"]["op"], "v25");
    assert!(
        result.get("resultType").is_none(),
        "a 2025-11-25 result has no resultType: {result}"
    );
}

/// A 2026-07-28 client: no `initialize`; the version and capabilities ride in the call's `_meta`.
#[tokio::test(start_paused = true)]
async fn a_2026_07_28_client_calls_without_initializing() {
    let app = router(Profile::default());
    let called = mcp::post(&app, V2026, &mcp::call(V2026, 1, REFUND, refund_args("v26"))).await;
    assert_eq!(called.status, StatusCode::OK, "{}", called.text);
    assert_eq!(called.headers["content-type"], "application/json");
    let result = mcp::result(&called);
    assert_eq!(result["structuredContent"]["execution"], 1);
    assert_eq!(result["resultType"], "complete");
    assert_eq!(ledger_executions(&app, "v26").await, 1);
}

/// A call rmcp refuses (here: a 2026-07-28 call without its `Mcp-Name` header) passed the front door but never
/// reaches the tool: nothing executes, and the stats say why.
#[tokio::test(start_paused = true)]
async fn a_call_the_protocol_refuses_executes_nothing() {
    let app = router(Profile::default());
    let message = mcp::call(V2026, 1, REFUND, refund_args("refused"));
    let headers = [
        ("host", "127.0.0.1"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", V2026),
        ("mcp-method", "tools/call"),
    ];
    let reply = oneshot::send(&app, "POST", "/mcp", Some(&message), &headers).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.text);
    assert_eq!(ledger_executions(&app, "refused").await, 0);
    assert_eq!(stats_of(&app, REFUND).await["statuses"]["protocol_error"], 1);
}

/// A call with a progress token gets its progress before its result, on an SSE stream.
#[tokio::test(start_paused = true)]
async fn progress_comes_before_the_result_on_a_stream() {
    let app = router(Profile::default());
    let mut message = mcp::call(V2026, 7, REFUND, refund_args("p-1"));
    message["params"]["_meta"]["progressToken"] = json!("tok-1");
    let reply = mcp::post(&app, V2026, &message).await;
    assert!(
        reply.headers["content-type"]
            .as_bytes()
            .starts_with(b"text/event-stream"),
        "{:?}",
        reply.headers
    );
    let messages = mcp::messages(&reply);
    let methods: Vec<&str> = messages.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["notifications/progress", "notifications/progress"]);
    assert_eq!(messages[0]["params"]["progressToken"], "tok-1");
    assert_eq!(messages[1]["params"]["progress"], 1.0);
    let last = messages.last().expect("the result");
    assert_eq!(last["id"], 7);
    assert_eq!(last["result"]["structuredContent"]["execution"], 1);
}

/// A hang holds the POST: no answer, no execution.
#[tokio::test(start_paused = true)]
async fn a_hang_holds_the_post() {
    let app = scripted(REFUND, EndpointProfile::default(), "hang-1", &[ScriptStep::Hang]);
    let message = mcp::call(V2025, 1, REFUND, refund_args("hang-1"));
    let held = tokio::time::timeout(Duration::from_secs(30), mcp::post(&app, V2025, &message)).await;
    assert!(
        held.is_err(),
        "answered: {:?}",
        held.map(|reply: Reply| reply.text)
    );
    assert_eq!(ledger_executions(&app, "hang-1").await, 0);
    assert_eq!(stats_of(&app, REFUND).await["statuses"]["hang"], 1);
}

/// The double-refund trap over MCP: the refund executes, then the connection is reset — no answer, one execution.
#[tokio::test]
async fn a_commit_then_lose_over_mcp_executes_once_and_never_answers() {
    let faults = losing(KeyMode::None, LoseMode::Reset);
    let server = spawn(profile(
        REFUND,
        faults,
        &[("lost-1", &[ScriptStep::CommitThenLose])],
    ))
    .await
    .expect("server");
    let client = client(PATIENCE);
    let message = mcp::call(V2026, 1, REFUND, refund_args("lost-1"));
    let err = mcp::send(&client, &server, V2026, &message)
        .await
        .expect_err("no answer");
    assert!(caused_by(&err, ErrorKind::ConnectionReset), "{err:?}");
    assert_eq!(executions(&server, "lost-1").await, 1);
    assert_eq!(bucket(&server, REFUND, "commit_then_lose").await, 1);
    let retried = mcp::send(
        &client,
        &server,
        V2026,
        &mcp::call(V2026, 2, REFUND, refund_args("lost-1")),
    )
    .await
    .expect("answered");
    let body: Value = retried.json().await.expect("JSON");
    assert_eq!(
        body["result"]["structuredContent"]["execution"], 2,
        "the retry is the double refund"
    );
    server.shutdown().await.expect("shutdown");
}

/// A reset over MCP is a real RST, before anything executes.
#[tokio::test]
async fn a_reset_over_mcp_resets_the_connection() {
    let server = spawn(profile(
        REFUND,
        EndpointProfile::default(),
        &[("reset-1", &[ScriptStep::Reset])],
    ))
    .await
    .expect("server");
    let message = mcp::call(V2025, 1, REFUND, refund_args("reset-1"));
    let err = mcp::send(&client(PATIENCE), &server, V2025, &message)
        .await
        .expect_err("no answer");
    assert!(caused_by(&err, ErrorKind::ConnectionReset), "{err:?}");
    assert_eq!(executions(&server, "reset-1").await, 0);
    server.shutdown().await.expect("shutdown");
}
