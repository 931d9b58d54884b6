//! The ratio budget: retries at most a fraction of recent requests, plus a floor.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::ledger::{Ledger, MAX_EPOCH, SLOTS};
use super::{InvalidBudget, RetryBudget};
use crate::Instant;
use crate::time::saturating_nanos;

/// Fixed-point units per retry: deposits earn `ratio` of a retry in 1/1000ths, so no float is ever atomic.
const UNIT: i32 = 1_000;

/// Retries allowed: `ratio` x the requests of the last `window`, plus a floor of `min_per_sec` x `window`
/// (Finagle's `RetryBudget`, Linkerd's retry budget). The default budget of every upstream.
///
/// The rule, checked at every withdrawal: retries taken in the window <= `min_per_sec * window` (the
/// floor) + `ratio` x requests deposited in the window. With the defaults (20%, 10/s, 10 s) an upstream
/// serving 1000 requests/s may see 200 retries/s; a quiet one may still retry 100 times per 10 s.
///
/// - **The floor** is Finagle's reserve: `min_per_sec * window` retries the budget always counts on. A retry
///   taken against it is given back when it leaves the window, so an idle budget holds the whole floor (a
///   burst of up to `min_per_sec * window` retries) and refills at `min_per_sec` per second on average. A new
///   budget starts with the whole floor.
/// - **Deposits** (first attempts) earn `ratio` of a retry each, in fixed point: 1/1000 of a retry, the ratio
///   rounded down, so a ratio finer than 0.001 earns what its first three decimals earn.
/// - **The window slides in ten steps** of `window / 10` (time-bucketed slots, an epoch per slot): a
///   request or retry counts for at least `0.9 * window` and at most `window`.
/// - **Thread-safe and lock-free**: a withdrawal is an atomic read of the window's position and two
///   compare-and-swaps, and of threads racing for the last retry exactly one wins.
/// - **Per-slot limit**: a slot counts up to about two million retries' worth (an `i32` of thousandths).
///   Beyond that — ten million requests a second at 20% with 1 s slots — further requests earn nothing and
///   further retries are refused: the limit can only make the budget stricter.
/// - **Refunds** ([`RetryBudget::refund`]): a retry granted and never used is credited back to the slot it was
///   taken in, so it leaves the window with its debit; a refund that arrives after that slot has left gives
///   nothing back (the window already did).
/// - **Time going backwards**: a retry whose `now` is older than the latest `now` seen is booked at the latest
///   one (given back no sooner); a request whose `now` is already older than the window earns nothing (it
///   would have aged out). Neither panics. (Past `2^32` windows after the origin — 136 years for a 1 s window —
///   time is clamped and the window stops sliding: from then on the rule counts every request and retry since.)
///
/// ```
/// use ballast_core::{Instant, RatioBudget, RetryBudget};
/// use std::time::Duration;
///
/// // 50% of requests, no floor, over 10 s.
/// let budget = RatioBudget::new(0.5, 0, Duration::from_secs(10)).unwrap();
/// let now = Instant::from_millis(1_000);
/// for _ in 0..4 {
///     budget.deposit(now);
/// }
/// assert_eq!(budget.available(now), 2);
/// assert!(budget.try_withdraw(now));
/// assert!(budget.try_withdraw(now));
/// assert!(!budget.try_withdraw(now)); // refused and counted
/// assert_eq!(budget.refused(), 1);
/// // 10 s later the requests and the retries have left the window.
/// assert_eq!(budget.available(now + Duration::from_secs(10)), 0);
/// ```
#[derive(Debug)]
pub struct RatioBudget {
    ratio: f64,
    min_per_sec: u32,
    window: Duration,
    /// Length of one slot (an epoch) in nanoseconds: `window / SLOTS`, at least 100 ms.
    slot_nanos: u64,
    /// Units a deposit earns: `ratio * UNIT`, rounded down.
    earn: i32,
    ledger: Ledger,
    refused: AtomicU64,
}

