//! Jittered exponential backoff.
//!
//! Why jitter: clients that failed together and back off by the same schedule retry together, and the retry
//! wave hits the recovering upstream at once (the thundering herd of reference/002). Full jitter spreads each
//! wave uniformly over its whole window and does the least total work of the schemes AWS compared ("Exponential
//! Backoff and Jitter", AWS Architecture Blog; "Timeouts, retries and backoff with jitter", AWS Builders'
//! Library), so it is the default. Decorrelated jitter grows from the previous sleep instead of the attempt
//! number and is offered as an option.
//!
//! - full jitter: `sleep = U(0, min(cap, base * 2^n))`, `n` = retries already made (0 for the first retry);
//! - decorrelated jitter: `sleep = min(cap, U(base, 3 * previous))`, `previous` starting at `base`.
//!
//! The backoff only draws a sleep; whether the sleep still fits before the deadline is the deadline's question
//! ([`Deadline::check_wait`](crate::Deadline::check_wait)), asked by the retry decision.
//!
//! Randomness is passed in: any [`rand::Rng`]. [`DefaultRng`] is seedable, so a test fixes the seed and sees
//! the same sleeps every run.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::{Rng, RngExt as _, SeedableRng};

use crate::UnknownName;
use crate::time::saturating_nanos;

/// The RNG Ballast uses unless told otherwise: small, fast, seedable. Not for secrets or identifiers (its output
/// is predictable): [`IdempotencyKey::random`](crate::IdempotencyKey::random) wants a cryptographically secure one.
pub type DefaultRng = rand::rngs::SmallRng;

/// A [`DefaultRng`] from a fixed seed (tests, reproducible runs) or from the operating system.
pub fn default_rng(seed: Option<u64>) -> DefaultRng {
    match seed {
        Some(seed) => DefaultRng::seed_from_u64(seed),
        None => rand::make_rng(),
    }
}

/// Default first backoff window (DESIGN.md: 100 ms).
pub const DEFAULT_BASE: Duration = Duration::from_millis(100);
/// Default largest backoff window (DESIGN.md: 2 s).
pub const DEFAULT_CAP: Duration = Duration::from_secs(2);

/// How a sleep is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Jitter {
    /// `U(0, min(cap, base * 2^n))` — the default.
    #[default]
    Full,
    /// `min(cap, U(base, 3 * previous))`.
    Decorrelated,
}

impl Jitter {
    /// The name used in configuration: `full` or `decorrelated`.
    pub fn as_str(self) -> &'static str {
        match self {
            Jitter::Full => "full",
            Jitter::Decorrelated => "decorrelated",
        }
    }
}

impl fmt::Display for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Jitter {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(Jitter::Full),
            "decorrelated" => Ok(Jitter::Decorrelated),
            _ => Err(UnknownName::new(s, &["full", "decorrelated"])),
        }
    }
}

/// Backoff parameters that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidBackoff {
    /// The base is zero: every sleep would be zero and retries would come back at once.
    #[error("backoff base must be greater than zero")]
    ZeroBase,
    /// The base is larger than the cap.
    #[error("backoff base ({base:?}) is larger than its cap ({cap:?})")]
    BaseOverCap {
        /// The base given.
        base: Duration,
        /// The cap given.
        cap: Duration,
    },
}

/// Jittered exponential backoff: base, cap and the kind of jitter. Cheap to copy and share.
///
/// ```
/// use ballast_core::{default_rng, Backoff};
/// use std::time::Duration;
///
/// let backoff = Backoff::full_jitter(Duration::from_millis(100), Duration::from_secs(2)).unwrap();
/// let mut rng = default_rng(Some(7));
/// let sleep = backoff.delay(3, Duration::ZERO, &mut rng);
/// assert!(sleep <= Duration::from_millis(800)); // U(0, min(2 s, 100 ms * 2^3))
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    jitter: Jitter,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: DEFAULT_BASE,
            cap: DEFAULT_CAP,
            jitter: Jitter::Full,
        }
    }
}

impl Backoff {
    /// A backoff with the given parameters; the base must be non-zero and not above the cap.
    pub fn new(base: Duration, cap: Duration, jitter: Jitter) -> Result<Self, InvalidBackoff> {
        if base.is_zero() {
            return Err(InvalidBackoff::ZeroBase);
        }
        if base > cap {
            return Err(InvalidBackoff::BaseOverCap { base, cap });
        }
        Ok(Backoff { base, cap, jitter })
    }

