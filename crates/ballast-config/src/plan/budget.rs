//! The RETRY LOAD column: the most retries an upstream's budget lets through.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::millis;
use crate::BudgetConfig;

/// The most retries a target's retry budget lets through (DESIGN.md, "Retry budget"), as `ballast plan` shows
/// it: `20% + 10/s` for a ratio budget, `10 + 1/s` for a token bucket.
///
/// A ratio budget alone would understate the load at low traffic: its floor of `min_per_sec` retries per second
/// is allowed whatever the traffic, so 20% of 5 requests per second is one retry, while the budget allows 11.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RetryLoad {
    /// Retries up to `ratio` of the requests over `window`, plus `min_per_sec` per second (Finagle, Linkerd).
    Ratio {
        /// Share of the requests that may be retried.
        ratio: f64,
        /// Retries allowed per second whatever the traffic.
        min_per_sec: u32,
        /// The window the share is counted over.
        #[serde(rename = "window_ms", serialize_with = "millis")]
        window: Duration,
    },
    /// A burst of `capacity` retries, then `refill_per_sec` per second (0: never refilled).
    TokenBucket {
        /// Retries available at once.
        capacity: u32,
        /// Retries added per second.
        refill_per_sec: f64,
    },
}

impl RetryLoad {
    /// The load the budget settings allow.
    pub fn of(budget: &BudgetConfig) -> Self {
        match *budget {
            BudgetConfig::Ratio {
                ratio,
                min_per_sec,
                window,
                ..
            } => RetryLoad::Ratio {
                ratio,
                min_per_sec,
                window,
            },
            BudgetConfig::TokenBucket {
                capacity,
                refill_per_sec,
                ..
            } => RetryLoad::TokenBucket {
                capacity,
                refill_per_sec,
            },
        }
    }
}

impl fmt::Display for RetryLoad {
    /// `20% + 10/s` (ratio + floor) or `10 + 1/s` (capacity + refill).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RetryLoad::Ratio {
                ratio, min_per_sec, ..
            } => {
                // Two decimals at most, without trailing zeros: 20%, 12.5%, 0.01%.
                let percent = (ratio * 100.0 * 100.0).round() / 100.0;
                write!(f, "{percent}% + {min_per_sec}/s")
            }
            RetryLoad::TokenBucket {
                capacity,
                refill_per_sec,
            } => write!(f, "{capacity} + {refill_per_sec}/s"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_and_floor_or_capacity_and_refill() {
        let ratio = RetryLoad::of(&BudgetConfig::default());
        assert_eq!(ratio.to_string(), "20% + 10/s");
        let custom = BudgetConfig::ratio(0.125, 0, Duration::from_secs(10)).unwrap();
        assert_eq!(RetryLoad::of(&custom).to_string(), "12.5% + 0/s");
        let bucket = RetryLoad::of(&BudgetConfig::default_token_bucket());
        assert_eq!(bucket.to_string(), "10 + 1/s");
        let half = BudgetConfig::token_bucket(3, 0.5).unwrap();
        assert_eq!(RetryLoad::of(&half).to_string(), "3 + 0.5/s");
    }
}
