//! The Messages routes' errors in Anthropic's envelope, so that Anthropic's SDKs raise their own exceptions with
//! the gateway's message: `{"type": "error", "error": {"type": "overloaded_error", "message": ..., "code": ...}}`.
//!
//! Every answer of the gateway's own on these routes (its refusals, its 401, a failure after its retries) is
//! written OpenAI-style by the one error module (`error.rs`) and rewritten here, on the way out: the error
//! object keeps its fields (`message`, the stable `code`, `upstream_code`) and its `type` becomes Anthropic's:
//! the one a status or code says whatever the body says (401 `authentication_error`, 404 `not_found_error`, 529
//! or `overloaded` `overloaded_error`, `deadline_exceeded` `timeout_error`, ...), else the provider's own when it
//! is one of Anthropic's types (a `rate_limit_error` after the retries), else the status's. A provider's own
//! error answer, already Anthropic's (`"type": "error"`), passes as it came. Headers (`x-should-retry`,
//! `Retry-After`, `ballast-code`) are untouched.
//!
//! Why a rewrite on the way out rather than a second flavour of every error: the gateway's answers come from many
//! places (auth, the method, the path, the deadline, the body, the call), and all of them are written once, by
//! `error.rs`; one rewrite at the edge of these routes covers every one, those added later included, and costs
//! only on an error. It also rewrites an OpenAI-shaped error of a provider that speaks Messages behind an
//! OpenAI-style proxy (LiteLLM, vLLM): an Anthropic SDK reads Anthropic's shape.

use axum::body::Body;
use axum::response::Response;
use ballast_core::ErrorCode;
use http::StatusCode;
use serde_json::Value;

/// The largest error body rewritten (the gateway's own are a few hundred bytes).
const LIMIT: usize = 64 * 1024;

/// Anthropic's error types (a provider's is kept when it is one of them).
const TYPES: [&str; 11] = [
    "invalid_request_error",
    "authentication_error",
    "billing_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "timeout_error",
    "overloaded_error",
    "error",
];

/// `response` with an OpenAI-style error body rewritten in Anthropic's envelope (module docs).
pub(super) async fn envelope(response: Response) -> Response {
    let status = response.status();
    if !status.is_client_error() && !status.is_server_error() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, LIMIT).await else {
        // Not the gateway's own (too large to be); its bytes are gone, so its status says what it was.
        let rewritten = anthropic_body(
            status,
            "upstream's error answer unreadable",
            None,
            serde_json::Map::new(),
        );
        return json(parts, &rewritten);
    };
    let Some(rewritten) = rewrite(status, &bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    json(parts, &rewritten)
}

/// `body` as the JSON answer of `parts` (its length and type its own).
fn json(mut parts: http::response::Parts, body: &Value) -> Response {
    parts.headers.remove(http::header::CONTENT_LENGTH);
    parts.headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(body.to_string()))
}

/// The Anthropic body of an OpenAI-style error body; `None` when it is not one (already Anthropic's, or not
/// JSON with an `error` object).
fn rewrite(status: StatusCode, bytes: &[u8]) -> Option<Value> {
    let Ok(Value::Object(mut top)) = serde_json::from_slice::<Value>(bytes) else {
        return None;
    };
    if top.get("type").and_then(Value::as_str) == Some("error") {
        return None;
    }
    let Some(Value::Object(mut error)) = top.remove("error") else {
        return None;
    };
    let message = (error.remove("message"))
        .and_then(|m| m.as_str().map(str::to_owned))
        .unwrap_or_default();
    let kept = error.remove("type").and_then(|t| t.as_str().map(str::to_owned));
    if error.get("param").is_some_and(Value::is_null) {
        error.remove("param");
    }
    Some(anthropic_body(status, &message, kept.as_deref(), error))
}

/// `{"type": "error", "error": {"type", "message", ...rest}}`.
fn anthropic_body(
    status: StatusCode,
    message: &str,
    kept: Option<&str>,
    mut rest: serde_json::Map<String, Value>,
) -> Value {
    let code = rest.get("code").and_then(Value::as_str);
    let kind = (told_by(status, code))
        .or(kept.filter(|k| TYPES.contains(k)))
        .unwrap_or_else(|| by_status(status));
    let mut error = serde_json::Map::new();
    error.insert("type".into(), kind.into());
    error.insert("message".into(), message.into());
    error.append(&mut rest);
    serde_json::json!({"type": "error", "error": error})
}

/// The Anthropic type that a status or the gateway's stable code says whatever else the body says: a 401 is an
/// `authentication_error` though OpenAI's envelope called it an `invalid_request_error`.
fn told_by(status: StatusCode, code: Option<&str>) -> Option<&'static str> {
    if code == Some(ErrorCode::Overloaded.as_str()) {
        return Some("overloaded_error");
    }
    if code == Some(ErrorCode::DeadlineExceeded.as_str()) {
        return Some("timeout_error");
    }
    Some(match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        529 => "overloaded_error",
        _ => return None,
    })
}

/// The Anthropic type of any other status.
fn by_status(status: StatusCode) -> &'static str {
    match status.as_u16() {
        429 => "rate_limit_error",
        504 => "timeout_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_gateways_errors_become_anthropics_and_anthropics_pass() {
        let shed = json!({"error": {"message": "shed", "type": "server_error", "param": null, "code": "overloaded"}});
        assert_eq!(
            rewrite(StatusCode::SERVICE_UNAVAILABLE, shed.to_string().as_bytes()),
            Some(
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "shed", "code": "overloaded"}})
            )
        );
        let spent = json!({"error": {"message": "m", "type": "overloaded_error", "code": "upstream_error",
                                     "upstream_code": null}});
        let rewritten = rewrite(StatusCode::from_u16(529).unwrap(), spent.to_string().as_bytes()).unwrap();
        assert_eq!(
            rewritten["error"]["type"], "overloaded_error",
            "the provider's own type"
        );
        assert_eq!(rewritten["error"]["code"], "upstream_error");
        let unauthorized =
            json!({"error": {"message": "no key", "type": "invalid_request_error", "code": "unauthorized"}});
        let rewritten = rewrite(StatusCode::UNAUTHORIZED, unauthorized.to_string().as_bytes()).unwrap();
        assert_eq!(
            rewritten["error"]["type"], "authentication_error",
            "the status says it"
        );
        let limit =
            json!({"error": {"message": "spent", "type": "rate_limit_error", "code": "upstream_error"}});
        let rewritten = rewrite(StatusCode::TOO_MANY_REQUESTS, limit.to_string().as_bytes()).unwrap();
        assert_eq!(
            rewritten["error"]["type"], "rate_limit_error",
            "the provider's own type is kept"
        );
        let late = json!({"error": {"message": "late", "type": "server_error", "code": "deadline_exceeded"}});
        let rewritten = rewrite(StatusCode::GATEWAY_TIMEOUT, late.to_string().as_bytes()).unwrap();
        assert_eq!(rewritten["error"]["type"], "timeout_error");
        let anthropic =
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}});
        assert_eq!(
            rewrite(StatusCode::BAD_REQUEST, anthropic.to_string().as_bytes()),
            None
        );
        assert_eq!(rewrite(StatusCode::BAD_GATEWAY, b"<html>"), None);
    }
}
