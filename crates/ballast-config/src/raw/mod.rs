//! Phase one: the file as written. Serde structs that mirror the TOML one to one.
//!
//! Every table rejects keys it does not know (`deny_unknown_fields`), so a typo is an error, not a silently
//! ignored setting. Everything else is `Option` or a default: no value is parsed, ranged or cross-checked here,
//! so that phase two ([`validate`](crate::validate)) can report every problem at once, each with its path.
//! What each key means and its default: docs/config.md.

mod value;

use serde::{Deserialize, Serialize};

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
    /// `[[models]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<RawModel>,
    /// `[[tools]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<RawTool>,
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
            models: Vec::new(),
            tools: Vec::new(),
        }
    }
}

/// `[server]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawServer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_timeout: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_timeout: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_attempt: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_limit: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retry_after: Option<HumanValue>,
}

/// One `[[principals]]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawPrincipal {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_env: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_hash_env: Option<String>,
}

/// `[store]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawStore {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url_env: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention: Option<HumanValue>,
}

/// `[run]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawRun {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_allowance: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<HumanValue>,
}

/// One `[[models]]` entry: a model route.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawModel {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<RawDeployment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RawRetry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<RawBudget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<RawBreaker>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<RawContext>,
}

/// One entry of a model route's `deployments`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawDeployment {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<HumanValue>,
}

/// A `retry` table (models and tools).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawRetry {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
}

/// A `budget` table (models and tools), tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub enum RawBudget {
    /// `kind = "ratio"`.
    Ratio {
        #[serde(skip_serializing_if = "Option::is_none")]
        ratio: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        min_per_sec: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        window: Option<HumanValue>,
    },
    /// `kind = "token_bucket"`.
    TokenBucket {
        #[serde(skip_serializing_if = "Option::is_none")]
        capacity: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        refill_per_sec: Option<f64>,
    },
}

/// A `breaker` table (models and tools).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawBreaker {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_failures: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_calls: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow_call: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_for: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_jitter: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_open_probes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<i64>,
}

/// A model route's `context` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawContext {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_overflow: Option<String>,
}

/// One `[[tools]]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawTool {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream: Option<RawUpstream>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_idempotency: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<HumanValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RawRetry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<RawBudget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<RawBreaker>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_response: Option<toml::Value>,
}

/// A tool's `upstream` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // Each key is documented in docs/config.md.
pub struct RawUpstream {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}
