//! [`OwnedPermit`]: a [`Permit`] that holds its breaker's `Arc` instead of borrowing it.
//!
//! It adds no rule of its own: recording and dropping lend the ticket to a borrowed [`Permit`] of the same
//! breaker, so both kinds go through one code path (late generations, probe slots, `Ignored`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

use super::machine::Ticket;
use super::{CallResult, CircuitBreaker, Permit, Transition};
use crate::{DefaultRng, Instant};

/// Leave to send one attempt, owning a share of its breaker: for an outcome known only after the call that
/// asked returned (a stream, recorded when it ends). Granted by
/// [`CircuitBreaker::try_acquire_owned`]. Record its outcome with [`record`](OwnedPermit::record); dropping
/// it unrecorded (the stream was cancelled, its caller went away) counts nothing and frees a half-open probe
/// slot — the same rules as a [`Permit`], generations included.
#[must_use = "record the attempt's outcome on the permit; dropping it counts nothing"]
pub struct OwnedPermit<R = DefaultRng> {
    pub(super) breaker: Arc<CircuitBreaker<R>>,
    pub(super) ticket: Ticket,
    /// Whether the ticket was handed to a borrowed permit already (recorded): dropping then does nothing.
    pub(super) done: bool,
}

impl<R> OwnedPermit<R> {
    /// Whether this permit holds a half-open probe slot.
    pub fn is_probe(&self) -> bool {
        self.ticket.probe
    }

    /// The breaker generation it was granted in (see [`BreakerSnapshot::generation`](super::BreakerSnapshot)).
    pub fn generation(&self) -> u64 {
        self.ticket.generation
    }

    /// The breaker it was granted by (to read its state after recording, for reports).
    pub fn breaker(&self) -> &Arc<CircuitBreaker<R>> {
        &self.breaker
    }

    /// Hands the ticket to a borrowed permit, which then decides what it counts; this one is spent.
    fn lend(&mut self) -> Permit<'_, R> {
        self.done = true;
        Permit {
            breaker: &self.breaker,
            ticket: self.ticket,
            done: false,
        }
    }
}

impl<R: Rng> OwnedPermit<R> {
    /// Records the attempt's outcome, as [`Permit::record`] does (for a stream, the time to first byte is the
    /// usual latency). Returns the transition it caused, if any. A permit of an older generation records
    /// nothing.
    pub fn record(mut self, result: CallResult, latency: Duration, now: Instant) -> Option<Transition> {
        self.lend().record(result, latency, now)
    }
}

impl<'a, R> Permit<'a, R> {
    /// The same permit, now owning a share of its breaker: for an attempt that learns only from its answer that
    /// its outcome will be known later (a 2xx that is a stream). `breaker` is the `Arc` this permit's breaker
    /// lives in. The call has started answering, so it leaves the start order: later calls' results no longer
    /// wait for it, and its own counts when it is recorded (a stream may last minutes).
    ///
    /// # Panics
    /// When `breaker` is another breaker than the one that granted the permit (its ticket would be recorded on
    /// the wrong upstream).
    pub fn into_owned(mut self, breaker: &Arc<CircuitBreaker<R>>) -> OwnedPermit<R> {
        assert!(
            std::ptr::eq(self.breaker, Arc::as_ptr(breaker)),
            "Permit::into_owned: the Arc of another breaker"
        );
        // The ticket moves to the owned permit: this one must not give it back when it drops. Its call started
        // answering: it leaves the start order, and its result counts when it is recorded.
        self.done = true;
        let ticket = self.breaker.with_machine(|m| m.detach(self.ticket));
        OwnedPermit {
            breaker: Arc::clone(breaker),
            ticket,
            done: false,
        }
    }
}

impl<R> Drop for OwnedPermit<R> {
    fn drop(&mut self) {
        if !self.done {
            // The borrowed permit's own drop frees a probe slot, or does nothing.
            drop(self.lend());
        }
    }
}

impl<R> fmt::Debug for OwnedPermit<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("generation", &self.ticket.generation)
            .field("probe", &self.ticket.probe)
            .finish_non_exhaustive()
    }
}
