//! Phase two's result: the typed configuration. Plain data — durations, numbers, ballast-core's enums and
//! [`Backoff`](ballast_core::Backoff) — that has passed every rule, so a config that loads is a config that works.
//!
//! Every default lives here, in a `Default` impl or a `DEFAULT_*` constant, and nowhere else; validation fills
//! omitted keys from these, and docs/config.md lists the same values (a test keeps them in step). A default
//! that belongs to a ballast-core policy (the breaker, the budgets, the backoff, `max_attempts`, `reserve`,
//! `min_attempt`, `max_retry_after`, the run's retry allowance) is ballast-core's constant, not a copy.

mod api;
mod budget;
mod deferred;
mod mcp;
mod route;
mod telemetry;

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use ballast_core::{
    DEFAULT_MAX_RETRY_AFTER, DEFAULT_MIN_ATTEMPT, DEFAULT_RESERVE, DEFAULT_RUN_ALLOWANCE,
    DEFAULT_RUN_ALLOWANCE_SHARE,
};

pub use api::{Api, ApiSet};
pub use budget::BudgetConfig;
pub use deferred::{
    DEFAULT_DEFER_BASE, DEFAULT_DEFER_CAP, DEFAULT_DEFER_CONCURRENCY, DEFAULT_DEFER_MAX_ATTEMPTS,
    DEFAULT_DEFER_TTL, DEFAULT_TOOL_DEFER_CONCURRENCY, DeferredCallback, DeferredConfig, ToolDefer,
};
pub(crate) use deferred::{MAX_DEFER_ATTEMPTS, MAX_DEFER_CONCURRENCY, MAX_DEFER_TTL, MIN_DEFER_TTL};
pub use mcp::{McpServerConfig, McpToolOverride};
pub use route::{
    ContextConfig, DEFAULT_MODEL_CONCURRENCY, DEFAULT_MODEL_PER_TRY_TIMEOUT, DEFAULT_MODEL_QUEUE,
    DEFAULT_PRIMARY_SHARE, DEFAULT_STREAM_IDLE_TIMEOUT, DEFAULT_TOOL_CONCURRENCY,
    DEFAULT_TOOL_PER_TRY_TIMEOUT, DEFAULT_TOOL_QUEUE, Deployment, HeaderValueSource, HttpMethod, Limits,
    ModelRoute, OnOverflow, OnStoreLoss, RetryConfig, ToolConfig, ToolFallback, Upstream, UpstreamHeader,
};
pub use telemetry::{DEFAULT_SAMPLING, DEFAULT_SERVICE_NAME, OtlpProtocol, TelemetryConfig};

/// A validated Ballast configuration.
///
/// ```
/// use ballast_config::Config;
/// use std::time::Duration;
///
/// let config = Config::from_toml_str(r#"
///     version = 1
///     [[tools]]
///     name = "lookup_order"
///     upstream = { method = "GET", url = "http://127.0.0.1:9000/tools/lookup_order" }
///     per_try_timeout = "1.2s"
/// "#).unwrap();
/// assert_eq!(config.tools[0].per_try_timeout, Duration::from_millis(1200));
/// assert_eq!(config.server.max_timeout, Duration::from_secs(300)); // a default
///
/// let err = Config::from_toml_str("version = 1\n[[tools]]\nname = \"x\"\nper_try_timeout = \"12x\"\n")
///     .unwrap_err();
/// assert!(err.to_string().contains(r#"tools[0].per_try_timeout: "12x" is not a duration"#));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    /// `[server]`: the gateway's listener, deadlines and limits.
    pub server: ServerConfig,
    /// `[[principals]]`: who may call the gateway (names unique).
    pub principals: Vec<Principal>,
    /// `[store]`: where idempotency records and run state live.
    pub store: StoreConfig,
    /// `[run]`: state shared by the calls of one agent run.
    pub run: RunConfig,
    /// `[deferred]`: how side-effecting calls that cannot run now, and whose callers can wait, are worked in the
    /// background.
    pub deferred: DeferredConfig,
    /// `[[models]]`: model routes, in file order (names unique).
    pub models: Vec<ModelRoute>,
    /// `[[tools]]`: tool routes, in file order (names unique; fallbacks name existing tools, no cycles).
    pub tools: Vec<ToolConfig>,
    /// `[[mcp_servers]]`: upstream MCP servers whose tools are served at `/mcp`, in file order (names unique).
    pub mcp_servers: Vec<McpServerConfig>,
    /// `[telemetry]`: where the gateway's traces go (OTLP); `None`, the default: no traces.
    pub telemetry: Option<TelemetryConfig>,
}

