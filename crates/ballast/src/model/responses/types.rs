//! The Responses API's bodies: typed where Ballast reads a field, every other key passed through both ways.
//!
//! The same rules as the chat bodies (`model/types.rs`): a key Ballast does not model is kept and written out
//! again unchanged; writing adds nothing that was absent; a typed optional field given `null` reads as `None`
//! and the `null` goes out again. Input and output items are kept whole as JSON objects, with accessors for the
//! few fields Ballast reads (an item's `type`, `role` and `call_id`: truncation keeps a `function_call` with its
//! `function_call_output`; the answer's function calls and text, for an agent loop).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

use crate::model::object::{ObjectWriter, read_object};

/// A `POST /responses` request.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponsesRequest {
    /// The model asked for: a route name on the way in, the deployment's model name on the way out.
    pub model: String,
    /// The input: a text, or a list of items (messages, function calls and their outputs, reasoning).
    pub input: Option<Input>,
    /// Whether the answer is a server-sent event stream.
    pub stream: Option<bool>,
    /// The response this one continues: its state lives at the deployment that made it.
    pub previous_response_id: Option<String>,
    /// The conversation this response belongs to (an id, or `{"id": ...}`): its state lives at one deployment.
    pub conversation: Option<Value>,
    /// Whether the provider keeps the response (`true` unless set `false`).
    pub store: Option<bool>,
    /// Whether the provider runs the response in the background (then it is retrieved later).
    pub background: Option<bool>,
    /// Every other key (`instructions`, `tools`, `reasoning`, `text`, `max_output_tokens`, ...), untouched.
    pub extra: Map<String, Value>,
}

/// A request's `input`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Input {
    /// A text: one user message.
    Text(String),
    /// Items, oldest first.
    Items(Vec<InputItem>),
}

/// One item of a request's `input` (or of a response's `output`, sent back as input): a JSON object kept whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InputItem(pub Map<String, Value>);

/// A response (`object: "response"`): the answer of `POST /responses`, of `GET /responses/{id}`, and what the
/// stream's `response.created`, `response.completed`, ... events carry.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseObject {
    /// Its id (`resp_...`): what a later request names in `previous_response_id`.
    pub id: String,
    /// `completed`, `incomplete`, `in_progress`, `queued`, `failed`, `cancelled`.
    pub status: Option<String>,
    /// The output items: messages, function calls, reasoning.
    pub output: Vec<InputItem>,
    /// Token usage (`input_tokens`, `output_tokens`, `total_tokens`).
    pub usage: Option<Value>,
    /// Every other key, untouched.
    pub extra: Map<String, Value>,
}

/// One event of a streamed response (its data: a JSON object with its `type` and `sequence_number`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResponseEvent(pub Map<String, Value>);

/// One function call of a response's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FunctionCall<'a> {
    /// What the output of the call must name (`call_id`).
    pub call_id: &'a str,
    /// The function.
    pub name: &'a str,
    /// Its arguments: a JSON text, as the model wrote it.
    pub arguments: &'a str,
}

impl ResponsesRequest {
    /// A request to `model` with `input` items.
    pub fn new(model: impl Into<String>, input: Vec<InputItem>) -> Self {
        ResponsesRequest {
            model: model.into(),
            input: Some(Input::Items(input)),
            stream: None,
            previous_response_id: None,
            conversation: None,
            store: None,
            background: None,
            extra: Map::new(),
        }
    }

    /// The same request continuing response `id` (`previous_response_id`).
    #[must_use]
    pub fn after(mut self, id: impl Into<String>) -> Self {
        self.previous_response_id = Some(id.into());
        self
    }

    /// The same request with `tools` (Responses function tools, as sent).
    #[must_use]
    pub fn with_tools(mut self, tools: Value) -> Self {
        self.extra.insert("tools".into(), tools);
        self
    }

    /// The conversation's id, from `conversation` given as a text or as `{"id": ...}`.
    pub fn conversation_id(&self) -> Option<&str> {
        match self.conversation.as_ref()? {
            Value::String(id) => Some(id),
            Value::Object(object) => object.get("id")?.as_str(),
            _ => None,
        }
    }

