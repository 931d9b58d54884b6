//! The token bucket: a fixed stock of retries, refilled at a steady rate.

use std::sync::atomic::{AtomicU64, Ordering};

use super::{InvalidBudget, RetryBudget};
use crate::Instant;

const NANOS_PER_SEC: f64 = 1e9;

/// A bucket of `capacity` retries refilled at `refill_per_sec`; requests earn nothing (reference/004, AWS SDKs'
/// retry quota: 10 tokens, 1 per second). With a refill of 0 it is a fixed allowance that never refills — the
/// per-run "3 retries across the whole run" of DESIGN.md.
///
/// - **Starts full**, refills lazily from the `now` it is given (no timer), and never holds more than
///   `capacity`; a withdrawal takes one whole token.
/// - **One atomic**, in the GCRA form (the generic cell rate algorithm of ATM networks, as rate limiters such as
///   `redis-cell` and `governor` use it): instead of a token count and a last-refill time, the bucket stores
///   the *theoretical arrival time* `tat` — the time at which it would be full again. A token costs one refill
///   interval `T`; a withdrawal at `now` moves `tat` to `max(tat, now) + T` and is allowed when that is at most
///   `capacity * T` ahead of `now`. Tokens available at `now` are `(capacity * T - (max(tat, now) - now)) / T`.
///   A compare-and-swap on `tat` makes it exact under contention: with N tokens, exactly N of any number of
///   racing withdrawals succeed.
/// - **Refill** is rounded to whole nanoseconds per token, up (a refill of 3/s is a token every 333 333 334 ns):
///   never faster than asked.
/// - **Refunds** ([`RetryBudget::refund`]): a retry granted and never used moves `tat` back one interval, less
///   the time between it and the latest retry taken since (the refill, capped at the capacity, may already
///   have made up for that much): exactly as if it had never been taken when none was taken in between, and
///   never more than that. A second atomic remembers the time of the latest retry taken.
/// - **Time going backwards**: withdrawals only move `tat` forward (a refund moves it back by the retry it
///   returns, never below that retry's time), so an earlier `now` sees the bucket *less* full than a
///   later one did — it is refused more, never given a token that was not there. With a refill of 0, `now` is
///   ignored altogether. (Within `capacity * T` of [`Instant::MAX`], 584 years after the origin, the bucket
///   refuses: its arrival time would overflow.)
///
/// ```
/// use ballast_core::{Instant, RetryBudget, TokenBucket};
///
/// let bucket = TokenBucket::new(2, 1.0).unwrap(); // 2 retries, one more per second
/// let now = Instant::from_millis(0);
/// assert!(bucket.try_withdraw(now));
/// assert!(bucket.try_withdraw(now));
/// assert!(!bucket.try_withdraw(now)); // empty: refused and counted
/// assert_eq!(bucket.refused(), 1);
/// assert_eq!(bucket.available(Instant::from_millis(1_500)), 1);
/// assert_eq!(bucket.available(Instant::from_millis(60_000)), 2); // never more than the capacity
/// ```
#[derive(Debug)]
pub struct TokenBucket {
    capacity: u32,
    refill_per_sec: f64,
    /// Nanoseconds per token (`T`); 1 when the bucket never refills, with time then frozen at 0.
    interval: u64,
    /// `capacity * interval` (saturating): how far ahead of `now` the arrival time may run.
    burst: u64,
    refills: bool,
    /// Theoretical arrival time, in nanoseconds on the caller's timeline (0: full from the origin on).
    tat: AtomicU64,
    /// The latest `now` (on the bucket's clock) of a granted withdrawal: how much of a refunded retry the
    /// refill may already have made up for (see `refund`).
    last_taken: AtomicU64,
    refused: AtomicU64,
}

impl TokenBucket {
    /// Default capacity (reference/004: 10 retries).
    pub const DEFAULT_CAPACITY: u32 = 10;
    /// Default refill (reference/004: one retry per second).
    pub const DEFAULT_REFILL_PER_SEC: f64 = 1.0;
    /// Slowest refill other than 0: one token per 11.6 days.
    pub const MIN_REFILL_PER_SEC: f64 = 1e-6;
    /// Fastest refill: one token per nanosecond, the resolution of [`Instant`].
    pub const MAX_REFILL_PER_SEC: f64 = 1e9;

