//! The five deadline headers: what each one's value looks like, read into a [`Duration`].

use std::fmt;
use std::time::Duration;

use super::number::{Round, parse_decimal, parse_whole, trim_ows};
use super::{
    BALLAST_TIMEOUT_MS, ENVOY_EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT, Malformation, STAINLESS_READ_TIMEOUT,
    STAINLESS_TIMEOUT, WireError,
};

/// The largest value a `grpc-timeout` may carry: 8 digits (gRPC over HTTP/2, "Timeout").
pub(super) const GRPC_MAX_VALUE: u64 = 99_999_999;
/// gRPC's units, finest first, in nanoseconds.
pub(super) const GRPC_UNITS: [(u64, u8); 6] = [
    (1, b'n'),
    (1_000, b'u'),
    (1_000_000, b'm'),
    (1_000_000_000, b'S'),
    (60_000_000_000, b'M'),
    (3_600_000_000_000, b'H'),
];

/// A header that carries a deadline, as a duration from when the request was received.
///
/// The order of the variants is the tie-break of [`inbound_timeout`](crate::inbound_timeout): when two headers
/// give the same smallest value, the earlier variant is reported as the source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DeadlineHeader {
    /// `ballast-timeout-ms`: a whole number of milliseconds (Ballast to Ballast, or any client).
    BallastTimeoutMs,
    /// `grpc-timeout`: 1 to 8 digits then one unit, `H` `M` `S` `m` `u` `n` (gRPC over HTTP/2).
    GrpcTimeout,
    /// `x-envoy-expected-rq-timeout-ms`: a whole number of milliseconds, set by Envoy for its upstream.
    EnvoyExpectedRqTimeoutMs,
    /// `x-stainless-timeout`: the Stainless SDKs' timeout of one HTTP request — whole seconds, truncated, from
    /// the Node SDKs (`0` means "under a second" and is read as 1 s), or decimal seconds (`15.0`) from Anthropic's
    /// Python SDK, which sends `str(timeout)`.
    StainlessTimeout,
    /// `x-stainless-read-timeout`: decimal seconds (`600.0`, `0.25`, `1e-05`) from the OpenAI Python SDK.
    StainlessReadTimeout,
}

impl DeadlineHeader {
    /// Every deadline header, in tie-break order.
    pub const ALL: [DeadlineHeader; 5] = [
        DeadlineHeader::BallastTimeoutMs,
        DeadlineHeader::GrpcTimeout,
        DeadlineHeader::EnvoyExpectedRqTimeoutMs,
        DeadlineHeader::StainlessTimeout,
        DeadlineHeader::StainlessReadTimeout,
    ];

