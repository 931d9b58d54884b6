//! Typed model and tool routes and the policy tables they share (`retry`, `budget`, `breaker`).
//!
//! The breaker is ballast-core's own [`BreakerConfig`], built by its builder during validation; the backoff is
//! ballast-core's [`Backoff`]; the budget's settings are checked by ballast-core's constructors. So the rules and
//! the defaults of these tables live in ballast-core, once.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ballast_core::{
    Backoff, BreakerConfig, DEFAULT_MAX_ATTEMPTS, Priority, ThrottleConfig, UnknownName, UpstreamIdempotency,
};

use super::{ApiSet, BudgetConfig, ToolDefer};

/// Default `per_try_timeout` of a model route: 20 s (time to first byte when streaming).
pub const DEFAULT_MODEL_PER_TRY_TIMEOUT: Duration = Duration::from_secs(20);
/// Default `per_try_timeout` of a tool: 10 s.
pub const DEFAULT_TOOL_PER_TRY_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `stream_idle_timeout` of a model route: 30 s between two chunks of a streamed answer.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default share of the remaining time a model route's first deployment may use when it has fallbacks: 0.6.
pub const DEFAULT_PRIMARY_SHARE: f64 = 0.6;
/// Default concurrency limit of a tool: 64 calls in flight.
pub const DEFAULT_TOOL_CONCURRENCY: u32 = 64;
/// Default admission queue length of a tool: 256 waiting calls.
pub const DEFAULT_TOOL_QUEUE: u32 = 256;
/// Default concurrency limit of each model deployment: 64 calls in flight (docs/config.md says why).
pub const DEFAULT_MODEL_CONCURRENCY: u32 = 64;
/// Default admission queue length of each model deployment: 1024 waiting calls (docs/config.md says why).
pub const DEFAULT_MODEL_QUEUE: u32 = 1024;

/// A model route: the name clients ask for, and the deployments that serve it, in fallback order.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRoute {
    /// What clients put in `model` (unique among routes).
    pub name: String,
    /// Where the route's calls go, first to last (at least one).
    pub deployments: Vec<Deployment>,
    /// Longest single attempt on the route's deployments unless a deployment overrides it (default 20 s).
    pub per_try_timeout: Duration,
    /// With fallbacks, the share of the remaining time the first deployment may use, in (0, 1] (default 0.6).
    pub primary_share: f64,
    /// Longest gap between two chunks of a streamed answer, once the first has arrived (default 30 s); the
    /// time to the first chunk is bounded by `per_try_timeout`.
    pub stream_idle_timeout: Duration,
    /// Retries on each deployment.
    pub retry: RetryConfig,
    /// The retry budget; each deployment gets its own.
    pub budget: BudgetConfig,
    /// The circuit breaker's settings, as ballast-core built them; each deployment gets its own breaker.
    pub breaker: BreakerConfig,
    /// The adaptive throttle's settings (`None`: off); each deployment gets its own throttle.
    pub throttle: Option<ThrottleConfig>,
    /// Admission class of the route's calls (default `critical`; `ballast-priority` may lower it).
    pub priority: Priority,
    /// Calls in flight at most, per deployment (default 64; at least 1).
    pub concurrency: u32,
    /// Calls waiting for a slot at most, per deployment (default 256).
    pub queue: u32,
    /// What to do when the prompt does not fit the model's context.
    pub context: ContextConfig,
}

impl ModelRoute {
    /// The route `name` served by `deployments` (first to last), every other setting at its default: what
    /// validation gives a `[[models]]` entry that writes only these keys.
    ///
    /// ```
    /// use ballast_config::{Config, Deployment, ModelRoute};
    ///
    /// let route = ModelRoute::new("agent", vec![Deployment::new("http://127.0.0.1:9000/v1", "agent")]);
    /// let config = Config::from_toml_str(
    ///     "version = 1\n[[models]]\nname = \"agent\"\ndeployments = [ { base_url = \"http://127.0.0.1:9000/v1\" } ]",
    /// ).unwrap();
    /// assert_eq!(config.models[0], route);
    /// ```
    pub fn new(name: impl Into<String>, deployments: Vec<Deployment>) -> Self {
        ModelRoute {
            name: name.into(),
            deployments,
            per_try_timeout: DEFAULT_MODEL_PER_TRY_TIMEOUT,
            primary_share: DEFAULT_PRIMARY_SHARE,
            stream_idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
            retry: RetryConfig::default(),
            budget: BudgetConfig::default(),
            breaker: BreakerConfig::default(),
            throttle: Some(ThrottleConfig::default()),
            priority: Priority::Critical,
            concurrency: DEFAULT_MODEL_CONCURRENCY,
            queue: DEFAULT_MODEL_QUEUE,
            context: ContextConfig::default(),
        }
    }
}

