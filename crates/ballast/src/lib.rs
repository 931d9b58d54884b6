//! Ballast for Rust agents: every call of one agent request under one deadline, retried only when safe and
//! affordable, isolated by circuit breakers, admitted by priority under a spike.
//!
//! `ballast` is the one dependency: the policies' types a user meets ([`policy`], from `ballast-core`), the
//! configuration ([`config`], from `ballast-config`) and the idempotency stores ([`idempotency::store`], from
//! `ballast-store`) are re-exported here, each name on one path.
//!
//! # Cargo features
//! - `http` (default) — [`transport::HttpTransport`], attempts over the network with reqwest (rustls), and
//!   [`transport::HyperTransport`], `http://` attempts with hyper-util's client (the one reqwest is built on).
//!   Without it, [`transport::ServiceTransport`] sends through any tower service you give it.
//! - `idempotency` — [`idempotency`], the server side for your own axum service; `sqlite` (default),
//!   `postgres` and `redis` each add a store backend (and `idempotency`).
//!
//! The typed settings and their validation (`ballast-config`) are not optional: the clients hold them, and a
//! builder checks its settings by the same rules a config file is checked by.
//!
//! # Modules
//! - [`tool`] — [`ToolClient`](tool::ToolClient) and [`ToolClients`]: a tool's calls, with one
//!   idempotency key per operation, the 409 wait, cancellation by token and a fallback that never repeats a side
//!   effect. Built from a config ([`Clients::from_config`]) or in code
//!   ([`ToolClient::builder`](tool::ToolClient::builder)), checked by the same rules either way.
//! - [`model`] — [`ModelClient`](model::ModelClient) over a route's deployments, for the Responses API, Chat
//!   Completions, embeddings and Anthropic's Messages (fallbacks, the primary's share, context handling, streams and their commit point, a
//!   response's state kept with the deployment that made it); the bodies of each API
//!   ([`ChatRequest`](model::ChatRequest), [`ResponsesRequest`](model::ResponsesRequest), ...); what a provider's
//!   error answer means; whole older turns dropped to fit a context window. Built from a config
//!   ([`Clients::from_config`], API keys from the process environment) or in code
//!   ([`ModelClient::builder`](model::ModelClient::builder)).
//! - [`idempotency`] — the server side: axum middleware in front of a handler with a side effect (claims the key,
//!   replays the stored answer, survives disconnects and store failures), operation status, the stores.
//! - [`layer`] — the stack as tower layers, for a stack of your own: deadline, admission, retry, breaker, attempt.
//! - [`transport`] — where an attempt leaves the stack: reqwest ([`transport::HttpTransport`]), hyper-util's client
//!   for plain HTTP ([`transport::HyperTransport`]) or any tower service in process
//!   ([`transport::ServiceTransport`]); all read answers into a [`Body`].
//! - [`context`] — what every layer knows about a call, its cancellation, the task-local deadline scope.
//! - [`report`] — what happened to a call, attempt by attempt ([`Report`], [`OutcomeReport`]).
//! - [`background`] — the work that outlives its caller (a sent side effect, a claimed idempotent request), and
//!   [`background::drain`] to wait for it at shutdown.
//! - [`clock`] — the only reader of time (tokio's, so paused time works).
//! - [`Run`] and [`Runs`] — the calls of one agent request share a deadline and a retry allowance.
//! - [`Error`] — the one error type of the stack, with its stable [`ErrorCode`](policy::ErrorCode); [`CallError`],
//!   the one error shape of a tool or model call, with its [`StopReason`](policy::StopReason).
//!
//! # How a call flows
//! ```text
//! ToolClient / ModelClient          the client core (`client`): context, encoding, body limit, the verdict
//!   deadline   ── bound ──────────  one deadline, its own timer, the caller's cancellation
//!   admission  ── Slot ───────────  the upstream's concurrency limit and priority queue
//!   retry      ── Trip ───────────  attempts as the core's decision allows; returns what they did
//!   BreakerService                  http::Request<Bytes> -> http::Response<Body> | Error, per attempt
//!   AttemptService                  each attempt's timeout, headers, report line, background side effect
//!   transport                       HttpTransport | HyperTransport | ServiceTransport: reads the answer into a Body
//! ```
//! Every layer answers with values: an attempt with its [`Body`] (whole bytes, or a stream committed at its
//! first event, carrying its breaker permit) or a typed [`Error`] that says whether it may have reached the
//! upstream; the retry loop with a `Trip` (the result, its stop reason, its attempts and what they may have done).
//! The decisions above read those values; the [`Report`] is the user's record, where each layer writes what it
//! did and the edge of the stack writes the verdict, and no layer reads it to decide.
//!
//! # Clients in code
//! ```
//! use std::sync::Arc;
//! use ballast::config::{HttpMethod, RunConfig};
//! use ballast::model::{DeploymentBuilder, ModelClient};
//! use ballast::{Runs, tool::ToolClient, transport::ServiceTransport};
//!
//! // In process, against the chaos upstream; in production, `HttpTransport::new(reqwest::Client::new())`.
//! let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
//! let runs = Arc::new(Runs::of(&RunConfig::default())); // one run's deadline and allowance for both
//! let lookup = ToolClient::builder("lookup_order", HttpMethod::Post, "http://chaos/tools/lookup_order")
//!     .runs(Arc::clone(&runs))
//!     .build(transport.clone())
//!     .unwrap();
//! let agent = ModelClient::builder("agent")
//!     .deployment(DeploymentBuilder::new("http://chaos/v1").model("mock").api_key("sk-test"))
//!     .runs(runs)
//!     .build(transport)
//!     .unwrap();
//! assert_eq!((lookup.name(), agent.name()), ("lookup_order", "agent"));
//! ```
//!
//! # Source layout
//! Beside the public modules: `clients` ([`Clients::from_config`]: every client of a config, the one way),
//! `client` (the core both clients are thin over: the call options and their setters, one upstream's assembly,
//! stack and trip), `settings` (what the builders share: their setters, and settings given in code validated by
//! ballast-config's rules), `outcome` (what an attempt may have done; the one rule for "outcome unknown", the
//! one fallback rule, the one verdict writer), `body` (an answer as the stack hands it up, and where a stream
//! commits), `admission`, `retry`, `breaker`, `attempt` and `deadline` (the layers, re-exported by [`layer`])
//! and `sse`; [`headers`] is the one table of header names, shared with the gateway; [`context::call_deadline`]
//! the one rule of a call's deadline, shared with it too. No module imports back up: `scripts/module-cycles`
//! checks every crate, and `scripts/public-api` checks the public names against `api/`.

