//! The circuit breaker: stop calling an upstream that is failing, and find out cheaply when it is back.
//!
//! Why: a tool or model deployment that times out keeps every caller waiting for its full timeout, holds their
//! admission slots and spends their retry budget; one slow function takes the whole agent down (DESIGN.md,
//! problem 4; reference/000 and /002). A breaker per upstream fails those calls fast, or sends them to a
//! fallback, until the upstream recovers (Nygard, *Release It!*; Fowler, "CircuitBreaker").
//!
//! # Rules (DESIGN.md, "Circuit breaker — a dead upstream, not a crowd")
//! - **Inputs**: each attempt's upstream outcome as a [`CallResult`]: 5xx, timeouts and transport errors are
//!   failures; 2xx and 4xx successes; overload answers (429, 529, 503 with `Retry-After`: "less, please", the
//!   adaptive throttle's business), cancellations, replays and gateway-local rejections are not counted. With
//!   `slow_call` set, a success slower than it counts as a failure (resilience4j's slow-call threshold).
//! - **Start order.** Results are counted in the order their calls *started*, each once every call that started
//!   before it has answered. Why: in a burst, fast failures finish before the slow successes that started with
//!   them; counted as they complete, the first completions of any burst look like an outage ("5 consecutive
//!   failures", "13 of the first 20 calls failed"). Counted by start, a burst is judged on what the upstream
//!   really did. An unanswered call holds later results back for at most five minutes (then it is skipped), and the
//!   queue is bounded. A call dropped unrecorded stops holding results back; they are counted at the next result.
//! - **Closed -> Open** on `consecutive_failures` failures in a row in start order (a success resets the count;
//!   an uncounted result does not), or when the failure rate over the sliding `window` reaches `failure_rate`
//!   with at least `min_calls` counted calls (resilience4j's time-based window and minimum number of calls).
//!   The rate is checked after every counted call. Either trigger may be off.
//! - **Open** for `open_for`, jittered uniformly by `open_jitter` so breakers that opened together (on many
//!   gateway instances, for many tools behind one failing host) do not probe together. Nothing is let through.
//! - **Open -> HalfOpen** when the open time ends. This happens lazily, on the first call that looks: a breaker
//!   runs no timer.
//! - **HalfOpen** lets at most `half_open_probes` (M) probes be in flight at once. A probe dropped before it
//!   answers, or recorded as [`CallResult::Ignored`], frees its slot and is not counted. **HalfOpen -> Closed**
//!   after `success_threshold` (S) successful probes, with a fresh window; **HalfOpen -> Open** on any failed
//!   probe, for a newly drawn open time. S may exceed M: a slot is reused as soon as its probe answers, so the
//!   probes go through in waves of at most M. With S < M the breaker closes on the S-th success; the probes
//!   still in flight then belong to an older generation (below).
//!
//! # Late results and generations
//! Every transition starts a new *generation*; a [`Permit`] remembers the generation it was granted in. A result
//! recorded for an older generation is dropped: a call that started before the breaker opened says nothing
//! about the upstream after it (its failure must not reopen a breaker that has since gone half-open; its
//! success must not count as a probe), and a probe from an earlier half-open period must neither close the
//! current one nor free one of its slots. Such results are neither counted nor reported. One thing a stale
//! permit still does, recorded or dropped: a closed breaker grants permits without its lock, so a permit granted
//! across a transition may hold a place in the new generation's start order; that place is skipped, and the
//! results it held back are counted then.
//!
//! # Threads and cost
//! One [`CircuitBreaker`] per upstream, shared behind an [`Arc`](std::sync::Arc); a [`Permit`] borrows its
//! breaker, so the task that sends the attempt holds the `Arc` and the permit together (an `async` block owns
//! both). Borrowing instead of cloning the `Arc` keeps two contended reference-count updates off every call.
//! An attempt whose outcome is known only later — a streamed answer, judged when the stream ends — takes an
//! [`OwnedPermit`] instead ([`CircuitBreaker::try_acquire_owned`]): it holds a clone of the `Arc`, and records
//! and drops exactly like a [`Permit`]. The state is a small struct behind a `std` mutex held for a few dozen
//! nanoseconds, taken to record a permit and to drop it unrecorded; a closed breaker grants permits (and their
//! places in the start order) without it — an atomic load and a `fetch_add` — and the start order learns of a
//! call when it, or a call that started after it, is recorded or dropped.
//! Time is always passed in (`now`), and the open-time jitter comes from the breaker's own seedable RNG.

