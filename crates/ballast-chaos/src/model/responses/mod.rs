//! The mock model over OpenAI's Responses API (`POST /v1/responses`), as pure functions: the same scripted agent
//! as chat completions, read from Responses input items and answered as a `response` object and its events.
//!
//! # Why through chat messages
//! The script is written once, over chat messages (`script::next_turn`). A Responses request is translated into
//! the chat conversation it stands for (`input::chat_messages`: the instructions as a system message, a turn's
//! function calls as one assistant message with `tool_calls`, each `function_call_output` as a `tool` message,
//! reasoning left out), and the script's turn is rendered in the Responses shape. So the same conversation gets
//! the same calls, arguments, call ids and text through either API, its size and tokens are counted alike, and its
//! faults are drawn under the same key (`op/turn-N`, N the assistant turns, see [`crate::model`]).
//!
//! # State is the caller's
//! These functions hold no state: the caller passes the `history` a request continues — the items of its
//! `previous_response_id` or its `conversation` — and the response `id`. The server keeps stored responses and
//! conversations, and hands out ids unique per server.
//!
//! # The request
//! `input` (a string, or items: messages in the easy `{"role", "content"}` or the `{"type": "message"}` form,
//! `function_call`, `function_call_output`, `reasoning` and any other type, the last ones ignored), `instructions`,
//! `tools` (flat function tools), `model`, `stream`, `store` (default true), `background`, `previous_response_id`,
//! `conversation` (an id, or `{"id"}`), `reasoning` (present and not null: the output starts with a `reasoning`
//! item with a one-line summary), `max_output_tokens` (see `output::produce`). Fields the mock does not use are
//! echoed when the response object has them (`tool_choice`, `temperature`, `metadata`, ...) and otherwise ignored,
//! never refused.

mod error;
mod events;
mod input;
mod output;

#[cfg(test)]
mod tests;

use serde_json::{Map, Value, json};

pub use error::ResponsesError;

use super::completion::{CREATED, tokens};
use super::{DEFAULT_MODEL, conversation, script};
use crate::ModelSettings;
use crate::model::conversation::kind;

/// The model's answer to a Responses request.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponsesReply {
    /// The `response` object (`status` `completed`, or `incomplete` when `max_output_tokens` cut it).
    pub response: Value,
    /// The same answer as the stream's events, from `response.created` to `response.completed` (or
    /// `response.incomplete`), each with its `type` and `sequence_number`.
    pub events: Vec<Value>,
    /// The request's input as items (a string input is one user message): with `response.output` after them,
    /// what this turn adds to a conversation.
    pub input: Vec<Value>,
}

/// The model's next turn for a Responses `request` that continues `history` (the items of its
/// `previous_response_id` or `conversation`, in order; empty for a new conversation), answered as response `id`.
/// See the module docs of `model` for the script: the same conversation gets the same answer as through
/// [`crate::reply`].
///
/// ```
/// use ballast_chaos::{ModelSettings, responses_reply};
/// use serde_json::json;
///
/// let request = json!({"model": "mock", "input": "Refund order 1234, op=op-77"});
/// let answer = responses_reply(&request, &[], &ModelSettings::default(), "resp_1").unwrap();
/// let call = &answer.response["output"][0];
/// assert_eq!(call["type"], "function_call");
/// assert_eq!(call["call_id"], "call_lookup_op-77");
/// assert_eq!(call["arguments"], r#"{"op":"op-77","order_id":"1234"}"#);
/// assert_eq!(answer.events.last().unwrap()["response"], answer.response);
/// ```
pub fn responses_reply(
    request: &Value,
    history: &[Value],
    settings: &ModelSettings,
    id: &str,
) -> Result<ResponsesReply, ResponsesError> {
    ResponsesRequest::parse(request)?.reply(history, settings, id)
}

