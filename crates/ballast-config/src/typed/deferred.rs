//! Deferred operations: a side-effecting tool call that cannot be served now (shed, throttled, breaker open,
//! retries spent) and whose caller can wait is accepted with 202, kept in the store with its idempotency record,
//! and worked in the background until it succeeds, fails, runs out of attempts or its ttl ends.
//!
//! `[deferred]` holds the gateway-wide settings ([`DeferredConfig`]); a tool's `defer` table its own
//! ([`ToolDefer`]), filled from `[deferred]` where the tool does not say.

use std::time::Duration;

/// Default `deferred.concurrency`: 4 deferred attempts in flight at once on one instance, over every tool.
/// Deferred work is work a caller agreed to wait for: it must never crowd out live traffic, so it gets a few
/// slots, and each attempt still goes through its tool's admission at the lowest class.
pub const DEFAULT_DEFER_CONCURRENCY: u32 = 4;

/// Default `deferred.ttl`: 15 minutes for a deferred operation to wait and be retried. Long enough to outlast a
/// breaker's open spells and a provider's rate-limit windows (a minute each) many times over; short enough that
/// an operation still answers the intent of the agent that asked for it (a refund done an hour late is a
/// surprise, not a recovery).
pub const DEFAULT_DEFER_TTL: Duration = Duration::from_secs(15 * 60);

/// Default `deferred.max_attempts`: 5 attempts per deferred operation, the first included. Spread over the ttl,
/// five tries see the upstream across several of its recoveries without hammering one that stays down.
pub const DEFAULT_DEFER_MAX_ATTEMPTS: u32 = 5;

/// Default `deferred.base`: 1 s, the first window of the jittered backoff between a deferred operation's
/// attempts. A deferred operation waits because its upstream could not serve it: a second later is the soonest
/// a new try is worth making, and the windows double from there.
pub const DEFAULT_DEFER_BASE: Duration = Duration::from_secs(1);

/// Default `deferred.cap`: 1 minute, the longest window of that backoff — a rate-limit window, or several
/// breaker open spells — so an upstream that recovers is seen within a minute, and a backlog is drained.
pub const DEFAULT_DEFER_CAP: Duration = Duration::from_secs(60);

/// Default `tools.defer.concurrency`: 2 deferred attempts of one tool at once on one instance, so one tool's
/// backlog cannot take every slot of `deferred.concurrency` from the others.
pub const DEFAULT_TOOL_DEFER_CONCURRENCY: u32 = 2;

/// The least `ttl` a deferred operation may have (1 s): less leaves no time for a second attempt.
pub(crate) const MIN_DEFER_TTL: Duration = Duration::from_secs(1);
/// The most `ttl` a deferred operation may have (7 days): an operation done later than that no longer answers
/// the request that asked for it.
pub(crate) const MAX_DEFER_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most `deferred.concurrency` may be (1024): deferred work is background work, never the bulk of traffic.
pub(crate) const MAX_DEFER_CONCURRENCY: u32 = 1024;
/// The most `max_attempts` a deferred operation may have (100).
pub(crate) const MAX_DEFER_ATTEMPTS: u32 = 100;

/// `[deferred]`: how the gateway works deferred operations, whatever their tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeferredConfig {
    /// Deferred attempts in flight at once on one instance, over every tool (default
    /// [`DEFAULT_DEFER_CONCURRENCY`]; 1 to 1024). Kept low: deferred work must never crowd out live traffic.
    pub concurrency: u32,
    /// How long a deferred operation may wait and be retried when its tool does not say (default
    /// [`DEFAULT_DEFER_TTL`]; 1 s to 7 days). A caller's `ballast-defer-ttl` header may only shorten it.
    pub ttl: Duration,
    /// Attempts per deferred operation, the first included, when its tool does not say (default
    /// [`DEFAULT_DEFER_MAX_ATTEMPTS`]; 1 to 100).
    pub max_attempts: u32,
    /// The first window of the jittered backoff between an operation's attempts (default
    /// [`DEFAULT_DEFER_BASE`]; more than zero, at most `cap`): the n-th wait is drawn from 0 to
    /// `min(cap, base x 2^n)`, n counting the attempts that reached the upstream; a refusal's `Retry-After` is
    /// honoured when it asks for longer.
    pub base: Duration,
    /// The longest window of that backoff (default [`DEFAULT_DEFER_CAP`]).
    pub cap: Duration,
    /// Where the end of each deferred operation is posted, signed (default none: the caller polls).
    pub callback: Option<DeferredCallback>,
}

