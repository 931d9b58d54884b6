//! One model route's client: the call's context, the trip through the deployments (`route.rs`), then the
//! answer, the stream, or the error — each with the report of everything tried. Every API goes the same way
//! (`api.rs` says what differs; `answer.rs` reads an answer or a failure); the Responses API's own calls are in
//! `respond.rs`, where they may go and what they record in `routing.rs`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ballast_config::{Api, ModelRoute};
use ballast_core::CallKind;
use serde_json::Value;
use tracing::Instrument as _;

use super::api::{Protocol, Streamed};
use super::call::{
    ChatAnswer, ChatCall, EmbeddingsAnswer, EmbeddingsCall, MessagesAnswer, MessagesCall, ModelAnswer,
    ModelCall, TokenCountAnswer,
};
use super::chat::Chat;
use super::embeddings::Embeddings;
use super::messages::{CountTokens, Messages};
use super::route::{Committed, Route, Targets, Tried};
use super::stream::{ChatStream, MessagesStream, ModelStream, Source};
use crate::client::{CallError, Refusal, call_span, record_end, record_request_id};
use crate::context::scoped;
use crate::metrics::CallMetrics;
use crate::{CallContext, Report, clock};

/// A client for one configured model route: its deployments in fallback order, under one deadline, for every
/// API the deployments speak — Chat Completions ([`complete`](ModelClient::complete),
/// [`stream`](ModelClient::stream)), the Responses API ([`respond`](ModelClient::respond),
/// [`respond_stream`](ModelClient::respond_stream), and a kept response's
/// [`retrieve`](ModelClient::retrieve_response), [`delete`](ModelClient::delete_response) and
/// [`cancel`](ModelClient::cancel_response)), embeddings ([`embed`](ModelClient::embed)) and Anthropic's Messages
/// ([`message`](ModelClient::message), [`message_stream`](ModelClient::message_stream),
/// [`count_tokens`](ModelClient::count_tokens)). Cheap to clone;
/// clones share the deployments' breakers, budgets and the runs.
///
/// Each deployment has its own stack — deadline, retry (its own budget), breaker (its own), attempt — shared by
/// every API it speaks (one provider, one capacity), and a call goes through the deployments that speak its API
/// in order: the next one is tried when a deployment's breaker is open, its retries or budget are spent, it asks
/// for a `Retry-After` too long, or its quota is spent (`insufficient_quota`, at once — even when a stream says
/// so in an event after `response.created`). With more than one deployment the first may use at most
/// `primary_share` of the time left. A context-length error is answered, moved to the next deployment, or
/// truncated and resent, as the route's `context.on_overflow` says. Every field of the request but `model` goes
/// upstream as the caller sent it; every field of the answer comes back as the upstream sent it.
///
/// A Responses request that continues state a provider keeps (`previous_response_id`, `conversation`) goes only
/// to the deployment that made it, with no fallback (`model/routing.rs`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use ballast::{Clients, model::{ChatRequest, ChatCall}, transport::ServiceTransport};
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
/// let models = Clients::from_config(&config).build(transport).unwrap().models;
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
    pub(super) route: Arc<Route>,
    metrics: Arc<CallMetrics>,
}

impl ModelClient {
    pub(super) fn from_route(route: Route) -> Self {
        let targets: Vec<&str> = route.deployments.iter().map(|d| &*d.target).collect();
        let metrics = Arc::new(CallMetrics::new(&route.config.name, &targets));
        ModelClient {
            route: Arc::new(route),
            metrics,
        }
    }

    /// The route's name (what callers put in `model`).
    pub fn name(&self) -> &str {
        &self.route.config.name
    }

    /// The route's configuration.
    pub fn config(&self) -> &ModelRoute {
        &self.route.config
    }

    /// Whether any deployment of the route speaks `api`.
    pub fn speaks(&self, api: Api) -> bool {
        self.route.deployments.iter().any(|d| d.speaks(api))
    }

