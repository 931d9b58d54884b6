//! Durations written for people: `"50ms"`, `"1.2s"`, `"1h30m"`.
//!
//! Grammar (docs/config.md, "Durations"; the same in chaos profiles):
//!
//! ```text
//! duration  = component { component }
//! component = digits [ "." digits ] unit        (digits: 0-9, one or more)
//! unit      = "ns" | "us" | "µs" | "ms" | "s" | "m" | "h" | "d"
//! ```
//!
//! Units are required (even for zero: `"0s"`), go from the largest to the smallest and appear at most once, with
//! no spaces. The value must be a whole number of nanoseconds and at most `u64::MAX` nanoseconds (about 584
//! years). Why our own parser and not `humantime`: humantime also accepts months and years of fractional days,
//! spaces, repeated units and units in any order; a config value should have one obvious spelling, and the error
//! should say what to write instead.

use std::fmt;
use std::time::Duration;

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Units from the largest to the smallest, with their length in nanoseconds.
const UNITS: [(&str, u128); 8] = [
    ("d", 86_400 * NANOS_PER_SEC),
    ("h", 3_600 * NANOS_PER_SEC),
    ("m", 60 * NANOS_PER_SEC),
    ("s", NANOS_PER_SEC),
    ("ms", 1_000_000),
    ("us", 1_000),
    ("µs", 1_000),
    ("ns", 1),
];

/// Why a text is not a duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Nothing was written.
    #[error("it is empty")]
    Empty,
    /// A number with no unit, such as `"30"`.
    #[error("units are required (e.g. \"{number}s\" or \"{number}ms\")")]
    MissingUnit {
        /// The number as written.
        number: String,
    },
    /// A unit this grammar does not know.
    #[error("unknown unit {unit:?} (use d, h, m, s, ms, us or ns)")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
    },
    /// A leading minus sign.
    #[error("durations cannot be negative")]
    Negative,
    /// A character that fits nowhere (a space, a sign, a stray dot).
    #[error("unexpected {found:?} (write e.g. \"1h30m\" or \"1.5s\", without spaces)")]
    Unexpected {
        /// The character found.
        found: char,
    },
    /// Units out of order or repeated (`"30m1h"`, `"1s1s"`).
    #[error("units must go from the largest to the smallest, each at most once")]
    UnitOrder,
    /// A fraction finer than one nanosecond.
    #[error("it is finer than a nanosecond")]
    TooPrecise,
    /// More than `u64::MAX` nanoseconds.
    #[error("it is too large (at most about 584 years)")]
    TooLarge,
}

/// Parses a duration in the grammar of this module.
///
/// ```
/// use ballast_human::parse_duration;
/// use std::time::Duration;
///
/// assert_eq!(parse_duration("1.2s"), Ok(Duration::from_millis(1200)));
/// assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
/// assert!(parse_duration("30").is_err()); // units are required
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    if text.starts_with('-') {
        return Err(DurationError::Negative);
    }
    let mut rest = text;
    let mut total: u128 = 0;
    // Index in UNITS of the last unit used: the next must come strictly after it.
    let mut last_unit: Option<usize> = None;
    while !rest.is_empty() {
        let (component, unit_index, tail) = next_component(rest)?;
        if last_unit.is_some_and(|last| unit_rank(unit_index) <= unit_rank(last)) {
            return Err(DurationError::UnitOrder);
        }
        last_unit = Some(unit_index);
        total = total.checked_add(component).ok_or(DurationError::TooLarge)?;
        rest = tail;
    }
    let nanos = u64::try_from(total).map_err(|_| DurationError::TooLarge)?;
    Ok(Duration::from_nanos(nanos))
}

/// `us` and `µs` are one unit: same rank.
fn unit_rank(index: usize) -> usize {
    if UNITS[index].0 == "µs" { index - 1 } else { index }
}

