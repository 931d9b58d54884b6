//! One upstream (a tool, a model deployment) and a trip through its stack.
//!
//! ```text
//! deadline -> admission -> retry -> LimitService -> BreakerService (throttle, breaker) -> AttemptService
//!   -> transport
//! ```
//!
//! The attempt-level part is a tower stack ([`BreakerLayer`], [`AttemptLayer`] over the transport): each attempt
//! answers with its response or a typed [`Error`]. The call-level part — the deadline's bound, the admission
//! slot, the retry loop — is the same code the [`DeadlineLayer`](crate::layer::DeadlineLayer),
//! [`AdmissionLayer`] and [`RetryLayer`] run as tower services, run here in the caller's future: so the client
//! gets the retry loop's [`Trip`] back as a value (a tower service can only answer with a response), and a trip
//! boxes one future (the retry loop over the transport's type) rather than one per layer. `tests/it/stack_equivalence.rs` pins a client's calls equal to the
//! composed tower stack's on the same inputs.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ballast_config::{BudgetConfig, RetryConfig, ServerConfig};
use ballast_core::{
    AdaptiveThrottle, AdmissionConfig, BreakerConfig, CircuitBreaker, InvalidAdmission, InvalidRetryPolicy,
    RetryBudget, RetryPolicy, ThrottleConfig,
};
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use tower::{Layer as _, Service};

use crate::admission::{ReachedUpstream, holding};
use crate::deadline::{Bounded, bound};
use crate::outcome::Trip;
use crate::retry::{Polling, Shared, run};
use crate::transport::Transport;
use crate::{AdmissionLayer, AttemptLayer, Body, BreakerLayer, CallContext, Error, RetryLayer, clock};

/// One upstream's stack: its admission, its retry policy and budget, its throttle and breaker, and the
/// attempt-level services over the transport.
pub(crate) struct Upstream {
    admission: Option<AdmissionLayer>,
    retry: RetryLayer,
    breaker: Arc<CircuitBreaker>,
    throttle: Option<Arc<AdaptiveThrottle>>,
    limits: Option<Arc<crate::limit::AccountLimits>>,
    attempts: Box<dyn Attempts>,
}

/// What an upstream is built of.
pub(crate) struct Parts {
    pub(crate) policy: RetryPolicy,
    pub(crate) budget: Arc<dyn RetryBudget>,
    pub(crate) breaker: Arc<CircuitBreaker>,
    pub(crate) throttle: Option<Arc<AdaptiveThrottle>>,
    pub(crate) admission: Option<AdmissionLayer>,
    pub(crate) per_try: Duration,
    /// A model deployment's account limits, charged before each attempt.
    pub(crate) limits: Option<Arc<crate::limit::AccountLimits>>,
}

/// The settings an upstream is built from, the same for a tool and a model deployment (their config tables name
/// them alike).
pub(crate) struct Settings<'a> {
    pub(crate) retry: &'a RetryConfig,
    pub(crate) budget: &'a BudgetConfig,
    pub(crate) breaker: BreakerConfig,
    pub(crate) throttle: Option<ThrottleConfig>,
    pub(crate) concurrency: u32,
    pub(crate) queue: u32,
    pub(crate) per_try: Duration,
}

/// How a client's error names an upstream's settings refused (validation normally catches both first): each
/// client's error type says it with the upstream's `name`.
pub(crate) trait InvalidSettings: Sized {
    /// The retry policy.
    fn retry(name: &str, source: InvalidRetryPolicy) -> Self;
    /// The concurrency or the queue.
    fn admission(name: &str, source: InvalidAdmission) -> Self;
}

impl Parts {
    /// The parts of upstream `name` with `settings` under `server`'s `max_retry_after`: the one assembly of
    /// tools' and model deployments' upstreams.
    pub(crate) fn of<E: InvalidSettings>(
        name: &str,
        settings: &Settings<'_>,
        server: &ServerConfig,
    ) -> Result<Parts, E> {
        let policy = RetryPolicy::new(settings.retry.max_attempts, settings.retry.backoff)
            .map_err(|source| E::retry(name, source))?
            .with_max_retry_after(server.max_retry_after);
        let admission =
            admission(settings.concurrency, settings.queue).map_err(|source| E::admission(name, source))?;
        Ok(Parts {
            policy,
            budget: settings.budget.build(),
            breaker: Arc::new(CircuitBreaker::seeded(settings.breaker, None)),
            throttle: (settings.throttle).map(|config| Arc::new(AdaptiveThrottle::seeded(config, None))),
            admission: Some(admission),
            per_try: settings.per_try,
            limits: None,
        })
    }
}

