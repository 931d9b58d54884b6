//! The model side of an agent step: OpenAI-compatible `/chat/completions` bodies, what an upstream's error
//! answer means, and how a conversation is cut to fit a context window.
//!
//! - `types` — [`ChatRequest`], [`Message`], [`ChatResponse`], [`ChatChunk`], [`Usage`]: typed where Ballast
//!   reads a field, every other key passed through untouched both ways.
//! - `provider` — [`ProviderError`]: an upstream's error answer classified (context length, quota, rate limit,
//!   overload, ...) from its structured code first, then the per-provider context-length wordings.
//! - `truncate` — [`truncate`]: drop whole older turns to fit a context window, never splitting a tool group.

mod provider;
mod truncate;
mod types;

pub use provider::{ContextTokens, ProviderError, ProviderErrorKind};
pub use truncate::{CannotTruncate, Truncation, TruncationGoal, truncate};

mod call;
mod client;
mod clients;
mod commit;
mod context;
mod deployment;
mod route;
mod stream;
mod usage;

pub use call::{ChatAnswer, ChatCall, ChatError, UnknownRoute};
pub use client::ChatClient;
// The settings of a model route, as its client holds them, and the environment its secrets are read from.
pub use ballast_config::{ContextConfig, Deployment, Env, ModelRoute};
pub use clients::ChatClients;
pub use deployment::InvalidChatRoute;
pub use stream::{ChatStream, StreamError, StreamErrorKind};
pub use types::{
    BadToolArguments, ChatChunk, ChatRequest, ChatResponse, Choice, ChunkChoice, Message, Role, ToolCallRef,
    Usage,
};
