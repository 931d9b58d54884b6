//! How long to wait between two polls of an operation the upstream says is still in progress (409).
//!
//! Why not just the upstream's `Retry-After`: it is honoured — never polled earlier than asked — but `0`, a past
//! HTTP-date or no value at all would make the wait a hot loop (the review's probe: 10,001 requests in 0 ns).
//! So every wait is at least [`POLL_FLOOR`] and grows with decorrelated jitter (ballast-core's [`Backoff`]:
//! `min(cap, U(floor, 3 x previous))`, never under the floor) up to [`POLL_CAP`], so a long operation is asked
//! less and less often and callers polling together drift apart. A wait is only taken when the deadline can hold
//! it and a poll after it.

use std::time::Duration;

use ballast_core::{Backoff, Deadline, DeadlineExceeded, DefaultRng, Instant, default_rng};

/// The shortest wait between two polls.
pub(super) const POLL_FLOOR: Duration = Duration::from_millis(100);
/// The longest wait the client picks by itself (an upstream's longer `Retry-After` is still honoured).
pub(super) const POLL_CAP: Duration = Duration::from_secs(2);

/// The waits between the polls of one operation.
#[derive(Debug)]
pub(super) struct PollWaits {
    backoff: Backoff,
    previous: Duration,
    rng: DefaultRng,
}

impl PollWaits {
    /// Waits drawn from a generator seeded by the operating system.
    pub(super) fn new() -> Self {
        Self::with_rng(default_rng(None))
    }

    fn with_rng(rng: DefaultRng) -> Self {
        PollWaits {
            // Constants checked by the tests: a non-zero floor under the cap.
            backoff: Backoff::decorrelated(POLL_FLOOR, POLL_CAP).unwrap_or_default(),
            previous: Duration::ZERO,
            rng,
        }
    }

    /// The wait before the next poll when the upstream asked for `asked`: the growing jittered wait, or what the
    /// upstream asked when that is longer. When the deadline cannot hold it and a poll after it, the shortest
    /// acceptable wait (`asked`, at least [`POLL_FLOOR`]) if the deadline can hold that; else the deadline error.
    pub(super) fn next(
        &mut self,
        asked: Option<Duration>,
        deadline: &Deadline,
        now: Instant,
    ) -> Result<Duration, DeadlineExceeded> {
        let own = self.backoff.delay(0, self.previous, &mut self.rng);
        self.previous = own;
        let asked = asked.unwrap_or_default();
        let wait = own.max(asked);
        match deadline.check_wait(wait, now) {
            Ok(()) => Ok(wait),
            Err(exceeded) => {
                let shortest = asked.max(POLL_FLOOR);
                if shortest < wait {
                    deadline.check_wait(shortest, now).map(|()| shortest)
                } else {
                    Err(exceeded)
                }
            }
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
        assert!(Backoff::decorrelated(POLL_FLOOR, POLL_CAP).is_ok());
    }

    #[test]
    fn waits_never_drop_under_the_floor_and_grow_to_the_cap() {
        let mut waits = PollWaits::with_rng(default_rng(Some(3)));
        let drawn: Vec<Duration> = (0..30)
            .map(|_| waits.next(Some(Duration::ZERO), &far(), Instant::ZERO).unwrap())
            .collect();
        assert!(
            drawn.iter().all(|w| *w >= POLL_FLOOR && *w <= POLL_CAP),
            "{drawn:?}"
        );
        assert!(
            drawn[0] <= 3 * POLL_FLOOR,
            "the first wait is U(floor, 3 x floor): {drawn:?}"
        );
        let late: Duration = drawn[20..].iter().sum();
        assert!(
            late > Duration::from_secs(5),
            "ten late waits near the cap: {drawn:?}"
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
        for _ in 0..20 {
            let wait = waits.next(None, &deadline, Instant::ZERO).unwrap();
            assert!(
                wait >= POLL_FLOOR && wait <= Duration::from_millis(300),
                "{wait:?}"
            );
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
