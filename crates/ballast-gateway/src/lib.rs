//! The Ballast gateway: model and tool calls from any language — Python, TypeScript, curl, the OpenAI and
//! Anthropic SDKs — get
//! one deadline, safe retries, Stripe-grade idempotency, circuit breakers, adaptive throttling and priority
//! admission by going through it. `ballast serve` runs it; the binary only parses arguments and calls [`run`].
//!
//! ```text
//! POST /v1/chat/completions    OpenAI's Chat Completions, streamed or not -> the route's deployments (models/)
//! POST /v1/responses           OpenAI's Responses, and GET/DELETE/cancel of a response where it was made
//! POST /v1/embeddings          OpenAI's embeddings
//! POST /v1/messages[/count_tokens]  Anthropic's Messages, streamed or not, in its error envelope
//! GET  /v1/models[/{id}]       the model routes, as OpenAI's model objects
//! POST /v1/tools/{name}        the tool's JSON arguments -> its upstream, under its policy (tools/)
//! POST /mcp                    the tools as an MCP server (rmcp, stateless): each tools/call is its tool's route (mcp/)
//! GET  /v1/operations/{key}    where a keyed operation is: in_progress, completed, outcome_unknown, not_found
//! GET  /healthz, /readyz       alive; ready (not draining)
//! GET  /metrics, /status       Prometheus text; breakers, budgets, throttles, queues, runs, the store (JSON)
//! GET  /dashboard              the operator's page over /status (dashboard/)
//! ```
//!
//! docs/gateway.md has every endpoint, header and answer.
//!
//! Layout (each module using only those it names or below them: `scripts/module-cycles` checks it):
//! - `state` — [`Gateway`]: the config, the model and tool clients (`ballast::Clients`), the store, the runs, the
//!   principals;
//! - `app` — the router ([`app`], [`admin_app`]) and auth in front of `/v1/*`; `edge` — the two services every
//!   request passes (its span, and what every answer carries: `x-request-id`, an explicit `x-should-retry`,
//!   jittered `Retry-After`; the caller's principal);
//! - `auth` — principals and the constant-time key check; `inbound` — the headers a call reads (an extractor on
//!   the model routes; their names are `ballast::headers`, the one table the library and the gateway share) and
//!   the call's deadline by the library's one rule;
//! - `models` — the model routes (axum handlers returning `Result`); `tool_answer` — a tool call's result as
//!   the caller gets it; `deferred` — deferred tool calls (202, the workers' attempts, the callback); `tools` — the tool routes (`PrepareLayer`
//!   over the `IdempotencyLayer` over the handler); `mcp` — `/mcp`, rmcp's server whose `tools/call` calls a tool's
//!   route in process (the same route, key and policy as `POST /v1/tools/{name}`); `repeats` — a repeat of a final failure answered from it;
//!   `body` — reading a request's body within its limits; `error` — every answer of the gateway's own, in one
//!   place (problem+json, OpenAI's envelope, `Retry-After` and its jitter);
//! - `admin` — health, readiness, metrics, status; `metrics` — the Prometheus recorder; `breaker_gauges` — how
//!   long each breaker has been open, set at scrape time; `history` — the last 15 minutes of the recorder's
//!   counters, for `/status`; `dashboard` — the operator's page;
//!   `telemetry` — traces over OTLP, drawn from each call's report when its answer ends (`[telemetry]`);
//! - `connections` — the accept loop: each connection bounded in time, all bounded in number;
//! - `serve` — [`run`] / [`serve`]: serving and the graceful shutdown.
//!
//! Tests: what a caller reads from the router is tested in process, [`app`] driven with `oneshot` over chaos
//! upstreams in process (`tests/it`, paused time where a test waits); what needs the real process — signals and the
//! graceful shutdown, restarts, real sockets and connection limits, the store probes [`serve`] runs, the SDKs — is
//! tested against the `ballast` binary by `ballast-cli`'s `tests/it`.

mod admin;
mod app;
mod auth;
mod body;
mod breaker_gauges;
mod connections;
mod dashboard;
mod deferred;
mod edge;
mod error;
mod history;
mod inbound;
mod mcp;
mod metrics;
mod models;
mod repeats;
mod serve;
mod state;
mod telemetry;
mod tool_answer;
mod tools;

use std::net::SocketAddr;

pub use app::{admin_app, app};
pub use serve::{run, run_on, serve};
pub use state::Gateway;

/// Why the gateway could not start (or stopped serving).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A secret the config names is missing or malformed (its value is never shown).
    #[error("{what}: environment variable {var} {problem}")]
    Secret {
        /// The config entry that needs it.
        what: String,
        /// The variable.
        var: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The store could not be opened.
    #[error("cannot open the store {url}: {source}")]
    Store {
        /// The store's URL, without its password.
        url: String,
        /// Why.
        source: ballast::idempotency::store::StoreError,
    },
    /// A tool's idempotency layer could not be built from the server's settings.
    #[error("tools.{tool}: {source}")]
    Idempotency {
        /// The tool.
        tool: String,
        /// Why.
        source: ballast::idempotency::InvalidIdempotencyLayer,
    },
    /// A tool's or a model route's client could not be built (a deployment's API key missing from the
    /// environment, say).
    #[error(transparent)]
    Clients(#[from] ballast::InvalidClients),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    /// The metrics recorder could not be installed.
    #[error("cannot install the metrics recorder: {0}")]
    Metrics(String),
    /// No principals are configured and the address is not a loopback one: anyone could call every tool.
    #[error(
        "{addr} is not a loopback address and no [[principals]] are configured: anyone who can reach it could call \
         every tool; add a principal or listen on 127.0.0.1"
    )]
    NotLoopback {
        /// The address.
        addr: SocketAddr,
    },
    /// The exporter of `[telemetry]` could not be built.
    #[error("telemetry: {0}")]
    Telemetry(String),
    /// Listening or accepting failed.
    #[error("cannot serve: {0}")]
    Listen(#[source] std::io::Error),
}
