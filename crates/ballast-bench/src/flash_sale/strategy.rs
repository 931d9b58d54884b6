//! The trait every client strategy implements, what a conversation comes to, and how a strategy's agents call
//! their tools ([`ToolApi`]).
//!
//! A strategy builds its agents for one run against one upstream; each agent runs one conversation. The HTTP
//! strategies (Ballast's gateway, any other gateway) implement the same trait as the in-process ones: the runner
//! and the report know nothing of how a strategy calls the upstream. Building the agents is async because an HTTP
//! strategy may start a process first (`ballast serve`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;

use super::scenario::Conversation;

/// A way of calling the model and the tools.
pub trait Strategy: Send + Sync {
    /// Its name in reports: `naive`, `ballast`, `gateway`, `against`.
    fn name(&self) -> &str;

    /// The agents of one run against the chaos upstream at `base_url` (`http://127.0.0.1:PORT`), whose clock
    /// runs `time_scale` times real time (its own timeouts and backoffs scale alike). Whatever they started is
    /// stopped when they are dropped.
    fn agents<'a>(
        &'a self,
        base_url: &'a str,
        time_scale: f64,
    ) -> BoxFuture<'a, Result<Box<dyn Agents>, String>>;
}

/// One run's agents: they share whatever the strategy shares between agents (clients, breakers, budgets).
pub trait Agents: Send + Sync {
    /// Runs one conversation to its end.
    fn converse<'a>(&'a self, conversation: &'a Conversation) -> BoxFuture<'a, Outcome>;

    /// The circuit breakers' changes since the last call, for strategies that have breakers.
    fn breaker_changes(&self) -> Vec<BreakerChange> {
        Vec::new()
    }

    /// Attempts the strategy's adaptive throttles refused so far (nothing sent), for strategies that have them.
    fn throttled(&self) -> Option<u64> {
        None
    }

    /// Takes a last look at what [`Agents::breaker_changes`] and [`Agents::throttled`] report, once every
    /// conversation has ended (a strategy that reads them from another process reads them again).
    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// What a conversation came to, as the agent saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Outcome {
    /// The action went through and the model gave its final answer.
    pub succeeded: bool,
    /// Why not, as a stable code: Ballast's error code (`deadline_exceeded`, `outcome_unknown`, ...), or the
    /// naive client's kind of failure (`timeout`, `connect_error`, `status_503`, ...).
    pub failure: Option<String>,
    /// The call that failed: `model`, `lookup_order`, `create_refund`, `process_payment`.
    pub failed_call: Option<String>,
    /// The admission class of a call shed under load (`sheddable`, `critical`, ...).
    pub shed_class: Option<String>,
    /// Logical calls made (model turns and tool calls, however many attempts each took).
    pub calls: u32,
}

impl Outcome {
    /// A conversation that went through after `calls` calls.
    pub fn success(calls: u32) -> Outcome {
        Outcome {
            succeeded: true,
            calls,
            ..Outcome::default()
        }
    }

    /// A conversation whose call `call` (the `calls`-th) failed with `code`.
    pub fn failed(calls: u32, call: &str, code: impl Into<String>) -> Outcome {
        Outcome {
            failure: Some(code.into()),
            failed_call: Some(call.to_owned()),
            calls,
            ..Outcome::default()
        }
    }
}

/// One change of a circuit breaker's state, with its reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BreakerChange {
    /// The breaker: the tool's name, or the model route and deployment.
    pub breaker: String,
    /// `closed -> open`, ...
    pub change: String,
    /// Why (`5 consecutive failures`, `open time elapsed`, ...).
    pub reason: String,
    /// When it was seen, from the run's start; filled in by the runner.
    #[serde(serialize_with = "super::report::millis")]
    pub at: Duration,
}

/// How the agents call the tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolApi {
    /// Plain HTTP: `POST /tools/{name}` at the upstream, `POST /v1/tools/{name}` through Ballast's gateway.
    #[default]
    Http,
    /// MCP `tools/call`s: at the upstream's `/mcp`, or at Ballast's gateway's `/mcp`.
    Mcp,
}

impl FromStr for ToolApi {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "http" => Ok(ToolApi::Http),
            "mcp" => Ok(ToolApi::Mcp),
            _ => Err(format!("unknown tool API {s:?}: http, mcp")),
        }
    }
}

impl fmt::Display for ToolApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolApi::Http => "http",
            ToolApi::Mcp => "mcp",
        })
    }
}

/// The stable code of a call that got no answer, from the HTTP client's error: `timeout`, `connect_error`,
/// `bad_answer` (a body that could not be read as what it claims), else `connection_lost`.
pub(super) fn no_answer(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "timeout"
    } else if error.is_connect() {
        "connect_error"
    } else if error.is_decode() {
        "bad_answer"
    } else {
        "connection_lost"
    }
    .to_owned()
}
