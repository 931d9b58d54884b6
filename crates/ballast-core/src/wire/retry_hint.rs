//! What an upstream says about retrying: `Retry-After`, `retry-after-ms`, `x-should-retry`.
//!
//! Read here, decided in the retry decision. The rule this module serves is "never retry earlier than the server
//! asked", so numbers that do not fall on a whole nanosecond are rounded **up**.

use std::time::Duration;

use super::number::{Round, parse_decimal, trim_ows};
use super::{Malformation, RETRY_AFTER, RETRY_AFTER_MS, WireError, X_SHOULD_RETRY};

const DAY_NAMES: [&[u8]; 7] = [b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat", b"Sun"];
const LONG_DAY_NAMES: [&[u8]; 7] = [
    b"Monday",
    b"Tuesday",
    b"Wednesday",
    b"Thursday",
    b"Friday",
    b"Saturday",
    b"Sunday",
];
const MONTHS: [&[u8]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// A `Retry-After` value (RFC 9110 §10.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryAfter<'a> {
    /// Wait this long: delta-seconds.
    Delay(Duration),
    /// Wait until this HTTP-date, as sent (without surrounding whitespace). The core never reads a wall clock,
    /// so the shell turns it into a [`Duration`] before the retry decision sees it (DESIGN.md, "Workspace
    /// layout").
    HttpDate(&'a str),
}

/// Reads a `Retry-After` value: delta-seconds or an HTTP-date.
///
/// Delta-seconds are `1*DIGIT` in RFC 9110; decimal seconds (`1.5`, and the `1e3` exponent form) are accepted too,
/// because providers send them and both OpenAI SDKs read them (`float()` in Python, `parseFloat` in Node), and
/// rounded up to the nanosecond. A value in the shape of one of the three HTTP-date forms — IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`) — is handed back unparsed: only its shape is checked (names, digits, separators),
/// not whether the date exists. A number too large for a [`Duration`] is [`Duration::MAX`]: a wait longer than
/// any the policy accepts (so the call stops rather than retrying at once). Anything else, including a negative
/// number, is malformed.
///
/// ```
/// use ballast_core::{RetryAfter, parse_retry_after};
/// use std::time::Duration;
///
/// assert_eq!(parse_retry_after("120"), Ok(RetryAfter::Delay(Duration::from_secs(120))));
/// assert_eq!(parse_retry_after("1.5"), Ok(RetryAfter::Delay(Duration::from_millis(1500))));
/// assert_eq!(
///     parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
///     Ok(RetryAfter::HttpDate("Wed, 21 Oct 2015 07:28:00 GMT"))
/// );
/// assert!(parse_retry_after("soon").is_err());
/// ```
pub fn parse_retry_after(value: &str) -> Result<RetryAfter<'_>, WireError> {
    let v = trim_ows(value);
    if looks_like_http_date(v.as_bytes()) {
        return Ok(RetryAfter::HttpDate(v));
    }
    waited(parse_decimal(v, 9, Round::Up))
        .map(RetryAfter::Delay)
        .map_err(|why| WireError::malformed(RETRY_AFTER, value, why))
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

/// Whether `v` has the shape of an HTTP-date (RFC 9110 §5.6.7). Names are case-sensitive, as the grammar says.
fn looks_like_http_date(v: &[u8]) -> bool {
    is_imf_fixdate(v) || is_rfc850_date(v) || is_asctime_date(v)
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`
fn is_imf_fixdate(v: &[u8]) -> bool {
    v.len() == 29
        && DAY_NAMES.contains(&&v[0..3])
        && &v[3..5] == b", "
        && digits(&v[5..7])
        && v[7] == b' '
        && MONTHS.contains(&&v[8..11])
        && v[11] == b' '
        && digits(&v[12..16])
        && v[16] == b' '
        && is_time_of_day(&v[17..25])
        && &v[25..] == b" GMT"
}

/// `Sunday, 06-Nov-94 08:49:37 GMT`
fn is_rfc850_date(v: &[u8]) -> bool {
    let Some(comma) = v.iter().position(|&b| b == b',') else {
        return false;
    };
    let (day, rest) = v.split_at(comma);
    LONG_DAY_NAMES.contains(&day)
        && rest.len() == 24
        && &rest[0..2] == b", "
        && digits(&rest[2..4])
        && rest[4] == b'-'
        && MONTHS.contains(&&rest[5..8])
        && rest[8] == b'-'
        && digits(&rest[9..11])
        && rest[11] == b' '
        && is_time_of_day(&rest[12..20])
        && &rest[20..] == b" GMT"
}

/// `Sun Nov  6 08:49:37 1994` (the day of month is two digits or a space and one digit)
fn is_asctime_date(v: &[u8]) -> bool {
    v.len() == 24
        && DAY_NAMES.contains(&&v[0..3])
        && v[3] == b' '
        && MONTHS.contains(&&v[4..7])
        && v[7] == b' '
        && (digits(&v[8..10]) || (v[8] == b' ' && v[9].is_ascii_digit()))
        && v[10] == b' '
        && is_time_of_day(&v[11..19])
        && v[19] == b' '
        && digits(&v[20..24])
}

/// `HH:MM:SS`, digits only (ranges are the date parser's business).
fn is_time_of_day(v: &[u8]) -> bool {
    v.len() == 8 && digits(&v[0..2]) && v[2] == b':' && digits(&v[3..5]) && v[5] == b':' && digits(&v[6..8])
}

fn digits(v: &[u8]) -> bool {
    v.iter().all(u8::is_ascii_digit)
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
    fn retry_after_recognises_the_three_http_date_forms() {
        for date in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Thu Feb 29 23:59:60 2024",
        ] {
            assert_eq!(parse_retry_after(date), Ok(RetryAfter::HttpDate(date)));
        }
        assert_eq!(
            parse_retry_after(" Wed, 21 Oct 2015 07:28:00 GMT\t"),
            Ok(RetryAfter::HttpDate("Wed, 21 Oct 2015 07:28:00 GMT"))
        );
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
