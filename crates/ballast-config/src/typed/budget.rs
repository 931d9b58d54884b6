//! [`BudgetConfig`]: a retry budget's settings, checked by ballast-core, and the live budget built from them.
//!
//! Why settings and not the budget itself: a [`RetryBudget`] is live state (atomics counting requests and
//! retries), one per upstream — per tool, and per *deployment* of a model route — while a config is plain data
//! that is compared, copied and written back out. So the config keeps the numbers, and [`BudgetConfig::build`]
//! makes a fresh budget from them for the shell. The numbers are only ever accepted by asking ballast-core's
//! own constructors ([`RatioBudget::new`], [`TokenBucket::new`]): every range rule lives there, once, and a
//! budget that loads is a budget the gateway can build.

use std::sync::Arc;
use std::time::Duration;

use ballast_core::{InvalidBudget, RatioBudget, RetryBudget, TokenBucket};

/// A retry budget's settings (per tool, per model deployment), accepted by ballast-core.
///
/// The variants cannot be built outside this crate (`#[non_exhaustive]`): a `BudgetConfig` comes from
/// validation, from [`BudgetConfig::ratio`] or [`BudgetConfig::token_bucket`] (which ask ballast-core), or from
/// [`Default`] (ballast-core's defaults). Read it by matching with `..`.
///
/// ```
/// use ballast_config::BudgetConfig;
/// use ballast_core::Instant;
/// use std::time::Duration;
///
/// let settings = BudgetConfig::token_bucket(2, 0.0).unwrap(); // two retries, never refilled
/// let budget = settings.build();
/// let now = Instant::from_millis(0);
/// assert!(budget.try_withdraw(now) && budget.try_withdraw(now));
/// assert!(!budget.try_withdraw(now));
///
/// let err = BudgetConfig::ratio(0.2, 10, Duration::from_millis(500)).unwrap_err();
/// assert!(err.to_string().contains("500ms"));
/// assert!(matches!(BudgetConfig::default(), BudgetConfig::Ratio { ratio: 0.2, .. }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BudgetConfig {
    /// Retries at most `ratio` of the requests plus `min_per_sec` per second, over `window` (Finagle, Linkerd):
    /// a [`RatioBudget`].
    #[non_exhaustive]
    Ratio {
        /// Share of requests that may be retried (default [`RatioBudget::DEFAULT_RATIO`]).
        ratio: f64,
        /// Retries always allowed per second (default [`RatioBudget::DEFAULT_MIN_PER_SEC`]).
        min_per_sec: u32,
        /// The counting window (default [`RatioBudget::DEFAULT_WINDOW`]).
        window: Duration,
    },
    /// A bucket of `capacity` retry tokens refilled at `refill_per_sec`: a [`TokenBucket`].
    #[non_exhaustive]
    TokenBucket {
        /// Tokens held (default [`TokenBucket::DEFAULT_CAPACITY`]).
        capacity: u32,
        /// Tokens added per second, 0 for never (default [`TokenBucket::DEFAULT_REFILL_PER_SEC`]).
        refill_per_sec: f64,
    },
}

impl BudgetConfig {
    /// Ratio-budget settings, if ballast-core accepts them (the rules of [`RatioBudget::new`]).
    pub fn ratio(ratio: f64, min_per_sec: u32, window: Duration) -> Result<Self, InvalidBudget> {
        RatioBudget::new(ratio, min_per_sec, window)?;
        Ok(BudgetConfig::Ratio {
            ratio,
            min_per_sec,
            window,
        })
    }

    /// Token-bucket settings, if ballast-core accepts them (the rules of [`TokenBucket::new`]).
    pub fn token_bucket(capacity: u32, refill_per_sec: f64) -> Result<Self, InvalidBudget> {
        TokenBucket::new(capacity, refill_per_sec)?;
        Ok(BudgetConfig::TokenBucket {
            capacity,
            refill_per_sec,
        })
    }

    /// The token-bucket settings with ballast-core's defaults (reference/004: 10 retries, 1 per second).
    pub fn default_token_bucket() -> Self {
        BudgetConfig::TokenBucket {
            capacity: TokenBucket::DEFAULT_CAPACITY,
            refill_per_sec: TokenBucket::DEFAULT_REFILL_PER_SEC,
        }
    }

