//! What an upstream says about retrying: `Retry-After`, `retry-after-ms`, `x-should-retry`.
//!
//! Read here, decided in the retry decision. The rule this module serves is "never retry earlier than the server
//! asked", so numbers that do not fall on a whole nanosecond are rounded **up**.

use std::time::{Duration, SystemTime};

use super::number::{Round, parse_decimal, trim_ows};
use super::{Malformation, RETRY_AFTER, RETRY_AFTER_MS, WireError, X_SHOULD_RETRY};

/// A `Retry-After` value (RFC 9110 §10.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryAfter {
    /// Wait this long: delta-seconds.
    Delay(Duration),
    /// Wait until this time: an HTTP-date. The core never reads a wall clock; the shell passes its wall-clock now
    /// to [`RetryAfter::wait_from`] (DESIGN.md, "Workspace layout").
    HttpDate(SystemTime),
}

impl RetryAfter {
    /// The wait it asks for at wall-clock time `now`: a delay as it is, an HTTP-date as the time from `now` until
    /// then (zero for a date already past: the server asked for no wait).
    ///
    /// ```
    /// use ballast_core::{RetryAfter, parse_retry_after};
    /// use std::time::{Duration, SystemTime};
    ///
    /// let date = parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
    /// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470); // 07:27:50
    /// assert_eq!(date.wait_from(now), Duration::from_secs(10));
    /// assert_eq!(RetryAfter::Delay(Duration::from_secs(3)).wait_from(now), Duration::from_secs(3));
    /// ```
    pub fn wait_from(self, now: SystemTime) -> Duration {
        match self {
            RetryAfter::Delay(delay) => delay,
            RetryAfter::HttpDate(at) => at.duration_since(now).unwrap_or(Duration::ZERO),
        }
    }
}

/// Reads a `Retry-After` value: delta-seconds or an HTTP-date.
///
/// Delta-seconds are `1*DIGIT` in RFC 9110; decimal seconds (`1.5`, and the `1e3` exponent form) are accepted too,
/// because providers send them and both OpenAI SDKs read them (`float()` in Python, `parseFloat` in Node), and
/// rounded up to the nanosecond. An HTTP-date in any of its three forms — IMF-fixdate (`Sun, 06 Nov 1994 08:49:37
/// GMT`), the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`)
/// — is parsed by the `httpdate` crate, and must be a date that exists (`Sun, 31 Feb ...` is malformed, so the
/// retry decision falls back to its own backoff rather than retrying at once). A number too large for a
/// [`Duration`] is [`Duration::MAX`]: a wait longer than any the policy accepts (so the call stops rather than
/// retrying at once). Anything else, including a negative number, is malformed.
///
/// ```
/// use ballast_core::{RetryAfter, parse_retry_after};
/// use std::time::{Duration, SystemTime};
///
/// assert_eq!(parse_retry_after("120"), Ok(RetryAfter::Delay(Duration::from_secs(120))));
/// assert_eq!(parse_retry_after("1.5"), Ok(RetryAfter::Delay(Duration::from_millis(1500))));
/// assert_eq!(
///     parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
///     Ok(RetryAfter::HttpDate(SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)))
/// );
/// assert!(parse_retry_after("soon").is_err());
/// ```
pub fn parse_retry_after(value: &str) -> Result<RetryAfter, WireError> {
    let v = trim_ows(value);
    match waited(parse_decimal(v, 9, Round::Up)) {
        Ok(delay) => Ok(RetryAfter::Delay(delay)),
        // Every HTTP-date starts with a day name; a number never does.
        Err(Malformation::Syntax) if v.starts_with(|c: char| c.is_ascii_alphabetic()) => {
            httpdate::parse_http_date(v)
                .map(RetryAfter::HttpDate)
                .map_err(|_| WireError::malformed(RETRY_AFTER, value, Malformation::Syntax))
        }
        Err(why) => Err(WireError::malformed(RETRY_AFTER, value, why)),
    }
}

