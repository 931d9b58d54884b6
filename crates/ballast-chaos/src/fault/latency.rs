//! Latency: log-normal, fitted to the profile's p50 and p99, drawn by Box–Muller.
//!
//! Why log-normal: service latencies are positive and right-skewed, with a tail that a median alone hides; a
//! log-normal is the usual two-parameter fit, and p50 and p99 are the two numbers people know about a service.
//! With `ln X ~ N(mu, sigma^2)`: the median is `e^mu`, so `mu = ln p50`; the 99th percentile is
//! `e^(mu + z * sigma)` with `z = 2.326348` (the standard normal's 99th percentile), so
//! `sigma = (ln p99 - ln p50) / z`. p50 = p99 gives a constant latency.
//!
//! A draw is capped at [`LATENCY_CAP_FACTOR`] x p99. Without the cap the far tail of a wide fit reaches hours
//! (the smallest uniform is 2^-53, about 8.6 sigma out); a latency that long is a hang, and hangs are their own
//! fault with their own rate. The cap is 100x p99, so it changes the distribution only far beyond anything a
//! percentile of interest sees.
//!
//! All maths is `libm`, in nanoseconds, rounded once at the end: the same bits on every platform.

use std::f64::consts::TAU;
use std::time::Duration;

use crate::profile::Latency;

/// A drawn latency is at most this many times the profile's p99.
pub const LATENCY_CAP_FACTOR: u32 = 100;

/// The standard normal's 99th percentile.
const Z_99: f64 = 2.326348;

/// The latency for uniforms `u1`, `u2` in `[0, 1)`.
pub(super) fn lognormal(latency: &Latency, u1: f64, u2: f64) -> Duration {
    if latency.p50.is_zero() {
        // Validation refuses p50 = 0 (ln 0 is -inf); a hand-built profile with it answers at once.
        return Duration::ZERO;
    }
    let mu = libm::log(latency.p50.as_nanos() as f64);
    let sigma = (libm::log(latency.p99.as_nanos() as f64) - mu) / Z_99;
    // Box–Muller: 1 - u1 is in (0, 1], so the logarithm is finite.
    let z = libm::sqrt(-2.0 * libm::log(1.0 - u1)) * libm::cos(TAU * u2);
    let cap = latency.p99.saturating_mul(LATENCY_CAP_FACTOR).as_nanos() as f64;
    let nanos = libm::round(libm::exp(mu + sigma * z)).min(cap);
    // In [0, cap]; a cap beyond u64::MAX nanoseconds (584 years) saturates, as `as` does.
    Duration::from_nanos(nanos as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fit(p50_ms: u64, p99_ms: u64) -> Latency {
        Latency {
            p50: Duration::from_millis(p50_ms),
            p99: Duration::from_millis(p99_ms),
        }
    }

    /// z = sqrt(-2 ln(1 - u1)) cos(2 pi u2) is 0 at u1 = 0: the median.
    #[test]
    fn zero_z_is_the_median() {
        assert_eq!(lognormal(&fit(40, 200), 0.0, 0.3), Duration::from_millis(40));
    }

    #[test]
    fn z_of_the_99th_percentile_is_p99() {
        // cos(0) = 1 and sqrt(-2 ln(1 - u1)) = z99 for u1 = 1 - e^(-z99^2 / 2).
        let u1 = 1.0 - libm::exp(-Z_99 * Z_99 / 2.0);
        let drawn = lognormal(&fit(40, 200), u1, 0.0);
        let off = drawn.abs_diff(Duration::from_millis(200));
        assert!(off < Duration::from_micros(1), "{drawn:?}");
    }

    #[test]
    fn equal_percentiles_give_a_constant() {
        for (u1, u2) in [(0.0, 0.0), (0.5, 0.25), (0.999, 0.9)] {
            assert_eq!(lognormal(&fit(25, 25), u1, u2), Duration::from_millis(25));
        }
    }

    #[test]
    fn the_far_tail_is_capped_at_100_p99() {
        let largest_u1 = 1.0 - 1.0 / (1u64 << 53) as f64;
        assert_eq!(
            lognormal(&fit(1, 100), largest_u1, 0.0),
            Duration::from_secs(10),
            "about 8.6 sigma out: e^(ln 1ms + 1.98 * 8.6) ms is hours, capped at 100 x 100 ms"
        );
    }

    #[test]
    fn the_far_low_tail_is_under_a_microsecond() {
        let largest_u1 = 1.0 - 1.0 / (1u64 << 53) as f64;
        let drawn = lognormal(&fit(10, 1000), largest_u1, 0.5);
        assert!(drawn < Duration::from_micros(1), "{drawn:?}");
    }

    #[test]
    fn a_zero_median_answers_at_once() {
        assert_eq!(lognormal(&fit(0, 10), 0.3, 0.3), Duration::ZERO);
    }
}
