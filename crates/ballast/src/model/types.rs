//! OpenAI-compatible `/chat/completions` bodies: typed where Ballast needs a field, untouched everywhere else.
//!
//! Why so few typed fields: the API grows every month (`reasoning_effort`, `metadata`, `audio`,
//! `prediction`, ...) and providers add their own; a gateway that models the whole schema drops or rewrites
//! what it does not know. Ballast types only what its decisions read — the model and messages (routing and
//! truncation), roles and tool-call ids (truncation keeps a tool group whole), `stream`, and `usage` (token
//! accounting) — and keeps every other key of every object in an `extra` map that is written back as it came.
//!
//! The rules, the same for every type here:
//! - A key Ballast does not model lands in `extra` and is written out again unchanged, both ways (request to
//!   the upstream, answer to the caller).
//! - Writing adds nothing that was absent: a typed `Option` field that is `None` is not written.
//! - A typed optional field given `null` reads as `None`, and the `null` stays in `extra`, so it goes out again
//!   (SDKs echo `"tool_calls": null` back; stream chunks carry `"usage": null`). A typed value, when set, wins
//!   over an `extra` entry with the same key: a key is never written twice.
//! - A typed field holding the wrong JSON type is an error when reading (the body is not what the API says).
//!
//! ```
//! use ballast::model::ChatRequest;
//! use serde_json::json;
//!
//! let body = json!({
//!     "model": "gpt-4.1",
//!     "messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
//!     "reasoning_effort": "low",
//! });
//! let mut request: ChatRequest = serde_json::from_value(body.clone()).unwrap();
//! assert_eq!(request.extra["reasoning_effort"], "low");
//! assert_eq!(serde_json::to_value(&request).unwrap(), body);
//! request.model = "mock".to_owned();
//! assert_eq!(serde_json::to_value(&request).unwrap()["reasoning_effort"], "low");
//! ```

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::object::{ObjectWriter, read_object};

#[cfg(test)]
mod tests;

/// A `/chat/completions` request.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The model asked for: a route name on the way in, the deployment's model name on the way out.
    pub model: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// The tool definitions, as sent (Ballast does not read them).
    pub tools: Option<Value>,
    /// Whether the answer is a server-sent event stream.
    pub stream: Option<bool>,
    /// Every other key, passed through untouched.
    pub extra: Map<String, Value>,
}

/// Who wrote a message. Roles Ballast does not know are kept as [`Role::Other`] and written back as they came.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Instructions from the application (older models' name for [`Role::Developer`]).
    System,
    /// Instructions from the application (OpenAI's reasoning models).
    Developer,
    /// The end user.
    User,
    /// The model; may carry `tool_calls`.
    Assistant,
    /// A tool's reply to one of the assistant's `tool_calls`, linked by `tool_call_id`.
    Tool,
    /// Any other role (`function`, a provider's own), kept verbatim.
    Other(String),
}

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The content as sent: a string, an array of parts, or `None` when absent or `null`.
    pub content: Option<Value>,
    /// An assistant's tool calls; each one's `tool` reply carries its id.
    pub tool_calls: Option<Vec<ToolCallRef>>,
    /// On a `tool` message: the id of the call it answers.
    pub tool_call_id: Option<String>,
    /// Every other key (`name`, `refusal`, `audio`, a provider's own), passed through untouched.
    pub extra: Map<String, Value>,
}

/// One entry of an assistant's `tool_calls`: the id Ballast needs to keep the call with its reply, and the
/// rest (`type`, `function`) passed through.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallRef {
    /// The call's id, which the `tool` reply repeats as `tool_call_id`. `None` when a provider sent none.
    pub id: Option<String>,
    /// Every other key, passed through untouched.
    pub extra: Map<String, Value>,
}

/// A `/chat/completions` answer (not streamed).
#[derive(Clone, Debug, PartialEq)]
pub struct ChatResponse {
    /// The choices.
    pub choices: Vec<Choice>,
    /// Tokens the upstream reports for this answer.
    pub usage: Option<Usage>,
    /// Every other key (`id`, `object`, `created`, `model`, `system_fingerprint`, ...), passed through untouched.
    pub extra: Map<String, Value>,
}

