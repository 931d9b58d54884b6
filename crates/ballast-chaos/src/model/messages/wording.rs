//! Anthropic's words: the error type each status is named by, the messages of injected errors, and the envelopes
//! of an error answer and of a stream's error event. Kept apart from `MessagesError` so that the type reads as
//! its rules and this file as Anthropic's text.

use serde_json::{Value, json};

/// When a spend limit's answer says access comes back. A fixed day, because the model reads no clock; no client
/// should read it.
const SPEND_LIMIT_REGAINED: &str = "2030-01-01 at 00:00 UTC";

/// `{"type": kind, "message": message}`.
fn error(kind: &str, message: &str) -> Value {
    json!({"type": kind, "message": message})
}

/// An invalid request (every refusal of the mock).
pub(super) fn invalid_request(message: &str) -> Value {
    error("invalid_request_error", message)
}

/// A spent credit: Anthropic's 400.
pub(super) fn spent_credit() -> Value {
    invalid_request(
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or \
         purchase credits.",
    )
}

/// A spend limit reached: a rate-limit error whose `details` say which.
pub(super) fn spend_limit() -> Value {
    json!({
        "type": "rate_limit_error",
        "message": format!(
            "You have reached your specified workspace API usage limits. You will regain access on \
             {SPEND_LIMIT_REGAINED}."
        ),
        "details": {"error_code": "enforced_spend_limit_reached"},
    })
}

/// The error of an injected `status`.
pub(super) fn injected(status: u16) -> Value {
    error(error_type(status), &injected_message(status))
}

/// Anthropic's error type for `status`.
fn error_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    }
}

/// The message of an injected `status`, in Anthropic's words where it has some.
fn injected_message(status: u16) -> String {
    match status {
        401 => "invalid x-api-key".into(),
        403 => "Your API key does not have permission to use the specified resource.".into(),
        404 => "The requested resource could not be found.".into(),
        413 => "Request exceeds the maximum allowed number of bytes.".into(),
        429 => "This request would exceed your organization's rate limit (injected by ballast-chaos). Please try \
                again later, or see the response headers for current usage."
            .into(),
        500 => "Internal server error".into(),
        504 => "Request timed out".into(),
        529 => "Overloaded".into(),
        _ => format!("Injected error with status {status}."),
    }
}

/// The body of an error answer.
pub(super) fn body(error: Value, request_id: &str) -> Value {
    json!({"type": "error", "error": error, "request_id": request_id})
}

/// A stream's `error` event.
pub(super) fn event(error: Value) -> Value {
    json!({"type": "error", "error": error})
}
