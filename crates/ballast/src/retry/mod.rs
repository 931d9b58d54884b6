//! The retry layer: one logical call becomes as many attempts as the core's retry decision allows.
//!
//! Why a layer that only asks: every rule about *whether* to retry — the retryable set, side-effect safety, the
//! attempt cap, `Retry-After`, the deadline, the run's allowance and the upstream's budget — is
//! [`RetryPolicy::decide`](ballast_core::RetryPolicy::decide) in `ballast-core`, pure and tested there. This layer
//! is the loop around it: send an attempt, turn what came back into an
//! [`AttemptOutcome`](ballast_core::AttemptOutcome), ask, then sleep, stop or answer. Retries happen here and
//! nowhere else in the stack (reference/002: 3 tries over 5 layers is 243x).
//!
//! # Each attempt
//! The request is copied (the body is [`Bytes`], so a copy is a reference count) with its method, URI, version,
//! headers and extensions — the [`CallContext`](crate::context::CallContext) reaches the layers below — and an
//! [`AttemptNumber`](crate::context::AttemptNumber). The layer below is awaited until ready, then called. Its answer
//! becomes an outcome:
//! - a response: [`classify_response`] (status, `x-should-retry`, `Retry-After`/`retry-after-ms`, problem code);
//! - an error that is an attempt's outcome ([`Error::attempt_outcome`]: never sent, timeout, transport error);
//! - any other error (a local refusal below — circuit open, no time for the attempt, shed — or a cancelled
//!   attempt, or an answer over the body limit) is not an upstream outcome, so it is not judged: the call stops
//!   at once with that error. (Only the refusals prove nothing went out; a retry paid for is given back then.)
//!
//! Before each attempt the loop waits for the service below to be ready: nothing is sent meanwhile, and the wait
//! ends when the deadline can no longer hold an attempt ([`Error::DeadlineExceeded`](crate::Error)) or the caller
//! cancels, like every wait of the stack.
//!
//! On `Retry { after }` the failed response is dropped (its buffered body freed) before the sleep; the sleep ends
//! at once with [`Error::Cancelled`] when the call's `cancel` token fires, and dropping the call's future drops
//! the sleep: no further attempt starts either way. A retry the decision paid for (from the run's allowance and
//! the budget) whose attempt never goes out — the backoff cancelled or dropped, or the attempt refused below with
//! circuit open, deadline exceeded or overloaded — is given back to both
//! ([`RunAllowance::give_back`](ballast_core::RunAllowance::give_back),
//! [`RetryBudget::refund`](ballast_core::RetryBudget::refund)). The backoff is slept even when the breaker below
//! is open: this layer cannot see the breaker (it is just the service below), and its open period may end
//! during the wait (a half-open probe); an attempt refused after the wait costs time, no longer a retry. On `Stop(reason)` the caller gets the upstream's own answer
//! when there was one (`Ok`, with the reason in the report), else [`Error::Stopped`] (the attempt's error text
//! stays in the report's last attempt).
//!
//! # What it returns
//! The loop returns a [`Trip`](crate::outcome::Trip): the result above, why the decision stopped, how many
//! attempts it numbered and what they may have done at the upstream ([`Reach`](crate::outcome::Reach), from each
//! attempt's own answer or error). A `ToolClient` and a model route read those values to decide what comes next
//! (a fallback, a 409 wait, the next deployment) and write the report's verdict from them. As a tower service
//! ([`Retry`]), this layer is that edge itself: at the end of the call it writes the verdict into the context's
//! report — the stop reason and its code (cleared on success), whether the answer was replayed
//! (`Idempotent-Replayed: true`), the budget and run allowance left, and whether a side effect is now settled
//! (a success or a replay) or unknown (`outcome.rs`: the rule) — and returns the result. It writes no attempt
//! lines: the attempt layer below does (and the breaker, for an attempt it refused), the places that see each
//! attempt end, also one that outlives its caller.
//!
//! # A caller that waits out "in progress" itself
//! A `ToolClient` polls a 409 `urn:ballast:idempotency_in_progress` within the deadline, each poll a new trip
//! through the stack, and says so to the loop ([`Polling`], crate-private): such an answer comes back to it at
//! once, unjudged — no retry, no deposit, no withdrawal — attempt numbers go on from the operation's earlier
//! trips, and a poll deposits nothing in the budget (see `poll.rs`).
//!
//! # Randomness
//! One [`DefaultRng`] per layer (shared by its services), behind a `Mutex` held only while
//! [`decide`](ballast_core::RetryPolicy::decide) runs — a few hundred nanoseconds, no await, no I/O — so calls
//! draw different jitter (a per-call generator with one seed would make a herd back off in step) and a seed
//! ([`RetryLayer::with_rng_seed`]) makes a test's waits reproducible.
//!
//! # Without a `CallContext`
//! The layer works alone: a request with no [`CallContext`](crate::context::CallContext) gets one, carried to the layers
//! below: a read-only call for the safe methods (GET, HEAD, OPTIONS, TRACE), otherwise a side-effecting call to
//! an upstream that does not deduplicate (only never-sent errors are retried); the deadline of the enclosing
//! [`scope`](crate::context::scope), else five minutes (DESIGN.md's largest accepted timeout).
//!
//! [`StopReason::OutcomeUnknown`]: ballast_core::StopReason::OutcomeUnknown

mod call;
mod classify;
mod poll;

use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use ballast_core::{
    AttemptOutcome, CallState, DefaultRng, Instant, RetryBudget, RetryDecision, RetryPolicy, RunAllowance,
    default_rng,
};
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use tower::{Layer, Service};

