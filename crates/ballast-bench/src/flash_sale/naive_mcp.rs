//! The `naive-mcp` strategy: the naive agents ([`super::naive`]) with their tools on an MCP server, the chaos
//! upstream's `/mcp`, called as MCP tutorials write a client — and as they wrap it when calls fail.
//!
//! - One session per agent: `initialize` and `tools/list` before the agent starts (the tools handed to the model).
//! - Each tool call a `tools/call` with the naive code's timeout (10 s for the lookup, 30 s for the refund and the
//!   payment), re-issued — a new JSON-RPC request, a new id — when it fails: the connection or the stream lost, the
//!   timeout, an HTTP error, an answer that is not JSON-RPC. [`TRIES`](super::naive::TRIES) tries, the naive
//!   backoff between them (1 s, 2 s ± 25 %).
//! - No key: MCP has none of its own, and nothing in the tutorials sends one. A call re-issued after its answer was
//!   lost is a second refund.
//! - A result with `isError: true` is an answer, not a failure of the call (the tutorials hand it to the model);
//!   the conversation fails with `tool_error`, since its refund or payment did not go through.
//!
//! As in the naive strategy, every try sends `ballast-attempt` (its number from 1), for the measurement only: the
//! chaos upstream draws the same fault for the same try whichever strategy makes it.

use futures::future::BoxFuture;
use http::{HeaderMap, HeaderValue};
use rand::rngs::SmallRng;
use serde_json::Value;
use std::time::Duration;

use super::mcp::McpClient;
use super::naive::{LOOKUP_TIMEOUT, NaiveAgents, TRIES, backoff};
use super::over_http::ToolApi;
use super::strategy::{Agents, Strategy};
use super::turns::TOOLS;

/// The `naive-mcp` strategy (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct NaiveMcp;

impl Strategy for NaiveMcp {
    fn name(&self) -> &str {
        "naive-mcp"
    }

    fn agents<'a>(
        &'a self,
        base_url: &'a str,
        time_scale: f64,
    ) -> BoxFuture<'a, Result<Box<dyn Agents>, String>> {
        Box::pin(std::future::ready(NaiveAgents::new(
            base_url,
            time_scale,
            ToolApi::Mcp,
        )))
    }
}

/// An agent's session with the upstream's MCP server, its tools listed (within the lookup's timeout): the session,
/// or the failure's kind.
pub(super) async fn connect(
    client: &reqwest::Client,
    base_url: &str,
    time_scale: f64,
) -> Result<McpClient, String> {
    let session = McpClient::new(client.clone(), format!("{base_url}/mcp"), HeaderMap::new());
    let timeout = LOOKUP_TIMEOUT.mul_f64(time_scale);
    session.initialize(timeout).await.map_err(|e| e.code())?;
    let listed = session.tool_names(timeout).await.map_err(|e| e.code())?;
    if !TOOLS.iter().all(|tool| listed.iter().any(|name| name == tool)) {
        return Err("tools_missing".to_owned());
    }
    Ok(session)
}

/// One tool call (see the module docs): the result's text for the model, or the last failure's kind.
pub(super) async fn call(
    session: &McpClient,
    name: &str,
    arguments: &Value,
    timeout: Duration,
    time_scale: f64,
    rng: &mut SmallRng,
) -> Result<String, String> {
    let mut last = String::new();
    for attempt in 1..=TRIES {
        let mut headers = HeaderMap::new();
        headers.insert("ballast-attempt", HeaderValue::from(attempt));
        last = match session.call_tool(name, arguments, timeout, &headers).await {
            Ok(result) if result.is_error => return Err("tool_error".to_owned()),
            Ok(result) => return Ok(result.text),
            Err(error) => error.code(),
        };
        if attempt < TRIES {
            tokio::time::sleep(backoff(attempt, rng).mul_f64(time_scale)).await;
        }
    }
    Err(last)
}
