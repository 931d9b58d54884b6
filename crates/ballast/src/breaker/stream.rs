//! [`StreamPermit`]: the breaker permit of a streamed attempt, carried on its 2xx answer until the stream ends.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ballast_core::{BreakerState, CallResult, Instant, OwnedPermit};

/// Response extension: the permit of a streamed attempt that answered 2xx, not recorded yet. Whatever reads
/// the stream records its outcome when it ends ([`record`](StreamPermit::record)), with the time to first
/// byte as the latency. Dropped unrecorded (every clone gone: the stream was cancelled or dropped, the answer
/// never reached a reader), it counts nothing and frees a half-open probe slot.
///
/// Shared (`Arc<Mutex<..>>`) only because an extension must be `Clone`: the first `record` takes the permit,
/// later ones find nothing.
#[derive(Clone)]
pub(crate) struct StreamPermit(Arc<Mutex<Option<Pending>>>);

struct Pending {
    permit: OwnedPermit,
    /// From the permit to the first event (the answer the stack saw).
    first_byte: Duration,
}

impl StreamPermit {
    pub(crate) fn new(permit: OwnedPermit, first_byte: Duration) -> Self {
        StreamPermit(Arc::new(Mutex::new(Some(Pending { permit, first_byte }))))
    }

    /// Records the stream's outcome at `now` (its end), with the time to first byte as its latency; returns
    /// the breaker's state after it, or `None` when the permit was recorded already.
    pub(crate) fn record(&self, result: CallResult, now: Instant) -> Option<BreakerState> {
        let Pending { permit, first_byte } = self.0.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        let breaker = Arc::clone(permit.breaker());
        if let Some(transition) = permit.record(result, first_byte, now) {
            tracing::info!(%transition, "circuit breaker changed state at the end of a stream");
        }
        Some(breaker.state(now))
    }
}

impl fmt::Debug for StreamPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pending = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("StreamPermit")
            .field("permit", &pending.as_ref().map(|p| &p.permit))
            .field("first_byte", &pending.as_ref().map(|p| p.first_byte))
            .finish()
    }
}
