//! The deadline layer: one absolute deadline for the whole call, set where the call enters the stack.
//!
//! Why: per-step timeouts add up (reference/003: 3 steps x 30 s = 90 s, 270 s with three tries each). The fix is
//! one absolute deadline per agent request, handed down, with every attempt getting only what remains. This
//! layer is where a call gets its deadline and where the whole call — queueing, retries, backoff sleeps, every
//! attempt — is held to it:
//!
//! - **The context.** A request without a [`CallContext`] gets one: its deadline is the enclosing
//!   [`scope`](crate::scope)'s ([`current_deadline`]) or, with none, `default_timeout` from now; its kind and
//!   priority are the layer's ([`DeadlineLayer::kind`], [`DeadlineLayer::priority`]; unset, the kind is read
//!   from the method: `GET`/`HEAD`/`OPTIONS` read-only, anything else side-effecting with an upstream that does
//!   not deduplicate). A request that carries a context keeps it, its deadline shortened by its run's and by the
//!   enclosing scope; the run is offered the call's own deadline (not the scope's) and keeps the earliest (a
//!   later call of the run cannot outlive an earlier one's deadline).
//! - **Refusal at once.** When what is left, minus the reserve, cannot hold the least attempt worth starting,
//!   the call fails with [`Error::DeadlineExceeded`] before anything below runs — the third step of a request
//!   whose second step hung is never started.
//! - **The bound.** The inner call runs inside [`scope`](crate::scope)`(deadline, ..)` (so a call made while
//!   handling this one sees the deadline) and is dropped at the deadline ([`Error::DeadlineExceeded`], with how
//!   much was left and needed) or when the context's `cancel` token fires ([`Error::Cancelled`]). Dropping the
//!   inner call abandons queued work and backoff sleeps; a sent side-effecting attempt lives on in the background
//!   (see [`AttemptLayer`](crate::AttemptLayer)).
//! - **The report.** The call's total time and its target are written into the context's report, and on an
//!   error its stable code (and why it stopped, for deadline and retry stops) unless a lower layer wrote them,
//!   and `outcome_unknown` when a side-effecting attempt got no answer or is still running (the retry layer's
//!   rule, applied here too because a call this layer drops never reaches the retry layer's end).
//!
//! ```
//! use std::time::Duration;
//!
//! use ballast::{CallContext, DeadlineLayer, Error};
//! use bytes::Bytes;
//! use tower::{ServiceBuilder, ServiceExt as _, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let hung_upstream = service_fn(|request: http::Request<Bytes>| async move {
//!     // Every layer below finds the call's context, and nested calls see the deadline in scope.
//!     assert!(request.extensions().get::<CallContext>().is_some());
//!     assert!(ballast::current_deadline().is_some());
//!     tokio::time::sleep(Duration::from_secs(3600)).await;
//!     Ok::<_, Error>(http::Response::new(Bytes::new()))
//! });
//! let service = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(2)).target("slow_tool"))
//!     .service(hung_upstream);
//! let started = ballast::clock::now();
//! let error = service.oneshot(http::Request::new(Bytes::new())).await.unwrap_err();
//! assert!(matches!(error, Error::DeadlineExceeded(_)), "{error}");
//! assert_eq!(ballast::clock::now().saturating_duration_since(started), Duration::from_secs(2));
//! # }
//! ```

mod kind;
mod layer;

use std::task::{Context, Poll};
use std::time::Duration;

use ballast_core::{Deadline, DeadlineExceeded, Instant, Refused, StopReason};
use bytes::Bytes;
use futures::FutureExt as _;
use futures::future::{BoxFuture, Either};
use http::{Request, Response};
use tower::{Service, ServiceExt as _};

pub(crate) use kind::kind_for_method;
pub use layer::DeadlineLayer;

use crate::retry::outcome_unknown;
use crate::transport::{CallNow, call_now};
use crate::{CallContext, Error, clock, context, current_deadline};

/// The service of [`DeadlineLayer`]: gives each call its context and holds it to its deadline.
#[derive(Clone, Debug)]
pub struct DeadlineService<S> {
    inner: S,
    settings: DeadlineLayer,
}

impl<S> Service<Request<Bytes>> for DeadlineService<S>
where
    S: Service<Request<Bytes>, Response = Response<Bytes>, Error = Error> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Bytes>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Response<Bytes>, Error>>;

    /// Always ready: the inner service's readiness is awaited inside the call, under the deadline.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        self.call_shared(request)
    }
}

