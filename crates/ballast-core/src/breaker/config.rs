//! The breaker's parameters, validated once at construction (STYLE.md, convention 4).

use std::time::Duration;

use super::InvalidBreaker;

/// The validated parameters of one circuit breaker. Build one with [`BreakerConfig::builder`]; the
/// [`Default`] is DESIGN.md's defaults.
///
/// ```
/// use ballast_core::BreakerConfig;
/// use std::time::Duration;
///
/// let config = BreakerConfig::builder()
///     .consecutive_failures(5)
///     .open_for(Duration::from_secs(30))
///     .half_open_probes(3)
///     .build()
///     .unwrap();
/// assert_eq!(config.success_threshold(), 3); // follows half_open_probes unless set
/// assert!(config.can_open());
///
/// let err = BreakerConfig::builder().failure_rate(Some(1.5)).build().unwrap_err();
/// assert_eq!(err.to_string(), "failure_rate: 1.5 is not in (0, 1] (turn the rate trigger off instead of setting 0)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerConfig {
    consecutive_failures: u32,
    failure_rate: Option<f64>,
    window: Duration,
    window_buckets: u32,
    min_calls: u32,
    slow_call: Option<Duration>,
    open_for: Duration,
    open_jitter: f64,
    half_open_probes: u32,
    success_threshold: u32,
}

impl BreakerConfig {
    /// Default consecutive failures that open the breaker (DESIGN.md example: 5).
    pub const DEFAULT_CONSECUTIVE_FAILURES: u32 = 5;
    /// Default failure-rate threshold (resilience4j's default: 50%).
    pub const DEFAULT_FAILURE_RATE: f64 = 0.5;
    /// Default sliding window (the same 10 s as the retry budget's).
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
    /// Default number of buckets the window is split into (1 s each by default).
    pub const DEFAULT_WINDOW_BUCKETS: u32 = 10;
    /// Default least number of calls in the window before the rate can open the breaker.
    pub const DEFAULT_MIN_CALLS: u32 = 20;
    /// Default time the breaker stays open (DESIGN.md example: 30 s).
    pub const DEFAULT_OPEN_FOR: Duration = Duration::from_secs(30);
    /// Default jitter on the open time: drawn in `[0.9, 1.1] x open_for`.
    pub const DEFAULT_OPEN_JITTER: f64 = 0.1;
    /// Default number of probes a half-open breaker lets through at once (DESIGN.md example: 3).
    pub const DEFAULT_HALF_OPEN_PROBES: u32 = 3;
    /// The most buckets a window may have (bounds memory and the work of aging a whole window out).
    pub const MAX_WINDOW_BUCKETS: u32 = 1000;
    /// The longest `open_for` (1 day). Breakers open for seconds to minutes (resilience4j's default wait is 60 s);
    /// the bound keeps every open time, jitter included, far inside what an [`Instant`](crate::Instant) and a
    /// `Retry-After` can carry.
    pub const MAX_OPEN_FOR: Duration = Duration::from_secs(24 * 60 * 60);

    /// A builder starting from the defaults.
    pub fn builder() -> BreakerConfigBuilder {
        BreakerConfigBuilder::default()
    }

    /// Consecutive failures (while closed) that open the breaker; 0 when this trigger is off.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// The failure rate over the window that opens the breaker, or `None` when this trigger is off.
    pub fn failure_rate(&self) -> Option<f64> {
        self.failure_rate
    }

    /// The sliding window the failure rate is measured over.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// How many buckets the window is split into: calls age out one bucket at a time.
    pub fn window_buckets(&self) -> u32 {
        self.window_buckets
    }

    /// The least number of counted calls in the window before the rate trigger may open the breaker.
    pub fn min_calls(&self) -> u32 {
        self.min_calls
    }

    /// An attempt slower than this counts as a failure, or `None` when latency does not count.
    pub fn slow_call(&self) -> Option<Duration> {
        self.slow_call
    }

    /// The nominal time the breaker stays open before letting probes through.
    pub fn open_for(&self) -> Duration {
        self.open_for
    }

    /// The jitter fraction `j`: each open time is drawn uniformly in `[open_for*(1-j), open_for*(1+j)]`.
    pub fn open_jitter(&self) -> f64 {
        self.open_jitter
    }

