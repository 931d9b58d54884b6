//! The breaker's state machine, single-threaded: [`CircuitBreaker`](super::CircuitBreaker) wraps it in a mutex.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::{Rng, RngExt as _};

use super::TransitionReason as Reason;
use super::{BreakerConfig, BreakerRejected, BreakerSnapshot, BreakerState, CallResult, Transition};
use crate::Instant;
use crate::cache_line::OwnCacheLine;
use crate::time::saturating_nanos;
use crate::window::Window;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Closed,
    Open { until: Instant },
    HalfOpen,
}

/// What a permit remembers: the generation it was granted in, whether it holds a half-open probe slot, and
/// (closed) its place in the start order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ticket {
    pub(super) generation: u64,
    pub(super) probe: bool,
    /// Its place in the start order, or [`DETACHED`].
    pub(super) seq: u64,
    /// When it was granted.
    pub(super) started: Instant,
}

/// The `seq` of a permit that holds no place in the start order: a stream that started answering, whose result
/// counts when it ends.
const DETACHED: u64 = u64::MAX;

/// How long an earlier-started call that has not answered holds back the result of a call that started after it
/// (from that later call's start) before it is skipped (not counted): longer than any attempt lives (each is
/// bounded by its deadline, at most `server.max_timeout`, 300 s by default), so a hang still counts; streams leave
/// the start order when they start answering.
pub(crate) const MAX_WAIT_FOR_EARLIER: Duration = Duration::from_secs(300);

/// The most calls the start order keeps once a result is counted: beyond it the oldest unanswered ones are
/// skipped (bounds memory: 16 bytes a call, 256 KiB; between two results it holds one slot per call in flight).
pub(crate) const MAX_START_ORDER: usize = 16_384;

/// [`Gate::closed`] while the breaker is not closed.
const NOT_CLOSED: u64 = u64::MAX;

/// What a closed breaker's permits need without its lock: whether it is closed, in which generation, and the
/// next place in the start order. A closed breaker grants a permit with one load and one `fetch_add`; the start
/// order learns of the call when it (or a later one) is recorded or dropped. Written under the lock, at every
/// transition.
#[derive(Debug, Default)]
pub(super) struct Gate {
    /// The generation while closed, or [`NOT_CLOSED`].
    closed: OwnCacheLine<AtomicU64>,
    /// The next place in the start order (never reset: the places of one closed generation start where the
    /// previous generation's ended, see [`StartOrder::restart`]).
    pub(super) next_seq: OwnCacheLine<AtomicU64>,
}

impl Gate {
    /// A closed-state permit's ticket at `now`, without the lock; `None` when not closed (the lock decides).
    ///
    /// A thread that read the generation just before a transition takes a place after the new generation's
    /// first: its ticket is of the old generation, and recording or dropping it skips that place (see
    /// [`Machine::release`]), so it holds nothing back.
    pub(super) fn closed_ticket(&self, now: Instant) -> Option<Ticket> {
        let generation = self.closed.load(Ordering::SeqCst);
        (generation != NOT_CLOSED).then(|| Ticket {
            generation,
            probe: false,
            seq: self.next_seq.fetch_add(1, Ordering::SeqCst),
            started: now,
        })
    }

    /// Whether the breaker is closed (a read without the lock; a transition may be under way).
    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed) != NOT_CLOSED
    }
}

/// One closed-state call in the start order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Sent, not answered yet.
    Pending { started: Instant },
    /// Answered: failed or not (slow calls already judged), and when it started.
    Answered { failed: bool, started: Instant },
    /// Counts nothing: dropped unrecorded, ignored, an overload answer.
    Skipped,
}

/// The closed state's calls in the order they started. A result is counted only once every call that started
/// before it has answered (or been skipped), and in start order: so the fast failures of a burst, which finish
/// before the slow successes that started with them, are judged after those successes, not before. This is
/// what "consecutive" means here — failures in a row by start, none still out before them — and what feeds the
/// rate's window.
///
/// Places are handed out without the lock ([`Gate`]); the queue holds the places from `first` up to the latest
/// one recorded or dropped, and every place before that which has not answered yet is pending.
#[derive(Debug, Default)]
struct StartOrder {
    /// The sequence number of `slots[0]`: the first place of the current closed generation, or a later one.
    first: u64,
    slots: VecDeque<Slot>,
    /// Unanswered calls skipped so far (too old, or holding too much back): their results count nowhere.
    skipped: u64,
}

impl StartOrder {
    /// Sets the slot of the call in place `seq`, which started at `started` (a call already skipped past keeps
    /// nothing). The places before it not seen yet are calls that started before it and have not answered:
    /// pending, and taken to have started when it did (they started no later; so they are skipped no sooner than
    /// [`MAX_WAIT_FOR_EARLIER`] after it started).
    fn settle(&mut self, seq: u64, slot: Slot, started: Instant) {
        let Some(index) = seq
            .checked_sub(self.first)
            .and_then(|index| usize::try_from(index).ok())
        else {
            return;
        };
        if index >= self.slots.len() {
            self.slots.resize(index + 1, Slot::Pending { started });
        }
        self.slots[index] = slot;
    }

