//! The store crate's one reader of time (clippy bans it everywhere else; see clippy.toml).
//!
//! A store counts leases and retention on its own clock so that processes with skewed clocks agree: PostgreSQL
//! and Redis read their server's clock inside the statement or script; the embedded SQLite store reads this
//! process's wall clock here (one process owns the file, so it is the store's clock).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch on this machine's wall clock (0 before 1970, saturating far after).
pub(crate) fn unix_millis() -> i64 {
    #[allow(clippy::disallowed_methods)]
    let now = SystemTime::now();
    now.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A monotonic instant `after` from now, for bounding waits in the conformance suite.
#[cfg(any(test, feature = "conformance"))]
pub(crate) fn monotonic_after(after: Duration) -> std::time::Instant {
    #[allow(clippy::disallowed_methods)]
    let now = std::time::Instant::now();
    now + after
}

/// A monotonic instant now, for measuring how long a conformance case ran.
#[cfg(any(test, feature = "conformance"))]
pub(crate) fn monotonic_now() -> std::time::Instant {
    #[allow(clippy::disallowed_methods)]
    let now = std::time::Instant::now();
    now
}

/// Whether `instant` has passed.
#[cfg(any(test, feature = "conformance"))]
pub(crate) fn passed(instant: std::time::Instant) -> bool {
    #[allow(clippy::disallowed_methods)]
    let now = std::time::Instant::now();
    now >= instant
}

/// `duration` as whole milliseconds, saturating (leases and retentions are far below the limit).
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A non-negative millisecond count as a duration (negative: zero).
pub(crate) fn from_millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}
