//! What the route's machinery needs to know of each API it serves ([`Protocol`]), so that one client core and
//! one stream core serve them all: the path, how a request names its model, how it is cut to fit a context
//! window, and (for the streamed APIs, [`Streamed`]) where a stream commits and what each later event means.

use ballast_config::Api;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::embeddings::EmbeddingsRequest;
use super::responses::{self, ResponseEvent, ResponsesRequest};
use super::stream::Read;
use super::{
    CannotTruncate, ChatChunk, ChatRequest, ChatResponse, Truncation, TruncationGoal, commit, truncate, usage,
};
use crate::body::CommitRule;

/// One API of a model route.
pub(crate) trait Protocol: Send + Sync + 'static {
    /// Which one.
    const API: Api;
    /// A request of it.
    type Request: Clone + Serialize + Send + Sync + 'static;
    /// Its answer (a 2xx, not streamed), read from JSON.
    type Answer: DeserializeOwned + Send + 'static;

    /// Names `model` in `request` (each deployment's own model name replaces the route's).
    fn set_model(request: &mut Self::Request, model: &str);

    /// Drops whole older turns from `request` as far as `goal` asks (the route's `on_overflow = "truncate"`).
    fn truncate(request: &mut Self::Request, goal: TruncationGoal) -> Result<Truncation, CannotTruncate>;
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

/// Chat Completions: `POST /chat/completions`.
pub(crate) struct Chat;

/// The Responses API: `POST /responses`.
pub(crate) struct Responses;

/// Embeddings: `POST /embeddings`.
pub(crate) struct Embeddings;

impl Protocol for Chat {
    const API: Api = Api::Chat;
    type Request = ChatRequest;
    type Answer = ChatResponse;

    fn set_model(request: &mut ChatRequest, model: &str) {
        model.clone_into(&mut request.model);
    }

    fn truncate(request: &mut ChatRequest, goal: TruncationGoal) -> Result<Truncation, CannotTruncate> {
        truncate(&mut request.messages, goal)
    }
}

impl Streamed for Chat {
    type Event = ChatChunk;
    const COMMIT: CommitRule = commit::commit;
    const READ: fn(&str) -> Read<ChatChunk> = read_chat_event;

    fn set_stream(request: &mut ChatRequest, stream: bool) {
        set_stream(&mut request.stream, &mut request.extra, stream);
    }
}

/// A chat stream's event after its commit point: a chunk (its `usage` counted), `[DONE]` (the clean end), an
/// error object, or something that is not a chunk.
fn read_chat_event(data: &str) -> Read<ChatChunk> {
    if data.trim() == crate::sse::DONE {
        return Read::End;
    }
    match commit::read_chat(data) {
        commit::ChatEvent::Chunk(chunk) => {
            let tokens = (chunk.usage.as_ref()).and_then(|u| serde_json::to_value(u).ok());
            let tokens = tokens.as_ref().and_then(usage::token_usage_of);
            Read::Item(chunk, tokens)
        }
        commit::ChatEvent::Error(error) => Read::Upstream(error),
        commit::ChatEvent::Neither { chunk, .. } => Read::Malformed(chunk.to_string()),
    }
}

impl Protocol for Responses {
    const API: Api = Api::Responses;
    type Request = ResponsesRequest;
    type Answer = responses::ResponseObject;

    fn set_model(request: &mut ResponsesRequest, model: &str) {
        model.clone_into(&mut request.model);
    }

    fn truncate(request: &mut ResponsesRequest, goal: TruncationGoal) -> Result<Truncation, CannotTruncate> {
        match &mut request.input {
            Some(responses::Input::Items(items)) => responses::truncate_input(items, goal),
            // A text, or state the provider keeps (`previous_response_id`): nothing here to drop.
            _ => Err(CannotTruncate::NothingToDrop),
        }
    }
}

impl Streamed for Responses {
    type Event = ResponseEvent;
    const COMMIT: CommitRule = responses::commit;
    const READ: fn(&str) -> Read<ResponseEvent> = responses::read_event;

    fn set_stream(request: &mut ResponsesRequest, stream: bool) {
        set_stream(&mut request.stream, &mut request.extra, stream);
    }
}

/// A request's `stream` flag set (`true`, or absent), and without a stream its `stream_options` dropped: options
/// of a stream on a request that is not one are refused by OpenAI with a 400.
fn set_stream(flag: &mut Option<bool>, extra: &mut serde_json::Map<String, Value>, stream: bool) {
    *flag = stream.then_some(true);
    if !stream {
        extra.remove("stream_options");
    }
}

impl Protocol for Embeddings {
    const API: Api = Api::Embeddings;
    type Request = EmbeddingsRequest;
    type Answer = super::embeddings::EmbeddingsResponse;

    fn set_model(request: &mut EmbeddingsRequest, model: &str) {
        model.clone_into(&mut request.model);
    }

    fn truncate(_: &mut EmbeddingsRequest, _: TruncationGoal) -> Result<Truncation, CannotTruncate> {
        // An input to embed has no turns: a text too long for the model is the caller's to shorten.
        Err(CannotTruncate::NothingToDrop)
    }
}
