//! The client core: what a [`ToolClient`](crate::ToolClient) and a [`ModelClient`](crate::ModelClient) share.
//!
//! A tool call and a model call are the same thing to the stack: a body to send, under one deadline, to an
//! upstream with its own admission, retries, breaker and attempt timeout. So both clients are thin over this:
//! - [`Core`] — the call's context (the deadline: the call's own, the enclosing scope's and its run's, the
//!   earliest; its run; its cancellation), the encoding of what is sent and the server's body limit;
//! - [`Upstream`] — one upstream's stack, and a trip through it that comes back as a typed
//!   [`Trip`](crate::outcome::Trip) (`upstream.rs`);
//! - [`Failure`] and [`CallError`] — how a call that did not succeed ended, and the one error shape both clients
//!   answer with (`error.rs`).

mod error;
pub(crate) mod upstream;

use std::sync::Arc;

use ballast_config::ServerConfig;
use ballast_core::{CallKind, Deadline, Instant, Priority, TraceContext};
use bytes::Bytes;
use http::Response;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use error::{CallError, Refusal, StateRecordError};
pub(crate) use upstream::{Parts, Upstream};

use crate::{Body, CallContext, Cancel, Error, Report, Runs};

/// What every call may say about itself besides what it sends: its deadline, its run, its cancellation.
#[derive(Clone, Debug, Default)]
pub(crate) struct CallOptions {
    /// The call's own deadline: its run, if any, is offered it and keeps the earliest.
    pub(crate) deadline: Option<Deadline>,
    /// A bound of this call only, never its run's (an SDK's per-request timeout, read by the gateway).
    pub(crate) call_bound: Option<Deadline>,
    /// Hops the request made through other Ballasts before this one (`ballast-hop`): with any, the call gets one
    /// attempt here — retries happen at exactly one layer.
    pub(crate) hops: Option<u32>,
    pub(crate) run_id: Option<String>,
    /// Whose run it is (the gateway's principal): runs are looked up per owner.
    pub(crate) run_owner: Option<String>,
    pub(crate) cancel: Option<CancellationToken>,
    pub(crate) trace: Option<TraceContext>,
    /// A priority asked for this call; it only ever lowers the configured one.
    pub(crate) priority: Option<Priority>,
}

impl CallOptions {
    /// The call's priority: the configured one, lowered by the one the call asked for.
    pub(crate) fn priority_under(&self, configured: Priority) -> Priority {
        self.priority.map_or(configured, |p| p.min(configured))
    }
}

