//! [`StreamPermit`]: the breaker permit of a streamed attempt, carried inside its 2xx answer's [`Body`] until the
//! stream ends.
//!
//! [`Body`]: crate::Body

use std::sync::Arc;
use std::time::Duration;

use crate::body::StreamEnd;
use ballast_core::{AdaptiveThrottle, BreakerState, CallResult, Instant, OwnedPermit, TransitionReason};

/// The permit of a streamed attempt that answered 2xx, not recorded yet. Whatever reads the stream records its
/// outcome when it ends ([`record`](StreamPermit::record)), with the time to first byte as the latency. Dropped
/// unrecorded (the stream was cancelled or dropped, the answer never reached a reader), it counts nothing and
/// frees a half-open probe slot.
#[derive(Debug)]
pub(crate) struct StreamPermit {
    permit: OwnedPermit,
    /// From the permit to the answer the stack saw (its commit point).
    first_byte: Duration,
    /// The upstream's throttle, restarted if this stream's end closes the breaker.
    throttle: Option<Arc<AdaptiveThrottle>>,
}

impl StreamPermit {
    pub(crate) fn new(
        permit: OwnedPermit,
        first_byte: Duration,
        throttle: Option<Arc<AdaptiveThrottle>>,
    ) -> Self {
        StreamPermit {
            permit,
            first_byte,
            throttle,
        }
    }
}

impl StreamEnd for StreamPermit {
    /// Records the stream's outcome at `now` (its end), with the time to first byte as its latency; returns the
    /// breaker's state after it.
    fn record(self: Box<Self>, result: CallResult, now: Instant) -> BreakerState {
        let breaker = Arc::clone(self.permit.breaker());
        if let Some(transition) = self.permit.record(result, self.first_byte, now) {
            tracing::info!(%transition, "circuit breaker changed state at the end of a stream");
            restart_on_close(self.throttle.as_deref(), transition.to, transition.reason);
        }
        breaker.state(now)
    }
}

/// The throttle's window restarts when the breaker closes after successful probes: what it counted before
/// says nothing about the recovered upstream (DESIGN.md, "Overload").
pub(super) fn restart_on_close(
    throttle: Option<&AdaptiveThrottle>,
    to: BreakerState,
    reason: TransitionReason,
) {
    if let Some(throttle) = throttle
        && to == BreakerState::Closed
        && matches!(reason, TransitionReason::ProbesSucceeded(_))
    {
        throttle.restart();
    }
}
