//! The `naive-mcp` strategy's tool calls ([`super::naive::NaiveMcp`]): the naive agents with their tools on an MCP
//! server, the chaos upstream's `/mcp`, called as MCP tutorials write a client — and as they wrap it when calls
//! fail.
//!
//! - One session per agent: `initialize` and `tools/list` before the agent starts (the tools handed to the model).
//! - Each tool call a `tools/call` with the naive code's timeout (10 s for the lookup, 30 s for the refund and the
//!   payment), re-issued — a new JSON-RPC request, a new id — when it fails: the connection or the stream lost, the
//!   timeout, an HTTP error, an answer that is not JSON-RPC. The naive code's tries (3) and backoff (1 s, 2 s
//!   ± 25 %) between them.
//! - No key: MCP has none of its own, and nothing in the tutorials sends one. A call re-issued after its answer was
//!   lost is a second refund.
//! - A result with `isError: true` is an answer, not a failure of the call (the tutorials hand it to the model);
//!   the conversation fails with `tool_error`, since its refund or payment did not go through.
//!
//! As in the naive strategy, every try sends `ballast-attempt` (its number from 1), for the measurement only: the
//! chaos upstream draws the same fault for the same try whichever strategy makes it.

use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use rand::rngs::SmallRng;
use serde_json::Value;

use super::mcp::McpClient;
use super::spread::Target;
use super::turns::TOOLS;

/// An agent's session with the upstream's MCP server at `base_url`'s `/mcp`, its tools listed, each request within
/// `timeout`: the session, or the failure's kind.
pub(super) async fn connect(
    client: &reqwest::Client,
    base_url: &str,
    timeout: Duration,
) -> Result<McpClient, String> {
    let endpoint = Target::Url(format!("{base_url}/mcp"));
    let session = McpClient::new(client.clone(), endpoint, HeaderMap::new());
    session.initialize(timeout).await.map_err(|e| e.code())?;
    let listed = session.tool_names(timeout).await.map_err(|e| e.code())?;
    if !TOOLS.iter().all(|tool| listed.iter().any(|name| name == tool)) {
        return Err("tools_missing".to_owned());
    }
    Ok(session)
}

/// How the naive code tries a call: how many times, each within `timeout`, and the sleep after try N (from 1).
pub(super) struct Tries<B> {
    pub(super) tries: u32,
    pub(super) timeout: Duration,
    pub(super) backoff: B,
}

/// One tool call (see the module docs): the result's text for the model, or the last failure's kind.
pub(super) async fn call<B: Fn(u32, &mut SmallRng) -> Duration>(
    session: &McpClient,
    name: &str,
    arguments: &Value,
    tries: &Tries<B>,
    rng: &mut SmallRng,
) -> Result<String, String> {
    let mut last = String::new();
    for attempt in 1..=tries.tries {
        let mut headers = HeaderMap::new();
        headers.insert("ballast-attempt", HeaderValue::from(attempt));
        last = match session.call_tool(name, arguments, tries.timeout, &headers).await {
            Ok(result) if result.is_error => return Err("tool_error".to_owned()),
            Ok(result) => return Ok(result.text),
            Err(error) => error.code(),
        };
        if attempt < tries.tries {
            tokio::time::sleep((tries.backoff)(attempt, rng)).await;
        }
    }
    Err(last)
}
