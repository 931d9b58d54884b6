//! The model side of an agent step: one model route's client over its deployments, for every OpenAI-compatible
//! API they speak — Chat Completions, the Responses API and embeddings — with what an upstream's error answer
//! means and how a conversation is cut to fit a context window.
//!
//! - `types` — [`ChatRequest`], [`Message`], [`ChatResponse`], [`ChatChunk`], [`Usage`]: the chat bodies, typed
//!   where Ballast reads a field, every other key passed through untouched both ways.
//! - `responses` — [`ResponsesRequest`], [`InputItem`], [`ResponseObject`], [`ResponseEvent`]: the Responses
//!   bodies, kept the same way; where a Responses stream commits; [`truncate_input`]; and [`StateRecords`], which
//!   deployment keeps which response.
//! - `embeddings` — [`EmbeddingsRequest`], [`EmbeddingsResponse`].
//! - `provider` — [`ProviderError`]: an upstream's error answer classified (context length, quota, rate limit,
//!   overload, ...) from its structured code first, then the per-provider context-length wordings.
//! - `truncate` — [`truncate`]: drop whole older turns to fit a context window, never splitting a tool group.
//! - `api` (private) — what differs between the APIs, so that one client core (`client`, `route`) and one
//!   stream core (`stream`: [`ModelStream`]) serve them all.
//!
//! The clients: [`ModelClient`] (one model route over its deployments) and [`ModelClients`] (every route of a
//! config: [`ModelClients::from_config`], API keys from the process environment, or
//! [`ModelClients::from_config_with_env`]). In code, [`ModelClient::builder`] takes a route's settings and its
//! deployments ([`DeploymentBuilder`]: URL, model, a key given directly or by its variable) and checks them at
//! `build()` by the configuration's own rules:
//!
//! ```
//! use ballast::{ModelClient, ModelClients, model::DeploymentBuilder, transport::ServiceTransport};
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

pub use provider::{ContextTokens, ProviderError, ProviderErrorKind};
pub use truncate::{CannotTruncate, Truncation, TruncationGoal, truncate};

mod answer;
mod api;
mod builder;
mod call;
mod client;
mod clients;
mod commit;
mod context;
mod deployment;
mod embeddings;
mod object;
mod responses;
mod route;
mod stream;
mod usage;

pub use builder::{DeploymentBuilder, ModelClientBuilder};
pub use call::{
    ChatAnswer, ChatCall, ChatError, EmbeddingsAnswer, EmbeddingsCall, ModelAnswer, ModelCall, ResponseId,
    ResponseIdCall, ResponsesAnswer, ResponsesCall, UnknownRoute,
};
pub use client::ModelClient;
// The settings of a model route, as its client holds them, and the environment its secrets are read from.
pub use ballast_config::{Api, ApiSet, ContextConfig, Deployment, Env, ModelRoute, OnOverflow, ProcessEnv};
pub use clients::ModelClients;
pub use deployment::{InvalidModelRoute, deployment_name};
pub use embeddings::{EmbeddingsRequest, EmbeddingsResponse};
#[cfg(feature = "idempotency")]
pub use responses::StoreStateRecords;
pub use responses::{
    FunctionCall, Input, InputItem, MemoryStateRecords, ResponseEvent, ResponseObject, ResponsesRequest,
    StateHome, StateId, StateRecordError, StateRecords, truncate_input,
};
pub use stream::{ChatStream, ModelStream, ResponseStream, StreamError, StreamErrorKind};
pub use types::{
    BadToolArguments, ChatChunk, ChatRequest, ChatResponse, Choice, ChunkChoice, Message, Role, ToolCallRef,
    Usage,
};
