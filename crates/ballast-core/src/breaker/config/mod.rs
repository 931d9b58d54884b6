//! The breaker's parameters, validated once at construction (STYLE.md, convention 4): [`BreakerConfig`] here,
//! its builder (where every rule is checked) in `builder`.

use std::time::Duration;

mod builder;
#[cfg(test)]
mod tests;

pub use builder::BreakerConfigBuilder;

/// The validated parameters of one circuit breaker. Build one with [`BreakerConfig::builder`]; the
/// [`Default`] is DESIGN.md's defaults.
///
/// ```
/// use ballast_core::BreakerConfig;
/// use std::time::Duration;
///
/// let config = BreakerConfig::builder()
///     .consecutive_failures(5)
///     .open_for(Duration::from_secs(10))
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
    consecutive_spread: Duration,
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
    /// Default consecutive failures, in start order, that open the breaker: 7. A dead upstream fails every call,
    /// so seven in a row come within a second of its first outcomes at seven calls a second; an upstream that
    /// fails 20% of calls at random makes seven in a row once in 78,000 calls (0.2^7), and only where calls are
    /// sparse enough for seven of them to span the spread (500 ms) — at 5% of failures, once in 10^9.
    pub const DEFAULT_CONSECUTIVE_FAILURES: u32 = 7;
    /// Default least time between the starts of the first and the last failure of a streak that opens the
    /// breaker: 500 ms. A blip that fails every call of one instant (a load balancer's restart, a burst met by
    /// one bad moment) is not a dead upstream; a dead one keeps failing, and half a second of it comes within
    /// the second DESIGN.md allows.
    pub const DEFAULT_CONSECUTIVE_SPREAD: Duration = Duration::from_millis(500);
    /// Default failure-rate threshold (Resilience4j's and Hystrix's default: 50%).
    pub const DEFAULT_FAILURE_RATE: f64 = 0.5;
    /// Default sliding window (Hystrix's 10 s; the retry budget's window too).
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
    /// Default number of buckets the window is split into (1 s each by default).
    pub const DEFAULT_WINDOW_BUCKETS: u32 = 10;
    /// Default least number of calls in the window before the rate can open the breaker: Resilience4j's 100,
    /// more than a burst's first completions.
    pub const DEFAULT_MIN_CALLS: u32 = 100;
    /// Default time the breaker stays open: 5 s, short next to a deadline (30 s by default), so a false trip
    /// costs seconds, and long enough that a dead upstream is asked a few probes, not every call.
    pub const DEFAULT_OPEN_FOR: Duration = Duration::from_secs(5);
    /// Default jitter on the open time: drawn in `[0.8, 1.2] x open_for`, so breakers that opened together do
    /// not probe together.
    pub const DEFAULT_OPEN_JITTER: f64 = 0.2;
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

    /// Consecutive failures in start order (while closed) that open the breaker; 0 when this trigger is off.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// The least time between the starts of the first and the last failure of a streak that opens the breaker.
    pub fn consecutive_spread(&self) -> Duration {
        self.consecutive_spread
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
            consecutive_spread: Self::DEFAULT_CONSECUTIVE_SPREAD,
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
