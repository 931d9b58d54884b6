//! An upstream MCP server called through the library (`ballast::mcp`): a Rust agent gets the same guarantees as
//! over HTTP — the chaos upstream's MCP server in process — and the session rules, against a hand-written server
//! that forgets its sessions, or knows no `initialize`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use ballast::Clients;
use ballast::mcp::McpServers;
use ballast::tool::ToolCall;
use ballast::transport::ServiceTransport;
use ballast_config::Config;
use serde_json::{Value, json};

use crate::support::BODY_LIMIT;

/// The MCP servers of `toml` over `router` in process.
fn servers(toml: &str, router: &Router) -> McpServers {
    let config = Config::from_toml_str(toml).unwrap_or_else(|e| panic!("test config is invalid:\n{e}"));
    let transport = ServiceTransport::new(router.clone()).with_body_limit(BODY_LIMIT);
    Clients::from_config(&config)
        .build(transport)
        .expect("clients build")
        .mcp
}

const SHOP: &str = r#"
    version = 1
    [[mcp_servers]]
    name = "shop"
    url = "http://chaos/mcp"
    per_try_timeout = "1s"
    retry = { max_attempts = 3, base = "10ms", cap = "10ms" }
    [mcp_servers.tools.lookup_order]
    side_effects = false
"#;

#[tokio::test(start_paused = true)]
async fn a_rust_agent_calls_an_mcp_servers_tools_through_the_pipeline() {
    let chaos = ballast_chaos::router(
        ballast_chaos::Profile::from_toml_str(
            "[[scripts]]\nendpoint = \"lookup_order\"\nop = \"l-1\"\nsteps = [\"503\", \"ok\"]\n\
             [[scripts]]\nendpoint = \"create_refund\"\nop = \"r-1\"\nsteps = [\"reset\", \"ok\"]",
        )
        .unwrap(),
    );
    let servers = servers(SHOP, &chaos);
    let shop = servers.get("shop").expect("configured");
    let tools = shop.tools().await.expect("listed");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["lookup_order", "create_refund", "process_payment"]);
    assert!(!tools[0].config.side_effects && tools[1].config.side_effects);

    // A read is retried past a 503, as any tool's.
    let lookup = shop.tool("lookup_order").await.expect("listed");
    let answer = lookup
        .call(ToolCall::new(json!({"op": "l-1", "order_id": "A-1"})))
        .await
        .expect("answered");
    let result: Value = serde_json::from_slice(&answer.bytes).unwrap();
    assert_eq!(result["structuredContent"]["order_id"], "A-1", "{result}");
    assert_eq!(answer.report.attempts_made(), 2);

    // A side effect is retried only when the request never reached the server (a reset before it was read is
    // not that: the chaos reset happens after the request was sent, so the outcome is unknown).
    let refund = shop.tool("create_refund").await.expect("listed");
    let call = ToolCall::new(json!({"op": "r-1", "order_id": "A-1", "amount": 5}))
        .idempotency_key(ballast::policy::IdempotencyKey::parse("k-r-1").unwrap());
    let error = refund.call(call).await.expect_err("the answer was lost");
    assert!(error.outcome_unknown(), "{error}");
    assert_eq!(error.report().attempts_made(), 1);
}

/// A 2025-11-25 server that issues sessions and forgets each after one call; or, `stateless`, one that knows no
/// `initialize` (it answers it -32601). Counts the `initialize`s it was sent.
#[derive(Clone, Default)]
struct Forgetful {
    initializes: Arc<AtomicU64>,
    session: Arc<AtomicU64>,
    stateless: bool,
}

