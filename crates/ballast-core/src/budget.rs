//! Retry budgets: how many retries an upstream can afford, shared by every call to it.
//!
//! (Skeleton: the ratio budget and the token bucket are being written; the trait is final.)

use crate::Instant;

/// A retry budget shared by every call to one upstream (a tool, a model deployment).
///
/// Implementations are thread-safe and cheap: many tasks hold one behind an `Arc` and call it on every attempt.
pub trait RetryBudget: Send + Sync + std::fmt::Debug {
    /// Records a first attempt (not a retry) at `now`; budgets that earn retries from traffic earn here.
    fn deposit(&self, now: Instant);

    /// Takes one retry from the budget at `now`. `false` when the budget is empty; the refusal is counted.
    fn try_withdraw(&self, now: Instant) -> bool;

    /// Whole retries that could be withdrawn at `now` (for outcome reports and `/status`).
    fn available(&self, now: Instant) -> u64;

    /// Retries refused so far.
    fn refused(&self) -> u64;
}
