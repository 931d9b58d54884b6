//! Anthropic's Messages API (`POST /messages`, `POST /messages/count_tokens`) as a protocol of the model
//! pipeline ([`Messages`], [`CountTokens`]): its bodies, where its stream commits (DESIGN.md, "Streaming":
//! `commit`), what each event after that means (`read_event`), its tokens and how a conversation is cut to fit.
//!
//! **Headers.** A Messages deployment is sent its key as `x-api-key` (not `Authorization: Bearer`), and every
//! request carries `anthropic-version` — the caller's ([`MessagesRequest::version`]), else [`ANTHROPIC_VERSION`]
//! — and the caller's `anthropic-beta`, if any ([`MessagesRequest::beta`]).
//!
//! **Before the commit point.** `message_start` (the message's id and model, its input tokens) and `ping` carry
//! nothing for the caller and are held back with the status line; the first `content_block_start` or
//! `content_block_delta` commits — and so does any other event (`message_delta`, `message_stop`, one Ballast
//! does not know): an answer with no content block is still an answer. An `error` event before the commit
//! (`overloaded_error` after `message_start`, as Anthropic sends under load) is the attempt's error answer, in
//! Anthropic's envelope, with the status its type stands for — 529 for `overloaded_error`, an overload and not a
//! failure — so it is retried or falls back and the caller never sees it. An event that is not a JSON object
//! with a `type` is no Messages event: a failed attempt.
//!
//! **After the commit point.** Every event is handed on; `message_stop` is the last, and only after it does the
//! stream end cleanly. An `error` event ends it with the upstream's error; a stream that stops before
//! `message_stop` is cut. The gateway then writes Anthropic's own `error` event and nothing after it.
//!
//! **Tokens.** Anthropic reports the input in `message_start` and the output in `message_delta` (cumulative);
//! the prompt counts `input_tokens` with the cache's (`cache_creation_input_tokens`,
//! `cache_read_input_tokens`), which Anthropic reports apart.
//!
//! **Truncation** (`on_overflow = "truncate"`): the chat rule over `messages` — the newest user turn and what
//! follows are kept, older turns dropped whole, oldest first; a user message that only returns `tool_result`s
//! is a reply, not a turn, and stays with the `tool_use` it answers. `system` is a field of its own, never cut.

use ballast_config::Api;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

use super::api::{Protocol, Read, Streamed, event_object, kind};
use super::object::{ObjectWriter, read_object};
use super::provider::status_of_error_event;
use super::truncate::{TurnItem, truncate_turns};
use super::usage::counts_of_body;
use super::{CannotTruncate, Truncation, TruncationGoal};
use crate::TokenUsage;
use crate::body::{Commit, CommitRule};

/// The `anthropic-version` sent when the caller names none.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `anthropic-version`.
pub(crate) const VERSION_HEADER: HeaderName = HeaderName::from_static("anthropic-version");
/// `anthropic-beta`.
pub(crate) const BETA_HEADER: HeaderName = HeaderName::from_static("anthropic-beta");

/// A `POST /messages` request (and a `POST /messages/count_tokens` one, which has no `max_tokens`): the model
/// and the conversation typed (routing, truncation), every other key (`max_tokens`, `system`, `tools`,
/// `thinking`, ...) passed through untouched.
#[derive(Clone, Debug, PartialEq)]
pub struct MessagesRequest {
    /// The model asked for: a route name on the way in, the deployment's model name on the way out.
    pub model: String,
    /// The conversation, oldest first.
    pub messages: Vec<MessageParam>,
    /// `true` for a streamed answer.
    pub stream: Option<bool>,
    /// Every other key, untouched.
    pub extra: Map<String, Value>,
    /// Sent as the `anthropic-version` header, not in the body ([`ANTHROPIC_VERSION`] when `None`).
    pub version: Option<String>,
    /// Sent as the `anthropic-beta` header, not in the body (comma-separated betas, as the caller wrote them).
    pub beta: Option<String>,
}

/// One message of a Messages conversation (`{"role": "user" | "assistant", "content": ...}`), kept as sent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageParam(pub Map<String, Value>);

/// The answer of `POST /messages` (not streamed): its content blocks, stop reason and usage typed, every other
/// key (`id`, `model`, `role`, ...) passed through.
#[derive(Clone, Debug, PartialEq)]
pub struct MessagesResponse {
    /// The content blocks (`text`, `tool_use`, `thinking`, ...), as sent.
    pub content: Vec<Value>,
    /// `end_turn`, `tool_use`, `max_tokens`, ...
    pub stop_reason: Option<String>,
    /// Token usage (`input_tokens`, `output_tokens`, the cache's).
    pub usage: Option<Value>,
    /// Every other key, untouched.
    pub extra: Map<String, Value>,
}

/// One event of a streamed message (its data: a JSON object with its `type`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessagesEvent(pub Map<String, Value>);

/// The answer of `POST /messages/count_tokens`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenCount {
    /// The request's input tokens.
    pub input_tokens: u64,
    /// Every other key, untouched.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One tool use of a message: what the `tool_result` must name, the tool, its input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ToolUse<'a> {
    /// The tool use's `id` (`toolu_...`).
    pub id: &'a str,
    /// The tool.
    pub name: &'a str,
    /// Its input, a JSON object.
    pub input: &'a Value,
}