mod call;
mod config;
mod error;
mod machine;
mod owned;
mod state;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::Rng;

pub use call::CallResult;
pub use config::{BreakerConfig, BreakerConfigBuilder};
pub use error::{BreakerRejected, InvalidBreaker};
pub use owned::OwnedPermit;
pub use state::{BreakerSnapshot, BreakerState, Transition, TransitionReason};

use machine::{Gate, Machine, Ticket};

use crate::cache_line::OwnCacheLine;
use crate::{DefaultRng, Instant, default_rng};

/// A circuit breaker for one upstream (a tool, a model deployment), shared by every call to it.
///
/// ```
/// use ballast_core::{BreakerConfig, BreakerState, CallResult, CircuitBreaker, Instant};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let config = BreakerConfig::builder().consecutive_failures(2).open_jitter(0.0).build().unwrap();
/// let breaker = Arc::new(CircuitBreaker::seeded(config, Some(1)));
///
/// // Two 503s in a row, half a second apart (the default spread), open it.
/// let mut now = Instant::from_millis(500);
/// for _ in 0..2 {
///     let permit = breaker.try_acquire(now).unwrap();
///     permit.record(CallResult::from_status(503), Duration::from_millis(20), now);
///     now = now + Duration::from_millis(500);
/// }
/// let now = Instant::from_millis(1_000);
/// assert_eq!(breaker.state(now), BreakerState::Open);
///
/// // While open, calls fail fast and say how long is left (the `Retry-After`).
/// let refused = breaker.try_acquire(now + Duration::from_secs(1)).unwrap_err();
/// assert_eq!(refused.retry_in(), Some(Duration::from_secs(4)));
///
/// // After `open_for` (5 s) a probe goes through; three good probes close it.
/// let later = now + Duration::from_secs(5);
/// for _ in 0..3 {
///     let probe = breaker.try_acquire(later).unwrap();
///     probe.record(CallResult::Success, Duration::from_millis(20), later);
/// }
/// assert_eq!(breaker.state(later), BreakerState::Closed);
/// ```
pub struct CircuitBreaker<R = DefaultRng> {
    config: BreakerConfig,
    /// What a closed breaker grants permits with, without the lock.
    gate: Arc<Gate>,
    machine: OwnCacheLine<Mutex<Machine<R>>>,
}

impl CircuitBreaker<DefaultRng> {
    /// A breaker drawing its open-time jitter from a [`DefaultRng`] seeded with `seed` (tests, reproducible
    /// runs) or from the operating system.
    pub fn seeded(config: BreakerConfig, seed: Option<u64>) -> Self {
        CircuitBreaker::new(config, default_rng(seed))
    }
}

impl<R> CircuitBreaker<R> {
    /// A closed breaker drawing its open-time jitter from `rng`.
    pub fn new(config: BreakerConfig, rng: R) -> Self {
        let gate = Arc::new(Gate::default());
        CircuitBreaker {
            config,
            machine: OwnCacheLine(Mutex::new(Machine::new(config, rng, Arc::clone(&gate)))),
            gate,
        }
    }