/// One choice of a [`ChatResponse`].
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The model's message (with its `tool_calls`, if any).
    pub message: Option<Message>,
    /// Why the model stopped (`stop`, `length`, `tool_calls`, ...).
    pub finish_reason: Option<String>,
    /// Every other key (`index`, `logprobs`, ...), passed through untouched.
    pub extra: Map<String, Value>,
}

/// One server-sent event of a streamed answer (`data: {...}`).
#[derive(Clone, Debug, PartialEq)]
pub struct ChatChunk {
    /// The choices' deltas; empty on the final usage chunk (`stream_options.include_usage`).
    pub choices: Vec<ChunkChoice>,
    /// Tokens, on the chunk that reports them (usually the last); `None` (often an explicit `null`) elsewhere.
    pub usage: Option<Usage>,
    /// Every other key, passed through untouched.
    pub extra: Map<String, Value>,
}

/// One choice of a [`ChatChunk`]; the `delta` itself is passed through in `extra`.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkChoice {
    /// Set on the choice's last chunk.
    pub finish_reason: Option<String>,
    /// Every other key (`index`, `delta`, `logprobs`, ...), passed through untouched.
    pub extra: Map<String, Value>,
}

/// Token counts an upstream reports. Each count is optional: some OpenAI-compatible servers leave one out, and
/// an answer must not be refused for it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Usage {
    /// Tokens of the request (prompt).
    pub prompt_tokens: Option<u64>,
    /// Tokens of the answer.
    pub completion_tokens: Option<u64>,
    /// Their sum, as the upstream reports it.
    pub total_tokens: Option<u64>,
    /// Every other key (`prompt_tokens_details`, ...), passed through untouched.
    pub extra: Map<String, Value>,
}

