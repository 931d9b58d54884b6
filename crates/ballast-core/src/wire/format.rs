//! The two deadline forms Ballast writes on outbound attempts: `ballast-timeout-ms` (and Envoy's
//! `x-envoy-expected-rq-timeout-ms`, same form) and `grpc-timeout`.
//!
//! Both round down, so a receiver never gets more time than the sender has; neither writes `0` for a nonzero
//! duration, which would tell the receiver it has no time at all.

use std::time::Duration;

use super::timeout::{GRPC_MAX_VALUE, GRPC_UNITS};
use crate::time::saturating_nanos;

/// A duration as `ballast-timeout-ms` / `x-envoy-expected-rq-timeout-ms`: whole milliseconds, rounded down.
///
/// Rounding down means the receiver never gets more time than the sender has; but a nonzero duration under a
/// millisecond is written `1`, not `0`, because `0` would tell the receiver it has no time at all. A zero
/// duration is written `0`.
///
/// ```
/// use ballast_core::format_timeout_ms;
/// use std::time::Duration;
///
/// assert_eq!(format_timeout_ms(Duration::from_micros(2_999_999)), "2999");
/// assert_eq!(format_timeout_ms(Duration::from_micros(10)), "1");
/// assert_eq!(format_timeout_ms(Duration::ZERO), "0");
/// ```
pub fn format_timeout_ms(timeout: Duration) -> String {
    let ms = timeout.as_millis();
    if ms == 0 && !timeout.is_zero() {
        return "1".to_owned();
    }
    ms.to_string()
}

/// A duration as `grpc-timeout`: the finest unit (`n`, `u`, `m`, `S`, `M`, `H`) whose value fits the 8 digits
/// gRPC allows, rounded down.
///
/// Rounding down means the receiver never gets more time than the sender has (grpc-go rounds up instead; we
/// prefer the peer to give up first). The finest unit that fits keeps the loss under one unit, and since a
/// coarser unit is only chosen when the finer one would need 9 digits, under 10^-5 of the value. A nonzero
/// duration never becomes `0`: in the finest unit that fits it is at least 1. Durations beyond `u64::MAX`
/// nanoseconds (584 years) are written as 584 years.
///
/// ```
/// use ballast_core::format_grpc_timeout;
/// use std::time::Duration;
///
/// assert_eq!(format_grpc_timeout(Duration::from_millis(2500)), "2500000u");
/// assert_eq!(format_grpc_timeout(Duration::from_secs(300)), "300000m");
/// assert_eq!(format_grpc_timeout(Duration::from_secs(100 * 3600)), "360000S");
/// ```
pub fn format_grpc_timeout(timeout: Duration) -> String {
    let nanos = saturating_nanos(timeout);
    // u64::MAX nanoseconds is about 5.1 million hours, so hours always fit: the fallback is never short.
    let (unit_nanos, unit) = GRPC_UNITS
        .into_iter()
        .find(|(unit_nanos, _)| nanos / unit_nanos <= GRPC_MAX_VALUE)
        .unwrap_or(GRPC_UNITS[GRPC_UNITS.len() - 1]);
    format!("{}{}", nanos / unit_nanos, char::from(unit))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeadlineHeader;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn timeout_ms_rounds_down_but_never_to_zero() {
        assert_eq!(format_timeout_ms(Duration::ZERO), "0");
        assert_eq!(format_timeout_ms(Duration::from_nanos(1)), "1");
        assert_eq!(format_timeout_ms(Duration::from_micros(999)), "1");
        assert_eq!(format_timeout_ms(Duration::from_micros(1999)), "1");
        assert_eq!(format_timeout_ms(Duration::from_secs(30)), "30000");
        assert_eq!(
            format_timeout_ms(Duration::MAX),
            Duration::MAX.as_millis().to_string()
        );
    }

    #[test]
    fn grpc_format_picks_the_finest_unit_that_fits_8_digits() {
        let f = format_grpc_timeout;
        assert_eq!(f(Duration::ZERO), "0n");
        assert_eq!(f(Duration::from_nanos(1)), "1n");
        assert_eq!(f(Duration::from_nanos(99_999_999)), "99999999n");
        assert_eq!(f(Duration::from_nanos(100_000_000)), "100000u");
        assert_eq!(f(Duration::from_nanos(100_000_999)), "100000u");
        assert_eq!(f(Duration::from_micros(99_999_999)), "99999999u");
        assert_eq!(f(Duration::from_micros(100_000_000)), "100000m");
        assert_eq!(f(Duration::from_millis(99_999_999)), "99999999m");
        assert_eq!(f(Duration::from_millis(100_000_000)), "100000S");
        assert_eq!(f(Duration::from_secs(99_999_999)), "99999999S");
        assert_eq!(f(Duration::from_secs(100_000_000)), "1666666M");
        assert_eq!(f(Duration::from_secs(60 * 99_999_999)), "99999999M");
        assert_eq!(f(Duration::from_secs(60 * 100_000_000)), "1666666H");
        assert_eq!(f(Duration::MAX), "5124095H");
    }

    #[test]
    fn formatted_values_read_back_no_larger() {
        for d in [
            Duration::from_nanos(1),
            Duration::from_micros(1500),
            Duration::from_millis(2500),
            Duration::new(29, 999_999_999),
            Duration::from_secs(300),
            Duration::new(100 * 3600, 1),
        ] {
            let grpc = DeadlineHeader::GrpcTimeout
                .parse(&format_grpc_timeout(d))
                .unwrap();
            assert!(
                grpc <= d && d - grpc < Duration::from_secs(1),
                "{d:?} -> {grpc:?}"
            );
            let ms = DeadlineHeader::BallastTimeoutMs
                .parse(&format_timeout_ms(d))
                .unwrap();
            assert!(ms <= d.max(MS) && d.saturating_sub(ms) < MS, "{d:?} -> {ms:?}");
        }
    }

    /// The nanoseconds of the unit `format_grpc_timeout` wrote.
    fn unit_of(formatted: &str) -> u64 {
        let unit = *formatted.as_bytes().last().unwrap();
        GRPC_UNITS.iter().find(|(_, c)| *c == unit).unwrap().0
    }

    proptest! {
        #[test]
        fn grpc_round_trip_never_gives_more_time(nanos in 0_u64..=100 * 3_600_000_000_000) {
            let d = Duration::from_nanos(nanos);
            let formatted = format_grpc_timeout(d);
            let back = DeadlineHeader::GrpcTimeout.parse(&formatted).unwrap();
            prop_assert!(back <= d, "{d:?} -> {formatted} -> {back:?}");
            let lost = (d - back).as_nanos();
            prop_assert!(lost < u128::from(unit_of(&formatted)), "{d:?} -> {formatted}");
            // A coarser unit is chosen only when the value in it is at least 10^5: relative loss under 10^-5.
            prop_assert!(lost * 100_000 <= u128::from(nanos), "{d:?} -> {formatted}");
            prop_assert!(nanos == 0 || !back.is_zero(), "{d:?} -> {formatted}");
        }

        #[test]
        fn ms_round_trip_never_gives_more_than_a_nonzero_floor(nanos in 0_u64..=100 * 3_600_000_000_000) {
            let d = Duration::from_nanos(nanos);
            let back = DeadlineHeader::BallastTimeoutMs.parse(&format_timeout_ms(d)).unwrap();
            prop_assert!(back <= d.max(MS) && d.saturating_sub(back) < MS);
            prop_assert!(nanos == 0 || !back.is_zero());
        }
    }
}
