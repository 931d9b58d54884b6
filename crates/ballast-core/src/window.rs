//! A sliding time window of counts: a ring of time buckets with running totals (the breaker's failure rate, the
//! adaptive throttle's requests and accepts).
//!
//! Why buckets: keeping every call's time would cost memory per call; a ring of `n` buckets costs `n` counters
//! and ages calls out one bucket at a time (resilience4j's time-based sliding window, Hystrix's rolling
//! counters). The window therefore covers the current bucket plus the `n - 1` before it: a call leaves the
//! window between `window - window/n` and `window` after it was recorded. Running totals make reading the rate
//! O(1); advancing costs one step per bucket passed, at most `n`.

use std::time::Duration;

use crate::Instant;
use crate::time::saturating_nanos;

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    calls: u64,
    failures: u64,
}

/// Counted calls and failures over the last `window`, in `n` buckets.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    buckets: Box<[Bucket]>,
    bucket_nanos: u64,
    /// The bucket number (`nanos / bucket_nanos`) of the newest bucket.
    head: u64,
    /// Index of the newest bucket in `buckets`.
    head_slot: usize,
    calls: u64,
    failures: u64,
}

impl Window {
    /// A window of `window` split into `buckets` buckets; the config guarantees `buckets >= 1` and a bucket of
    /// at least 1 ms.
    pub(crate) fn new(window: Duration, buckets: u32) -> Self {
        let nanos = saturating_nanos(window);
        let n = buckets.max(1);
        Window {
            buckets: vec![Bucket::default(); n as usize].into_boxed_slice(),
            bucket_nanos: (nanos / u64::from(n)).max(1),
            head: 0,
            head_slot: 0,
            calls: 0,
            failures: 0,
        }
    }

    /// Ages out the buckets that ended before `now`'s bucket. A `now` earlier than one already seen (threads
    /// racing by a few nanoseconds) leaves the window as it is.
    pub(crate) fn advance(&mut self, now: Instant) {
        let bucket = now.as_nanos() / self.bucket_nanos;
        if bucket <= self.head {
            return;
        }
        let n = self.buckets.len();
        let passed = bucket - self.head;
        if passed >= n as u64 {
            self.clear();
        } else {
            for _ in 0..passed {
                self.head_slot = if self.head_slot + 1 == n {
                    0
                } else {
                    self.head_slot + 1
                };
                let old = std::mem::take(&mut self.buckets[self.head_slot]);
                self.calls -= old.calls;
                self.failures -= old.failures;
            }
        }
        self.head = bucket;
    }

    /// Counts one call at `now` (into the newest bucket if `now` is earlier than it).
    pub(crate) fn record(&mut self, now: Instant, failed: bool) {
        self.record_many(now, 1, u64::from(failed));
    }

    /// Counts `calls` calls at `now`, `failures` of them failed (into the newest bucket if `now` is earlier than
    /// it).
    pub(crate) fn record_many(&mut self, now: Instant, calls: u64, failures: u64) {
        self.advance(now);
        let slot = &mut self.buckets[self.head_slot];
        slot.calls += calls;
        self.calls += calls;
        slot.failures += failures;
        self.failures += failures;
    }

    /// The length of a bucket: the bucket of `now` is `now.as_nanos() / bucket_nanos()`.
    pub(crate) fn bucket_nanos(&self) -> u64 {
        self.bucket_nanos
    }

    /// When the newest bucket ends: until then, nothing ages out.
    pub(crate) fn newest_ends(&self) -> Instant {
        Instant::from_nanos(self.head.saturating_add(1).saturating_mul(self.bucket_nanos))
    }

    /// Calls and failures in the window as of the last `advance` or `record`.
    pub(crate) fn totals(&self) -> (u64, u64) {
        (self.calls, self.failures)
    }

    /// Forgets every call (the breaker closed again: the old window says nothing about the recovered upstream).
    pub(crate) fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
        self.calls = 0;
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    #[test]
    fn calls_age_out_one_bucket_at_a_time() {
        // 1 s window in 10 buckets of 100 ms.
        let mut w = Window::new(Duration::from_secs(1), 10);
        w.record(at(0), true);
        w.record(at(50), false);
        w.record(at(150), true);
        assert_eq!(w.totals(), (3, 2));
        w.advance(at(999));
        assert_eq!(w.totals(), (3, 2), "still inside the window");
        w.advance(at(1000));
        assert_eq!(w.totals(), (1, 1), "the first bucket [0, 100) aged out");
        w.advance(at(1100));
        assert_eq!(w.totals(), (0, 0));
    }

    #[test]
    fn a_long_gap_clears_everything() {
        let mut w = Window::new(Duration::from_secs(1), 10);
        for t in 0..10 {
            w.record(at(t * 100), t % 2 == 0);
        }
        assert_eq!(w.totals(), (10, 5));
        w.record(at(60_000), true);
        assert_eq!(w.totals(), (1, 1));
    }

    #[test]
    fn an_earlier_now_counts_in_the_newest_bucket() {
        let mut w = Window::new(Duration::from_secs(1), 10);
        w.record(at(500), false);
        w.record(at(100), true); // a racing thread's slightly older clock reading
        assert_eq!(w.totals(), (2, 1));
        w.advance(at(1499));
        assert_eq!(w.totals(), (2, 1));
        w.advance(at(1500));
        assert_eq!(
            w.totals(),
            (0, 0),
            "both left with the bucket they were counted in"
        );
    }

    #[test]
    fn one_bucket_is_a_tumbling_window() {
        let mut w = Window::new(Duration::from_secs(1), 1);
        w.record(at(10), true);
        w.record(at(990), true);
        assert_eq!(w.totals(), (2, 2));
        w.advance(at(1000));
        assert_eq!(w.totals(), (0, 0));
    }

    #[test]
    fn clear_forgets_all() {
        let mut w = Window::new(Duration::from_secs(10), 10);
        w.record(at(1), true);
        w.clear();
        assert_eq!(w.totals(), (0, 0));
        w.record(at(2), false);
        assert_eq!(w.totals(), (1, 0));
    }
}