/// The setters every call has, tool and model calls alike, written once: each sets a field of the call's
/// `options` ([`CallOptions`]). Used inside the `impl` of [`ToolCall`](crate::ToolCall) and
/// [`ModelCall`](crate::model::ModelCall).
macro_rules! call_options_setters {
    () => {
        /// The call's deadline (otherwise the enclosing [`scope`](crate::context::scope)'s, else the configured
        /// default timeout from now). It is offered to the call's run, which keeps the earliest any call gave it;
        /// a model call's deployments all share it.
        pub fn deadline(mut self, deadline: ballast_core::Deadline) -> Self {
            self.options.deadline = Some(deadline);
            self
        }

        /// A bound on this call only, never on its run: what an SDK's per-request timeout says (the gateway
        /// reads `x-stainless-timeout`), limiting one HTTP call, not the agent request. The call's deadline is
        /// the earliest of this, its own [`deadline`](Self::deadline) and its run's.
        pub fn call_deadline(mut self, bound: ballast_core::Deadline) -> Self {
            self.options.call_bound = Some(bound);
            self
        }

        /// The call belongs to run `id`: it shares the run's deadline (the earliest any call gave it) and retry
        /// allowance with every other call of the run, tool and model calls alike.
        pub fn run(mut self, id: impl Into<String>) -> Self {
            self.options.run_id = Some(id.into());
            self
        }

        /// Whose call it is (a gateway's principal): its runs, and the records of which deployment keeps the
        /// state its responses create, are kept per owner — two callers that use the same run id share nothing.
        pub fn owner(mut self, owner: impl Into<String>) -> Self {
            self.options.run_owner = Some(owner.into());
            self
        }

        /// A priority for this call at admission; it may only lower the configured one (what
        /// `ballast-priority` does over HTTP).
        pub fn priority(mut self, priority: ballast_core::Priority) -> Self {
            self.options.priority = Some(priority);
            self
        }

        /// The call came through `hops` other Ballasts (their `ballast-hop`): with one or more, it gets a single
        /// attempt here (on each deployment, for a model call), since retries happen at exactly one layer, and
        /// its attempts say `ballast-hop: hops + 1`.
        pub fn hops(mut self, hops: u32) -> Self {
            self.options.hops = Some(hops);
            self
        }

        /// The trace the call belongs to (the agent's own request's `traceparent`, parsed with
        /// [`TraceContext::parse`](crate::policy::TraceContext::parse)): its trace id is the call's request id
        /// in spans, and every attempt sends it upstream in `traceparent` with a parent id of its own. Without
        /// one, a call of a run logs the run's trace id as its request id, any other call a new one, and nothing
        /// is sent.
        pub fn trace(mut self, trace: crate::policy::TraceContext) -> Self {
            self.options.trace = Some(trace);
            self
        }

        /// Cancels the call when `token` is cancelled (the user went away, the agent request was aborted):
        /// queued work, backoff sleeps and waits stop at once, no further attempt, deployment or fallback starts,
        /// and the call ends with [`Error::Cancelled`](crate::Error::Cancelled) — a committed stream with a
        /// `Cancelled` error item. A side-effecting tool attempt already sent is not abandoned: it runs to its own
        /// timeout in the background and its outcome lands in the report (keep it with
        /// [`ToolClient::call_with_report`](crate::tool::ToolClient::call_with_report)). The call listens on a child of
        /// `token`: it never cancels the caller's token itself.
        pub fn cancel_token(mut self, token: tokio_util::sync::CancellationToken) -> Self {
            self.options.cancel = Some(token);
            self
        }
    };
}
pub(crate) use call_options_setters;

/// The span of one call (DESIGN.md, "Observability"): `ballast.call` at INFO, with its kind (`tool`, `model`),
/// target and run id; its `request_id` (the trace id, sent upstream in `traceparent`), its stable `code` (`ok` for
/// a success) and its `stop` reason are recorded as the call goes. Every event of the call — its attempts' spans
/// (`ballast.attempt`, DEBUG), the layers' logs — is inside it. Never a body or a secret.
pub(crate) fn call_span(kind: &'static str, target: &str, run_id: Option<&str>) -> tracing::Span {
    tracing::info_span!(
        "ballast.call",
        kind,
        target,
        run_id,
        request_id = tracing::field::Empty,
        code = tracing::field::Empty,
        stop = tracing::field::Empty,
    )
}

/// Records the call's request id on its span (a handle on the span the call's future runs in: cheaper than
/// looking up the current span).
pub(crate) fn record_request_id(span: &tracing::Span, ctx: &CallContext) {
    if !span.is_disabled() {
        span.record("request_id", tracing::field::display(ctx.trace.trace_id_hex()));
    }
}

/// Records how a call ended on its span: `code` (`ok`, or the stable code), and `stop` when something stopped
/// it.
pub(crate) fn record_end(span: &tracing::Span, report: &crate::OutcomeReport) {
    if span.is_disabled() {
        return;
    }
    let answering = report.answering();
    span.record(
        "code",
        answering.code.map_or("ok", ballast_core::ErrorCode::as_str),
    );
    if let Some(stop) = &answering.stop {
        span.record("stop", tracing::field::display(stop));
    }
}

/// The server settings and the runs every client of one configuration shares.
#[derive(Debug)]
pub(crate) struct Core {
    server: ServerConfig,
    runs: Arc<Runs>,
}

impl Core {
    pub(crate) fn new(server: &ServerConfig, runs: Arc<Runs>) -> Self {
        Core {
            server: server.clone(),
            runs,
        }
    }