impl Default for DeferredConfig {
    fn default() -> Self {
        DeferredConfig {
            concurrency: DEFAULT_DEFER_CONCURRENCY,
            ttl: DEFAULT_DEFER_TTL,
            max_attempts: DEFAULT_DEFER_MAX_ATTEMPTS,
            base: DEFAULT_DEFER_BASE,
            cap: DEFAULT_DEFER_CAP,
            callback: None,
        }
    }
}

impl DeferredConfig {
    /// The deferral of a tool that writes no `defer`: its callers must ask for it (`Prefer: respond-async`), with
    /// this table's `ttl` and `max_attempts` and [`DEFAULT_TOOL_DEFER_CONCURRENCY`]. What validation gives every
    /// tool before reading its own `defer`.
    ///
    /// ```
    /// use ballast_config::{Config, DEFAULT_TOOL_DEFER_CONCURRENCY};
    /// use std::time::Duration;
    ///
    /// let config = Config::from_toml_str(r#"
    ///     version = 1
    ///     [deferred]
    ///     ttl = "5m"
    ///     [[tools]]
    ///     name = "refund"
    ///     side_effects = true
    ///     upstream = { url = "http://127.0.0.1:9000/refund" }
    /// "#).unwrap();
    /// let defer = &config.tools[0].defer;
    /// assert_eq!(*defer, config.deferred.tool_default());
    /// assert!(!defer.accepted);
    /// assert_eq!((defer.ttl, defer.concurrency), (Duration::from_secs(300), DEFAULT_TOOL_DEFER_CONCURRENCY));
    /// ```
    pub fn tool_default(&self) -> ToolDefer {
        ToolDefer {
            accepted: false,
            ttl: self.ttl,
            max_attempts: self.max_attempts,
            concurrency: DEFAULT_TOOL_DEFER_CONCURRENCY,
        }
    }
}

/// `deferred.callback_url` and `deferred.callback_secret_env`: where the gateway POSTs an operation's end, and
/// the key it signs the POST with, so the receiver can tell the gateway's callbacks from anyone else's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeferredCallback {
    /// The URL (`http` or `https`, no credentials: the signature authenticates the callback), as written.
    pub url: String,
    /// The environment variable holding the HMAC key (`callback_secret_env`). Only the variable's name is
    /// configuration; the value is a secret, read by the server through [`Env`](crate::Env) and never logged.
    pub secret_env: String,
}

/// A tool's deferral: whether its callers accept it without asking, and how its deferred operations run. Always
/// present on a [`ToolConfig`](crate::ToolConfig), filled from `[deferred]` where the tool's `defer` does not say
/// (or when it writes none); used only for side-effecting tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolDefer {
    /// The tool wrote `defer`: its callers accept deferral without asking (as if each sent `Prefer:
    /// respond-async`). Only a side-effecting tool may: its key is what the operation is kept by.
    pub accepted: bool,
    /// How long one of its deferred operations may wait and be retried (default `deferred.ttl`).
    pub ttl: Duration,
    /// Attempts per deferred operation, the first included (default `deferred.max_attempts`).
    pub max_attempts: u32,
    /// Its deferred attempts in flight at once on one instance (default [`DEFAULT_TOOL_DEFER_CONCURRENCY`]; at
    /// least 1), within `deferred.concurrency` over every tool.
    pub concurrency: u32,
}

impl Default for ToolDefer {
    /// [`DeferredConfig::tool_default`] of the default `[deferred]`: not accepted, 15 min, 5 attempts, 2 at a time.
    fn default() -> Self {
        DeferredConfig::default().tool_default()
    }
}
