//! The mock model: a scripted agent conversation, as pure functions over OpenAI-format JSON.
//!
//! # Why a script
//! Ballast's claims are about agent loops: a model call, then tool calls with side effects, then a model call
//! again, all under one deadline. A real agent loop (or the official OpenAI SDKs) must be able to drive the mock
//! end to end, and a failed or replayed attempt must get the very same answer, or a comparison between two
//! client strategies would not be fair. So the model is a pure function of the conversation it is sent: no
//! clock, no randomness, no state. The HTTP server calls these functions and adds the faults.
//!
//! # The script
//! The newest user turn names an order and an operation: `"Refund order 1234, op=op-77"`,
//! `"Pay order 99 (op: op-5)"`.
//! - **op**: `op=` or `op:` (ASCII case-insensitive, spaces allowed around the separator), then a token of
//!   `[A-Za-z0-9_.:-]`; a trailing `.` or `:` is sentence punctuation and dropped. The first such token counts.
//!   [`operation_id`] returns it; every tool call of the conversation carries it in its arguments.
//! - **order**: the digits after the word `order`, separated from it only by spaces, `#`, `:`, `=` or `-`
//!   (`order 1234`, `order #1234`); `"0"` when there are none.
//! - **action**: `process_payment` when a word of the turn is a form of "pay" (pay, pays, paying, paid, payment,
//!   payments) and none a form of "refund"; `create_refund` otherwise. (The op's own text is not read for the
//!   order or the action.)
//!
//! The messages after that user turn decide the next turn:
//! 1. no tool reply to `lookup_order` yet: call `lookup_order` with `{"op", "order_id"}`;
//! 2. a reply to `lookup_order` but none to the action: call the action with `{"amount", "op", "order_id"}`, the
//!    amount taken from the lookup reply's JSON `amount` when it is a number, else 42.5;
//! 3. a reply to the action: a final text answer naming the op and whether the action went through — it failed
//!    when the reply is a JSON object with a non-null `error` key, and went through otherwise.
//!
//! Tool replies are matched to calls by `tool_call_id` through the assistant messages' `tool_calls` (or by the
//! reply's own `name`). A conversation without a user turn is greeted, a user turn without op is asked for one,
//! both in plain text. When the request declares `tools` and the function the script needs is not among them,
//! the model answers in plain text that the tool is not available instead of calling an undeclared tool (no
//! `tools` field at all: every function may be called).
//!
//! Arguments are JSON objects serialized to strings, as OpenAI sends them. Tool-call ids are stable per op and
//! step — `call_lookup_<op>`, `call_refund_<op>`, `call_payment_<op>` — and completion ids are `chatcmpl-` and a
//! hash of the op and the step, so that a replayed turn is the same turn.
//!
//! # Shapes and numbers
//! - The completion and the chunks have OpenAI's full shape; `created` is a fixed instant (the model reads no
//!   clock), `system_fingerprint` is `fp_ballast_chaos`, and `model` echoes the request's (`mock` when absent).
//!   Every model name is served by the same script; [`models_list`] lists `mock` and `gpt-4.1`.
//! - Tokens are characters / 4, rounded up (the context limit in tokens is rounded down, so a conversation over
//!   the limit always reads as more tokens than the maximum). The conversation's size is the characters of all
//!   message contents (strings, or the text parts of arrays) plus all tool-call arguments; over
//!   `context_limit_chars` the request is refused with OpenAI's `context_length_exceeded`.
//! - Streams follow OpenAI: a role chunk, the content a few words a chunk (or the call's id and name, then its
//!   arguments a few characters a chunk), a chunk with `finish_reason` and an empty delta, and a usage chunk with
//!   empty `choices` only when `stream_options.include_usage` is true. Every answer has at least four chunks, so
//!   stream faults (a cut after N chunks, a stall) have room. [`sse_data`] and [`SSE_DONE`] frame them.
//!
//! # The Responses API, the Messages API and embeddings
//! `responses` serves the same script over `POST /v1/responses` (the conversation translated into chat messages,
//! the answer rendered as a `response` object and its events; [`sse_event`] frames them); `messages` serves it
//! over Anthropic's `POST /v1/messages` (the same translation, the answer a `message` object and its events, the
//! errors Anthropic's); `embeddings` answers `POST /v1/embeddings` with deterministic unit vectors. All are pure
//! too.
//!
//! # A stream that fails after content
//! The `stream.error` fault sends part of an answer and then the API's own overload error, and never the
//! stream's end. Each API says which of its events carry content (chat's chunks with content or arguments,
//! Responses' `*.delta` events, Messages' `content_block_delta`s); the stream is its events up to the Nth of those
//! (at least the first; the last when it has fewer), then the error: chat's `{"error": ...}` chunk with OpenAI's
//! 503 words ("The server is overloaded or not ready yet."), Responses' `error` and `response.failed` events
//! with the same error, Messages' `error` event with `overloaded_error`.
//!
//! # Turns and faults
//! The server draws the model endpoint's faults under `op/turn-N`: the conversation's op and N, the assistant
//! messages the conversation already holds (for Responses and Messages, the assistant turns of its chat
//! translation: a turn's message and function calls are one). Each turn of a conversation meets its own faults,
//! and the same conversation meets the same faults through chat completions, Responses and Messages.