impl MessagesRequest {
    /// A request to `model` with `messages`, answered in at most `max_tokens` tokens.
    pub fn new(model: impl Into<String>, max_tokens: u64, messages: Vec<MessageParam>) -> Self {
        let mut extra = Map::new();
        extra.insert("max_tokens".into(), max_tokens.into());
        MessagesRequest {
            model: model.into(),
            messages,
            stream: None,
            extra,
            version: None,
            beta: None,
        }
    }
}

impl MessageParam {
    /// A user message saying `text`.
    pub fn user(text: impl Into<String>) -> Self {
        MessageParam::of("user", Value::String(text.into()))
    }

    /// A message of `role` with `content` (a text, or content blocks).
    pub fn of(role: &str, content: Value) -> Self {
        let mut message = Map::new();
        message.insert("role".into(), role.into());
        message.insert("content".into(), content);
        MessageParam(message)
    }

    /// Its role (`user`, `assistant`).
    pub fn role(&self) -> Option<&str> {
        self.0.get("role").and_then(Value::as_str)
    }

    /// Its content blocks (none for a text content).
    fn blocks(&self) -> impl Iterator<Item = &Map<String, Value>> {
        (self.0.get("content").and_then(Value::as_array).into_iter())
            .flatten()
            .filter_map(Value::as_object)
    }

    /// The ids its blocks of `kind` name under `key` (`tool_use`'s `id`, `tool_result`'s `tool_use_id`).
    fn ids(&self, kind: &str, key: &str) -> Vec<&str> {
        (self.blocks())
            .filter(|block| block.get("type").and_then(Value::as_str) == Some(kind))
            .filter_map(|block| block.get(key)?.as_str())
            .collect()
    }

    /// Whether it returns tool results (a user message whose blocks include `tool_result`).
    fn returns_results(&self) -> bool {
        self.blocks()
            .any(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"))
    }
}

impl MessagesResponse {
    /// The text of its `text` blocks, joined.
    pub fn text(&self) -> String {
        (self.content.iter())
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text")?.as_str())
            .collect()
    }

    /// Its `tool_use` blocks, in order.
    pub fn tool_uses(&self) -> Vec<ToolUse<'_>> {
        (self.content.iter())
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
            .filter_map(|block| {
                Some(ToolUse {
                    id: block.get("id")?.as_str()?,
                    name: block.get("name")?.as_str()?,
                    input: block.get("input")?,
                })
            })
            .collect()
    }

    /// The answer as the assistant's turn of the conversation, to send back with the tool results.
    pub fn to_message(&self) -> MessageParam {
        MessageParam::of("assistant", Value::Array(self.content.clone()))
    }
}

impl MessagesEvent {
    /// Its `type` (`message_start`, `content_block_delta`, ...).
    pub fn kind(&self) -> &str {
        kind(&self.0)
    }
}

impl<'de> Deserialize<'de> for MessagesRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(MessagesRequest {
                model: object.required("model")?,
                messages: object.required("messages")?,
                stream: object.optional("stream")?,
                extra: object.take_rest(),
                version: None,
                beta: None,
            })
        })
    }
}

impl Serialize for MessagesRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("model", Some(&self.model))?;
        object.field("messages", Some(&self.messages))?;
        object.field("stream", self.stream.as_ref())?;
        object.end()
    }
}

