//! The model side of an agent step: OpenAI-compatible `/chat/completions` bodies, what an upstream's error
//! answer means, and how a conversation is cut to fit a context window.
//!
//! - `types` — [`ChatRequest`], [`Message`], [`ChatResponse`], [`ChatChunk`], [`Usage`]: typed where Ballast
//!   reads a field, every other key passed through untouched both ways.

mod types;

pub use types::{
    ChatChunk, ChatRequest, ChatResponse, Choice, ChunkChoice, Message, Role, ToolCallRef, Usage,
};
