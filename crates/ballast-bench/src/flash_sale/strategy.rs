//! The trait every client strategy implements, what a conversation comes to, how a strategy's agents call their
//! model ([`ModelApi`]) and their tools ([`ToolApi`]), and how a strategy is named from them.
//!
//! A strategy builds its agents for one run against one upstream; each agent runs one conversation. The HTTP
//! strategies (Ballast's gateway, any other gateway) implement the same trait as the in-process ones: the runner
//! and the report know nothing of how a strategy calls the upstream. Building the agents is async because an HTTP
//! strategy may start a process first (`ballast serve`).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use ballast_core::Instant;
use futures::future::BoxFuture;
use serde::Serialize;

use super::deferrals::DeferredRun;
use super::fleet::FleetReport;
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

    /// The run started at `start` (its conversations arrive from then on): what happens at a time into the run
    /// (a gateway instance killed) is timed from it.
    fn run_started(&self, start: Instant) {
        let _ = start;
    }

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

    /// What each gateway instance served and the kill, once settled, for a strategy that runs several instances or
    /// a shared store (`None`: it does not; the runner fills in what was acknowledged but lost).
    fn fleet(&self) -> Option<FleetReport> {
        None
    }

    /// How the side effects the gateway deferred ended, once settled (the drain is part of settling), for a
    /// strategy whose agents ask for deferral (`None`: they do not; the runner fills in what was acknowledged but
    /// lost).
    fn deferred(&self) -> Option<DeferredRun> {
        None
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
    /// The operations (the call's `op`) of the side effects the agent was told were done: a 2xx, or over MCP a
    /// result without `isError`, for a refund or a payment. Reported by the agents over HTTP; checked against the
    /// upstream's ledger ([`super::FleetReport::acknowledged_lost`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acknowledged: Vec<String>,
    /// The key of the side effect the gateway deferred (answered `202 Accepted`), which ended the conversation:
    /// neither a success within the deadline nor a failure — its side effect waits in the gateway's queue, and the
    /// drain after the load says how it ended ([`DeferredRun`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deferred: Option<String>,
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

    /// A conversation that ended after `calls` calls when its side effect was deferred under the operation `key`.
    pub fn deferred(calls: u32, key: impl Into<String>) -> Outcome {
        Outcome {
            deferred: Some(key.into()),
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
    #[serde(serialize_with = "super::millis::millis")]
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

/// Which API the agents' model calls use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ModelApi {
    /// Even agents the Responses API, odd ones Chat Completions.
    #[default]
    Mixed,
    /// Every agent the Responses API.
    Responses,
    /// Every agent Chat Completions.
    Chat,
    /// Every agent Anthropic's Messages API.
    Messages,
}

impl FromStr for ModelApi {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "mixed" => Ok(ModelApi::Mixed),
            "responses" => Ok(ModelApi::Responses),
            "chat" => Ok(ModelApi::Chat),
            "messages" => Ok(ModelApi::Messages),
            _ => Err(format!("unknown API {s:?}: mixed, responses, chat, messages")),
        }
    }
}

impl fmt::Display for ModelApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModelApi::Mixed => "mixed",
            ModelApi::Responses => "responses",
            ModelApi::Chat => "chat",
            ModelApi::Messages => "messages",
        })
    }
}

/// A strategy's name in reports: `strategy` itself for the default mixed agents calling their tools over HTTP,
/// else with what differs — the one API every agent used and MCP for the tools: `gateway (messages)`,
/// `gateway (mcp)`, `gateway (chat, mcp)` — so that a table says what it measured.
pub(super) fn strategy_name(strategy: &str, api: ModelApi, tools: ToolApi) -> String {
    named(strategy, &differences(api, tools))
}

/// What differs from the default mixed agents calling their tools over HTTP: the API, `mcp`.
pub(super) fn differences(api: ModelApi, tools: ToolApi) -> Vec<String> {
    let mut differs = Vec::new();
    if api != ModelApi::Mixed {
        differs.push(api.to_string());
    }
    if tools != ToolApi::Http {
        differs.push(tools.to_string());
    }
    differs
}

/// `strategy`, with what `differs` in parentheses when anything does.
pub(super) fn named(strategy: &str, differs: &[String]) -> String {
    if differs.is_empty() {
        strategy.to_owned()
    } else {
        format!("{strategy} ({})", differs.join(", "))
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
