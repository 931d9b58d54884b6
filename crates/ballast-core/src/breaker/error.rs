//! Why a breaker could not be built, and why it refused a call.

use std::time::Duration;

use crate::ErrorCode;

/// Circuit-breaker parameters that cannot work. Each message starts with the field name and the value given,
/// so the config crate can prefix the path (`tools[2].breaker.failure_rate: 1.5 is not in (0, 1]`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidBreaker {
    /// The failure-rate threshold is not in `(0, 1]` (or is NaN). A rate of 0 would open on any traffic at all.
    #[error("failure_rate: {0} is not in (0, 1] (turn the rate trigger off instead of setting 0)")]
    FailureRate(f64),
    /// The number of window buckets is not in `1..=`[`BreakerConfig::MAX_WINDOW_BUCKETS`](crate::BreakerConfig::MAX_WINDOW_BUCKETS).
    #[error("window_buckets: {0} is not in 1..=1000")]
    WindowBuckets(u32),
    /// The window is shorter than one millisecond per bucket (this includes a zero window).
    #[error("window: {window:?} is shorter than {buckets} buckets of at least 1ms")]
    Window {
        /// The window given.
        window: Duration,
        /// The number of buckets it is split into.
        buckets: u32,
    },
    /// `min_calls` is zero: the rate over no calls at all is undefined.
    #[error("min_calls: {0} must be at least 1")]
    MinCalls(u32),
    /// `slow_call` is zero: every call would be slow, so every call would be a failure.
    #[error("slow_call: {0:?} must be greater than zero (leave it out to turn slow calls off)")]
    SlowCall(Duration),
    /// `open_for` is zero: the breaker would never stay open.
    #[error("open_for: {0:?} must be greater than zero")]
    OpenFor(Duration),
    /// `open_for` is over [`BreakerConfig::MAX_OPEN_FOR`](crate::BreakerConfig::MAX_OPEN_FOR): a breaker that
    /// stays open longer is a switched-off upstream, which is an operator's decision (`force_open`), not a
    /// breaker's.
    #[error("open_for: {0:?} is longer than 1 day, the most a breaker stays open")]
    OpenForTooLong(Duration),
    /// `open_jitter` is not in `[0, 1)` (or is NaN); at 1 the drawn open time could be zero.
    #[error("open_jitter: {0} is not in [0, 1)")]
    OpenJitter(f64),
    /// `half_open_probes` is zero: a half-open breaker could never send a probe, so it could never close.
    #[error("half_open_probes: {0} must be at least 1")]
    HalfOpenProbes(u32),
    /// `success_threshold` is zero: a half-open breaker would close without any evidence.
    #[error("success_threshold: {0} must be at least 1")]
    SuccessThreshold(u32),
}

impl InvalidBreaker {
    /// The name of the offending field, as in the configuration (`failure_rate`, `open_for`...).
    pub fn field(&self) -> &'static str {
        match self {
            InvalidBreaker::FailureRate(_) => "failure_rate",
            InvalidBreaker::WindowBuckets(_) => "window_buckets",
            InvalidBreaker::Window { .. } => "window",
            InvalidBreaker::MinCalls(_) => "min_calls",
            InvalidBreaker::SlowCall(_) => "slow_call",
            InvalidBreaker::OpenFor(_) | InvalidBreaker::OpenForTooLong(_) => "open_for",
            InvalidBreaker::OpenJitter(_) => "open_jitter",
            InvalidBreaker::HalfOpenProbes(_) => "half_open_probes",
            InvalidBreaker::SuccessThreshold(_) => "success_threshold",
        }
    }
}

/// Why [`CircuitBreaker::try_acquire`](super::CircuitBreaker::try_acquire) refused a call. Either way the
/// caller fails fast (503, [`ErrorCode::CircuitOpen`]) or goes to its fallback.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum BreakerRejected {
    /// The breaker is open.
    #[error("circuit open: retry in {} ms", retry_in.as_millis())]
    Open {
        /// Time left open.
        retry_in: Duration,
    },
    /// The breaker is half-open and every probe slot is taken.
    #[error("circuit half-open: all {probes} probes are in flight")]
    ProbesBusy {
        /// The probe limit (M).
        probes: u32,
    },
}

impl BreakerRejected {
    /// The stable error code of the refusal: always [`ErrorCode::CircuitOpen`].
    pub fn code(&self) -> ErrorCode {
        ErrorCode::CircuitOpen
    }

    /// The time left open, for `Retry-After`; `None` while half-open, when the probes in flight decide and no
    /// time is known (the shell picks its own small `Retry-After`).
    pub fn retry_in(&self) -> Option<Duration> {
        match *self {
            BreakerRejected::Open { retry_in } => Some(retry_in),
            BreakerRejected::ProbesBusy { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejections_carry_code_and_retry_in() {
        let open = BreakerRejected::Open {
            retry_in: Duration::from_secs(3),
        };
        assert_eq!(open.code(), ErrorCode::CircuitOpen);
        assert_eq!(open.retry_in(), Some(Duration::from_secs(3)));
        assert_eq!(open.to_string(), "circuit open: retry in 3000 ms");
        let busy = BreakerRejected::ProbesBusy { probes: 3 };
        assert_eq!(busy.retry_in(), None);
        assert_eq!(busy.to_string(), "circuit half-open: all 3 probes are in flight");
    }
}
