//! The attempt layer: one attempt, bounded by its own timeout, labelled for the upstream, and recorded.
//!
//! Why a layer per attempt: the deadline bounds the whole call, but each attempt needs its own, shorter bound —
//! `min(per_try, remaining - reserve)` — so that a hung attempt leaves time for the next one, and so that the
//! upstream is told how long **this** attempt will wait (it can give up when its caller has). It sits innermost,
//! below the retry layer and the breaker, right above the transport, and runs once per attempt:
//!
//! - **The timeout.** [`Deadline::attempt_timeout`](ballast_core::Deadline::attempt_timeout) of the call's
//!   effective deadline (its run's and the enclosing [`scope`](crate::context::scope)'s included) and `per_try`. When
//!   what is left cannot hold the least attempt worth starting, nothing is sent: [`Error::DeadlineExceeded`].
//!   An attempt that outlives its timeout fails with [`Error::Timeout`] (it was sent), marked `by_deadline` when
//!   its timeout was what the caller's deadline left, shorter than `per_try` and than the route's share of the
//!   time for this deployment (`primary_share`, the route's own limit): the caller's deadline ended it, and the
//!   breaker and the throttle above do not count it.
//! - **The headers.** `ballast-timeout-ms` and `x-envoy-expected-rq-timeout-ms` (the attempt's timeout; for a
//!   streamed answer, whose timeout bounds only the first byte, the time left to the call's deadline),
//!   `ballast-attempt` (the [`AttemptNumber`] the retry layer set, 1 without one) and `ballast-hop` (the
//!   context's hop + 1), replacing any value the request carried.
//! - **The report.** Each attempt is a line of the call's report: its number, status or error, duration, and
//!   whether it may have been sent (no only for errors that prove it never left). This layer writes the lines of
//!   the attempts it runs — it alone sees each of them start and end, also one that outlives everyone above (the
//!   breaker writes the line of an attempt it refused before it got here) — and the one call-level line an
//!   attempt can settle no better than the call: a side-effecting attempt sent and unanswered makes the outcome
//!   unknown, until the edge of the stack (which sees the whole call) settles it.
//! - **Cancellation** (DESIGN.md, "Deadline"). A read-only or model attempt stops when the caller goes away
//!   (its future dropped, or the context's `cancel` token: [`Error::Cancelled`]). A side-effecting attempt
//!   ([`CallKind::SideEffectingTool`]) is never abandoned once sent: it runs on its own task to its own
//!   timeout, and if the caller is gone its outcome is recorded in the report (marked background) and logged —
//!   the upstream may have acted, and the caller must be able to find out.
//!
//! Without a [`CallContext`] (the layer used alone) the attempt gets `per_try`, shortened by an enclosing scope,
//! and its kind is read from the method as [`DeadlineLayer::kind`](crate::layer::DeadlineLayer::kind) says.
//!
//! ```
//! use std::time::Duration;
//!
//! use ballast::{Error, layer::AttemptLayer};
//! use ballast_core::{Deadline, BALLAST_TIMEOUT_MS};
//! use bytes::Bytes;
//! use tower::{ServiceBuilder, ServiceExt as _, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // The upstream answers with the timeout it was told.
//! let upstream = service_fn(|request: http::Request<Bytes>| async move {
//!     let told = request.headers()[BALLAST_TIMEOUT_MS].as_bytes().to_vec();
//!     Ok::<_, Error>(http::Response::new(Bytes::from(told)))
//! });
//! let service = ServiceBuilder::new().layer(AttemptLayer::new(Duration::from_secs(2))).service(upstream);
//! // Alone: the per-try timeout.
//! let answer = service.clone().oneshot(http::Request::new(Bytes::new())).await.unwrap();
//! assert_eq!(answer.body(), "2000");
//! // Under a 1 s deadline: what remains minus the 50 ms reserve.
//! let deadline = Deadline::after(ballast::clock::now(), Duration::from_secs(1));
//! let answer = ballast::context::scope(deadline, service.oneshot(http::Request::new(Bytes::new()))).await.unwrap();
//! assert_eq!(answer.body(), "950");
//! # }
//! ```

