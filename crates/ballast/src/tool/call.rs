//! A tool call's inputs and results.

use ballast_core::IdempotencyKey;
use std::sync::Arc;

use serde_json::Value;

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
    pub(crate) progress: Option<Progress>,
}

impl ToolCall {
    crate::client::call_options_setters!();

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
            progress: None,
        }
    }

    /// The call is call number `ordinal` (0-based) of step `id` of its run. With a run, a side-effecting call's
    /// key is derived from (run, step, tool, ordinal): a re-run step re-sends the same key. The model's
    /// tool-call id is not a step id (it changes when the model is asked again).
    pub fn step(mut self, id: impl Into<String>, ordinal: u32) -> Self {
        self.step = Some((id.into(), ordinal));
        self
    }

    /// The operation's idempotency key, when the caller already has one (it wins over a derived one).
    pub fn idempotency_key(mut self, key: IdempotencyKey) -> Self {
        self.key = Some(key);
        self
    }

    /// Where the progress notifications of an upstream MCP tool go while the call runs (each one's params, its
    /// `progressToken` left out). A tool that is not an MCP server's sends none. They never extend the deadline.
    pub fn on_progress(mut self, progress: Progress) -> Self {
        self.progress = Some(progress);
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

/// Where an upstream MCP tool's progress notifications go while its call runs ([`ToolCall::on_progress`]; sent by an upstream MCP server's tools, `crate::mcp`): each
/// notification's params (`progress`, `total`, `message`), its `progressToken` left out.
///
#[derive(Clone)]
pub struct Progress(Arc<dyn Fn(Value) + Send + Sync>);

impl Progress {
    /// Progress handed to `report`, in the order the server sent it, while the call's attempt reads its answer.
    pub fn new(report: impl Fn(Value) + Send + Sync + 'static) -> Self {
        Progress(Arc::new(report))
    }

    pub(crate) fn report(&self, params: Value) {
        (self.0)(params);
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Progress")
    }
}
