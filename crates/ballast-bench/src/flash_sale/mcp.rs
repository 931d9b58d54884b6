//! The bench's MCP client, over the HTTP client the bench already uses: one JSON-RPC POST per request to a
//! Streamable HTTP endpoint, as a 2025-11-25 client speaks — `initialize`, `notifications/initialized`, then
//! `tools/list` and `tools/call`, each with `MCP-Protocol-Version` — and the answer read from its JSON body or from
//! the events of its SSE stream, whichever the server chose (a server may stream a call's progress first).
//!
//! Small on purpose: the two strategies over MCP need only these requests, and each decides its own retries, which
//! are what the bench compares. rmcp's client would own the retries, and its HTTP transport is reqwest 0.13 (the
//! workspace's is 0.12).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use super::spread::{Reached, Target};

/// The protocol version the bench's clients ask for.
pub(super) const VERSION: &str = "2025-11-25";

/// One MCP client: an endpoint (one URL, or a gateway's `/mcp` on the instance each POST picks), the headers of
/// its transport (a key, a run), and its request ids, from 1.
#[derive(Debug)]
pub(super) struct McpClient {
    http: reqwest::Client,
    endpoint: Target,
    headers: HeaderMap,
    next_id: AtomicU64,
}

/// Why an MCP request has no result.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum McpError {
    /// No answer: `timeout`, `connect_error`, `connection_lost` (the naive strategy's kinds).
    Transport(String),
    /// The POST was answered with another status than a 2xx (an overloaded server's 503, say).
    Status {
        /// Its status.
        status: StatusCode,
        /// Its headers.
        headers: HeaderMap,
    },
    /// A 2xx whose body holds no JSON-RPC answer to the request.
    Garbled,
    /// A JSON-RPC error: a protocol mistake (an unknown tool, bad arguments).
    Rpc {
        /// Its code (`-32602`, ...).
        code: i64,
    },
}

impl McpError {
    /// The failure's stable code: the transport's kind, `status_<N>`, `bad_answer`, or `jsonrpc_<code>`.
    pub(super) fn code(&self) -> String {
        match self {
            McpError::Transport(kind) => kind.clone(),
            McpError::Status { status, .. } => format!("status_{}", status.as_u16()),
            McpError::Garbled => "bad_answer".to_owned(),
            McpError::Rpc { code } => format!("jsonrpc_{code}"),
        }
    }
}

/// A `tools/call` result, as an agent reads it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ToolResult {
    /// `isError`: the tool's own error, or its server's (Ballast's tool errors).
    pub(super) is_error: bool,
    /// Its text blocks, joined: what the model is given.
    pub(super) text: String,
    /// Its `structuredContent` (`null` when it has none).
    pub(super) structured: Value,
}

impl McpClient {
    /// A client of `endpoint` whose every POST carries `headers`.
    pub(super) fn new(http: reqwest::Client, endpoint: Target, headers: HeaderMap) -> McpClient {
        McpClient {
            http,
            endpoint,
            headers,
            next_id: AtomicU64::new(1),
        }
    }

