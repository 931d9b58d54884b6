//! A tool call's inputs and results.

use ballast_core::{Deadline, IdempotencyKey, Priority};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::OutcomeReport;
use crate::client::{CallError, CallOptions};

/// One call of a tool: its JSON arguments (what the model put in `tool_calls[].function.arguments`) and, when
/// known, the run and step it belongs to, its deadline, its key and its priority.
#[derive(Clone, Debug)]
pub struct ToolCall {
    pub(crate) arguments: Arguments,
    pub(crate) options: CallOptions,
    pub(crate) step: Option<(String, u32)>,
    pub(crate) key: Option<IdempotencyKey>,
    pub(crate) priority: Option<Priority>,
}

impl ToolCall {
    /// A call with these arguments.
    pub fn new(arguments: Value) -> Self {
        ToolCall::with(Arguments::Value(arguments))
    }

    /// A call whose arguments are already JSON text, sent byte for byte: what a gateway forwards as the caller sent
    /// it (every number exactly as written, the key order kept). The bytes are not checked to be JSON here.
    pub fn from_json(arguments: bytes::Bytes) -> Self {
        ToolCall::with(Arguments::Json(arguments))
    }

    fn with(arguments: Arguments) -> Self {
        ToolCall {
            arguments,
            options: CallOptions::default(),
            step: None,
            key: None,
            priority: None,
        }
    }

    /// The call belongs to run `id`: it shares the run's deadline (the earliest any call gave it) and retry
    /// allowance.
    pub fn run(mut self, id: impl Into<String>) -> Self {
        self.options.run_id = Some(id.into());
        self
    }

    /// The run belongs to `owner` (a gateway's principal): runs are kept per owner, so two callers that use the
    /// same run id share nothing.
    pub fn run_owner(mut self, owner: impl Into<String>) -> Self {
        self.options.run_owner = Some(owner.into());
        self
    }

    /// The call is call number `ordinal` (0-based) of step `id` of its run. With a run, a side-effecting call's
    /// key is derived from (run, step, tool, ordinal): a re-run step re-sends the same key. The model's
    /// tool-call id is not a step id (it changes when the model is asked again).
    pub fn step(mut self, id: impl Into<String>, ordinal: u32) -> Self {
        self.step = Some((id.into(), ordinal));
        self
    }

    /// The call's deadline (otherwise the enclosing scope's, else the configured default timeout from now).
    pub fn deadline(mut self, deadline: Deadline) -> Self {
        self.options.deadline = Some(deadline);
        self
    }

    /// A bound on this call only, never on its run (the gateway gives an SDK's per-request timeout here: it
    /// limits one HTTP call, not the agent request). The call's deadline is the earliest of this, its own
    /// [`deadline`](ToolCall::deadline) and its run's.
    pub fn call_deadline(mut self, bound: Deadline) -> Self {
        self.options.call_bound = Some(bound);
        self
    }

    /// The call came through `hops` other Ballasts (their `ballast-hop`): with one or more, it gets a single
    /// attempt here, since retries happen at exactly one layer, and its attempts say `ballast-hop: hops + 1`.
    pub fn hops(mut self, hops: u32) -> Self {
        self.options.hops = Some(hops);
        self
    }

    /// The trace the call belongs to (the agent's own request's `traceparent`, parsed with
    /// [`TraceContext::parse`](crate::context::TraceContext::parse)): its trace id is the call's request id in
    /// spans, and every attempt sends it upstream in `traceparent` with a parent id of its own. Without one, a
    /// call of a run logs the run's trace id as its request id, any other call a new one, and nothing is sent.
    pub fn trace(mut self, trace: crate::context::TraceContext) -> Self {
        self.options.trace = Some(trace);
        self
    }

    /// The operation's idempotency key, when the caller already has one (it wins over a derived one).
    pub fn idempotency_key(mut self, key: IdempotencyKey) -> Self {
        self.key = Some(key);
        self
    }

    /// A priority for this call; it may only lower the tool's configured priority.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Cancels the call when `token` is cancelled (the user went away, the agent request was aborted): queued
    /// work, backoff sleeps and 409 waits stop at once and no further attempt or fallback starts — the call ends
    /// with [`Error::Cancelled`](crate::Error::Cancelled). A side-effecting attempt already sent is not abandoned: it runs to its own
    /// timeout in the background and its outcome lands in the report (keep it with
    /// [`ToolClient::call_with_report`](crate::ToolClient::call_with_report)). The call listens on a child of
    /// `token`: it never cancels the caller's token itself.
    pub fn cancel_token(mut self, token: CancellationToken) -> Self {
        self.options.cancel = Some(token);
        self
    }
}

/// A call's arguments: a value to encode, or JSON text as it came.
#[derive(Clone, Debug)]
pub(crate) enum Arguments {
    Value(Value),
    Json(bytes::Bytes),
}

/// A tool's successful answer (2xx), or its fallback's (a fallback tool's answer or the static response; the
/// report's `fallback` says which).
#[derive(Clone, Debug)]
pub struct ToolAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The answer's `content-type` as the upstream sent it (`application/json` for a static fallback's).
    pub content_type: Option<http::HeaderValue>,
    /// The body's bytes as the upstream sent them (a static fallback's, encoded): what a proxy passes on.
    pub bytes: bytes::Bytes,
    /// What happened, attempt by attempt.
    pub report: OutcomeReport,
    /// `bytes` parsed, once [`ToolAnswer::body`] is first called: a proxy that passes the bytes on never pays
    /// for a JSON value it does not read.
    pub(crate) parsed: std::sync::OnceLock<Value>,
}

impl ToolAnswer {
    /// The answer's JSON body (`null` when empty; a string when not JSON), parsed from [`ToolAnswer::bytes`]
    /// the first time it is asked for.
    pub fn body(&self) -> &Value {
        self.parsed.get_or_init(|| crate::client::json_bytes(&self.bytes))
    }
}

/// A tool call that did not succeed: the upstream's own answer, or why there is none, with the call's report
/// (see [`CallError`]).
pub type ToolError = CallError;
