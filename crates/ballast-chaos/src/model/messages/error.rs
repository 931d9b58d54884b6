//! Anthropic's errors: `{"type": "error", "error": {"type", "message"}, "request_id"}`, the error type named by
//! the status as Anthropic names it, in Anthropic's own wording (`wording`), so that a client classifies the
//! answer as it would the real one — above all the two a wait never fixes: a credit balance too low (a 400) and a
//! spend limit reached (a 429 whose `error.details.error_code` is `enforced_spend_limit_reached`, and no
//! `retry-after`).

use serde_json::Value;

use super::wording;
use crate::Quota;

/// A Messages request the mock refuses, or an error the profile injects, in Anthropic's format.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MessagesError {
    /// The request has no `anthropic-version` header (400, as the real API answers).
    #[error("anthropic-version: header is required")]
    MissingVersion,
    /// The request is not one the mock understands; the message names the field (`messages.0.role: ...`).
    #[error("{0}")]
    InvalidRequest(String),
    /// The conversation is longer than the configured context.
    #[error("prompt is too long: {tokens} tokens > {limit} maximum")]
    PromptTooLong {
        /// Tokens of the conversation (characters / 4, rounded up).
        tokens: usize,
        /// The context in tokens (its characters / 4, rounded down).
        limit: usize,
    },
    /// An error status the chaos profile injects, and the quota a wait does not fix, if it is one.
    #[error("an injected {status} (chaos fault)")]
    Injected {
        /// The status drawn or scripted.
        status: u16,
        /// A spent quota or a spend limit.
        quota: Option<Quota>,
    },
}

impl MessagesError {
    /// The overload of a stream that fails after content (`stream.error`), and of a 529.
    pub const OVERLOADED: MessagesError = MessagesError::Injected {
        status: 529,
        quota: None,
    };

    /// The HTTP status: an injected error's own, but 400 for a credit balance too low (Anthropic answers a spent
    /// credit as an invalid request); 400 for every refusal.
    pub fn status(&self) -> u16 {
        match self {
            MessagesError::Injected {
                quota: Some(Quota::Insufficient),
                ..
            } => 400,
            MessagesError::Injected { status, .. } => *status,
            _ => 400,
        }
    }

    /// The `error` object: `{"type", "message"}`, with `details` for a spend limit.
    pub fn error(&self) -> Value {
        match self {
            MessagesError::Injected {
                quota: Some(Quota::Insufficient),
                ..
            } => wording::spent_credit(),
            MessagesError::Injected {
                quota: Some(Quota::SpendLimit),
                ..
            } => wording::spend_limit(),
            MessagesError::Injected { status, quota: None } => wording::injected(*status),
            other => wording::invalid_request(&other.to_string()),
        }
    }

    /// The body of an error answer: `{"type": "error", "error": {...}, "request_id"}`.
    pub fn body(&self, request_id: &str) -> Value {
        wording::body(self.error(), request_id)
    }

    /// The error as a stream's `error` event: `{"type": "error", "error": {...}}`.
    pub fn event(&self) -> Value {
        wording::event(self.error())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn injected(status: u16) -> MessagesError {
        MessagesError::Injected { status, quota: None }
    }

    #[test]
    fn statuses_name_anthropics_error_types() {
        let types = [
            (400, "invalid_request_error"),
            (401, "authentication_error"),
            (403, "permission_error"),
            (404, "not_found_error"),
            (413, "request_too_large"),
            (418, "invalid_request_error"),
            (429, "rate_limit_error"),
            (500, "api_error"),
            (502, "api_error"),
            (503, "api_error"),
            (504, "timeout_error"),
            (529, "overloaded_error"),
        ];
        for (status, kind) in types {
            assert_eq!(injected(status).status(), status);
            assert_eq!(injected(status).error()["type"], kind, "{status}");
            assert!(injected(status).error()["message"].is_string(), "{status}");
        }
    }

    #[test]
    fn an_overload_is_anthropics_own_words_in_the_body_and_the_event() {
        assert_eq!(
            MessagesError::OVERLOADED.body("req_1"),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"},
                   "request_id": "req_1"})
        );
        assert_eq!(
            MessagesError::OVERLOADED.event(),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        );
    }

    #[test]
    fn a_spent_credit_is_a_400_and_a_spend_limit_a_429_with_its_code() {
        let credit = MessagesError::Injected {
            status: 429,
            quota: Some(Quota::Insufficient),
        };
        assert_eq!(credit.status(), 400);
        assert_eq!(
            credit.error(),
            json!({"type": "invalid_request_error", "message": "Your credit balance is too low to access the \
                   Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."})
        );
        let limit = MessagesError::Injected {
            status: 429,
            quota: Some(Quota::SpendLimit),
        };
        assert_eq!(limit.status(), 429);
        let error = limit.error();
        assert_eq!(error["type"], "rate_limit_error");
        assert_eq!(
            error["details"],
            json!({"error_code": "enforced_spend_limit_reached"})
        );
        assert!(
            error["message"].as_str().is_some_and(|m| m.starts_with(
                "You have reached your specified workspace API usage limits. \
                                               You will regain access on "
            )),
            "{error}"
        );
        // A plain 429 has no details: only the code tells a spend limit from a rate limit.
        assert_eq!(injected(429).error().get("details"), None);
    }

    #[test]
    fn refusals_are_invalid_requests() {
        let missing = MessagesError::MissingVersion;
        assert_eq!(missing.status(), 400);
        assert_eq!(
            missing.error(),
            json!({"type": "invalid_request_error", "message": "anthropic-version: header is required"})
        );
        let long = MessagesError::PromptTooLong { tokens: 9, limit: 8 };
        assert_eq!(
            long.error()["message"],
            "prompt is too long: 9 tokens > 8 maximum"
        );
        assert_eq!(long.status(), 400);
    }
}
