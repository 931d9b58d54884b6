//! What one attempt meets, drawn deterministically from (seed, endpoint, operation id, attempt number).
//!
//! # Why a hash and not a random number generator
//! A comparison between two client strategies is fair only if both meet the same faults. A shared RNG would hand
//! out faults in arrival order, so the strategy that retries sooner would meet different faults from the one that
//! waits. Here the fault of an attempt is a pure function of *which* attempt it is: attempt 2 of operation
//! `op-42` on `create_refund` under seed 7 meets the same fault whoever sends it, whenever, in whatever order.
//!
//! The function is pinned, not merely deterministic: the randomness is SHA-256 over an unambiguous encoding of
//! the four inputs, never `DefaultHasher` or an RNG crate whose algorithm may change between
//! versions; and the floating-point maths of the latency uses `libm` (a pure-Rust port of musl's), because std's
//! `ln`, `exp` and `cos` call the platform's libm, whose last bits differ between machines. So a seed means the
//! same faults on every machine, Rust version and dependency version.
//!
//! # One draw
//! The digest gives three independent uniforms in `[0, 1)`:
//! - the first picks the fault among the mutually exclusive rates, in this order: each error status (in the
//!   order of [`EndpointProfile::errors`]), `insufficient_quota`, `spend_limit`, `hang`, `reset`,
//!   `commit_then_lose`, stream cut, stream stall, stream error, garbage, is-error; the remainder is
//!   [`Fault::None`] (a rate added to this list is added where a rate of 0 moves no threshold, so a profile
//!   without it draws as before);
//! - the other two draw the latency: log-normal fitted to p50 and p99, by Box–Muller.
//!
//! # Not in the draw
//! Outages and the capacity limit depend on time and on load, not on which attempt this is: the server applies
//! them before it consults the draw (an attempt that arrives during an outage, or beyond the capacity, is
//! answered 503 whatever it would have drawn).

mod latency;
mod uniform;

#[cfg(test)]
mod tests;

use std::time::Duration;

use crate::profile::{EndpointProfile, Fault, Profile, exclusive_outcomes};

pub use latency::LATENCY_CAP_FACTOR;

/// What one attempt meets: how long the endpoint takes, then what it does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Draw {
    /// Time before the endpoint acts (answers, executes, hangs or resets).
    pub latency: Duration,
    /// What it does.
    pub fault: Fault,
}

/// The draw of attempt `attempt` (1-based) of operation `op` on `endpoint` under `seed`: a pure function of its
/// arguments, the same on every machine (see the module docs for how, and what it leaves to the server).
///
/// ```
/// use std::time::Duration;
/// use ballast_chaos::{EndpointProfile, Fault, Latency, draw};
///
/// let faults = EndpointProfile {
///     latency: Some(Latency { p50: Duration::from_millis(40), p99: Duration::from_millis(200) }),
///     hang: 1.0,
///     ..EndpointProfile::default()
/// };
/// let first = draw(7, "create_refund", "op-42", 1, &faults);
/// assert_eq!(first.fault, Fault::Hang);
/// assert!(first.latency > Duration::ZERO);
/// assert_eq!(draw(7, "create_refund", "op-42", 1, &faults), first, "the same inputs, the same draw");
/// ```
pub fn draw(seed: u64, endpoint: &str, op: &str, attempt: u32, faults: &EndpointProfile) -> Draw {
    let [pick, u1, u2] = uniform::uniforms(seed, endpoint, op, attempt);
    Draw {
        latency: faults
            .latency
            .map_or(Duration::ZERO, |l| latency::lognormal(&l, u1, u2)),
        fault: pick_fault(pick, faults),
    }
}

/// The fault `u` (uniform in `[0, 1)`) falls on: the first outcome whose cumulative rate exceeds `u`.
fn pick_fault(u: f64, faults: &EndpointProfile) -> Fault {
    let mut cumulative = 0.0;
    for (rate, fault) in exclusive_outcomes(faults) {
        cumulative += rate;
        if u < cumulative {
            return fault;
        }
    }
    Fault::None
}

impl Profile {
    /// What attempt `attempt` (1-based) of operation `op` on `endpoint` meets: a scripted step when a script
    /// covers it, else the deterministic draw.
    pub fn fault_for(&self, endpoint: &str, op: &str, attempt: u32) -> Draw {
        let faults = self.endpoint(endpoint);
        let scripted = self
            .scripts
            .iter()
            // On the model endpoint the op is `op/turn-N`: a script naming the conversation's op covers its turns.
            .find(|s| {
                s.endpoint == endpoint
                    && (s.op == op
                        || op
                            .strip_prefix(s.op.as_str())
                            .is_some_and(|turn| turn.starts_with("/turn-")))
            })
            .and_then(|s| s.steps.get(attempt.saturating_sub(1) as usize));
        match scripted {
            Some(step) => Draw {
                latency: Duration::ZERO,
                fault: step.fault(faults),
            },
            None => draw(self.seed, endpoint, op, attempt, faults),
        }
    }
}