/// A Responses request, read and checked.
#[derive(Clone, Debug)]
pub(crate) struct ResponsesRequest<'a> {
    body: &'a Map<String, Value>,
    input: Vec<Value>,
    instructions: Option<&'a str>,
    declared: Option<Vec<&'a str>>,
    /// `stream: true`.
    pub(crate) stream: bool,
    /// `store` (default true).
    pub(crate) store: bool,
    /// `background: true`.
    pub(crate) background: bool,
    /// The response it continues.
    pub(crate) previous_response_id: Option<&'a str>,
    /// The conversation it belongs to.
    pub(crate) conversation: Option<&'a str>,
    reasoning: bool,
    max_output_tokens: Option<u64>,
}

impl<'a> ResponsesRequest<'a> {
    /// Reads `request`, refusing what the script cannot read (with the field named).
    pub(crate) fn parse(request: &'a Value) -> Result<Self, ResponsesError> {
        let Some(body) = request.as_object() else {
            return Err(ResponsesError::InvalidRequest {
                message: format!(
                    "The request body must be a JSON object, but got {} instead.",
                    kind(request)
                ),
                param: None,
            });
        };
        let previous_response_id = optional_string(body, "previous_response_id")?;
        let conversation = match body.get("conversation") {
            Some(Value::Object(conversation)) => {
                Some(conversation.get("id").and_then(Value::as_str).ok_or_else(|| {
                    ResponsesError::invalid(
                        "Missing required parameter: 'conversation.id'.".into(),
                        "conversation.id",
                    )
                })?)
            }
            _ => optional_string(body, "conversation")?,
        };
        if previous_response_id.is_some() && conversation.is_some() {
            return Err(ResponsesError::invalid(
                "Mutually exclusive parameters: Ensure you are only providing one of: 'previous_response_id' or \
                 'conversation'."
                    .into(),
                "conversation",
            ));
        }
        let flag = |key: &str, default: bool| body.get(key).and_then(Value::as_bool).unwrap_or(default);
        let (store, background) = (flag("store", true), flag("background", false));
        if background && !store {
            return Err(ResponsesError::invalid(
                "Background mode requires 'store' to be true.".into(),
                "background",
            ));
        }
        let max_output_tokens = match body.get("max_output_tokens") {
            None | Some(Value::Null) => None,
            Some(value) => Some(value.as_u64().ok_or_else(|| {
                ResponsesError::invalid(
                    format!(
                        "Invalid type for 'max_output_tokens': expected an integer, but got {value} instead."
                    ),
                    "max_output_tokens",
                )
            })?),
        };
        Ok(ResponsesRequest {
            body,
            input: input::items(body.get("input"))?,
            instructions: body.get("instructions").and_then(Value::as_str),
            declared: input::declared_functions(body.get("tools"))?,
            stream: flag("stream", false),
            store,
            background,
            previous_response_id,
            conversation,
            reasoning: body.get("reasoning").is_some_and(|r| !r.is_null()),
            max_output_tokens,
        })
    }

    /// The chat conversation of this request after `history`.
    fn chat_messages(&self, history: &[Value]) -> Vec<Value> {
        let items: Vec<Value> = history.iter().chain(&self.input).cloned().collect();
        input::chat_messages(self.instructions, &items)
    }

    /// The key the model endpoint's faults are drawn under: the same as chat's for the same conversation.
    pub(crate) fn fault_key(&self, history: &[Value]) -> Option<String> {
        super::turn_key(&self.chat_messages(history))
    }

    /// The answer, as response `id`, continuing `history`.
    pub(crate) fn reply(
        &self,
        history: &[Value],
        settings: &ModelSettings,
        id: &str,
    ) -> Result<ResponsesReply, ResponsesError> {
        let messages = self.chat_messages(history);
        let chars = conversation::context_chars(&messages);
        if chars > settings.context_limit_chars {
            return Err(ResponsesError::ContextLengthExceeded {
                chars,
                limit: settings.context_limit_chars,
            });
        }
        let turn = script::next_turn(&messages, self.declared.as_deref());
        let produced = output::produce(
            &turn.answer,
            id,
            self.reasoning,
            self.max_output_tokens,
            tokens(chars),
        );
        let in_progress = Value::Object(self.envelope(id, "in_progress"));
        let mut done = self.envelope(
            id,
            if produced.incomplete {
                "incomplete"
            } else {
                "completed"
            },
        );
        let output: Vec<Value> = produced.items.iter().map(output::OutputItem::done).collect();
        done.insert("output".into(), json!(output));
        done.insert("usage".into(), produced.usage);
        if produced.incomplete {
            done.insert(
                "incomplete_details".into(),
                json!({"reason": "max_output_tokens"}),
            );
        }
        let response = Value::Object(done);
        Ok(ResponsesReply {
            events: events::answer(&in_progress, &produced.items, &response),
            response,
            input: self.input.clone(),
        })
    }

