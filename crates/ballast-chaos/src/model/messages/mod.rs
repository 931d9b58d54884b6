//! The mock model over Anthropic's Messages API (`POST /v1/messages`), as pure functions: the same scripted agent
//! as chat completions, read from Messages turns and answered as a `message` object and its events.
//!
//! # Why through chat messages
//! The script is written once, over chat messages (`script::next_turn`), as for Responses: a Messages request is
//! translated into the chat conversation it stands for (`request`: `system` a system message, each assistant
//! message one assistant message with its `tool_use` blocks as tool calls, each `tool_result` a `tool` message),
//! and the script's turn is rendered in Anthropic's shape (`render`). So the same conversation gets the same
//! calls, inputs, text and token counts through every API, and its faults are drawn under the same key
//! (`op/turn-N`, N the assistant messages, see [`crate::model`]).
//!
//! # The request
//! `messages` (required, not empty; roles `user` and `assistant`; `content` a string or blocks: `text`,
//! `tool_use` with `id`, `name` and an object `input`, `tool_result` with `tool_use_id` and a string or text-block
//! `content`; other block types carry no text), `max_tokens` (required, at least 1: Anthropic requires it, and a
//! gateway that forgets it is caught), `system` (a string or text blocks), `tools` (`[{name, ...}]`), `model`
//! (echoed; `mock` when absent), `stream`. Other fields are ignored, never refused. The `anthropic-version` header
//! is the server's to check.
//!
//! # The answer
//! One content block: a `tool_use` (`id` `toolu_lookup_<op>`, `toolu_refund_<op>`, `toolu_payment_<op>` — chat's
//! call ids with Anthropic's prefix — `name`, `input` the chat call's arguments as an object) with `stop_reason`
//! `tool_use`, or a `text` block with `end_turn`. `id` is `msg_` and a hash of the turn, so a replayed turn is the
//! same message. `usage`: `input_tokens` chat's prompt tokens, `output_tokens` chat's completion tokens. Over
//! `max_tokens` the block is cut at `max_tokens` x 4 characters (a call's name counted first; a cut `input` is `{}`
//! in the message, its partial JSON in the stream) and `stop_reason` is `max_tokens`.

mod error;
mod render;
mod request;
mod wording;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value, json};

pub use error::MessagesError;

use super::completion::tokens;
use super::conversation::{context_chars, kind};
use super::{DEFAULT_MODEL, script};
use crate::ModelSettings;

/// The model's answer to a Messages request.
#[derive(Clone, Debug, PartialEq)]
pub struct MessagesReply {
    /// The `message` object (`"type": "message"`).
    pub message: Value,
    /// The same answer as the stream's events, from `message_start` to `message_stop`, each with its `type`.
    pub events: Vec<Value>,
}

impl MessagesReply {
    /// The stream failing with `error` after its preamble (`message_start`, `ping`): an injected error delivered
    /// as events, before any content.
    pub(crate) fn failure(&self, error: &MessagesError) -> Vec<Value> {
        let preamble = self
            .events
            .iter()
            .take_while(|event| event["type"] != "content_block_start");
        preamble.cloned().chain([error.event()]).collect()
    }

    /// The stream failing with Anthropic's overload after `after` content deltas (see
    /// [`StreamFaults::error_after_chunks`](crate::StreamFaults::error_after_chunks)): no `message_stop`.
    pub(crate) fn overloaded_after(&self, after: u32) -> Vec<Value> {
        let sent = super::sent_before_error(&self.events, after, render::is_content);
        let mut events = self.events[..sent].to_vec();
        events.push(MessagesError::OVERLOADED.event());
        events
    }
}

/// The model's next turn for a Messages `request`: see the module docs of `model` for the script. The same
/// conversation gets the same answer as through [`crate::reply`].
///
/// ```
/// use ballast_chaos::{ModelSettings, messages_reply};
/// use serde_json::json;
///
/// let request = json!({
///     "model": "claude-sonnet-4-5",
///     "max_tokens": 1024,
///     "messages": [{"role": "user", "content": "Refund order 1234, op=op-77"}],
/// });
/// let answer = messages_reply(&request, &ModelSettings::default()).unwrap();
/// let call = &answer.message["content"][0];
/// assert_eq!(call["type"], "tool_use");
/// assert_eq!(call["id"], "toolu_lookup_op-77");
/// assert_eq!(call["input"], json!({"op": "op-77", "order_id": "1234"}));
/// assert_eq!(answer.message["stop_reason"], "tool_use");
/// assert_eq!(answer.events.last().unwrap()["type"], "message_stop");
/// ```
pub fn messages_reply(request: &Value, settings: &ModelSettings) -> Result<MessagesReply, MessagesError> {
    MessagesRequest::parse(request)?.reply(settings)
}

/// A Messages request, read and checked.
#[derive(Clone, Debug)]
pub(crate) struct MessagesRequest<'a> {
    read: request::Read<'a>,
    model: &'a str,
    max_tokens: u64,
    /// `stream: true`.
    pub(crate) stream: bool,
}

impl<'a> MessagesRequest<'a> {
    /// Reads a `POST /v1/messages` body, refusing what the script cannot read (with the field named).
    pub(crate) fn parse(request: &'a Value) -> Result<Self, MessagesError> {
        let body = object(request)?;
        let max_tokens = match body.get("max_tokens") {
            None | Some(Value::Null) => {
                return Err(MessagesError::InvalidRequest("max_tokens: Field required".into()));
            }
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n >= 1) => n.as_u64().unwrap_or(1),
            Some(Value::Number(n)) if n.is_i64() => {
                return Err(MessagesError::InvalidRequest(
                    "max_tokens: Input should be greater than or equal to 1".into(),
                ));
            }
            Some(other) => {
                return Err(MessagesError::InvalidRequest(format!(
                    "max_tokens: Input should be a valid integer, not {}",
                    kind(other)
                )));
            }
        };
        Ok(MessagesRequest {
            read: request::read(body)?,
            model: body.get("model").and_then(Value::as_str).unwrap_or(DEFAULT_MODEL),
            max_tokens,
            stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// The answer of `POST /v1/messages/count_tokens` to `request` (a Messages body without `max_tokens`):
    /// `{"input_tokens": N}`, N what a message's `usage.input_tokens` would be.
    pub(crate) fn count_tokens(request: &Value) -> Result<Value, MessagesError> {
        let read = request::read(object(request)?)?;
        Ok(json!({"input_tokens": tokens(context_chars(&read.chat))}))
    }

    /// The key the model endpoint's faults are drawn under: the same as chat's for the same conversation.
    pub(crate) fn fault_key(&self) -> Option<String> {
        super::turn_key(&self.read.chat)
    }

    /// The answer.
    pub(crate) fn reply(&self, settings: &ModelSettings) -> Result<MessagesReply, MessagesError> {
        let chars = context_chars(&self.read.chat);
        if chars > settings.context_limit_chars {
            return Err(MessagesError::PromptTooLong {
                tokens: tokens(chars),
                limit: settings.context_limit_chars / 4,
            });
        }
        let turn = script::next_turn(&self.read.chat, self.read.declared.as_deref());
        let meta = render::Meta {
            model: self.model,
            input_tokens: tokens(chars),
            max_tokens: self.max_tokens,
        };
        Ok(render::render(&turn, &meta))
    }
}

fn object(request: &Value) -> Result<&Map<String, Value>, MessagesError> {
    request.as_object().ok_or_else(|| {
        MessagesError::InvalidRequest(format!(
            "The request body must be a JSON object, but got {} instead.",
            kind(request)
        ))
    })
}
