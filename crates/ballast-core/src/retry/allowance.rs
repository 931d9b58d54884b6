//! Limits on retries beyond one call: the run's allowance and the one-layer rule.
//!
//! Why a per-run allowance: an agent request is many calls; a per-call cap of 3 attempts still lets a 20-step run
//! retry 40 times against a struggling upstream. reference/002 recommends a retry budget per request; DESIGN.md
//! makes it 3 retries across a run (`ballast-run-id`), on top of the per-upstream budget.
//!
//! Why one layer: retries at every layer multiply (3 tries over 5 layers = 243x, reference/002; Google SRE,
//! "Addressing Cascading Failures": retry at one layer only).

use std::sync::atomic::{AtomicU32, Ordering};

/// Default retries a whole run may make (DESIGN.md: 3).
pub const DEFAULT_RUN_ALLOWANCE: u32 = 3;

/// The retries one run (`ballast-run-id`) may still make, shared by all its calls. Thread-safe and lock-free.
///
/// ```
/// use ballast_core::RunAllowance;
///
/// let run = RunAllowance::default();
/// assert!(run.try_take() && run.try_take() && run.try_take());
/// assert!(!run.try_take());
/// run.give_back();
/// assert_eq!(run.left(), 1);
/// ```
#[derive(Debug)]
pub struct RunAllowance {
    left: AtomicU32,
}

impl RunAllowance {
    /// An allowance of `retries` retries.
    pub const fn new(retries: u32) -> Self {
        RunAllowance {
            left: AtomicU32::new(retries),
        }
    }

    /// Takes one retry; `false` when none is left.
    pub fn try_take(&self) -> bool {
        // A lone counter guards no other memory, so relaxed ordering is enough.
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1))
            .is_ok()
    }

    /// Returns a retry taken by [`try_take`](RunAllowance::try_take) that was not used (the upstream's budget
    /// refused it).
    pub fn give_back(&self) {
        // Saturating, so a stray give-back can never wrap the count to zero.
        let _ = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_add(1));
    }

    /// Retries left.
    pub fn left(&self) -> u32 {
        self.left.load(Ordering::Relaxed)
    }
}

impl Default for RunAllowance {
    fn default() -> Self {
        RunAllowance::new(DEFAULT_RUN_ALLOWANCE)
    }
}

/// Whether this gateway may retry a request, by where it came from (DESIGN.md: retries at exactly one layer).
///
/// A request that carries `ballast-hop` (another Ballast is retrying it) or `x-stainless-retry-count` > 0 (the
/// OpenAI SDK is already retrying) gets one attempt here. The first try of an SDK (`x-stainless-retry-count: 0`)
/// is retried here; the gateway's `x-should-retry: false` then keeps the SDK from retrying on top.
pub const fn retries_allowed_here(has_ballast_hop: bool, stainless_retry_count: u32) -> bool {
    !has_ballast_hop && stainless_retry_count == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn takes_until_empty_and_gets_back() {
        let run = RunAllowance::new(2);
        assert!(run.try_take());
        assert!(run.try_take());
        assert!(!run.try_take());
        assert_eq!(run.left(), 0);
        run.give_back();
        assert_eq!(run.left(), 1);
        assert!(run.try_take());
        assert!(!RunAllowance::new(0).try_take());
        assert_eq!(RunAllowance::default().left(), 3);
    }

    #[test]
    fn give_back_saturates() {
        let run = RunAllowance::new(u32::MAX);
        run.give_back();
        assert_eq!(run.left(), u32::MAX);
    }

    #[test]
    fn concurrent_takers_never_take_more_than_allowed() {
        let run = Arc::new(RunAllowance::new(1000));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let run = Arc::clone(&run);
                std::thread::spawn(move || (0..600).filter(|_| run.try_take()).count())
            })
            .collect();
        let taken: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(taken, 1000);
        assert_eq!(run.left(), 0);
    }

    #[test]
    fn one_layer_retries() {
        assert!(retries_allowed_here(false, 0));
        assert!(!retries_allowed_here(true, 0));
        assert!(!retries_allowed_here(false, 1));
        assert!(!retries_allowed_here(true, 2));
    }
}
