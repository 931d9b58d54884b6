//! One model route's client: the call's context, the trip through the deployments (`route.rs`), then the
//! answer, the stream, or the error — each with the report of everything tried.

use std::future::Future;
use std::sync::Arc;

use tracing::Instrument as _;

use ballast_config::ModelRoute;
use ballast_core::{CallKind, ErrorCode};

use super::ChatResponse;
use super::call::{ChatAnswer, ChatCall, ChatError};
use super::commit::commit;
use super::deployment::DeploymentClient;
use super::route::{Committed, Tried};
use super::stream::ChatStream;
use super::usage::{record_tokens, usage_of_body};
use crate::client::{CallError, Core, Failure, call_span, json_body, record_end, record_request_id};
use crate::metrics::CallMetrics;
use crate::{CallContext, Report, clock};

/// A client for one configured model route: its deployments in fallback order, under one deadline. Cheap to
/// clone; clones share the deployments' breakers, budgets and the runs.
///
/// Each deployment has its own stack — deadline, retry (its own budget), breaker (its own), attempt — and a call
/// goes through them in order: the next one is tried when a deployment's breaker is open, its retries or budget
/// are spent, it asks for a `Retry-After` too long, or its quota is spent (`insufficient_quota`, at once). With
/// more than one deployment the first may use at most `primary_share` of the time left. A context-length error
/// is answered, moved to the next deployment, or truncated and resent, as the route's `context.on_overflow`
/// says. Every field of the request but `model` goes upstream as the caller sent it; every field of the answer
/// comes back as the upstream sent it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use ballast::{ModelClients, ChatRequest, model::ChatCall, transport::ServiceTransport};
/// use ballast_config::Config;
/// use serde_json::json;
///
/// let config = Config::from_toml_str(r#"
///     version = 1
///     [[models]]
///     name = "agent"
///     deployments = [ { base_url = "http://chaos/v1", model = "mock" } ]
/// "#).unwrap();
/// // In process, against the chaos model; in production, `HttpTransport` and the process environment.
/// let transport = ServiceTransport::new(ballast_chaos::router(ballast_chaos::Profile::default()));
/// // API keys named in `api_key_env` come from the process environment (this route names none).
/// let models = ModelClients::from_config(&config, transport).unwrap();
/// let request: ChatRequest = serde_json::from_value(json!({
///     "model": "agent",
///     "messages": [{"role": "user", "content": "Refund order 1234, op=op-1"}],
///     "reasoning_effort": "low",
/// })).unwrap();
/// let answer = models.route("agent").unwrap().complete(ChatCall::new(request)).await.unwrap();
/// let message = answer.response.choices[0].message.as_ref().unwrap();
/// assert!(message.has_tool_calls());
/// println!("{}", answer.report);
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ModelClient {
    pub(super) inner: Arc<Inner>,
    metrics: Arc<CallMetrics>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) route: ModelRoute,
    pub(super) core: Core,
    pub(super) deployments: Vec<DeploymentClient>,
}

impl ModelClient {
    pub(super) fn from_inner(inner: Inner) -> Self {
        let targets: Vec<&str> = inner.deployments.iter().map(|d| &*d.target).collect();
        let metrics = Arc::new(CallMetrics::new(&inner.route.name, &targets));
        ModelClient {
            inner: Arc::new(inner),
            metrics,
        }
    }

    /// The route's name (what callers put in `model`).
    pub fn name(&self) -> &str {
        &self.inner.route.name
    }

    /// The route's configuration.
    pub fn config(&self) -> &ModelRoute {
        &self.inner.route
    }

    /// The circuit breaker of deployment `index` (for `/status` and tests).
    pub fn breaker(&self, index: usize) -> Option<&Arc<ballast_core::CircuitBreaker>> {
        self.inner.deployments.get(index).map(|d| d.upstream.breaker())
    }

    /// The adaptive throttle of deployment `index` (`None` when off or no such deployment).
    pub fn throttle(&self, index: usize) -> Option<&Arc<ballast_core::AdaptiveThrottle>> {
        self.inner
            .deployments
            .get(index)
            .and_then(|d| d.upstream.throttle())
    }

    /// The retry budget of deployment `index`.
    pub fn budget(&self, index: usize) -> Option<&Arc<dyn ballast_core::RetryBudget>> {
        self.inner.deployments.get(index).map(|d| d.upstream.budget())
    }

