//! What an upstream's error answer means for a model call: [`ProviderError::classify`].
//!
//! Why a classification of its own, beyond the status: a model route's next step depends on details the
//! status hides. A 429 is usually "wait and retry" — unless it says `insufficient_quota`, which no wait fixes
//! (DESIGN.md: move to the next deployment at once). A 400 is usually the caller's fault — unless it is a
//! context-length error, which a larger-context deployment or truncation can fix. A 529 (Anthropic) or a 503
//! is an overloaded upstream worth retrying later.
//!
//! The order, most trusted first:
//! 1. The structured fields: `error.code`, then `error.type` (OpenAI and Anthropic nest them under `error`;
//!    older vLLM puts them at the top level; Ollama's native answer is `{"error": "<text>"}`).
//! 2. When they say nothing specific, the per-provider context-length wordings of one module (`context.rs`),
//!    with the token numbers the message gives ([`ContextTokens`]).
//! 3. The status.
//!
//! Never panics and never fails, whatever the body holds: an unreadable body is classified by its status.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

mod context;
mod quota;
#[cfg(test)]
mod tests;

/// What kind of failure an upstream's error answer reports, as far as a model route's next step cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub(crate) enum ProviderErrorKind {
    /// The request does not fit the model's context window: the same request fails the same way; a
    /// larger-context deployment or a truncated request may not.
    ContextLength,
    /// The account's quota or credit is spent (`insufficient_quota`): never waited for or retried on this
    /// deployment; the route moves to its next deployment.
    InsufficientQuota,
    /// Too many requests for now (429, `rate_limit_exceeded`): worth retrying after the wait asked.
    RateLimited,
    /// The upstream is overloaded (529, Anthropic's `overloaded_error`, 503): worth retrying later.
    Overloaded,
    /// The upstream failed (500, 502, 504, other 5xx, 408): worth retrying.
    ServerError,
    /// The request is wrong in a way retrying cannot fix (other 4xx).
    BadRequest,
    /// The key is missing, wrong or not allowed (401, 403): this deployment will not answer until it is fixed.
    Auth,
    /// Anything else: no code, wording or status rule covers it (a status below 400, for one).
    Other,
}

impl ProviderErrorKind {
    /// The kind's short stable name: `context_length`, `insufficient_quota`, ...
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ProviderErrorKind::ContextLength => "context_length",
            ProviderErrorKind::InsufficientQuota => "insufficient_quota",
            ProviderErrorKind::RateLimited => "rate_limited",
            ProviderErrorKind::Overloaded => "overloaded",
            ProviderErrorKind::ServerError => "server_error",
            ProviderErrorKind::BadRequest => "bad_request",
            ProviderErrorKind::Auth => "auth",
            ProviderErrorKind::Other => "other",
        }
    }
}

/// Token numbers a context-length error reports, when it reports them. Each is optional: providers give
/// different subsets (Anthropic: prompt and limit; vLLM: often the completion too; Ollama: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct ContextTokens {
    /// The model's context window.
    pub(crate) limit: Option<u64>,
    /// Tokens of the request's input (messages, tools).
    pub(crate) prompt: Option<u64>,
    /// Tokens reserved for the answer (`max_tokens`), when the provider counts them against the window.
    pub(crate) completion: Option<u64>,
}

impl ContextTokens {
    /// The input tokens the window leaves room for: `limit - completion`; `None` without a limit.
    pub(crate) fn prompt_allowed(&self) -> Option<u64> {
        self.limit
            .map(|limit| limit.saturating_sub(self.completion.unwrap_or(0)))
    }

    fn is_empty(&self) -> bool {
        self.limit.is_none() && self.prompt.is_none() && self.completion.is_none()
    }
}

/// An upstream's error answer, classified: the kind, and what the answer said (status, `Retry-After`, the
/// structured code and type, the message, the token numbers of a context-length error).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct ProviderError {
    /// What kind of failure it is.
    pub(crate) kind: ProviderErrorKind,
    /// The upstream's status.
    pub(crate) status: u16,
    /// The wait the upstream asked for, as the caller parsed it (`retry-after-ms` or `Retry-After`).
    pub(crate) retry_after: Option<Duration>,
    /// `error.code` as sent (a number is kept as its text: vLLM sends `400`).
    pub(crate) code: Option<String>,
    /// `error.type` as sent.
    pub(crate) error_type: Option<String>,
    /// The upstream's message (`error.message`, or Ollama's `error` string).
    pub(crate) message: Option<String>,
    /// For [`ProviderErrorKind::ContextLength`]: the numbers the message gives, if any.
    pub(crate) tokens: Option<ContextTokens>,
}

