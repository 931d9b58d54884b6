//! One tool's client: the call's context and key, the operation through the stack (send.rs), then the answer or
//! the fallback (fallback.rs) — and the report's verdict, written here from what came back.

use std::future::Future;
use std::sync::Arc;

use ballast_config::ToolConfig;
use ballast_core::{CallKind, CircuitBreaker, IdempotencyKey, RetryBudget};
use bytes::Bytes;
use http::HeaderValue;
use serde_json::Value;
use tracing::Instrument as _;

use super::{ToolAnswer, ToolCall, ToolError};
use crate::client::{
    CallError, Core, Failure, Upstream, body_bytes, call_span, content_type, json_body, record_end,
    record_request_id,
};
use crate::metrics::CallMetrics;
use crate::outcome::{SideEffect, Trip, Verdict};
use crate::{CallContext, Error, OutcomeReport, Report, clock};

/// An operation's trips through the stack, as one: the last trip's answer or error and why it stopped, the
/// attempts numbered over all of them, and what any of them may have done at the upstream.
#[derive(Debug)]
pub(super) struct Operation {
    pub(super) trip: Trip,
    /// The upstream said the operation was in progress (a 409), and no later answer said how it ended unless
    /// the last trip succeeded.
    pub(super) in_progress: bool,
}

/// What the tool falls back to when its upstream is failing.
#[derive(Clone, Debug)]
pub(crate) enum Fallback {
    Tool(ToolClient),
    Response(Value),
}

/// A client for one configured tool. Cheap to clone; clones share the breaker, budget, queue and runs.
#[derive(Clone, Debug)]
pub struct ToolClient {
    pub(super) inner: Arc<Inner>,
    metrics: Arc<CallMetrics>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) tool: ToolConfig,
    /// The tool's name, shared by every call's context.
    pub(super) name: Arc<str>,
    pub(super) core: Core,
    pub(super) upstream: Upstream,
    /// The upstream's method and URI, parsed once (`None` when they do not parse: each call then reports why).
    pub(super) target: Option<(http::Method, http::Uri)>,
    /// The upstream's own headers (`upstream.headers`), resolved once when the client was built; secret values
    /// are marked sensitive. Sent on every attempt.
    pub(super) headers: Vec<(http::HeaderName, HeaderValue)>,
    pub(super) fallback: Option<Fallback>,
    /// Whether the upstream is an MCP server's tool (its answers are MCP results: `crate::mcp`).
    pub(super) mcp: bool,
}

impl ToolClient {
    pub(super) fn from_inner(inner: Inner) -> Self {
        let metrics = Arc::new(CallMetrics::new(&inner.name, &[&inner.name]));
        ToolClient {
            inner: Arc::new(inner),
            metrics,
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.inner.tool.name
    }

    /// Whether the tool is an upstream MCP server's: its answer's body is the server's MCP result (see
    /// [`crate::mcp`]), not the JSON of an HTTP tool.
    pub fn is_mcp(&self) -> bool {
        self.inner.mcp
    }

    /// The tool's configuration.
    pub fn config(&self) -> &ToolConfig {
        &self.inner.tool
    }

    /// The tool's circuit breaker (for `/status` and tests).
    pub fn breaker(&self) -> &Arc<CircuitBreaker> {
        self.inner.upstream.breaker()
    }

    /// The tool's adaptive throttle (`None` when `throttle.enabled = false`), for `/status` and metrics.
    pub fn throttle(&self) -> Option<&Arc<ballast_core::AdaptiveThrottle>> {
        self.inner.upstream.throttle()
    }

    /// The tool's admission: its concurrency limit and priority queue (`in_flight`, `queued_by_class`), for
    /// `/status`.
    pub fn admission(&self) -> Option<&crate::layer::AdmissionLayer> {
        self.inner.upstream.admission()
    }

    /// The tool's retry budget.
    pub fn budget(&self) -> &Arc<dyn RetryBudget> {
        self.inner.upstream.budget()
    }

    /// Calls the tool: the answer, or a typed error; both carry the outcome report.
    ///
    /// Arguments whose JSON is over the server's `body_limit` are refused before anything is sent
    /// ([`Error::BodyTooLarge`]). A 409 "in progress" for the operation's key is waited out within the deadline.
    /// When the upstream is failing the configured fallback answers — for a side-effecting tool only when no
    /// attempt may have reached the upstream (else the fallback could repeat the side effect: the error comes
    /// back, with `outcome_unknown` when an attempt went unanswered).
    ///
    /// Dropping the returned future, or cancelling the call's token ([`ToolCall::cancel_token`]), abandons queued
    /// work and sleeps at once and starts no further attempt; a side-effecting attempt already sent still runs to
    /// its timeout in the background, and its outcome is recorded in the report (see
    /// [`ToolClient::call_with_report`] to keep a handle on it).
    pub fn call(&self, call: ToolCall) -> impl Future<Output = Result<ToolAnswer, ToolError>> + Send + '_ {
        self.call_with_report(call, Report::default())
    }