impl<'de> Deserialize<'de> for MessagesResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(MessagesResponse {
                content: object.required("content")?,
                stop_reason: object.optional("stop_reason")?,
                usage: object.optional("usage")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for MessagesResponse {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("content", Some(&self.content))?;
        object.field("stop_reason", self.stop_reason.as_ref())?;
        object.field("usage", self.usage.as_ref())?;
        object.end()
    }
}

/// Anthropic's Messages API: `POST /messages`.
pub(crate) struct Messages;

impl Protocol for Messages {
    const API: Api = Api::Messages;
    const PATH: &'static str = "/messages";
    type Request = MessagesRequest;
    type Answer = MessagesResponse;

    fn set_model(request: &mut MessagesRequest, model: &str) {
        model.clone_into(&mut request.model);
    }

    fn truncate(request: &mut MessagesRequest, goal: TruncationGoal) -> Result<Truncation, CannotTruncate> {
        truncate_turns(&mut request.messages, goal)
    }

    fn headers(request: &MessagesRequest, headers: &mut HeaderMap) {
        anthropic_headers(request, headers);
    }

    fn usage(body: &[u8]) -> Option<TokenUsage> {
        // Only `usage` is read into values; the content is skipped over as raw text.
        counts_of_body(body, usage_of)
    }
}

impl Streamed for Messages {
    type Event = MessagesEvent;
    const COMMIT: CommitRule = commit;
    const READ: fn(&str) -> Read<MessagesEvent> = read_event;

    fn set_stream(request: &mut MessagesRequest, stream: bool) {
        request.stream = stream.then_some(true);
    }
}

/// Anthropic's token counting: `POST /messages/count_tokens` (no tokens spent, none counted).
pub(crate) struct CountTokens;

impl Protocol for CountTokens {
    const API: Api = Api::Messages;
    const PATH: &'static str = "/messages/count_tokens";
    type Request = MessagesRequest;
    type Answer = TokenCount;

    fn set_model(request: &mut MessagesRequest, model: &str) {
        model.clone_into(&mut request.model);
    }

    fn truncate(_: &mut MessagesRequest, _: TruncationGoal) -> Result<Truncation, CannotTruncate> {
        // Counting is how a caller learns a conversation is too long: it is counted as sent.
        Err(CannotTruncate::NothingToDrop)
    }

    fn headers(request: &MessagesRequest, headers: &mut HeaderMap) {
        anthropic_headers(request, headers);
    }

    fn usage(_: &[u8]) -> Option<TokenUsage> {
        None
    }
}

/// `anthropic-version` (the caller's, else [`ANTHROPIC_VERSION`]) and the caller's `anthropic-beta`.
fn anthropic_headers(request: &MessagesRequest, headers: &mut HeaderMap) {
    let version = (request.version.as_deref())
        .and_then(|v| HeaderValue::from_str(v).ok())
        .unwrap_or(HeaderValue::from_static(ANTHROPIC_VERSION));
    headers.insert(VERSION_HEADER, version);
    if let Some(beta) = request
        .beta
        .as_deref()
        .and_then(|b| HeaderValue::from_str(b).ok())
    {
        headers.insert(BETA_HEADER, beta);
    }
}

/// The counts of an Anthropic `usage` object: the prompt is the input with the cache's, the completion the
/// output. `None` when it holds no count.
pub(crate) fn usage_of(usage: &Value) -> Option<TokenUsage> {
    let count = |name: &str| usage.get(name).and_then(Value::as_u64);
    let input = [
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    ]
    .map(count);
    let output = count("output_tokens");
    if input.iter().all(Option::is_none) && output.is_none() {
        return None;
    }
    let prompt = input.into_iter().flatten().sum::<u64>();
    let completion = output.unwrap_or(0);
    Some(TokenUsage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
    })
}

/// The events that carry nothing for the caller: held back until content comes.
const PREAMBLE: [&str; 2] = ["message_start", "ping"];

/// What event `data` of a Messages stream means before the commit point (module docs).
pub(crate) fn commit(data: &str) -> Commit {
    let Some(event) = event_object(data) else {
        return Commit::Fail(format!(
            "the stream's first event is not a Messages event: {data}"
        ));
    };
    match kind(&event) {
        kind if PREAMBLE.contains(&kind) => Commit::Hold,
        "error" => error_answer(&error_of(&event)),
        _ => Commit::Now,
    }
}

/// What event `data` of a Messages stream means after the commit point (module docs).
pub(crate) fn read_event(data: &str) -> Read<MessagesEvent> {
    let Some(event) = event_object(data) else {
        if data.trim() == crate::sse::DONE {
            // A chat stream's end, without the Messages API's: the answer is not whole.
            return Read::Cut;
        }
        return Read::Malformed(format!("not a Messages event: {data}"));
    };
    match kind(&event) {
        "error" => Read::Upstream(error_of(&event)),
        "message_stop" => Read::Last(MessagesEvent(event), None),
        "message_start" => {
            let usage = (event.get("message"))
                .and_then(|m| m.get("usage"))
                .and_then(usage_of);
            Read::Item(MessagesEvent(event), usage)
        }
        "message_delta" => {
            let usage = event.get("usage").and_then(usage_of);
            Read::Item(MessagesEvent(event), usage)
        }
        _ => Read::Item(MessagesEvent(event), None),
    }
}

/// An error event before the commit point as the attempt's error answer: Anthropic's envelope, with the status
/// its type stands for.
fn error_answer(error: &Value) -> Commit {
    let body = json!({"type": "error", "error": error});
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    Commit::Error {
        status: status_of_error_event(&bytes),
        body: bytes.into(),
    }
}

/// The error object of an `error` event (`{"type": "error", "error": {"type", "message"}}`); the event's own
/// fields when it has none.
fn error_of(event: &Map<String, Value>) -> Value {
    match event.get("error") {
        Some(error @ Value::Object(_)) => error.clone(),
        _ => {
            let own: Map<String, Value> = (event.iter())
                .filter(|(key, _)| key.as_str() != "type")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            Value::Object(own)
        }
    }
}

impl TurnItem for MessageParam {
    fn is_instruction(&self) -> bool {
        // Anthropic's instructions are the request's `system`, not a message.
        false
    }

    fn is_user(&self) -> bool {
        self.role() == Some("user") && !self.returns_results()
    }

    fn call_ids(&self) -> Option<Vec<&str>> {
        let ids = self.ids("tool_use", "id");
        (self.role() == Some("assistant") && !ids.is_empty()).then_some(ids)
    }

    fn reply_to(&self) -> Option<Option<&str>> {
        (self.role() == Some("user") && self.returns_results())
            .then(|| self.ids("tool_result", "tool_use_id").first().copied())
    }
}

#[cfg(test)]
mod tests;