/// One upstream of a model route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deployment {
    /// The OpenAI-compatible base URL (`http` or `https`), as written, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// The model name sent upstream (default: the route's name).
    pub model: String,
    /// The environment variable holding this deployment's API key, if it needs one.
    pub api_key_env: Option<String>,
    /// This deployment's per-try timeout (the route's unless overridden).
    pub per_try_timeout: Duration,
    /// The APIs this deployment speaks (OpenAI's three unless the config names them: [`ApiSet::OPENAI`]): a call of
    /// an API goes only to the deployments that speak it.
    pub apis: ApiSet,
    /// The account's limits (requests and tokens per minute), counted across every instance sharing the store;
    /// none by default.
    pub limits: Option<Limits>,
}

/// A deployment's account limits (`models.deployments.limits`; DESIGN.md "Many instances"): decided before each
/// attempt, on the shared store's clock when there is one, so N instances send no more than the account allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Requests per minute, every attempt counted (a retry is a request to the provider).
    pub requests_per_minute: Option<u32>,
    /// Tokens per minute, input and output: estimated before the call, corrected by the usage its answer reports.
    pub tokens_per_minute: Option<u32>,
    /// How much of a limit may go at once after a quiet spell: this long's worth (default 1 s).
    pub burst: Duration,
    /// What an instance does while the shared store cannot be reached.
    pub on_store_loss: OnStoreLoss,
}

/// What the limits do while the shared store cannot be reached (`limits.on_store_loss`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnStoreLoss {
    /// Each instance admits its share: the limit divided by the instances seen alive lately (the default).
    #[default]
    Share,
    /// Refuse every call of the deployment (`overloaded`) until the store is back.
    Refuse,
}

impl OnStoreLoss {
    /// The name used in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            OnStoreLoss::Share => "share",
            OnStoreLoss::Refuse => "refuse",
        }
    }
}

impl fmt::Display for OnStoreLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OnStoreLoss {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [OnStoreLoss::Share, OnStoreLoss::Refuse]
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| UnknownName {
                value: s.to_owned(),
                expected: &["share", "refuse"],
            })
    }
}

impl Deployment {
    /// The deployment at `base_url` serving `model`, with no API key, the default route's per-try timeout
    /// ([`DEFAULT_MODEL_PER_TRY_TIMEOUT`]) and OpenAI's APIs ([`ApiSet::OPENAI`]).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Deployment {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            per_try_timeout: DEFAULT_MODEL_PER_TRY_TIMEOUT,
            apis: ApiSet::OPENAI,
            limits: None,
        }
    }
}

/// What to do when a prompt is over the model's context length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContextConfig {
    /// Default `error`.
    pub on_overflow: OnOverflow,
}

/// The context-overflow policy of a model route (opt-in; DESIGN.md "Fallback and context").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnOverflow {
    /// Answer the provider's context-length error (the default).
    #[default]
    Error,
    /// Move on to the next deployment (one with a larger context); needs a second deployment.
    Fallback,
    /// Drop whole older turns until the prompt fits.
    Truncate,
}

impl OnOverflow {
    /// The name used in configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            OnOverflow::Error => "error",
            OnOverflow::Fallback => "fallback",
            OnOverflow::Truncate => "truncate",
        }
    }
}

impl fmt::Display for OnOverflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OnOverflow {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [OnOverflow::Error, OnOverflow::Fallback, OnOverflow::Truncate]
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| UnknownName {
                value: s.to_owned(),
                expected: &["error", "fallback", "truncate"],
            })
    }
}

/// A tool route: `POST /v1/tools/{name}` forwarded to its upstream under its policy.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolConfig {
    /// The tool's name (unique; 1-64 of `A-Z a-z 0-9 _ -`, OpenAI's function-name rule).
    pub name: String,
    /// What the tool does, for the model (served over MCP; default none: a sentence naming the tool is served).
    pub description: Option<String>,
    /// The JSON Schema of the tool's arguments, an object schema (default none: `{"type": "object"}` is served).
    pub input_schema: Option<serde_json::Value>,
    /// Where calls go.
    pub upstream: Upstream,
    /// Whether a call changes something (then it needs an idempotency key; default false).
    pub side_effects: bool,
    /// What the upstream does with an `Idempotency-Key` (default `none`; only for side-effecting tools).
    pub upstream_idempotency: UpstreamIdempotency,
    /// Admission class (default `critical`).
    pub priority: Priority,
    /// Longest single attempt (default 10 s).
    pub per_try_timeout: Duration,
    /// Retries.
    pub retry: RetryConfig,
    /// The tool's retry budget.
    pub budget: BudgetConfig,
    /// The tool's circuit breaker's settings, as ballast-core built them.
    pub breaker: BreakerConfig,
    /// The tool's adaptive throttle's settings (`None`: off).
    pub throttle: Option<ThrottleConfig>,
    /// Calls in flight at most (default 64; at least 1).
    pub concurrency: u32,
    /// Calls waiting for a slot at most (default 256; 0 = shed as soon as every slot is busy).
    pub queue: u32,
    /// What answers when the breaker is open (none by default).
    pub fallback: Option<ToolFallback>,
    /// How a call that cannot run now is deferred (`defer`; `[deferred]`'s settings, not accepted, by default).
    pub defer: ToolDefer,
}

