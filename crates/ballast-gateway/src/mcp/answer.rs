//! The MCP side of a tool call: a `[[tools]]` entry as an MCP tool, and the tool route's HTTP answer as the MCP
//! result the model reads (docs/mcp.md, "Answers").
//!
//! - 2xx: the tool's answer. An upstream MCP tool's result passes as the server wrote it (its `isError` too: a
//!   tool's own error is an answer); an HTTP tool's JSON is the result's `structuredContent` and text.
//! - A JSON-RPC error of an upstream MCP server (the route's `{"error": {code, message}}`): the same JSON-RPC
//!   error, a protocol mistake passed on.
//! - Ballast's problem+json: a tool error (`isError`) with `structuredContent` (`code`, `message`, the key, the
//!   operation's URL, `retry_after_ms`) and a text telling the model what to do next.
//! - Any other answer (an HTTP tool's upstream said 404): a tool error with the upstream's status and body.
//!
//! Every result's `_meta` says how many attempts the call made, its key, and whether it is a replay.

use axum::response::Response;
use ballast::headers::{BALLAST_ATTEMPTS, BALLAST_CODE, BALLAST_IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED};
use ballast::tool::ToolClient;
use ballast_config::ToolConfig;
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, ContentBlock, ErrorCode, MetaObject, ResultType, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// A `[[tools]]` entry as an MCP tool: its description (or one naming it), its input schema (or any object),
/// and annotations saying what the config says — believed, since the config is the operator's.
pub(super) fn own_tool(tool: &ToolConfig) -> Tool {
    let description = (tool.description.clone()).unwrap_or_else(|| format!("The `{}` tool.", tool.name));
    let schema = match &tool.input_schema {
        Some(Value::Object(schema)) => Arc::new(schema.clone()),
        _ => super::object_schema(),
    };
    let annotations = ToolAnnotations::new()
        .read_only(!tool.side_effects)
        .destructive(tool.side_effects)
        .idempotent(!tool.side_effects);
    Tool::new(tool.name.clone(), description, schema).with_annotations(annotations)
}

/// The refusal of a side-effecting call that nothing keys: nothing ran.
pub(super) fn key_missing(tool: &str) -> CallToolResult {
    let message = format!(
        "`{tool}` has side effects, and this call carries nothing to key its operation on, so Ballast did not \
         run it: a call re-issued after a lost answer would run it twice. Give the MCP client a run: the header \
         `ballast-run-id: <one id per agent run>` on its transport, or `_meta` `ballast/run_id` (and \
         `ballast/step_id` to do the same call twice in one run), or an explicit `_meta` \
         `ballast/idempotency_key`."
    );
    let structured = json!({"code": "idempotency_key_missing", "message": message});
    tool_error(message, structured, Map::new())
}