impl Parts {
    /// The parts of one member of a group that shares these parts' retry policy, budget, breaker and throttle
    /// (an upstream MCP server's tools), with an admission and a per-try timeout of its own.
    pub(crate) fn member(
        &self,
        concurrency: u32,
        queue: u32,
        per_try: Duration,
    ) -> Result<Parts, InvalidAdmission> {
        Ok(Parts {
            policy: self.policy,
            budget: Arc::clone(&self.budget),
            breaker: Arc::clone(&self.breaker),
            throttle: self.throttle.clone(),
            admission: Some(admission(concurrency, queue)?),
            per_try,
            limits: self.limits.clone(),
        })
    }
}

impl Upstream {
    /// The upstream of `parts`, sending through `transport`.
    pub(crate) fn new<T>(parts: Parts, transport: T) -> Self
    where
        T: Transport,
    {
        let attempts = BreakerLayer::new(Arc::clone(&parts.breaker))
            .with_throttle(parts.throttle.clone())
            .layer(AttemptLayer::new(parts.per_try).layer(transport));
        match parts.limits.clone() {
            Some(limits) => {
                let limited = crate::limit::LimitLayer::new(Some(limits)).layer(attempts);
                Self::over(parts, limited)
            }
            None => Self::over(parts, attempts),
        }
    }

    /// The upstream of `parts` over the attempt-level stack `attempts`.
    fn over<A>(parts: Parts, attempts: A) -> Self
    where
        A: Service<Request<Bytes>, Response = Response<Body>, Error = Error> + Clone + Send + Sync + 'static,
        A::Future: Send,
    {
        Upstream {
            admission: parts.admission,
            retry: RetryLayer::new(parts.policy, parts.budget),
            breaker: parts.breaker,
            throttle: parts.throttle,
            limits: parts.limits,
            attempts: Box::new(attempts),
        }
    }

    /// The upstream's breaker.
    pub(crate) fn breaker(&self) -> &Arc<CircuitBreaker> {
        &self.breaker
    }

    /// The upstream's adaptive throttle, if it has one.
    pub(crate) fn throttle(&self) -> Option<&Arc<AdaptiveThrottle>> {
        self.throttle.as_ref()
    }

    /// The deployment's account limits, if it has them.
    pub(crate) fn limits(&self) -> Option<&Arc<crate::limit::AccountLimits>> {
        self.limits.as_ref()
    }

    /// The upstream's admission (its concurrency limit and queue), if it has one.
    pub(crate) fn admission(&self) -> Option<&AdmissionLayer> {
        self.admission.as_ref()
    }

    /// The upstream's retry budget.
    pub(crate) fn budget(&self) -> &Arc<dyn RetryBudget> {
        self.retry.budget()
    }

    /// The retries the budget can still give now, for the report.
    pub(crate) fn budget_left(&self) -> u64 {
        self.budget().available(clock::now())
    }

    /// One trip of the call of `ctx` through the stack with `request` (which carries `ctx`): held to the call's
    /// deadline, admitted, retried. `polling` numbers its attempts after the operation's earlier trips, and hands
    /// a 409 "in progress" back at once.
    pub(crate) async fn trip(&self, request: Request<Bytes>, ctx: &CallContext, polling: Polling) -> Trip {
        // A run shared by many instances: its deadline as the store knows it, before anything waits on it (free
        // when this instance already knows it: `run/shared.rs`).
        #[cfg(feature = "idempotency")]
        if let Some(run) = &ctx.run {
            let settled = (ctx.deadline.reserve(), ctx.deadline.min_attempt());
            run.sync(ctx.run_offer, settled, clock::now()).await;
        }
        // Not started until admitted; boxed, so what holds it moves a pointer, not the loop's state.
        let retried = self.attempts.retried(self.retry.shared(), request, ctx, polling);
        let work = async {
            let Some(admission) = &self.admission else {
                return retried.await;
            };
            match admission.admit(ctx).await {
                Ok(slot) => holding(slot, retried).await,
                Err(refused) => Trip::refused(refused),
            }
        };
        match bound(ctx.effective_deadline(), &ctx.cancel, work, clock::now()).await {
            Bounded::Done(trip) => trip,
            Bounded::Refused(error) => Trip::refused(error),
            Bounded::Dropped(error) => Trip::dropped(error),
        }
    }
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("admission", &self.admission)
            .field("retry", &self.retry)
            .field("breaker", &self.breaker)
            .finish_non_exhaustive()
    }
}

/// The attempt-level stack of an upstream, whatever its transport's type.
trait Attempts: Send + Sync {
    /// The retry loop of one trip through this stack: the one part of a trip that depends on the transport's type.
    fn retried<'a>(
        &'a self,
        retry: &'a Shared,
        request: Request<Bytes>,
        ctx: &'a CallContext,
        polling: Polling,
    ) -> BoxFuture<'a, Trip>;
}

impl<A> Attempts for A
where
    A: Service<Request<Bytes>, Response = Response<Body>, Error = Error> + Clone + Send + Sync + 'static,
    A::Future: Send,
{
    fn retried<'a>(
        &'a self,
        retry: &'a Shared,
        request: Request<Bytes>,
        ctx: &'a CallContext,
        polling: Polling,
    ) -> BoxFuture<'a, Trip> {
        Box::pin(run(retry, self.clone(), request, ctx, Some(polling)))
    }
}