    /// The breaker's parameters.
    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// Asks to send one attempt at `now`. Closed: always a permit. Open: refused until the open time ends, then
    /// half-open. Half-open: a probe permit while fewer than M are in flight.
    ///
    /// Record the attempt's outcome on the permit; dropping it unrecorded counts nothing (and frees a probe
    /// slot).
    pub fn try_acquire(&self, now: Instant) -> Result<Permit<'_, R>, BreakerRejected> {
        Ok(Permit {
            breaker: self,
            ticket: self.ticket(now)?,
            done: false,
        })
    }

    /// [`try_acquire`](Self::try_acquire), for a permit that must outlive a borrow of the breaker: a streamed
    /// answer, whose outcome is known only when the stream ends, long after the call that sent it returned.
    /// The [`OwnedPermit`] holds a clone of the `Arc` (two reference-count updates, the price of not borrowing)
    /// and behaves exactly like a [`Permit`].
    ///
    /// ```
    /// use ballast_core::{BreakerConfig, CallResult, CircuitBreaker, Instant, OwnedPermit};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let config = BreakerConfig::builder().consecutive_failures(1).build().unwrap();
    /// let breaker = Arc::new(CircuitBreaker::seeded(config, Some(1)));
    /// let now = Instant::from_millis(0);
    /// // Handed to whatever reads the stream; the breaker's `Arc` can go.
    /// let permit: OwnedPermit = breaker.try_acquire_owned(now).unwrap();
    /// let end = now + Duration::from_secs(5);
    /// let opened = permit.record(CallResult::Failure, Duration::from_millis(80), end);
    /// assert!(opened.is_some());
    /// ```
    pub fn try_acquire_owned(self: &Arc<Self>, now: Instant) -> Result<OwnedPermit<R>, BreakerRejected> {
        Ok(OwnedPermit {
            breaker: Arc::clone(self),
            ticket: self.ticket(now)?,
            done: false,
        })
    }

    /// The ticket of a new permit at `now`.
    fn ticket(&self, now: Instant) -> Result<Ticket, BreakerRejected> {
        match self.gate.closed_ticket(now) {
            Some(ticket) => Ok(ticket),
            None => self.with_machine(|m| m.acquire(now)),
        }
    }

    /// The state at `now`.
    pub fn state(&self, now: Instant) -> BreakerState {
        if self.gate.is_closed() {
            return BreakerState::Closed;
        }
        self.with_machine(|m| m.state(now))
    }

    /// The time left open at `now` (the `Retry-After` of a fail-fast answer), or `None` when not open.
    pub fn open_remaining(&self, now: Instant) -> Option<Duration> {
        self.with_machine(|m| m.open_remaining(now))
    }

    /// Everything `/status` and the metrics show, read at `now` under one lock.
    pub fn snapshot(&self, now: Instant) -> BreakerSnapshot {
        self.with_machine(|m| m.snapshot(now))
    }

    /// Closes the breaker now, whatever its state, with a fresh window (operator action; reason `Manual`).
    /// Permits granted before are late from now on.
    pub fn reset(&self, now: Instant) -> Transition {
        self.with_machine(|m| m.reset(now))
    }

    /// Runs `step` on the machine under the lock.
    fn with_machine<T>(&self, step: impl FnOnce(&mut Machine<R>) -> T) -> T {
        // The machine is consistent between statements that can panic (none of them do), so a poisoned lock
        // still guards a usable state: carry on rather than take every caller down.
        let mut machine = self.machine.lock().unwrap_or_else(PoisonError::into_inner);
        step(&mut machine)
    }
}

impl<R: Rng> CircuitBreaker<R> {
    /// Opens the breaker now, whatever its state, for a freshly drawn open time (operator action; reason
    /// `Manual`). Permits granted before are late from now on.
    pub fn force_open(&self, now: Instant) -> Transition {
        self.with_machine(|m| m.force_open(now))
    }
}

impl<R> fmt::Debug for CircuitBreaker<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreaker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Leave to send one attempt. Record its outcome with [`record`](Permit::record); dropping it unrecorded
/// (the attempt was cancelled, or never sent) counts nothing and frees a half-open probe slot.
#[must_use = "record the attempt's outcome on the permit; dropping it counts nothing"]
pub struct Permit<'a, R = DefaultRng> {
    breaker: &'a CircuitBreaker<R>,
    ticket: Ticket,
    done: bool,
}

impl<R: Rng> Permit<'_, R> {
    /// Records the attempt's outcome: its [`CallResult`], its upstream latency (compared with `slow_call`; for a
    /// stream, the time to first byte is the usual choice) and the time it finished. Returns the transition it
    /// caused, if any, for logs and metrics. A permit of an older generation records nothing.
    pub fn record(mut self, result: CallResult, latency: Duration, now: Instant) -> Option<Transition> {
        self.done = true;
        let ticket = self.ticket;
        self.breaker
            .with_machine(|m| m.record(ticket, result, latency, now))
    }
}

impl<R> Permit<'_, R> {
    /// Whether this permit holds a half-open probe slot.
    pub fn is_probe(&self) -> bool {
        self.ticket.probe
    }

    /// The breaker generation it was granted in (see [`BreakerSnapshot::generation`]).
    pub fn generation(&self) -> u64 {
        self.ticket.generation
    }
}

impl<R> Drop for Permit<'_, R> {
    fn drop(&mut self) {
        // A probe gives its slot back; a closed-state call stops holding back later results (they are counted
        // at the next result recorded).
        if !self.done {
            let ticket = self.ticket;
            self.breaker.with_machine(|m| m.release(ticket));
        }
    }
}

impl<R> fmt::Debug for Permit<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("generation", &self.ticket.generation)
            .field("probe", &self.ticket.probe)
            .finish_non_exhaustive()
    }
}