impl ProviderError {
    /// Classifies an upstream's answer from its status, its body, and the wait the caller already parsed from
    /// its headers (`Retry-After` or `retry-after-ms`; `None` when absent).
    pub(crate) fn classify(status: u16, body: &[u8], retry_after: Option<Duration>) -> Self {
        let fields = ErrorFields::read(body);
        let structured = [fields.code.as_deref(), fields.error_type.as_deref()]
            .into_iter()
            .flatten()
            .find_map(kind_of_code);
        let overflow = match structured {
            Some(ProviderErrorKind::ContextLength) | None if status >= 400 => {
                fields.message.as_deref().and_then(context::recognise)
            }
            _ => None,
        };
        let spent =
            structured.is_none() && status >= 400 && fields.message.as_deref().is_some_and(quota::recognise);
        let kind = match (structured, overflow) {
            (Some(kind), _) => kind,
            (None, Some(_)) => ProviderErrorKind::ContextLength,
            (None, None) if spent => ProviderErrorKind::InsufficientQuota,
            (None, None) => kind_of_status(status),
        };
        let tokens = match kind {
            ProviderErrorKind::ContextLength => {
                fields.tokens.or(overflow).filter(|tokens| !tokens.is_empty())
            }
            _ => None,
        };
        ProviderError {
            kind,
            status,
            retry_after,
            code: fields.code,
            error_type: fields.error_type,
            message: fields.message,
            tokens,
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the upstream answered {} ({})",
            self.status,
            self.kind.as_str()
        )?;
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ProviderError {}

/// The status an error sent as a stream event stands for (`body` is the error under `error`, in OpenAI's envelope
/// or Anthropic's): a provider that errs inside a 200 stream sends no status of its own, so the code or type says
/// it — an insufficient quota or a rate limit 429, an overload 529 (Anthropic's status for it, which the breaker
/// does not count), a context length or another bad request (an `invalid_request_error` of any code) 400, a
/// refused key 401 — and anything else is 502: the upstream failed, as a cut connection says.
pub(crate) fn status_of_error_event(body: &[u8]) -> http::StatusCode {
    let error = ProviderError::classify(502, body, None);
    let status = match error.kind {
        ProviderErrorKind::InsufficientQuota | ProviderErrorKind::RateLimited => 429,
        // Overload (Anthropic's 529): less, please — not a failure the breaker counts.
        ProviderErrorKind::Overloaded => 529,
        ProviderErrorKind::ContextLength | ProviderErrorKind::BadRequest => 400,
        ProviderErrorKind::Auth => 401,
        // A code of its own under the caller's error type (`invalid_prompt`: a request the provider will not
        // serve): the caller's to fix, not the provider's failure — no retry, no fallback, not a breaker's.
        _ if error.error_type.as_deref() == Some("invalid_request_error") => 400,
        ProviderErrorKind::ServerError | ProviderErrorKind::Other => 502,
    };
    http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_GATEWAY)
}

/// The kind a structured code or type names; `None` for generic ones (`invalid_request_error`, `400`).
fn kind_of_code(code: &str) -> Option<ProviderErrorKind> {
    Some(match code {
        // OpenAI's code; llama.cpp's server type.
        "context_length_exceeded" | "exceed_context_size_error" => ProviderErrorKind::ContextLength,
        // OpenAI's code; Anthropic's spend limit (`error.details.error_code`, on a 429 no wait fixes).
        "insufficient_quota" | "enforced_spend_limit_reached" => ProviderErrorKind::InsufficientQuota,
        // OpenAI's code; Anthropic's type.
        "rate_limit_exceeded" | "rate_limit_error" => ProviderErrorKind::RateLimited,
        // Anthropic's type (with 529).
        "overloaded_error" => ProviderErrorKind::Overloaded,
        "invalid_api_key" | "authentication_error" | "permission_error" => ProviderErrorKind::Auth,
        _ => return None,
    })
}

fn kind_of_status(status: u16) -> ProviderErrorKind {
    match status {
        401 | 403 => ProviderErrorKind::Auth,
        429 => ProviderErrorKind::RateLimited,
        503 | 529 => ProviderErrorKind::Overloaded,
        408 | 500..=599 => ProviderErrorKind::ServerError,
        400..=499 => ProviderErrorKind::BadRequest,
        _ => ProviderErrorKind::Other,
    }
}

/// The error fields of a body, wherever the provider put them.
#[derive(Default)]
struct ErrorFields {
    code: Option<String>,
    error_type: Option<String>,
    message: Option<String>,
    /// Structured token numbers (llama.cpp's `n_prompt_tokens` and `n_ctx`).
    tokens: Option<ContextTokens>,
}

impl ErrorFields {
    fn read(body: &[u8]) -> Self {
        let Ok(Value::Object(top)) = serde_json::from_slice::<Value>(body) else {
            // Not a JSON object: a proxy's text or HTML. Its text is still read for a context-length wording.
            let message = std::str::from_utf8(body)
                .ok()
                .map(str::trim)
                .filter(|text| !text.is_empty());
            return ErrorFields {
                message: message.map(str::to_owned),
                ..ErrorFields::default()
            };
        };
        match top.get("error") {
            Some(Value::Object(error)) => Self::from_object(error),
            Some(Value::String(message)) => ErrorFields {
                message: Some(message.clone()),
                ..ErrorFields::default()
            },
            _ => Self::from_object(&top),
        }
    }

    fn from_object(object: &Map<String, Value>) -> Self {
        let text = |key: &str| match object.get(key) {
            Some(Value::String(text)) => Some(text.clone()),
            Some(Value::Number(number)) => Some(number.to_string()),
            _ => None,
        };
        let count = |key: &str| object.get(key).and_then(Value::as_u64);
        let tokens = ContextTokens {
            limit: count("n_ctx"),
            prompt: count("n_prompt_tokens"),
            completion: None,
        };
        // Anthropic's spend limit names its code in `details` (`{"details": {"error_code": ...}}`).
        let detail = (object.get("details").and_then(|d| d.get("error_code")))
            .and_then(Value::as_str)
            .map(str::to_owned);
        ErrorFields {
            code: text("code").or(detail),
            error_type: text("type"),
            message: text("message"),
            tokens: (!tokens.is_empty()).then_some(tokens),
        }
    }
}