use crate::outcome::{Trip, Verdict};
use crate::{Body, CallContext, Error, clock};

pub(crate) use call::run;
pub use classify::classify_response;
pub(crate) use poll::Polling;

/// Retries a call as the core's retry decision says, drawing from the upstream's retry budget.
///
/// Clones and the services it makes share one budget and one random generator.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
///
/// use ballast::{Error, clock, context::CallContext, layer::RetryLayer};
/// use ballast_core::{CallKind, Deadline, RatioBudget, RetryPolicy};
/// use bytes::Bytes;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// // An upstream that is unavailable once, then answers.
/// let calls = Arc::new(AtomicU32::new(0));
/// let seen = Arc::clone(&calls);
/// let upstream = service_fn(move |_request: http::Request<Bytes>| {
///     let status = if seen.fetch_add(1, Ordering::SeqCst) == 0 { 503 } else { 200 };
///     async move { Ok::<_, Error>(http::Response::builder().status(status).body(Bytes::new()).unwrap()) }
/// });
/// let layer = RetryLayer::new(RetryPolicy::default(), Arc::new(RatioBudget::default())).with_rng_seed(7);
///
/// let context = CallContext::new(CallKind::ReadOnlyTool, Deadline::after(clock::now(), Duration::from_secs(30)));
/// let mut request = http::Request::get("http://orders.internal/orders/A-1001").body(Bytes::new()).unwrap();
/// request.extensions_mut().insert(context.clone());
///
/// let response = layer.layer(upstream).oneshot(request).await.unwrap();
/// assert_eq!(response.status(), 200);
/// assert_eq!(calls.load(Ordering::SeqCst), 2);
/// // The layer's verdict is in the report: a success, nothing stopped it, one retry spent of the budget.
/// let report = context.report.snapshot();
/// assert_eq!((report.stop, report.code), (None, None));
/// assert!(report.budget_left.is_some());
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct RetryLayer {
    shared: Arc<Shared>,
}

impl RetryLayer {
    /// Retries by `policy`, each retry drawn from `budget` (the upstream's, shared by every call to it). The
    /// random generator is seeded by the operating system.
    pub fn new(policy: RetryPolicy, budget: Arc<dyn RetryBudget>) -> Self {
        RetryLayer {
            shared: Arc::new(Shared::new(policy, budget, default_rng(None))),
        }
    }

    /// The same layer drawing its jitter from a generator seeded with `seed` (tests, reproducible runs). Services
    /// made before keep the generator they had.
    pub fn with_rng_seed(self, seed: u64) -> Self {
        let policy = self.shared.policy;
        let budget = Arc::clone(&self.shared.budget);
        RetryLayer {
            shared: Arc::new(Shared::new(policy, budget, default_rng(Some(seed)))),
        }
    }

    /// The retry policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.shared.policy
    }

    /// The upstream's retry budget.
    pub fn budget(&self) -> &Arc<dyn RetryBudget> {
        &self.shared.budget
    }

    /// What the layer's services share, for a client that runs the retry loop itself ([`run`]).
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;

    fn layer(&self, inner: S) -> Retry<S> {
        Retry {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}

/// The service of [`RetryLayer`]: one logical call in, attempts to `S` out.
///
/// Always ready: each attempt waits for `S` to be ready before it is sent (attempts are spread over time, so
/// readiness checked before the call would be stale by the second attempt).
#[derive(Clone, Debug)]
pub struct Retry<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S, B> Service<Request<Bytes>> for Retry<S>
where
    S: Service<Request<Bytes>, Response = Response<B>, Error = Error> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Into<Body> + 'static,
{
    type Response = Response<Body>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Response<Body>, Error>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Bytes>) -> Self::Future {
        let inner = self.inner.clone();
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            let ctx = call::context_of(&mut request);
            let trip = run(&shared, inner, request, &ctx, None).await;
            shared.write_verdict(&ctx, &trip);
            trip.result
        })
    }
}

/// What every service of one layer shares: the policy, the budget, the random generator.
#[derive(Debug)]
pub(crate) struct Shared {
    policy: RetryPolicy,
    budget: Arc<dyn RetryBudget>,
    rng: Mutex<DefaultRng>,
}

impl Shared {
    /// Writes the verdict on `trip` into the call's report: the retry layer as the edge of a tower stack (a
    /// `ToolClient` or a model route writes its own, over all its trips).
    fn write_verdict(&self, ctx: &CallContext, trip: &Trip) {
        let budget_left = self.budget.available(clock::now());
        crate::outcome::write_verdict(&Verdict::of(ctx.kind, trip), ctx, budget_left);
    }

    fn new(policy: RetryPolicy, budget: Arc<dyn RetryBudget>, rng: DefaultRng) -> Self {
        Shared {
            policy,
            budget,
            rng: Mutex::new(rng),
        }
    }

    /// The core's decision on the attempt that ended with `outcome`, at `now` (the time a retry it grants is
    /// withdrawn at, to refund it by); without the call's deposit in the budget unless `deposits` (a poll's was
    /// made by its operation's first call, see [`Polling`]).
    fn decide(
        &self,
        outcome: &AttemptOutcome,
        call: &mut CallState,
        run: Option<&RunAllowance>,
        deposits: bool,
        now: Instant,
    ) -> RetryDecision {
        let without_deposit = poll::WithoutDeposit(&*self.budget);
        let budget: &dyn RetryBudget = if deposits { &*self.budget } else { &without_deposit };
        // Held only for the decision (pure, no await): the generator is the one thing calls contend for.
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        self.policy.decide(outcome, call, now, budget, run, &mut *rng)
    }
}