    /// Whether the provider keeps the response it makes (`store` is `true` unless set `false`; a background
    /// response is always kept).
    pub fn keeps_state(&self) -> bool {
        self.store != Some(false) || self.background == Some(true)
    }
}

impl InputItem {
    /// A message of `role` (`user`, `system`, `developer`, `assistant`) with a text.
    pub fn message(role: &str, text: impl Into<String>) -> Self {
        Self::object(json!({"type": "message", "role": role, "content": text.into()}))
    }

    /// The output of function call `call_id`.
    pub fn function_call_output(call_id: impl Into<String>, output: impl Into<String>) -> Self {
        Self::object(
            json!({"type": "function_call_output", "call_id": call_id.into(), "output": output.into()}),
        )
    }

    fn object(value: Value) -> Self {
        match value {
            Value::Object(map) => InputItem(map),
            _ => unreachable!("built from an object literal"),
        }
    }

    /// Its `type`; an item without one with a `role` is a `message` (the API's short form).
    pub fn kind(&self) -> &str {
        match self.0.get("type").and_then(Value::as_str) {
            Some(kind) => kind,
            None if self.0.contains_key("role") => "message",
            None => "",
        }
    }

    /// Its `role`, for a message.
    pub fn role(&self) -> Option<&str> {
        self.0.get("role").and_then(Value::as_str)
    }

    /// Its `call_id`, for a function call or its output.
    pub fn call_id(&self) -> Option<&str> {
        self.0.get("call_id").and_then(Value::as_str)
    }

    /// The function call it is, if it is one.
    pub fn function_call(&self) -> Option<FunctionCall<'_>> {
        if self.kind() != "function_call" {
            return None;
        }
        let text = |key: &str| self.0.get(key).and_then(Value::as_str);
        Some(FunctionCall {
            call_id: text("call_id")?,
            name: text("name")?,
            arguments: text("arguments").unwrap_or("{}"),
        })
    }

    /// The text of a message: its `content` when a text, else its text parts (`output_text`, `input_text`)
    /// joined.
    pub fn text(&self) -> Option<String> {
        match self.0.get("content")? {
            Value::String(text) => Some(text.clone()),
            Value::Array(parts) => Some(
                parts
                    .iter()
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                    .collect(),
            ),
            _ => None,
        }
    }
}

impl ResponseObject {
    /// The function calls of the output, in order.
    pub fn function_calls(&self) -> impl Iterator<Item = FunctionCall<'_>> {
        self.output.iter().filter_map(InputItem::function_call)
    }

    /// The text of the output's messages, joined (the SDKs' `output_text`).
    pub fn output_text(&self) -> String {
        (self.output.iter())
            .filter(|item| item.kind() == "message")
            .filter_map(InputItem::text)
            .collect()
    }
}

impl ResponseEvent {
    /// Its `type`: `response.created`, `response.output_text.delta`, `response.completed`, `error`, ...
    pub fn kind(&self) -> &str {
        self.0.get("type").and_then(Value::as_str).unwrap_or("")
    }

    /// Its `sequence_number`.
    pub fn sequence_number(&self) -> Option<u64> {
        self.0.get("sequence_number").and_then(Value::as_u64)
    }

    /// The response it carries (`response.created`, `response.in_progress`, `response.completed`,
    /// `response.incomplete`, `response.failed`), if it carries one that reads as a response.
    pub fn response(&self) -> Option<ResponseObject> {
        serde_json::from_value(self.0.get("response")?.clone()).ok()
    }
}