    /// The next result to count in start order, once every earlier call has answered: `Some(failed)`; skipped
    /// slots are passed, and so is an unanswered call that started over [`MAX_WAIT_FOR_EARLIER`] before `now`
    /// or that holds more than [`MAX_START_ORDER`] results back.
    fn pop(&mut self, now: Instant) -> Option<(bool, Instant)> {
        loop {
            let front = *self.slots.front()?;
            match front {
                Slot::Pending { started }
                    if now.saturating_duration_since(started) < MAX_WAIT_FOR_EARLIER
                        && self.slots.len() <= MAX_START_ORDER =>
                {
                    return None;
                }
                _ => {
                    self.slots.pop_front();
                    self.first += 1;
                    match front {
                        Slot::Answered { failed, started } => return Some((failed, started)),
                        Slot::Pending { .. } => self.skipped += 1,
                        Slot::Skipped => {}
                    }
                }
            }
        }
    }

    /// Whether `seq` is the next place to count, with nothing queued: every earlier call has been counted.
    fn is_next(&self, seq: u64) -> bool {
        seq == self.first && self.slots.is_empty()
    }

    /// Drops the skipped slots at the front (nothing to count), so a breaker whose permits are only ever
    /// dropped does not grow its queue.
    fn trim(&mut self) {
        while self.slots.front() == Some(&Slot::Skipped) {
            self.slots.pop_front();
            self.first += 1;
        }
    }

    /// Calls started and not answered, of the `next` places handed out.
    fn pending(&self, next: u64) -> u64 {
        let queued = self
            .slots
            .iter()
            .filter(|slot| matches!(slot, Slot::Pending { .. }))
            .count() as u64;
        queued + next.saturating_sub(self.first + self.slots.len() as u64)
    }

    /// Forgets every call (a transition: their results are late); the next closed generation's places start at
    /// `next`.
    fn restart(&mut self, next: u64) {
        self.first = next;
        self.slots.clear();
    }
}

/// Counters and phase of one breaker. Every transition bumps `generation`, so results of permits granted
/// before it are recognised as late and dropped.
#[derive(Debug)]
pub(super) struct Machine<R> {
    config: BreakerConfig,
    phase: Phase,
    generation: u64,
    consecutive: u32,
    /// When the first failure of the current streak started.
    streak_since: Option<Instant>,
    window: Window,
    order: StartOrder,
    gate: Arc<Gate>,
    probes_out: u32,
    probe_successes: u32,
    last: Option<Transition>,
    /// When it last left closed (`None` while closed): a failed probe reopens it without moving this.
    left_closed: Option<Instant>,
    /// The open periods since it last left closed that have ended (zero while closed): half-open time, waiting
    /// for a probe or running one, is not among them.
    open_before: Duration,
    transitions: u64,
    rng: R,
}

