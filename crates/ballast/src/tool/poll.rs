//! How long to wait between two polls of an operation the upstream says is still in progress (409).
//!
//! Why not just the upstream's `Retry-After`: it is honoured — never polled earlier than asked — but `0`, a past
//! HTTP-date or no value at all would make the wait a hot loop (the review's probe: 10,001 requests in 0 ns).
//! So the waits grow from [`POLL_FLOOR`] to [`POLL_CAP`] with "equal jitter" (AWS Architecture Blog,
//! "Exponential Backoff and Jitter"): the `n`-th wait is half its window plus a full-jitter draw over the other
//! half, `min(cap/2, floor x 2^n) + U(0, min(cap/2, floor x 2^n))` — 100-200 ms, 200-400 ms, ... up to 1-2 s —
//! both halves from ballast-core's [`Backoff`]. Full jitter alone could draw zero (the hot loop again) and
//! decorrelated jitter barely drifts upwards; this never drops under the floor, surely grows (a long operation is
//! asked less and less often), and still spreads callers polling together. A wait is only taken when the deadline
//! can hold it and a poll after it.

use std::time::Duration;

use ballast_core::{Backoff, Deadline, DeadlineExceeded, DefaultRng, Instant, default_rng};

/// The shortest wait between two polls.
pub(super) const POLL_FLOOR: Duration = Duration::from_millis(100);
/// The longest wait the client picks by itself (an upstream's longer `Retry-After` is still honoured).
pub(super) const POLL_CAP: Duration = Duration::from_secs(2);

/// The waits between the polls of one operation.
#[derive(Debug)]
pub(super) struct PollWaits {
    /// Each wait's half window: `min(cap/2, floor x 2^n)`, its least value and the span of its jitter.
    half: Backoff,
    polls: u32,
    rng: DefaultRng,
}

impl PollWaits {
    /// Waits drawn from a generator seeded by the operating system.
    pub(super) fn new() -> Self {
        Self::with_rng(default_rng(None))
    }

    fn with_rng(rng: DefaultRng) -> Self {
        PollWaits {
            // Constants checked by the tests: a non-zero floor under half the cap.
            half: Backoff::full_jitter(POLL_FLOOR, POLL_CAP / 2).unwrap_or_default(),
            polls: 0,
            rng,
        }
    }

    /// The wait before the next poll when the upstream asked for `asked`: the growing jittered wait, or what the
    /// upstream asked when that is longer. When the deadline cannot hold it and a poll after it, the longest wait
    /// it can hold — one last poll just in time — if that is still no shorter than `asked` and [`POLL_FLOOR`];
    /// else the deadline error.
    pub(super) fn next(
        &mut self,
        asked: Option<Duration>,
        deadline: &Deadline,
        now: Instant,
    ) -> Result<Duration, DeadlineExceeded> {
        let half = self.half.max_delay(self.polls);
        let own = half + self.half.delay(self.polls, Duration::ZERO, &mut self.rng);
        self.polls = self.polls.saturating_add(1);
        let asked = asked.unwrap_or_default();
        let wait = own.max(asked);
        let Err(exceeded) = deadline.check_wait(wait, now) else {
            return Ok(wait);
        };
        let room = deadline
            .remaining(now)
            .saturating_sub(deadline.reserve())
            .saturating_sub(deadline.min_attempt());
        if room >= asked.max(POLL_FLOOR) && deadline.check_wait(room, now).is_ok() {
            Ok(room)
        } else {
            Err(exceeded)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn far() -> Deadline {
        Deadline::after(Instant::ZERO, Duration::from_secs(3600))
    }

    #[test]
    fn the_backoff_constants_are_valid() {
        assert!(Backoff::full_jitter(POLL_FLOOR, POLL_CAP / 2).is_ok());
    }

    #[test]
    fn waits_never_drop_under_the_floor_and_double_up_to_the_cap() {
        const MS: Duration = Duration::from_millis(1);
        for seed in 0..50 {
            let mut waits = PollWaits::with_rng(default_rng(Some(seed)));
            let drawn: Vec<Duration> = (0..12)
                .map(|_| waits.next(Some(Duration::ZERO), &far(), Instant::ZERO).unwrap())
                .collect();
            let halves = [100, 200, 400, 800, 1000, 1000].map(|ms| ms * MS);
            for (n, wait) in drawn.iter().enumerate() {
                let half = halves[n.min(5)];
                assert!(
                    *wait >= half && *wait <= 2 * half,
                    "wait {n}, seed {seed}: {drawn:?}"
                );
            }
            assert!(drawn.iter().all(|w| *w >= POLL_FLOOR && *w <= POLL_CAP));
        }
        let mut one = PollWaits::with_rng(default_rng(Some(1)));
        let mut other = PollWaits::with_rng(default_rng(Some(2)));
        assert_ne!(
            one.next(None, &far(), Instant::ZERO).unwrap(),
            other.next(None, &far(), Instant::ZERO).unwrap(),
            "jittered: callers polling together drift apart"
        );
    }

    #[test]
    fn a_longer_retry_after_is_honoured() {
        let mut waits = PollWaits::with_rng(default_rng(Some(3)));
        let wait = waits
            .next(Some(Duration::from_secs(7)), &far(), Instant::ZERO)
            .unwrap();
        assert_eq!(wait, Duration::from_secs(7));
    }

    #[test]
    fn the_deadline_bounds_the_wait() {
        let mut waits = PollWaits::with_rng(default_rng(Some(3)));
        // 50 ms reserve and 50 ms least attempt: a 400 ms deadline holds at most a 300 ms wait.
        let deadline = Deadline::after(Instant::ZERO, Duration::from_millis(400));
        for n in 0..20 {
            let wait = waits.next(None, &deadline, Instant::ZERO).unwrap();
            assert!(
                wait >= POLL_FLOOR && wait <= Duration::from_millis(300),
                "{wait:?}"
            );
            if n >= 2 {
                // From the third wait (400-800 ms) on, the growing wait does not fit: the longest that does.
                assert_eq!(wait, Duration::from_millis(300), "one last poll just in time");
            }
        }
        let tight = Deadline::after(Instant::ZERO, Duration::from_millis(150));
        assert!(
            waits.next(None, &tight, Instant::ZERO).is_err(),
            "not even the floor fits"
        );
        assert!(
            waits
                .next(Some(Duration::from_secs(1)), &deadline, Instant::ZERO)
                .is_err(),
            "the upstream's wait is never shortened to fit"
        );
    }
}