mod background;
mod headers;
mod layer;
mod record;

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ballast_core::{CallKind, Deadline, TraceContext};
use bytes::Bytes;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use http::{Request, Response};
use tower::Service;
use tracing::Instrument as _;

pub use layer::AttemptLayer;

use self::background::{Detached, run_detached};
use self::headers::{PerTry, set_attempt_headers};
use self::record::AttemptRecorder;
use crate::context::share_end;
use crate::deadline::kind_for_method;
use crate::transport::Answer;
use crate::{AttemptNumber, Body, CallContext, Cancel, Error, Report, clock, current_deadline};

/// The header that names a side-effecting operation, logged when its attempt finishes after the caller left.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The service of [`AttemptLayer`]: runs one attempt under its timeout and records it.
#[derive(Clone, Debug)]
pub struct AttemptService<S> {
    inner: S,
    /// Shared: a pointer in every future that holds this service, not the value.
    per_try: Arc<PerTry>,
}

impl<S> Service<Request<Bytes>> for AttemptService<S>
where
    S: Service<Request<Bytes>, Error = Error> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Answer,
{
    type Response = Response<Body>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Response<Body>, Error>>;

    /// Ready when the transport is (as tower's own `Timeout`): waiting for readiness is not an attempt — nothing
    /// is sent — so it is bounded by the call's deadline, not by the attempt's timeout, which starts in `call`.
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        // The service that was polled ready makes the attempt; a fresh clone stays for the next call.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        attempt(inner, &self.per_try, request)
    }
}

/// What the attempt needs from the call's context (or the defaults of a layer used alone).
struct Call {
    /// The deadline the attempt works to: the context's effective one, or the enclosing scope's.
    deadline: Option<Deadline>,
    /// The call's own deadline, which a stream runs to (`None` without a context).
    own_deadline: Option<Deadline>,
    streamed: bool,
    kind: CallKind,
    target: Option<Arc<str>>,
    hop: u32,
    /// The call's trace when it is sent upstream (`None` without a context or with a trace of Ballast's own: a
    /// `traceparent` the request carries goes as it is).
    trace: Option<TraceContext>,
    report: Report,
    cancel: Cancel,
}

impl Call {
    fn of(request: &Request<Bytes>) -> Call {
        match request.extensions().get::<CallContext>() {
            // The context's, its run's and the enclosing scope's, the earliest.
            Some(ctx) => Call {
                deadline: Some(ctx.effective_deadline()),
                own_deadline: Some(ctx.deadline),
                streamed: ctx.stream.is_some(),
                kind: ctx.kind,
                target: ctx.target.clone(),
                hop: ctx.hop,
                trace: ctx.propagate_trace.then_some(ctx.trace),
                report: ctx.report.clone(),
                cancel: ctx.cancel.clone(),
            },
            None => Call {
                deadline: current_deadline(),
                own_deadline: None,
                streamed: false,
                kind: kind_for_method(request.method()),
                target: None,
                hop: 0,
                trace: None,
                report: Report::default(),
                cancel: Cancel::never(),
            },
        }
    }

    /// The timeout the upstream is told: the attempt's own — but for a stream, whose attempt timeout bounds only
    /// the time to its commit point, what the call's own deadline leaves (a stream runs until then; an upstream
    /// that honours the header, another Ballast, would otherwise cut it at the first-byte timeout).
    fn announced(&self, timeout: Duration, now: ballast_core::Instant) -> Duration {
        match self.own_deadline {
            Some(own) if self.streamed => own.attempt_timeout(Duration::MAX, now).unwrap_or(timeout),
            _ => timeout,
        }
    }
}