impl ToolConfig {
    /// The tool `name` calling `upstream`, every other setting at its default: what validation gives a
    /// `[[tools]]` entry that writes only `name` and `upstream`.
    ///
    /// ```
    /// use ballast_config::{Config, HttpMethod, ToolConfig, Upstream};
    ///
    /// let upstream = Upstream::new(HttpMethod::Post, "http://127.0.0.1:9000/tools/lookup_order");
    /// let config = Config::from_toml_str(r#"
    ///     version = 1
    ///     [[tools]]
    ///     name = "lookup_order"
    ///     upstream = { method = "POST", url = "http://127.0.0.1:9000/tools/lookup_order" }
    /// "#).unwrap();
    /// assert_eq!(config.tools[0], ToolConfig::new("lookup_order", upstream));
    /// ```
    pub fn new(name: impl Into<String>, upstream: Upstream) -> Self {
        ToolConfig {
            name: name.into(),
            description: None,
            input_schema: None,
            upstream,
            side_effects: false,
            upstream_idempotency: UpstreamIdempotency::None,
            priority: Priority::Critical,
            per_try_timeout: DEFAULT_TOOL_PER_TRY_TIMEOUT,
            retry: RetryConfig::default(),
            budget: BudgetConfig::default(),
            breaker: BreakerConfig::default(),
            throttle: Some(ThrottleConfig::default()),
            concurrency: DEFAULT_TOOL_CONCURRENCY,
            queue: DEFAULT_TOOL_QUEUE,
            fallback: None,
            defer: ToolDefer::default(),
        }
    }
}

/// A tool's upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// The HTTP method.
    pub method: HttpMethod,
    /// The URL (`http` or `https`), as written.
    pub url: String,
    /// Headers sent on every attempt, in file order; names lower case, unique, none that Ballast sets itself.
    pub headers: Vec<UpstreamHeader>,
}

impl Upstream {
    /// `method url`, with no headers of its own.
    ///
    /// ```
    /// use ballast_config::{HttpMethod, Upstream};
    ///
    /// let upstream = Upstream::new(HttpMethod::Get, "http://127.0.0.1:9000/tools/lookup_order");
    /// assert!(upstream.headers.is_empty());
    /// ```
    pub fn new(method: HttpMethod, url: impl Into<String>) -> Self {
        Upstream {
            method,
            url: url.into(),
            headers: Vec::new(),
        }
    }
}

/// A header a tool's upstream gets on every attempt: its credentials (from the environment) or a fixed setting
/// (`x-api-version`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamHeader {
    /// The header's name, lower case.
    pub name: String,
    /// Where its value comes from.
    pub value: HeaderValueSource,
}

/// Where an upstream header's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderValueSource {
    /// Written in the config (never a credential's header: those must come from the environment).
    Literal(String),
    /// `{ env = "VAR", prefix = "Bearer " }`: `prefix` then the variable's value, read when the client is built.
    Env {
        /// The variable's name.
        env: String,
        /// Text sent before the value (may be empty).
        prefix: String,
    },
}

/// The methods a tool upstream may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HttpMethod {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
    /// `PUT`.
    Put,
    /// `PATCH`.
    Patch,
    /// `DELETE`.
    Delete,
}

impl HttpMethod {
    /// Every method, in the order error messages list them.
    pub const ALL: [HttpMethod; 5] = [
        HttpMethod::Get,
        HttpMethod::Post,
        HttpMethod::Put,
        HttpMethod::Patch,
        HttpMethod::Delete,
    ];

    /// The method's name, upper case as on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpMethod::Get => "GET",
            HttpMethod::Post => "POST",
            HttpMethod::Put => "PUT",
            HttpMethod::Patch => "PATCH",
            HttpMethod::Delete => "DELETE",
        }
    }
}

impl fmt::Display for HttpMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HttpMethod {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HttpMethod::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownName {
                value: s.to_owned(),
                expected: &["GET", "POST", "PUT", "PATCH", "DELETE"],
            })
    }
}

/// A tool's fallback when its breaker is open.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolFallback {
    /// `fallback_tool`: call this other configured tool instead.
    Tool(String),
    /// `fallback_response`: answer this JSON body (200) without calling anything.
    Response(serde_json::Value),
}

/// A `retry` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryConfig {
    /// Attempts per call, the first included (default [`DEFAULT_MAX_ATTEMPTS`]; 1 = never retry). Validation
    /// checks it with [`RetryPolicy::new`](ballast_core::RetryPolicy::new).
    pub max_attempts: u32,
    /// The backoff between attempts (default [`Backoff::default`]: full jitter, base 100 ms, cap 2 s).
    pub backoff: Backoff,
}

impl Default for RetryConfig {
    /// ballast-core's defaults: 3 attempts, full jitter from 100 ms up to 2 s.
    fn default() -> Self {
        RetryConfig {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::default(),
        }
    }
}