    /// A full bucket of `capacity` retries, refilled at `refill_per_sec` (0: never refilled).
    ///
    /// # Errors
    /// [`InvalidBudget::Capacity`] when `capacity` is 0; [`InvalidBudget::RefillPerSec`] when
    /// `refill_per_sec` is neither 0 nor in [`MIN_REFILL_PER_SEC`](Self::MIN_REFILL_PER_SEC)`..=`
    /// [`MAX_REFILL_PER_SEC`](Self::MAX_REFILL_PER_SEC) (negative and NaN included).
    pub fn new(capacity: u32, refill_per_sec: f64) -> Result<Self, InvalidBudget> {
        if capacity == 0 {
            return Err(InvalidBudget::Capacity { capacity });
        }
        let refills = refill_per_sec != 0.0;
        let in_range = (Self::MIN_REFILL_PER_SEC..=Self::MAX_REFILL_PER_SEC).contains(&refill_per_sec);
        if refills && !in_range {
            return Err(InvalidBudget::RefillPerSec { refill_per_sec });
        }
        // In range, 1e9 / refill is in 1..=1e15: the cast is exact in range. Rounded up: never refill faster.
        let interval = if refills {
            (NANOS_PER_SEC / refill_per_sec).ceil() as u64
        } else {
            1
        };
        Ok(TokenBucket {
            capacity,
            refill_per_sec,
            interval,
            burst: u64::from(capacity).saturating_mul(interval),
            refills,
            tat: AtomicU64::new(0),
            last_taken: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        })
    }

    /// The most retries the bucket holds.
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Retries added per second (0: never refilled).
    pub fn refill_per_sec(&self) -> f64 {
        self.refill_per_sec
    }

    /// `now` in nanoseconds, or a clock stopped at 0 when the bucket never refills.
    fn clock(&self, now: Instant) -> u64 {
        if self.refills { now.as_nanos() } else { 0 }
    }
}

impl Default for TokenBucket {
    /// 10 retries, refilled at one per second (reference/004).
    fn default() -> Self {
        // The defaults are within the bounds `new` checks (a unit test pins it): this cannot fail.
        Self::new(Self::DEFAULT_CAPACITY, Self::DEFAULT_REFILL_PER_SEC)
            .expect("the default token bucket is valid")
    }
}

impl RetryBudget for TokenBucket {
    /// Does nothing: a token bucket earns from time, not from traffic.
    fn deposit(&self, _now: Instant) {}

    fn try_withdraw(&self, now: Instant) -> bool {
        let now = self.clock(now);
        let taken = self
            .tat
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |tat| {
                let next = tat.max(now).checked_add(self.interval)?;
                let granted = next - now <= self.burst;
                if granted {
                    // Recorded before the swap publishes the new arrival time, so a refund that sees that time
                    // also sees this; should the swap lose a race, a later `now` only makes refunds smaller.
                    self.last_taken.fetch_max(now, Ordering::AcqRel);
                }
                granted.then_some(next)
            })
            .is_ok();
        if !taken {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    /// Moves the arrival time back by one interval `T`, less the time from `withdrawn_at` to the latest
    /// withdrawal granted since (none: the whole interval): exact when no retry was taken in between, never
    /// more than the bucket would hold had the retry not been taken.
    ///
    /// Why less: the capacity caps the refill, so without this retry the bucket might have reached its capacity
    /// in between and wasted refill — then the refill has already made up for part of the retry. GCRA unrolled,
    /// `tat = max over withdrawals k of (s_k + T x withdrawals from k on)`; without this retry (taken at `s_r`,
    /// followed by `n` withdrawals), the terms of the withdrawals after it are at most `s_last + T n`, while the
    /// bucket's `tat` is at least this retry's own term, `s_r + T (n + 1)`; so `tat - T + (s_last - s_r)` bounds
    /// the arrival time without the retry from above, and the other terms lose exactly `T`. Never below
    /// `withdrawn_at`, so a stray refund cannot fill the bucket past its capacity.
    fn refund(&self, withdrawn_at: Instant) {
        let withdrawn_at = self.clock(withdrawn_at);
        let _ = self.tat.fetch_update(Ordering::AcqRel, Ordering::Acquire, |tat| {
            // Read after `tat`: a withdrawal records its time before it publishes its arrival time.
            let since = self
                .last_taken
                .load(Ordering::Acquire)
                .saturating_sub(withdrawn_at);
            let back = self.interval.saturating_sub(since);
            Some(tat.saturating_sub(back).max(withdrawn_at)).filter(|&moved| moved < tat)
        });
    }

    fn available(&self, now: Instant) -> u64 {
        let now = self.clock(now);
        let owed = self.tat.load(Ordering::Acquire).max(now) - now;
        (self.burst.saturating_sub(owed) / self.interval).min(u64::from(self.capacity))
    }

    fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
