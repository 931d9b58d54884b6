//! Retry budgets: how many retries an upstream can afford, shared by every call to it.
//!
//! # Why budgets and not only a per-call attempt cap
//! A cap of 3 attempts per call bounds one call, not the upstream's load: when the upstream fails for everyone,
//! every call retries and the load triples exactly when the upstream can least take it (the retry storm of
//! reference/002; 3 tries over 5 layers is 243x). A budget bounds the retries of *all* calls to one upstream,
//! so an outage costs a fixed fraction of extra load however many callers there are (Finagle's `RetryBudget`,
//! Linkerd's retry budget; Google SRE book, "Handling Overload": a per-client retry ratio of 10%). When the
//! budget is empty the retry is refused, counted ([`RetryBudget::refused`]) and the caller returns the last real
//! error.
//!
//! Two budgets (DESIGN.md, "Retry budget"):
//! - [`RatioBudget`], the default: retries may be at most `ratio` of the requests made over a sliding `window`,
//!   plus a floor of `min_per_sec` retries per second so a quiet upstream can still retry (Finagle, Linkerd:
//!   20%, 10/s, 10 s).
//! - [`TokenBucket`]: a bucket of `capacity` retries refilled at `refill_per_sec` (reference/004 and AWS SDKs'
//!   retry quota: 10 tokens, 1 per second). With a refill of 0 it is a fixed allowance that never refills — the
//!   per-run "3 retries across the whole run".
//!
//! # Sharing and cost
//! Both are lock-free: every operation is a few atomic loads and compare-and-swaps, no lock, no allocation, so
//! many tasks can share one behind an `Arc` and ask it on every attempt. Neither reads a clock: `now` is passed
//! in, and a test moves it by hand.
//!
//! # Time going backwards
//! Two threads can read the clock and then reach the budget in the other order, so a `now` may be earlier than
//! one the budget has already seen. Neither budget panics on it, and neither mints a retry from it: the token
//! bucket's state only moves forward (a refund takes back only the retry it returns), so an earlier `now` only
//! looks *less* refilled; the ratio budget books a retry at the latest time it has seen (it is given back no
//! sooner than if it had been taken then) and drops a request whose `now` already lies outside the window (it
//! would already have aged out). See each type's docs.
//!
//! # Refunds
//! A retry granted and then never sent (the caller cancelled the backoff, a breaker or the deadline refused the
//! attempt) is given back with [`RetryBudget::refund`], named by the time it was withdrawn: each budget then
//! holds exactly what it would hold had the retry never been taken, or less — never more.

mod ledger;
mod ratio;
mod token_bucket;

use std::time::Duration;

use crate::Instant;

pub use ratio::RatioBudget;
pub use token_bucket::TokenBucket;

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

    /// Gives back a retry that [`try_withdraw`](RetryBudget::try_withdraw) granted at `withdrawn_at` (the `now`
    /// it was given) and that was never used: the attempt it paid for did not go out (the caller cancelled the
    /// backoff, or a layer below refused the attempt locally). Call it at most once per granted retry, and only
    /// for one that was granted: the budget cannot tell a stray refund from a real one.
    ///
    /// Why the withdrawal's time and not the refund's: a retry is only given back where it was taken. A
    /// budget that forgets retries over time (a sliding window, a refill capped at the capacity) may already
    /// have forgotten this one — it left the window, or the bucket refilled to full since — and then there is
    /// nothing to give back; giving it back anyway would mint a retry. Implementations never hold more than
    /// they would have held had the retry never been withdrawn.
    ///
    /// The default gives nothing back: a budget that cannot tell keeps the retry spent (stricter, never looser).
    fn refund(&self, withdrawn_at: Instant) {
        let _ = withdrawn_at;
    }

    /// Retries refused so far.
    fn refused(&self) -> u64;
}

/// Budget parameters that cannot work. The message names the parameter and the value given.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidBudget {
    /// The ratio is negative, above 1 or not a number.
    #[error("retry budget ratio must be between 0 and 1, got {ratio}")]
    Ratio {
        /// The ratio given.
        ratio: f64,
    },
    /// The window is shorter than [`RatioBudget::MIN_WINDOW`] or longer than [`RatioBudget::MAX_WINDOW`].
    #[error("retry budget window must be between 1s and 1h, got {window:?}")]
    Window {
        /// The window given.
        window: Duration,
    },
    /// The token bucket holds no token: it would refuse every retry.
    #[error("token bucket capacity must be at least 1, got {capacity}")]
    Capacity {
        /// The capacity given.
        capacity: u32,
    },
    /// The refill rate is negative, not finite, or outside what the bucket can represent.
    #[error(
        "token bucket refill_per_sec must be 0 (never refill) or between {} and {}, got {refill_per_sec}",
        TokenBucket::MIN_REFILL_PER_SEC,
        TokenBucket::MAX_REFILL_PER_SEC
    )]
    RefillPerSec {
        /// The refill rate given, in tokens per second.
        refill_per_sec: f64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn errors_name_the_parameter_and_the_value() {
        let cases = [
            (InvalidBudget::Ratio { ratio: 1.5 }, "ratio", "1.5"),
            (
                InvalidBudget::Window {
                    window: Duration::from_millis(500),
                },
                "window",
                "500ms",
            ),
            (InvalidBudget::Capacity { capacity: 0 }, "capacity", "0"),
            (
                InvalidBudget::RefillPerSec { refill_per_sec: -1.0 },
                "refill_per_sec",
                "-1",
            ),
        ];
        for (error, parameter, value) in cases {
            let message = error.to_string();
            assert!(message.contains(parameter), "{message}");
            assert!(message.contains(value), "{message}");
        }
    }

    #[test]
    fn both_budgets_are_usable_as_shared_trait_objects() {
        let budgets: Vec<Arc<dyn RetryBudget>> =
            vec![Arc::new(RatioBudget::default()), Arc::new(TokenBucket::default())];
        for budget in budgets {
            let now = Instant::from_millis(1);
            budget.deposit(now);
            let before = budget.available(now);
            assert!(before > 0);
            assert!(budget.try_withdraw(now));
            assert_eq!(budget.available(now), before - 1);
            assert_eq!(budget.refused(), 0);
            budget.refund(now);
            assert_eq!(budget.available(now), before, "an unused retry is given back");
        }
    }

    #[test]
    fn the_default_refund_keeps_the_retry_spent() {
        #[derive(Debug)]
        struct Once(std::sync::atomic::AtomicBool);
        impl RetryBudget for Once {
            fn deposit(&self, _: Instant) {}
            fn try_withdraw(&self, _: Instant) -> bool {
                !self.0.swap(true, std::sync::atomic::Ordering::Relaxed)
            }
            fn available(&self, _: Instant) -> u64 {
                u64::from(!self.0.load(std::sync::atomic::Ordering::Relaxed))
            }
            fn refused(&self) -> u64 {
                0
            }
        }
        let budget = Once(std::sync::atomic::AtomicBool::new(false));
        assert!(budget.try_withdraw(Instant::ZERO));
        budget.refund(Instant::ZERO);
        assert_eq!(budget.available(Instant::ZERO), 0);
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::RetryBudget;
    use crate::Instant;

    /// Withdraws until refused (a million at most: a broken budget fails the test rather than hanging it);
    /// returns how many were taken.
    pub(crate) fn drain(budget: &dyn RetryBudget, now: Instant) -> u64 {
        let mut taken = 0;
        while taken < 1_000_000 && budget.try_withdraw(now) {
            taken += 1;
        }
        taken
    }
}