/// A wait read from a number: one too large to represent is the longest there is, never no wait at all.
fn waited(parsed: Result<Duration, Malformation>) -> Result<Duration, Malformation> {
    match parsed {
        Err(Malformation::Overflow) => Ok(Duration::MAX),
        other => other,
    }
}

/// Reads a `retry-after-ms` value: a non-negative number of milliseconds, decimals allowed (the OpenAI SDKs
/// read it with `float()` / `parseFloat`), rounded up to the nanosecond; one too large for a [`Duration`] is
/// [`Duration::MAX`], as for `Retry-After`.
///
/// ```
/// use ballast_core::parse_retry_after_ms;
/// use std::time::Duration;
///
/// assert_eq!(parse_retry_after_ms("250"), Ok(Duration::from_millis(250)));
/// assert_eq!(parse_retry_after_ms("0.5"), Ok(Duration::from_micros(500)));
/// ```
pub fn parse_retry_after_ms(value: &str) -> Result<Duration, WireError> {
    waited(parse_decimal(trim_ows(value), 6, Round::Up))
        .map_err(|why| WireError::malformed(RETRY_AFTER_MS, value, why))
}

/// Reads an `x-should-retry` value: `true` or `false`, in any case.
///
/// ```
/// use ballast_core::parse_should_retry;
///
/// assert_eq!(parse_should_retry("false"), Ok(false));
/// assert_eq!(parse_should_retry("True"), Ok(true));
/// assert!(parse_should_retry("1").is_err());
/// ```
pub fn parse_should_retry(value: &str) -> Result<bool, WireError> {
    let v = trim_ows(value);
    if v.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if v.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        let why = if v.is_empty() {
            Malformation::Empty
        } else {
            Malformation::Syntax
        };
        Err(WireError::malformed(X_SHOULD_RETRY, value, why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn retry_after_why(value: &str) -> Malformation {
        match parse_retry_after(value) {
            Err(WireError::Malformed { header, why, .. }) => {
                assert_eq!(header, RETRY_AFTER);
                why
            }
            other => panic!("{value:?} parsed as {other:?}"),
        }
    }

    #[test]
    fn retry_after_delta_seconds() {
        assert_eq!(parse_retry_after("0"), Ok(RetryAfter::Delay(Duration::ZERO)));
        assert_eq!(
            parse_retry_after(" 30 "),
            Ok(RetryAfter::Delay(Duration::from_secs(30)))
        );
        assert_eq!(
            parse_retry_after("0.25"),
            Ok(RetryAfter::Delay(Duration::from_millis(250)))
        );
    }

    #[test]
    fn retry_after_decimals_round_up_never_earlier_than_asked() {
        assert_eq!(
            parse_retry_after("1.0000000001"),
            Ok(RetryAfter::Delay(Duration::new(1, 1)))
        );
        assert_eq!(parse_retry_after_ms("0.0000001"), Ok(Duration::from_nanos(1)));
    }

    #[test]
    fn retry_after_reads_the_three_http_date_forms() {
        let at = |secs: u64| {
            Ok(RetryAfter::HttpDate(
                SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
            ))
        };
        for date in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(parse_retry_after(date), at(784_111_777), "{date}");
        }
        assert_eq!(
            parse_retry_after(" Wed, 21 Oct 2015 07:28:00 GMT\t"),
            at(1_445_412_480)
        );
        assert_eq!(
            parse_retry_after("Thu, 29 Feb 2024 23:59:59 GMT"),
            at(1_709_251_199)
        );
    }

    /// Regression: a well-shaped date that does not exist passed a shape check, then failed to parse and became a
    /// zero wait — an immediate retry. It is malformed: ignored, so the call waits its own backoff.
    #[test]
    fn a_date_that_does_not_exist_is_malformed_not_a_zero_wait() {
        for bad in [
            "Sun, 31 Feb 2026 08:49:37 GMT",
            "Wed, 29 Feb 2023 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT",
        ] {
            assert_eq!(retry_after_why(bad), Malformation::Syntax, "{bad}");
        }
    }

    /// Regression: `Retry-After: 18446744073709551616` overflowed, was read as malformed — as if absent — and
    /// the call retried at once. Too large to represent is longer than any wait the policy accepts.
    #[test]
    fn a_wait_too_large_to_represent_is_the_longest_there_is() {
        for huge in ["18446744073709551616", "99999999999999999999999", "1e30"] {
            assert_eq!(
                parse_retry_after(huge),
                Ok(RetryAfter::Delay(Duration::MAX)),
                "{huge}"
            );
        }
        for huge in ["18446744073709551616000", "1e30"] {
            assert_eq!(parse_retry_after_ms(huge), Ok(Duration::MAX), "{huge}");
        }
    }

    #[test]
    fn retry_after_rejects_what_is_neither_a_number_nor_a_date() {
        assert_eq!(retry_after_why(""), Malformation::Empty);
        assert_eq!(retry_after_why("-1"), Malformation::Negative);
        assert_eq!(retry_after_why("NaN"), Malformation::NotFinite);
        for bad in [
            "soon",
            "30s",
            "sun, 06 Nov 1994 08:49:37 GMT",    // day names are case-sensitive
            "Sun, 06 Nov 1994 08:49:37 UTC",    // only GMT
            "Sun, 6 Nov 1994 08:49:37 GMT",     // two-digit day in IMF-fixdate
            "Sun, 06 Nov 1994 08:49 GMT",       // seconds missing
            "Sunday, 06-Nov-1994 08:49:37 GMT", // RFC 850 has a two-digit year
            "Sun Nov 6 08:49:37 1994",          // asctime pads the day with a space
            "2015-10-21T07:28:00Z",             // ISO 8601 is not an HTTP-date
            "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(retry_after_why(bad), Malformation::Syntax, "{bad}");
        }
    }

    #[test]
    fn retry_after_ms_is_decimal_milliseconds() {
        assert_eq!(parse_retry_after_ms("1500"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_retry_after_ms("20.5"), Ok(Duration::from_micros(20_500)));
        let err = parse_retry_after_ms("-20").unwrap_err();
        assert_eq!(err.header(), RETRY_AFTER_MS);
        assert!(matches!(
            err,
            WireError::Malformed {
                why: Malformation::Negative,
                ..
            }
        ));
        assert!(parse_retry_after_ms("").is_err());
        assert!(parse_retry_after_ms("20ms").is_err());
        assert!(parse_retry_after_ms("inf").is_err());
    }

    #[test]
    fn should_retry_is_true_or_false_in_any_case() {
        assert_eq!(parse_should_retry("true"), Ok(true));
        assert_eq!(parse_should_retry("TRUE"), Ok(true));
        assert_eq!(parse_should_retry(" False "), Ok(false));
        for bad in ["", "1", "0", "yes", "truee", "t"] {
            let err = parse_should_retry(bad).unwrap_err();
            assert_eq!(err.header(), X_SHOULD_RETRY, "{bad}");
        }
        assert!(matches!(
            parse_should_retry(""),
            Err(WireError::Malformed {
                why: Malformation::Empty,
                ..
            })
        ));
    }

    proptest! {
        #[test]
        fn parsing_never_panics(value in any::<String>()) {
            let _ = parse_retry_after(&value);
            let _ = parse_retry_after_ms(&value);
            let _ = parse_should_retry(&value);
        }

        #[test]
        fn date_shapes_never_panic(value in "[A-Za-z]{0,9},? ?[0-9 ]{0,2}[- ]?[A-Za-z]{0,3}[- ]?[0-9]{0,4} [0-9:]{0,8} ?[A-Z0-9]{0,4}") {
            let _ = parse_retry_after(&value);
        }

        #[test]
        fn whole_seconds_are_delays(n in any::<u64>()) {
            let s = n.to_string();
            prop_assert_eq!(parse_retry_after(&s), Ok(RetryAfter::Delay(Duration::from_secs(n))));
        }
    }
}