    /// `initialize`, then `notifications/initialized`, each within `timeout`.
    pub(super) async fn initialize(&self, timeout: Duration) -> Result<(), McpError> {
        let params = json!({
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "ballast-bench", "version": env!("CARGO_PKG_VERSION")},
        });
        self.request("initialize", params, timeout, &HeaderMap::new())
            .await?;
        let ready = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let answer = self.post(&ready, timeout, &HeaderMap::new()).await?;
        let status = answer.status();
        let headers = answer.headers().clone();
        // Read to its end, so that the connection is reused.
        let _ = answer.bytes().await;
        if status.is_success() {
            Ok(())
        } else {
            Err(McpError::Status { status, headers })
        }
    }

    /// `tools/list`: the names of the tools (one page: the servers here have three or so).
    pub(super) async fn tool_names(&self, timeout: Duration) -> Result<Vec<String>, McpError> {
        let result = self
            .request("tools/list", json!({}), timeout, &HeaderMap::new())
            .await?;
        let tools = result["tools"].as_array().ok_or(McpError::Garbled)?;
        Ok(tools
            .iter()
            .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
            .collect())
    }

    /// `tools/call` of `name` with `arguments` (a JSON object) within `timeout`, with `extra` headers on this POST.
    pub(super) async fn call_tool(
        &self,
        name: &str,
        arguments: &Value,
        timeout: Duration,
        extra: &HeaderMap,
    ) -> Result<ToolResult, McpError> {
        let params = json!({"name": name, "arguments": arguments});
        let result = self.request("tools/call", params, timeout, extra).await?;
        let blocks = result["content"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let texts: Vec<&str> = blocks
            .iter()
            .filter(|block| block["type"] == "text")
            .filter_map(|block| block["text"].as_str())
            .collect();
        let structured = result.get("structuredContent").cloned().unwrap_or(Value::Null);
        let text = if texts.is_empty() && !structured.is_null() {
            structured.to_string()
        } else {
            texts.join("\n")
        };
        Ok(ToolResult {
            is_error: result["isError"].as_bool().unwrap_or(false),
            text,
            structured,
        })
    }

    /// Request `method` with `params`, under a new id: its `result`.
    async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        extra: &HeaderMap,
    ) -> Result<Value, McpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = self.post(&message, timeout, extra).await?;
        let status = answer.status();
        let headers = answer.headers().clone();
        let body = answer
            .bytes()
            .await
            .map_err(|error| McpError::Transport(super::strategy::no_answer(&error)))?;
        if !status.is_success() {
            return Err(McpError::Status { status, headers });
        }
        let streamed = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        reply(&body, streamed, id)
    }

    async fn post(
        &self,
        message: &Value,
        timeout: Duration,
        extra: &HeaderMap,
    ) -> Result<reqwest::Response, McpError> {
        let mut headers = self.headers.clone();
        headers.extend(extra.clone());
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert("mcp-protocol-version", HeaderValue::from_static(VERSION));
        let sending = self.endpoint.next();
        let answer = self
            .http
            .post(&sending.url)
            .headers(headers)
            .timeout(timeout)
            .body(message.to_string())
            .send()
            .await;
        sending.reached(answer.as_ref().map_or_else(Reached::of, |_| Reached::Answered));
        answer.map_err(|error| McpError::Transport(super::strategy::no_answer(&error)))
    }
}

/// The result of request `id` in a 2xx body: a JSON message (or a batch), or the `data` of each event of an SSE
/// stream, in which the server's notifications and requests are skipped.
fn reply(body: &[u8], streamed: bool, id: u64) -> Result<Value, McpError> {
    let messages: Vec<Value> = if streamed {
        events(body)
    } else {
        match serde_json::from_slice(body) {
            Ok(Value::Array(batch)) => batch,
            Ok(message) => vec![message],
            Err(_) => Vec::new(),
        }
    };
    let mut answer = messages
        .into_iter()
        .find(|message| message.get("method").is_none() && message["id"] == json!(id))
        .ok_or(McpError::Garbled)?;
    if let Some(result) = answer.get_mut("result") {
        return Ok(result.take());
    }
    let code = answer["error"]["code"].as_i64().ok_or(McpError::Garbled)?;
    Err(McpError::Rpc { code })
}

/// The JSON of each event's `data` in an SSE body: an event ends at a blank line, its `data:` lines joined.
fn events(body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body);
    let mut messages = Vec::new();
    let mut data = String::new();
    for line in text.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if let Ok(message) = serde_json::from_str(&data) {
                messages.push(message);
            }
            data.clear();
        } else if let Some(field) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(field.strip_prefix(' ').unwrap_or(field));
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_answer_is_read_by_its_id_and_an_error_by_its_code() {
        let body = br#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#;
        assert_eq!(reply(body, false, 3), Ok(json!({"content": []})));
        assert_eq!(reply(body, false, 4), Err(McpError::Garbled), "another request's");
        let error = br#"{"jsonrpc":"2.0","id":5,"error":{"code":-32602,"message":"unknown tool"}}"#;
        assert_eq!(reply(error, false, 5), Err(McpError::Rpc { code: -32602 }));
        assert_eq!(reply(b"<html>busy</html>", false, 1), Err(McpError::Garbled));
        assert_eq!(McpError::Rpc { code: -32602 }.code(), "jsonrpc_-32602");
    }

    #[test]
    fn a_stream_is_read_past_its_notifications_to_the_answer() {
        let body = "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\n\
                    data: {\"jsonrpc\":\"2.0\",\n\
                    data: \"id\":7,\"result\":{\"isError\":false}}\n\n";
        assert_eq!(reply(body.as_bytes(), true, 7), Ok(json!({"isError": false})));
        assert_eq!(reply(b": keep-alive\n\n", true, 7), Err(McpError::Garbled));
    }
}
