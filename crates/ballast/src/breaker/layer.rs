//! The [`tower::Layer`] that puts a circuit breaker in front of a service.

use std::sync::Arc;

use ballast_core::{AdaptiveThrottle, CircuitBreaker};
use tower::Layer;

use super::BreakerService;

/// The breaker layer: each attempt asks the upstream's circuit breaker first, and tells it how it went.
///
/// Why: an upstream that times out keeps every caller waiting for its full timeout, holds their admission slots
/// and spends their retry budget; one slow tool takes the whole agent down (DESIGN.md, problem 4). While the
/// upstream's [`CircuitBreaker`] is open this layer answers [`Error::CircuitOpen`] at once, with the time left
/// open, and sends nothing; half-open, it lets only the breaker's probes through. Every decision is
/// `ballast-core`'s: this layer only carries outcomes to the breaker and refusals back to the caller.
///
/// # Where it sits
/// Inside the retry layer (`deadline -> admission -> retry -> breaker -> attempt -> transport`), so every
/// attempt is gated and counted on its own, as DESIGN.md's breaker inputs say ("each attempt's upstream
/// outcome"). A refusal is a local rejection (`attempt_outcome()` is `None`): the retry layer stops on it
/// rather than spending its budget against an open circuit.
///
/// # What one attempt tells the breaker
/// - An answer: its status, through [`CallResult::from_answer`] — 5xx is a failure; 2xx, 3xx and 4xx are
///   successes (a client's bad request says nothing about the upstream's health); an overload refusal (429,
///   529, 503 with `Retry-After`) is not counted: a crowd is not a dead upstream (the throttle takes it).
/// - A replayed answer (`Idempotent-Replayed: true`): [`CallResult::Ignored`]. The upstream served a stored
///   answer and did no work, so it says nothing about its health now; a half-open probe slot it held is freed.
/// - An error that is an attempt's outcome ([`Error::attempt_outcome`]: a timeout, a transport error, a
///   connection refused): a failure — but for a timeout that was what the caller's deadline left, shorter than
///   the per-try timeout ([`Error::cut_by_deadline`](crate::Error::cut_by_deadline)): nothing, for the breaker and the throttle alike, unless it
///   had already run past the breaker's `slow_call` (then a failure: it would have been a slow call). A caller
///   in a hurry says nothing about the upstream's health: seven callers with 1 s deadlines against a model that
///   answers in 4 s must not open its breaker for the next caller, who has 30 s. An upstream that hangs is still
///   found by the attempts its per-try timeout ends, or a model route's share of the deadline for its primary.
/// - Any other error (a local rejection below, a cancellation) and a future dropped mid-attempt: nothing. The
///   permit is dropped unrecorded, which frees a half-open probe slot — a probe the caller abandoned must not
///   keep the breaker from probing again.
/// - A 2xx whose [`Body`](crate::Body) is a stream (a streamed model call, read by the transport up to its
///   commit point): nothing yet. Its 2xx is only the first chunk; a deployment whose streams all die after it is
///   failing all the same. The attempt's permit, made owned ([`Permit::into_owned`]), goes into the body, and
///   the [`ChatStream`](crate::model::ChatStream) that reads it records it when the stream ends, with the time to first
///   byte as its latency — so a half-open probe stream holds its slot until then. Its error answers and errors
///   before the commit point are recorded here, as above.
///
/// The latency given with the result (compared with the breaker's `slow_call`) is the time from the permit to
/// the answer, on the [`clock`](crate::clock). After each attempt, refused or not, the breaker's state is
/// written into the call's [`Report`](crate::Report) (`breaker`), when the request carries a
/// [`CallContext`]; without one the layer works the same and reports nothing.
///
/// # Sharing
/// One [`CircuitBreaker`] per upstream (a tool, a model deployment), behind an `Arc`: every clone of the
/// layer and its services shares it. The breaker's [`Permit`](ballast_core::Permit) borrows the breaker, so
/// each attempt's boxed future owns a clone of the `Arc` and the permit together.
///
/// # Example
/// Used alone over any service of the stack's shape, here a `tower::service_fn` that always answers 503:
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use ballast::{Error, layer::BreakerLayer};
/// use ballast_core::{BreakerConfig, BreakerState, CircuitBreaker};
/// use bytes::Bytes;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let config = BreakerConfig::builder()
///     .consecutive_failures(2)
///     .consecutive_spread(Duration::ZERO) // the two calls below share an instant
///     .build()
///     .unwrap();
/// let breaker = Arc::new(CircuitBreaker::seeded(config, Some(7)));
/// let upstream = service_fn(|_request: http::Request<Bytes>| async {
///     Ok::<_, Error>(http::Response::builder().status(503).body(Bytes::new()).unwrap())
/// });
/// let service = BreakerLayer::new(Arc::clone(&breaker)).layer(upstream);
///
/// for _ in 0..2 {
///     let answer = service.clone().oneshot(http::Request::new(Bytes::new())).await.unwrap();
///     assert_eq!(answer.status(), 503);
/// }
/// // Two failures in a row opened it: the next attempt is refused without reaching the upstream.
/// let refused = service.oneshot(http::Request::new(Bytes::new())).await.unwrap_err();
/// assert!(matches!(refused, Error::CircuitOpen { retry_in: Some(_) }));
/// assert_eq!(breaker.state(ballast::clock::now()), BreakerState::Open);
/// # }
/// ```
///
/// [`CallContext`]: crate::CallContext
/// [`Permit::into_owned`]: ballast_core::Permit::into_owned
/// [`CallResult::from_answer`]: ballast_core::CallResult::from_answer
/// [`CallResult::Ignored`]: ballast_core::CallResult::Ignored
/// [`Error::CircuitOpen`]: crate::Error::CircuitOpen
/// [`Error::attempt_outcome`]: crate::Error::attempt_outcome
#[derive(Clone, Debug)]
pub struct BreakerLayer {
    breaker: Arc<CircuitBreaker>,
    throttle: Option<Arc<AdaptiveThrottle>>,
}

impl BreakerLayer {
    /// A layer over `breaker`, the one breaker of its upstream.
    pub fn new(breaker: Arc<CircuitBreaker>) -> Self {
        BreakerLayer {
            breaker,
            throttle: None,
        }
    }

    /// The same layer with the upstream's adaptive throttle in front of its breaker (DESIGN.md's order: retry
    /// -> throttle -> breaker -> attempt). The throttle is asked first and refuses locally with
    /// [`Error::Overloaded`](crate::Error::Overloaded) (`reason` [`Overload::Throttled`](crate::Overload::Throttled)); an attempt the breaker then refuses
    /// is not counted by the throttle; every other attempt is (an overload answer — 429, 529, 503 with
    /// `Retry-After` — a request not accepted; a timeout or transport error the same; any other answer an
    /// accept), and the throttle's window restarts when the breaker closes after successful probes.
    pub fn with_throttle(mut self, throttle: Option<Arc<AdaptiveThrottle>>) -> Self {
        self.throttle = throttle;
        self
    }

    /// The upstream's throttle, if it has one.
    pub fn throttle(&self) -> Option<&Arc<AdaptiveThrottle>> {
        self.throttle.as_ref()
    }

    /// The upstream's breaker, for `/status` and metrics.
    pub fn breaker(&self) -> &Arc<CircuitBreaker> {
        &self.breaker
    }
}

impl<S> Layer<S> for BreakerLayer {
    type Service = BreakerService<S>;

    fn layer(&self, inner: S) -> BreakerService<S> {
        BreakerService::new(inner, Arc::clone(&self.breaker)).with_throttle(self.throttle.clone())
    }
}