impl ReachedUpstream for Trip {
    fn reached_upstream(&self) -> bool {
        self.result.reached_upstream()
    }

    fn keep_slot(&mut self, slot: crate::admission::Slot) -> Option<crate::admission::Slot> {
        match &mut self.result {
            Ok(response) if response.status().is_success() && response.body().is_stream() => {
                response.body_mut().keep_slot(slot.for_stream())
            }
            _ => Some(slot),
        }
    }
}

/// The admission of an upstream limited to `concurrency` calls at once with `queue` waiting.
pub(crate) fn admission(
    concurrency: u32,
    queue: u32,
) -> Result<AdmissionLayer, ballast_core::InvalidAdmission> {
    AdmissionLayer::new(AdmissionConfig::new(concurrency as usize, queue as usize))
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll};

    use ballast_core::{BreakerConfig, CallKind, Deadline, ErrorCode, RatioBudget, UpstreamIdempotency};

    use super::*;
    use crate::outcome::{SideEffect, Verdict};

    fn parts() -> Parts {
        Parts {
            policy: RetryPolicy::default(),
            budget: Arc::new(RatioBudget::default()),
            breaker: Arc::new(CircuitBreaker::seeded(BreakerConfig::default(), Some(1))),
            throttle: None,
            admission: Some(admission(4, 4).unwrap()),
            per_try: Duration::from_millis(100),
            limits: None,
        }
    }

    const REFUND: CallKind = CallKind::SideEffectingTool(UpstreamIdempotency::None);

    /// One trip of a 2 s refund through `upstream`; how long it took.
    async fn refund(upstream: &Upstream) -> (Trip, Duration) {
        let started = clock::now();
        let ctx = CallContext::new(REFUND, Deadline::after(started, Duration::from_secs(2)));
        let mut request = Request::new(Bytes::new());
        request.extensions_mut().insert(ctx.clone());
        let trip = upstream.trip(request, &ctx, Polling::default()).await;
        (trip, clock::now().saturating_duration_since(started))
    }

    /// A transport that is never ready (a saturated pool, say).
    #[derive(Clone)]
    struct NeverReady;

    impl Service<Request<Bytes>> for NeverReady {
        type Response = Response<Body>;
        type Error = Error;
        type Future = std::future::Ready<Result<Response<Body>, Error>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
            Poll::Pending
        }

        fn call(&mut self, _request: Request<Bytes>) -> Self::Future {
            unreachable!("never ready, never called")
        }
    }

    /// Waiting for readiness is the retry loop's own wait: it ends when the deadline can no longer hold an
    /// attempt (2 s - 50 ms reserve - 50 ms least attempt), and — nothing having been sent — it leaves a side
    /// effect known: nothing happened.
    #[tokio::test(start_paused = true)]
    async fn waiting_for_a_transport_that_is_never_ready_ends_in_time_and_sends_nothing() {
        let (trip, took) = refund(&Upstream::new(parts(), NeverReady)).await;
        // (Paused time wakes a timer on the millisecond after its instant.)
        assert!(
            took > Duration::from_millis(1900) && took <= Duration::from_millis(1901),
            "{took:?}"
        );
        assert!(matches!(trip.result, Err(Error::DeadlineExceeded(_))), "{trip:?}");
        assert_eq!(trip.attempts, 0);
        assert_eq!(Verdict::of(REFUND, &trip).side_effect, SideEffect::Untold);
    }

    /// An attempt-level service that is ready and then waits with no bound of its own (above the attempt layer,
    /// no attempt timeout applies to it).
    #[derive(Clone)]
    struct Hangs;

    impl Service<Request<Bytes>> for Hangs {
        type Response = Response<Body>;
        type Error = Error;
        type Future = std::future::Pending<Result<Response<Body>, Error>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _request: Request<Bytes>) -> Self::Future {
            std::future::pending()
        }
    }

    /// The deadline holds on its own timer, whatever waits below: a trip whose attempt-level stack hangs with no
    /// bound of its own ends at the deadline with the deadline's error, and — nothing below having said what it
    /// sent — a side effect's outcome unknown.
    #[tokio::test(start_paused = true)]
    async fn the_deadline_ends_a_trip_whatever_waits_below() {
        let (trip, took) = refund(&Upstream::over(parts(), Hangs)).await;
        assert_eq!(
            took,
            Duration::from_secs(2) - ballast_core::DEFAULT_RESERVE,
            "less its reserve"
        );
        assert!(matches!(trip.result, Err(Error::DeadlineExceeded(_))), "{trip:?}");
        let verdict = Verdict::of(REFUND, &trip);
        assert_eq!(
            verdict.code,
            Some(ErrorCode::OutcomeUnknown),
            "precedence: unknown first"
        );
        assert_eq!(verdict.side_effect, SideEffect::Unknown);
    }
}