    /// The circuit breaker of deployment `index` (for `/status` and tests).
    pub fn breaker(&self, index: usize) -> Option<&Arc<ballast_core::CircuitBreaker>> {
        self.route.deployments.get(index).map(|d| d.upstream.breaker())
    }

    /// The adaptive throttle of deployment `index` (`None` when off or no such deployment).
    pub fn throttle(&self, index: usize) -> Option<&Arc<ballast_core::AdaptiveThrottle>> {
        self.route
            .deployments
            .get(index)
            .and_then(|d| d.upstream.throttle())
    }

    /// The account limits of deployment `index`, when it declares them (for `/status`).
    pub fn limits(&self, index: usize) -> Option<&Arc<crate::AccountLimits>> {
        self.route
            .deployments
            .get(index)
            .and_then(|d| d.upstream.limits())
    }

    /// The admission of deployment `index`: its concurrency limit and priority queue, for `/status`.
    pub fn admission(&self, index: usize) -> Option<&crate::layer::AdmissionLayer> {
        self.route
            .deployments
            .get(index)
            .and_then(|d| d.upstream.admission())
    }

    /// The name of deployment `index` (`route[index] model`), as reports and metrics give it.
    pub fn deployment(&self, index: usize) -> Option<&str> {
        self.route.deployments.get(index).map(|d| d.name.as_str())
    }

    /// The retry budget of deployment `index`.
    pub fn budget(&self, index: usize) -> Option<&Arc<dyn ballast_core::RetryBudget>> {
        self.route.deployments.get(index).map(|d| d.upstream.budget())
    }