    /// The most probes a half-open breaker has in flight at once (M).
    pub fn half_open_probes(&self) -> u32 {
        self.half_open_probes
    }

    /// Successful probes that close a half-open breaker (S). May exceed M: probes are then let through in
    /// waves, a new one each time one answers.
    pub fn success_threshold(&self) -> u32 {
        self.success_threshold
    }

    /// The shortest and longest open time the jitter can draw.
    pub fn open_time_bounds(&self) -> (Duration, Duration) {
        (
            scale(self.open_for, 1.0 - self.open_jitter),
            scale(self.open_for, 1.0 + self.open_jitter),
        )
    }

    /// Whether any trigger is on: `false` for a breaker that can never open (`ballast plan` warns).
    ///
    /// This checks the configuration alone: the consecutive-failure trigger (`consecutive_failures > 0`) or the
    /// rate trigger (`failure_rate` set). Whether `min_calls` calls ever arrive within one window depends on
    /// traffic, which the configuration does not know; [`min_calls_per_second`](Self::min_calls_per_second)
    /// gives the rate of calls the rate trigger needs, for `plan` to compare with the expected load. Slow
    /// calls only feed the triggers: with both off, `slow_call` alone cannot open the breaker.
    pub fn can_open(&self) -> bool {
        self.consecutive_failures > 0 || self.failure_rate.is_some()
    }

    /// The calls per second needed to reach `min_calls` within one window, or `None` when the rate trigger is
    /// off. Below this load only the consecutive-failure trigger can open the breaker.
    pub fn min_calls_per_second(&self) -> Option<f64> {
        self.failure_rate
            .map(|_| f64::from(self.min_calls) / self.window.as_secs_f64())
    }
}