impl<R> Machine<R> {
    /// A closed machine; `gate` is its lock-free side, shared with the breaker.
    pub(super) fn new(config: BreakerConfig, rng: R, gate: Arc<Gate>) -> Self {
        gate.closed.store(0, Ordering::SeqCst);
        let first = gate.next_seq.load(Ordering::SeqCst);
        Machine {
            window: Window::new(config.window(), config.window_buckets()),
            config,
            phase: Phase::Closed,
            generation: 0,
            consecutive: 0,
            streak_since: None,
            order: StartOrder {
                first,
                ..StartOrder::default()
            },
            gate,
            probes_out: 0,
            probe_successes: 0,
            last: None,
            left_closed: None,
            open_before: Duration::ZERO,
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
            // Usually granted without the lock (`Gate::closed_ticket`); here when a transition was under way.
            Phase::Closed => {
                return Ok(Ticket {
                    generation: self.generation,
                    probe: false,
                    seq: self.gate.next_seq.fetch_add(1, Ordering::SeqCst),
                    started: now,
                });
            }
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
            seq: DETACHED,
            started: now,
        })
    }

    /// Takes a closed-state permit out of the start order: its call started answering (a stream) and its result
    /// comes at the stream's end, which may be minutes away; later calls' results must not wait for it. Its result
    /// then counts when it is recorded.
    pub(super) fn detach(&mut self, ticket: Ticket) -> Ticket {
        self.skip_place(ticket);
        Ticket {
            seq: DETACHED,
            ..ticket
        }
    }

    /// Gives back a permit that was never answered (dropped, ignored, an overload answer): a probe frees its slot;
    /// a closed-state call counts nothing and stops holding back the results of calls that started after it.
    /// The results it let through are counted by the caller of `release` (see `record`).
    pub(super) fn release(&mut self, ticket: Ticket) {
        if ticket.generation == self.generation && self.phase == Phase::HalfOpen && ticket.probe {
            self.probes_out = self.probes_out.saturating_sub(1);
        }
        self.skip_place(ticket);
    }

    /// Marks the ticket's place in the start order as counting nothing — for a ticket of this closed generation,
    /// and for one of an older generation that took its place after this one began (granted without the lock
    /// across a transition: its place is this generation's, and nothing will ever answer for it).
    fn skip_place(&mut self, ticket: Ticket) {
        if self.phase == Phase::Closed && ticket.seq != DETACHED && ticket.seq >= self.order.first {
            self.order.settle(ticket.seq, Slot::Skipped, ticket.started);
            self.order.trim();
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
        let in_flight = match self.phase {
            Phase::Closed => self.order.pending(self.gate.next_seq.load(Ordering::SeqCst)),
            _ => 0,
        };
        let skipped = self.order.skipped;
        let open_until = match self.phase {
            Phase::Open { until } => Some(until),
            _ => None,
        };
        // The current open period runs from the transition that opened it (`last`, open while the phase is).
        let open_now = match (self.phase, self.last) {
            (Phase::Open { .. }, Some(opened)) => now.saturating_duration_since(opened.at),
            _ => Duration::ZERO,
        };
        BreakerSnapshot {
            state: self.phase_state(),
            last_transition: self.last,
            left_closed: self.left_closed,
            open_time: self.open_before + open_now,
            transitions: self.transitions,
            open_until,
            open_remaining: open_until.map(|until| until.saturating_duration_since(now)),
            consecutive_failures: self.consecutive,
            window_calls,
            window_failures,
            in_flight,
            skipped,
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
        if phase == Phase::Closed {
            self.left_closed = None;
            self.open_before = Duration::ZERO;
        } else if self.phase == Phase::Closed {
            self.left_closed = Some(at);
        }
        // An open period that ends (to half-open at its end, or by an operator's action) counts whole.
        if let (Phase::Open { .. }, Some(opened)) = (self.phase, self.last)
            && phase != Phase::Closed
        {
            self.open_before += at.saturating_duration_since(opened.at);
        }
        self.phase = phase;
        self.generation = self.generation.wrapping_add(1);
        self.consecutive = 0;
        self.streak_since = None;
        self.window.clear();
        if phase == Phase::Closed {
            // The new generation's places start after every place handed out so far; only then may permits be
            // granted without the lock in it.
            self.order.restart(self.gate.next_seq.load(Ordering::SeqCst));
            self.gate.closed.store(self.generation, Ordering::SeqCst);
        } else {
            self.gate.closed.store(NOT_CLOSED, Ordering::SeqCst);
            self.order.restart(0);
        }
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
            // Late; but a place it took in this generation must not hold later results back.
            self.skip_place(ticket);
            return self.count_in_start_order(now);
        }
        let failed = match result {
            CallResult::Ignored | CallResult::Overloaded => {
                self.release(ticket);
                return self.count_in_start_order(now);
            }
            CallResult::Failure => true,
            CallResult::Success => self.config.slow_call().is_some_and(|slow| latency > slow),
        };
        match self.phase {
            Phase::Closed if ticket.seq == DETACHED => self
                .count_closed(failed, ticket.started, now)
                .or_else(|| self.count_in_start_order(now)),
            // Every call that started before it has been counted (the usual case away from a burst): it counts now.
            Phase::Closed if self.order.is_next(ticket.seq) => {
                self.order.first += 1;
                self.count_closed(failed, ticket.started, now)
            }
            Phase::Closed => {
                let started = ticket.started;
                self.order
                    .settle(ticket.seq, Slot::Answered { failed, started }, started);
                self.count_in_start_order(now)
            }
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

    /// Counts, in start order, every closed-state result no earlier-started call holds back any more.
    fn count_in_start_order(&mut self, now: Instant) -> Option<Transition> {
        if self.phase != Phase::Closed {
            return None;
        }
        while let Some((failed, started)) = self.order.pop(now) {
            if let Some(opened) = self.count_closed(failed, started, now) {
                return Some(opened);
            }
        }
        None
    }

    /// Counts one closed-state result of a call that `started` then, at `now`.
    fn count_closed(&mut self, failed: bool, started: Instant, now: Instant) -> Option<Transition> {
        self.window.record(now, failed);
        if failed {
            self.consecutive = self.consecutive.saturating_add(1);
            let since = *self.streak_since.get_or_insert(started);
            let threshold = self.config.consecutive_failures();
            // The streak must be spread over time: a blip that fails the calls of one instant is not an outage.
            let spread = threshold <= 1
                || started.saturating_duration_since(since) >= self.config.consecutive_spread();
            if threshold > 0 && self.consecutive >= threshold && spread {
                return Some(self.open(Reason::ConsecutiveFailures(self.consecutive), now));
            }
        } else {
            self.consecutive = 0;
            self.streak_since = None;
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
