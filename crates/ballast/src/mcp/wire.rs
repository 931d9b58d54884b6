//! The MCP messages Ballast sends an upstream MCP server and reads back (JSON-RPC 2.0 over Streamable HTTP):
//! `initialize`, `notifications/initialized`, `tools/list` and `tools/call` written, and the server's answer —
//! a JSON body or a stream of server-sent events holding it — read to the one response with the request's id.
//!
//! Why not rmcp's client: its client owns the connection, the session and the retries, and would send every
//! attempt outside Ballast's pipeline (deadline, per-try timeout, breaker, budget, the operation's key). Here each
//! MCP request is one HTTP request through the same pipeline as every tool call; a result is passed on as the
//! server wrote it (a proxy keeps the fields it does not know), so only the envelope is read.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};
use serde_json::{Map, Value, json};

use crate::sse::SseDecoder;

/// The protocol version Ballast asks for in `initialize`; the server answers with the one it speaks.
pub(crate) const ASKED_VERSION: &str = "2025-11-25";
/// The stateless version: no `initialize`, the version and capabilities in each request's `_meta`.
pub(crate) const STATELESS_VERSION: &str = "2026-07-28";
/// `_meta` keys of the stateless version (SEP-2575).
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(crate) const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// Headers of Streamable HTTP.
pub(crate) const MCP_SESSION_ID: http::HeaderName = http::HeaderName::from_static("mcp-session-id");
pub(crate) const MCP_PROTOCOL_VERSION: http::HeaderName =
    http::HeaderName::from_static("mcp-protocol-version");
pub(crate) const MCP_METHOD: http::HeaderName = http::HeaderName::from_static("mcp-method");
pub(crate) const MCP_NAME: http::HeaderName = http::HeaderName::from_static("mcp-name");

/// Request ids, unique in the process (a server matches its answer to one).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh JSON-RPC request id.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// The body of JSON-RPC request `method` with `params`, numbered `id`.
pub(crate) fn request(id: u64, method: &str, params: Value) -> Bytes {
    let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    Bytes::from(serde_json::to_vec(&message).unwrap_or_default())
}

/// The body of JSON-RPC notification `method`.
pub(crate) fn notification(method: &str) -> Bytes {
    let message = json!({"jsonrpc": "2.0", "method": method});
    Bytes::from(serde_json::to_vec(&message).unwrap_or_default())
}