    /// The header's name, lowercase.
    pub const fn name(self) -> &'static str {
        match self {
            DeadlineHeader::BallastTimeoutMs => BALLAST_TIMEOUT_MS,
            DeadlineHeader::GrpcTimeout => GRPC_TIMEOUT,
            DeadlineHeader::EnvoyExpectedRqTimeoutMs => ENVOY_EXPECTED_RQ_TIMEOUT_MS,
            DeadlineHeader::StainlessTimeout => STAINLESS_TIMEOUT,
            DeadlineHeader::StainlessReadTimeout => STAINLESS_READ_TIMEOUT,
        }
    }

    /// The deadline header called `name`, matched case-insensitively (header names are, RFC 9110 §5.1).
    pub fn from_name(name: &str) -> Option<DeadlineHeader> {
        // The five names have five different lengths: one comparison per header name, on the hot path of every
        // inbound request.
        let candidate = match name.len() {
            18 => DeadlineHeader::BallastTimeoutMs,
            12 => DeadlineHeader::GrpcTimeout,
            30 => DeadlineHeader::EnvoyExpectedRqTimeoutMs,
            19 => DeadlineHeader::StainlessTimeout,
            24 => DeadlineHeader::StainlessReadTimeout,
            _ => return None,
        };
        name.eq_ignore_ascii_case(candidate.name()).then_some(candidate)
    }

    /// The duration a value of this header carries.
    ///
    /// Optional whitespace (spaces, tabs) around the value is ignored; anything else that is not the header's
    /// form is a [`WireError::Malformed`] naming the header and the value. A value of the header's form too large
    /// for a [`Duration`] (`ballast-timeout-ms: 99999999999999999999`) is [`Duration::MAX`]: a long deadline,
    /// which the caller's cap then shortens, not a malformed one. Decimal seconds are rounded down to
    /// the nanosecond: reading a deadline never lengthens it.
    ///
    /// ```
    /// use ballast_core::DeadlineHeader;
    /// use std::time::Duration;
    ///
    /// assert_eq!(DeadlineHeader::GrpcTimeout.parse("2500m"), Ok(Duration::from_millis(2500)));
    /// assert_eq!(DeadlineHeader::StainlessTimeout.parse("0"), Ok(Duration::from_secs(1)));
    /// assert_eq!(DeadlineHeader::StainlessTimeout.parse("15.0"), Ok(Duration::from_secs(15)));
    /// assert_eq!(DeadlineHeader::StainlessReadTimeout.parse(" 0.25 "), Ok(Duration::from_millis(250)));
    /// assert!(DeadlineHeader::BallastTimeoutMs.parse("1.5").is_err());
    /// ```
    pub fn parse(self, value: &str) -> Result<Duration, WireError> {
        let v = trim_ows(value);
        let parsed = match self {
            DeadlineHeader::BallastTimeoutMs | DeadlineHeader::EnvoyExpectedRqTimeoutMs => {
                parse_whole(v).map(Duration::from_millis)
            }
            DeadlineHeader::GrpcTimeout => parse_grpc(v),
            // The Node SDKs send Math.trunc(ms / 1000): "0" is anything under a second. Anthropic's Python SDK
            // sends its float as written ("15.0").
            DeadlineHeader::StainlessTimeout if v.bytes().any(|b| !b.is_ascii_digit()) => {
                parse_decimal(v, 9, Round::Down)
            }
            DeadlineHeader::StainlessTimeout => parse_whole(v).map(|s| Duration::from_secs(s.max(1))),
            DeadlineHeader::StainlessReadTimeout => parse_decimal(v, 9, Round::Down),
        };
        match parsed {
            // A number too large for any clock is no malformed deadline but the longest one: a route's
            // `max_timeout` caps it, as it caps any long one.
            Err(Malformation::Overflow) => Ok(Duration::MAX),
            parsed => parsed.map_err(|why| WireError::malformed(self.name(), value, why)),
        }
    }
}

