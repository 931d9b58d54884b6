//! The breaker's state machine, single-threaded: [`CircuitBreaker`](super::CircuitBreaker) wraps it in a mutex.

use std::time::Duration;

use rand::Rng;

use super::TransitionReason as Reason;
use super::window::Window;
use super::{BreakerConfig, BreakerRejected, BreakerSnapshot, BreakerState, CallResult, Transition};
use crate::Instant;
use crate::time::saturating_nanos;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen,
}

/// The value of [`Machine::closed_generation`] when the breaker is not closed (never a real generation).
pub(super) const NOT_CLOSED: u64 = u64::MAX;

/// What a permit remembers: the generation it was granted in and whether it holds a half-open probe slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ticket {
    pub(super) generation: u64,
    pub(super) probe: bool,
}

/// Counters and phase of one breaker. Every transition bumps `generation`, so results of permits granted
/// before it are recognised as late and dropped.
#[derive(Debug)]
pub(super) struct Machine<R> {
    config: BreakerConfig,
    phase: Phase,
    generation: u64,
    consecutive: u32,
    window: Window,
    probes_out: u32,
    probe_successes: u32,
    last: Option<Transition>,
    transitions: u64,
    rng: R,
}

impl<R> Machine<R> {
    pub(super) fn new(config: BreakerConfig, rng: R) -> Self {
        Machine {
            window: Window::new(config.window(), config.window_buckets()),
            config,
            phase: Phase::Closed,
            generation: 0,
            consecutive: 0,
            probes_out: 0,
            probe_successes: 0,
            last: None,
            transitions: 0,
            rng,
        }
    }

    /// Realises Open -> HalfOpen once the open time has ended (lazily: nothing runs while open).
    fn advance(&mut self, now: Instant) {
        if let Phase::Open { until } = self.phase
            && now >= until
        {
            self.enter(Phase::HalfOpen, Reason::OpenTimeElapsed, until);
        }
    }

    pub(super) fn acquire(&mut self, now: Instant) -> Result<Ticket, BreakerRejected> {
        self.advance(now);
        let probe = match self.phase {
            Phase::Closed => false,
            Phase::Open { until } => {
                return Err(BreakerRejected::Open {
                    retry_in: until.saturating_duration_since(now),
                });
            }
            Phase::HalfOpen if self.probes_out < self.config.half_open_probes() => {
                self.probes_out += 1;
                true
            }
            Phase::HalfOpen => {
                return Err(BreakerRejected::ProbesBusy {
                    probes: self.config.half_open_probes(),
                });
            }
        };
        Ok(Ticket {
            generation: self.generation,
            probe,
        })
    }

    /// Gives back a probe slot that was never answered (a dropped permit, an ignored result).
    pub(super) fn release(&mut self, ticket: Ticket) {
        if ticket.probe && ticket.generation == self.generation && self.phase == Phase::HalfOpen {
            self.probes_out = self.probes_out.saturating_sub(1);
        }
    }

    /// The generation while closed, else [`NOT_CLOSED`]: what the breaker mirrors in an atomic so a closed
    /// breaker grants permits without locking.
    pub(super) fn closed_generation(&self) -> u64 {
        match self.phase {
            Phase::Closed => self.generation,
            _ => NOT_CLOSED,
        }
    }

    pub(super) fn state(&mut self, now: Instant) -> BreakerState {
        self.advance(now);
        self.phase_state()
    }