    /// The context of a call of `kind` to `target` with `options`, at `now`: its deadline by
    /// [`call_deadline`](crate::context::call_deadline) (the default and the call-only bound never become the
    /// run's deadline: a run's deadline is one an agent asked for); it listens on a child of the caller's token,
    /// and nothing cancels it without one.
    pub(crate) fn context(
        &self,
        options: &CallOptions,
        kind: CallKind,
        priority: Priority,
        target: Option<Arc<str>>,
        report: Report,
        now: Instant,
    ) -> CallContext {
        let owner = options.run_owner.as_deref();
        let run = options
            .run_id
            .as_deref()
            .map(|id| self.runs.get_owned(owner, id, now));
        let deadline = crate::context::call_deadline(
            run.as_deref(),
            options.deadline,
            options.call_bound,
            self.server.default_timeout,
            &self.server,
            now,
        );
        if let Some(run) = &run {
            // Each logical call grows the run's allowance by its share.
            run.note_call();
        }
        // The request id: the caller's trace, else its run's, else a new one.
        let trace = options
            .trace
            .or_else(|| run.as_ref().map(|run| run.trace()))
            .unwrap_or_else(crate::trace::new_trace);
        CallContext {
            deadline,
            trace,
            propagate_trace: options.trace.is_some(),
            run,
            priority,
            hop: options.hops.unwrap_or(0),
            retries_here: options.hops.is_none_or(|hops| hops == 0),
            kind,
            target,
            report,
            cancel: options
                .cancel
                .as_ref()
                .map_or_else(Cancel::never, Cancel::child_of),
            stream: None,
            stream_events_only: false,
            run_offer: options.deadline.map(|own| self.settle(own)),
        }
    }

    /// `deadline` with the server's reserve and least attempt, as every deadline of a call carries them.
    pub(crate) fn settle(&self, deadline: Deadline) -> Deadline {
        deadline
            .with_reserve(self.server.reserve)
            .with_min_attempt(self.server.min_attempt)
    }

    /// `value` as the JSON body of a request; refused ([`Error::BodyTooLarge`]) when over the server's
    /// `body_limit`, before anything is sent.
    pub(crate) fn encode(&self, value: &impl Serialize) -> Result<Bytes, Error> {
        let body = serde_json::to_vec(value).map_err(|e| Error::transport(false, e))?;
        self.within_limit(Bytes::from(body))
    }

    /// `body`, refused ([`Error::BodyTooLarge`]) when over the server's `body_limit`, before anything is sent.
    pub(crate) fn within_limit(&self, body: Bytes) -> Result<Bytes, Error> {
        let limit = self.server.body_limit;
        if u64::try_from(body.len()).unwrap_or(u64::MAX) > limit {
            return Err(Error::BodyTooLarge {
                limit: usize::try_from(limit).unwrap_or(usize::MAX),
            });
        }
        Ok(body)
    }
}

/// How a call that did not succeed ended.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The upstream's own answer, not a success (a 4xx, a 5xx after retries, a 409 still in progress).
    Answer(Response<Body>),
    /// No upstream answer to return.
    Error(Error),
}

impl Failure {
    /// The failure of a result that is not a 2xx.
    pub(crate) fn of(result: Result<Response<Body>, Error>) -> Failure {
        match result {
            Ok(response) => Failure::Answer(response),
            Err(error) => Failure::Error(error),
        }
    }
}

/// An answer's `content-type`, as its upstream sent it (what a proxy passes on with its bytes).
pub(crate) fn content_type<B>(response: &http::Response<B>) -> Option<http::HeaderValue> {
    response.headers().get(http::header::CONTENT_TYPE).cloned()
}

/// A body's bytes (empty for a stream).
pub(crate) fn body_bytes(body: &Body) -> Bytes {
    body.as_bytes().cloned().unwrap_or_default()
}

/// A body as JSON: `null` when empty, a JSON string when it is not JSON.
pub(crate) fn json_body(body: &Body) -> Value {
    json_bytes(body.as_bytes().map_or(&[][..], |b| &b[..]))
}

/// Bytes as JSON: `null` when empty, a JSON string when they are not JSON.
pub(crate) fn json_bytes(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}