    /// [`ToolClient::call`], writing into `report`, which the caller may keep to read attempts that finish in
    /// the background after it gave up. The report is this tool's; a fallback tool's report is nested in it. Give
    /// each call a report of its own: the call numbers its attempts from 1 and judges only what it did.
    pub fn call_with_report(
        &self,
        call: ToolCall,
        report: Report,
    ) -> impl Future<Output = Result<ToolAnswer, ToolError>> + Send + '_ {
        // Not an `async fn` around the call: the call's future is wrapped in its span, not nested in another
        // state machine (which would copy it once more on every call).
        let span = call_span("tool", &self.inner.name, call.options.run_id.as_deref());
        self.call_in_span(call, report, span.clone()).instrument(span)
    }

    /// [`ToolClient::call_with_report`], inside the call's span.
    async fn call_in_span(
        &self,
        call: ToolCall,
        report: Report,
        span: tracing::Span,
    ) -> Result<ToolAnswer, ToolError> {
        let started = clock::now();
        let tool = &self.inner.tool;
        let kind = CallKind::tool(tool.side_effects, tool.upstream_idempotency);
        let priority = call.options.priority_under(tool.priority);
        let target = Some(Arc::clone(&self.inner.name));
        let ctx = self
            .inner
            .core
            .context(&call.options, kind, priority, target, report, started);
        record_request_id(&span, &ctx);
        let key = tool.side_effects.then(|| self.key_for(&call));
        ctx.report.update(|r| {
            r.target.clone_from(&tool.name);
            r.idempotency_key = key.as_ref().map(|k| k.as_str().to_owned());
        });
        let key = key.and_then(|k| HeaderValue::from_str(k.as_str()).ok());
        let operation = self.operation(&call, key, &ctx).await;
        let unknown = self.write_verdict(&operation, &ctx);
        let ended = if operation.trip.succeeded() {
            Ended::of(operation.trip.result)
        } else {
            self.after_failure(operation, unknown, call, &ctx).await
        };
        // The call's total runs from its start, every poll and the fallback included.
        let total = clock::now().saturating_duration_since(started);
        ctx.report.update(|r| r.total = total);
        let CallContext { report, .. } = ctx;
        let report = report.into_snapshot();
        self.metrics.observe(&report, false);
        record_end(&span, &report);
        ended.into_result(self.name(), report)
    }

    /// The report's verdict on the operation, from what its trips returned: why it stopped and its code, whether
    /// the answer is a replay, what is left of the budget and the run's allowance, and whether the side effect's
    /// outcome is unknown — also when the operation was still in progress when the call ended. Returns the latter.
    fn write_verdict(&self, operation: &Operation, ctx: &CallContext) -> bool {
        let mut verdict = Verdict::of(ctx.kind, &operation.trip);
        if operation.in_progress && self.inner.tool.side_effects && verdict.side_effect != SideEffect::Settled
        {
            verdict.side_effect = SideEffect::Unknown;
        }
        crate::outcome::write_verdict(&verdict, ctx, self.inner.upstream.budget_left());
        verdict.side_effect == SideEffect::Unknown
    }

    /// The operation's key: the caller's, else derived from (run, step, tool, ordinal), else a fresh UUIDv4
    /// from the operating system's CSPRNG — once per logical call, never per attempt.
    fn key_for(&self, call: &ToolCall) -> IdempotencyKey {
        if let Some(key) = &call.key {
            return key.clone();
        }
        match (&call.options.run_id, &call.step) {
            (Some(run), Some((step, ordinal))) => IdempotencyKey::derived(run, step, self.name(), *ordinal),
            _ => {
                let uuid = uuid::Uuid::new_v4().hyphenated().to_string();
                // A hyphenated UUID is 36 printable ASCII characters: always a valid key.
                IdempotencyKey::parse(&uuid).expect("a UUID is a valid idempotency key")
            }
        }
    }
}