impl Role {
    /// The role as written on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other(other) => other,
        }
    }

    /// Whether the message holds the application's instructions (`system` or `developer`): truncation always
    /// keeps these.
    pub fn is_instruction(&self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

impl From<&str> for Role {
    fn from(role: &str) -> Self {
        match role {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => Role::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ChatRequest {
    /// A request to route `model` with `messages`, nothing else set (no tools, not streamed).
    ///
    /// ```
    /// use ballast::model::{ChatRequest, Message, Role};
    ///
    /// let request = ChatRequest::new("agent", vec![Message::text(Role::User, "Hi")]).streamed(true);
    /// assert_eq!((request.model.as_str(), request.stream), ("agent", Some(true)));
    /// ```
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        ChatRequest {
            model: model.into(),
            messages,
            tools: None,
            stream: None,
            extra: Map::new(),
        }
    }

    /// The same request with these tool definitions (sent as they are).
    pub fn with_tools(mut self, tools: Value) -> Self {
        self.tools = Some(tools);
        self
    }

    /// The same request, streamed or not.
    pub fn streamed(mut self, stream: bool) -> Self {
        self.stream = Some(stream);
        self
    }
}

/// A tool call whose `function.arguments` are not the JSON a tool was asked for.
#[derive(Debug, thiserror::Error)]
#[error("tool call {id}: {why}")]
pub struct BadToolArguments {
    id: String,
    why: String,
}

impl ToolCallRef {
    /// The function the model asked for: `function.name`, when the call has one.
    pub fn function_name(&self) -> Option<&str> {
        self.extra.get("function")?.get("name")?.as_str()
    }

    /// The function's arguments, parsed: `function.arguments` is a JSON text (as OpenAI sends it) or already an
    /// object (as some providers do). An error, naming the call, when it is missing or does not parse as `T`.
    ///
    /// ```
    /// use ballast::model::ToolCallRef;
    /// use serde_json::{Value, json};
    ///
    /// let call: ToolCallRef = serde_json::from_value(json!({
    ///     "id": "call_1", "type": "function",
    ///     "function": {"name": "lookup_order", "arguments": "{\"order_id\": \"1234\"}"},
    /// }))
    /// .unwrap();
    /// assert_eq!(call.function_name(), Some("lookup_order"));
    /// let arguments: Value = call.arguments().unwrap();
    /// assert_eq!(arguments["order_id"], "1234");
    /// ```
    pub fn arguments<T: serde::de::DeserializeOwned>(&self) -> Result<T, BadToolArguments> {
        let bad = |why: String| BadToolArguments {
            id: self.id.clone().unwrap_or_else(|| "(no id)".to_owned()),
            why,
        };
        let raw = self
            .extra
            .get("function")
            .and_then(|function| function.get("arguments"))
            .ok_or_else(|| bad("it has no function.arguments".to_owned()))?;
        match raw {
            Value::String(text) => serde_json::from_str(text),
            other => T::deserialize(other),
        }
        .map_err(|error| bad(format!("function.arguments: {error}")))
    }
}

impl Message {
    /// A `tool` message answering the tool call `tool_call_id` with `content` (a text: a tool's JSON answer as a
    /// string, as the API wants it).
    pub fn tool_reply(tool_call_id: Option<String>, content: impl Into<String>) -> Self {
        Message {
            tool_call_id,
            ..Message::text(Role::Tool, content)
        }
    }

    /// A message with a text content and nothing else.
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        Message {
            role,
            content: Some(Value::String(content.into())),
            tool_calls: None,
            tool_call_id: None,
            extra: Map::new(),
        }
    }

    /// Whether this is an assistant message with at least one tool call.
    pub fn has_tool_calls(&self) -> bool {
        self.tool_calls.as_ref().is_some_and(|calls| !calls.is_empty())
    }
}

impl Usage {
    /// The total: `total_tokens` as reported, else the sum of the two counts that are present.
    pub fn total(&self) -> u64 {
        self.total_tokens
            .unwrap_or_else(|| self.prompt_tokens.unwrap_or(0) + self.completion_tokens.unwrap_or(0))
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let role = String::deserialize(deserializer)?;
        Ok(Role::from(role.as_str()))
    }
}

impl<'de> Deserialize<'de> for ChatRequest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(ChatRequest {
                model: object.required("model")?,
                messages: object.required("messages")?,
                tools: object.optional("tools")?,
                stream: object.optional("stream")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for ChatRequest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("model", Some(&self.model))?;
        object.field("messages", Some(&self.messages))?;
        object.field("tools", self.tools.as_ref())?;
        object.field("stream", self.stream.as_ref())?;
        object.end()
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(Message {
                role: object.required("role")?,
                content: object.optional("content")?,
                tool_calls: object.optional("tool_calls")?,
                tool_call_id: object.optional("tool_call_id")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("role", Some(&self.role))?;
        object.field("content", self.content.as_ref())?;
        object.field("tool_calls", self.tool_calls.as_ref())?;
        object.field("tool_call_id", self.tool_call_id.as_ref())?;
        object.end()
    }
}

impl<'de> Deserialize<'de> for ToolCallRef {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(ToolCallRef {
                id: object.optional("id")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for ToolCallRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("id", self.id.as_ref())?;
        object.end()
    }
}

impl<'de> Deserialize<'de> for ChatResponse {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(ChatResponse {
                choices: object.required("choices")?,
                usage: object.optional("usage")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for ChatResponse {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("choices", Some(&self.choices))?;
        object.field("usage", self.usage.as_ref())?;
        object.end()
    }
}

impl<'de> Deserialize<'de> for Choice {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(Choice {
                message: object.optional("message")?,
                finish_reason: object.optional("finish_reason")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for Choice {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("message", self.message.as_ref())?;
        object.field("finish_reason", self.finish_reason.as_ref())?;
        object.end()
    }
}

impl<'de> Deserialize<'de> for ChatChunk {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(ChatChunk {
                choices: object.required("choices")?,
                usage: object.optional("usage")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for ChatChunk {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("choices", Some(&self.choices))?;
        object.field("usage", self.usage.as_ref())?;
        object.end()
    }
}

impl<'de> Deserialize<'de> for ChunkChoice {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(ChunkChoice {
                finish_reason: object.optional("finish_reason")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for ChunkChoice {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("finish_reason", self.finish_reason.as_ref())?;
        object.end()
    }
}

impl<'de> Deserialize<'de> for Usage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        read_object(deserializer, |object| {
            Ok(Usage {
                prompt_tokens: object.optional("prompt_tokens")?,
                completion_tokens: object.optional("completion_tokens")?,
                total_tokens: object.optional("total_tokens")?,
                extra: object.take_rest(),
            })
        })
    }
}

impl Serialize for Usage {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut object = ObjectWriter::new(serializer, &self.extra)?;
        object.field("prompt_tokens", self.prompt_tokens.as_ref())?;
        object.field("completion_tokens", self.completion_tokens.as_ref())?;
        object.field("total_tokens", self.total_tokens.as_ref())?;
        object.end()
    }
}
