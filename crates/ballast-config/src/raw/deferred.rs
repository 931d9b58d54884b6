//! `[deferred]` and a tool's `defer` table, as written.

use serde::{Deserialize, Serialize};

use super::HumanValue;

/// `[deferred]`: how deferred operations are worked, over every tool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDeferred {
    /// Deferred attempts in flight at once on one instance, over every tool (`4`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<i64>,
    /// How long a deferred operation may wait and be retried, when its tool does not say (`"15m"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<HumanValue>,
    /// Attempts per operation, the first included, when its tool does not say (`5`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<i64>,
    /// The first window of the backoff between an operation's attempts (`"1s"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<HumanValue>,
    /// The longest window of that backoff (`"1m"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap: Option<HumanValue>,
    /// Where an operation's end is posted (none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// Variable holding the key the callbacks are signed with (required with `callback_url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_secret_env: Option<String>,
}

/// A tool's `defer` table: written at all, its callers accept deferral without asking.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawToolDefer {
    /// How long one of its deferred operations may wait and be retried (`deferred.ttl`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<HumanValue>,
    /// Attempts per operation, the first included (`deferred.max_attempts`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<i64>,
    /// Its deferred attempts in flight at once on one instance (`2`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<i64>,
}
