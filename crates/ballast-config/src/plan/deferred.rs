//! How deferred operations would run: `[deferred]`, and each side-effecting tool's deferral.

use std::time::Duration;

use serde::Serialize;

use super::millis;
use crate::Config;

/// Deferred operations under a config: a side-effecting call that cannot run now and whose caller can wait is
/// answered 202 and worked in the background. Shown so that who gets deferred, for how long and how many at once
/// is read in one place rather than worked out from `[deferred]` and each tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeferredPlan {
    /// Deferred attempts in flight at once on one instance, over every tool (`deferred.concurrency`).
    pub concurrency: u32,
    /// The first window of the backoff between an operation's attempts (`deferred.base`).
    #[serde(rename = "base_ms", serialize_with = "millis")]
    pub base: Duration,
    /// Its longest window (`deferred.cap`).
    #[serde(rename = "cap_ms", serialize_with = "millis")]
    pub cap: Duration,
    /// Where the end of each operation is posted (`deferred.callback_url`), if anywhere. Never the secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// One per side-effecting `[[tools]]` entry, in file order (only those have a key to keep an operation by).
    pub tools: Vec<DeferredTool>,
}

/// How one side-effecting tool's calls are deferred.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeferredTool {
    /// The tool's name.
    pub name: String,
    /// The config path of the entry (`tools[2]`).
    pub path: String,
    /// Whether its calls are deferred whenever they cannot run now (the tool writes `defer`), rather than only
    /// when the caller sends `Prefer: respond-async`.
    pub accepted: bool,
    /// Attempts per deferred operation, the first included.
    pub max_attempts: u32,
    /// How long a deferred operation may wait and be retried.
    #[serde(rename = "ttl_ms", serialize_with = "millis")]
    pub ttl: Duration,
    /// Its deferred attempts in flight at once on one instance.
    pub concurrency: u32,
}

impl DeferredPlan {
    /// The deferral of `config`'s tools; `None` when no tool has side effects (nothing can be deferred).
    pub(super) fn of(config: &Config) -> Option<DeferredPlan> {
        let tools: Vec<DeferredTool> = (config.tools.iter().enumerate())
            .filter(|(_, tool)| tool.side_effects)
            .map(|(i, tool)| DeferredTool {
                name: tool.name.clone(),
                path: format!("tools[{i}]"),
                accepted: tool.defer.accepted,
                max_attempts: tool.defer.max_attempts,
                ttl: tool.defer.ttl,
                concurrency: tool.defer.concurrency,
            })
            .collect();
        (!tools.is_empty()).then(|| DeferredPlan {
            concurrency: config.deferred.concurrency,
            base: config.deferred.base,
            cap: config.deferred.cap,
            callback_url: config.deferred.callback.as_ref().map(|c| c.url.clone()),
            tools,
        })
    }
}
