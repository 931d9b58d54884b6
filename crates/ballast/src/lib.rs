//! Ballast for Rust agents: every call of one agent request under one deadline, retried only when safe and
//! affordable, isolated by circuit breakers, admitted by priority under a spike.
//!
//! The decisions are `ballast-core`'s (pure, no I/O); this crate is the async shell around them: the one clock,
//! deadline propagation, tower layers any tower/axum/reqwest user can put in front of a service, and the
//! `ToolClient` and `ChatClient` that put them together for an agent's tool and model calls.
//!
//! # How a call flows
//! ```text
//! ToolClient / ChatClient          the client core (`client`): context, encoding, body limit, the verdict
//!   deadline   ── bound ──────────  one deadline, its own timer, the caller's cancellation
//!   admission  ── Slot ───────────  the upstream's concurrency limit and priority queue
//!   retry      ── Trip ───────────  attempts as the core's decision allows; returns what they did
//!   BreakerService                  http::Request<Bytes> -> http::Response<Body> | Error, per attempt
//!   AttemptService                  each attempt's timeout, headers, report line, background side effect
//!   transport                       HttpTransport | ServiceTransport: reads the answer into a Body
//! ```
//! Every layer answers with values: an attempt with its [`Body`] (whole bytes, or a stream committed at its
//! first event, carrying its breaker permit) or a typed [`Error`] that says whether it may have reached the
//! upstream; the retry loop with a `Trip` (the result, its stop reason, its attempts and what they may have done).
//! The decisions above read those values; the [`Report`] is the user's record, where each layer writes what it
//! did and the edge of the stack writes the verdict, and no layer reads it to decide. The call-level layers run
//! as tower services too ([`DeadlineLayer`], [`AdmissionLayer`], [`RetryLayer`]), over the same code.
//!
//! # Layout
//! - `client` — the core both clients are thin over: [`CallError`], the one error shape of a tool or model call,
//!   and one upstream's stack with its trip through it.
//! - `tool` — [`ToolClient`] and [`ToolClients`]: a configured tool's calls, with one idempotency key per
//!   operation, the 409 wait, cancellation by token and a fallback that never repeats a side effect.
//! - `chat` — the model side: [`ChatClient`] over a route's deployments (fallbacks, the primary's share,
//!   context handling, [`ChatStream`]); [`ChatRequest`] and the other `/chat/completions` bodies (unknown fields
//!   pass through untouched); [`ProviderError`], what an upstream's error answer means; [`truncate`], whole older
//!   turns dropped to fit a context window.
//! - `outcome` — the typed outcomes (what an attempt may have done, a trip) and the one rule for "outcome
//!   unknown".
//! - `body` — [`Body`]: an answer as the stack hands it up.
//! - `clock` — the only reader of time (tokio's, so paused time works) and of HTTP-date `Retry-After`.
//! - `context` — [`CallContext`]: what every layer knows about a call (request extensions), its [`Cancel`], and
//!   the task-local deadline scope.
//! - `run` — [`Run`] and [`Runs`]: the calls of one agent request share a deadline and a retry allowance.
//! - `report` — [`Report`] and [`OutcomeReport`]: what happened to a call, attempt by attempt.
//! - `error` — [`Error`]: the one error type of the stack, with its stable code.
//! - `deadline` — [`DeadlineLayer`]: gives a call its context and holds it to one deadline.
//! - `admission` — [`AdmissionLayer`]: per-upstream concurrency limit and priority queue; sheds, evicts,
//!   bounds waiting by the deadline.
//! - `retry` — [`RetryLayer`]: one logical call, attempts as the core's retry decision allows (budget, run
//!   allowance, `Retry-After`, backoff); [`classify_response`] reads an upstream's answer for that decision.
//! - `breaker` — [`BreakerLayer`]: each attempt asks the upstream's circuit breaker and tells it the outcome (a
//!   stream's, when it ends).
//! - `attempt` — [`AttemptLayer`]: each attempt's timeout, headers, report line, and the sent side-effecting
//!   attempt that outlives its caller.
//! - `transport` — [`HttpTransport`] (reqwest) and [`ServiceTransport`] (any tower service in process): send an
//!   attempt and read its answer under a size limit, whole or up to a stream's commit point.
//! - `sse` — server-sent events, read and written.
//! - [`background`] — the work that outlives its caller (a sent side effect, a claimed idempotent request), tracked,
//!   and [`background::drain`] to wait for it at shutdown.
//! - `idempotency` — [`IdempotencyLayer`]: the server side, axum middleware in front of a handler with a side
//!   effect: claims the key, replays the stored answer, survives disconnects and store failures;
//!   [`operation_status`] and [`operations_route`] for status polling.

mod admission;
mod attempt;
pub mod background;
mod body;
mod breaker;
mod chat;
mod client;
pub mod clock;
mod context;
mod deadline;
mod error;
mod headers;
mod idempotency;
mod outcome;
mod report;
mod retry;
mod run;
mod sse;
mod tool;
mod transport;

pub use admission::{AdmissionLayer, AdmissionService};
pub use attempt::{AttemptLayer, AttemptService};
pub use body::Body;
pub use breaker::{BreakerLayer, BreakerService, THROTTLED};
pub use chat::{
    BadToolArguments, ChatAnswer, ChatCall, ChatChunk, ChatClient, ChatClients, ChatError, ChatRequest,
    ChatResponse, ChatStream, Choice, ChunkChoice, InvalidChatRoute, Message, Role, StreamError,
    StreamErrorKind, ToolCallRef, UnknownRoute, Usage,
};
pub use chat::{CannotTruncate, Truncation, TruncationGoal, truncate};
pub use chat::{ContextTokens, ProviderError, ProviderErrorKind};
pub use client::CallError;
pub use context::{AttemptNumber, CallContext, Cancel, current_deadline, scope};
pub use deadline::{DeadlineLayer, DeadlineService};
pub use error::{BoxError, Error};
pub use idempotency::{
    IdempotencyLayer, IdempotencyLayerBuilder, IdempotencyService, InvalidIdempotencyLayer, NotStored,
    OperationStatus, OutcomeUnknown, Principal, operation_status, operations_route, spawn_reaper,
};
pub use report::{AttemptRecord, AttemptResult, OutcomeReport, Report, TokenUsage, Tokens};
pub use retry::{Retry, RetryLayer, classify_response};
pub use run::{Run, Runs};
pub use tool::{InvalidTool, ToolAnswer, ToolCall, ToolClient, ToolClients, ToolError};
pub use transport::{HttpTransport, ServiceTransport};
