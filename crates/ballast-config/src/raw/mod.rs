//! Phase one: the file as written. Serde structs that mirror the TOML one to one.
//!
//! Every table rejects keys it does not know (`deny_unknown_fields`), so a typo is an error, not a silently
//! ignored setting. Everything else is `Option` or a default: no value is parsed, ranged or cross-checked here,
//! so that phase two ([`validate`](crate::validate)) can report every problem at once, each with its path.
//! What each key means, its default and its rule: docs/config.md (the defaults in parentheses below are
//! applied by validation, from the typed structs).

mod deferred;
mod headers;
mod mcp;
mod telemetry;
mod value;

use serde::{Deserialize, Serialize};

pub use deferred::{RawDeferred, RawToolDefer};
pub use headers::{RawHeaderEnv, RawHeaderValue, RawHeaders};
pub use mcp::{RawMcpServer, RawMcpTool};
pub use telemetry::RawTelemetry;
pub use value::HumanValue;

/// The only schema version this build reads.
pub const SCHEMA_VERSION: i64 = 1;

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Schema version; must be 1.
    pub version: i64,
    /// `[server]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub server: RawServer,
    /// `[[principals]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub principals: Vec<RawPrincipal>,
    /// `[store]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub store: RawStore,
    /// `[run]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub run: RawRun,
    /// `[deferred]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub deferred: RawDeferred,
    /// `[[models]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<RawModel>,
    /// `[[tools]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<RawTool>,
    /// `[[mcp_servers]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<RawMcpServer>,
    /// `[telemetry]`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub telemetry: RawTelemetry,
}

impl Default for RawConfig {
    /// An empty file with `version = 1`: every setting at its default, no principals, models or tools.
    fn default() -> Self {
        RawConfig {
            version: SCHEMA_VERSION,
            server: RawServer::default(),
            principals: Vec::new(),
            store: RawStore::default(),
            run: RawRun::default(),
            deferred: RawDeferred::default(),
            models: Vec::new(),
            tools: Vec::new(),
            mcp_servers: Vec::new(),
            telemetry: RawTelemetry::default(),
        }
    }
}

/// `[server]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// Address the gateway binds (`"127.0.0.1:8080"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Address of its own for `/metrics` and `/status`, unauthenticated (none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_listen: Option<String>,
    /// Deadline when the caller sends none (`"30s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_timeout: Option<HumanValue>,
    /// Cap on caller-supplied deadlines (`"300s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_timeout: Option<HumanValue>,
    /// Time kept back to answer (`"50ms"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve: Option<HumanValue>,
    /// Least time worth an attempt or a sleep (`"50ms"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_attempt: Option<HumanValue>,
    /// Largest request body (`"8MiB"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_limit: Option<HumanValue>,
    /// Shutdown drain (`"10s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace: Option<HumanValue>,
    /// How long `/readyz` fails before the listener closes on shutdown (`"1s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_delay: Option<HumanValue>,
    /// Longest `Retry-After` waited for (`"60s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retry_after: Option<HumanValue>,
    /// How long a final failure answers the requests that repeat it (`"10s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat_window: Option<HumanValue>,
    /// Time a connection has to send a request's headers (`"10s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_timeout: Option<HumanValue>,
    /// Time a request has to send its whole body (`"10s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_timeout: Option<HumanValue>,
    /// How long a kept-alive connection may wait for its next request (`"75s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<HumanValue>,
    /// How long an answer may make no progress, its caller reading none of it (`"60s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_timeout: Option<HumanValue>,
    /// Open connections at most on `listen` (`4096`, lowered to fit the file limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<i64>,
}

/// One `[[principals]]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrincipal {
    /// The principal's name (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Variable holding the key (this or `key_hash_env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
    /// Variable holding the key's hex SHA-256 (this or `key_env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_hash_env: Option<String>,
    /// Whether it may read `/metrics` and `/status` (`false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin: Option<bool>,
}

/// `[store]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    /// Store URL (`"sqlite://ballast.db"`), without a password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Variable holding the store URL (instead of `url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url_env: Option<String>,
    /// How long completed records are kept (`"24h"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<HumanValue>,
}

/// `[run]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    /// Retries across one run's calls, the base (`3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_allowance: Option<i64>,
    /// Retries added per call of the run (`0.5`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_allowance_per_call: Option<f64>,
    /// How long a run's state is kept after its last call (`"10m"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<HumanValue>,
    /// Runs remembered at most, all principals together (`50000`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_runs: Option<i64>,
    /// Runs remembered at most for one principal (`10000`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_runs_per_principal: Option<i64>,
}

/// One `[[models]]` entry: a model route.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// The name clients ask for (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Upstreams in fallback order (at least one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<RawDeployment>,
    /// Longest attempt (`"20s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<HumanValue>,
    /// Share of the time left the first deployment may use (`0.6`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_share: Option<f64>,
    /// Longest gap between two chunks of a streamed answer (`"30s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_idle_timeout: Option<HumanValue>,
    /// Retries per deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RawRetry>,
    /// Retry budget per deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<RawBudget>,
    /// Circuit breaker per deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<RawBreaker>,
    /// Adaptive throttle per deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttle: Option<RawThrottle>,
    /// Admission class of the route's calls (`"critical"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// Calls in flight at most, per deployment (`64`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<i64>,
    /// Calls waiting at most, per deployment (`256`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<i64>,
    /// Context-overflow policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<RawContext>,
}

