//! One absolute deadline per agent request, handed down to every call.
//!
//! Why: per-call timeouts add up (reference/003: 3 steps x 30 s = 90 s, 270 s with three tries each). A deadline
//! is set once where the request enters, as an absolute monotonic instant; every call, attempt and sleep below
//! it gets only what remains. A child may shorten it, never extend it: the earliest deadline wins.
//!
//! Two margins make "only what can finish" concrete:
//! - `reserve` is kept back from every attempt so the caller can still answer before its own deadline;
//! - `min_attempt` is the least time worth starting an attempt with. When what remains after the reserve is
//!   under it, no attempt starts and no backoff sleep or `Retry-After` wait begins; the call fails at once with
//!   a [`DeadlineExceeded`] that says how much time was left and what was needed. With `min_attempt = 0` an
//!   attempt still needs *some* time: nothing starts with zero usable time left.

use std::fmt;
use std::time::Duration;

use crate::Instant;

/// Default time kept back from every attempt to answer the caller (DESIGN.md: 50 ms).
pub const DEFAULT_RESERVE: Duration = Duration::from_millis(50);
/// Default least time an attempt may start with (DESIGN.md: 50 ms).
pub const DEFAULT_MIN_ATTEMPT: Duration = Duration::from_millis(50);

/// An absolute deadline with the margins that decide what may still start before it.
///
/// ```
/// use ballast_core::{Deadline, Instant};
/// use std::time::Duration;
///
/// let start = Instant::ZERO;
/// let deadline = Deadline::after(start, Duration::from_secs(30));
/// // The second step starts 3 s in: its attempt gets what remains minus the 50 ms reserve, not a fresh 30 s.
/// let now = start + Duration::from_secs(3);
/// let timeout = deadline.attempt_timeout(Duration::from_secs(30), now).unwrap();
/// assert_eq!(timeout, Duration::from_millis(26_950));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Deadline {
    at: Instant,
    reserve: Duration,
    min_attempt: Duration,
}

impl Deadline {
    /// A deadline at `at`, with the default reserve and minimum attempt.
    pub fn at(at: Instant) -> Self {
        Deadline {
            at,
            reserve: DEFAULT_RESERVE,
            min_attempt: DEFAULT_MIN_ATTEMPT,
        }
    }

    /// A deadline `timeout` after `now`, with the default reserve and minimum attempt.
    pub fn after(now: Instant, timeout: Duration) -> Self {
        Deadline::at(now + timeout)
    }

    /// The same deadline keeping `reserve` back from every attempt.
    pub fn with_reserve(mut self, reserve: Duration) -> Self {
        self.reserve = reserve;
        self
    }

    /// The same deadline refusing attempts shorter than `min_attempt`.
    pub fn with_min_attempt(mut self, min_attempt: Duration) -> Self {
        self.min_attempt = min_attempt;
        self
    }

    /// The instant the deadline falls at.
    pub fn instant(&self) -> Instant {
        self.at
    }

    /// The time kept back from every attempt.
    pub fn reserve(&self) -> Duration {
        self.reserve
    }

    /// The least time an attempt may start with.
    pub fn min_attempt(&self) -> Duration {
        self.min_attempt
    }

    /// Time left until the deadline; zero once it has passed.
    pub fn remaining(&self, now: Instant) -> Duration {
        self.at.saturating_duration_since(now)
    }

    /// Whether the deadline has passed.
    pub fn is_expired(&self, now: Instant) -> bool {
        now >= self.at
    }

    /// A child deadline at most `timeout` after `now`: never later than this one (the earliest wins).
    /// The child keeps this deadline's margins.
    pub fn child(&self, now: Instant, timeout: Duration) -> Deadline {
        self.shorten_to(now + timeout)
    }

    /// This deadline moved to `at` if that is earlier; a deadline is never extended.
    pub fn shorten_to(&self, at: Instant) -> Deadline {
        Deadline {
            at: self.at.min(at),
            ..*self
        }
    }

    /// The earlier of two deadlines, keeping the larger of each margin (the stricter reading of both).
    pub fn earliest(&self, other: &Deadline) -> Deadline {
        Deadline {
            at: self.at.min(other.at),
            reserve: self.reserve.max(other.reserve),
            min_attempt: self.min_attempt.max(other.min_attempt),
        }
    }

    /// What an attempt may use: `remaining - reserve`, or zero.
    pub fn usable(&self, now: Instant) -> Duration {
        self.remaining(now).saturating_sub(self.reserve)
    }

    /// The least usable time an attempt starts with: `min_attempt`, and never zero (an attempt with nothing left
    /// could not even be sent).
    pub(crate) fn least_attempt(&self) -> Duration {
        least_attempt(self.min_attempt)
    }

