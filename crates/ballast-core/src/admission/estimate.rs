//! The typical latency and the waits derived from it.
//!
//! - The typical latency is an exponentially weighted moving average of the latencies reported to
//!   `release`, with gain 1/8 — the smoothed round-trip time of RFC 6298 (TCP's SRTT): one slow call moves it by
//!   an eighth, a lasting change takes over within a few dozen calls. It starts at the configured seed, or at the
//!   first report when there is no seed.
//! - While every slot is busy, a full pool finishes about `limit` calls per typical latency (Little's law), so a
//!   waiter with `k` waiters ahead of it gets a slot after about `(k + 1) * latency / limit`: the `k` ahead take
//!   the first `k` slots to free, it takes the next. It then needs one typical latency to finish.

use std::time::Duration;

use crate::time::saturating_nanos;

/// `estimate += (sample - estimate) / 2^GAIN_SHIFT`: gain 1/8 (RFC 6298's alpha).
const GAIN_SHIFT: u32 = 3;
/// The least `Retry-After` suggested: the header counts whole seconds, and 0 would invite an immediate retry.
const MIN_RETRY_AFTER: Duration = Duration::from_secs(1);
/// The most `Retry-After` suggested: past this a client (Ballast's own `max_retry_after` is 60 s) gives up
/// rather than waits, and the backlog will have changed anyway.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// A running estimate of one upstream's typical latency, in nanoseconds (never zero once known).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct LatencyEstimate {
    nanos: Option<u64>,
}

impl LatencyEstimate {
    /// An estimate starting at `seed`, or unknown.
    pub(super) fn seeded(seed: Option<Duration>) -> Self {
        LatencyEstimate {
            nanos: seed.map(|seed| saturating_nanos(seed).max(1)),
        }
    }

    /// The current estimate; `None` before a seed or a first report.
    pub(super) fn get(&self) -> Option<Duration> {
        self.nanos.map(Duration::from_nanos)
    }

    /// Folds one observed latency into the estimate.
    pub(super) fn record(&mut self, sample: Duration) {
        let sample = saturating_nanos(sample);
        let next = match self.nanos {
            None => sample,
            Some(old) if sample >= old => old + ((sample - old) >> GAIN_SHIFT),
            Some(old) => old - ((old - sample) >> GAIN_SHIFT),
        };
        // Kept above zero: the waits below divide by it.
        self.nanos = Some(next.max(1));
    }
}

/// A latency in nanoseconds as a divisor: at least 1.
fn latency_nanos(latency: Duration) -> u128 {
    u128::from(saturating_nanos(latency).max(1))
}

/// Expected time until a waiter with `ahead` waiters before it has finished: its wait for a slot,
/// `(ahead + 1) * latency / limit`, plus one `latency` to run.
pub(super) fn expected_finish(ahead: usize, latency: Duration, limit: usize) -> Duration {
    let latency = latency_nanos(latency);
    let wait = (ahead as u128 + 1) * latency / limit.max(1) as u128;
    duration_from_nanos(wait + latency)
}

/// How many waiters may be ahead of a newcomer that has `remaining` until its deadline: the number of `k` with
/// `expected_finish(k, latency, limit) <= remaining`, so it fits exactly when its waiters ahead are fewer.
pub(super) fn waiters_that_fit(remaining: Duration, latency: Duration, limit: usize) -> usize {
    let latency = latency_nanos(latency);
    let remaining = remaining.as_nanos();
    let Some(spare) = remaining.checked_sub(latency) else {
        return 0;
    };
    // floor((k+1) * latency / limit) <= spare  <=>  (k+1) * latency <= (spare+1) * limit - 1.
    let limit = limit.max(1) as u128;
    let bound = spare.saturating_add(1).saturating_mul(limit) - 1;
    usize::try_from(bound / latency).unwrap_or(usize::MAX)
}

/// The `Retry-After` to suggest: the time the `in_system` calls (running and waiting) need to drain through
/// `limit` slots, `in_system * latency / limit`, within [1 s, 30 s]; 1 s without an estimate.
pub(super) fn retry_after(in_system: usize, latency: Option<Duration>, limit: usize) -> Duration {
    let Some(latency) = latency else {
        return MIN_RETRY_AFTER;
    };
    let drain = in_system as u128 * latency_nanos(latency) / limit.max(1) as u128;
    duration_from_nanos(drain).clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER)
}

fn duration_from_nanos(nanos: u128) -> Duration {
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn estimate_starts_at_seed_or_first_report_then_moves_by_an_eighth() {
        let mut unseeded = LatencyEstimate::seeded(None);
        assert_eq!(unseeded.get(), None);
        unseeded.record(100 * MS);
        assert_eq!(unseeded.get(), Some(100 * MS));

        let mut seeded = LatencyEstimate::seeded(Some(100 * MS));
        seeded.record(900 * MS);
        assert_eq!(seeded.get(), Some(200 * MS));
        seeded.record(Duration::ZERO);
        assert_eq!(seeded.get(), Some(175 * MS));
    }

    #[test]
    fn estimate_never_reaches_zero() {
        let mut estimate = LatencyEstimate::seeded(None);
        for _ in 0..100 {
            estimate.record(Duration::ZERO);
        }
        assert_eq!(estimate.get(), Some(Duration::from_nanos(1)));
    }

    #[test]
    fn expected_finish_is_the_wait_for_a_slot_plus_one_call() {
        // 4 slots, 100 ms per call: 7 ahead -> the newcomer is the 8th to get a slot, after 2 call-times.
        assert_eq!(expected_finish(7, 100 * MS, 4), 300 * MS);
        assert_eq!(expected_finish(0, 100 * MS, 1), 200 * MS);
    }

    #[test]
    fn waiters_that_fit_agrees_with_expected_finish() {
        for limit in [1, 2, 3, 7, 32] {
            for latency_ms in [1, 3, 10, 100] {
                for remaining_ms in (0..400).step_by(7) {
                    let (latency, remaining) = (latency_ms * MS, remaining_ms * MS + Duration::from_nanos(3));
                    let fit = waiters_that_fit(remaining, latency, limit);
                    for ahead in 0..fit.min(5000) + 2 {
                        let fits = expected_finish(ahead, latency, limit) <= remaining;
                        assert_eq!(
                            fits,
                            ahead < fit,
                            "limit {limit} latency {latency:?} ahead {ahead}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn waiters_that_fit_is_zero_when_even_the_call_does_not_fit() {
        assert_eq!(waiters_that_fit(99 * MS, 100 * MS, 8), 0);
        assert_eq!(waiters_that_fit(Duration::MAX, MS, usize::MAX), usize::MAX);
    }

    #[test]
    fn retry_after_is_the_drain_time_within_bounds() {
        assert_eq!(retry_after(40, Some(200 * MS), 4), Duration::from_secs(2));
        assert_eq!(retry_after(1, Some(10 * MS), 4), Duration::from_secs(1));
        assert_eq!(
            retry_after(10_000, Some(Duration::from_secs(1)), 1),
            Duration::from_secs(30)
        );
        assert_eq!(retry_after(40, None, 4), Duration::from_secs(1));
    }
}