/// The MCP result of the route's `response` to a call of `client`'s tool.
pub(super) async fn result(client: &ToolClient, response: Response) -> Result<CallToolResult, ErrorData> {
    let (parts, bytes) = super::body_bytes(response).await;
    let headers = &parts.headers;
    let text_of =
        |name: &http::HeaderName| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let key = text_of(&BALLAST_IDEMPOTENCY_KEY);
    let mut meta = Map::new();
    let attempts = text_of(&BALLAST_ATTEMPTS)
        .and_then(|a| a.parse::<u64>().ok())
        .unwrap_or(0);
    meta.insert("ballast/attempts".to_owned(), Value::from(attempts));
    if let Some(key) = &key {
        meta.insert("ballast/idempotency_key".to_owned(), Value::from(key.as_str()));
    }
    if text_of(&IDEMPOTENT_REPLAYED).as_deref() == Some("true") {
        meta.insert("ballast/replayed".to_owned(), Value::Bool(true));
    }
    let json: Option<Value> = serde_json::from_slice(&bytes).ok();
    let is_mcp = client.is_mcp();
    if parts.status.is_success() {
        return Ok(success(is_mcp, json, &bytes, meta));
    }
    if is_mcp && let Some(error) = json.as_ref().and_then(jsonrpc_error) {
        return Err(error);
    }
    let is_problem = (headers.get(http::header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/problem+json"));
    let code = text_of(&BALLAST_CODE).unwrap_or_else(|| "upstream_error".to_owned());
    let retry_after_ms = (headers.get(http::header::RETRY_AFTER))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|seconds| seconds.saturating_mul(1000));
    let mut structured = json!({"code": code});
    if let Some(key) = &key {
        structured["idempotency_key"] = Value::from(key.as_str());
        structured["operation"] = Value::from(format!("/v1/operations/{key}"));
    }
    if let Some(ms) = retry_after_ms {
        structured["retry_after_ms"] = Value::from(ms);
    }
    let detail = if is_problem {
        (json
            .as_ref()
            .and_then(|j| j.get("detail"))
            .and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned()
    } else {
        structured["status"] = Value::from(parts.status.as_u16());
        structured["body"] = json
            .clone()
            .unwrap_or_else(|| Value::from(String::from_utf8_lossy(&bytes)));
        format!(
            "the tool's upstream answered HTTP {}: {}",
            parts.status.as_u16(),
            String::from_utf8_lossy(&bytes)
        )
    };
    structured["message"] = Value::from(detail.as_str());
    let advice = advice(&code, client.name(), &detail, key.as_deref(), retry_after_ms);
    Ok(tool_error(advice, structured, meta))
}

/// A successful answer as a result: an upstream MCP tool's as it came (its `_meta` kept, Ballast's added), an
/// HTTP tool's JSON as structured content and text.
fn success(is_mcp: bool, json: Option<Value>, bytes: &[u8], meta: Map<String, Value>) -> CallToolResult {
    let mut result = match (is_mcp, json) {
        (true, Some(json)) => match serde_json::from_value::<CallToolResult>(json) {
            // A 2025-11-25 server's result has no `resultType`, which a 2026-07-28 client requires: it is
            // complete (rmcp leaves the field out again for an older client).
            Ok(mut result) => {
                result.result_type = Some(ResultType::COMPLETE);
                result
            }
            Err(error) => {
                let message = format!("the upstream MCP server's result is not an MCP tool result: {error}");
                let structured = json!({"code": "upstream_error", "message": message});
                return tool_error(message, structured, meta);
            }
        },
        (false, Some(json @ Value::Object(_))) => CallToolResult::structured(json),
        (_, Some(json)) => CallToolResult::success(vec![ContentBlock::text(json.to_string())]),
        (_, None) => CallToolResult::success(vec![ContentBlock::text(String::from_utf8_lossy(bytes))]),
    };
    let mut merged = result.meta.take().map(|m| m.0).unwrap_or_default();
    merged.extend(meta);
    result.meta = Some(MetaObject(merged));
    result
}

/// The route's `{"error": {code, message, data}}` (an upstream MCP server's JSON-RPC error) as that error.
fn jsonrpc_error(body: &Value) -> Option<ErrorData> {
    let error = body.get("error")?;
    let code = i32::try_from(error.get("code")?.as_i64()?).ok()?;
    let message = error.get("message")?.as_str()?.to_owned();
    Some(ErrorData::new(
        ErrorCode(code),
        message,
        error.get("data").cloned(),
    ))
}

/// A tool error: `text` for the model, `structured` for code, `meta` Ballast's.
fn tool_error(text: String, structured: Value, meta: Map<String, Value>) -> CallToolResult {
    let mut result = CallToolResult::structured_error(structured);
    result.content = vec![ContentBlock::text(text)];
    result.meta = (!meta.is_empty()).then_some(MetaObject(meta));
    result
}

/// What the model should do about a call that ended with `code`.
fn advice(code: &str, tool: &str, detail: &str, key: Option<&str>, retry_after_ms: Option<u64>) -> String {
    let wait = retry_after_ms.map_or_else(
        || "a few seconds".to_owned(),
        |ms| format!("{} s", ms.div_ceil(1000).max(1)),
    );
    let operation = key.map_or_else(String::new, |k| {
        format!(" (operation {k}: GET /v1/operations/{k})")
    });
    match code {
        "idempotency_in_progress" => format!(
            "`{tool}` is still running this operation{operation}. Do not start it another way: call `{tool}` \
             again with the same arguments after {wait} to get its result."
        ),
        "outcome_unknown" => format!(
            "`{tool}` was sent but no answer came back, so it may or may not have happened{operation}. Check \
             whether it happened before doing it again; calling `{tool}` again with the same arguments in this \
             run will not run it a second time."
        ),
        "overloaded" | "store_unavailable" => format!(
            "Ballast did not run `{tool}`: it is overloaded ({detail}). Nothing happened. Try again after {wait}, \
             or continue without it."
        ),
        "circuit_open" => format!(
            "Ballast did not run `{tool}`: its upstream is failing and calls to it are paused. Nothing happened. \
             Try again after {wait}, or continue without it."
        ),
        "retry_budget_exhausted" | "run_allowance_exhausted" => format!(
            "`{tool}` failed and Ballast stopped retrying it ({detail}). Continue without it, or try again after {wait}."
        ),
        "deadline_exceeded" => {
            format!("No time is left in this request's deadline for `{tool}` ({detail}). Give up this call.")
        }
        _ => format!("`{tool}` failed: {detail}"),
    }
}
