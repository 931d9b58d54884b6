//! The server's only clock read.
//!
//! Everything else takes the time as an argument, so that the time-dependent rules (outage windows,
//! `Retry-After` rendering) are pure and tested without a clock. Two clocks are read together: tokio's monotonic
//! clock measures the server's age (outage windows are "from t1 to t2 after start"), and the wall clock exists
//! only because an HTTP-date `Retry-After` is a wall-clock timestamp.

use std::time::SystemTime;

/// One reading of both clocks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Now {
    /// Monotonic time (tokio's, so it follows a paused test clock if one is ever used).
    pub(crate) instant: tokio::time::Instant,
    /// Wall time, for HTTP-date `Retry-After` only.
    pub(crate) wall: SystemTime,
}

/// Reads the clocks.
// The chaos server needs wall time for HTTP-date `Retry-After` and monotonic time for its age: this is the one
// place that reads them (clippy bans the readers elsewhere).
#[allow(clippy::disallowed_methods)]
pub(crate) fn now() -> Now {
    Now {
        instant: tokio::time::Instant::now(),
        wall: SystemTime::now(),
    }
}
