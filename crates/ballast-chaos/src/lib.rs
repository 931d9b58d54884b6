//! The chaos upstream: the upstream every Ballast test and benchmark runs against.
//!
//! Everything Ballast claims must be shown against an upstream that fails the way real ones do: slow tails,
//! 5xx and 429 with `Retry-After`, hangs, connection resets, outages, a capacity limit that turns a retry storm
//! into an overload — and the double-refund trap, where the side effect commits and the response is lost.
//! This crate serves a mock model — OpenAI's chat completions and Responses API, Anthropic's Messages API — and
//! mock tools with a ledger of every side effect (over HTTP, and over MCP at `/mcp`), and injects those faults
//! **deterministically**: the fault an
//! attempt meets is a pure function of (seed, endpoint, operation id, attempt number), so two client strategies
//! run against the same seed meet the same faults, and a comparison between them is fair.
//!
//! It depends on no other Ballast crate: it stands in for any upstream.
//!
//! # Layout
//! - `profile` — [`Profile`]: the fault profile (TOML or a named preset), validated with field paths.
//! - `fault` — [`Fault`] and [`Draw`]: what one attempt meets, drawn from (seed, endpoint, op, attempt).
//! - `model` — the scripted agent conversation of the mock model, in chat completions ([`reply`]), the
//!   Responses API ([`responses_reply`]: the same script, its `response` object and events) and Anthropic's
//!   Messages API ([`messages_reply`]: the same script, its `message` object and events, Anthropic's errors
//!   as [`MessagesError`]), its SSE framing, OpenAI-format errors ([`error_body`]), and deterministic
//!   embeddings ([`embeddings`]) — pure functions.
//! - `server` — the HTTP side: [`router`], [`serve`], the model endpoints (`/v1/chat/completions`,
//!   `/v1/responses` and the stored responses, `/v1/messages` and its `count_tokens`, `/v1/embeddings`), the
//!   tools and their ledger (`/tools/{name}`, and `/mcp`: the same tools as an MCP server, through the same
//!   faults), stats, the capacity limit, outages, connection resets and streams with their cuts, stalls,
//!   keep-alives and errors after content.

mod fault;
mod model;
mod profile;
mod server;

pub use fault::{Draw, LATENCY_CAP_FACTOR, draw};
pub use model::{
    DEFAULT_DIMENSIONS, MessagesError, MessagesReply, ModelError, Reply, ResponsesError, ResponsesReply,
    SSE_DONE, SSE_KEEP_ALIVE, embedding, embeddings, error_body, messages_reply, models_list, operation_id,
    reply, responses_reply, sse_data, sse_event,
};
pub use profile::{
    Capacity, DurationError, EndpointProfile, ErrorDelivery, ErrorRate, Fault, FieldError, KeyMode, Latency,
    LoseMode, McpSettings, ModelSettings, Outage, OutageAnswer, Problem, Profile, ProfileError, Quota,
    RetryAfterForm, Script, ScriptStep, StreamFaults, Window,
};
pub use server::{ChaosServer, router, serve, spawn};
