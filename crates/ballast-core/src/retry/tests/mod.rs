//! One test per rule of the decision, through `RetryPolicy::decide` (the shell's view), and the property tests.
//!
//! - `safety`: rules 1-3, what is retried at all (the retryable set, `x-should-retry`, upstream idempotency).
//! - `waits`: rules 5-6, `Retry-After`, the backoff and the deadline.
//! - `limits`: rules 4, 7 and 8, the attempt cap, one layer, the run allowance and the budget.
//! - `properties`: whole simulated runs with a fake clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::*;
use crate::{Deadline, DefaultRng, Instant, RetryBudget, default_rng};

mod limits;
mod properties;
mod safety;
mod waits;

pub(super) const MS: Duration = Duration::from_millis(1);
pub(super) const SECOND: Duration = Duration::from_secs(1);

/// A budget of `n` retries, counting what the decision does with it.
#[derive(Debug, Default)]
pub(super) struct Counted {
    left: AtomicU64,
    pub(super) deposits: AtomicU64,
    pub(super) withdrawn: AtomicU64,
    refused: AtomicU64,
}

impl Counted {
    pub(super) fn new(n: u64) -> Self {
        Counted {
            left: AtomicU64::new(n),
            ..Counted::default()
        }
    }

    pub(super) fn unlimited() -> Self {
        Counted::new(u64::MAX)
    }

    pub(super) fn withdrawn(&self) -> u64 {
        self.withdrawn.load(Ordering::Relaxed)
    }
}

impl RetryBudget for Counted {
    fn deposit(&self, _now: Instant) {
        self.deposits.fetch_add(1, Ordering::Relaxed);
    }

    fn try_withdraw(&self, _now: Instant) -> bool {
        let taken = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        let counter = if taken { &self.withdrawn } else { &self.refused };
        counter.fetch_add(1, Ordering::Relaxed);
        taken
    }

    fn available(&self, _now: Instant) -> u64 {
        self.left.load(Ordering::Relaxed)
    }

    fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

pub(super) const NONE: CallKind = CallKind::SideEffectingTool(UpstreamIdempotency::None);
pub(super) const KEYED: CallKind = CallKind::SideEffectingTool(UpstreamIdempotency::Keyed);
pub(super) const REPLAYS: CallKind = CallKind::SideEffectingTool(UpstreamIdempotency::KeyedReplaysErrors);
pub(super) const KINDS: [CallKind; 5] = [CallKind::Model, CallKind::ReadOnlyTool, NONE, KEYED, REPLAYS];
pub(super) const RETRYABLE: [u16; 8] = [408, 425, 429, 500, 502, 503, 504, 529];

pub(super) fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// The default policy with no jitter on top of `Retry-After`, so waits are exact.
pub(super) fn policy() -> RetryPolicy {
    RetryPolicy::default().with_retry_after_jitter(Duration::ZERO)
}

pub(super) fn rng() -> DefaultRng {
    default_rng(Some(7))
}

pub(super) fn call(kind: CallKind) -> CallState {
    CallState::new(kind, Deadline::after(at(0), 30 * SECOND))
}

/// Judges `outcome` as the first attempt of a call with plenty of time, attempts and budget.
pub(super) fn first(kind: CallKind, outcome: AttemptOutcome) -> RetryDecision {
    policy().decide(
        &outcome,
        &mut call(kind),
        at(0),
        &Counted::unlimited(),
        None,
        &mut rng(),
    )
}

pub(super) fn answer(response: ResponseInfo) -> AttemptOutcome {
    AttemptOutcome::Response(response)
}

pub(super) fn in_progress() -> AttemptOutcome {
    answer(ResponseInfo::status(409).with_problem(ProblemKind::IdempotencyInProgress))
}

pub(super) fn stop(reason: StopReason) -> RetryDecision {
    RetryDecision::Stop(reason)
}

pub(super) fn is_retry(decision: RetryDecision) -> bool {
    matches!(decision, RetryDecision::Retry { .. })
}