mod completion;
mod conversation;
mod embeddings;
mod errors;
mod intent;
mod messages;
mod responses;
mod script;

pub use embeddings::{DEFAULT_DIMENSIONS, embedding, embeddings};
pub(crate) use messages::MessagesRequest;
pub use messages::{MessagesError, MessagesReply, messages_reply};
pub(crate) use responses::ResponsesRequest;
pub use responses::{ResponsesError, ResponsesReply, responses_reply};

use serde_json::Value;

use crate::ModelSettings;

/// The model `reply` echoes when the request names none.
const DEFAULT_MODEL: &str = "mock";

/// The logical operation id of a conversation: the `op` named in its newest user turn, which every tool call of
/// the conversation carries in its arguments. Faults of the model endpoint are keyed by it. `None` when the
/// request has no user turn naming one.
pub fn operation_id(request: &Value) -> Option<String> {
    let messages = request.get("messages")?.as_array()?;
    let user = conversation::newest_user_turn(messages)?;
    intent::operation_id(&conversation::message_text(&messages[user]))
}

/// The key the model endpoint's faults of the chat conversation `messages` are drawn under: `op/turn-N`, the op
/// named in its newest user turn and N its assistant messages. `None` without an op.
pub(crate) fn turn_key(messages: &[Value]) -> Option<String> {
    let user = conversation::newest_user_turn(messages)?;
    let op = intent::operation_id(&conversation::message_text(&messages[user]))?;
    Some(format!("{op}/turn-{}", conversation::assistant_turns(messages)))
}

/// [`turn_key`] of a chat-completions request.
pub(crate) fn chat_fault_key(request: &Value) -> Option<String> {
    turn_key(request.get("messages")?.as_array()?)
}

/// The model's answer to a chat-completions request: the whole `chat.completion` object, and the same answer as
/// the `chat.completion.chunk` objects of a stream (without the final `[DONE]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The non-streamed answer.
    pub completion: Value,
    /// The streamed answer, chunk by chunk.
    pub chunks: Vec<Value>,
}

impl Reply {
    /// The stream failing after `after` content chunks (chunks with content or arguments) with OpenAI's overload,
    /// `{"error": {...}}` (see the module docs): no finish chunk, no `[DONE]`.
    pub(crate) fn overloaded_after(&self, after: u32) -> Vec<Value> {
        let sent = sent_before_error(&self.chunks, after, completion::is_content);
        let mut chunks = self.chunks[..sent].to_vec();
        chunks.push(overloaded_body());
        chunks
    }
}

/// The OpenAI error a stream that fails after content sends: the 503's body.
pub(crate) fn overloaded_body() -> Value {
    errors::injected(503, false)
}

/// How many of `events` a stream error lets through: up to and including the `after`-th event that
/// `is_content` holds for (the first at least; the last of them when there are fewer), or none without content.
pub(crate) fn sent_before_error(events: &[Value], after: u32, is_content: impl Fn(&Value) -> bool) -> usize {
    let wanted = usize::try_from(after.max(1)).unwrap_or(usize::MAX);
    let content: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, event)| is_content(event))
        .map(|(index, _)| index)
        .collect();
    content
        .get(wanted - 1)
        .or(content.last())
        .map_or(0, |index| index + 1)
}