impl<S> DeadlineService<S>
where
    S: Service<Request<Bytes>, Response = Response<Bytes>, Error = Error> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    /// [`Service::call`] through a shared reference: the service is always ready and keeps nothing per call, so
    /// a `ToolClient` calls one stack for all its calls instead of cloning and boxing it for each.
    ///
    /// The call enters the layer here, when it is called (as tower's own `Timeout` starts its timer in `call`):
    /// its context is settled and its deadline checked now; the future holds the rest of it.
    pub(crate) fn call_shared(
        &self,
        mut request: Request<Bytes>,
    ) -> BoxFuture<'static, Result<Response<Bytes>, Error>> {
        let start = clock::now();
        let ctx = settle_context(&self.settings, &mut request, start);
        let deadline = ctx.deadline;
        if let Err(refused) = deadline.attempt_timeout(Duration::MAX, start) {
            let result = Err(refused.into());
            record(&ctx, start, &result);
            return Box::pin(std::future::ready(result));
        }
        let mut inner = self.inner.clone();
        let expiry = clock::to_tokio(deadline.instant());
        // The layers below are always ready: called now, the future holds their future and not the request.
        // Called in the deadline's scope, as the call's future runs: a service below that reads the deadline
        // in its `call` sees it (a ToolClient's stack reads its context instead: see `over_tool_stack`).
        let called = if self.settings.over_tool_stack {
            call_now(&mut inner, request)
        } else {
            context::sync_scoped(deadline, || call_now(&mut inner, request))
        };
        let call = match called {
            CallNow::Called(call) => Either::Left(call),
            CallNow::Failed(error) => {
                let result = Err(error);
                record(&ctx, start, &result);
                return Box::pin(std::future::ready(result));
            }
            CallNow::NotReady(request) => {
                Either::Right(Box::pin(async move { inner.ready().await?.call(request).await }))
            }
        };
        // Without a timer of its own when every wait below has one that ends first (`over_tool_stack`).
        let bounded = if self.settings.over_tool_stack {
            Either::Left(call)
        } else {
            Either::Right(
                tokio::time::timeout_at(expiry, call)
                    .map(move |outcome| outcome.unwrap_or_else(|_elapsed| Err(expired(&deadline).into()))),
            )
        };
        // The inner call runs in the deadline's scope, dropped at the deadline or on cancellation.
        Box::pin(context::scoped(deadline, async move {
            let result = tokio::select! {
                biased;
                () = ctx.cancel.cancelled() => Err(Error::Cancelled),
                outcome = bounded => outcome,
            };
            record(&ctx, start, &result);
            result
        }))
    }
}

/// The call's context, put back into `request`: the one it carries with its deadline shortened by the scope and
/// the run, or a new one from the layer's settings.
fn settle_context(settings: &DeadlineLayer, request: &mut Request<Bytes>, now: Instant) -> CallContext {
    let scoped = current_deadline();
    // Settled in place: the request keeps its context, the layer a copy.
    let ctx = match request.extensions_mut().get_mut::<CallContext>() {
        Some(ctx) => {
            // The run is offered the call's own deadline, not the scope's: a scope may be a part of the call's
            // time (a model route's primary share) that must not become the deadline of the run's later calls.
            if let Some(run) = &ctx.run {
                ctx.deadline = run.offer_deadline(ctx.deadline);
            }
            if let Some(scoped) = scoped {
                ctx.deadline = ctx.deadline.earliest(&scoped);
            }
            ctx.clone()
        }
        None => {
            let deadline = scoped.unwrap_or_else(|| Deadline::after(now, settings.default_timeout));
            let kind = settings.kind.unwrap_or_else(|| kind_for_method(request.method()));
            let mut ctx = CallContext::new(kind, deadline);
            ctx.priority = settings.priority;
            request.extensions_mut().insert(ctx.clone());
            ctx
        }
    };
    let target = settings.target.as_deref();
    ctx.report.update(|r| {
        if r.target.is_empty() {
            r.target = target.unwrap_or_else(|| request.uri().path()).to_owned();
        }
    });
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

/// Writes the call's total time, and on an error its code and stop reason unless a lower layer wrote them, and
/// whether a side effect may have happened: the call may have ended here (deadline, cancellation) while an
/// attempt that got no answer — or is still running — was all the upstream was told.
fn record(ctx: &CallContext, start: Instant, result: &Result<Response<Bytes>, Error>) {
    let total = clock::now().saturating_duration_since(start);
    ctx.report.update(|r| {
        r.total = total;
        if let Err(error) = result {
            r.code.get_or_insert(error.code());
            if r.stop.is_none() {
                r.stop = stop_reason(error);
            }
            r.outcome_unknown |= outcome_unknown(ctx.kind, false, false, &r.attempts);
        }
    });
}

/// The stop reason an error carries, if it is one.
fn stop_reason(error: &Error) -> Option<StopReason> {
    match error {
        Error::DeadlineExceeded(exceeded) => Some(StopReason::Deadline(*exceeded)),
        Error::Stopped(reason) => Some(*reason),
        _ => None,
    }
}