/// The `initialize` request's params.
pub(crate) fn initialize_params() -> Value {
    json!({
        "protocolVersion": ASKED_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "ballast", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// The `_meta` a request carries: the stateless version's keys when that is the version spoken, and `extra`.
pub(crate) fn request_meta(version: &str, extra: Map<String, Value>) -> Map<String, Value> {
    let mut meta = extra;
    if version >= STATELESS_VERSION {
        meta.insert(META_PROTOCOL_VERSION.to_owned(), Value::from(version));
        meta.insert(META_CLIENT_CAPABILITIES.to_owned(), json!({}));
    }
    meta
}

/// The headers of every MCP POST: JSON sent, JSON or a stream accepted.
pub(crate) fn set_post_headers(headers: &mut HeaderMap) {
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
}

/// What a server answered to request `id`.
#[derive(Debug, PartialEq)]
pub(crate) enum Reply {
    /// Its `result`, as the server wrote it.
    Result(Value),
    /// Its JSON-RPC `error` object (`code`, `message`, `data`).
    Error(Value),
}

/// Why an answer holds no reply to the request.
#[derive(Debug, PartialEq)]
pub(crate) struct Garbled(pub(crate) String);

/// The reply to request `id` in a 2xx answer's body: JSON (one message, or a batch), or server-sent events whose
/// data are messages (notifications and requests of the server's are skipped).
pub(crate) fn reply(content_type: Option<&HeaderValue>, body: &[u8], id: u64) -> Result<Reply, Garbled> {
    let is_stream = content_type
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    if is_stream {
        let mut decoder = SseDecoder::new(body.len().saturating_add(1));
        decoder.push(body);
        // A stream whose last event has no blank line after it still ends it.
        decoder.push(b"\n\n");
        while let Ok(Some(data)) = decoder.next_event() {
            if data.trim().is_empty() {
                continue;
            }
            let message: Value = serde_json::from_str(&data)
                .map_err(|e| Garbled(format!("an event of its stream is not JSON: {e}")))?;
            if let Some(reply) = reply_in(message, id)? {
                return Ok(reply);
            }
        }
        return Err(Garbled("its stream ended without the response".to_owned()));
    }
    let message: Value =
        serde_json::from_slice(body).map_err(|e| Garbled(format!("its body is not JSON: {e}")))?;
    reply_in(message, id)?.ok_or_else(|| Garbled("its body holds no response to the request".to_owned()))
}

/// The reply to `id` in one message or a batch; `None` when it holds none (a notification).
pub(crate) fn reply_in(message: Value, id: u64) -> Result<Option<Reply>, Garbled> {
    let Value::Object(mut object) = message else {
        if let Value::Array(batch) = message {
            for message in batch {
                if let Some(reply) = reply_in(message, id)? {
                    return Ok(Some(reply));
                }
            }
            return Ok(None);
        }
        return Err(Garbled("a message is not a JSON object".to_owned()));
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Garbled("a message is not JSON-RPC 2.0".to_owned()));
    }
    let Some(answered) = object.get("id") else {
        // A notification (progress, a log line).
        return Ok(None);
    };
    if object.contains_key("method") {
        // A request of the server's (sampling, elicitation): Ballast's requests never allow one.
        return Ok(None);
    }
    if answered.as_u64() != Some(id) && answered.as_str() != Some(&id.to_string()) {
        return Err(Garbled(format!("it answered request {answered}, not {id}")));
    }
    match (object.remove("result"), object.remove("error")) {
        (Some(result), None) => Ok(Some(Reply::Result(result))),
        (None, Some(error)) if error.get("code").is_some_and(Value::is_i64) => Ok(Some(Reply::Error(error))),
        _ => Err(Garbled(
            "its response has neither a result nor an error".to_owned(),
        )),
    }
}

/// The params of `message` when it is a progress notification for `token`, its `progressToken` left out.
pub(crate) fn progress_of(message: &Value, token: &str) -> Option<Value> {
    if message.get("method").and_then(Value::as_str) != Some("notifications/progress") {
        return None;
    }
    let mut params = message.get("params")?.as_object()?.clone();
    let sent = params.remove("progressToken")?;
    (sent.as_str() == Some(token)).then_some(Value::Object(params))
}

/// Whether `result` is a tool call's result: an object whose `content`, if written, is an array.
pub(crate) fn is_call_result(result: &Value) -> bool {
    result
        .as_object()
        .is_some_and(|o| o.get("content").is_none_or(Value::is_array))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sse() -> Option<HeaderValue> {
        Some(HeaderValue::from_static("text/event-stream"))
    }

    #[test]
    fn a_json_reply_is_read_by_its_id() {
        let body = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
        let json = Some(HeaderValue::from_static("application/json"));
        assert_eq!(
            reply(json.as_ref(), body, 7),
            Ok(Reply::Result(json!({"content": []})))
        );
        assert!(reply(json.as_ref(), body, 8).is_err(), "another request's answer");
    }

    #[test]
    fn a_stream_skips_notifications_to_the_reply() {
        let body = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
                     data: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32602,\"message\":\"bad\"}}";
        let error = json!({"code": -32602, "message": "bad"});
        assert_eq!(reply(sse().as_ref(), body, 3), Ok(Reply::Error(error)));
    }

    #[test]
    fn garbage_is_garbled() {
        for body in [
            &b"<html>busy</html>"[..],
            br#"{"id":1,"result":{}}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,
        ] {
            assert!(reply(None, body, 1).is_err(), "{}", String::from_utf8_lossy(body));
        }
        assert!(
            reply(
                sse().as_ref(),
                b"data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n",
                1
            )
            .is_err()
        );
    }

    #[test]
    fn the_stateless_version_carries_its_meta() {
        assert!(request_meta("2025-11-25", Map::new()).is_empty());
        let meta = request_meta(STATELESS_VERSION, Map::new());
        assert_eq!(meta[META_PROTOCOL_VERSION], STATELESS_VERSION);
    }
}
