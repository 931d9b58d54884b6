//! A model call's inputs and results, the same for every API: [`ModelCall`], [`ModelAnswer`], and the
//! [`CallError`] every call fails with.

use ballast_core::Deadline;
use bytes::Bytes;
use http::HeaderMap;

use super::embeddings::{EmbeddingsRequest, EmbeddingsResponse};
use super::messages::{MessagesRequest, MessagesResponse, TokenCount};
use super::responses::{ResponseObject, ResponsesRequest};
use super::{ChatRequest, ChatResponse, Truncation};
use crate::OutcomeReport;
use crate::client::{CallError, CallOptions};

/// One model call: the request (every field the caller set goes upstream unchanged, but `model`, which each
/// deployment replaces with its own model name) and, when known, its deadline, run, owner and cancellation.
/// [`ChatCall`], [`ResponsesCall`], [`EmbeddingsCall`], [`MessagesCall`] and [`ResponseIdCall`] name it for each
/// API.
#[derive(Clone, Debug)]
pub struct ModelCall<R> {
    pub(crate) request: R,
    pub(crate) options: CallOptions,
    /// A streamed call's bound on the time to its commit point (an SDK's timeout), never the stream's.
    pub(crate) commit_by: Option<Deadline>,
    /// A streamed call's longest gap between events, when shorter than the route's `stream_idle_timeout`.
    pub(crate) idle: Option<std::time::Duration>,
}

/// A Chat Completions call.
pub type ChatCall = ModelCall<ChatRequest>;

/// A Responses API call.
pub type ResponsesCall = ModelCall<ResponsesRequest>;

/// An embeddings call.
pub type EmbeddingsCall = ModelCall<EmbeddingsRequest>;

/// A Messages API call (a message, or a count of its tokens).
pub type MessagesCall = ModelCall<MessagesRequest>;

/// A call about a response a provider keeps: retrieve, delete or cancel it.
pub type ResponseIdCall = ModelCall<ResponseId>;

/// A response a provider keeps (`resp_...`), and the query of the call about it (`include[]=...`), passed on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResponseId {
    /// The response's id.
    pub id: String,
    /// The query string sent with the call (without its `?`), as the caller wrote it.
    pub query: Option<String>,
}

impl<R> ModelCall<R> {
    crate::client::call_options_setters!();

    /// A call sending `request`.
    pub fn new(request: R) -> Self {
        ModelCall {
            request,
            options: CallOptions::default(),
            commit_by: None,
            idle: None,
        }
    }

    /// The request as it will be sent (its `model` still the route's).
    pub fn request(&self) -> &R {
        &self.request
    }

    /// For a streamed call: the time by which its stream must reach its commit point (its first content event),
    /// or the attempt in flight is cut and the call fails or falls back as at any deadline; once committed, the
    /// stream runs to the call's own deadline. What an SDK's timeout means for a stream: its HTTP client waits
    /// that long for the status line, which the gateway sends at the commit point. Ignored when not streamed.
    pub fn commit_by(mut self, deadline: Deadline) -> Self {
        self.commit_by = Some(deadline);
        self
    }

    /// For a streamed call: the longest gap between two events once committed, when shorter than the route's
    /// `stream_idle_timeout` (what the Python SDK's read timeout bounds). Ignored when not streamed.
    pub fn stream_idle_timeout(mut self, gap: std::time::Duration) -> Self {
        self.idle = Some(gap);
        self
    }
}

/// A call sending the request, with nothing else said about it.
impl<R> From<R> for ModelCall<R> {
    fn from(request: R) -> Self {
        Self::new(request)
    }
}

impl ModelCall<ResponseId> {
    /// A call about response `id`.
    pub fn for_response(id: impl Into<String>) -> Self {
        Self::new(ResponseId {
            id: id.into(),
            query: None,
        })
    }

    /// The query sent with the call (`include[]=message.output_text.logprobs`), without its `?`.
    pub fn query(mut self, query: impl Into<String>) -> Self {
        self.request.query = Some(query.into());
        self
    }
}

/// A model's answer (2xx, not streamed).
#[derive(Clone, Debug)]
pub struct ModelAnswer<T> {
    /// The answer; fields Ballast does not model are in its `extra` maps, unchanged.
    pub response: T,
    /// The answer's body as the upstream sent it: what a proxy passes on.
    pub body: Bytes,
    /// The upstream's status.
    pub status: u16,
    /// The upstream's headers (the provider's request id, rate-limit headers).
    pub headers: HeaderMap,
    /// The deployment that answered (`route[index] model`).
    pub deployment: String,
    /// What truncation dropped (over every round), when the route truncated the conversation to make it fit:
    /// the gateway says `ballast-truncated: <dropped_messages>`.
    pub truncated: Option<Truncation>,
    /// What happened: the first deployment's report, each next deployment's nested in `fallback_report`.
    pub report: OutcomeReport,
}

/// A chat completion.
pub type ChatAnswer = ModelAnswer<ChatResponse>;

/// A response of the Responses API.
pub type ResponsesAnswer = ModelAnswer<ResponseObject>;

/// Embeddings.
pub type EmbeddingsAnswer = ModelAnswer<EmbeddingsResponse>;

/// A message of the Messages API.
pub type MessagesAnswer = ModelAnswer<MessagesResponse>;

/// A count of a Messages request's input tokens.
pub type TokenCountAnswer = ModelAnswer<TokenCount>;

/// A model call of any API that did not succeed, with the report of every deployment tried (see [`CallError`]);
/// the name chat callers knew first.
pub type ChatError = CallError;

/// No model route of this name is configured (what the gateway answers with 404).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no model route named {0:?}")]
pub struct UnknownRoute(pub String);

/// The owner of records no caller named (a library user's calls).
const NO_OWNER: &str = "";

/// Whose call it is, for its records.
pub(super) fn owner_of<R>(call: &ModelCall<R>) -> &str {
    call.options.run_owner.as_deref().unwrap_or(NO_OWNER)
}
