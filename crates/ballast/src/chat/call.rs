//! A model call's inputs and results: [`ChatCall`], [`ChatAnswer`], [`ChatError`].

use ballast_core::{Deadline, ErrorCode};
use http::HeaderMap;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{ChatRequest, ChatResponse, Truncation};
use crate::{Error, OutcomeReport};

/// One model call: the request (every field the caller set goes upstream unchanged, but `model`, which each
/// deployment replaces with its own model name) and, when known, its deadline, run and cancellation.
#[derive(Clone, Debug)]
pub struct ChatCall {
    pub(crate) request: ChatRequest,
    pub(crate) deadline: Option<Deadline>,
    pub(crate) run_id: Option<String>,
    pub(crate) cancel: Option<CancellationToken>,
}

impl ChatCall {
    /// A call sending `request`.
    pub fn new(request: ChatRequest) -> Self {
        ChatCall {
            request,
            deadline: None,
            run_id: None,
            cancel: None,
        }
    }

    /// The call's deadline (otherwise the enclosing scope's, else the configured default timeout from now). All
    /// the route's deployments share it.
    pub fn deadline(mut self, deadline: Deadline) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// The call belongs to run `id`: it shares the run's deadline and retry allowance.
    pub fn run(mut self, id: impl Into<String>) -> Self {
        self.run_id = Some(id.into());
        self
    }

    /// Cancels the call when `token` is cancelled: sleeps stop, no further attempt or deployment is tried
    /// ([`Error::Cancelled`]), and a committed stream ends at once with a `Cancelled` error item. The call
    /// listens on a child of `token`.
    pub fn cancel_token(mut self, token: CancellationToken) -> Self {
        self.cancel = Some(token);
        self
    }
}

/// A model's answer (2xx, not streamed).
#[derive(Clone, Debug)]
pub struct ChatAnswer {
    /// The completion; fields Ballast does not model are in its `extra` maps, unchanged.
    pub response: ChatResponse,
    /// The upstream's status.
    pub status: u16,
    /// The upstream's headers (the provider's request id, rate-limit headers).
    pub headers: HeaderMap,
    /// The deployment that answered (`route[index] model`).
    pub deployment: String,
    /// What truncation dropped (over every round), when the route truncated the conversation to make it fit:
    /// the gateway says `ballast-truncated: <dropped_messages>`.
    pub truncated: Option<Truncation>,
    /// What happened: the first deployment's report, each next deployment's nested in `fallback_report`.
    pub report: OutcomeReport,
}

/// A model call that did not succeed, with the report of everything tried.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChatError {
    /// The last deployment tried answered with an error, which was not retried (further). The message carries
    /// the upstream's own message and why Ballast stopped there (what the caller can do).
    #[error("{route}: the upstream answered {status}{}", upstream_detail(body, report))]
    Upstream {
        /// The route.
        route: String,
        /// The upstream's status.
        status: u16,
        /// The upstream's body (OpenAI's error envelope, usually; a JSON string when it is not JSON).
        body: Value,
        /// What happened (boxed: an error travels by value through every `?`).
        report: Box<OutcomeReport>,
    },
    /// No upstream answer to return.
    #[error("{route}: {error}")]
    Failed {
        /// The route.
        route: String,
        /// Why.
        error: Error,
        /// What happened (boxed: an error travels by value through every `?`).
        report: Box<OutcomeReport>,
    },
    /// The upstream answered 2xx with a body that is not a chat completion.
    #[error("{route}: the upstream's answer is not a chat completion: {reason}")]
    Malformed {
        /// The route.
        route: String,
        /// What did not parse.
        reason: String,
        /// What happened (boxed: an error travels by value through every `?`).
        report: Box<OutcomeReport>,
    },
    /// The route is not configured.
    #[error("no model route named {0:?}")]
    UnknownRoute(String),
}

impl ChatError {
    /// What happened, when the call got as far as a deployment.
    pub fn report(&self) -> Option<&OutcomeReport> {
        match self {
            ChatError::Upstream { report, .. }
            | ChatError::Failed { report, .. }
            | ChatError::Malformed { report, .. } => Some(report),
            ChatError::UnknownRoute(_) => None,
        }
    }

    /// The stable error code (DESIGN.md, "Error answers"): the error's, or for an upstream's answer the code of
    /// the deployment that gave it.
    pub fn code(&self) -> ErrorCode {
        match self {
            ChatError::Failed { error, .. } => error.code(),
            ChatError::Upstream { report, .. } => last(report).code.unwrap_or(ErrorCode::UpstreamError),
            ChatError::Malformed { .. } | ChatError::UnknownRoute(_) => ErrorCode::UpstreamError,
        }
    }
}

/// What the upstream said (`error.message`, or Ollama's `error` string) and why the last deployment stopped.
fn upstream_detail(body: &Value, report: &OutcomeReport) -> String {
    let error = body.get("error");
    let message = error
        .and_then(|e| e.get("message"))
        .or(error)
        .and_then(Value::as_str);
    let mut detail = message.map(|m| format!(": {m}")).unwrap_or_default();
    if let Some(stop) = &last(report).stop {
        detail.push_str(&format!(" ({stop})"));
    }
    detail
}

/// The report of the last deployment tried.
pub(crate) fn last(report: &OutcomeReport) -> &OutcomeReport {
    report.fallback_report.as_deref().map_or(report, last)
}
