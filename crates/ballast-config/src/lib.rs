//! Ballast's configuration: the one TOML schema that `ballast plan`, `serve`, `demo` and `bench` read.
//!
//! Two phases, after quickwit's and TensorZero's config loaders:
//! 1. [`parse`]: the text into [`RawConfig`], serde structs that mirror the file, with a required
//!    `version = 1` and every unknown key refused with its path (`server.lisen: unknown field ...`);
//! 2. [`validate`]: the raw structs into a typed [`Config`] — durations, sizes, ballast-core's enums, and the
//!    policy settings built by ballast-core itself ([`Backoff`](ballast_core::Backoff),
//!    [`BreakerConfig`](ballast_core::BreakerConfig), [`BudgetConfig`] checked by the budgets' constructors) —
//!    with every omitted key at its default, and *every* broken rule reported at once with the field's path and
//!    the value as written (`tools[2].per_try_timeout: "12x" is not a duration: ...`).
//!
//! A config that loads is a config that works, by construction: the rules and defaults of the `retry`,
//! `budget` and `breaker` tables are ballast-core's, applied by ballast-core's own constructors during
//! validation, so the gateway can never be handed settings its policies refuse.
//!
//! [`Config::from_toml_str`] and [`Config::load`] do both. The environment is passed in, never read here:
//! secrets are names of variables (`key_env`, `api_key_env`, `store.url_env`, a tool upstream's
//! `headers.NAME.env`, `deferred.callback_secret_env`), checked for presence by
//! [`Config::missing_secrets`] only where they are needed to run. Every key, its default and its rule is
//! documented in docs/config.md.
//!
//! # Layout
//! - `raw` — [`RawConfig`] and its tables: phase one.
//! - `validate` — [`validate`]: phase two (the rules, by section).
//! - `typed` — [`Config`] and its tables: plain data, and every default.
//! - `load` — text and files to config; the version check; error locations.
//! - `secrets` — [`Env`] and [`Config::missing_secrets`].
//! - `to_raw` — [`Config`] back to [`RawConfig`], every default written out (`RawConfig::from(&config)`).
//! - `error` — [`ConfigErrors`], [`ConfigError`], [`Problem`].
//! - `plan` — [`Plan`]: the worst case of a config on paper (`ballast plan`), and its table.

mod error;
mod lines;
mod load;
mod plan;
mod raw;
mod secrets;
mod to_raw;
mod typed;
mod validate;

#[cfg(test)]
mod docs_tests;

pub use error::{ConfigError, ConfigErrors, Problem};
// The grammars of durations and sizes (ballast-human), re-exported: a config's values are written in them.
pub use ballast_human::{DurationError, SizeError, format_duration, format_size, parse_duration, parse_size};
pub use load::parse;
pub use plan::{
    DeadlineBound, DeferredPlan, DeferredTool, Plan, PlanRow, RetryLoad, TargetKind, TracesPlan, Warning,
    render_table,
};
pub use raw::{
    HumanValue, RawBreaker, RawBudget, RawConfig, RawContext, RawDeferred, RawDeployment, RawHeaderEnv,
    RawHeaderValue, RawHeaders, RawLimits, RawMcpServer, RawMcpTool, RawModel, RawPrincipal, RawRetry,
    RawRun, RawServer, RawStore, RawTelemetry, RawThrottle, RawTool, RawToolDefer, RawUpstream,
    SCHEMA_VERSION,
};
pub use secrets::{Env, MissingSecret, ProcessEnv, SecretProblem};
pub use typed::{
    Api, ApiSet, BudgetConfig, Config, ContextConfig, DEFAULT_BODY_LIMIT, DEFAULT_BODY_TIMEOUT,
    DEFAULT_DEFER_BASE, DEFAULT_DEFER_CAP, DEFAULT_DEFER_CONCURRENCY, DEFAULT_DEFER_MAX_ATTEMPTS,
    DEFAULT_DEFER_TTL, DEFAULT_DRAIN_DELAY, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_RUNS, DEFAULT_MAX_RUNS_PER_PRINCIPAL, DEFAULT_MODEL_CONCURRENCY,
    DEFAULT_MODEL_PER_TRY_TIMEOUT, DEFAULT_MODEL_QUEUE, DEFAULT_PRIMARY_SHARE, DEFAULT_REPEAT_WINDOW,
    DEFAULT_SAMPLING, DEFAULT_SEND_TIMEOUT, DEFAULT_SERVICE_NAME, DEFAULT_STORE_URL,
    DEFAULT_STREAM_IDLE_TIMEOUT, DEFAULT_TOOL_CONCURRENCY, DEFAULT_TOOL_DEFER_CONCURRENCY,
    DEFAULT_TOOL_PER_TRY_TIMEOUT, DEFAULT_TOOL_QUEUE, DeferredCallback, DeferredConfig, Deployment,
    HeaderValueSource, HttpMethod, Limits, McpServerConfig, McpToolOverride, ModelRoute, OnOverflow,
    OnStoreLoss, OtlpProtocol, Principal, PrincipalKey, RetryConfig, RunConfig, ServerConfig, StoreConfig,
    StoreKind, StoreLocation, TelemetryConfig, ToolConfig, ToolDefer, ToolFallback, Upstream, UpstreamHeader,
};
pub use validate::validate;
