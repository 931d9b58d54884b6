//! Error answers in OpenAI's envelope, `{"error": {"message", "type", "param", "code"}}`, with the messages,
//! types and codes OpenAI itself sends, so that a client classifies them as it would classify the real ones
//! (Ballast by `error.code`: `insufficient_quota`, `context_length_exceeded`).

use serde_json::{Value, json};

use super::completion::CREATED;

/// The models `GET /v1/models` lists. All are served by the same script; the request's `model` is only echoed.
pub(super) const MODELS: [&str; 2] = ["mock", "gpt-4.1"];

pub(super) fn envelope(message: &str, kind: &str, param: Option<&str>, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": param, "code": code}})
}

/// OpenAI's `context_length_exceeded` body for a conversation of `chars` characters over a limit of
/// `limit_chars`. Tokens are characters / 4, the limit rounded down and the conversation rounded up, so a
/// conversation over the limit always reads as more tokens than the maximum.
pub(super) fn context_length_exceeded(chars: usize, limit_chars: usize) -> Value {
    let message = format!(
        "This model's maximum context length is {} tokens. However, your messages resulted in {} tokens. Please \
         reduce the length of the messages.",
        limit_chars / 4,
        chars.div_ceil(4)
    );
    envelope(
        &message,
        "invalid_request_error",
        Some("messages"),
        Some("context_length_exceeded"),
    )
}

/// The body of an invalid request: the message names the field (`param` stays null: the message is all the
/// mock keeps).
pub(super) fn invalid_request(message: &str) -> Value {
    envelope(message, "invalid_request_error", None, None)
}

/// The body of an injected error answer with `status`; see [`super::error_body`].
pub(super) fn injected(status: u16, insufficient_quota: bool) -> Value {
    match status {
        429 if insufficient_quota => envelope(
            "You exceeded your current quota, please check your plan and billing details. For more information on \
             this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
            "insufficient_quota",
            None,
            Some("insufficient_quota"),
        ),
        429 => envelope(
            "Rate limit reached for requests per min (RPM) (injected by ballast-chaos). Please try again later. \
             Visit https://platform.openai.com/account/rate-limits to learn more.",
            "requests",
            None,
            Some("rate_limit_exceeded"),
        ),
        500 => envelope(
            "The server had an error while processing your request. Sorry about that!",
            "server_error",
            None,
            None,
        ),
        502 => envelope("Bad gateway.", "server_error", None, None),
        503 => envelope(
            "The server is overloaded or not ready yet.",
            "server_error",
            None,
            None,
        ),
        504 => envelope("Gateway timeout.", "server_error", None, None),
        529 => envelope("Overloaded", "overloaded_error", None, None),
        400..=499 => envelope(
            &format!("Injected error with status {status}."),
            "invalid_request_error",
            None,
            None,
        ),
        _ => envelope(
            &format!("Injected error with status {status}."),
            "server_error",
            None,
            None,
        ),
    }
}

/// The body of `GET /v1/models`.
pub(super) fn models_list() -> Value {
    let data: Vec<Value> = MODELS
        .iter()
        .map(|id| json!({"id": id, "object": "model", "created": CREATED, "owned_by": "ballast-chaos"}))
        .collect();
    json!({"object": "list", "data": data})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(status: u16, insufficient_quota: bool) -> Value {
        injected(status, insufficient_quota)["error"].clone()
    }

    #[test]
    fn quota_and_rate_limit_are_told_apart_by_code() {
        let quota = error(429, true);
        assert_eq!(quota["type"], "insufficient_quota");
        assert_eq!(quota["code"], "insufficient_quota");
        assert!(
            quota["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("You exceeded your current quota"))
        );
        let rate = error(429, false);
        assert_eq!(rate["type"], "requests");
        assert_eq!(rate["code"], "rate_limit_exceeded");
    }

    #[test]
    fn server_errors_per_status() {
        for status in [500, 502, 503, 504] {
            assert_eq!(error(status, false)["type"], "server_error", "{status}");
            assert_eq!(error(status, false)["code"], Value::Null, "{status}");
        }
        assert_eq!(
            error(503, false)["message"],
            "The server is overloaded or not ready yet."
        );
        assert_eq!(error(529, false)["type"], "overloaded_error");
        assert_eq!(error(529, false)["message"], "Overloaded");
        assert_eq!(error(418, false)["type"], "invalid_request_error");
        assert_eq!(error(599, false)["type"], "server_error");
    }

    #[test]
    fn insufficient_quota_only_changes_a_429() {
        for status in [500, 502, 503, 529] {
            assert_eq!(injected(status, true), injected(status, false), "{status}");
        }
    }

    #[test]
    fn every_body_has_the_four_fields() {
        for status in [400, 404, 429, 500, 502, 503, 504, 529, 599] {
            for quota in [false, true] {
                let body = injected(status, quota);
                let error = body["error"].as_object().expect("an error object");
                let mut keys: Vec<&str> = error.keys().map(String::as_str).collect();
                keys.sort_unstable();
                assert_eq!(keys, ["code", "message", "param", "type"], "{status}");
                assert!(
                    error["message"].is_string() && error["type"].is_string(),
                    "{status}"
                );
            }
        }
    }

    #[test]
    fn models_are_listed() {
        let list = models_list();
        assert_eq!(list["object"], "list");
        let ids: Vec<&str> = list["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["id"].as_str())
            .collect();
        assert_eq!(ids, MODELS);
        assert!(
            list["data"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|m| m["object"] == "model")
        );
    }
}