    /// The request's input as items.
    pub(crate) fn input(&self) -> &[Value] {
        &self.input
    }

    /// The response object `id` with `status` and no output yet (`queued`, `in_progress`, `cancelled`).
    pub(crate) fn pending(&self, id: &str, status: &str) -> Value {
        Value::Object(self.envelope(id, status))
    }

    /// The stream of this request failing after its preamble with the OpenAI error `body`
    /// (`{"error": {...}}`): `response.created`, `response.in_progress`, `error`, `response.failed`. The last
    /// event's response is the failed response.
    pub(crate) fn failure_events(&self, id: &str, body: &Value) -> Vec<Value> {
        let error = body.get("error").cloned().unwrap_or(Value::Null);
        let in_progress = Value::Object(self.envelope(id, "in_progress"));
        events::failure(&in_progress, &self.failed(id, &error), &error)
    }

    /// The stream of `reply` (answered as response `id`) failing after `after` content events with OpenAI's
    /// overload (see [`crate::model`]): its events up to then, `error`, `response.failed` (no output: the
    /// response failed). The last event's response is the failed response.
    pub(crate) fn overloaded_after(&self, reply: &ResponsesReply, id: &str, after: u32) -> Vec<Value> {
        let sent = super::sent_before_error(&reply.events, after, events::is_content);
        let error = super::overloaded_body()["error"].clone();
        events::failure_after(&reply.events[..sent], &self.failed(id, &error), &error)
    }

    /// The response `id` failed with the OpenAI error object `error`.
    fn failed(&self, id: &str, error: &Value) -> Value {
        let mut failed = self.envelope(id, "failed");
        failed.insert(
            "error".into(),
            json!({"code": events::error_code(error), "message": error.get("message")}),
        );
        Value::Object(failed)
    }

    /// The response object's fields but `output` and `usage`: the request's settings echoed, as OpenAI's are.
    fn envelope(&self, id: &str, status: &str) -> Map<String, Value> {
        let echo = |key: &str, default: Value| match self.body.get(key) {
            Some(value) if !value.is_null() => value.clone(),
            _ => default,
        };
        let fields = json!({
            "id": id,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "background": self.background,
            "conversation": self.conversation.map(|id| json!({"id": id})),
            "error": null,
            "incomplete_details": null,
            "instructions": self.instructions,
            "max_output_tokens": self.max_output_tokens,
            "metadata": echo("metadata", json!({})),
            "model": echo("model", json!(DEFAULT_MODEL)),
            "output": [],
            "parallel_tool_calls": echo("parallel_tool_calls", json!(true)),
            "previous_response_id": self.previous_response_id,
            "reasoning": echo("reasoning", json!({"effort": null, "summary": null})),
            "service_tier": "default",
            "store": self.store,
            "temperature": echo("temperature", json!(1.0)),
            "text": echo("text", json!({"format": {"type": "text"}})),
            "tool_choice": echo("tool_choice", json!("auto")),
            "tools": echo("tools", json!([])),
            "top_p": echo("top_p", json!(1.0)),
            "truncation": echo("truncation", json!("disabled")),
            "usage": null,
            "user": echo("user", Value::Null),
        });
        match fields {
            Value::Object(fields) => fields,
            _ => Map::new(),
        }
    }
}

/// A string field, or none (absent or null); any other type is refused.
fn optional_string<'a>(body: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ResponsesError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(other) => Err(ResponsesError::invalid(
            format!(
                "Invalid type for '{key}': expected a string, but got {} instead.",
                kind(other)
            ),
            key,
        )),
    }
}