/// `[server]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Address the gateway binds (default `127.0.0.1:8080`). Off loopback only with `[[principals]]`.
    pub listen: SocketAddr,
    /// When set, `/metrics` and `/status` are served here only, without auth, and not on `listen` (default
    /// none; never overlapping `listen`: not its port on its address or on an unspecified one).
    pub admin_listen: Option<SocketAddr>,
    /// The request deadline when the caller sends none (default 30 s; at most `max_timeout`, more than
    /// `reserve + min_attempt`).
    pub default_timeout: Duration,
    /// Cap on any deadline a caller supplies (default 300 s).
    pub max_timeout: Duration,
    /// Time kept back to answer before the caller's deadline (default 50 ms).
    pub reserve: Duration,
    /// The least time worth starting an attempt or sleep with (default 50 ms; more than zero).
    pub min_attempt: Duration,
    /// Largest request body accepted, in bytes (default 8 MiB; more than zero).
    pub body_limit: u64,
    /// How long shutdown waits for requests in flight (default 10 s).
    pub grace: Duration,
    /// On shutdown, how long `/readyz` fails before the gateway stops accepting, so load balancers stop sending
    /// first (default [`DEFAULT_DRAIN_DELAY`]; at most `grace`).
    pub drain_delay: Duration,
    /// Longest upstream `Retry-After` that is waited for; longer stops the call (default 60 s).
    pub max_retry_after: Duration,
    /// How long a request that repeats one just answered with a final failure is answered again from that
    /// failure, nothing sent (default [`DEFAULT_REPEAT_WINDOW`]; zero: never).
    pub repeat_window: Duration,
    /// Time a connection has to send a request's headers, counted from the request's first byte (or, for a
    /// new connection, from its accept) (default [`DEFAULT_HEADER_TIMEOUT`]; more than zero).
    pub header_timeout: Duration,
    /// Time a request has to send its whole body, counted from its headers; the request's deadline bounds it
    /// too (default [`DEFAULT_BODY_TIMEOUT`]; more than zero).
    pub body_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request (default [`DEFAULT_IDLE_TIMEOUT`]; more
    /// than zero).
    pub idle_timeout: Duration,
    /// How long an answer may make no progress — its caller reading none of it — before the connection is
    /// dropped (default [`DEFAULT_SEND_TIMEOUT`]; more than zero).
    pub send_timeout: Duration,
    /// Open connections at most on `listen`; lowered at start to fit the process's file limit (default
    /// [`DEFAULT_MAX_CONNECTIONS`]; at least 1).
    pub max_connections: u32,
}

/// Default `server.repeat_window`: 10 s. Clients that retry on status alone come back within it — the Vercel AI
/// SDK after 2 s and 4 s, the OpenAI SDKs within 0.5-8 s, a hand-written loop of 1, 2 and 4 s — so their retries
/// of a final failure are answered from it; a later repeat is served again, in case the upstream recovered.
pub const DEFAULT_REPEAT_WINDOW: Duration = Duration::from_secs(10);

/// Default `server.header_timeout`: 10 s. An SDK sends its headers in one packet; 10 s tolerates a congested
/// link and frees a connection that trickles its headers (slowloris) six times sooner than nginx's 60 s.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Default `server.body_timeout`: 10 s for the whole body (the request's deadline, when shorter, bounds it
/// first). The largest body accepted, 8 MiB, takes under 7 s at 10 Mbit/s; a tool call's arguments take
/// milliseconds.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Default `server.idle_timeout`: 75 s, nginx's `keepalive_timeout`. Longer than the idle timeout of the load
/// balancers commonly in front (AWS ALB: 60 s), so that they close an idle connection first: one the gateway
/// closed while a balancer sent on it would be a 502 at the balancer.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(75);

/// Default `server.send_timeout`: 60 s, nginx's `send_timeout`. A caller that reads none of its answer for a
/// minute is not reading; one that is slow still reads something in that time.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// Default `server.max_connections`: 4096. A crowd of agents each holding a few kept-alive connections fits;
/// when it is full, the connection idle the longest is closed to admit a new one, so idle sockets never lock
/// callers out. Lowered at start to what the file limit (`ulimit -n`) leaves after the upstreams, the store and
/// the admin listener.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 4096;

/// Default `server.body_limit`: 8 MiB, the largest request body accepted and answer read.
pub const DEFAULT_BODY_LIMIT: u64 = 8 << 20;

/// Default `server.drain_delay`: 1 s of failing `/readyz` before the listener closes. Enough for a load balancer
/// that checks every second, or an endpoint removal that starts with the SIGTERM (Kubernetes), to stop sending;
/// well inside the default `grace`. A balancer that checks less often needs more (docs/config.md).
pub const DEFAULT_DRAIN_DELAY: Duration = Duration::from_secs(1);

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 8080)),
            admin_listen: None,
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(300),
            reserve: DEFAULT_RESERVE,
            min_attempt: DEFAULT_MIN_ATTEMPT,
            body_limit: DEFAULT_BODY_LIMIT,
            grace: Duration::from_secs(10),
            drain_delay: DEFAULT_DRAIN_DELAY,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            repeat_window: DEFAULT_REPEAT_WINDOW,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            send_timeout: DEFAULT_SEND_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// A caller of the gateway: a name (the scope of its idempotency records and runs) and where its key comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// The principal's name (1-64 of `A-Z a-z 0-9 _ -`). Records are scoped by it, so a key rotation keeps
    /// replays.
    pub name: String,
    /// The environment variable holding its key or the key's hash.
    pub key: PrincipalKey,
    /// Whether it may read `/metrics` and `/status` on `listen` (default false). With any admin principal and
    /// no `admin_listen`, only admin principals may.
    pub admin: bool,
}