    fn phase_state(&self) -> BreakerState {
        match self.phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { .. } => BreakerState::Open,
            Phase::HalfOpen => BreakerState::HalfOpen,
        }
    }

    pub(super) fn open_remaining(&mut self, now: Instant) -> Option<Duration> {
        self.advance(now);
        match self.phase {
            Phase::Open { until } => Some(until.saturating_duration_since(now)),
            _ => None,
        }
    }

    pub(super) fn snapshot(&mut self, now: Instant) -> BreakerSnapshot {
        self.advance(now);
        self.window.advance(now);
        let (window_calls, window_failures) = self.window.totals();
        let open_until = match self.phase {
            Phase::Open { until } => Some(until),
            _ => None,
        };
        BreakerSnapshot {
            state: self.phase_state(),
            last_transition: self.last,
            transitions: self.transitions,
            open_until,
            open_remaining: open_until.map(|until| until.saturating_duration_since(now)),
            consecutive_failures: self.consecutive,
            window_calls,
            window_failures,
            probes_in_flight: self.probes_out,
            probe_successes: self.probe_successes,
            generation: self.generation,
        }
    }

    /// Closes the breaker whatever its state (operator reset).
    pub(super) fn reset(&mut self, now: Instant) -> Transition {
        self.enter(Phase::Closed, Reason::Manual, now)
    }

    /// Enters `phase` at `at`: a new generation with fresh counters.
    fn enter(&mut self, phase: Phase, reason: Reason, at: Instant) -> Transition {
        let transition = Transition {
            from: self.phase_state(),
            to: match phase {
                Phase::Closed => BreakerState::Closed,
                Phase::Open { .. } => BreakerState::Open,
                Phase::HalfOpen => BreakerState::HalfOpen,
            },
            reason,
            at,
        };
        self.phase = phase;
        // Wraps after 2^64 - 1 transitions, skipping the `NOT_CLOSED` marker.
        self.generation = if self.generation + 1 == NOT_CLOSED {
            0
        } else {
            self.generation + 1
        };
        self.consecutive = 0;
        self.window.clear();
        self.probes_out = 0;
        self.probe_successes = 0;
        self.last = Some(transition);
        self.transitions += 1;
        transition
    }
}

impl<R: Rng> Machine<R> {
    /// Records the answer to a permit. Results of an older generation are dropped (see the module docs).
    pub(super) fn record(
        &mut self,
        ticket: Ticket,
        result: CallResult,
        latency: Duration,
        now: Instant,
    ) -> Option<Transition> {
        if ticket.generation != self.generation {
            return None;
        }
        let failed = match result {
            CallResult::Ignored => {
                self.release(ticket);
                return None;
            }
            CallResult::Failure => true,
            CallResult::Success => self.config.slow_call().is_some_and(|slow| latency > slow),
        };
        match self.phase {
            Phase::Closed => self.count_closed(failed, now),
            Phase::HalfOpen if failed => Some(self.open(Reason::ProbeFailed, now)),
            Phase::HalfOpen => {
                self.probes_out = self.probes_out.saturating_sub(1);
                self.probe_successes += 1;
                let needed = self.config.success_threshold();
                (self.probe_successes >= needed)
                    .then(|| self.enter(Phase::Closed, Reason::ProbesSucceeded(needed), now))
            }
            // Unreachable with a current ticket: no permit is granted while open.
            Phase::Open { .. } => None,
        }
    }

    fn count_closed(&mut self, failed: bool, now: Instant) -> Option<Transition> {
        self.window.record(now, failed);
        if failed {
            self.consecutive = self.consecutive.saturating_add(1);
            let threshold = self.config.consecutive_failures();
            if threshold > 0 && self.consecutive >= threshold {
                return Some(self.open(Reason::ConsecutiveFailures(self.consecutive), now));
            }
        } else {
            self.consecutive = 0;
        }
        let threshold = self.config.failure_rate()?;
        let (calls, failures) = self.window.totals();
        if calls >= u64::from(self.config.min_calls()) && failures as f64 >= threshold * calls as f64 {
            return Some(self.open(Reason::FailureRate { failures, calls }, now));
        }
        None
    }

    /// Opens the breaker at `now` for a freshly drawn open time.
    fn open(&mut self, reason: Reason, now: Instant) -> Transition {
        let until = now + self.draw_open_time();
        self.enter(Phase::Open { until }, reason, now)
    }

    /// Opens the breaker whatever its state (operator action).
    pub(super) fn force_open(&mut self, now: Instant) -> Transition {
        self.open(Reason::Manual, now)
    }

    /// `U(open_for*(1-j), open_for*(1+j))` at nanosecond resolution: breakers (and gateway instances) that
    /// opened together do not probe together.
    fn draw_open_time(&mut self) -> Duration {
        let (low, high) = self.config.open_time_bounds();
        if low >= high {
            return low;
        }
        Duration::from_nanos(
            self.rng
                .random_range(saturating_nanos(low)..=saturating_nanos(high)),
        )
    }
}