/// Reads one `digits [. digits] unit` from the front of `text`: its length in nanoseconds, the unit's index in
/// [`UNITS`] and what follows.
fn next_component(text: &str) -> Result<(u128, usize, &str), DurationError> {
    let int_len = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (int_digits, after_int) = text.split_at(int_len);
    if int_digits.is_empty() {
        let found = text.chars().next().ok_or(DurationError::Empty)?;
        return Err(DurationError::Unexpected { found });
    }
    let (frac_digits, after_number) = match after_int.strip_prefix('.') {
        Some(after_dot) => {
            let frac_len = after_dot
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(after_dot.len());
            if frac_len == 0 {
                return Err(DurationError::Unexpected { found: '.' });
            }
            after_dot.split_at(frac_len)
        }
        None => ("", after_int),
    };
    let unit_len = after_number
        .find(|c: char| !c.is_alphabetic())
        .unwrap_or(after_number.len());
    let (unit, tail) = after_number.split_at(unit_len);
    if unit.is_empty() {
        return match tail.chars().next() {
            Some(found) => Err(DurationError::Unexpected { found }),
            None => Err(DurationError::MissingUnit {
                number: text[..text.len() - after_number.len()].to_owned(),
            }),
        };
    }
    let unit_index =
        UNITS
            .iter()
            .position(|(name, _)| *name == unit)
            .ok_or_else(|| DurationError::UnknownUnit {
                unit: unit.to_owned(),
            })?;
    let unit_nanos = UNITS[unit_index].1;
    let nanos = number_times(int_digits, frac_digits, unit_nanos)?;
    Ok((nanos, unit_index, tail))
}

/// `int.frac * unit_nanos`, exactly, or an error.
fn number_times(int_digits: &str, frac_digits: &str, unit_nanos: u128) -> Result<u128, DurationError> {
    // 20 digits (< 10^20) times the largest unit (8.64 * 10^13 ns) stays far below u128::MAX.
    let int_digits = int_digits.trim_start_matches('0');
    if int_digits.len() > 20 {
        return Err(DurationError::TooLarge);
    }
    let int: u128 = if int_digits.is_empty() {
        0
    } else {
        int_digits.parse().map_err(|_| DurationError::TooLarge)?
    };
    let whole = int * unit_nanos;
    let frac_digits = frac_digits.trim_end_matches('0');
    if frac_digits.is_empty() {
        return Ok(whole);
    }
    // A fraction with more than 18 significant digits cannot be a whole number of nanoseconds of any unit
    // here (the largest, a day, is 2^16 * 3^3 * 5^11 ns), and up to 18 digits the product fits in u128.
    if frac_digits.len() > 18 {
        return Err(DurationError::TooPrecise);
    }
    let frac: u128 = frac_digits.parse().map_err(|_| DurationError::TooPrecise)?;
    let scale = 10u128.pow(frac_digits.len() as u32);
    let scaled = frac * unit_nanos;
    if !scaled.is_multiple_of(scale) {
        return Err(DurationError::TooPrecise);
    }
    Ok(whole + scaled / scale)
}

/// A duration in the canonical spelling of the grammar (`"0s"`, `"50ms"`, `"1.2s"`, `"1h30m"`, `"24h"`), which
/// [`parse_duration`] reads back to the same value.
///
/// ```
/// use ballast_human::format_duration;
/// use std::time::Duration;
///
/// assert_eq!(format_duration(Duration::from_millis(1200)).to_string(), "1.2s");
/// assert_eq!(format_duration(Duration::from_secs(5400)).to_string(), "1h30m");
/// ```
pub fn format_duration(duration: Duration) -> impl fmt::Display {
    HumanDuration(duration)
}

struct HumanDuration(Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return f.write_str("0s");
        }
        if nanos < 1_000 {
            return write!(f, "{nanos}ns");
        }
        if nanos < 1_000_000 {
            return write_decimal(f, nanos, 1_000, "us");
        }
        if nanos < NANOS_PER_SEC {
            return write_decimal(f, nanos, 1_000_000, "ms");
        }
        let hours = nanos / (3_600 * NANOS_PER_SEC);
        let minutes = nanos / (60 * NANOS_PER_SEC) % 60;
        let rest = nanos % (60 * NANOS_PER_SEC);
        if hours > 0 {
            write!(f, "{hours}h")?;
        }
        if minutes > 0 {
            write!(f, "{minutes}m")?;
        }
        if rest > 0 {
            write_decimal(f, rest, NANOS_PER_SEC, "s")?;
        }
        Ok(())
    }
}

