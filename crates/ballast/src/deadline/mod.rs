//! The deadline layer: one absolute deadline for the whole call, set where the call enters the stack.
//!
//! Why: per-step timeouts add up (reference/003: 3 steps x 30 s = 90 s, 270 s with three tries each). The fix is
//! one absolute deadline per agent request, handed down, with every attempt getting only what remains. This
//! layer is where a call gets its deadline and where the whole call — queueing, retries, backoff sleeps, every
//! attempt — is held to it:
//!
//! - **The context.** A request without a [`CallContext`] gets one: its deadline is the enclosing
//!   [`scope`](crate::context::scope)'s ([`current_deadline`]) or, with none, `default_timeout` from now; its kind and
//!   priority are the layer's ([`DeadlineLayer::kind`], [`DeadlineLayer::priority`]; unset, the kind is read
//!   from the method: `GET`/`HEAD`/`OPTIONS` read-only, anything else side-effecting with an upstream that does
//!   not deduplicate). A request that carries a context keeps it, its deadline shortened by its run's (the run
//!   is offered the call's own deadline, not the scope's, and keeps the earliest: a later call of the run cannot
//!   outlive an earlier one's deadline); the call is held to its effective deadline, the enclosing scope's
//!   folded in.
//! - **Refusal at once.** When what is left, minus the reserve, cannot hold the least attempt worth starting,
//!   the call fails with [`Error::DeadlineExceeded`] before anything below runs — the third step of a request
//!   whose second step hung is never started.
//! - **The bound.** The inner call runs inside [`scope`](crate::context::scope)`(deadline, ..)` (so a call made while
//!   handling this one sees the deadline) and is dropped at the deadline less its reserve, so that the caller has
//!   its answer before the deadline itself ([`Error::DeadlineExceeded`], with how
//!   much was left and needed) or when the context's `cancel` token fires ([`Error::Cancelled`]) — on this
//!   layer's own timer and watch, whatever the layers below do. Every Ballast wait below ends before the deadline
//!   and watches the token too, so the inner call normally answers first, with everything it knows; an answer
//!   ready at the same moment is taken over the drop. Dropping the inner call abandons queued work and backoff
//!   sleeps; a sent side-effecting attempt lives on in the background (see [`AttemptLayer`](crate::layer::AttemptLayer)).
//! - **The report.** The call's total time, the target of a context this layer made, and on an error its stable
//!   code and (for deadline and retry stops) why it stopped. When it dropped the inner work of a side effect, the
//!   outcome is unknown: what the work had sent by then is not for this layer to know.
//!
//! ```
//! use std::time::Duration;
//!
//! use ballast::{Error, context::CallContext, layer::DeadlineLayer};
//! use bytes::Bytes;
//! use tower::{ServiceBuilder, ServiceExt as _, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let hung_upstream = service_fn(|request: http::Request<Bytes>| async move {
//!     // Every layer below finds the call's context, and nested calls see the deadline in scope.
//!     assert!(request.extensions().get::<CallContext>().is_some());
//!     assert!(ballast::context::current_deadline().is_some());
//!     tokio::time::sleep(Duration::from_secs(3600)).await;
//!     Ok::<_, Error>(http::Response::new(Bytes::new()))
//! });
//! let service = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(2)).target("slow_tool"))
//!     .service(hung_upstream);
//! let started = ballast::clock::now();
//! let error = service.oneshot(http::Request::new(Bytes::new())).await.unwrap_err();
//! assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
//! // At the deadline less its 50 ms reserve: the caller has its error before its deadline.
//! assert_eq!(ballast::clock::now().saturating_duration_since(started), Duration::from_millis(1950));
//! # }
//! ```

mod kind;
mod layer;

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use ballast_core::{CallKind, Deadline, DeadlineExceeded, Instant, Refused};
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use tower::{Service, ServiceExt as _};

pub(crate) use kind::kind_for_method;
pub use layer::DeadlineLayer;

use crate::outcome::stop_of;
use crate::{Body, CallContext, Cancel, Error, clock, context, current_deadline};

/// The service of [`DeadlineLayer`]: gives each call its context and holds it to its deadline.
#[derive(Clone, Debug)]
pub struct DeadlineService<S> {
    inner: S,
    settings: DeadlineLayer,
}

impl<S, B> Service<Request<Bytes>> for DeadlineService<S>
where
    S: Service<Request<Bytes>, Response = Response<B>, Error = Error> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Into<Body> + 'static,
{
    type Response = Response<Body>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Response<Body>, Error>>;

    /// Always ready: the inner service's readiness is awaited inside the call, under the deadline.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    /// The call enters the layer here, when it is called (as tower's own `Timeout` starts its timer in `call`):
    /// its context is settled and its deadline checked now; the future holds the rest of it.
    fn call(&mut self, mut request: Request<Bytes>) -> Self::Future {
        let start = clock::now();
        let ctx = settle_context(&self.settings, &mut request, start);
        let inner = self.inner.clone();
        let work = async move {
            let response = inner.oneshot(request).await?;
            Ok(response.map(Into::into))
        };
        let bounded = bound(ctx.effective_deadline(), &ctx.cancel, work, start);
        Box::pin(async move {
            let (result, dropped) = match bounded.await {
                Bounded::Done(result) => (result, false),
                Bounded::Refused(error) => (Err(error), false),
                Bounded::Dropped(error) => (Err(error), true),
            };
            // What the dropped work had sent is not this layer's to know: a side effect's outcome is unknown.
            let unknown = dropped && matches!(ctx.kind, CallKind::SideEffectingTool(_));
            record(&ctx, start, &result, unknown);
            result
        })
    }
}