    /// Asks the route for a completion (not streamed: a request's `stream: true` and `stream_options` are dropped; use
    /// [`ModelClient::stream`] to stream). The deployments are tried in order under one deadline; the answer, or
    /// the last deployment's error, carries the report of every deployment tried.
    pub fn complete(
        &self,
        call: ChatCall,
    ) -> impl Future<Output = Result<ChatAnswer, ChatError>> + Send + '_ {
        let span = call_span("model", &self.inner.route.name, call.options.run_id.as_deref());
        self.complete_in_span(call, span.clone()).instrument(span)
    }

    /// [`ModelClient::complete`], inside the call's span.
    async fn complete_in_span(&self, call: ChatCall, span: tracing::Span) -> Result<ChatAnswer, ChatError> {
        let mut call = call;
        if call.request.stream == Some(true) {
            call.request.stream = None;
        }
        // Options of a stream (`include_usage`) on a request that is not one: OpenAI refuses them with a 400.
        call.request.extra.remove("stream_options");
        let ctx = self.context(&call);
        record_request_id(&span, &ctx);
        let mut tried = Tried::default();
        let sent = self.through_route(call.request, &ctx, &mut tried).await;
        let result = match sent {
            Ok(committed) => self.answer(committed, &tried),
            Err(failure) => Err(self.failed(failure, &tried)),
        };
        let report = match &result {
            Ok(answer) => &answer.report,
            Err(error) => error.report(),
        };
        self.metrics.observe(report, true);
        record_end(&span, report);
        result
    }

    /// Asks the route for a streamed completion (`stream: true` is set). Until the first event of an upstream's
    /// stream, a failure is retried and falls back like any other; the first event is the commit point, after
    /// which nothing is retried: the returned [`ChatStream`] yields the chunks, and a failure after the commit
    /// (a cut, a stall longer than `stream_idle_timeout`, the deadline) is its last item, an error — never a
    /// clean end.
    pub fn stream(&self, call: ChatCall) -> impl Future<Output = Result<ChatStream, ChatError>> + Send + '_ {
        // The span covers the call up to its commit point (its first event); the stream's own end is its reader's.
        let span = call_span("model", &self.inner.route.name, call.options.run_id.as_deref());
        self.stream_in_span(call, span.clone()).instrument(span)
    }

    /// [`ModelClient::stream`], inside the call's span.
    async fn stream_in_span(&self, call: ChatCall, span: tracing::Span) -> Result<ChatStream, ChatError> {
        let mut call = call;
        call.request.stream = Some(true);
        let mut ctx = self.context(&call);
        record_request_id(&span, &ctx);
        ctx.stream = Some(commit);
        let mut tried = Tried::default();
        let sent = self.through_route(call.request, &ctx, &mut tried).await;
        match sent {
            Ok(committed) => {
                // Counted at its commit point: what follows is the stream's.
                let report = tried.report();
                self.metrics.observe(&report, true);
                record_end(&span, &report);
                Ok(ChatStream::start(self, committed, tried, &ctx))
            }
            Err(failure) => {
                let error = self.failed(failure, &tried);
                self.metrics.observe(error.report(), true);
                record_end(&span, error.report());
                Err(error)
            }
        }
    }

    /// The call's context (deadline: the call's, the scope's and the run's earliest; cancellation); each
    /// deployment tried gets a report of its own.
    fn context(&self, call: &ChatCall) -> CallContext {
        let kind = CallKind::Model;
        let report = Report::default();
        let configured = self.inner.route.priority;
        let priority = call.priority.map_or(configured, |p| p.min(configured));
        self.inner
            .core
            .context(&call.options, kind, priority, None, report, clock::now())
    }

    /// A 2xx answer read as a completion, its tokens recorded as the answer's.
    fn answer(&self, committed: Committed, tried: &Tried) -> Result<ChatAnswer, ChatError> {
        let Committed { index, response } = committed;
        let report = &tried.reports[index];
        let (parts, body) = response.into_parts();
        let bytes = body.as_bytes().map_or(&[][..], |b| &b[..]);
        match serde_json::from_slice::<ChatResponse>(bytes) {
            Ok(parsed) => {
                record_tokens(report, parsed.usage.as_ref(), true);
                Ok(ChatAnswer {
                    response: parsed,
                    status: parts.status.as_u16(),
                    headers: parts.headers,
                    deployment: self.inner.deployments[index].name.clone(),
                    truncated: tried.truncated,
                    report: tried.report(),
                })
            }
            Err(error) => {
                // Tokens the upstream reported are spent, whatever became of the answer.
                record_tokens(report, usage_of_body(bytes).as_ref(), false);
                report.update(|r| r.code = Some(ErrorCode::UpstreamError));
                Err(CallError::Malformed {
                    target: self.name().to_owned(),
                    reason: format!("not a chat completion: {error}"),
                    report: Box::new(tried.report()),
                })
            }
        }
    }

    /// The last failure as the caller's error (the tokens of an error answer are the last deployment's, spent).
    pub(super) fn failed(&self, failure: Failure, tried: &Tried) -> ChatError {
        let target = self.name().to_owned();
        match failure {
            Failure::Answer(response) => {
                let bytes = response.body().as_bytes().map_or(&[][..], |b| &b[..]);
                if let Some(last) = tried.reports.last() {
                    record_tokens(last, usage_of_body(bytes).as_ref(), false);
                }
                CallError::Upstream {
                    target,
                    status: response.status().as_u16(),
                    body: json_body(response.body()),
                    bytes: crate::client::body_bytes(response.body()),
                    report: Box::new(tried.report()),
                }
            }
            Failure::Error(error) => CallError::Failed {
                target,
                error,
                report: Box::new(tried.report()),
            },
        }
    }
}