/// Where a principal's API key comes from. Only the variable's name is configuration; the value is a secret,
/// read by the server through [`Env`](crate::Env) and never logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrincipalKey {
    /// `key_env`: the variable holds the key itself.
    Plain {
        /// The variable's name.
        env: String,
    },
    /// `key_hash_env`: the variable holds the lowercase hex SHA-256 of the key (64 hex digits).
    Sha256 {
        /// The variable's name.
        env: String,
    },
}

impl PrincipalKey {
    /// The environment variable's name.
    pub fn env(&self) -> &str {
        match self {
            PrincipalKey::Plain { env } | PrincipalKey::Sha256 { env } => env,
        }
    }
}

/// `[store]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// The store's URL, or the variable that holds it (when it carries a password).
    pub location: StoreLocation,
    /// How long a completed idempotency record is kept and replayed (default 24 h; more than zero).
    pub retention: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            location: StoreLocation::Url {
                url: DEFAULT_STORE_URL.to_owned(),
                kind: StoreKind::Sqlite,
            },
            retention: Duration::from_secs(24 * 3600),
        }
    }
}

/// The default store: a SQLite file in the working directory.
pub const DEFAULT_STORE_URL: &str = "sqlite://ballast.db";

/// Where the store is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreLocation {
    /// `url`: written in the config (it carries no password).
    Url {
        /// The URL as written.
        url: String,
        /// The backend its scheme names.
        kind: StoreKind,
    },
    /// `url_env`: the URL is in this environment variable (it may carry a password).
    Env {
        /// The variable's name.
        env: String,
    },
}

/// A store backend, from the URL's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// `sqlite://PATH` or `sqlite::memory:` — the embedded default.
    Sqlite,
    /// `redis://` (TLS, `rediss://`, is not built yet).
    Redis,
    /// `postgres://` or `postgresql://`.
    Postgres,
}

impl StoreKind {
    /// The accepted URL prefixes, each with its backend.
    pub const PREFIXES: [(&'static str, StoreKind); 5] = [
        ("sqlite::memory:", StoreKind::Sqlite),
        ("sqlite://", StoreKind::Sqlite),
        ("redis://", StoreKind::Redis),
        ("postgres://", StoreKind::Postgres),
        ("postgresql://", StoreKind::Postgres),
    ];

    /// The backend a URL names, if its prefix is one of [`StoreKind::PREFIXES`] (and, except for
    /// `sqlite::memory:`, something follows the prefix).
    pub fn of_url(url: &str) -> Option<StoreKind> {
        StoreKind::PREFIXES.iter().find_map(|(prefix, kind)| {
            let rest = url.strip_prefix(prefix)?;
            let complete = if *prefix == "sqlite::memory:" {
                rest.is_empty()
            } else {
                !rest.is_empty()
            };
            complete.then_some(*kind)
        })
    }

    /// `sqlite`, `redis` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Sqlite => "sqlite",
            StoreKind::Redis => "redis",
            StoreKind::Postgres => "postgres",
        }
    }
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[run]`: the calls of one agent request, grouped by `ballast-run-id`.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// Retries allowed across all the calls of one run, the base (default 3; with `retry_allowance_per_call`
    /// 0 too, a run's calls are never retried).
    pub retry_allowance: u32,
    /// Retries added to the run's allowance per call it makes (default 0.5): a long run is not starved.
    pub retry_allowance_per_call: f64,
    /// How long a run's state (deadline, allowance) is kept after its last call (default 10 min; at least
    /// `server.max_timeout`, so a run cannot be forgotten while its deadline still holds).
    pub ttl: Duration,
    /// Runs remembered at most, all principals together (default [`DEFAULT_MAX_RUNS`]; at least 1). Past it
    /// the runs used least recently are forgotten.
    pub max_runs: u32,
    /// Runs remembered at most for one principal (default [`DEFAULT_MAX_RUNS_PER_PRINCIPAL`]; at least 1, at
    /// most `max_runs`): one principal's flood of run ids evicts its own oldest runs, not another's.
    pub max_runs_per_principal: u32,
}

/// Default `run.max_runs`: 50 000 runs, a few tens of MiB at most. Runs are forgotten least recently used
/// first, and a run in use is used recently: at 100 agent requests a second the runs forgotten are those idle
/// for over eight minutes.
pub const DEFAULT_MAX_RUNS: u32 = 50_000;

/// Default `run.max_runs_per_principal`: 10 000: a principal whose calls name a new run id each time (or a
/// hostile one) forgets its own oldest runs, never another principal's.
pub const DEFAULT_MAX_RUNS_PER_PRINCIPAL: u32 = 10_000;

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            retry_allowance: DEFAULT_RUN_ALLOWANCE,
            retry_allowance_per_call: DEFAULT_RUN_ALLOWANCE_SHARE,
            ttl: Duration::from_secs(600),
            max_runs: DEFAULT_MAX_RUNS,
            max_runs_per_principal: DEFAULT_MAX_RUNS_PER_PRINCIPAL,
        }
    }
}
