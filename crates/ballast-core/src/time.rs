//! A point on a monotonic timeline, owned by the caller.
//!
//! Policy never reads a clock (STYLE.md, convention 1): every function that needs the time takes `now: Instant`.
//! This `Instant` is a plain count of nanoseconds since an origin the caller chooses — the `ballast` crate's
//! clock module picks the moment the process started; a test picks `Instant::ZERO`. That keeps the core
//! deterministic under test, lets thread-safe policy store a time in one `AtomicU64`, and means a wall-clock
//! value (an HTTP-date `Retry-After`) can never reach the core by accident: the shell turns it into a duration.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A monotonic instant: nanoseconds since an origin chosen by the caller.
///
/// Arithmetic saturates: adding a huge duration gives `Instant::MAX`, subtracting past the origin gives
/// `Instant::ZERO`, and the difference of two instants is never negative.
///
/// ```
/// use ballast_core::Instant;
/// use std::time::Duration;
///
/// let start = Instant::ZERO;
/// let later = start + Duration::from_millis(250);
/// assert_eq!(later.saturating_duration_since(start), Duration::from_millis(250));
/// assert_eq!(start.saturating_duration_since(later), Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    /// The origin of the timeline.
    pub const ZERO: Instant = Instant(0);
    /// The latest representable instant (about 584 years after the origin).
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }

    /// The instant `millis` milliseconds after the origin (saturating).
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis.saturating_mul(1_000_000))
    }

    /// The instant `elapsed` after the origin (saturating).
    pub fn from_elapsed(elapsed: Duration) -> Self {
        Instant::ZERO + elapsed
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time since the origin.
    pub const fn elapsed_since_origin(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero when `earlier` is later than `self`.
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, or `None` when it would pass `Instant::MAX`.
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        let nanos = u64::try_from(d.as_nanos()).ok()?;
        self.0.checked_add(nanos).map(Instant)
    }
}

/// A duration in whole nanoseconds, saturating at `u64::MAX` (about 584 years): the one conversion every module
/// that keeps time in a `u64` (instants, atomics, draws) uses.
pub(crate) fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_add(saturating_nanos(rhs)))
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant(self.0.saturating_sub(saturating_nanos(rhs)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_at_both_ends() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::from_millis(5).checked_add(Duration::MAX), None);
        assert_eq!(Instant::from_millis(u64::MAX), Instant::MAX);
    }

    #[test]
    fn saturating_nanos_stops_at_u64_max() {
        assert_eq!(saturating_nanos(Duration::from_millis(3)), 3_000_000);
        assert_eq!(saturating_nanos(Duration::from_nanos(u64::MAX)), u64::MAX);
        assert_eq!(saturating_nanos(Duration::MAX), u64::MAX);
    }

    #[test]
    fn millis_and_nanos_agree() {
        assert_eq!(Instant::from_millis(3), Instant::from_nanos(3_000_000));
        assert_eq!(
            Instant::from_elapsed(Duration::from_millis(3)),
            Instant::from_millis(3)
        );
        assert_eq!(
            Instant::from_millis(3).elapsed_since_origin(),
            Duration::from_millis(3)
        );
    }
}
