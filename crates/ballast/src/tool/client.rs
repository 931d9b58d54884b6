//! One tool's client: the layer stack, the key, the 409 wait and the fallback.

use std::sync::Arc;
use std::time::Duration;

use ballast_config::{ServerConfig, ToolConfig};
use ballast_core::{
    CallKind, CircuitBreaker, Deadline, IdempotencyKey, ProblemKind, RetryBudget, StopReason,
};
use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use serde_json::Value;
use tower::ServiceExt as _;
use tower::util::BoxCloneSyncService;

use super::{ToolAnswer, ToolCall, ToolError};
use crate::headers::{BALLAST_RUN_ID, BALLAST_STEP_ID, IDEMPOTENCY_KEY};
use crate::{CallContext, Error, Report, Runs, classify_response, clock, current_deadline};

/// The layer stack of one tool, boxed.
pub(super) type Stack = BoxCloneSyncService<Request<Bytes>, Response<Bytes>, Error>;

/// What the tool falls back to when its upstream is failing.
#[derive(Clone, Debug)]
pub(super) enum Fallback {
    Tool(ToolClient),
    Response(Value),
}

/// A client for one configured tool. Cheap to clone; clones share the breaker, budget, queue and runs.
#[derive(Clone, Debug)]
pub struct ToolClient {
    inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) tool: ToolConfig,
    pub(super) server: ServerConfig,
    pub(super) stack: Stack,
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
    /// Dropping the returned future abandons queued work and backoff sleeps at once and starts no further
    /// attempt; a side-effecting attempt already sent still runs to its timeout in the background, and its
    /// outcome is recorded in the report (see [`ToolClient::call_with_report`] to keep a handle on it).
    pub async fn call(&self, call: ToolCall) -> Result<ToolAnswer, ToolError> {
        self.call_with_report(call, Report::default()).await
    }

    /// [`ToolClient::call`], writing into `report`, which the caller may keep to read attempts that finish in
    /// the background after it gave up.
    pub async fn call_with_report(&self, call: ToolCall, report: Report) -> Result<ToolAnswer, ToolError> {
        let ctx = self.context(&call, report);
        let result = self.send_until_settled(&call, &ctx).await;
        let report = ctx.report.snapshot();
        match result {
            Ok(response) if response.status().is_success() => Ok(answer(response, report)),
            Ok(_) if let Some(fallback) = self.fallback_after(&report) => {
                self.fall_back(fallback, call, &ctx, report).await
            }
            Ok(response) => {
                let status = response.status().as_u16();
                Err(ToolError::Upstream {
                    tool: self.name().to_owned(),
                    status,
                    body: json_body(response.body()),
                    report,
                })
            }
            Err(error)
                if let Some(fallback) = self.inner.fallback.as_ref().filter(|_| falls_back_on(&error)) =>
            {
                self.fall_back(fallback, call, &ctx, report).await
            }
            Err(error) => Err(ToolError::Failed {
                tool: self.name().to_owned(),
                error,
                report,
            }),
        }
    }

    /// The call's context: deadline (the earliest of the call's, the scope's and the run's), run, priority,
    /// kind and the key recorded in the report.
    fn context(&self, call: &ToolCall, report: Report) -> CallContext {
        let now = clock::now();
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
        let mut ctx = CallContext::new(
            CallKind::tool(tool.side_effects, tool.upstream_idempotency),
            deadline,
        );
        ctx.run = call.run_id.as_deref().map(|id| self.inner.runs.get(id, now));
        if let Some(run) = &ctx.run {
            ctx.deadline = run.offer_deadline(deadline);
        }
        ctx.priority = call.priority.map_or(tool.priority, |p| p.min(tool.priority));
        ctx.report = report;
        let key = tool.side_effects.then(|| self.key_for(call));
        ctx.report.update(|r| {
            r.target = tool.name.clone();
            r.idempotency_key = key.map(|k| k.as_str().to_owned());
        });
        ctx
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

    /// Sends the call through the stack; while the upstream answers 409 "in progress" for this key, waits as it
    /// asks (or 1 s) and asks again, until another answer or the deadline.
    async fn send_until_settled(&self, call: &ToolCall, ctx: &CallContext) -> Result<Response<Bytes>, Error> {
        loop {
            let response = self.send(call, ctx).await?;
            let info = classify_response(&response);
            if response.status() != http::StatusCode::CONFLICT
                || info.problem != ProblemKind::IdempotencyInProgress
            {
                return Ok(response);
            }
            let wait = info.retry_after.unwrap_or(Duration::from_secs(1));
            if let Err(exceeded) = ctx.effective_deadline().check_wait(wait, clock::now()) {
                ctx.report
                    .update(|r| r.stop = Some(StopReason::Deadline(exceeded)));
                return Ok(response);
            }
            tokio::select! {
                () = clock::sleep_until(clock::now() + wait) => {}
                () = ctx.cancel.cancelled() => return Err(Error::Cancelled),
            }
        }
    }

    async fn send(&self, call: &ToolCall, ctx: &CallContext) -> Result<Response<Bytes>, Error> {
        let request = self.request(call, ctx)?;
        self.inner.stack.clone().oneshot(request).await
    }

    fn request(&self, call: &ToolCall, ctx: &CallContext) -> Result<Request<Bytes>, Error> {
        let upstream = &self.inner.tool.upstream;
        let body = serde_json::to_vec(&call.arguments).map_err(|e| Error::transport(false, e))?;
        let mut request = Request::builder()
            .method(upstream.method.as_str())
            .uri(&upstream.url)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Bytes::from(body))
            .map_err(|e| Error::transport(false, e))?;
        let headers = request.headers_mut();
        let key = ctx.report.read(|r| {
            r.idempotency_key
                .as_deref()
                .and_then(|k| HeaderValue::from_str(k).ok())
        });
        if let Some(key) = key {
            headers.insert(IDEMPOTENCY_KEY, key);
        }
        if let Some(run) = call.run_id.as_deref().and_then(|r| HeaderValue::from_str(r).ok()) {
            headers.insert(BALLAST_RUN_ID, run);
        }
        if let Some((step, _)) = &call.step
            && let Ok(step) = HeaderValue::from_str(step)
        {
            headers.insert(BALLAST_STEP_ID, step);
        }
        request.extensions_mut().insert(ctx.clone());
        Ok(request)
    }

    /// Whether an upstream answer that was not retried further should go to the fallback: the upstream is
    /// failing (a 5xx, retries exhausted or refused), not the request (4xx) — and nothing may have happened
    /// that a fallback would repeat.
    fn fallback_after(&self, report: &crate::OutcomeReport) -> Option<&Fallback> {
        let failing = !report.outcome_unknown
            && matches!(
                report.stop,
                Some(
                    StopReason::AttemptsExhausted { .. }
                        | StopReason::RetryBudgetExhausted
                        | StopReason::RunAllowanceExhausted
                        | StopReason::RetryAfterTooLong { .. }
                )
            );
        self.inner.fallback.as_ref().filter(|_| failing)
    }

    async fn fall_back(
        &self,
        fallback: &Fallback,
        call: ToolCall,
        ctx: &CallContext,
        report: crate::OutcomeReport,
    ) -> Result<ToolAnswer, ToolError> {
        match fallback {
            Fallback::Response(body) => {
                let mut report = report;
                report.fallback = Some("static response".to_owned());
                Ok(ToolAnswer {
                    status: 200,
                    body: body.clone(),
                    report,
                })
            }
            Fallback::Tool(tool) => {
                // The fallback runs under the same deadline; its own report says what it did.
                let call = ToolCall {
                    deadline: Some(ctx.effective_deadline()),
                    ..call
                };
                let mut result = Box::pin(tool.call(call)).await;
                let name = tool.name().to_owned();
                match &mut result {
                    Ok(answer) => answer.report.fallback = Some(name),
                    Err(ToolError::Upstream { report, .. } | ToolError::Failed { report, .. }) => {
                        report.fallback = Some(name);
                    }
                }
                result
            }
        }
    }
}

/// Errors after which the fallback answers: nothing reached the upstream, or it is known to be failing.
fn falls_back_on(error: &Error) -> bool {
    matches!(
        error,
        Error::CircuitOpen { .. }
            | Error::Overloaded { .. }
            | Error::Stopped(StopReason::AttemptsExhausted { .. } | StopReason::RetryBudgetExhausted)
    )
}

fn answer(response: Response<Bytes>, report: crate::OutcomeReport) -> ToolAnswer {
    ToolAnswer {
        status: response.status().as_u16(),
        body: json_body(response.body()),
        report,
    }
}

/// The body as JSON; `null` when empty, a JSON string when it is not JSON.
fn json_body(body: &Bytes) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}