impl<'de> Deserialize<'de> for ResponsesRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(ResponsesRequest {
                model: object.required("model")?,
                input: object.optional("input")?,
                stream: object.optional("stream")?,
                previous_response_id: object.optional("previous_response_id")?,
                conversation: object.optional("conversation")?,
                store: object.optional("store")?,
                background: object.optional("background")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for ResponsesRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("model", Some(&self.model))?;
        object.field("input", self.input.as_ref())?;
        object.field("stream", self.stream.as_ref())?;
        object.field("previous_response_id", self.previous_response_id.as_ref())?;
        object.field("conversation", self.conversation.as_ref())?;
        object.field("store", self.store.as_ref())?;
        object.field("background", self.background.as_ref())?;
        object.end()
    }
}

impl<'de> Deserialize<'de> for ResponseObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(ResponseObject {
                id: object.required("id")?,
                status: object.optional("status")?,
                output: object.optional("output")?.unwrap_or_default(),
                usage: object.optional("usage")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for ResponseObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("id", Some(&self.id))?;
        object.field("status", self.status.as_ref())?;
        object.field("output", Some(&self.output))?;
        object.field("usage", self.usage.as_ref())?;
        object.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_passes_through_both_ways() {
        let body = json!({
            "model": "gpt-4.1",
            "input": [
                {"role": "user", "content": "Refund order 1, op=op-1"},
                {"type": "function_call", "call_id": "c1", "name": "lookup_order", "arguments": "{}", "id": "fc_1"},
                {"type": "function_call_output", "call_id": "c1", "output": "{\"amount\": 1}"},
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"},
            ],
            "instructions": "Be brief.",
            "tools": [{"type": "function", "name": "lookup_order", "parameters": {}}],
            "reasoning": {"effort": "low"},
            "text": {"format": {"type": "text"}},
            "store": false,
            "previous_response_id": null,
            "metadata": {"a": "b"},
        });
        let request: ResponsesRequest = serde_json::from_value(body.clone()).unwrap();
        assert_eq!(request.store, Some(false));
        assert_eq!(request.previous_response_id, None);
        assert!(request.extra.contains_key("reasoning"));
        assert_eq!(serde_json::to_value(&request).unwrap(), body);
        let Some(Input::Items(items)) = &request.input else {
            panic!("items")
        };
        let kinds: Vec<&str> = items.iter().map(InputItem::kind).collect();
        assert_eq!(
            kinds,
            ["message", "function_call", "function_call_output", "reasoning"]
        );
        assert_eq!(items[2].call_id(), Some("c1"));

        let text: ResponsesRequest = serde_json::from_value(json!({"model": "m", "input": "hi"})).unwrap();
        assert_eq!(text.input, Some(Input::Text("hi".into())));
        assert_eq!(
            serde_json::to_value(&text).unwrap(),
            json!({"model": "m", "input": "hi"})
        );
    }

    #[test]
    fn a_response_gives_its_calls_and_text() {
        let response: ResponseObject = serde_json::from_value(json!({
            "id": "resp_1", "object": "response", "status": "completed",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "lookup_order",
                 "arguments": "{\"op\":\"op-1\"}", "status": "completed"},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "Done", "annotations": []},
                             {"type": "output_text", "text": ".", "annotations": []}]},
            ],
            "usage": {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
            "created_at": 1,
        }))
        .unwrap();
        let calls: Vec<FunctionCall<'_>> = response.function_calls().collect();
        assert_eq!(
            calls,
            [FunctionCall {
                call_id: "call_a",
                name: "lookup_order",
                arguments: "{\"op\":\"op-1\"}"
            }]
        );
        assert_eq!(response.output_text(), "Done.");
        assert_eq!(response.extra["created_at"], 1);
    }

    #[test]
    fn conversation_ids_and_kept_state() {
        let mut request = ResponsesRequest::new("m", vec![InputItem::message("user", "hi")]);
        assert!(request.keeps_state());
        request.conversation = Some(json!("conv_1"));
        assert_eq!(request.conversation_id(), Some("conv_1"));
        request.conversation = Some(json!({"id": "conv_2"}));
        assert_eq!(request.conversation_id(), Some("conv_2"));
        request.store = Some(false);
        assert!(!request.keeps_state());
        request.background = Some(true);
        assert!(request.keeps_state());
    }
}
