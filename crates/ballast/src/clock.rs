//! The one clock: the only place in Ballast that reads the time.
//!
//! Policy never reads a clock (STYLE.md, convention 1); it takes `now`. This module supplies that `now` from
//! tokio's clock, so `#[tokio::test(start_paused = true)]` and `tokio::time::advance` control every deadline,
//! backoff and breaker in a test, and it is the one place that turns wall-clock values (an HTTP-date
//! `Retry-After`) into durations before they reach the core.
//!
//! A [`ballast_core::Instant`] is nanoseconds since an origin the caller picks. Here the origin is a point
//! [`BIAS`](self) nanoseconds (about 146 years) before the first time this module was asked, so instants from
//! any tokio runtime in the process — a paused test runtime may start slightly before that first call — map to
//! positive values and never saturate.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use ballast_core::{Instant, WireError, parse_retry_after};

/// Offset of the process's first reading on the core timeline: room on both sides.
const BIAS: u64 = 1 << 62;

/// The real instant of the first reading (not tokio's, which may be paused or advanced).
fn origin() -> std::time::Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    // The one allowed read of the real monotonic clock: it anchors the timeline, it does not measure anything.
    #[allow(clippy::disallowed_methods)]
    *ORIGIN.get_or_init(std::time::Instant::now)
}

/// Now, on the core's timeline, from tokio's clock (paused and advanced in tests).
pub fn now() -> Instant {
    // The one read of tokio's clock (clippy bans it everywhere else): every `now` in Ballast comes from here.
    #[allow(clippy::disallowed_methods)]
    let instant = tokio::time::Instant::now();
    from_tokio(instant)
}

/// A tokio instant on the core's timeline.
pub fn from_tokio(instant: tokio::time::Instant) -> Instant {
    let std = instant.into_std();
    let origin = origin();
    let nanos = if std >= origin {
        BIAS.saturating_add(saturating_nanos(std - origin))
    } else {
        BIAS.saturating_sub(saturating_nanos(origin - std))
    };
    Instant::from_nanos(nanos)
}

/// A core instant as a tokio instant (for `sleep_until` and `timeout_at`).
pub fn to_tokio(instant: Instant) -> tokio::time::Instant {
    let origin = origin();
    let nanos = instant.as_nanos();
    let std = if nanos >= BIAS {
        origin.checked_add(Duration::from_nanos(nanos - BIAS))
    } else {
        origin.checked_sub(Duration::from_nanos(BIAS - nanos))
    };
    // Out of the platform's range only for instants centuries away: far future stays far future.
    let std = std.unwrap_or_else(|| origin + Duration::from_secs(100 * 365 * 24 * 3600));
    tokio::time::Instant::from_std(std)
}

/// Sleeps until `instant` on the core's timeline.
pub async fn sleep_until(instant: Instant) {
    tokio::time::sleep_until(to_tokio(instant)).await;
}

/// The wait a `Retry-After` value asks for: delta-seconds as they are, an HTTP-date as the time from the wall
/// clock's now until then (zero for a date in the past). Malformed values, a date that does not exist included,
/// are an error naming the header and the value.
pub fn retry_after(value: &str) -> Result<Duration, WireError> {
    // The one wall-clock read: an HTTP-date is wall time by definition.
    #[allow(clippy::disallowed_methods)]
    let wall_now = SystemTime::now();
    Ok(parse_retry_after(value)?.wait_from(wall_now))
}

fn saturating_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn paused_time_moves_the_core_clock() {
        let before = now();
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(now().saturating_duration_since(before), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn instants_round_trip_through_tokio() {
        let t = now() + Duration::from_millis(1500);
        assert_eq!(from_tokio(to_tokio(t)), t);
        let earlier = Instant::from_nanos(BIAS - 5_000);
        assert_eq!(from_tokio(to_tokio(earlier)), earlier);
    }

    #[tokio::test(start_paused = true)]
    async fn sleep_until_wakes_at_the_instant() {
        let start = now();
        sleep_until(start + Duration::from_secs(2)).await;
        assert_eq!(now().saturating_duration_since(start), Duration::from_secs(2));
    }

    #[test]
    fn retry_after_reads_seconds_and_dates() {
        assert_eq!(retry_after("2"), Ok(Duration::from_secs(2)));
        assert_eq!(retry_after("Sun, 06 Nov 1994 08:49:37 GMT"), Ok(Duration::ZERO));
        #[allow(clippy::disallowed_methods)]
        let in_a_minute = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(61));
        let wait = retry_after(&in_a_minute).unwrap();
        assert!(
            wait > Duration::from_secs(55) && wait <= Duration::from_secs(61),
            "{wait:?}"
        );
        assert!(retry_after("soon").is_err());
    }
}