impl RatioBudget {
    /// Default share of requests that may be retried (DESIGN.md: 20%).
    pub const DEFAULT_RATIO: f64 = 0.2;
    /// Default floor in retries per second (DESIGN.md: 10/s).
    pub const DEFAULT_MIN_PER_SEC: u32 = 10;
    /// Default window (DESIGN.md: 10 s).
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
    /// Shortest window: it slides in ten steps, and a step under 100 ms is shorter than many single calls, so
    /// requests would age out before their own retries are decided.
    pub const MIN_WINDOW: Duration = Duration::from_secs(1);
    /// Longest window: a budget that remembers more than an hour reacts too late to stop a retry storm (and
    /// the bound keeps the fixed-point sums far from overflow).
    pub const MAX_WINDOW: Duration = Duration::from_secs(3_600);

    /// A budget allowing `ratio` of the requests of the last `window` as retries, plus `min_per_sec` retries
    /// per second of the window.
    ///
    /// # Errors
    /// [`InvalidBudget::Ratio`] when `ratio` is not in `0..=1` (NaN included); [`InvalidBudget::Window`] when
    /// `window` is not in [`MIN_WINDOW`](Self::MIN_WINDOW)`..=`[`MAX_WINDOW`](Self::MAX_WINDOW).
    pub fn new(ratio: f64, min_per_sec: u32, window: Duration) -> Result<Self, InvalidBudget> {
        if !(0.0..=1.0).contains(&ratio) {
            return Err(InvalidBudget::Ratio { ratio });
        }
        if !(Self::MIN_WINDOW..=Self::MAX_WINDOW).contains(&window) {
            return Err(InvalidBudget::Window { window });
        }
        // window <= 1 h, so its nanoseconds fit in a u64 and the reserve (<= 2^32 * 3600 * 1000) in an i64.
        let window_nanos = saturating_nanos(window);
        let reserve = u128::from(min_per_sec) * u128::from(window_nanos) * UNIT as u128 / 1_000_000_000;
        let reserve = i64::try_from(reserve).unwrap_or(i64::MAX);
        // ratio is in 0..=1, so the product is in 0..=1000 and the cast exact. (Every k/1000 times 1000 is k
        // again in f64, so rounding down never loses a whole thousandth.)
        let earn = (ratio * f64::from(UNIT)).floor() as i32;
        Ok(RatioBudget {
            ratio,
            min_per_sec,
            window,
            slot_nanos: window_nanos / SLOTS,
            earn,
            ledger: Ledger::new(reserve),
            refused: AtomicU64::new(0),
        })
    }

    /// The share of requests that may be retried.
    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    /// The floor, in retries per second.
    pub fn min_per_sec(&self) -> u32 {
        self.min_per_sec
    }

    /// The window requests and retries are counted over.
    pub fn window(&self) -> Duration {
        self.window
    }

    fn epoch(&self, now: Instant) -> u64 {
        (now.as_nanos() / self.slot_nanos).min(MAX_EPOCH)
    }

    #[cfg(test)]
    fn balance_units(&self) -> i64 {
        self.ledger.balance()
    }
}

impl Default for RatioBudget {
    /// 20% of requests plus 10 retries per second, over 10 s (DESIGN.md).
    fn default() -> Self {
        // The defaults are within the bounds `new` checks (a unit test pins it): this cannot fail.
        Self::new(
            Self::DEFAULT_RATIO,
            Self::DEFAULT_MIN_PER_SEC,
            Self::DEFAULT_WINDOW,
        )
        .expect("the default ratio budget is valid")
    }
}

impl RetryBudget for RatioBudget {
    fn deposit(&self, now: Instant) {
        if self.earn > 0 {
            self.ledger.credit(self.epoch(now), self.earn);
        }
    }

    fn try_withdraw(&self, now: Instant) -> bool {
        let taken = self.ledger.try_debit(self.epoch(now), UNIT);
        if !taken {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    /// Credits one retry to the slot of `withdrawn_at`, which is the slot the withdrawal was booked in (the
    /// latest epoch seen then; with a clock read that lost a race, a later one — the refund then leaves the
    /// window first: stricter, never looser). When that slot has left the window, the withdrawal has already
    /// been given back by the window and nothing is credited. While it is in the window the debit and the
    /// refund leave together, so the balance is what it would have been without the retry.
    fn refund(&self, withdrawn_at: Instant) {
        self.ledger.credit(self.epoch(withdrawn_at), UNIT);
    }

    fn available(&self, now: Instant) -> u64 {
        self.ledger.advance(self.epoch(now));
        // Clamped at zero, so non-negative: the cast is lossless.
        (self.ledger.balance().max(0) / i64::from(UNIT)) as u64
    }

    fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests;