/// `d x factor`, saturating at `Duration::MAX` (and zero for a negative or NaN factor) where
/// `Duration::mul_f64` would panic. A validated config never gets there; this keeps it so for any config.
fn scale(d: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * factor).unwrap_or(if factor > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            consecutive_failures: Self::DEFAULT_CONSECUTIVE_FAILURES,
            failure_rate: Some(Self::DEFAULT_FAILURE_RATE),
            window: Self::DEFAULT_WINDOW,
            window_buckets: Self::DEFAULT_WINDOW_BUCKETS,
            min_calls: Self::DEFAULT_MIN_CALLS,
            slow_call: None,
            open_for: Self::DEFAULT_OPEN_FOR,
            open_jitter: Self::DEFAULT_OPEN_JITTER,
            half_open_probes: Self::DEFAULT_HALF_OPEN_PROBES,
            success_threshold: Self::DEFAULT_HALF_OPEN_PROBES,
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn defaults_are_the_documented_ones_and_valid() {
        let c = BreakerConfig::default();
        assert_eq!(BreakerConfig::builder().build(), Ok(c));
        assert_eq!(c.consecutive_failures(), 5);
        assert_eq!(c.failure_rate(), Some(0.5));
        assert_eq!(
            (c.window(), c.window_buckets(), c.min_calls()),
            (10_000 * MS, 10, 20)
        );
        assert_eq!((c.open_for(), c.open_jitter()), (30_000 * MS, 0.1));
        assert_eq!((c.half_open_probes(), c.success_threshold()), (3, 3));
        assert_eq!(c.slow_call(), None);
        assert_eq!(c.open_time_bounds(), (27_000 * MS, 33_000 * MS));
    }

    #[test]
    fn success_threshold_follows_probes_unless_set() {
        let c = BreakerConfig::builder().half_open_probes(7).build().unwrap();
        assert_eq!(c.success_threshold(), 7);
        // S above M is allowed: probes go through in waves.
        let c = BreakerConfig::builder()
            .half_open_probes(2)
            .success_threshold(5)
            .build()
            .unwrap();
        assert_eq!((c.half_open_probes(), c.success_threshold()), (2, 5));
    }

    #[test]
    fn invalid_fields_are_named_with_their_value() {
        let b = BreakerConfig::builder;
        let cases = [
            (
                b().failure_rate(Some(0.0)).build(),
                "failure_rate",
                "failure_rate: 0 is not in (0, 1]",
            ),
            (
                b().failure_rate(Some(1.5)).build(),
                "failure_rate",
                "failure_rate: 1.5 is not in (0, 1]",
            ),
            (
                b().failure_rate(Some(f64::NAN)).build(),
                "failure_rate",
                "failure_rate: NaN",
            ),
            (
                b().window_buckets(0).build(),
                "window_buckets",
                "window_buckets: 0 is not in 1..=1000",
            ),
            (
                b().window_buckets(1001).build(),
                "window_buckets",
                "window_buckets: 1001",
            ),
            (
                b().window(Duration::ZERO).build(),
                "window",
                "window: 0ns is shorter than 10 buckets",
            ),
            (
                b().window(9 * MS).build(),
                "window",
                "window: 9ms is shorter than 10 buckets of at least 1ms",
            ),
            (
                b().min_calls(0).build(),
                "min_calls",
                "min_calls: 0 must be at least 1",
            ),
            (
                b().slow_call(Some(Duration::ZERO)).build(),
                "slow_call",
                "slow_call: 0ns must be",
            ),
            (
                b().open_for(Duration::ZERO).build(),
                "open_for",
                "open_for: 0ns must be greater than zero",
            ),
            (
                b().open_for(Duration::MAX).build(),
                "open_for",
                "open_for: 18446744073709551615.999999999s is longer than 1 day",
            ),
            (
                b().open_for(BreakerConfig::MAX_OPEN_FOR + Duration::from_nanos(1))
                    .build(),
                "open_for",
                "open_for: 86400.000000001s is longer than 1 day",
            ),
            (
                b().open_jitter(1.0).build(),
                "open_jitter",
                "open_jitter: 1 is not in [0, 1)",
            ),
            (
                b().open_jitter(-0.1).build(),
                "open_jitter",
                "open_jitter: -0.1 is not in [0, 1)",
            ),
            (
                b().half_open_probes(0).build(),
                "half_open_probes",
                "half_open_probes: 0 must be at least 1",
            ),
            (
                b().success_threshold(0).build(),
                "success_threshold",
                "success_threshold: 0 must be",
            ),
        ];
        for (result, field, message) in cases {
            let err = result.unwrap_err();
            assert_eq!(err.field(), field, "{err}");
            assert!(
                err.to_string().starts_with(message),
                "{err} does not start with {message}"
            );
        }
    }

    #[test]
    fn edge_values_are_accepted() {
        let c = BreakerConfig::builder()
            .failure_rate(Some(1.0))
            .window(10 * MS)
            .min_calls(1)
            .open_jitter(0.0)
            .slow_call(Some(Duration::from_nanos(1)))
            .half_open_probes(1)
            .build()
            .unwrap();
        assert_eq!(c.open_time_bounds(), (30_000 * MS, 30_000 * MS));
        let day = BreakerConfig::builder()
            .open_for(BreakerConfig::MAX_OPEN_FOR)
            .open_jitter(0.5)
            .build()
            .unwrap();
        assert_eq!(
            day.open_time_bounds(),
            (Duration::from_secs(43_200), Duration::from_secs(129_600))
        );
        assert!(
            BreakerConfig::builder()
                .window_buckets(1000)
                .window(Duration::from_secs(1))
                .build()
                .is_ok()
        );
    }

    /// Review finding 6: an unbounded `open_for` panicked in `mul_f64` at the first open.
    #[test]
    fn scaling_an_open_time_never_panics() {
        assert_eq!(scale(Duration::MAX, 1.5), Duration::MAX);
        assert_eq!(scale(30_000 * MS, 1.1), 33_000 * MS);
        assert_eq!(scale(30_000 * MS, -1.0), Duration::ZERO);
        assert_eq!(scale(30_000 * MS, f64::NAN), Duration::ZERO);
    }

    #[test]
    fn can_open_needs_a_trigger() {
        let b = BreakerConfig::builder;
        assert!(b().build().unwrap().can_open());
        assert!(b().failure_rate(None).build().unwrap().can_open());
        assert!(b().consecutive_failures(0).build().unwrap().can_open());
        let never = b()
            .consecutive_failures(0)
            .failure_rate(None)
            .slow_call(Some(MS))
            .build()
            .unwrap();
        assert!(!never.can_open());
        assert_eq!(never.min_calls_per_second(), None);
        assert_eq!(b().build().unwrap().min_calls_per_second(), Some(2.0)); // 20 calls / 10 s
    }
}
