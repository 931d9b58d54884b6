//! The `retry` and `budget` tables models and tools share (the `breaker` table is in `breaker`).
//!
//! Here validation only reads each value as written (a duration, a whole number that fits, a word) and then
//! asks ballast-core's own constructors — [`Backoff::new`], [`RetryPolicy::new`], [`RatioBudget::new`],
//! [`TokenBucket::new`] — whether the settings work. Their refusals become config errors at the field they
//! name, worded with the value as written and, where the rule has bounds, ballast-core's own constants. No
//! range is restated here, so a table that validates is one the gateway can build.

use std::time::Duration;

use ballast_core::{
    Backoff, DEFAULT_BASE, DEFAULT_CAP, DEFAULT_MAX_ATTEMPTS, InvalidBackoff, InvalidBudget,
    InvalidRetryPolicy, Jitter, RatioBudget, RetryPolicy, TokenBucket,
};

use super::check::{Checker, DurationRule, ask_core, join, written};
use crate::error::Problem;
use crate::format_duration;
use crate::raw::{HumanValue, RawBudget, RawRetry};
use crate::typed::{BudgetConfig, RetryConfig};

impl Checker {
    /// A `retry` table at `path`.
    pub(crate) fn retry(&mut self, path: &str, raw: Option<&RawRetry>) -> RetryConfig {
        let default = RetryConfig::default();
        let Some(raw) = raw else { return default };
        let attempts_path = join(path, "max_attempts");
        let max_attempts = self.int(&attempts_path, raw.max_attempts, DEFAULT_MAX_ATTEMPTS, 0);
        let base = self.duration(
            &join(path, "base"),
            raw.base.as_ref(),
            DEFAULT_BASE,
            DurationRule::Any,
        );
        let cap = self.duration(
            &join(path, "cap"),
            raw.cap.as_ref(),
            DEFAULT_CAP,
            DurationRule::Any,
        );
        let jitter = self.word(&join(path, "jitter"), raw.jitter.as_ref(), Jitter::Full);
        let backoff = match (base, cap, jitter) {
            (Some(base), Some(cap), Some(jitter)) => self.backoff(path, raw, base, cap, jitter),
            _ => None,
        };
        // The attempt cap is ballast-core's to judge too; against the default backoff when this one is broken,
        // so that both problems are reported.
        let max_attempts = max_attempts.and_then(|n| {
            let error = match RetryPolicy::new(n, backoff.unwrap_or(default.backoff)) {
                Ok(policy) => return Some(policy.max_attempts()),
                Err(error) => error,
            };
            match error {
                InvalidRetryPolicy::ZeroAttempts => {
                    let (value, must_be) = (n.to_string(), "at least 1".to_owned());
                    self.report(attempts_path, Problem::Range { value, must_be });
                }
                InvalidRetryPolicy::TooManyAttempts { max_attempts } => {
                    let value = max_attempts.to_string();
                    let must_be = format!("at most {}", RetryPolicy::LARGEST_MAX_ATTEMPTS);
                    self.report(attempts_path, Problem::Range { value, must_be });
                }
                other => self.report(path, Problem::RetryPolicy(other)),
            }
            None
        });
        RetryConfig {
            max_attempts: max_attempts.unwrap_or(default.max_attempts),
            backoff: backoff.unwrap_or(default.backoff),
        }
    }

    /// [`Backoff::new`], its refusal reported at the field the file wrote.
    fn backoff(
        &mut self,
        path: &str,
        raw: &RawRetry,
        base: Duration,
        cap: Duration,
        jitter: Jitter,
    ) -> Option<Backoff> {
        let error = match Backoff::new(base, cap, jitter) {
            Ok(backoff) => return Some(backoff),
            Err(error) => error,
        };
        let (base_path, cap_path) = (join(path, "base"), join(path, "cap"));
        match error {
            InvalidBackoff::ZeroBase => {
                // As written (quoted), like every range error; only a written base can be zero.
                let value = raw
                    .base
                    .as_ref()
                    .map_or_else(|| format_duration(base).to_string(), ToString::to_string);
                let must_be = "more than zero".to_owned();
                self.report(base_path, Problem::Range { value, must_be });
            }
            // Blamed on the base, unless only the cap was written (`cap = "50ms"` under the default base).
            InvalidBackoff::BaseOverCap { base, cap } => {
                let (base_written, cap_written) =
                    (written(raw.base.as_ref(), base), written(raw.cap.as_ref(), cap));
                let problem = |value, must_be, other, other_value| Problem::Relation {
                    value,
                    must_be,
                    other,
                    other_value,
                };
                if raw.base.is_none() && raw.cap.is_some() {
                    let relation = problem(cap_written, "at least", base_path, base_written);
                    self.report(cap_path, relation);
                } else {
                    let relation = problem(base_written, "at most", cap_path, cap_written);
                    self.report(base_path, relation);
                }
            }
            other => self.report(path, Problem::Backoff(other)),
        }
        None
    }

