//! Durations in a profile: `"40ms"`, `"1.5s"`, `"20s"`.
//!
//! One number and one unit, nothing else: `<digits>[.<digits>]<unit>` with the unit one of `h`, `m`, `s`, `ms`,
//! `us`; no spaces, no sign, no compound forms (`"1m30s"`: write `"90s"`). A profile states latencies and
//! windows, never calendars, so the grammar is the smallest that says them unambiguously, and small enough to be
//! checked in full by its tests. The value must be a whole number of nanoseconds and at most `u64::MAX` of them.
//! Durations print back in the same grammar ([`DisplayDuration`]), so whatever a summary or an error shows can be
//! pasted into a profile.

use std::fmt;
use std::time::Duration;

/// Units, from the largest, with their length in nanoseconds.
const UNITS: [(&str, u128); 5] = [
    ("h", 3_600_000_000_000),
    ("m", 60_000_000_000),
    ("s", 1_000_000_000),
    ("ms", 1_000_000),
    ("us", 1_000),
];

/// Why a text is not a duration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Nothing was written.
    #[error("it is empty")]
    Empty,
    /// A number without a unit: `"30"`, or a bare TOML number `30`.
    #[error("units are required (e.g. \"{number}s\" or \"{number}ms\")")]
    MissingUnit {
        /// The number as written.
        number: String,
    },
    /// Something other than one of the units after the number.
    #[error("unknown unit {unit:?} (write one number and one unit: h, m, s, ms or us)")]
    UnknownUnit {
        /// What followed the number.
        unit: String,
    },
    /// No number, a stray dot, or a dot without digits on both sides.
    #[error("expected a number such as 40 or 1.5 before the unit")]
    BadNumber,
    /// A fraction finer than one nanosecond.
    #[error("it is finer than a nanosecond")]
    TooPrecise,
    /// More than `u64::MAX` nanoseconds (about 584 years).
    #[error("it is too large (at most about 584 years)")]
    TooLarge,
    /// A TOML value that is not a string (a boolean, a table, ...).
    #[error("expected a string such as \"40ms\"")]
    NotAString,
}

/// Parses a duration in this module's grammar.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, "0"));
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(whole) || !all_digits(fraction) {
        return Err(DurationError::BadNumber);
    }
    if unit.is_empty() {
        return Err(DurationError::MissingUnit {
            number: number.into(),
        });
    }
    let scale = UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .map(|(_, scale)| *scale)
        .ok_or_else(|| DurationError::UnknownUnit { unit: unit.into() })?;
    let fraction = fraction_nanos(fraction, scale)?;
    digits(whole)?
        .checked_mul(scale)
        .and_then(|nanos| nanos.checked_add(fraction))
        .and_then(|nanos| u64::try_from(nanos).ok())
        .map(Duration::from_nanos)
        .ok_or(DurationError::TooLarge)
}

/// A run of ASCII digits as a number.
fn digits(text: &str) -> Result<u128, DurationError> {
    text.parse().map_err(|_| DurationError::TooLarge)
}

/// Nanoseconds of `0.<fraction>` units of `scale` nanoseconds, which must be whole.
fn fraction_nanos(fraction: &str, scale: u128) -> Result<u128, DurationError> {
    let fraction = fraction.trim_end_matches('0');
    // The largest scale (an hour) is under 10^13 ns: more than 13 significant decimals cannot be whole nanoseconds,
    // and a cap keeps 10^len within u128.
    if fraction.len() > 13 {
        return Err(DurationError::TooPrecise);
    }
    // At most 13, checked above.
    let len = fraction.len() as u32;
    let numerator = if fraction.is_empty() { 0 } else { digits(fraction)? } * scale;
    let denominator = 10u128.pow(len);
    if !numerator.is_multiple_of(denominator) {
        return Err(DurationError::TooPrecise);
    }
    Ok(numerator / denominator)
}

/// A duration shown in the profile grammar: `"40ms"`, `"1.5s"`, `"20s"`, `"2m"`, `"0s"`.
pub(crate) struct DisplayDuration(pub(crate) Duration);