    /// Full-jitter backoff (the default kind).
    pub fn full_jitter(base: Duration, cap: Duration) -> Result<Self, InvalidBackoff> {
        Backoff::new(base, cap, Jitter::Full)
    }

    /// Decorrelated-jitter backoff.
    pub fn decorrelated(base: Duration, cap: Duration) -> Result<Self, InvalidBackoff> {
        Backoff::new(base, cap, Jitter::Decorrelated)
    }

    /// The first window.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// The largest sleep.
    pub fn cap(&self) -> Duration {
        self.cap
    }

    /// The kind of jitter.
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The longest sleep the `retry`-th retry (0-based) can draw: the worst case `ballast plan` adds up.
    ///
    /// Full jitter: `min(cap, base * 2^retry)`. Decorrelated: `min(cap, base * 3^(retry + 1))` — the first retry
    /// already draws from `U(base, 3 * base)`.
    pub fn max_delay(&self, retry: u32) -> Duration {
        let (mut window, growth) = self.first_window();
        // The window at least doubles each step, so this stops at the cap within ~95 steps whatever `retry` is.
        for _ in 0..retry {
            if window == self.cap {
                break;
            }
            window = window.saturating_mul(growth).min(self.cap);
        }
        window
    }

    /// The longest the first `retries` sleeps can add up to: the sum of [`max_delay`](Backoff::max_delay) over
    /// them, saturating. The windows grow (x2 full, x3 decorrelated) up to the cap, then every further sleep is
    /// the cap, so this is the growing part plus `cap x` the remaining retries: at most ~95 steps, however many
    /// retries.
    pub fn max_total_delay(&self, retries: u32) -> Duration {
        let (mut window, growth) = self.first_window();
        let mut total = Duration::ZERO;
        for retry in 0..retries {
            if window == self.cap {
                return total.saturating_add(self.cap.saturating_mul(retries - retry));
            }
            total = total.saturating_add(window);
            window = window.saturating_mul(growth).min(self.cap);
        }
        total
    }

    /// The first retry's longest sleep, and the factor each later window grows by (before the cap).
    fn first_window(&self) -> (Duration, u32) {
        match self.jitter {
            Jitter::Full => (self.base, 2),
            Jitter::Decorrelated => (self.base.saturating_mul(3).min(self.cap), 3),
        }
    }

    /// Draws the sleep before retry number `retry` (0 for the first retry). `previous` is the sleep drawn before
    /// the last retry (zero if none); only decorrelated jitter uses it.
    pub fn delay<R: Rng + ?Sized>(&self, retry: u32, previous: Duration, rng: &mut R) -> Duration {
        match self.jitter {
            Jitter::Full => uniform(rng, Duration::ZERO, self.max_delay(retry)),
            Jitter::Decorrelated => {
                let previous = previous.max(self.base);
                uniform(rng, self.base, previous.saturating_mul(3)).min(self.cap)
            }
        }
    }
}