    /// A `budget` table at `path`.
    pub(crate) fn budget(&mut self, path: &str, raw: Option<&RawBudget>) -> BudgetConfig {
        let default = BudgetConfig::default();
        let budget = match raw {
            None => return default,
            Some(RawBudget::Ratio {
                ratio,
                min_per_sec,
                window,
            }) => self.ratio_budget(path, *ratio, *min_per_sec, window.as_ref()),
            Some(RawBudget::TokenBucket {
                capacity,
                refill_per_sec,
            }) => self.token_bucket(path, *capacity, *refill_per_sec),
        };
        budget.unwrap_or(default)
    }

    fn ratio_budget(
        &mut self,
        path: &str,
        ratio: Option<f64>,
        min_per_sec: Option<i64>,
        window: Option<&HumanValue>,
    ) -> Option<BudgetConfig> {
        let min_per_sec = self.int(
            &join(path, "min_per_sec"),
            min_per_sec,
            RatioBudget::DEFAULT_MIN_PER_SEC,
            0,
        );
        let window_path = join(path, "window");
        let window_value = self.duration(
            &window_path,
            window,
            RatioBudget::DEFAULT_WINDOW,
            DurationRule::Any,
        );
        let ratio = ratio.unwrap_or(RatioBudget::DEFAULT_RATIO);
        let mut settings = (ratio, min_per_sec?, window_value?);
        let build = |&(ratio, min, window): &(f64, u32, Duration)| BudgetConfig::ratio(ratio, min, window);
        ask_core(&mut settings, 2, build, |settings, error| match error {
            InvalidBudget::Ratio { ratio } => {
                let must_be = "between 0 and 1".to_owned();
                self.budget_range(join(path, "ratio"), ratio.to_string(), must_be);
                settings.0 = RatioBudget::DEFAULT_RATIO;
                true
            }
            InvalidBudget::Window { window: refused } => {
                let must_be = format!(
                    "between {} and {}",
                    format_duration(RatioBudget::MIN_WINDOW),
                    format_duration(RatioBudget::MAX_WINDOW)
                );
                let value = window.map_or_else(|| format_duration(refused).to_string(), ToString::to_string);
                self.budget_range(window_path.clone(), value, must_be);
                settings.2 = RatioBudget::DEFAULT_WINDOW;
                true
            }
            other => {
                self.report(path, Problem::Budget(other));
                false
            }
        })
    }

    fn token_bucket(
        &mut self,
        path: &str,
        capacity: Option<i64>,
        refill: Option<f64>,
    ) -> Option<BudgetConfig> {
        let capacity = self.int(
            &join(path, "capacity"),
            capacity,
            TokenBucket::DEFAULT_CAPACITY,
            0,
        );
        let mut settings = (capacity?, refill.unwrap_or(TokenBucket::DEFAULT_REFILL_PER_SEC));
        let build = |&(capacity, refill): &(u32, f64)| BudgetConfig::token_bucket(capacity, refill);
        ask_core(&mut settings, 2, build, |settings, error| match error {
            InvalidBudget::Capacity { capacity } => {
                let at = join(path, "capacity");
                self.budget_range(at, capacity.to_string(), "at least 1".to_owned());
                settings.0 = TokenBucket::DEFAULT_CAPACITY;
                true
            }
            InvalidBudget::RefillPerSec { refill_per_sec } => {
                let must_be = format!(
                    "0 (never refill) or between {} and {}",
                    TokenBucket::MIN_REFILL_PER_SEC,
                    TokenBucket::MAX_REFILL_PER_SEC
                );
                let at = join(path, "refill_per_sec");
                self.budget_range(at, refill_per_sec.to_string(), must_be);
                settings.1 = TokenBucket::DEFAULT_REFILL_PER_SEC;
                true
            }
            other => {
                self.report(path, Problem::Budget(other));
                false
            }
        })
    }

    fn budget_range(&mut self, path: String, value: String, must_be: String) {
        self.report(path, Problem::Range { value, must_be });
    }
}