mod admission;
mod attempt;
pub mod background;
mod body;
mod breaker;
mod client;
mod clients;
pub mod clock;
pub mod context;
mod deadline;
#[cfg(feature = "idempotency")]
pub use idempotency::deferred;
mod error;
pub mod headers;
#[cfg(feature = "idempotency")]
pub mod idempotency;
pub mod layer;
mod limit;
pub mod mcp;
mod metrics;
pub mod model;
mod outcome;
pub mod report;
mod retry;
mod run;
mod settings;
#[cfg(feature = "idempotency")]
pub mod sharing;
mod sse;
pub mod tool;
mod trace;
pub mod transport;

/// The policies' types a user of the clients and layers meets, from `ballast-core` (pure, no I/O): what a call
/// is and how it ended, its deadline and trace, the layers' settings with their validation errors, and the
/// breakers', throttles' and budgets' state to read back, and the engines' steps a layer of your own takes. What
/// only the stack itself uses (the admission queue and its tickets, the wire parsers and formatters, the repeats
/// of failures, canonical JSON) stays in `ballast-core`.
pub mod policy {
    // What a call is, and how it ended; a name none of these knows.
    pub use ballast_core::{
        AttemptOutcome, CallKind, ErrorCode, Priority, ShedReason, StopReason, UnknownName,
        UpstreamIdempotency,
    };
    // Its deadline, on the one clock, and its trace.
    pub use ballast_core::{
        Deadline, DeadlineExceeded, Instant, InvalidTraceparent, Refused, TraceContext, TraceId,
    };
    // One operation's key, and its request's fingerprint (what an idempotency store keeps).
    pub use ballast_core::{Fingerprint, IdempotencyKey, InvalidFingerprint, InvalidKey};
    // The layers' settings, each with its validation error.
    pub use ballast_core::{
        AdmissionConfig, Backoff, BreakerConfig, BreakerConfigBuilder, InvalidAdmission, InvalidBackoff,
        InvalidBreaker, InvalidBudget, InvalidRetryPolicy, InvalidThrottle, Jitter, RetryPolicy,
        ThrottleConfig,
    };
    // The state a layer keeps, shared by its services and read back.
    pub use ballast_core::{
        AdaptiveThrottle, BreakerSnapshot, BreakerState, CircuitBreaker, DefaultRng, RatioBudget,
        RetryBudget, RunAllowance, ThrottleSnapshot, TokenBucket, Transition, TransitionReason,
    };
    // The engines' own steps, for a layer of your own: a breaker's permit and what it records, a throttle's
    // admission and its outcomes, a call's retry state and the policy's decision.
    pub use ballast_core::{
        BreakerRejected, CallResult, CallState, OwnedPermit, Permit, RetryDecision, ThrottleOutcome,
        Throttled,
    };
    // What an answer says of itself ([`classify_response`](crate::layer::classify_response)), and a header
    // value that could not be read.
    pub use ballast_core::{Malformation, ProblemKind, ResponseInfo, WireError};
}

/// The configuration, from `ballast-config`: the one TOML schema ([`Config::load`](config::Config::load),
/// [`Config::from_toml_str`](config::Config::from_toml_str)), its typed tables, its errors with their lines, and
/// where its secrets come from. The raw serde tables, `ballast plan`'s worst case and the defaults' constants
/// stay in `ballast-config` (docs/config.md gives every key and default).
pub mod config {
    pub use ballast_config::{
        Api, ApiSet, BudgetConfig, ContextConfig, Deployment, HeaderValueSource, HttpMethod, ModelRoute,
        OnOverflow, Principal, PrincipalKey, RetryConfig, RunConfig, ServerConfig, StoreConfig, StoreKind,
        StoreLocation, ToolConfig, ToolFallback, Upstream, UpstreamHeader,
    };
    pub use ballast_config::{Config, ConfigError, ConfigErrors, DurationError, Problem, SizeError};
    pub use ballast_config::{Env, MissingSecret, ProcessEnv, SecretProblem};
}

// The names of no one module: each public name has one path (`tool::ToolClient`, `model::ModelClient`,
// `policy::Priority`, `config::HttpMethod`), and the root holds only what belongs to every call.
pub use body::Body;
pub use client::{CallError, Refusal};
pub use clients::{Clients, ClientsBuilder, InvalidClients};
pub use error::{BoxError, Error, Overload};
pub use limit::{AccountLimits, LimitMode};
pub use run::{Run, RunOrigin, Runs};

// The crate's own short paths to the names its modules share.
pub(crate) use context::{AttemptNumber, CallContext, Cancel, current_deadline};
pub(crate) use layer::{AdmissionLayer, AttemptLayer, BreakerLayer, RetryLayer, classify_response};
pub(crate) use model::ModelClients;
pub(crate) use report::{AttemptResult, OutcomeReport, Report, TokenUsage, Tokens};
pub(crate) use tool::ToolClients;
