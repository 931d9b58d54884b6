//! The model side of an agent step: OpenAI-compatible `/chat/completions` bodies, what an upstream's error
//! answer means, and how a conversation is cut to fit a context window.
//!
//! - `types` — [`ChatRequest`], [`Message`], [`ChatResponse`], [`ChatChunk`], [`Usage`]: typed where Ballast
//!   reads a field, every other key passed through untouched both ways.
//! - `provider` — [`ProviderError`]: an upstream's error answer classified (context length, quota, rate limit,
//!   overload, ...) from its structured code first, then the per-provider context-length wordings.
//! - `truncate` — [`truncate`]: drop whole older turns to fit a context window, never splitting a tool group.
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

mod builder;
mod call;
mod client;
mod clients;
mod commit;
mod context;
mod deployment;
mod route;
mod stream;
mod usage;

pub use builder::{ModelClientBuilder, DeploymentBuilder};
pub use call::{ChatAnswer, ChatCall, ChatError, UnknownRoute};
pub use client::ModelClient;
// The settings of a model route, as its client holds them, and the environment its secrets are read from.
pub use ballast_config::{ContextConfig, Deployment, Env, ModelRoute, OnOverflow, ProcessEnv};
pub use clients::ModelClients;
pub use deployment::InvalidModelRoute;
pub use stream::{ChatStream, StreamError, StreamErrorKind};
pub use types::{
    BadToolArguments, ChatChunk, ChatRequest, ChatResponse, Choice, ChunkChoice, Message, Role, ToolCallRef,
    Usage,
};
