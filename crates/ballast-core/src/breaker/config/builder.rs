//! [`BreakerConfigBuilder`]: every setter optional, every rule checked once in [`build`](BreakerConfigBuilder::build).

use std::time::Duration;

use super::BreakerConfig;
use crate::breaker::InvalidBreaker;

/// Builds a [`BreakerConfig`]; every setter is optional and [`build`](Self::build) validates the whole.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BreakerConfigBuilder {
    config: BreakerConfig,
    success_threshold: Option<u32>,
}

impl BreakerConfigBuilder {
    /// Consecutive failures that open the breaker; 0 turns this trigger off.
    pub fn consecutive_failures(mut self, n: u32) -> Self {
        self.config.consecutive_failures = n;
        self
    }

    /// The least time between the starts of the first and the last failure of a streak that opens the breaker
    /// (`Duration::ZERO`: any streak of `consecutive_failures`).
    pub fn consecutive_spread(mut self, spread: Duration) -> Self {
        self.config.consecutive_spread = spread;
        self
    }

    /// The failure rate in `(0, 1]` that opens the breaker, or `None` to turn the rate trigger off.
    pub fn failure_rate(mut self, rate: Option<f64>) -> Self {
        self.config.failure_rate = rate;
        self
    }

    /// The sliding window the rate is measured over.
    pub fn window(mut self, window: Duration) -> Self {
        self.config.window = window;
        self
    }

    /// How many buckets the window is split into.
    pub fn window_buckets(mut self, buckets: u32) -> Self {
        self.config.window_buckets = buckets;
        self
    }

    /// The least number of calls in the window before the rate may open the breaker.
    pub fn min_calls(mut self, n: u32) -> Self {
        self.config.min_calls = n;
        self
    }

    /// Attempts slower than this count as failures; `None` (the default) ignores latency.
    pub fn slow_call(mut self, threshold: Option<Duration>) -> Self {
        self.config.slow_call = threshold;
        self
    }

    /// The nominal open time.
    pub fn open_for(mut self, open_for: Duration) -> Self {
        self.config.open_for = open_for;
        self
    }

    /// The jitter fraction on the open time, in `[0, 1)`.
    pub fn open_jitter(mut self, jitter: f64) -> Self {
        self.config.open_jitter = jitter;
        self
    }

    /// The most probes in flight while half-open (M).
    pub fn half_open_probes(mut self, m: u32) -> Self {
        self.config.half_open_probes = m;
        self
    }

    /// Successful probes that close the breaker (S); defaults to `half_open_probes`.
    pub fn success_threshold(mut self, s: u32) -> Self {
        self.success_threshold = Some(s);
        self
    }

    /// Validates and returns the configuration, or the first invalid field.
    pub fn build(self) -> Result<BreakerConfig, InvalidBreaker> {
        let mut c = self.config;
        c.success_threshold = self.success_threshold.unwrap_or(c.half_open_probes);
        if let Some(rate) = c.failure_rate
            && !(rate > 0.0 && rate <= 1.0)
        {
            return Err(InvalidBreaker::FailureRate(rate));
        }
        if !(1..=BreakerConfig::MAX_WINDOW_BUCKETS).contains(&c.window_buckets) {
            return Err(InvalidBreaker::WindowBuckets(c.window_buckets));
        }
        if c.window < Duration::from_millis(u64::from(c.window_buckets)) {
            return Err(InvalidBreaker::Window {
                window: c.window,
                buckets: c.window_buckets,
            });
        }
        if c.min_calls == 0 {
            return Err(InvalidBreaker::MinCalls(c.min_calls));
        }
        if let Some(slow) = c.slow_call
            && slow.is_zero()
        {
            return Err(InvalidBreaker::SlowCall(slow));
        }
        if c.open_for.is_zero() {
            return Err(InvalidBreaker::OpenFor(c.open_for));
        }
        if c.open_for > BreakerConfig::MAX_OPEN_FOR {
            return Err(InvalidBreaker::OpenForTooLong(c.open_for));
        }
        if !(0.0..1.0).contains(&c.open_jitter) {
            return Err(InvalidBreaker::OpenJitter(c.open_jitter));
        }
        if c.half_open_probes == 0 {
            return Err(InvalidBreaker::HalfOpenProbes(c.half_open_probes));
        }
        if c.success_threshold == 0 {
            return Err(InvalidBreaker::SuccessThreshold(c.success_threshold));
        }
        Ok(c)
    }
}
