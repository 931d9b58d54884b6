//! The `gateway` agents' tool calls over MCP (`--tools mcp`): the agents of [`super::over_http`], their model calls
//! unchanged, their tools called as MCP `tools/call`s at the gateway's `/mcp`, in the way docs/mcp.md documents.
//!
//! - One MCP client per conversation (per agent run), its run on its transport: `ballast-run-id` (and the
//!   principal's key) on every POST, set once. `initialize` and `tools/list` before the agent starts, as an MCP
//!   agent hands the model the tools it lists. The run's deadline is the one its first model call gave it.
//! - No step and no key: the gateway keys a side effect by the run and the call's arguments, so a call re-issued
//!   after a lost answer is the same operation.
//! - A call that fails is re-issued (a new request id) with the SDKs' habits of the agent's model calls: up to 2
//!   times, after the wait the answer asks for or the SDK's backoff — when no answer came (a timeout: the
//!   conversation's deadline), when the POST's status is one the SDK retries, and when the result is one of
//!   Ballast's tool errors whose advice is to call again later (`idempotency_in_progress`, `overloaded`,
//!   `store_unavailable`, `circuit_open`: nothing ran, or it is still running), after its `retry_after_ms`. Any
//!   other tool error (`outcome_unknown`, `deadline_exceeded`, ...) ends the conversation with its code, as a
//!   JSON-RPC error does.
//!
//! What a result does not say: why an `overloaded` call was refused (admission or a throttle), so over MCP no call
//! counts as shed per class.

use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use rand::rngs::SmallRng;
use serde_json::Value;

use super::mcp::{McpClient, McpError};
use super::sdk::{Failure, MAX_RETRIES, SdkHabits};
use super::spread::Target;
use super::turns::{TOOLS, ToolCall};

/// Ballast's tool-error codes whose advice is to call again after `retry_after_ms` (docs/mcp.md, "Answers").
const CALL_AGAIN: [&str; 4] = [
    "idempotency_in_progress",
    "overloaded",
    "store_unavailable",
    "circuit_open",
];

/// One conversation's MCP client of the gateway (see the module docs).
pub(super) struct GatewayTools {
    client: McpClient,
}

impl GatewayTools {
    /// The client of the gateway's `/mcp` at `endpoint` (on the instance each POST picks) for `run`, with `key`:
    /// initialized, and every tool the model may ask for listed — or why not.
    pub(super) async fn connect(
        http: &reqwest::Client,
        endpoint: Target,
        key: Option<&str>,
        run: &str,
        sdk: &SdkHabits,
    ) -> Result<GatewayTools, Failure> {
        let mut headers = HeaderMap::new();
        if let Some(key) = key
            && let Ok(value) = HeaderValue::from_str(&format!("Bearer {key}"))
        {
            headers.insert(http::header::AUTHORIZATION, value);
        }
        if let Ok(run) = HeaderValue::from_str(run) {
            headers.insert("ballast-run-id", run);
        }
        let client = McpClient::new(http.clone(), endpoint, headers);
        client.initialize(sdk.timeout()).await.map_err(failure)?;
        let listed = client.tool_names(sdk.timeout()).await.map_err(failure)?;
        if !TOOLS.iter().all(|tool| listed.iter().any(|name| name == tool)) {
            return Err(Failure::Transport("tools_missing".to_owned()));
        }
        Ok(GatewayTools { client })
    }

    /// One tool call the model asked for (see the module docs): the result's text, or why there is none.
    pub(super) async fn call(
        &self,
        sdk: &SdkHabits,
        call: &ToolCall,
        rng: &mut SmallRng,
    ) -> Result<String, Failure> {
        let arguments: Value = serde_json::from_str(&call.arguments)
            .map_err(|_| Failure::Transport("bad_arguments".to_owned()))?;
        let mut retries = 0;
        loop {
            let answer = (self.client)
                .call_tool(&call.name, &arguments, sdk.timeout(), &HeaderMap::new())
                .await;
            // What failed, and the wait its answer asked for (`None`: back off).
            let (failure, asked) = match answer {
                Ok(result) if !result.is_error => return Ok(result.text),
                Ok(result) => {
                    let code = result.structured["code"].as_str().unwrap_or("tool_error");
                    if !CALL_AGAIN.contains(&code) {
                        return Err(Failure::ToolError(code.to_owned()));
                    }
                    let asked = result.structured["retry_after_ms"]
                        .as_u64()
                        .map(Duration::from_millis);
                    (Failure::ToolError(code.to_owned()), asked)
                }
                Err(McpError::Status { status, headers }) => {
                    if !sdk.should_retry(status, &headers) {
                        return Err(Failure::Status { status, headers });
                    }
                    let asked = sdk.asked_wait(&headers);
                    (Failure::Status { status, headers }, asked)
                }
                Err(McpError::Transport(kind)) => (Failure::Transport(kind), None),
                Err(error) => return Err(failure(error)),
            };
            if retries == MAX_RETRIES {
                return Err(failure);
            }
            tokio::time::sleep(asked.unwrap_or_else(|| sdk.backoff(retries, rng))).await;
            retries += 1;
        }
    }
}

/// An MCP request's failure as a call's.
fn failure(error: McpError) -> Failure {
    match error {
        McpError::Status { status, headers } => Failure::Status { status, headers },
        other => Failure::Transport(other.code()),
    }
}
