//! One answer as the Responses API streams it: typed events, each with its `type` and a `sequence_number`
//! counting from 0.
//!
//! The order is OpenAI's: `response.created` and `response.in_progress` (the response with no output yet), then
//! per output item `response.output_item.added`, its content in pieces, `response.output_item.done`, and last
//! `response.completed` (or `response.incomplete`) carrying the whole response. The pieces are split as chat
//! splits its chunks (a few words of text, a dozen characters of arguments), so a stream always has events
//! after its preamble for a cut or a stall to fall between, and the deltas of an item concatenated are its text.

use serde_json::{Map, Value, json};

use super::output::{ItemKind, OutputItem, summary_part, text_part};
use crate::model::completion::{fragments, pieces};

/// Events, numbered as they are pushed.
#[derive(Default)]
struct Events(Vec<Value>);

impl Events {
    fn push(&mut self, kind: &str, fields: Value) {
        let mut event = Map::new();
        event.insert("type".into(), json!(kind));
        event.insert("sequence_number".into(), json!(self.0.len()));
        if let Value::Object(fields) = fields {
            event.extend(fields);
        }
        self.0.push(Value::Object(event));
    }

    /// The preamble: the response created, then in progress.
    fn preamble(&mut self, in_progress: &Value) {
        self.push("response.created", json!({"response": in_progress}));
        self.push("response.in_progress", json!({"response": in_progress}));
    }
}

/// The stream of a response: `in_progress` is the response before any output, `items` what it produced and
/// `done` the finished response (its `status` decides the last event: `completed` or `incomplete`).
pub(super) fn answer(in_progress: &Value, items: &[OutputItem], done: &Value) -> Vec<Value> {
    let mut events = Events::default();
    events.preamble(in_progress);
    for (index, item) in items.iter().enumerate() {
        events.push(
            "response.output_item.added",
            json!({"output_index": index, "item": item.added()}),
        );
        item_content(&mut events, index, item);
        events.push(
            "response.output_item.done",
            json!({"output_index": index, "item": item.done()}),
        );
    }
    let last = match done.get("status").and_then(Value::as_str) {
        Some("incomplete") => "response.incomplete",
        _ => "response.completed",
    };
    events.push(last, json!({"response": done}));
    events.0
}

/// The events between an item's `added` and `done`.
fn item_content(events: &mut Events, output_index: usize, item: &OutputItem) {
    let id = &item.id;
    match &item.kind {
        ItemKind::Reasoning { summary } => {
            let at = json!({"item_id": id, "output_index": output_index, "summary_index": 0});
            let with = |fields: Value| merged(&at, fields);
            events.push(
                "response.reasoning_summary_part.added",
                with(json!({"part": summary_part("")})),
            );
            for delta in pieces(summary) {
                events.push(
                    "response.reasoning_summary_text.delta",
                    with(json!({"delta": delta})),
                );
            }
            events.push(
                "response.reasoning_summary_text.done",
                with(json!({"text": summary})),
            );
            events.push(
                "response.reasoning_summary_part.done",
                with(json!({"part": summary_part(summary)})),
            );
        }
        ItemKind::Call { name, arguments, .. } => {
            let at = json!({"item_id": id, "output_index": output_index});
            for delta in fragments(arguments) {
                events.push(
                    "response.function_call_arguments.delta",
                    merged(&at, json!({"delta": delta})),
                );
            }
            events.push(
                "response.function_call_arguments.done",
                merged(&at, json!({"name": name, "arguments": arguments})),
            );
        }
        ItemKind::Message { text } => {
            let at = json!({"item_id": id, "output_index": output_index, "content_index": 0});
            let with = |fields: Value| merged(&at, fields);
            events.push(
                "response.content_part.added",
                with(json!({"part": text_part("")})),
            );
            for delta in pieces(text) {
                events.push(
                    "response.output_text.delta",
                    with(json!({"delta": delta, "logprobs": []})),
                );
            }
            events.push(
                "response.output_text.done",
                with(json!({"text": text, "logprobs": []})),
            );
            events.push(
                "response.content_part.done",
                with(json!({"part": text_part(text)})),
            );
        }
    }
}

/// The stream of a response that fails after its preamble: `response.created`, `response.in_progress`, an
/// `error` event, and `response.failed` with `failed` (the response, `status: "failed"`, its `error` set).
///
/// `error` is the OpenAI error object (`{"message", "type", "param", "code"}`). The `error` event carries its
/// `code`, `message` and `param` at the top level, as OpenAI's `ResponseErrorEvent` documents them, and the whole
/// object under `error`, as OpenAI's servers actually send it — so a client reading either shape finds them (and
/// the Python SDK, which raises on a top-level `error`, raises). The `code` is the error's code, or its type when it
/// has none (`server_error`).
pub(super) fn failure(in_progress: &Value, failed: &Value, error: &Value) -> Vec<Value> {
    let mut events = Events::default();
    events.preamble(in_progress);
    events.fail(failed, error);
    events.0
}

/// The stream of a response that fails after `sent`, the first events of its answer: those, then the `error` and
/// `response.failed` events of [`failure`], numbered on from them.
pub(super) fn failure_after(sent: &[Value], failed: &Value, error: &Value) -> Vec<Value> {
    let mut events = Events(sent.to_vec());
    events.fail(failed, error);
    events.0
}

impl Events {
    /// The `error` event, then `response.failed`.
    fn fail(&mut self, failed: &Value, error: &Value) {
        self.push(
            "error",
            json!({
                "code": error_code(error),
                "message": error.get("message"),
                "param": error.get("param"),
                "error": error,
            }),
        );
        self.push("response.failed", json!({"response": failed}));
    }
}

/// Whether an event carries content: a `*.delta` event (text, arguments or a reasoning summary). A stream error
/// (`stream.error_after_chunks`) counts these.
pub(super) fn is_content(event: &Value) -> bool {
    event
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind.ends_with(".delta"))
}

/// The `code` of an error object, or its `type` when the code is null.
pub(super) fn error_code(error: &Value) -> Value {
    match error.get("code") {
        Some(Value::String(code)) => json!(code),
        _ => error.get("type").cloned().unwrap_or(Value::Null),
    }
}

/// `base` with `fields` added.
fn merged(base: &Value, fields: Value) -> Value {
    let mut object = base.as_object().cloned().unwrap_or_default();
    if let Value::Object(fields) = fields {
        object.extend(fields);
    }
    Value::Object(object)
}