/// A uniform draw in `[low, high]` at nanosecond resolution.
fn uniform<R: Rng + ?Sized>(rng: &mut R, low: Duration, high: Duration) -> Duration {
    let (low_ns, high_ns) = (saturating_nanos(low), saturating_nanos(high));
    if high_ns <= low_ns {
        return low;
    }
    Duration::from_nanos(rng.random_range(low_ns..=high_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn invalid_parameters_are_refused_at_construction() {
        assert_eq!(
            Backoff::full_jitter(Duration::ZERO, MS),
            Err(InvalidBackoff::ZeroBase)
        );
        assert_eq!(
            Backoff::full_jitter(10 * MS, 5 * MS),
            Err(InvalidBackoff::BaseOverCap {
                base: 10 * MS,
                cap: 5 * MS
            })
        );
        assert!(Backoff::full_jitter(5 * MS, 5 * MS).is_ok());
    }

    #[test]
    fn full_jitter_windows_double_up_to_the_cap() {
        let b = Backoff::default();
        let windows: Vec<_> = (0..7).map(|n| b.max_delay(n)).collect();
        assert_eq!(windows, [100, 200, 400, 800, 1600, 2000, 2000].map(|ms| ms * MS));
        assert_eq!(b.max_delay(u32::MAX), 2000 * MS);
    }

    #[test]
    fn full_jitter_spreads_over_the_whole_window() {
        let b = Backoff::default();
        let mut rng = default_rng(Some(1));
        let draws: Vec<_> = (0..2000).map(|_| b.delay(2, Duration::ZERO, &mut rng)).collect();
        assert!(draws.iter().all(|d| *d <= 400 * MS));
        let mean = draws.iter().sum::<Duration>() / draws.len() as u32;
        assert!(
            (180 * MS..=220 * MS).contains(&mean),
            "mean {mean:?} of U(0, 400 ms)"
        );
        assert!(draws.iter().any(|d| *d < 40 * MS) && draws.iter().any(|d| *d > 360 * MS));
    }

    #[test]
    fn same_seed_same_sleeps() {
        let b = Backoff::default();
        let run = |seed| {
            let mut rng = default_rng(Some(seed));
            (0..5)
                .map(|n| b.delay(n, Duration::ZERO, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }

    #[test]
    fn decorrelated_grows_from_the_previous_sleep() {
        let b = Backoff::decorrelated(100 * MS, 10_000 * MS).unwrap();
        let mut rng = default_rng(Some(3));
        for _ in 0..500 {
            let d = b.delay(0, 300 * MS, &mut rng);
            assert!((100 * MS..=900 * MS).contains(&d), "{d:?}");
        }
        // With no previous sleep it starts from the base.
        assert!(b.delay(0, Duration::ZERO, &mut rng) <= 300 * MS);
        let windows: Vec<_> = (0..4).map(|n| b.max_delay(n)).collect();
        assert_eq!(windows, [300, 900, 2700, 8100].map(|ms| ms * MS));
        assert_eq!(b.max_delay(4), 10_000 * MS);
    }

    /// Regression: `max_delay(0)` of decorrelated jitter said `base`, yet the first retry draws up to 3 x base.
    #[test]
    fn decorrelated_max_delay_bounds_every_draw_of_a_chain() {
        let b = Backoff::decorrelated(100 * MS, 60_000 * MS).unwrap();
        let mut rng = default_rng(Some(11));
        for _ in 0..200 {
            let mut previous = Duration::ZERO;
            for retry in 0..8 {
                previous = b.delay(retry, previous, &mut rng);
                assert!(previous <= b.max_delay(retry), "retry {retry}: {previous:?}");
            }
        }
    }

    #[test]
    fn max_total_delay_is_quick_and_saturates_for_any_number_of_retries() {
        let b = Backoff::default();
        // 100 + 200 + 400 + 800 + 1600 ms, then the 2 s cap for the other 95 retries.
        assert_eq!(b.max_total_delay(100), (3_100 + 95 * 2_000) * MS);
        assert_eq!(b.max_total_delay(0), Duration::ZERO);
        let huge = Backoff::full_jitter(Duration::from_nanos(1), Duration::MAX).unwrap();
        assert_eq!(huge.max_delay(u32::MAX), Duration::MAX);
        assert_eq!(huge.max_total_delay(u32::MAX), Duration::MAX);
    }

    #[test]
    fn names_round_trip() {
        for j in [Jitter::Full, Jitter::Decorrelated] {
            assert_eq!(j.as_str().parse::<Jitter>(), Ok(j));
        }
        let err = "fast".parse::<Jitter>().unwrap_err();
        assert_eq!(err.to_string(), "\"fast\" is not one of full, decorrelated");
    }

    proptest! {
        #[test]
        fn a_sleep_never_exceeds_cap_or_window(
            base_ms in 1u64..1000, extra_ms in 0u64..10_000, retry in 0u32..64,
            previous_ms in 0u64..20_000, seed: u64, decorrelated: bool,
        ) {
            let (base, cap) = (Duration::from_millis(base_ms), Duration::from_millis(base_ms + extra_ms));
            let jitter = if decorrelated { Jitter::Decorrelated } else { Jitter::Full };
            let b = Backoff::new(base, cap, jitter).unwrap();
            let mut rng = default_rng(Some(seed));
            let d = b.delay(retry, Duration::from_millis(previous_ms), &mut rng);
            prop_assert!(d <= cap);
            if !decorrelated {
                prop_assert!(d <= b.max_delay(retry));
            }
        }

        #[test]
        fn max_total_delay_is_the_sum_of_the_windows(
            base_ms in 1u64..1000, extra_ms in 0u64..100_000, retries in 0u32..200, decorrelated: bool,
        ) {
            let (base, cap) = (Duration::from_millis(base_ms), Duration::from_millis(base_ms + extra_ms));
            let jitter = if decorrelated { Jitter::Decorrelated } else { Jitter::Full };
            let b = Backoff::new(base, cap, jitter).unwrap();
            let sum: Duration = (0..retries).map(|n| b.max_delay(n)).sum();
            prop_assert_eq!(b.max_total_delay(retries), sum);
        }
    }
}
