//! A tool call's inputs and results.

use ballast_core::{Deadline, ErrorCode, IdempotencyKey, Priority};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::{Error, OutcomeReport};

/// One call of a tool: its JSON arguments (what the model put in `tool_calls[].function.arguments`) and, when
/// known, the run and step it belongs to, its deadline, its key and its priority.
#[derive(Clone, Debug)]
pub struct ToolCall {
    pub(crate) arguments: Value,
    pub(crate) run_id: Option<String>,
    pub(crate) step: Option<(String, u32)>,
    pub(crate) deadline: Option<Deadline>,
    pub(crate) key: Option<IdempotencyKey>,
    pub(crate) priority: Option<Priority>,
    pub(crate) cancel: Option<CancellationToken>,
}

impl ToolCall {
    /// A call with these arguments.
    pub fn new(arguments: Value) -> Self {
        ToolCall {
            arguments,
            run_id: None,
            step: None,
            deadline: None,
            key: None,
            priority: None,
            cancel: None,
        }
    }

    /// The call belongs to run `id`: it shares the run's deadline (the earliest any call gave it) and retry
    /// allowance.
    pub fn run(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
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
        self.deadline = Some(deadline);
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
    /// with [`Error::Cancelled`]. A side-effecting attempt already sent is not abandoned: it runs to its own
    /// timeout in the background and its outcome lands in the report (keep it with
    /// [`ToolClient::call_with_report`](crate::ToolClient::call_with_report)). The call listens on a child of
    /// `token`: it never cancels the caller's token itself.
    pub fn cancel_token(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }
}

/// A tool's successful answer (2xx), or its fallback's (a fallback tool's answer or the static response; the
/// report's `fallback` says which).
#[derive(Clone, Debug)]
pub struct ToolAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The answer's JSON body (`null` when empty; a string when not JSON).
    pub body: Value,
    /// What happened, attempt by attempt.
    pub report: OutcomeReport,
}

/// A tool call that did not succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The upstream's own answer, which was not retried (further): a 4xx, or a 5xx after retries.
    #[error("{tool}: the upstream answered {status}{}", stop_suffix(report))]
    Upstream {
        /// The tool.
        tool: String,
        /// The upstream's status.
        status: u16,
        /// The upstream's body.
        body: Value,
        /// What happened.
        report: OutcomeReport,
    },
    /// No upstream answer to return.
    #[error("{tool}: {error}")]
    Failed {
        /// The tool.
        tool: String,
        /// Why.
        error: Error,
        /// What happened.
        report: OutcomeReport,
    },
}

impl ToolError {
    /// What happened, attempt by attempt.
    pub fn report(&self) -> &OutcomeReport {
        match self {
            ToolError::Upstream { report, .. } | ToolError::Failed { report, .. } => report,
        }
    }

    /// The stable error code: the error's, or for an upstream's answer the code of the call that got it (the
    /// fallback tool's, when the call went to one).
    pub fn code(&self) -> ErrorCode {
        match self {
            ToolError::Failed { error, .. } => error.code(),
            ToolError::Upstream { report, .. } => answering(report).code.unwrap_or(ErrorCode::UpstreamError),
        }
    }

    /// Whether a side effect may or may not have happened: check before doing it again.
    pub fn outcome_unknown(&self) -> bool {
        self.report().outcome_unknown
    }
}

/// The report of the call whose answer was returned: the last fallback tool's, else the call's own.
fn answering(report: &OutcomeReport) -> &OutcomeReport {
    report.fallback_report.as_deref().map_or(report, answering)
}

fn stop_suffix(report: &OutcomeReport) -> String {
    answering(report)
        .stop
        .as_ref()
        .map(|s| format!(" ({s})"))
        .unwrap_or_default()
}