impl fmt::Display for DeadlineHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `TimeoutValue TimeoutUnit`: 1 to 8 ASCII digits, then exactly one of `H M S m u n`. `0` is accepted (a
/// deadline already reached), as grpc-go and grpc-java do.
fn parse_grpc(v: &str) -> Result<Duration, Malformation> {
    let bytes = v.as_bytes();
    let Some((&unit, digits)) = bytes.split_last() else {
        return Err(Malformation::Empty);
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        let negative = digits.first() == Some(&b'-') && digits[1..].iter().all(u8::is_ascii_digit);
        return Err(if negative && digits.len() > 1 {
            Malformation::Negative
        } else {
            Malformation::Syntax
        });
    }
    let Some(&(unit_nanos, _)) = GRPC_UNITS.iter().find(|(_, c)| *c == unit) else {
        return Err(if unit.is_ascii_alphabetic() {
            Malformation::UnknownUnit
        } else {
            Malformation::Syntax
        });
    };
    if digits.len() > 8 {
        return Err(Malformation::TooManyDigits);
    }
    // At most 8 digits: the value is below 10^8, and 10^8 hours in nanoseconds (3.6 x 10^20) fits a u128.
    let value = digits.iter().fold(0_u64, |acc, d| acc * 10 + u64::from(d - b'0'));
    super::number::nanos_to_duration(u128::from(value) * u128::from(unit_nanos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    fn why(header: DeadlineHeader, value: &str) -> Malformation {
        match header.parse(value) {
            Err(WireError::Malformed { why, header: h, .. }) => {
                assert_eq!(h, header.name());
                why
            }
            other => panic!("{header} {value:?} parsed as {other:?}"),
        }
    }

    #[test]
    fn ballast_timeout_ms_is_whole_milliseconds() {
        let h = DeadlineHeader::BallastTimeoutMs;
        assert_eq!(h.parse("2500"), Ok(2500 * MS));
        assert_eq!(h.parse("0"), Ok(Duration::ZERO));
        assert_eq!(h.parse("\t 30000 "), Ok(30_000 * MS));
        assert_eq!(
            h.parse("18446744073709551615"),
            Ok(Duration::from_millis(u64::MAX))
        );
        assert_eq!(why(h, "1.5"), Malformation::Syntax);
    }

    #[test]
    fn envoy_expected_rq_timeout_ms_is_whole_milliseconds() {
        let h = DeadlineHeader::EnvoyExpectedRqTimeoutMs;
        assert_eq!(h.parse("15000"), Ok(15_000 * MS));
        assert_eq!(why(h, "15s"), Malformation::Syntax);
    }

    #[test]
    fn grpc_timeout_reads_every_unit() {
        let h = DeadlineHeader::GrpcTimeout;
        assert_eq!(h.parse("2H"), Ok(Duration::from_secs(7200)));
        assert_eq!(h.parse("3M"), Ok(Duration::from_secs(180)));
        assert_eq!(h.parse("4S"), Ok(Duration::from_secs(4)));
        assert_eq!(h.parse("2500m"), Ok(2500 * MS));
        assert_eq!(h.parse("7u"), Ok(Duration::from_micros(7)));
        assert_eq!(h.parse("9n"), Ok(Duration::from_nanos(9)));
        assert_eq!(h.parse("0S"), Ok(Duration::ZERO));
        assert_eq!(h.parse("00000001m"), Ok(MS));
        assert_eq!(h.parse("99999999H"), Ok(Duration::from_secs(99_999_999 * 3600)));
    }

    #[test]
    fn grpc_timeout_allows_at_most_8_digits() {
        let h = DeadlineHeader::GrpcTimeout;
        assert_eq!(h.parse("12345678S"), Ok(Duration::from_secs(12_345_678)));
        assert_eq!(why(h, "123456789S"), Malformation::TooManyDigits);
        assert_eq!(why(h, "000000001S"), Malformation::TooManyDigits);
    }

    #[test]
    fn grpc_timeout_needs_exactly_one_known_unit() {
        let h = DeadlineHeader::GrpcTimeout;
        assert_eq!(why(h, "12x"), Malformation::UnknownUnit);
        assert_eq!(why(h, "12s"), Malformation::UnknownUnit); // seconds are upper-case S
        assert_eq!(why(h, "12h"), Malformation::UnknownUnit);
        assert_eq!(why(h, "12"), Malformation::Syntax);
        assert_eq!(why(h, "12mS"), Malformation::Syntax);
        assert_eq!(why(h, "S"), Malformation::Syntax);
        assert_eq!(why(h, "12é"), Malformation::Syntax);
        assert_eq!(why(h, "1.5S"), Malformation::Syntax);
        assert_eq!(why(h, "12 S"), Malformation::Syntax);
        assert_eq!(why(h, "-5S"), Malformation::Negative);
        assert_eq!(why(h, "-S"), Malformation::Syntax);
    }

    #[test]
    fn stainless_timeout_is_truncated_seconds_with_zero_read_as_one_or_decimal_seconds() {
        let h = DeadlineHeader::StainlessTimeout;
        assert_eq!(h.parse("600"), Ok(Duration::from_secs(600)));
        assert_eq!(h.parse("1"), Ok(Duration::from_secs(1)));
        assert_eq!(h.parse("0"), Ok(Duration::from_secs(1)));
        // Anthropic's Python SDK: `str(timeout)` of a float, as written.
        assert_eq!(h.parse("15.0"), Ok(Duration::from_secs(15)));
        assert_eq!(h.parse("0.5"), Ok(500 * MS));
        assert_eq!(why(h, "NOT_GIVEN"), Malformation::Syntax);
        assert_eq!(why(h, "-1"), Malformation::Negative);
    }

    #[test]
    fn stainless_read_timeout_is_decimal_seconds() {
        let h = DeadlineHeader::StainlessReadTimeout;
        assert_eq!(h.parse("600.0"), Ok(Duration::from_secs(600)));
        assert_eq!(h.parse("0.25"), Ok(250 * MS));
        assert_eq!(h.parse("30"), Ok(Duration::from_secs(30)));
        assert_eq!(h.parse("1e-05"), Ok(Duration::from_micros(10)));
        assert_eq!(h.parse("0.0"), Ok(Duration::ZERO));
        assert_eq!(why(h, "nan"), Malformation::NotFinite);
        assert_eq!(why(h, "NaN"), Malformation::NotFinite);
        assert_eq!(why(h, "inf"), Malformation::NotFinite);
        assert_eq!(why(h, "-inf"), Malformation::NotFinite);
        assert_eq!(why(h, "None"), Malformation::Syntax);
    }

    #[test]
    fn every_header_rejects_the_common_malformations() {
        for h in DeadlineHeader::ALL {
            assert_eq!(why(h, ""), Malformation::Empty, "{h}");
            assert_eq!(why(h, " \t "), Malformation::Empty, "{h}");
            assert_eq!(why(h, "abc"), Malformation::Syntax, "{h}");
            assert_eq!(why(h, "1 2"), Malformation::Syntax, "{h}");
            assert_eq!(why(h, "12\n"), Malformation::Syntax, "{h}");
            assert_eq!(why(h, "\u{a0}12"), Malformation::Syntax, "{h}");
            assert_eq!(why(h, "1, 2"), Malformation::Syntax, "{h}");
            assert_eq!(why(h, "+12"), Malformation::Syntax, "{h}");
        }
        for h in [
            DeadlineHeader::BallastTimeoutMs,
            DeadlineHeader::EnvoyExpectedRqTimeoutMs,
            DeadlineHeader::StainlessTimeout,
            DeadlineHeader::StainlessReadTimeout,
        ] {
            assert_eq!(why(h, "-5"), Malformation::Negative, "{h}");
        }
    }

    /// Regression: `ballast-timeout-ms` beyond `u64::MAX` was told it is "not a whole number".
    #[test]
    fn a_deadline_too_large_for_any_clock_is_the_longest_not_a_malformed_one() {
        for h in [
            DeadlineHeader::BallastTimeoutMs,
            DeadlineHeader::EnvoyExpectedRqTimeoutMs,
            DeadlineHeader::StainlessTimeout,
            DeadlineHeader::StainlessReadTimeout,
        ] {
            for value in ["18446744073709551616", "99999999999999999999999", "1e400"] {
                if value == "1e400" && h != DeadlineHeader::StainlessReadTimeout {
                    continue;
                }
                assert_eq!(h.parse(value), Ok(Duration::MAX), "{h} {value}");
            }
        }
        let t = crate::inbound_timeout(
            [("ballast-timeout-ms", "99999999999999999999999")],
            Duration::from_secs(30),
            Duration::from_secs(300),
        )
        .unwrap();
        assert_eq!(
            t.timeout,
            Duration::from_secs(300),
            "capped as any long deadline is"
        );
    }

    #[test]
    fn malformed_errors_keep_the_value_as_sent() {
        let err = DeadlineHeader::GrpcTimeout.parse(" 12x ").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"grpc-timeout: " 12x " is not a gRPC timeout (1-8 digits then one of H M S m u n): unknown unit"#
        );
    }

    #[test]
    fn names_match_case_insensitively() {
        assert_eq!(
            DeadlineHeader::from_name("GRPC-Timeout"),
            Some(DeadlineHeader::GrpcTimeout)
        );
        assert_eq!(
            DeadlineHeader::from_name("X-Stainless-Read-Timeout"),
            Some(DeadlineHeader::StainlessReadTimeout)
        );
        assert_eq!(DeadlineHeader::from_name("grpc-timeout "), None);
        assert_eq!(DeadlineHeader::from_name("x-stainless-retry-count"), None);
        for h in DeadlineHeader::ALL {
            assert_eq!(DeadlineHeader::from_name(h.name()), Some(h));
            assert_eq!(h.to_string(), h.name());
        }
    }

    proptest! {
        #[test]
        fn parsing_never_panics(value in any::<String>()) {
            for h in DeadlineHeader::ALL {
                let _ = h.parse(&value);
            }
        }

        #[test]
        fn parsing_never_panics_on_near_misses(value in "[ \t0-9.eE+nNaAiIfHMSmux-]{0,40}") {
            for h in DeadlineHeader::ALL {
                if let Err(err) = h.parse(&value) {
                    prop_assert_eq!(err.header(), h.name());
                }
            }
        }

        #[test]
        fn whole_numbers_read_the_same_in_every_decimal_header(n in any::<u64>()) {
            let s = n.to_string();
            prop_assert_eq!(DeadlineHeader::BallastTimeoutMs.parse(&s), Ok(Duration::from_millis(n)));
            prop_assert_eq!(DeadlineHeader::StainlessReadTimeout.parse(&s), Ok(Duration::from_secs(n)));
        }
    }
}
