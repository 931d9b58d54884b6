//! What the Redis and PostgreSQL [`SharedState`](crate::SharedState)s send their server and read back, written
//! once so that the two backends cannot drift apart: durations as whole milliseconds, a limit's numbers as finite
//! microseconds, and how long an idle limit's state is kept.
//!
//! Why finite numbers: a script or statement does the GCRA arithmetic in doubles; a NaN or an infinity from a
//! caller's bug would be written as the limit's TAT and refuse it forever (or write an expiry the server
//! rejects). Every number is made finite here, before it leaves, and stays far below 2^53 µs in practice.

use std::time::Duration;

use crate::clock::millis;
use crate::{Charge, Reservation};

/// How long a limit's state outlives its TAT plus tolerance. A limit whose TAT is in the past is idle — any TAT
/// at or before now decides the next reservation as an absent one (0) does — so its state could go at once;
/// it is kept this much longer for [`SharedState::correct`](crate::SharedState::correct), which arrives when
/// the call ends (an LLM call can run minutes) and needs the TAT the reservation left. A correction that comes
/// later than this finds the limit gone and changes nothing: the limit was idle at least this long since, and
/// the debt is forgiven.
pub(crate) const LIMIT_KEEP: Duration = Duration::from_secs(600);

/// The largest duration sent to a server, in ms (about 31,700 years): Redis's Lua counts in doubles and
/// PostgreSQL's timestamps end in the year 294276; a clock plus this stays within both.
const MAX_MS: i64 = 1_000_000_000_000_000;

/// The largest magnitude of a limit's number (µs, or units), so that products stay finite.
const MAX_NUMBER: f64 = 1e18;

/// A ttl as whole ms for the server: at least 1 (a ttl of zero would drop the state it was meant to keep, in
/// the same step), at most [`MAX_MS`].
pub(crate) fn ttl_ms(ttl: Duration) -> i64 {
    millis(ttl).clamp(1, MAX_MS)
}

/// A duration from now as whole ms for the server, at most [`MAX_MS`].
pub(crate) fn offset_ms(offset: Duration) -> i64 {
    millis(offset).min(MAX_MS)
}

/// `number` made finite (NaN: 0; infinities: the largest magnitude allowed).
pub(crate) fn finite(number: f64) -> f64 {
    if number.is_nan() {
        0.0
    } else {
        number.clamp(-MAX_NUMBER, MAX_NUMBER)
    }
}

/// A duration in µs, as a store compares it with its TATs.
pub(crate) fn micros(duration: Duration) -> f64 {
    finite(duration.as_secs_f64() * 1e6)
}

/// A charge's limit as the server needs it: `(interval µs, tolerance µs, cost)`, each finite.
pub(crate) fn charge_parts(charge: &Charge) -> (f64, f64, f64) {
    (
        finite(charge.rate.interval_us()),
        finite(charge.rate.tolerance_us()),
        finite(charge.cost),
    )
}

/// The answer of a reservation from the server's decision and its wait in µs (saturating; negative: 0).
pub(crate) fn reservation(granted: bool, wait_us: f64) -> Reservation {
    let wait = Duration::try_from_secs_f64(wait_us.max(0.0) / 1e6).unwrap_or(Duration::MAX);
    if granted {
        Reservation::Granted(wait)
    } else {
        Reservation::Refused(wait)
    }
}

/// `keys` sorted by their bytes and without repeats: the order in which a store takes several limits' locks,
/// so that two reservations of the same limits never wait on each other in a cycle.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn lock_order(charges: &[Charge]) -> Vec<&str> {
    let mut keys: Vec<&str> = charges.iter().map(|c| c.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_leave_finite() {
        assert_eq!(finite(f64::NAN), 0.0);
        assert_eq!(finite(f64::INFINITY), MAX_NUMBER);
        assert_eq!(finite(f64::NEG_INFINITY), -MAX_NUMBER);
        assert_eq!(finite(1.5), 1.5);
        assert_eq!(micros(Duration::MAX), MAX_NUMBER);
    }

    #[test]
    fn ttls_keep_the_state_at_least_a_millisecond() {
        assert_eq!(ttl_ms(Duration::ZERO), 1);
        assert_eq!(ttl_ms(Duration::from_millis(1500)), 1500);
        assert_eq!(ttl_ms(Duration::MAX), MAX_MS);
    }

    #[test]
    fn waits_saturate_instead_of_panicking() {
        assert_eq!(reservation(true, -5.0), Reservation::Granted(Duration::ZERO));
        assert_eq!(
            reservation(false, 1_500_000.0),
            Reservation::Refused(Duration::from_millis(1500))
        );
        assert_eq!(reservation(false, 1e300), Reservation::Refused(Duration::MAX));
    }
}
