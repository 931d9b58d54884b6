//! The policy tables models and tools share: `retry`, `budget`, `breaker`.

use std::time::Duration;

use ballast_core::{Backoff, DEFAULT_BASE, DEFAULT_CAP, InvalidBackoff, Jitter};

use super::check::{Checker, DurationRule, join, written};
use crate::error::Problem;
use crate::raw::{RawBreaker, RawBudget, RawRetry};
use crate::typed::{
    BreakerConfig, BudgetConfig, DEFAULT_BUCKET_CAPACITY,
    DEFAULT_BUCKET_REFILL_PER_SEC as DEFAULT_BUCKET_REFILL, DEFAULT_MAX_ATTEMPTS, RetryConfig,
};

const ONE_SECOND: Duration = Duration::from_secs(1);

fn zero_to_one(x: f64) -> bool {
    (0.0..=1.0).contains(&x)
}

impl Checker {
    /// A `retry` table at `path`.
    pub(crate) fn retry(&mut self, path: &str, raw: Option<&RawRetry>) -> RetryConfig {
        let default = RetryConfig::default();
        let Some(raw) = raw else { return default };
        let max_attempts = self.int(
            &join(path, "max_attempts"),
            raw.max_attempts,
            DEFAULT_MAX_ATTEMPTS,
            1,
        );
        let (base_path, cap_path) = (join(path, "base"), join(path, "cap"));
        let base = self.duration(
            &base_path,
            raw.base.as_ref(),
            DEFAULT_BASE,
            DurationRule::Positive,
        );
        let cap = self.duration(&cap_path, raw.cap.as_ref(), DEFAULT_CAP, DurationRule::Positive);
        let jitter = self.word(&join(path, "jitter"), raw.jitter.as_ref(), Jitter::Full);
        let backoff = match (base, cap, jitter) {
            (Some(base), Some(cap), Some(jitter)) => match Backoff::new(base, cap, jitter) {
                Ok(backoff) => Some(backoff),
                Err(InvalidBackoff::BaseOverCap { base, cap }) => {
                    let value = written(raw.base.as_ref(), base);
                    let other_value = written(raw.cap.as_ref(), cap);
                    let problem = Problem::Relation {
                        value,
                        must_be: "at most",
                        other: cap_path,
                        other_value,
                    };
                    self.report(base_path, problem);
                    None
                }
                // Zero bases were refused above; any other refusal is reported as ballast-core words it.
                Err(other) => {
                    self.report(path, Problem::Backoff(other));
                    None
                }
            },
            _ => None,
        };
        RetryConfig {
            max_attempts: max_attempts.unwrap_or(default.max_attempts),
            backoff: backoff.unwrap_or(default.backoff),
        }
    }

    /// A `budget` table at `path`.
    pub(crate) fn budget(&mut self, path: &str, raw: Option<&RawBudget>) -> BudgetConfig {
        let default = BudgetConfig::default();
        match raw {
            None => default,
            Some(RawBudget::Ratio {
                ratio,
                min_per_sec,
                window,
            }) => {
                let BudgetConfig::Ratio {
                    ratio: d_ratio,
                    min_per_sec: d_min,
                    window: d_window,
                } = default
                else {
                    return default;
                };
                let ratio = self.float(
                    &join(path, "ratio"),
                    *ratio,
                    d_ratio,
                    zero_to_one,
                    "between 0 and 1",
                );
                let min_per_sec = self.int(&join(path, "min_per_sec"), *min_per_sec, d_min, 0);
                let rule = DurationRule::AtLeast(ONE_SECOND);
                let window = self.duration(&join(path, "window"), window.as_ref(), d_window, rule);
                BudgetConfig::Ratio {
                    ratio: ratio.unwrap_or(d_ratio),
                    min_per_sec: min_per_sec.unwrap_or(d_min),
                    window: window.unwrap_or(d_window),
                }
            }
            Some(RawBudget::TokenBucket {
                capacity,
                refill_per_sec,
            }) => {
                let capacity = self.int(&join(path, "capacity"), *capacity, DEFAULT_BUCKET_CAPACITY, 1);
                let refill = self.float(
                    &join(path, "refill_per_sec"),
                    *refill_per_sec,
                    DEFAULT_BUCKET_REFILL,
                    |x| x >= 0.0 && x.is_finite(),
                    "a finite number, at least 0",
                );
                BudgetConfig::TokenBucket {
                    capacity: capacity.unwrap_or(DEFAULT_BUCKET_CAPACITY),
                    refill_per_sec: refill.unwrap_or(DEFAULT_BUCKET_REFILL),
                }
            }
        }
    }

    /// A `breaker` table at `path`.
    pub(crate) fn breaker(&mut self, path: &str, raw: Option<&RawBreaker>) -> BreakerConfig {
        let d = BreakerConfig::default();
        let Some(raw) = raw else { return d };
        let consecutive = self.int(
            &join(path, "consecutive_failures"),
            raw.consecutive_failures,
            d.consecutive_failures.unwrap_or(0),
            0,
        );
        let rate_default = d.failure_rate.unwrap_or(0.0);
        let rate = self.float(
            &join(path, "failure_rate"),
            raw.failure_rate,
            rate_default,
            zero_to_one,
            "between 0 and 1",
        );
        let window = self.duration(
            &join(path, "window"),
            raw.window.as_ref(),
            d.window,
            DurationRule::AtLeast(ONE_SECOND),
        );
        let min_calls = self.int(&join(path, "min_calls"), raw.min_calls, d.min_calls, 1);
        let slow_call = match &raw.slow_call {
            Some(slow) => self.duration(
                &join(path, "slow_call"),
                Some(slow),
                Duration::ZERO,
                DurationRule::Positive,
            ),
            None => None,
        };
        let open_for = self.duration(
            &join(path, "open_for"),
            raw.open_for.as_ref(),
            d.open_for,
            DurationRule::Positive,
        );
        let open_jitter = self.float(
            &join(path, "open_jitter"),
            raw.open_jitter,
            d.open_jitter,
            |x| (0.0..1.0).contains(&x),
            "at least 0 and less than 1",
        );
        let probes_path = join(path, "half_open_probes");
        let probes = self.int(&probes_path, raw.half_open_probes, d.half_open_probes, 1);
        let success_default = probes.unwrap_or(d.half_open_probes);
        let threshold_path = join(path, "success_threshold");
        let mut threshold = self.int(&threshold_path, raw.success_threshold, success_default, 1);
        if let (Some(probes), Some(s)) = (probes, threshold)
            && s > probes
        {
            let other_value = probes.to_string();
            let relation = Problem::Relation {
                value: s.to_string(),
                must_be: "at most",
                other: probes_path,
                other_value,
            };
            self.report(threshold_path, relation);
            threshold = None;
        }
        BreakerConfig {
            consecutive_failures: consecutive.map_or(d.consecutive_failures, |n| (n > 0).then_some(n)),
            failure_rate: rate.map_or(d.failure_rate, |r| (r > 0.0).then_some(r)),
            window: window.unwrap_or(d.window),
            min_calls: min_calls.unwrap_or(d.min_calls),
            slow_call,
            open_for: open_for.unwrap_or(d.open_for),
            open_jitter: open_jitter.unwrap_or(d.open_jitter),
            half_open_probes: probes.unwrap_or(d.half_open_probes),
            success_threshold: threshold.unwrap_or(success_default.min(probes.unwrap_or(d.half_open_probes))),
        }
    }
}