impl fmt::Display for DisplayDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return f.write_str("0s");
        }
        // Hours and minutes only when exact: their fractions are not decimal.
        for (unit, scale) in &UNITS[..2] {
            if nanos.is_multiple_of(*scale) {
                return write!(f, "{}{unit}", nanos / scale);
            }
        }
        // Seconds, milliseconds, microseconds: powers of ten, so any remainder is an exact decimal fraction.
        let (unit, scale, places) = match nanos {
            n if n >= 1_000_000_000 => ("s", 1_000_000_000, 9),
            n if n >= 1_000_000 => ("ms", 1_000_000, 6),
            _ => ("us", 1_000, 3),
        };
        let (whole, rest) = (nanos / scale, nanos % scale);
        if rest == 0 {
            return write!(f, "{whole}{unit}");
        }
        let fraction = format!("{rest:0places$}");
        write!(f, "{whole}.{}{unit}", fraction.trim_end_matches('0'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse_duration(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    #[test]
    fn every_unit() {
        assert_eq!(ok("2h"), Duration::from_secs(7_200));
        assert_eq!(ok("3m"), Duration::from_secs(180));
        assert_eq!(ok("20s"), Duration::from_secs(20));
        assert_eq!(ok("40ms"), Duration::from_millis(40));
        assert_eq!(ok("250us"), Duration::from_micros(250));
        assert_eq!(ok("0s"), Duration::ZERO);
    }

    #[test]
    fn fractions_are_exact() {
        assert_eq!(ok("1.5s"), Duration::from_millis(1_500));
        assert_eq!(ok("0.1s"), Duration::from_millis(100));
        assert_eq!(ok("2.5ms"), Duration::from_micros(2_500));
        assert_eq!(ok("1.001us"), Duration::from_nanos(1_001));
        assert_eq!(ok("0.5h"), Duration::from_secs(1_800));
        assert_eq!(
            ok("1.50000000000000000000s"),
            Duration::from_millis(1_500),
            "trailing zeros"
        );
    }

    #[test]
    fn refusals_say_why() {
        let err = |text: &str| parse_duration(text).expect_err(text);
        assert_eq!(err("30"), DurationError::MissingUnit { number: "30".into() });
        assert_eq!(err("1.5"), DurationError::MissingUnit { number: "1.5".into() });
        assert_eq!(err(""), DurationError::Empty);
        for (text, unit) in [("12x", "x"), ("10 s", " s"), ("1m30s", "m30s"), ("5M", "M")] {
            assert_eq!(
                err(text),
                DurationError::UnknownUnit { unit: unit.into() },
                "{text:?}"
            );
        }
        for text in [
            "-1s", "+1s", "ms", "sec", ".5s", "1.s", "1..5s", "1.2.3s", ".", "1.", " 1s",
        ] {
            assert_eq!(err(text), DurationError::BadNumber, "{text:?}");
        }
        assert_eq!(err("1.0001us"), DurationError::TooPrecise);
        assert_eq!(err("0.00000000000001h"), DurationError::TooPrecise);
        assert_eq!(err("18446744073709551616us"), DurationError::TooLarge);
        assert_eq!(
            err("99999999999999999999999999999999999999999s"),
            DurationError::TooLarge
        );
    }

    #[test]
    fn the_largest_duration_fits() {
        assert_eq!(ok("18446744073.709551615s"), Duration::from_nanos(u64::MAX));
        assert_eq!(
            parse_duration("18446744073.709551616s"),
            Err(DurationError::TooLarge)
        );
    }

    #[test]
    fn display_uses_the_grammar() {
        let show = |d: Duration| DisplayDuration(d).to_string();
        assert_eq!(show(Duration::ZERO), "0s");
        assert_eq!(show(Duration::from_secs(7_200)), "2h");
        assert_eq!(show(Duration::from_secs(5_400)), "90m");
        assert_eq!(show(Duration::from_secs(20)), "20s");
        assert_eq!(show(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(show(Duration::from_millis(80)), "80ms");
        assert_eq!(show(Duration::from_micros(2_500)), "2.5ms");
        assert_eq!(show(Duration::from_micros(250)), "250us");
        assert_eq!(show(Duration::from_nanos(1_001)), "1.001us");
        assert_eq!(show(Duration::from_nanos(5)), "0.005us");
    }

    #[test]
    fn what_is_shown_parses_back() {
        let samples = [
            0,
            5,
            999,
            1_000,
            1_001,
            2_500_000,
            80_000_000,
            1_500_000_000,
            61_000_000_000,
        ];
        for nanos in samples
            .into_iter()
            .chain([3_600_000_000_000, 5_400_000_000_000, u64::MAX])
        {
            let d = Duration::from_nanos(nanos);
            assert_eq!(ok(&DisplayDuration(d).to_string()), d);
        }
    }
}
