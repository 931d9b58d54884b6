//! A model call's inputs and results: [`ChatCall`], [`ChatAnswer`], [`ChatError`].

use ballast_core::{Deadline, Priority};
use http::HeaderMap;
use tokio_util::sync::CancellationToken;

use super::{ChatRequest, ChatResponse, Truncation};
use crate::OutcomeReport;
use crate::client::{CallError, CallOptions};

/// One model call: the request (every field the caller set goes upstream unchanged, but `model`, which each
/// deployment replaces with its own model name) and, when known, its deadline, run and cancellation.
#[derive(Clone, Debug)]
pub struct ChatCall {
    pub(crate) request: ChatRequest,
    pub(crate) options: CallOptions,
    pub(crate) priority: Option<Priority>,
}

impl ChatCall {
    /// A call sending `request`.
    pub fn new(request: ChatRequest) -> Self {
        ChatCall {
            request,
            options: CallOptions::default(),
            priority: None,
        }
    }

    /// A priority for this call at each deployment's admission; it may only lower the route's configured
    /// priority (what `ballast-priority` does over HTTP).
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = Some(priority);
        self
    }

    /// The call's deadline (otherwise the enclosing scope's, else the configured default timeout from now). All
    /// the route's deployments share it.
    pub fn deadline(mut self, deadline: Deadline) -> Self {
        self.options.deadline = Some(deadline);
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

    /// The call belongs to run `id`: it shares the run's deadline and retry allowance.
    pub fn run(mut self, id: impl Into<String>) -> Self {
        self.options.run_id = Some(id.into());
        self
    }

    /// Cancels the call when `token` is cancelled: sleeps stop, no further attempt or deployment is tried
    /// ([`Error::Cancelled`](crate::Error::Cancelled)), and a committed stream ends at once with a `Cancelled`
    /// error item. The call listens on a child of `token`.
    pub fn cancel_token(mut self, token: CancellationToken) -> Self {
        self.options.cancel = Some(token);
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

/// A model call that did not succeed, with the report of every deployment tried (see [`CallError`]).
pub type ChatError = CallError;

/// No model route of this name is configured (what the gateway answers with 404).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no model route named {0:?}")]
pub struct UnknownRoute(pub String);