    /// The timeout for an attempt starting at `now`: `min(per_try, remaining - reserve)`.
    ///
    /// Refuses when `remaining - reserve` is under `min_attempt`, or zero (with `min_attempt = 0`): such an
    /// attempt could not finish.
    pub fn attempt_timeout(&self, per_try: Duration, now: Instant) -> Result<Duration, DeadlineExceeded> {
        let usable = self.usable(now);
        if usable < self.least_attempt() {
            return Err(self.exceeded(Refused::Attempt, now));
        }
        Ok(per_try.min(usable))
    }

    /// Whether a wait of `wait` starting at `now` still leaves `min_attempt` (after the reserve, and never zero)
    /// for the next attempt. Backoff sleeps and `Retry-After` waits check this before they start.
    pub fn check_wait(&self, wait: Duration, now: Instant) -> Result<(), DeadlineExceeded> {
        let needed = wait
            .saturating_add(self.reserve)
            .saturating_add(self.least_attempt());
        if self.remaining(now) < needed {
            return Err(self.exceeded(Refused::Wait(wait), now));
        }
        Ok(())
    }

    fn exceeded(&self, refused: Refused, now: Instant) -> DeadlineExceeded {
        DeadlineExceeded {
            remaining: self.remaining(now),
            reserve: self.reserve,
            min_attempt: self.min_attempt,
            refused,
        }
    }
}

/// What a deadline refused to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Refused {
    /// An attempt.
    Attempt,
    /// A wait of this length before the next attempt (a backoff sleep or a `Retry-After`).
    Wait(Duration),
}

/// The deadline cannot hold what was asked: how much time was left and what it would have needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub struct DeadlineExceeded {
    /// Time left before the deadline when the request was refused.
    pub remaining: Duration,
    /// The reserve the deadline keeps back.
    pub reserve: Duration,
    /// The least time an attempt may start with.
    pub min_attempt: Duration,
    /// What was refused.
    pub refused: Refused,
}

/// `min_attempt`, or the least time that is not nothing when it is zero.
fn least_attempt(min_attempt: Duration) -> Duration {
    min_attempt.max(Duration::from_nanos(1))
}

impl DeadlineExceeded {
    /// The time that would have been needed: the wait (if any), the minimum attempt (never zero) and the reserve.
    pub fn needed(&self) -> Duration {
        let wait = match self.refused {
            Refused::Attempt => Duration::ZERO,
            Refused::Wait(wait) => wait,
        };
        wait.saturating_add(least_attempt(self.min_attempt))
            .saturating_add(self.reserve)
    }

    /// Whether an attempt would still have started at once, with no wait: the time left holds the reserve and
    /// the minimum attempt (never zero). A refused wait with this true leaves a fallback time to run.
    pub fn attempt_fits(&self) -> bool {
        self.remaining >= self.reserve.saturating_add(least_attempt(self.min_attempt))
    }
}

