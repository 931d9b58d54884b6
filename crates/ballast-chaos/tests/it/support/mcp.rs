//! MCP over plain HTTP: JSON-RPC messages, the headers each protocol version sends, and the messages of a reply
//! (a JSON body, or the events of an SSE stream) — for driving `/mcp` without an MCP client library.

use serde_json::{Value, json};

use super::oneshot::Reply;

/// A version with `initialize` (and no session here: the chaos server issues none).
pub(crate) const V2025: &str = "2025-11-25";
/// The stateless version: no `initialize`, the version and capabilities in each request's `_meta`.
pub(crate) const V2026: &str = "2026-07-28";

/// A JSON-RPC request.
pub(crate) fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// `tools/call` of `tool` with `arguments`, as a client of `version` sends it (2026-07-28: with the `_meta` it
/// requires).
pub(crate) fn call(version: &str, id: u64, tool: &str, arguments: Value) -> Value {
    let mut params = json!({"name": tool, "arguments": arguments});
    if version == V2026 {
        params["_meta"] = stateless_meta();
    }
    request(id, "tools/call", params)
}

/// `tools/list` as a client of `version` sends it.
pub(crate) fn list(version: &str, id: u64) -> Value {
    let params = if version == V2026 {
        json!({"_meta": stateless_meta()})
    } else {
        json!({})
    };
    request(id, "tools/list", params)
}

/// The `_meta` a 2026-07-28 request carries.
pub(crate) fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V2026,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "chaos-tests", "version": "1"},
    })
}

/// The headers of a POST of `message` by a client of `version`: `Accept` both, the version, and from 2026-07-28
/// `Mcp-Method` and `Mcp-Name`; plus `Host` (rmcp requires one, and a request sent in process has none).
pub(crate) fn headers(version: &str, message: &Value) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("host", "127.0.0.1".to_owned()),
        ("accept", "application/json, text/event-stream".to_owned()),
        ("mcp-protocol-version", version.to_owned()),
    ];
    if version == V2026 {
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        headers.push(("mcp-method", method));
        if let Some(name) = message["params"]["name"].as_str() {
            headers.push(("mcp-name", name.to_owned()));
        }
    }
    headers
}

/// The JSON-RPC messages of a reply: its JSON body, or every event of its SSE stream, in order.
pub(crate) fn messages(reply: &Reply) -> Vec<Value> {
    let sse = reply
        .headers
        .get("content-type")
        .is_some_and(|kind| kind.as_bytes().starts_with(b"text/event-stream"));
    if sse {
        reply
            .events()
            .iter()
            .filter(|event| matches!(event, super::oneshot::Sse::Event { data, .. } if !data.is_empty()))
            .map(super::oneshot::Sse::json)
            .collect()
    } else {
        vec![reply.json()]
    }
}

/// The answer of a reply: its last message's `result`; panics on a JSON-RPC error.
pub(crate) fn result(reply: &Reply) -> Value {
    let messages = messages(reply);
    let last = messages
        .last()
        .unwrap_or_else(|| panic!("no message: {}", reply.text));
    assert!(last.get("error").is_none(), "a JSON-RPC error: {last}");
    last["result"].clone()
}

/// `POST /mcp` of `message` to `router` in process, as a client of `version`.
pub(crate) async fn post(router: &axum::Router, version: &str, message: &Value) -> Reply {
    let headers = headers(version, message);
    let pairs: Vec<(&str, &str)> = headers
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    super::oneshot::send(router, "POST", "/mcp", Some(message), &pairs).await
}

/// `POST /mcp` of `message` to a running server, as a client of `version`.
pub(crate) async fn send(
    client: &reqwest::Client,
    server: &ballast_chaos::ChaosServer,
    version: &str,
    message: &Value,
) -> reqwest::Result<reqwest::Response> {
    let mut request = client.post(server.url("/mcp")).json(message);
    for (name, value) in headers(version, message) {
        // reqwest sets the real Host.
        if name != "host" {
            request = request.header(name, value);
        }
    }
    request.send().await
}