/// How a call held to its deadline ended.
#[derive(Debug)]
pub(crate) enum Bounded<T> {
    /// The work answered.
    Done(T),
    /// Refused before any of it ran: the deadline could not hold an attempt, or the call was cancelled already.
    Refused(Error),
    /// Dropped mid-way by the deadline's own timer ([`Error::DeadlineExceeded`]) or the caller's cancellation
    /// ([`Error::Cancelled`]): what the work did until then is not known here.
    Dropped(Error),
}

/// Runs `work` held to `deadline` (read at `now`): refused at once when what is left cannot hold an attempt or
/// the call is cancelled already; else run inside the deadline's [`scope`](crate::context::scope), dropped at the deadline
/// less its reserve or when `cancel` fires. The work is polled first: an answer ready when the timer fires or the token is
/// cancelled is the answer.
///
/// The one bound of a call, for the [`DeadlineService`] and for the clients that run their calls themselves.
pub(crate) fn bound<F: Future>(
    deadline: Deadline,
    cancel: &Cancel,
    work: F,
    now: Instant,
) -> impl Future<Output = Bounded<F::Output>> + use<F> {
    let refused = deadline.attempt_timeout(Duration::MAX, now).err();
    let cancel = cancel.clone();
    // The work ends at the deadline less its reserve, so the caller has its answer (or the error) before the
    // deadline itself (DESIGN.md: the reserve holds everywhere).
    let expiry = clock::to_tokio(deadline.instant() - deadline.reserve());
    async move {
        if let Some(refused) = refused {
            return Bounded::Refused(refused.into());
        }
        if cancel.is_cancelled() {
            return Bounded::Refused(Error::Cancelled);
        }
        context::scoped(deadline, async move {
            tokio::select! {
                biased;
                done = work => Bounded::Done(done),
                () = tokio::time::sleep_until(expiry) => Bounded::Dropped(expired(&deadline).into()),
                () = cancel.cancelled() => Bounded::Dropped(Error::Cancelled),
            }
        })
        .await
    }
}

/// The call's context, put back into `request`: the one it carries with its deadline shortened by its run (which
/// is offered the call's own deadline and keeps the earliest), or a new one from the layer's settings.
fn settle_context(settings: &DeadlineLayer, request: &mut Request<Bytes>, now: Instant) -> CallContext {
    let name = || -> Arc<str> {
        settings
            .target
            .clone()
            .unwrap_or_else(|| Arc::from(request.uri().path()))
    };
    // Settled in place: the request keeps its context, the layer a copy.
    let ctx = match request.extensions().get::<CallContext>() {
        Some(ctx) => {
            let mut ctx = ctx.clone();
            // The run is offered the call's own deadline, not the scope's: a scope may be a part of the call's
            // time (a model route's primary share) that must not become the deadline of the run's later calls.
            if let Some(run) = &ctx.run {
                ctx.deadline = run.offer_deadline(ctx.deadline);
            }
            ctx
        }
        None => {
            let deadline =
                current_deadline().unwrap_or_else(|| Deadline::after(now, settings.default_timeout));
            let kind = settings.kind.unwrap_or_else(|| kind_for_method(request.method()));
            let mut ctx = CallContext::new(kind, deadline);
            ctx.priority = settings.priority;
            // The request's own trace, when it carries one (an agent's request through a service of yours).
            if let Some(trace) = request
                .headers()
                .get(ballast_core::TRACEPARENT)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| ballast_core::TraceContext::parse(value).ok())
            {
                ctx.trace = trace;
                ctx.propagate_trace = true;
            }
            ctx
        }
    };
    let mut ctx = ctx;
    // An unnamed call is named here, and its report with it.
    if ctx.target.is_none() {
        let target = name();
        let text = target.to_string();
        ctx.report.update(|r| r.target = text);
        ctx.target = Some(target);
    }
    request.extensions_mut().insert(ctx.clone());
    ctx
}

/// The error of a call dropped at its deadline: nothing left, and what an attempt would have needed.
fn expired(deadline: &Deadline) -> DeadlineExceeded {
    DeadlineExceeded {
        remaining: deadline.remaining(clock::now()),
        reserve: deadline.reserve(),
        min_attempt: deadline.min_attempt(),
        refused: Refused::Attempt,
    }
}

/// Writes the call's total time, and on an error its code and stop reason as the report's first failure
/// ([`Report::note_failure`](crate::Report::note_failure)); a side effect whose outcome is `unknown` is said so,
/// and its code is `outcome_unknown` (precedence: whatever stopped it).
fn record(ctx: &CallContext, start: Instant, result: &Result<Response<Body>, Error>, unknown: bool) {
    let total = clock::now().saturating_duration_since(start);
    ctx.report.update(|r| {
        r.total = total;
        r.outcome_unknown |= unknown;
    });
    if let Err(error) = result {
        let code = if unknown {
            ballast_core::ErrorCode::OutcomeUnknown
        } else {
            error.code()
        };
        ctx.report.note_failure(code, stop_of(error));
    }
}