impl fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let left = self.remaining.as_millis();
        let (min, reserve) = (self.min_attempt.as_millis(), self.reserve.as_millis());
        match self.refused {
            Refused::Attempt => write!(
                f,
                "deadline exceeded: {left} ms left, an attempt needs {} ms ({min} ms minimum attempt + {reserve} ms \
                 reserve); give the request a longer deadline or fewer steps",
                self.needed().as_millis()
            ),
            Refused::Wait(wait) => write!(
                f,
                "deadline exceeded: {left} ms left, waiting {} ms before the next attempt would need {} ms \
                 ({min} ms minimum attempt + {reserve} ms reserve after the wait); give the request a longer deadline",
                wait.as_millis(),
                self.needed().as_millis()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn at(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    #[test]
    fn remaining_counts_down_and_stops_at_zero() {
        let d = Deadline::after(at(0), 1000 * MS);
        assert_eq!(d.remaining(at(0)), 1000 * MS);
        assert_eq!(d.remaining(at(400)), 600 * MS);
        assert_eq!(d.remaining(at(5000)), Duration::ZERO);
        assert!(!d.is_expired(at(999)));
        assert!(d.is_expired(at(1000)));
    }

    #[test]
    fn child_deadlines_only_shorten() {
        let parent = Deadline::after(at(0), 1000 * MS).with_reserve(10 * MS);
        assert_eq!(parent.child(at(0), 200 * MS).instant(), at(200));
        assert_eq!(parent.child(at(0), 5000 * MS).instant(), at(1000));
        assert_eq!(parent.child(at(900), 500 * MS).instant(), at(1000));
        assert_eq!(parent.child(at(0), 200 * MS).reserve(), 10 * MS);
        assert_eq!(parent.shorten_to(at(2000)).instant(), at(1000));
    }

    #[test]
    fn earliest_takes_the_earlier_instant_and_stricter_margins() {
        let a = Deadline::at(at(100)).with_reserve(5 * MS);
        let b = Deadline::at(at(50)).with_min_attempt(80 * MS);
        let e = a.earliest(&b);
        assert_eq!(e.instant(), at(50));
        assert_eq!(e.reserve(), 50 * MS);
        assert_eq!(e.min_attempt(), 80 * MS);
    }

    #[test]
    fn attempt_timeout_is_the_smaller_of_per_try_and_what_remains_minus_reserve() {
        let d = Deadline::after(at(0), 30_000 * MS);
        assert_eq!(d.attempt_timeout(1_000 * MS, at(0)), Ok(1_000 * MS));
        assert_eq!(d.attempt_timeout(30_000 * MS, at(3_000)), Ok(26_950 * MS));
    }

    #[test]
    fn attempt_refused_when_what_remains_cannot_hold_min_attempt() {
        let d = Deadline::after(at(0), 1000 * MS);
        // 100 ms left: 50 reserve + 50 min attempt fits exactly.
        assert_eq!(d.attempt_timeout(1000 * MS, at(900)), Ok(50 * MS));
        let err = d.attempt_timeout(1000 * MS, at(901)).unwrap_err();
        assert_eq!(err.remaining, 99 * MS);
        assert_eq!(err.needed(), 100 * MS);
        assert_eq!(err.refused, Refused::Attempt);
        let msg = err.to_string();
        assert!(
            msg.contains("99 ms left") && msg.contains("needs 100 ms"),
            "{msg}"
        );
    }

    /// Review finding 4: with `min_attempt = 0` and no reserve, an attempt was granted a zero timeout after the
    /// deadline, and a wait could use up all the time left.
    #[test]
    fn nothing_starts_with_zero_usable_time_even_with_no_minimum() {
        let d = Deadline::after(at(0), 100 * MS)
            .with_reserve(Duration::ZERO)
            .with_min_attempt(Duration::ZERO);
        assert_eq!(d.attempt_timeout(1000 * MS, at(99)), Ok(MS));
        for now in [at(100), at(150)] {
            let err = d.attempt_timeout(1000 * MS, now).unwrap_err();
            assert_eq!((err.refused, err.remaining), (Refused::Attempt, Duration::ZERO));
            assert!(!err.attempt_fits());
        }
        assert_eq!(d.check_wait(99 * MS, at(0)), Ok(()));
        let err = d.check_wait(100 * MS, at(0)).unwrap_err();
        assert_eq!(err.needed(), 100 * MS + Duration::from_nanos(1));
        assert!(err.attempt_fits(), "an attempt without the wait still fits");
        // With a reserve, the usable time after it must not be zero either.
        let reserved = d.with_reserve(10 * MS);
        assert!(reserved.attempt_timeout(1000 * MS, at(90)).is_err());
        assert!(reserved.check_wait(90 * MS, at(0)).is_err());
        assert_eq!(reserved.check_wait(89 * MS, at(0)), Ok(()));
    }

    proptest::proptest! {
        /// Whatever the margins (zero included): a granted attempt has a non-zero timeout within what the
        /// deadline leaves after the reserve and at least `min_attempt` usable, and a granted wait leaves an
        /// attempt that will be granted.
        #[test]
        fn granted_attempts_and_waits_leave_usable_time(
            // Small counts of a unit, so the edges (zero margins, exactly nothing left) come up often.
            unit in proptest::sample::select(vec![1u64, 1_000_000]),
            timeout in 0u64..40,
            reserve in 0u64..5,
            min_attempt in 0u64..5,
            now in 0u64..45,
            wait in 0u64..45,
            per_try in 1u64..50,
        ) {
            let ns = |n: u64| Duration::from_nanos(n * unit);
            let d = Deadline::after(Instant::ZERO, ns(timeout))
                .with_reserve(ns(reserve))
                .with_min_attempt(ns(min_attempt));
            let now = Instant::ZERO + ns(now);
            let usable = d.usable(now);
            match d.attempt_timeout(ns(per_try), now) {
                Ok(t) => {
                    proptest::prop_assert!(!t.is_zero() && t <= usable && t <= ns(per_try));
                    proptest::prop_assert!(usable >= ns(min_attempt));
                    proptest::prop_assert!(now + t + ns(reserve) <= d.instant());
                }
                Err(e) => proptest::prop_assert!(usable.is_zero() || usable < ns(min_attempt), "{}", e),
            }
            if d.check_wait(ns(wait), now).is_ok() {
                let after = now + ns(wait);
                proptest::prop_assert!(!d.usable(after).is_zero());
                proptest::prop_assert!(d.attempt_timeout(ns(per_try), after).is_ok());
            }
        }
    }

    #[test]
    fn waits_must_leave_room_for_an_attempt() {
        let d = Deadline::after(at(0), 1000 * MS);
        assert_eq!(d.check_wait(900 * MS, at(0)), Ok(()));
        let err = d.check_wait(901 * MS, at(0)).unwrap_err();
        assert_eq!(err.refused, Refused::Wait(901 * MS));
        assert_eq!(err.needed(), 1001 * MS);
        assert!(err.to_string().contains("waiting 901 ms"), "{err}");
    }
}
