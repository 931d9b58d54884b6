//! What the breaker reports: its state, why and when it last changed, and why a call was refused.

use std::fmt;
use std::time::Duration;

use crate::Instant;

/// The three states of a circuit breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls flow; outcomes are counted.
    Closed,
    /// Calls are refused until the open time ends.
    Open,
    /// A few probe calls are let through to test the upstream.
    HalfOpen,
}

impl BreakerState {
    /// The name used in `/status` and metrics: `closed`, `open`, `half_open`.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the breaker changed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransitionReason {
    /// Closed -> Open: this many failures in a row.
    ConsecutiveFailures(u32),
    /// Closed -> Open: the failure rate over the window reached the threshold with enough calls.
    FailureRate {
        /// Failures in the window (slow calls included).
        failures: u64,
        /// Counted calls in the window.
        calls: u64,
    },
    /// Open -> HalfOpen: the open time ended.
    OpenTimeElapsed,
    /// HalfOpen -> Closed: this many probes succeeded.
    ProbesSucceeded(u32),
    /// HalfOpen -> Open: a probe failed.
    ProbeFailed,
    /// An operator forced the breaker open or reset it closed.
    Manual,
}

impl TransitionReason {
    /// The failure rate for [`FailureRate`](TransitionReason::FailureRate), else `None`.
    pub fn rate(&self) -> Option<f64> {
        match *self {
            TransitionReason::FailureRate { failures, calls } if calls > 0 => {
                Some(failures as f64 / calls as f64)
            }
            _ => None,
        }
    }
}

impl fmt::Display for TransitionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TransitionReason::ConsecutiveFailures(n) => write!(f, "{n} consecutive failures"),
            TransitionReason::FailureRate { failures, calls } => {
                write!(f, "{failures} of {calls} calls failed in the window")
            }
            TransitionReason::OpenTimeElapsed => f.write_str("open time elapsed"),
            TransitionReason::ProbesSucceeded(n) => write!(f, "{n} probes succeeded"),
            TransitionReason::ProbeFailed => f.write_str("a probe failed"),
            TransitionReason::Manual => f.write_str("operator"),
        }
    }
}

/// One change of state: from, to, why and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transition {
    /// The state left.
    pub from: BreakerState,
    /// The state entered.
    pub to: BreakerState,
    /// Why.
    pub reason: TransitionReason,
    /// When: the `now` of the call that caused it; for Open -> HalfOpen, the instant the open time ended.
    pub at: Instant,
}

impl Transition {
    /// Whether the automatic rules can make this transition: Closed -> Open, Open -> HalfOpen,
    /// HalfOpen -> Closed, HalfOpen -> Open, each with its own reasons. Manual transitions are not among them.
    pub fn is_automatic(&self) -> bool {
        use BreakerState::{Closed, HalfOpen, Open};
        use TransitionReason as R;
        matches!(
            (self.from, self.to, self.reason),
            (Closed, Open, R::ConsecutiveFailures(_) | R::FailureRate { .. })
                | (Open, HalfOpen, R::OpenTimeElapsed)
                | (HalfOpen, Closed, R::ProbesSucceeded(_))
                | (HalfOpen, Open, R::ProbeFailed)
        )
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} -> {}: {} (at {:?})",
            self.from,
            self.to,
            self.reason,
            self.at.elapsed_since_origin()
        )
    }
}

/// A consistent view of one breaker at one instant, for `/status` and metrics.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct BreakerSnapshot {
    /// The state at the instant asked about.
    pub state: BreakerState,
    /// The last transition, or `None` if the breaker has always been closed.
    pub last_transition: Option<Transition>,
    /// While open or half-open: when it last left closed. A probe that fails reopens the breaker without moving
    /// it. `now - left_closed` includes the time spent half-open, which lasts until a call comes (half-open is
    /// reached lazily): an idle upstream stays "not closed" forever, failing nothing.
    pub left_closed: Option<Instant>,
    /// The time spent open since the breaker last left closed (zero while closed): every open period, the
    /// current one up to the instant asked about, and nothing of the half-open time between them (waiting for
    /// a call, or for a probe's answer). A failed probe makes it grow again. The `ballast_breaker_open_seconds`
    /// gauge: an upstream that tripped once and is then left alone stays at one jittered `open_for`, below
    /// twice `open_for`; only failed probes take it past that.
    pub open_time: Duration,
    /// Transitions so far.
    pub transitions: u64,
    /// While open: when the open time ends.
    pub open_until: Option<Instant>,
    /// While open: the time left open (the `Retry-After` of a fail-fast answer).
    pub open_remaining: Option<Duration>,
    /// While closed: failures in a row so far.
    pub consecutive_failures: u32,
    /// While closed: counted calls in the window.
    pub window_calls: u64,
    /// While closed: failures (slow calls included) in the window.
    pub window_failures: u64,
    /// While closed: calls sent and not answered yet (their results, and those of calls started after them,
    /// are counted once they answer: start order).
    pub in_flight: u64,
    /// Closed-state calls skipped unanswered since the breaker was made: one that held a later result back for
    /// five minutes, or behind which more than 16,384 calls waited. Its result, if it comes, counts nowhere.
    pub skipped: u64,
    /// While half-open: probes let through and not yet answered.
    pub probes_in_flight: u32,
    /// While half-open: probes that succeeded so far.
    pub probe_successes: u32,
    /// The generation: it changes with every transition; permits of an older generation no longer count.
    pub generation: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_messages() {
        assert_eq!(BreakerState::HalfOpen.to_string(), "half_open");
        let t = Transition {
            from: BreakerState::Closed,
            to: BreakerState::Open,
            reason: TransitionReason::FailureRate {
                failures: 12,
                calls: 20,
            },
            at: Instant::from_millis(1500),
        };
        assert_eq!(
            t.to_string(),
            "closed -> open: 12 of 20 calls failed in the window (at 1.5s)"
        );
        assert_eq!(t.reason.rate(), Some(0.6));
        assert!(t.is_automatic());
        let manual = Transition {
            reason: TransitionReason::Manual,
            ..t
        };
        assert!(!manual.is_automatic());
        let backwards = Transition {
            from: BreakerState::Open,
            to: BreakerState::Closed,
            ..t
        };
        assert!(!backwards.is_automatic());
    }
}