    /// A new, full budget with these settings, to be shared (behind the `Arc`) by every call to one upstream.
    ///
    /// # Panics
    /// Never for a `BudgetConfig` from validation, the constructors or [`Default`]: each of them only holds
    /// values that ballast-core's constructor has already accepted, the constructors are pure (the same values
    /// give the same answer), and the variants cannot be built anywhere else. Only fields changed in place
    /// through a `&mut` binding could make the constructor refuse, which is a broken invariant, not a
    /// configuration error.
    pub fn build(&self) -> Arc<dyn RetryBudget> {
        let built: Result<Arc<dyn RetryBudget>, InvalidBudget> = match *self {
            BudgetConfig::Ratio {
                ratio,
                min_per_sec,
                window,
            } => RatioBudget::new(ratio, min_per_sec, window).map(|b| Arc::new(b) as _),
            BudgetConfig::TokenBucket {
                capacity,
                refill_per_sec,
            } => TokenBucket::new(capacity, refill_per_sec).map(|b| Arc::new(b) as _),
        };
        built.expect("a BudgetConfig holds only settings ballast-core has accepted")
    }
}

impl Default for BudgetConfig {
    /// ballast-core's default ratio budget: 20% of requests plus 10 retries per second over 10 s.
    fn default() -> Self {
        BudgetConfig::Ratio {
            ratio: RatioBudget::DEFAULT_RATIO,
            min_per_sec: RatioBudget::DEFAULT_MIN_PER_SEC,
            window: RatioBudget::DEFAULT_WINDOW,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ballast_core::Instant;

    #[test]
    fn defaults_are_ballast_cores_and_build() {
        let BudgetConfig::Ratio {
            ratio,
            min_per_sec,
            window,
        } = BudgetConfig::default()
        else {
            panic!("the default budget is a ratio budget");
        };
        let core = RatioBudget::default();
        assert_eq!(
            (ratio, min_per_sec, window),
            (core.ratio(), core.min_per_sec(), core.window())
        );
        let bucket = TokenBucket::default();
        assert_eq!(
            BudgetConfig::default_token_bucket(),
            BudgetConfig::token_bucket(bucket.capacity(), bucket.refill_per_sec()).unwrap()
        );
        let now = Instant::from_millis(0);
        assert_eq!(BudgetConfig::default_token_bucket().build().available(now), 10);
        // A ratio budget earns from traffic; its floor alone allows min_per_sec x window retries.
        assert_eq!(BudgetConfig::default().build().available(now), 100);
    }

    #[test]
    fn constructors_refuse_what_core_refuses() {
        let second = Duration::from_secs(1);
        assert!(matches!(
            BudgetConfig::ratio(1.5, 10, second),
            Err(InvalidBudget::Ratio { .. })
        ));
        assert!(matches!(
            BudgetConfig::ratio(0.2, 10, RatioBudget::MAX_WINDOW + second),
            Err(InvalidBudget::Window { .. })
        ));
        assert!(matches!(
            BudgetConfig::token_bucket(0, 1.0),
            Err(InvalidBudget::Capacity { .. })
        ));
        assert!(matches!(
            BudgetConfig::token_bucket(1, TokenBucket::MIN_REFILL_PER_SEC / 2.0),
            Err(InvalidBudget::RefillPerSec { .. })
        ));
        assert!(BudgetConfig::ratio(0.0, 0, RatioBudget::MIN_WINDOW).is_ok());
        assert!(BudgetConfig::token_bucket(1, 0.0).is_ok());
    }

    #[test]
    fn each_build_is_a_fresh_budget() {
        let settings = BudgetConfig::token_bucket(1, 0.0).unwrap();
        let now = Instant::from_millis(0);
        let (a, b) = (settings.build(), settings.build());
        assert!(a.try_withdraw(now));
        assert!(!a.try_withdraw(now));
        assert!(b.try_withdraw(now), "a second upstream's budget is its own");
    }
}