/// `value / unit` in decimal, trailing zeros dropped, then the unit.
fn write_decimal(f: &mut fmt::Formatter<'_>, value: u128, unit: u128, name: &str) -> fmt::Result {
    let (int, frac) = (value / unit, value % unit);
    if frac == 0 {
        return write!(f, "{int}{name}");
    }
    let width = (unit.ilog10()) as usize;
    let digits = format!("{frac:0width$}");
    write!(f, "{int}.{}{name}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn every_unit_and_fractions() {
        let cases = [
            ("50ms", ms(50)),
            ("1.2s", ms(1200)),
            ("10s", ms(10_000)),
            ("5m", ms(300_000)),
            ("24h", Duration::from_secs(86_400)),
            ("1d", Duration::from_secs(86_400)),
            ("1h30m", Duration::from_secs(5_400)),
            ("2m0.5s", ms(120_500)),
            ("1h1m1s1ms1us1ns", Duration::new(3_661, 1_001_001)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("7ns", Duration::from_nanos(7)),
            ("0s", Duration::ZERO),
            ("0.000000001s", Duration::from_nanos(1)),
            ("1.50s", ms(1500)),
            ("0.5d", Duration::from_secs(43_200)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        use DurationError::*;
        let cases = [
            ("", Empty),
            ("30", MissingUnit { number: "30".into() }),
            ("0", MissingUnit { number: "0".into() }),
            ("1.5", MissingUnit { number: "1.5".into() }),
            ("1h30", MissingUnit { number: "30".into() }),
            ("12x", UnknownUnit { unit: "x".into() }),
            ("1sec", UnknownUnit { unit: "sec".into() }),
            ("5M", UnknownUnit { unit: "M".into() }),
            ("-1s", Negative),
            ("+1s", Unexpected { found: '+' }),
            ("10 s", Unexpected { found: ' ' }),
            (" 10s", Unexpected { found: ' ' }),
            ("10s ", Unexpected { found: ' ' }),
            ("s", Unexpected { found: 's' }),
            (".s", Unexpected { found: '.' }),
            ("1..5s", Unexpected { found: '.' }),
            (".5s", Unexpected { found: '.' }),
            ("1.s", Unexpected { found: '.' }),
            ("30m1h", UnitOrder),
            ("1s1s", UnitOrder),
            ("1us1µs", UnitOrder),
            ("0.0000000001s", TooPrecise),
            ("1.5ns", TooPrecise),
            ("18446744073709551616ns", TooLarge),
            ("99999999999999999999999d", TooLarge),
            ("300000d", TooLarge),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration(text), Err(expected), "{text:?}");
        }
    }

    #[test]
    fn the_largest_duration_is_u64_nanoseconds() {
        assert_eq!(
            parse_duration("18446744073709551615ns"),
            Ok(Duration::from_nanos(u64::MAX))
        );
        assert_eq!(parse_duration("00000000000000000000000001s"), Ok(ms(1000)));
        assert_eq!(
            parse_duration("1.000000000000000000000000s"),
            Ok(ms(1000)),
            "trailing zeros are not precision"
        );
    }

    #[test]
    fn messages_read_well() {
        let e = |t| parse_duration(t).unwrap_err().to_string();
        assert_eq!(e("30"), "units are required (e.g. \"30s\" or \"30ms\")");
        assert_eq!(e("12x"), "unknown unit \"x\" (use d, h, m, s, ms, us or ns)");
        assert_eq!(e("-5s"), "durations cannot be negative");
    }

    #[test]
    fn canonical_spelling() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_nanos(1_500), "1.5us"),
            (ms(50), "50ms"),
            (Duration::from_micros(1_250), "1.25ms"),
            (ms(1_200), "1.2s"),
            (ms(10_000), "10s"),
            (ms(90_000), "1m30s"),
            (ms(120_500), "2m0.5s"),
            (Duration::from_secs(5_400), "1h30m"),
            (Duration::from_secs(86_400), "24h"),
            (Duration::new(3_661, 1), "1h1m1.000000001s"),
        ];
        for (duration, text) in cases {
            assert_eq!(format_duration(duration).to_string(), text);
        }
    }

    proptest! {
        #[test]
        fn formatting_reads_back(nanos: u64) {
            let d = Duration::from_nanos(nanos);
            let text = format_duration(d).to_string();
            prop_assert_eq!(parse_duration(&text), Ok(d), "{}", text);
        }

        #[test]
        fn parsing_never_panics(text in "\\PC{0,24}") {
            let _ = parse_duration(&text);
        }

        #[test]
        fn numbers_and_units_parse(int in 0u64..100_000, unit in 0usize..8) {
            let (name, nanos) = UNITS[unit];
            let text = format!("{int}{name}");
            prop_assert_eq!(parse_duration(&text), Ok(Duration::from_nanos(int * nanos as u64)));
        }
    }
}