/// A request the model refuses, answered in OpenAI's error format.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The conversation is longer than the configured context.
    #[error("this conversation has {chars} characters, over the model's context of {limit}")]
    ContextLengthExceeded {
        /// Characters in the conversation.
        chars: usize,
        /// The limit.
        limit: usize,
    },
    /// The request is not a chat-completions request the mock understands. The message names the field
    /// (`messages[2].role`).
    #[error("{0}")]
    InvalidRequest(String),
}

impl ModelError {
    /// The HTTP status (400 for both).
    pub fn status(&self) -> u16 {
        400
    }

    /// The OpenAI-format body: `{"error": {"message", "type", "param", "code"}}` — for a conversation too long,
    /// exactly OpenAI's `context_length_exceeded` (`param: "messages"`).
    pub fn body(&self) -> Value {
        match self {
            ModelError::ContextLengthExceeded { chars, limit } => {
                errors::context_length_exceeded(*chars, *limit)
            }
            ModelError::InvalidRequest(message) => errors::invalid_request(message),
        }
    }
}

/// The model's next turn for `request` under `settings`: see the module docs for the script.
///
/// ```
/// use ballast_chaos::{ModelSettings, reply};
/// use serde_json::json;
///
/// let request = json!({
///     "model": "mock",
///     "messages": [{"role": "user", "content": "Refund order 1234, op=op-77"}],
/// });
/// let answer = reply(&request, &ModelSettings::default()).unwrap();
/// let call = &answer.completion["choices"][0]["message"]["tool_calls"][0];
/// assert_eq!(call["id"], "call_lookup_op-77");
/// assert_eq!(call["function"]["name"], "lookup_order");
/// assert_eq!(call["function"]["arguments"], r#"{"op":"op-77","order_id":"1234"}"#);
/// assert!(answer.chunks.len() >= 4);
/// ```
pub fn reply(request: &Value, settings: &ModelSettings) -> Result<Reply, ModelError> {
    let messages = conversation::validate(request)?;
    let chars = conversation::context_chars(messages);
    if chars > settings.context_limit_chars {
        return Err(ModelError::ContextLengthExceeded {
            chars,
            limit: settings.context_limit_chars,
        });
    }
    let declared = conversation::declared_functions(request);
    let turn = script::next_turn(messages, declared.as_deref());
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(DEFAULT_MODEL);
    let meta = completion::Meta::new(&turn.key, model, completion::tokens(chars));
    let include_usage = request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));
    Ok(Reply {
        completion: completion::completion(&turn.answer, &meta),
        chunks: completion::chunks(&turn.answer, &meta, include_usage),
    })
}

/// The OpenAI-format body of an injected error answer with `status`, in OpenAI's own wording:
/// - 429 with `insufficient_quota`: type and code `insufficient_quota` (a quota that waiting does not fix);
/// - 429 otherwise: type `requests`, code `rate_limit_exceeded`;
/// - 500, 502, 503 ("The server is overloaded or not ready yet."), 504: type `server_error`;
/// - 529: Anthropic's overload (`overloaded_error`, "Overloaded") in OpenAI's envelope;
/// - any other status: `invalid_request_error` (4xx) or `server_error`.
///
/// `insufficient_quota` only matters for 429.
pub fn error_body(status: u16, insufficient_quota: bool) -> Value {
    errors::injected(status, insufficient_quota)
}

/// The body of `GET /v1/models`: `mock` and `gpt-4.1`, both served by the same script.
pub fn models_list() -> Value {
    errors::models_list()
}

/// One chunk as a server-sent event: `data: <json>\n\n`.
pub fn sse_data(chunk: &Value) -> String {
    format!("data: {chunk}\n\n")
}

/// The event that ends an OpenAI chat stream (a Responses stream ends with `response.completed` instead).
pub const SSE_DONE: &str = "data: [DONE]\n\n";

/// One Responses event as a server-sent event: `event: <its type>\ndata: <json>\n\n`.
pub fn sse_event(event: &Value) -> String {
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("message");
    format!("event: {kind}\ndata: {event}\n\n")
}

/// The SSE comment a stream sends while it stalls (when the profile's `stream.keep_alive` asks for it); clients
/// ignore it, and it resets their idle timers.
pub const SSE_KEEP_ALIVE: &str = ": keep-alive\n\n";

#[cfg(test)]
mod tests;