/// One entry of a model route's `deployments`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDeployment {
    /// OpenAI-compatible base URL (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Model name sent upstream (the route's name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Variable holding the API key (none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Overrides the route's `per_try_timeout`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<HumanValue>,
    /// The APIs it speaks (`["responses", "chat", "embeddings"]`, all of them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<Vec<String>>,
    /// The account's limits, counted across every instance sharing the store (none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<RawLimits>,
}

/// A deployment's `limits` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Requests per minute (none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<i64>,
    /// Tokens per minute, input and output (none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<i64>,
    /// How much of a limit may go at once (`"1s"`: one second's worth).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<HumanValue>,
    /// Without the shared store: `share` (each instance its share) or `refuse` (`"share"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_store_loss: Option<String>,
}

/// A `retry` table (models and tools).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRetry {
    /// Attempts per call, the first included (`3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<i64>,
    /// First backoff window (`"100ms"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<HumanValue>,
    /// Largest backoff sleep (`"2s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap: Option<HumanValue>,
    /// `"full"` or `"decorrelated"` (`"full"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
}

/// A `budget` table (models and tools), tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RawBudget {
    /// `kind = "ratio"`.
    Ratio {
        /// Retries per request at most (`0.2`).
        #[serde(skip_serializing_if = "Option::is_none")]
        ratio: Option<f64>,
        /// Retries per second always allowed (`10`).
        #[serde(skip_serializing_if = "Option::is_none")]
        min_per_sec: Option<i64>,
        /// Counting window (`"10s"`).
        #[serde(skip_serializing_if = "Option::is_none")]
        window: Option<HumanValue>,
    },
    /// `kind = "token_bucket"`.
    TokenBucket {
        /// Tokens held (`10`).
        #[serde(skip_serializing_if = "Option::is_none")]
        capacity: Option<i64>,
        /// Tokens added per second (`1.0`).
        #[serde(skip_serializing_if = "Option::is_none")]
        refill_per_sec: Option<f64>,
    },
}

/// A `breaker` table (models and tools).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    /// Failures in a row, in start order, that open it (`10`; `0` = off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_failures: Option<i64>,
    /// Least time from the first to the last failure of such a streak (`"500ms"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_spread: Option<HumanValue>,
    /// Failure rate that opens it (`0.5`; `0` = off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<f64>,
    /// Failure-rate window (`"10s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<HumanValue>,
    /// Calls before the rate counts (`100`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_calls: Option<i64>,
    /// Slower calls count as failures (off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_call: Option<HumanValue>,
    /// Time open before probing (`"5s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_for: Option<HumanValue>,
    /// Relative jitter on `open_for` (`0.2`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_jitter: Option<f64>,
    /// Probes while half-open (`3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_open_probes: Option<i64>,
    /// Successes that close it (`half_open_probes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<i64>,
}

/// A `throttle` table (models and tools).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawThrottle {
    /// Whether the throttle runs (`true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// K: refusals start below 1/K accepted (`2.0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accept_multiplier: Option<f64>,
    /// Sliding window (`"2s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<HumanValue>,
    /// Requests in the window before anything is refused (`10`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_requests: Option<i64>,
}

/// A model route's `context` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawContext {
    /// `"error"`, `"fallback"` or `"truncate"` (`"error"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_overflow: Option<String>,
}

/// One `[[tools]]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTool {
    /// The tool's name (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What the tool does, for the model (served over MCP; a sentence naming the tool).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the tool's arguments, an object schema (`{ type = "object" }`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<toml::Value>,
    /// Where calls go (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<RawUpstream>,
    /// Whether a call changes something (`false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<bool>,
    /// `"none"`, `"keyed"` or `"keyed_replays_errors"` (`"none"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_idempotency: Option<String>,
    /// Admission class (`"critical"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// Longest attempt (`"10s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<HumanValue>,
    /// Retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RawRetry>,
    /// Retry budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<RawBudget>,
    /// Circuit breaker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<RawBreaker>,
    /// Adaptive throttle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttle: Option<RawThrottle>,
    /// Calls in flight at most (`64`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<i64>,
    /// Calls waiting at most (`256`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<i64>,
    /// Tool called when the breaker is open (none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_tool: Option<String>,
    /// Answer given when the breaker is open (none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_response: Option<toml::Value>,
    /// Callers accept deferral without asking, with these settings (none: only when a caller asks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defer: Option<RawToolDefer>,
}

/// A tool's `upstream` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    /// HTTP method (`"POST"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Upstream URL (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent on every attempt, name -> value (none).
    #[serde(default, skip_serializing_if = "RawHeaders::is_empty")]
    pub headers: RawHeaders,
}
