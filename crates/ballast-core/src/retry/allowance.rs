//! Limits on retries beyond one call: the run's allowance and the one-layer rule.
//!
//! Why a per-run allowance: an agent request is many calls; a per-call cap of 3 attempts still lets a 20-step run
//! retry 40 times against a struggling upstream. reference/002 recommends a retry budget per request; DESIGN.md
//! makes it a base plus a share of the run's calls (`ballast-run-id`), on top of the per-upstream budget — not a
//! fixed count, which starves a long run and caps even a short one below what an upstream failing 20% needs.
//!
//! Why one layer: retries at every layer multiply (3 tries over 5 layers = 243x, reference/002; Google SRE,
//! "Addressing Cascading Failures": retry at one layer only).

use std::sync::atomic::{AtomicU32, Ordering};

/// Default base of a run's allowance: 3 retries whatever the run's size.
pub const DEFAULT_RUN_ALLOWANCE: u32 = 3;

/// Default share of a run's calls added to its allowance: half a retry per call. A conversation of four calls
/// (model, tool, tool, model) against an upstream failing ~20% of attempts needs about one retry, rarely more
/// than four; 3 + 4/2 = 5 covers it, where a flat 3 capped such conversations near 98.5% success. A 50-call run
/// gets 28 retries, not 3 — and never more than 1.5 attempts per call plus the base: the amplification bound.
pub const DEFAULT_RUN_ALLOWANCE_SHARE: f64 = 0.5;

/// The retries one run (`ballast-run-id`) may still make, shared by all its calls: a base plus a share of the
/// calls the run made so far (`base + floor(share x calls)`). Thread-safe and lock-free.
///
/// ```
/// use ballast_core::RunAllowance;
///
/// let run = RunAllowance::default(); // 3 + half a retry per call
/// assert!(run.try_take() && run.try_take() && run.try_take());
/// assert!(!run.try_take());
/// run.give_back();
/// assert_eq!(run.left(), 1);
/// for _ in 0..4 {
///     run.note_call();
/// }
/// assert_eq!(run.left(), 3, "four calls add two retries");
/// ```
#[derive(Debug)]
pub struct RunAllowance {
    base: u32,
    share: f64,
    calls: AtomicU32,
    taken: AtomicU32,
}

impl RunAllowance {
    /// A fixed allowance of `retries` retries, whatever the run's size.
    pub const fn new(retries: u32) -> Self {
        RunAllowance::with_share(retries, 0.0)
    }

    /// An allowance of `base` retries plus `share` of a retry per call the run makes (`share` at least 0; a
    /// negative or NaN share counts as 0).
    pub const fn with_share(base: u32, share: f64) -> Self {
        RunAllowance {
            base,
            share: if share > 0.0 { share } else { 0.0 },
            calls: AtomicU32::new(0),
            taken: AtomicU32::new(0),
        }
    }

    /// Counts one call of the run (each logical call, however many attempts it makes).
    pub fn note_call(&self) {
        let _ = self
            .calls
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |calls| calls.checked_add(1));
    }

    /// Calls counted so far.
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }

    /// The retries the run may make in all, for the calls counted so far.
    pub fn limit(&self) -> u32 {
        let grown = (self.share * f64::from(self.calls())).floor();
        // `as` saturates: a huge share cannot wrap.
        self.base.saturating_add(grown as u32)
    }

    /// Takes one retry; `false` when none is left.
    pub fn try_take(&self) -> bool {
        let limit = self.limit();
        // Counters that guard no other memory: relaxed ordering is enough.
        self.taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |taken| {
                (taken < limit).then_some(taken + 1)
            })
            .is_ok()
    }

    /// Returns a retry taken by [`try_take`](RunAllowance::try_take) that was not used (the upstream's budget
    /// refused it).
    pub fn give_back(&self) {
        // Saturating, so a stray give-back can never wrap the count.
        let _ = self
            .taken
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |taken| taken.checked_sub(1));
    }

    /// Retries left.
    pub fn left(&self) -> u32 {
        self.limit().saturating_sub(self.taken.load(Ordering::Relaxed))
    }
}

impl Default for RunAllowance {
    fn default() -> Self {
        RunAllowance::with_share(DEFAULT_RUN_ALLOWANCE, DEFAULT_RUN_ALLOWANCE_SHARE)
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
    fn the_allowance_grows_with_the_runs_calls() {
        let run = RunAllowance::with_share(3, 0.5);
        assert_eq!(run.limit(), 3);
        run.note_call();
        assert_eq!(run.limit(), 3, "half a retry rounds down");
        run.note_call();
        assert_eq!(run.limit(), 4);
        for _ in 0..4 {
            assert!(run.try_take());
        }
        assert!(!run.try_take());
        for _ in 0..48 {
            run.note_call();
        }
        assert_eq!((run.limit(), run.left()), (28, 24), "a 50-call run: 3 + 25");
        assert_eq!(RunAllowance::with_share(1, -2.0).limit(), 1);
        assert_eq!(RunAllowance::with_share(1, f64::NAN).limit(), 1);
        let huge = RunAllowance::with_share(u32::MAX, 1e30);
        huge.note_call();
        assert_eq!(huge.limit(), u32::MAX);
    }

    #[test]
    fn one_layer_retries() {
        assert!(retries_allowed_here(false, 0));
        assert!(!retries_allowed_here(true, 0));
        assert!(!retries_allowed_here(false, 1));
        assert!(!retries_allowed_here(true, 2));
    }
}
