//! `[[mcp_servers]]` as written: an upstream MCP server, and its tools' overrides.

use serde::{Deserialize, Serialize};

use super::{HumanValue, RawBreaker, RawBudget, RawHeaders, RawRetry, RawThrottle};

/// One `[[mcp_servers]]` entry: an upstream MCP server whose tools the gateway serves.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMcpServer {
    /// The server's name (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its Streamable HTTP endpoint (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Headers sent on every request, name -> value (none).
    #[serde(default, skip_serializing_if = "RawHeaders::is_empty")]
    pub headers: RawHeaders,
    /// Put before each of its tools' names (`""`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Whether its `readOnlyHint` annotations are believed (`false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_annotations: Option<bool>,
    /// Whether its tools change something unless told otherwise (`true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<bool>,
    /// What the server does with the operation's key (`"none"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_idempotency: Option<String>,
    /// Admission class of its tools (`"critical"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// Longest attempt (`"10s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<HumanValue>,
    /// Retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RawRetry>,
    /// Retry budget, shared by its tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<RawBudget>,
    /// Circuit breaker, shared by its tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<RawBreaker>,
    /// Adaptive throttle, shared by its tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttle: Option<RawThrottle>,
    /// Calls in flight at most, per tool (`64`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<i64>,
    /// Calls waiting at most, per tool (`256`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<i64>,
    /// Per-tool overrides, by the server's own tool name (none).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tools: std::collections::BTreeMap<String, RawMcpTool>,
}

/// A `[mcp_servers.tools.NAME]` table: one upstream MCP tool's overrides.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMcpTool {
    /// Whether it changes something (the server's `side_effects`, or its trusted annotation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<bool>,
    /// Admission class (the server's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// Longest attempt (the server's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<HumanValue>,
    /// What it does, for the model (the server's description).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Not served (`false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<bool>,
}
