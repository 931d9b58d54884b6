//! A tool call's result as the caller gets it: the upstream's own answer passed on (stored for replays), or the
//! gateway's problem+json (`error.rs`) — marked not-stored when nothing reached the upstream, outcome-unknown when
//! something may have.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use ballast::idempotency::NotStored;
use ballast::{CallError, Error, policy::IdempotencyKey};
use ballast_core::ErrorCode;
use http::{HeaderValue, StatusCode, header};

use crate::error::{AppError, set_retry_after};
use ballast::headers::{BALLAST_ATTEMPTS, BALLAST_CODE, BALLAST_FALLBACK, X_SHOULD_RETRY};

/// The answer to a tool call's result.
pub(crate) fn answer(
    tool: &str,
    key: Option<&IdempotencyKey>,
    result: Result<ballast::tool::ToolAnswer, CallError>,
) -> Response {
    match result {
        Ok(answer) => {
            let mut response = passed_on(answer.status, answer.content_type, answer.bytes);
            let attempts = answer.report.attempts_made();
            response
                .headers_mut()
                .insert(BALLAST_ATTEMPTS, HeaderValue::from(attempts));
            if let Some(fallback) = answer.report.fallback.as_deref() {
                // Named as the config names it: the fallback tool, or `fallback_response`.
                let name = if fallback == ballast::tool::STATIC_RESPONSE {
                    "fallback_response"
                } else {
                    fallback
                };
                if let Ok(name) = HeaderValue::from_str(name) {
                    response.headers_mut().insert(BALLAST_FALLBACK, name);
                }
                // Not the upstream's answer: a retry with the key asks the upstream again.
                response.extensions_mut().insert(NotStored);
            }
            response
        }
        Err(error) => {
            let attempts = error.report().attempts_made();
            let mut response = failure(tool, key, error);
            response
                .headers_mut()
                .insert(BALLAST_ATTEMPTS, HeaderValue::from(attempts));
            response
        }
    }
}

/// The answer to a call that did not succeed.
fn failure(tool: &str, key: Option<&IdempotencyKey>, error: CallError) -> Response {
    let attempts = error.report().attempts_made();
    if error.outcome_unknown() {
        return AppError::OutcomeUnknown {
            tool: tool.to_owned(),
            key: key.map(|k| k.as_str().to_owned()),
        }
        .into_response();
    }
    let code = error.code();
    let retry_after = error.retry_after();
    match error {
        CallError::Upstream {
            status,
            headers,
            bytes,
            ..
        } => {
            // The upstream's own answer, passed on; retries are spent or cannot help.
            let content_type = headers.get(header::CONTENT_TYPE).cloned();
            let mut response = passed_on(status, content_type, bytes);
            let headers = response.headers_mut();
            headers.insert(BALLAST_CODE, HeaderValue::from_static(code.as_str()));
            headers.insert(X_SHOULD_RETRY, HeaderValue::from_static("false"));
            // The provider's own wait, passed on so the caller can back off by itself (capped and jittered as
            // every `Retry-After` the gateway sends).
            if let Some(wait) = retry_after {
                set_retry_after(headers, wait);
            }
            // An overload refusal acted on nothing: a later retry with the same key must run, not replay it.
            if status == 429 || status == 503 {
                response.extensions_mut().insert(NotStored);
            }
            response
        }
        CallError::Failed { error, .. } => call_error(tool, code, &error)
            .inviting_only_if_unsent(attempts)
            .into_response(),
        CallError::Malformed { reason, .. } => AppError::Call {
            code: ErrorCode::UpstreamError,
            status: StatusCode::BAD_GATEWAY,
            message: format!("{tool}: the upstream's answer is {reason}"),
            retry_after: None,
            should_retry: false,
            shed: None,
        }
        .into_response(),
        // A kind of failure this gateway does not know yet: said as what it is, never as a success.
        other => AppError::bad_gateway(code, other.to_string()).into_response(),
    }
}

/// The gateway's answer to a call that ended with `error` and nothing acted upstream (the model routes write it
/// OpenAI-style).
pub(crate) fn call_error(tool: &str, code: ErrorCode, error: &Error) -> AppError {
    let message = format!("{tool}: {error}");
    let (status, retry_after, should_retry, shed) = match error {
        Error::Overloaded { reason, retry_after } => {
            // Shed for room or throttled: nothing reached the upstream, a later try may find room. Shed because
            // the deadline cannot hold the wait: a retry cannot help.
            let for_room = reason.for_room();
            let status = if code == ErrorCode::DeadlineExceeded {
                StatusCode::GATEWAY_TIMEOUT
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (status, *retry_after, for_room, Some(reason.as_str()))
        }
        Error::CircuitOpen { retry_in } => (StatusCode::SERVICE_UNAVAILABLE, *retry_in, false, None),
        Error::DeadlineExceeded(_) => (StatusCode::GATEWAY_TIMEOUT, None, false, None),
        Error::Timeout { .. } => (StatusCode::GATEWAY_TIMEOUT, None, false, None),
        _ if code == ErrorCode::DeadlineExceeded => (StatusCode::GATEWAY_TIMEOUT, None, false, None),
        _ => (StatusCode::BAD_GATEWAY, None, false, None),
    };
    AppError::Call {
        code,
        status,
        message,
        retry_after,
        should_retry,
        shed,
    }
}

/// The upstream's answer with `status`, its bytes and its `content-type` as they came. An answer that named no
/// type is named from its bytes: JSON as `application/json`, anything else as text (checked, never parsed into a
/// value nobody reads).
fn passed_on(status: u16, content_type: Option<HeaderValue>, bytes: bytes::Bytes) -> Response {
    let content_type = content_type.unwrap_or_else(|| {
        let text = !bytes.is_empty() && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err();
        HeaderValue::from_static(if text {
            "text/plain; charset=utf-8"
        } else {
            "application/json"
        })
    });
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    response
}