/// One attempt: refused, or labelled, started, bounded and recorded.
///
/// The attempt starts when it is called (as tower's own `Timeout` starts its timer in `call`): it is refused,
/// labelled and its report line started now. A read-only or model attempt calls the transport now too, and its
/// future waits for the answer; a side-effecting one calls it from its own task, which lives on if the caller
/// leaves.
fn attempt<S>(
    mut inner: S,
    per_try: &PerTry,
    mut request: Request<Bytes>,
) -> BoxFuture<'static, Result<Response<Body>, Error>>
where
    S: Service<Request<Bytes>, Error = Error> + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Answer,
{
    let call = Call::of(&request);
    if call.cancel.is_cancelled() {
        return Box::pin(std::future::ready(Err(Error::Cancelled)));
    }
    let now = clock::now();
    let numbered = request.extensions().get::<AttemptNumber>().map(|n| n.0);
    let number = numbered.unwrap_or(1);
    let timeout = match call.deadline {
        Some(deadline) => match deadline.attempt_timeout(per_try.timeout, now) {
            Ok(timeout) => timeout,
            Err(refused) => {
                let refused = Error::from(refused);
                // An attempt a retry loop made is a line of the report, not sent (used alone, the layer refused a
                // call, not an attempt: nothing started).
                if let Some(number) = numbered {
                    call.report.refused_attempt(number, refused.to_string());
                }
                return Box::pin(std::future::ready(Err(refused)));
            }
        },
        None => per_try.timeout,
    };
    // The attempt's span (DESIGN.md, "Observability"), inside its call's: its number and timeout.
    let span = tracing::debug_span!(
        "ballast.attempt",
        attempt = number,
        timeout_ms = saturating_millis(timeout)
    );
    let announced = call.announced(timeout, now);
    let span_id = set_attempt_headers(
        request.headers_mut(),
        per_try,
        announced,
        number,
        call.hop,
        call.trace,
    );
    let side_effect = matches!(call.kind, CallKind::SideEffectingTool(_));
    // Only a side-effecting attempt may outlive its caller and log its key.
    let idempotency_key = side_effect
        .then(|| request.headers().get(IDEMPOTENCY_KEY))
        .flatten()
        .and_then(|key| key.to_str().ok())
        .map(str::to_owned);
    let named = side_effect.then(|| (call.target.clone(), request.uri().clone()));
    let recorder = AttemptRecorder::start(
        call.report,
        (number, span_id),
        call.cancel.clone(),
        side_effect,
        now,
    );
    let expiry = clock::to_tokio(now + timeout);
    // What the upstream is judged by: the per-try timeout, or the route's share of the call's time for this
    // deployment where that is shorter — both the route's own limits. Cut shorter than that, the attempt was ended
    // by the caller's deadline, not by the upstream's slowness.
    let judged_by = match (share_end(), call.deadline) {
        (Some(share), Some(deadline)) => per_try.timeout.min(
            share
                .saturating_duration_since(now)
                .saturating_sub(deadline.reserve()),
        ),
        _ => per_try.timeout,
    };
    let by_deadline = timeout < judged_by;
    let cancel = call.cancel;
    if let Some((target, uri)) = named {
        let sending = bounded(
            async move { inner.call(request).await },
            expiry,
            timeout,
            by_deadline,
        );
        let detached = Detached {
            recorder,
            number,
            idempotency_key,
            target,
            uri,
            deadline: call.deadline,
        };
        return Box::pin(async move { run_detached(sending, detached, &cancel).await }.instrument(span));
    }
    let sending = bounded(
        span.in_scope(|| inner.call(request)),
        expiry,
        timeout,
        by_deadline,
    );
    Box::pin(
        async move {
            let outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(Error::Cancelled),
                outcome = sending => outcome,
            };
            recorder.finish(&outcome);
            outcome
        }
        .instrument(span),
    )
}

/// A duration in whole milliseconds, for a span field.
fn saturating_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The transport's answer to an attempt (`exchange`: the transport's call and the reading of its answer), until
/// `expiry` ([`Error::Timeout`] after `timeout`, `by_deadline` when that was what the call's deadline left).
fn bounded<F, A>(
    exchange: F,
    expiry: tokio::time::Instant,
    timeout: Duration,
    by_deadline: bool,
) -> impl Future<Output = Result<Response<Body>, Error>> + Send + 'static
where
    F: Future<Output = Result<A, Error>> + Send + 'static,
    A: Answer,
{
    tokio::time::timeout_at(expiry, exchange).map(move |outcome| match outcome {
        Ok(answered) => answered.map(Answer::into_answer),
        Err(_elapsed) => Err(Error::Timeout {
            after: timeout,
            by_deadline,
        }),
    })
}
