//! The [`tower::Layer`] holding one upstream's admission state.

use std::sync::Arc;

use ballast_core::{Admission, AdmissionConfig, InvalidAdmission};
use tower::Layer;

use super::AdmissionService;
use super::slot::Shared;

/// The admission layer: a concurrency limit and a bounded priority queue per upstream, with shedding.
///
/// Why: an upstream serves only so many calls at once. Under a spike the rest must wait or be refused, and an
/// unbounded wait turns the spike into a collapse in which every request times out in the queue (Google SRE,
/// "Addressing Cascading Failures"); refusing blindly drops a payment as readily as a product search. So every
/// call asks `ballast-core`'s [`Admission`](ballast_core::Admission) for a slot, and this layer carries out its
/// answer (the rules — who is served first, who is evicted, what is doomed — are documented there):
/// - **Run**: a slot was free; the call runs now, holding it.
/// - **Queued**: the call parks until a slot is handed to it, for at most as long as its deadline can still
///   hold an attempt, and until its [`CallContext::cancel`] token fires. A waiter pushed out by a higher class
///   is answered [`Error::Overloaded`] with reason `evicted`; one whose deadline passes is answered
///   [`Error::DeadlineExceeded`] and never runs.
/// - **Shed**: answered at once, without calling the service below: [`Error::Overloaded`] with the core's
///   reason (`queue_full`, `deadline_too_short`) and its suggested `Retry-After`, or `DeadlineExceeded` for a
///   deadline already past.
///
/// The call's class is [`CallContext::priority`] and its deadline [`CallContext::effective_deadline`].
/// Without a [`CallContext`] (the layer used alone) a call is `critical`, with the enclosing
/// [`scope`](crate::context::scope)'s deadline if there is one, else none: it waits until a slot frees or its future is
/// dropped, like tower's `ConcurrencyLimit`. A refusal's stable code is written into the
/// call's [`Report`].
///
/// # Where it sits
/// Outside the retry layer (`deadline -> admission -> retry -> breaker -> attempt`): a call holds its slot
/// for its whole life, every retry and backoff included (DESIGN.md: "each retry attempt keeps its admission
/// slot"), so retries never add concurrency beyond the limit.
///
/// # Slots and waiters
/// A slot is held as a value and given back on drop — when the call ends, fails, or its future is dropped —
/// and a freed slot is handed straight to the next waiter the core picks, so a waiter never races newcomers
/// for it. A parked call's place in the queue is removed when it stops waiting for any reason (woken, timed
/// out, cancelled, dropped): no interleaving leaves a waiter behind or loses a slot. On release the core is told
/// how long the slot was held (its typical-latency estimate, used to refuse doomed work and to suggest
/// `Retry-After`) — only for calls that reached the upstream; a call dropped or refused below reports nothing.
/// The shared state sits behind a `std` mutex held for one pure decision at a time, never across an await.
///
/// # Example
/// Used alone over a `tower::service_fn`, one call at a time:
/// ```
/// use ballast::{Error, layer::AdmissionLayer};
/// use ballast_core::AdmissionConfig;
/// use bytes::Bytes;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let admission = AdmissionLayer::new(AdmissionConfig::new(1, 16)).unwrap();
/// let upstream = service_fn(|_request: http::Request<Bytes>| async {
///     Ok::<_, Error>(http::Response::new(Bytes::from_static(b"done")))
/// });
/// let service = admission.layer(upstream);
///
/// let answer = service.clone().oneshot(http::Request::new(Bytes::new())).await.unwrap();
/// assert_eq!(answer.body(), "done");
/// assert_eq!((admission.in_flight(), admission.queued()), (0, 0), "the slot is free again");
///
/// // No slot and no queue: a second call while one runs is shed at once.
/// let full = AdmissionLayer::new(AdmissionConfig::new(1, 0)).unwrap();
/// let slow = full.layer(service_fn(|_request: http::Request<Bytes>| async {
///     std::future::pending::<Result<http::Response<Bytes>, Error>>().await
/// }));
/// let running = tokio::spawn(slow.clone().oneshot(http::Request::new(Bytes::new())));
/// tokio::task::yield_now().await;
/// let shed = slow.oneshot(http::Request::new(Bytes::new())).await.unwrap_err();
/// assert!(matches!(shed, Error::Overloaded { reason: ballast::Overload::QueueFull, .. }));
/// running.abort();
/// # }
/// ```
///
/// [`CallContext`]: crate::CallContext
/// [`CallContext::cancel`]: crate::CallContext::cancel
/// [`CallContext::priority`]: crate::CallContext::priority
/// [`CallContext::effective_deadline`]: crate::CallContext::effective_deadline
/// [`Error::Overloaded`]: crate::Error::Overloaded
/// [`Error::DeadlineExceeded`]: crate::Error::DeadlineExceeded
/// [`Report`]: crate::Report
#[derive(Clone, Debug)]
pub struct AdmissionLayer {
    shared: Arc<Shared>,
}

impl AdmissionLayer {
    /// A layer admitting `config.limit` calls at once with `config.queue` waiting; refuses a configuration
    /// that cannot work (a zero limit, a zero typical latency).
    pub fn new(config: AdmissionConfig) -> Result<Self, InvalidAdmission> {
        Ok(AdmissionLayer {
            shared: Arc::new(Shared::new(Admission::new(config)?)),
        })
    }

    /// Calls running now (holding a slot), for `/status` and metrics.
    pub fn in_flight(&self) -> usize {
        self.shared.lock().in_flight()
    }

    /// Calls waiting for a slot.
    pub fn queued(&self) -> usize {
        self.shared.lock().queued()
    }

    /// The shared state, for the layer's own services and a client asking for slots itself.
    pub(super) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Calls waiting per class, lowest class first (the order of [`Priority::ALL`](ballast_core::Priority::ALL)).
    pub fn queued_by_class(&self) -> [usize; 4] {
        self.shared.lock().queued_by_class()
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = AdmissionService<S>;

    fn layer(&self, inner: S) -> AdmissionService<S> {
        AdmissionService {
            inner,
            shared: Arc::clone(&self.shared),
        }
    }
}
