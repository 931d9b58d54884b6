//! The model side of an agent step: OpenAI-compatible `/chat/completions` bodies, what an upstream's error
//! answer means, and how a conversation is cut to fit a context window.
//!
//! - `types` — [`ChatRequest`], [`Message`], [`ChatResponse`], [`ChatChunk`], [`Usage`]: typed where Ballast
//!   reads a field, every other key passed through untouched both ways.

mod types;

mod call;
mod client;
mod clients;
mod context;
mod deployment;
mod route;
mod sse;
mod stream;
mod transport;
mod usage;

pub use call::{ChatAnswer, ChatCall, ChatError, Truncated};
pub use client::ChatClient;
pub use clients::ChatClients;
pub use deployment::InvalidChatRoute;
pub use stream::{ChatStream, StreamError, StreamErrorKind};
pub use transport::ChatTransport;
pub use types::{
    ChatChunk, ChatRequest, ChatResponse, Choice, ChunkChoice, Message, Role, ToolCallRef, Usage,
};