/// How the call ended, before its report is attached: an answer (the tool's, or a fallback's), or the failure
/// returned to the caller.
#[derive(Debug)]
pub(super) enum Ended {
    /// `parsed`: the body as JSON once read (a static fallback's, from the start).
    Answer {
        status: u16,
        content_type: Option<http::HeaderValue>,
        bytes: Bytes,
        parsed: std::sync::OnceLock<Value>,
    },
    Upstream {
        status: u16,
        body: Value,
        bytes: Bytes,
        asked_wait: Option<std::time::Duration>,
        headers: http::HeaderMap,
    },
    Failed {
        error: Error,
    },
}

impl Ended {
    /// The end of a call whose result is `result`: a 2xx is an answer.
    pub(super) fn of(result: Result<http::Response<crate::Body>, Error>) -> Self {
        match result {
            Ok(response) if response.status().is_success() => Ended::Answer {
                status: response.status().as_u16(),
                content_type: content_type(&response),
                bytes: body_bytes(response.body()),
                parsed: std::sync::OnceLock::new(),
            },
            other => Ended::failed(Failure::of(other)),
        }
    }

    /// The end of a call that failed so.
    pub(super) fn failed(failure: Failure) -> Self {
        match failure {
            Failure::Answer(response) => Ended::Upstream {
                status: response.status().as_u16(),
                body: json_body(response.body()),
                bytes: body_bytes(response.body()),
                asked_wait: crate::headers::retry_after(response.headers()),
                headers: response.headers().clone(),
            },
            Failure::Error(error) => Ended::Failed { error },
        }
    }

    /// How a fallback tool's call ended, and its report.
    pub(super) fn of_fallback(result: Result<ToolAnswer, ToolError>) -> (Ended, OutcomeReport) {
        match result {
            Ok(ToolAnswer {
                status,
                content_type,
                bytes,
                report,
                parsed,
            }) => (
                Ended::Answer {
                    status,
                    content_type,
                    bytes,
                    parsed,
                },
                report,
            ),
            Err(CallError::Upstream {
                status,
                body,
                bytes,
                asked_wait,
                headers,
                report,
                ..
            }) => (
                Ended::Upstream {
                    status,
                    body,
                    bytes,
                    asked_wait,
                    headers: *headers,
                },
                *report,
            ),
            Err(CallError::Failed { error, report, .. }) => (Ended::Failed { error }, *report),
            Err(CallError::Malformed { reason, report, .. }) => (
                Ended::Failed {
                    error: Error::transport(true, reason),
                },
                *report,
            ),
            // Nothing was sent (a tool's call is never refused so today; a refusal says so if one ever is).
            Err(CallError::Refused { refusal, report, .. }) => (
                Ended::Failed {
                    error: Error::transport(false, refusal.to_string()),
                },
                *report,
            ),
        }
    }

    /// The caller's result, with the call's report.
    // The result of `ToolClient::call` itself (an async fn, which the lint does not look at): its shape is the
    // public API's, and it is built once per call.
    #[allow(clippy::result_large_err)]
    fn into_result(self, tool: &str, report: OutcomeReport) -> Result<ToolAnswer, ToolError> {
        let target = tool.to_owned();
        match self {
            Ended::Answer {
                status,
                content_type,
                bytes,
                parsed,
            } => Ok(ToolAnswer {
                status,
                content_type,
                bytes,
                report,
                parsed,
            }),
            Ended::Upstream {
                status,
                body,
                bytes,
                asked_wait,
                headers,
            } => Err(CallError::Upstream {
                target,
                status,
                body,
                bytes,
                asked_wait,
                headers: Box::new(headers),
                report: Box::new(report),
            }),
            Ended::Failed { error } => Err(CallError::Failed {
                target,
                error,
                report: Box::new(report),
            }),
        }
    }
}