async fn forgetful(State(server): State<Forgetful>, headers: HeaderMap, body: String) -> Response {
    let message: Value = serde_json::from_str(&body).unwrap();
    let id = message["id"].clone();
    let method = message["method"].as_str().unwrap_or_default();
    if server.stateless {
        if method == "initialize" {
            let error =
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no initialize"}});
            return axum::Json(error).into_response();
        }
        assert_eq!(
            message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(headers["mcp-protocol-version"], "2026-07-28");
    }
    match method {
        "initialize" => {
            let n = server.initializes.fetch_add(1, Ordering::SeqCst) + 1;
            server.session.store(n, Ordering::SeqCst);
            let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "f", "version": "1"}});
            let mut response =
                axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response();
            response
                .headers_mut()
                .insert("mcp-session-id", format!("s-{n}").parse().unwrap());
            response
        }
        "notifications/initialized" => StatusCode::ACCEPTED.into_response(),
        "tools/list" => {
            let tools = json!([{"name": "echo", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}]);
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}})).into_response()
        }
        _ if !server.stateless => {
            let current = format!("s-{}", server.session.load(Ordering::SeqCst));
            if headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) != Some(current.as_str()) {
                return StatusCode::NOT_FOUND.into_response();
            }
            // Forget it: the next call finds its session gone.
            server.session.store(0, Ordering::SeqCst);
            let text = format!("echo {}", message["params"]["arguments"]);
            let result = json!({"content": [{"type": "text", "text": text}]});
            // As a stream, with a notification first.
            let events = format!(
                "event: message\ndata: {}\n\nevent: message\ndata: {}\n\n",
                json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}),
                json!({"jsonrpc": "2.0", "id": id, "result": result})
            );
            ([("content-type", "text/event-stream")], events).into_response()
        }
        _ => {
            let result = json!({"content": [{"type": "text", "text": "stateless"}]});
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
        }
    }
}

const ECHO: &str = r#"
    version = 1
    [[mcp_servers]]
    name = "echo"
    url = "http://echo/mcp"
    trust_annotations = true
"#;

#[tokio::test(start_paused = true)]
async fn a_forgotten_session_is_agreed_again_and_the_call_sent_once_more() {
    let server = Forgetful::default();
    let router = Router::new()
        .route("/mcp", post(forgetful))
        .with_state(server.clone());
    let servers = servers(ECHO, &router);
    let echo = servers.get("echo").unwrap();
    let tools = echo.tools().await.expect("listed");
    assert!(
        !tools[0].config.side_effects,
        "trusted: its readOnlyHint is believed"
    );
    let client = echo.tool("echo").await.unwrap();
    for n in 0..3 {
        let answer = client
            .call(ToolCall::new(json!({"n": n})))
            .await
            .expect("answered");
        let result: Value = serde_json::from_slice(&answer.bytes).unwrap();
        assert_eq!(
            result["content"][0]["text"],
            format!("echo {{\"n\":{n}}}"),
            "the reply after a notification"
        );
        // One attempt each: a 404 for a forgotten session is the session's business, not a retry.
        assert_eq!(answer.report.attempts_made(), 1);
    }
    assert_eq!(
        server.initializes.load(Ordering::SeqCst),
        3,
        "once, then once per forgotten session"
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_without_initialize_is_spoken_to_statelessly() {
    let server = Forgetful {
        stateless: true,
        ..Forgetful::default()
    };
    let router = Router::new().route("/mcp", post(forgetful)).with_state(server);
    let servers = servers(ECHO, &router);
    let echo = servers.get("echo").unwrap();
    echo.tools().await.expect("listed");
    let answer = echo
        .tool("echo")
        .await
        .unwrap()
        .call(ToolCall::new(json!({})))
        .await
        .expect("answered");
    let result: Value = serde_json::from_slice(&answer.bytes).unwrap();
    assert_eq!(result["content"][0]["text"], "stateless");
}

#[tokio::test(start_paused = true)]
async fn a_server_that_cannot_be_listed_is_told_and_the_last_listing_kept() {
    let up = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let switch = Arc::clone(&up);
    let router = Router::new().route(
        "/mcp",
        post(move |headers: HeaderMap, body: String| {
            let up = switch.load(Ordering::SeqCst);
            let server = Forgetful {
                stateless: true,
                ..Forgetful::default()
            };
            async move {
                if !up {
                    return StatusCode::SERVICE_UNAVAILABLE.into_response();
                }
                forgetful(State(server), headers, body).await
            }
        }),
    );
    let servers = servers(ECHO, &router);
    let echo = servers.get("echo").unwrap();
    assert_eq!(echo.tools().await.expect("listed").len(), 1);
    up.store(false, Ordering::SeqCst);
    tokio::time::sleep(ballast::mcp::LIST_FRESH).await;
    assert_eq!(echo.tools().await.expect("the last listing").len(), 1);
    let snapshot = echo.snapshot().await;
    assert!(
        snapshot.failed.as_deref().unwrap_or_default().contains("503"),
        "{snapshot:?}"
    );
}