    /// Asks the route for a chat completion (not streamed: a request's `stream: true` and `stream_options` are
    /// dropped; use [`ModelClient::stream`] to stream). The deployments that speak Chat Completions are tried in
    /// order under one deadline; the answer, or the last deployment's error, carries the report of every
    /// deployment tried.
    pub fn complete(
        &self,
        call: ChatCall,
    ) -> impl Future<Output = Result<ChatAnswer, CallError>> + Send + '_ {
        let mut call = call;
        Chat::set_stream(&mut call.request, false);
        self.in_span(self.span_of(&call), |span| {
            let ctx = self.context(&call);
            self.unary::<Chat>(call.request, ctx, Targets::Speaking(Api::Chat), span, true)
        })
    }

    /// Asks the route for a streamed chat completion (`stream: true` is set). Until the stream's commit point
    /// (its first chunk with content), a failure is retried and falls back like any other; after it, nothing is
    /// retried: the returned [`ChatStream`] yields the chunks, and a failure after the commit (a cut, a stall
    /// longer than `stream_idle_timeout`, the deadline) is its last item, an error — never a clean end.
    ///
    /// Token usage is counted whatever the caller asked: the request asks the provider for it
    /// (`stream_options.include_usage`), and when the caller did not, the extra chunk that carries it (no
    /// choices, only `usage`) is dropped from the stream after it is counted.
    pub fn stream(&self, call: ChatCall) -> impl Future<Output = Result<ChatStream, CallError>> + Send + '_ {
        let mut call = call;
        Chat::set_stream(&mut call.request, true);
        let asked = ask_for_usage(&mut call.request.extra);
        // The span covers the call up to its commit point; the stream's own end is its reader's.
        self.in_span(self.span_of(&call), |span| {
            let ctx = self.context(&call);
            async move {
                let targets = Targets::Speaking(Api::Chat);
                let stream = self.streamed::<Chat>(call, ctx, targets, span).await?;
                Ok(if asked {
                    stream
                } else {
                    stream.without_usage_chunk()
                })
            }
        })
    }

    /// Asks the route for embeddings, through the deployments that speak the embeddings API in order.
    pub fn embed(
        &self,
        call: EmbeddingsCall,
    ) -> impl Future<Output = Result<EmbeddingsAnswer, CallError>> + Send + '_ {
        self.in_span(self.span_of(&call), |span| {
            let ctx = self.context(&call);
            self.unary::<Embeddings>(call.request, ctx, Targets::Speaking(Api::Embeddings), span, true)
        })
    }

    /// Asks the route for a message of Anthropic's Messages API (not streamed: a request's `stream: true` is
    /// dropped; use [`ModelClient::message_stream`] to stream), through the deployments that speak it in order,
    /// under one deadline, as [`complete`](ModelClient::complete) does for chat.
    pub fn message(
        &self,
        call: MessagesCall,
    ) -> impl Future<Output = Result<MessagesAnswer, CallError>> + Send + '_ {
        let mut call = call;
        Messages::set_stream(&mut call.request, false);
        self.in_span(self.span_of(&call), |span| {
            let ctx = self.context(&call);
            self.unary::<Messages>(call.request, ctx, Targets::Speaking(Api::Messages), span, true)
        })
    }

    /// Asks the route for a streamed message (`stream: true` is set). Until the stream's commit point (its first
    /// content block: `message_start` and `ping` are held back), a failure — an `overloaded_error` event included
    /// — is retried and falls back like any other; after it, nothing is retried: the returned [`MessagesStream`]
    /// yields the events, and a failure after the commit is its last item, an error, never a clean end.
    pub fn message_stream(
        &self,
        call: MessagesCall,
    ) -> impl Future<Output = Result<MessagesStream, CallError>> + Send + '_ {
        let mut call = call;
        Messages::set_stream(&mut call.request, true);
        self.in_span(self.span_of(&call), |span| {
            let ctx = self.context(&call);
            self.streamed::<Messages>(call, ctx, Targets::Speaking(Api::Messages), span)
        })
    }

    /// Counts a Messages request's input tokens (`POST /messages/count_tokens`), through the deployments that
    /// speak Messages in order: a read, retried and moved on as any call; no tokens are spent or counted.
    pub fn count_tokens(
        &self,
        call: MessagesCall,
    ) -> impl Future<Output = Result<TokenCountAnswer, CallError>> + Send + '_ {
        let mut call = call;
        call.request.stream = None;
        self.in_span(self.span_of(&call), |span| {
            let ctx = self.context(&call);
            self.unary::<CountTokens>(call.request, ctx, Targets::Speaking(Api::Messages), span, false)
        })
    }

    /// `work` inside `span`, the call's (`span_of`).
    pub(super) fn in_span<F: Future>(
        &self,
        span: tracing::Span,
        work: impl FnOnce(tracing::Span) -> F,
    ) -> tracing::instrument::Instrumented<F> {
        work(span.clone()).instrument(span)
    }

    /// The span of `call` (`ballast.call`, kind `model`), for work that takes the call by value.
    pub(super) fn span_of<R>(&self, call: &ModelCall<R>) -> tracing::Span {
        call_span("model", &self.route.config.name, call.options.run_id.as_deref())
    }

    /// A call of API `P` through `targets`, not streamed: its answer read as `P`'s (its tokens counted as the
    /// answer's when `count_tokens`).
    pub(super) async fn unary<P: Protocol>(
        &self,
        request: P::Request,
        ctx: CallContext,
        targets: Targets,
        span: tracing::Span,
        count_tokens: bool,
    ) -> Result<ModelAnswer<P::Answer>, CallError> {
        self.refuse_unspoken(P::API, &targets)?;
        record_request_id(&span, &ctx);
        let mut tried = Tried::default();
        let sent = self
            .route
            .through_route::<P>(request, &ctx, &mut tried, &targets)
            .await;
        let result = match sent {
            Ok(committed) => self.answer::<P, P::Answer>(committed, &tried, count_tokens),
            Err(failure) => Err(self.failed::<P>(failure, &tried)),
        };
        self.observe(&span, result.as_ref().map_or_else(|e| e.report(), |a| &a.report));
        result
    }

    /// A call of API `P` through `targets`, streamed: the stream after its commit point.
    pub(super) async fn streamed<P: Streamed>(
        &self,
        call: ModelCall<P::Request>,
        ctx: CallContext,
        targets: Targets,
        span: tracing::Span,
    ) -> Result<ModelStream<P::Event>, CallError> {
        let (committed, tried, ctx) = self
            .to_commit::<P>(call.request, ctx, &targets, call.commit_by, &span)
            .await?;
        Ok(ModelStream::start(
            self.source::<P>(&committed, call.idle),
            committed,
            tried,
            &ctx,
        ))
    }

    /// A streamed call up to its commit point (bounded by `commit_by`, a scope of the trip only: once committed,
    /// the stream runs to the call's own deadline): the committed answer, what was tried, the call's context.
    pub(super) async fn to_commit<P: Streamed>(
        &self,
        request: P::Request,
        mut ctx: CallContext,
        targets: &Targets,
        commit_by: Option<ballast_core::Deadline>,
        span: &tracing::Span,
    ) -> Result<(Committed, Tried, CallContext), CallError> {
        self.refuse_unspoken(P::API, targets)?;
        record_request_id(span, &ctx);
        ctx.stream = Some(P::COMMIT);
        let mut tried = Tried::default();
        // Each arm makes its own future: one held in a local across the await would be kept twice.
        let sent = match commit_by {
            Some(by) => {
                let settle = self.route.core.settle(by);
                scoped(
                    settle,
                    self.route.through_route::<P>(request, &ctx, &mut tried, targets),
                )
                .await
            }
            None => {
                self.route
                    .through_route::<P>(request, &ctx, &mut tried, targets)
                    .await
            }
        };
        match sent {
            Ok(committed) => {
                // Counted at its commit point: what follows is the stream's.
                self.observe(span, &tried.report());
                Ok((committed, tried, ctx))
            }
            Err(failure) => {
                let error = self.failed::<P>(failure, &tried);
                self.observe(span, error.report());
                Err(error)
            }
        }
    }

    /// Counts a call that ended (or committed) with `report`, and writes how on its span.
    pub(super) fn observe(&self, span: &tracing::Span, report: &crate::OutcomeReport) {
        self.metrics.observe(report, true);
        record_end(span, report);
    }

    /// How the stream of `committed` is read.
    pub(super) fn source<P: Streamed>(
        &self,
        committed: &Committed,
        idle: Option<Duration>,
    ) -> Source<P::Event> {
        let route_idle = self.route.config.stream_idle_timeout;
        Source {
            route: self.name().to_owned(),
            deployment: self.route.deployments[committed.index].name.clone(),
            idle: idle.map_or(route_idle, |idle| idle.min(route_idle)),
            read: P::READ,
        }
    }

    /// Refuses a call of `api` that no deployment of `targets` speaks.
    fn refuse_unspoken(&self, api: Api, targets: &Targets) -> Result<(), CallError> {
        let speaks = match targets {
            Targets::Speaking(api) => self.speaks(*api),
            Targets::Pinned(index) => self.route.deployments[*index].speaks(api),
        };
        if speaks {
            Ok(())
        } else {
            Err(self.refused(Refusal::ApiNotServed(api)))
        }
    }

    pub(super) fn refused(&self, refusal: Refusal) -> CallError {
        self.route.refused(refusal)
    }

    /// The call's context (deadline: the call's, the scope's and the run's earliest; cancellation); each
    /// deployment tried gets a report of its own.
    pub(super) fn context<R>(&self, call: &ModelCall<R>) -> CallContext {
        let kind = CallKind::Model;
        let report = Report::default();
        let configured = self.route.config.priority;
        let priority = call.options.priority_under(configured);
        self.route
            .core
            .context(&call.options, kind, priority, None, report, clock::now())
    }
}

/// Asks a chat stream's provider for its token usage (`stream_options.include_usage`); whether the caller had.
fn ask_for_usage(extra: &mut serde_json::Map<String, Value>) -> bool {
    let options = extra
        .entry("stream_options")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !options.is_object() {
        *options = Value::Object(serde_json::Map::new());
    }
    let Some(options) = options.as_object_mut() else {
        unreachable!("an object was just put there")
    };
    let asked = options.get("include_usage") == Some(&Value::Bool(true));
    options.insert("include_usage".into(), Value::Bool(true));
    asked
}
