//! The model side of an agent step: one model route's client over its deployments, for every API they speak —
//! OpenAI's Chat Completions, Responses API and embeddings, Anthropic's Messages — with what an upstream's error answer
//! means and how a conversation is cut to fit a context window.
//!
//! Plain data and the protocols (nothing here sends anything):
//! - `types` — [`ChatRequest`], [`Message`], [`ChatResponse`], [`ChatChunk`], [`Usage`]: the chat bodies, typed
//!   where Ballast reads a field, every other key passed through untouched both ways.
//! - `api` (private) — the `Protocol` trait each API implements: how a request names its model and is
//!   cut to fit, what an error answer means and what an answer spent (OpenAI's APIs share the defaults), where
//!   its stream commits and what each later event means. It names no API.
//! - `chat` (private) — Chat Completions as a protocol, beside its commit rule.
//! - `responses` — [`ResponsesRequest`], [`InputItem`], [`ResponseObject`], [`ResponseEvent`]: the Responses
//!   bodies, kept the same way; the protocol and where its stream commits; `truncate_input`; and
//!   [`StateRecords`], which deployment keeps which response.
//! - `embeddings` — [`EmbeddingsRequest`], [`EmbeddingsResponse`], and the protocol.
//! - `messages` — Anthropic's Messages API: [`MessagesRequest`], [`MessageParam`], [`MessagesResponse`],
//!   [`MessagesEvent`], [`TokenCount`]; the protocol (its `x-api-key` and `anthropic-version`, where its stream
//!   commits, its tokens) and token counting's.
//! - `provider` — `ProviderError`: an upstream's error answer classified (context length, quota, rate limit,
//!   overload, ...) from its structured code first, then the per-provider context-length wordings.
//! - `truncate` — `truncate`: drop whole older turns to fit a context window, never splitting a tool group.
//!
//! The pipeline, each module using only those above it (`scripts/module-cycles` checks it):
//! - `deployment` — one deployment's stack (deadline, retry, breaker, attempt) and what it speaks;
//! - `context` — what a route does with a context-length error;
//! - `call` — the call and answer types;
//! - `route` — the route (`Route`: its settings and deployments) and its walk through them, generic over the
//!   protocol: the primary's share, the fallback rule, the verdict of each trip; `routing` — where a Responses
//!   call may go and what it records, asked of the route before and after its walk;
//! - `stream` — [`ModelStream`]: a stream after its commit point, for every streamed protocol;
//! - `client` — [`ModelClient`]: a call's context, the walk, then the answer (`answer`) or the stream; `respond`
//!   — its Responses calls; `builder`, `clients` — building clients from code or config.
//!
//! The clients: [`ModelClient`] (one model route over its deployments) and [`ModelClients`] (every route of a
//! config, built with the tools' by [`Clients::from_config`](crate::Clients::from_config), API keys from the
//! process environment or the one it is given). In code, [`ModelClient::builder`] takes a route's settings and its
//! deployments ([`DeploymentBuilder`]: URL, model, a key given directly or by its variable) and checks them at
//! `build()` by the configuration's own rules:
//!
//! ```
//! use ballast::{model::{ModelClient, ModelClients, DeploymentBuilder}, transport::ServiceTransport};
//!
//! let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
//! let agent = ModelClient::builder("agent")
//!     .deployment(DeploymentBuilder::new("http://chaos/v1").model("mock").api_key("sk-test"))
//!     .build(transport)
//!     .unwrap();
//! let models: ModelClients = [agent].into_iter().collect();
//! assert!(models.route("agent").is_ok());
//! ```

mod provider;
mod truncate;
mod types;

pub(crate) use provider::{ContextTokens, ProviderError, ProviderErrorKind};
pub use truncate::Truncation;
pub(crate) use truncate::{CannotTruncate, TruncationGoal, truncate};

mod answer;
mod api;
mod builder;
mod call;
mod chat;
mod client;
mod clients;
mod context;
mod deployment;
mod embeddings;
mod messages;
mod object;
mod respond;
mod responses;
mod route;
mod routing;
mod stream;
mod usage;

pub use builder::{DeploymentBuilder, ModelClientBuilder};
pub use call::{
    ChatAnswer, ChatCall, ChatError, EmbeddingsAnswer, EmbeddingsCall, MessagesAnswer, MessagesCall,
    ModelAnswer, ModelCall, ResponseId, ResponseIdCall, ResponsesAnswer, ResponsesCall, TokenCountAnswer,
    UnknownRoute,
};
pub use client::ModelClient;
pub use clients::ModelClients;
pub use deployment::{InvalidModelRoute, deployment_name};
pub use embeddings::{EmbeddingsRequest, EmbeddingsResponse};
pub use messages::{
    ANTHROPIC_VERSION, MessageParam, MessagesEvent, MessagesRequest, MessagesResponse, TokenCount, ToolUse,
};
#[cfg(feature = "idempotency")]
pub use responses::StoreStateRecords;
pub use responses::{
    FunctionCall, Input, InputItem, MemoryStateRecords, ResponseEvent, ResponseObject, ResponsesRequest,
    StateHome, StateId, StateRecordError, StateRecords,
};
pub use stream::{ChatStream, MessagesStream, ModelStream, ResponseStream, StreamError, StreamErrorKind};
pub use types::{
    BadToolArguments, ChatChunk, ChatRequest, ChatResponse, Choice, ChunkChoice, Message, Role, ToolCallRef,
    Usage,
};
