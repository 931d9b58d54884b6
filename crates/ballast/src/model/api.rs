//! What the route's machinery needs to know of each API it serves ([`Protocol`]), so that one client core and
//! one stream core serve them all: how a request names its model, how it is cut to fit a context window, what
//! its error answers mean and what tokens its answers report, and
//! (for the streamed APIs, [`Streamed`]) where a stream commits and what each later event means ([`Read`]).
//!
//! Each API is one module implementing these beside its bodies and its commit rule: `chat.rs` (Chat
//! Completions), `responses/` (the Responses API), `embeddings.rs`, `messages.rs` (Anthropic's Messages and its
//! token counting). This module names none of them.

use std::time::Duration;

use ballast_config::Api;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::provider::status_of_error_event;
use super::usage::usage_of_body;
use super::{CannotTruncate, ProviderError, Truncation, TruncationGoal};
use crate::TokenUsage;
use crate::body::{Commit, CommitRule};

/// One API of a model route.
pub(crate) trait Protocol: Send + Sync + 'static {
    /// Which one: the deployments that speak it are the call's.
    const API: Api;
    /// Where its calls go, after a deployment's base URL (`/chat/completions`).
    const PATH: &'static str;
    /// A request of it.
    type Request: Clone + Serialize + Send + Sync + 'static;
    /// Its answer (a 2xx, not streamed), read from JSON.
    type Answer: DeserializeOwned + Send + 'static;

    /// Names `model` in `request` (each deployment's own model name replaces the route's).
    fn set_model(request: &mut Self::Request, model: &str);

    /// Drops whole older turns from `request` as far as `goal` asks (the route's `on_overflow = "truncate"`).
    fn truncate(request: &mut Self::Request, goal: TruncationGoal) -> Result<Truncation, CannotTruncate>;

    /// Headers of the API's own that `request` is sent with (Anthropic's `anthropic-version`); none by default.
    fn headers(_request: &Self::Request, _headers: &mut http::HeaderMap) {}

    /// What an error answer of this API means for the route's next step: overload, a spent quota, a context
    /// that does not fit, a request no retry fixes. OpenAI's APIs (and the providers that copy them) share
    /// [`ProviderError::classify`]; an API with errors of its own overrides it.
    fn classify(status: u16, body: &[u8], retry_after: Option<Duration>) -> ProviderError {
        ProviderError::classify(status, body, retry_after)
    }

    /// The tokens an answer's body (or an error answer's) reports: OpenAI's `usage`, in either the Chat
    /// Completions' or the Responses API's names.
    fn usage(body: &[u8]) -> Option<TokenUsage> {
        usage_of_body(body)
    }
}

/// An API whose answers may be streamed.
pub(crate) trait Streamed: Protocol {
    /// One event of its stream, as the caller gets it.
    type Event: Send + 'static;
    /// What each event read before the commit point means.
    const COMMIT: CommitRule;
    /// What each event after the commit point means.
    const READ: fn(&str) -> Read<Self::Event>;

    /// Asks for a streamed answer (`stream: true`), or not.
    fn set_stream(request: &mut Self::Request, stream: bool);
}

/// A request's `stream` flag set (`true`, or absent), and without a stream its `stream_options` dropped: options
/// of a stream on a request that is not one are refused by OpenAI with a 400.
pub(super) fn set_stream(flag: &mut Option<bool>, extra: &mut serde_json::Map<String, Value>, stream: bool) {
    *flag = stream.then_some(true);
    if !stream {
        extra.remove("stream_options");
    }
}

/// What one event after the commit point means (each API's rule).
#[derive(Debug)]
pub(crate) enum Read<E> {
    /// An event for the caller, with the usage it reports, if any.
    Item(E, Option<TokenUsage>),
    /// The API's end event, handed on too (`response.completed`): the stream ends well after it.
    Last(E, Option<TokenUsage>),
    /// The API's end marker, not handed on (`[DONE]`): the stream ends well.
    End,
    /// The upstream's error event: its error object.
    Upstream(Value),
    /// An event that is not the API's.
    Malformed(String),
    /// The stream ended in a way that is not its API's end.
    Cut,
}

/// A typed event's data (the Responses API's, Anthropic's Messages') as a JSON object with a `type`.
pub(super) fn event_object(data: &str) -> Option<serde_json::Map<String, Value>> {
    match serde_json::from_str::<Value>(data) {
        Ok(Value::Object(event)) if event.get("type").is_some_and(Value::is_string) => Some(event),
        _ => None,
    }
}

/// A typed event's `type` (`""` when it has none).
pub(super) fn kind(event: &serde_json::Map<String, Value>) -> &str {
    event.get("type").and_then(Value::as_str).unwrap_or("")
}

/// An error sent as an event before the commit point, as the attempt's error answer: `error` (the error object,
/// in whichever shape the API sends it) in OpenAI's envelope, with the status its code stands for (Anthropic's
/// Messages writes its own envelope: `messages.rs`).
pub(super) fn error_answer(error: &Value) -> Commit {
    let body = json!({ "error": error });
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let status = status_of_error_event(&bytes);
    Commit::Error {
        status,
        body: bytes.into(),
    }
}
