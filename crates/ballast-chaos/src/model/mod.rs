//! The mock model: a scripted agent conversation, as pure functions over OpenAI-format JSON.
//!
//! (Skeleton: the signatures are final; the conversation, the chunks and the errors are being written.)

use serde_json::{Value, json};

use crate::ModelSettings;

/// The logical operation id of a conversation: the `op` named in its newest user turn, which every tool call of
/// the conversation carries in its arguments. Faults of the model endpoint are keyed by it. `None` when the
/// request has no user turn naming one.
pub fn operation_id(request: &Value) -> Option<String> {
    let _ = request;
    None
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
    /// The request is not a chat-completions request the mock understands.
    #[error("{0}")]
    InvalidRequest(String),
}

impl ModelError {
    /// The HTTP status (400 for both).
    pub fn status(&self) -> u16 {
        400
    }

    /// The OpenAI-format body: `{"error": {"message", "type", "param", "code"}}`.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.to_string(), "type": "invalid_request_error", "param": null, "code": null}})
    }
}

/// The model's next turn for `request` under `settings`.
pub fn reply(request: &Value, settings: &ModelSettings) -> Result<Reply, ModelError> {
    let _ = (request, settings);
    let completion = json!({"object": "chat.completion", "choices": []});
    Ok(Reply {
        completion,
        chunks: Vec::new(),
    })
}

/// The OpenAI-format body of an injected error answer with `status` (500, 502, 503, 529, 429; `insufficient_quota`
/// for the 429 of an exhausted quota).
pub fn error_body(status: u16, insufficient_quota: bool) -> Value {
    let _ = insufficient_quota;
    json!({"error": {"message": format!("injected {status}"), "type": "server_error", "param": null, "code": null}})
}

/// The body of `GET /v1/models`.
pub fn models_list() -> Value {
    json!({"object": "list", "data": []})
}
