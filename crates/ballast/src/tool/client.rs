//! One tool's client: the call's context and key, then the stack (send.rs), then the answer or the fallback
//! (fallback.rs).

use std::fmt;
use std::sync::Arc;

use ballast_config::{ServerConfig, ToolConfig};
use ballast_core::{CallKind, CircuitBreaker, Deadline, IdempotencyKey, Instant, RetryBudget};
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{HeaderValue, Request, Response};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower::Service;

use super::ended::{Ended, Failure};
use super::{ToolAnswer, ToolCall, ToolError};
use crate::{CallContext, DeadlineService, Error, Report, Runs, clock, current_deadline};

/// The layer stack of one tool, shared by every call: called through a shared reference, it is neither cloned
/// nor boxed again per call (see [`DeadlineService::call_shared`]).
pub(super) type Stack = Arc<dyn CallStack>;

/// A stack a `ToolClient` calls through a shared reference.
pub(super) trait CallStack: Send + Sync {
    /// Sends `request` through the whole stack.
    fn call(&self, request: Request<Bytes>) -> BoxFuture<'static, Result<Response<Bytes>, Error>>;
}

impl fmt::Debug for dyn CallStack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The transport need not be `Debug`, as with tower's boxed services.
        f.write_str("CallStack")
    }
}

impl<S> CallStack for DeadlineService<S>
where
    S: Service<Request<Bytes>, Response = Response<Bytes>, Error = Error> + Clone + Send + Sync + 'static,
    S::Future: Send + 'static,
{
    fn call(&self, request: Request<Bytes>) -> BoxFuture<'static, Result<Response<Bytes>, Error>> {
        self.call_shared(request)
    }
}

/// What the tool falls back to when its upstream is failing.
#[derive(Clone, Debug)]
pub(super) enum Fallback {
    Tool(ToolClient),
    Response(Value),
}

/// A client for one configured tool. Cheap to clone; clones share the breaker, budget, queue and runs.
#[derive(Clone, Debug)]
pub struct ToolClient {
    pub(super) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) tool: ToolConfig,
    pub(super) server: ServerConfig,
    pub(super) stack: Stack,
    /// The upstream's method and URI, parsed once (`None` when they do not parse: each call then reports why).
    pub(super) target: Option<(http::Method, http::Uri)>,
    pub(super) breaker: Arc<CircuitBreaker>,
    pub(super) budget: Arc<dyn RetryBudget>,
    pub(super) runs: Arc<Runs>,
    pub(super) fallback: Option<Fallback>,
}

impl ToolClient {
    pub(super) fn from_inner(inner: Inner) -> Self {
        ToolClient {
            inner: Arc::new(inner),
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.inner.tool.name
    }

    /// The tool's configuration.
    pub fn config(&self) -> &ToolConfig {
        &self.inner.tool
    }

    /// The tool's circuit breaker (for `/status` and tests).
    pub fn breaker(&self) -> &Arc<CircuitBreaker> {
        &self.inner.breaker
    }

    /// The tool's retry budget.
    pub fn budget(&self) -> &Arc<dyn RetryBudget> {
        &self.inner.budget
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
    pub async fn call(&self, call: ToolCall) -> Result<ToolAnswer, ToolError> {
        self.call_with_report(call, Report::default()).await
    }

    /// [`ToolClient::call`], writing into `report`, which the caller may keep to read attempts that finish in
    /// the background after it gave up. The report is this tool's; a fallback tool's report is nested in it.
    pub async fn call_with_report(&self, call: ToolCall, report: Report) -> Result<ToolAnswer, ToolError> {
        let started = clock::now();
        let (ctx, first) = self.context(&call, report, started);
        let result = match self.request(&call, first.key) {
            Ok(request) => {
                let first = self.send(request, &ctx, first.attempts_before);
                self.send_until_settled(first, &call, &ctx).await
            }
            Err(refused) => Err(refused),
        };
        // Each trip through the stack wrote its own total; the call's runs from its start, fallback included.
        let ended = match result {
            Ok(response) if response.status().is_success() => Ended::answered(&response),
            Ok(response) => {
                set_total(&ctx.report, started);
                self.after_failure(Failure::Answer(response), call, &ctx).await
            }
            Err(error) => {
                set_total(&ctx.report, started);
                self.after_failure(Failure::Error(error), call, &ctx).await
            }
        };
        set_total(&ctx.report, started);
        let CallContext { report, .. } = ctx;
        ended.into_result(report.into_snapshot())
    }

    /// The call's context: deadline (the earliest of the call's, the scope's and the run's), run, priority,
    /// kind, cancellation and the key recorded in the report; and what its first trip needs.
    fn context(&self, call: &ToolCall, report: Report, now: Instant) -> (CallContext, FirstTrip) {
        let server = &self.inner.server;
        let mut deadline = call
            .deadline
            .unwrap_or_else(|| Deadline::after(now, server.default_timeout))
            .with_reserve(server.reserve)
            .with_min_attempt(server.min_attempt);
        if let Some(scoped) = current_deadline() {
            deadline = deadline.earliest(&scoped);
        }
        let tool = &self.inner.tool;
        let run = call.run_id.as_deref().map(|id| self.inner.runs.get(id, now));
        if let Some(run) = &run {
            deadline = run.offer_deadline(deadline);
        }
        let cancel = match &call.cancel {
            Some(token) => token.child_token(),
            None => CancellationToken::new(),
        };
        // Built whole (not `CallContext::new` then changed): no default report or token made to be replaced.
        let ctx = CallContext {
            deadline,
            run,
            priority: call.priority.map_or(tool.priority, |p| p.min(tool.priority)),
            hop: 0,
            retries_here: true,
            kind: CallKind::tool(tool.side_effects, tool.upstream_idempotency),
            report,
            cancel: Arc::new(cancel),
        };
        let key = tool.side_effects.then(|| self.key_for(call));
        let key_header = key.as_ref().and_then(|k| HeaderValue::from_str(k.as_str()).ok());
        // One look at the report for all the call needs from it at the start.
        let mut attempts_before = 0;
        ctx.report.update(|r| {
            r.target = tool.name.clone();
            r.idempotency_key = key.map(|k| k.as_str().to_owned());
            attempts_before = super::send::attempts_in(r);
        });
        (
            ctx,
            FirstTrip {
                key: key_header,
                attempts_before,
            },
        )
    }

    /// The operation's key: the caller's, else derived from (run, step, tool, ordinal), else a fresh UUIDv4
    /// from the operating system's CSPRNG — once per logical call, never per attempt.
    fn key_for(&self, call: &ToolCall) -> IdempotencyKey {
        if let Some(key) = &call.key {
            return key.clone();
        }
        match (&call.run_id, &call.step) {
            (Some(run), Some((step, ordinal))) => IdempotencyKey::derived(run, step, self.name(), *ordinal),
            _ => {
                let uuid = uuid::Uuid::new_v4().hyphenated().to_string();
                // A hyphenated UUID is 36 printable ASCII characters: always a valid key.
                IdempotencyKey::parse(&uuid).expect("a UUID is a valid idempotency key")
            }
        }
    }
}

/// What the first trip through the stack needs, read when the context is made.
struct FirstTrip {
    /// The `Idempotency-Key` header, for side-effecting calls.
    key: Option<HeaderValue>,
    /// Attempts of the operation already in the report (none, unless the caller's report has some).
    attempts_before: u32,
}

/// The call's total time, from its start to now (the fallback included).
fn set_total(report: &Report, started: Instant) {
    let total = clock::now().saturating_duration_since(started);
    report.update(|r| r.total = total);
}
