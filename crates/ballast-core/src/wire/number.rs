//! Numbers as the headers write them: whole numbers (`1*DIGIT`) and decimals, read exactly.
//!
//! Decimals are read digit by digit into integer nanoseconds, never through `f64`: `0.1` is exactly 100 ms,
//! and no value can round into a panic (`Duration::from_secs_f64` panics on overflow). The grammar is the one
//! the OpenAI SDKs' float printers and parsers agree on — `1*DIGIT [ "." 1*DIGIT ] [ ("e" / "E") [ "+" / "-" ]
//! 1*DIGIT ]` — because Python prints `str(1e-05)` with an exponent. No sign, no `.5`, no `5.`, no hex.

use std::time::Duration;

use super::Malformation;

const NANOS_PER_SEC: u128 = 1_000_000_000;
/// Exponents beyond this are clamped: any nonzero digit then overflows or floors to zero anyway.
const EXPONENT_CLAMP: i64 = 1_000_000;

/// Which way a decimal that does not fall on a whole nanosecond goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Round {
    /// Towards zero: a deadline never grows by reading it.
    Down,
    /// Away from zero: a retry hint never shrinks by reading it ("never retry earlier than the server asked").
    Up,
}

/// The value without the optional whitespace (`OWS = *( SP / HTAB )`) RFC 9110 §5.6.3 allows around it.
/// Any other whitespace (CR, LF, vertical tab, Unicode spaces) is left in place and makes the value malformed.
pub(super) fn trim_ows(value: &str) -> &str {
    value.trim_matches([' ', '\t'])
}

/// A whole number: `1*DIGIT`, leading zeros allowed, at most `u64::MAX`.
pub(super) fn parse_whole(s: &str) -> Result<u64, Malformation> {
    if s.is_empty() {
        return Err(Malformation::Empty);
    }
    let mut acc: u64 = 0;
    for &b in s.as_bytes() {
        if !b.is_ascii_digit() {
            return Err(classify_non_number(s));
        }
        acc = acc
            .checked_mul(10)
            .and_then(|a| a.checked_add(u64::from(b - b'0')))
            .ok_or(Malformation::Overflow)?;
    }
    Ok(acc)
}

/// A decimal number of some unit as a [`Duration`]; `unit_nanos_exp` is the unit in powers of ten of a
/// nanosecond (9 for seconds, 6 for milliseconds).
pub(super) fn parse_decimal(s: &str, unit_nanos_exp: i64, round: Round) -> Result<Duration, Malformation> {
    if s.is_empty() {
        return Err(Malformation::Empty);
    }
    let decimal = Decimal::split(s.as_bytes()).ok_or_else(|| classify_non_number(s))?;
    let nanos = decimal.scaled(unit_nanos_exp, round)?;
    nanos_to_duration(nanos)
}

/// A count of nanoseconds as a duration, if it fits (`u64` seconds).
pub(super) fn nanos_to_duration(nanos: u128) -> Result<Duration, Malformation> {
    let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| Malformation::Overflow)?;
    // The remainder of a division by 10^9 is below 10^9 and fits a u32.
    let subsec = (nanos % NANOS_PER_SEC) as u32;
    Ok(Duration::new(secs, subsec))
}

/// Why a value that is not a number is not one: a sign, a float printer's `NaN`/`inf`, or anything else.
fn classify_non_number(s: &str) -> Malformation {
    if let Some(rest) = s.strip_prefix('-')
        && Decimal::split(rest.as_bytes()).is_some()
    {
        return Malformation::Negative;
    }
    let unsigned = s.strip_prefix(['-', '+']).unwrap_or(s);
    if ["nan", "inf", "infinity"]
        .iter()
        .any(|w| unsigned.eq_ignore_ascii_case(w))
    {
        return Malformation::NotFinite;
    }
    Malformation::Syntax
}

/// A decimal split into its digits: value = 0.(int)(frac) x 10^(int.len() + exp).
struct Decimal<'a> {
    int: &'a [u8],
    frac: &'a [u8],
    exp: i64,
}

impl<'a> Decimal<'a> {
    fn split(s: &'a [u8]) -> Option<Self> {
        let digits_from = |from: usize| from + s[from..].iter().take_while(|b| b.is_ascii_digit()).count();
        let int_end = digits_from(0);
        if int_end == 0 {
            return None;
        }
        let mut at = int_end;
        let mut frac: &[u8] = &[];
        if s.get(at) == Some(&b'.') {
            let frac_end = digits_from(at + 1);
            if frac_end == at + 1 {
                return None;
            }
            frac = &s[at + 1..frac_end];
            at = frac_end;
        }
        let mut exp = 0;
        if matches!(s.get(at), Some(b'e' | b'E')) {
            at += 1;
            let negative = s.get(at) == Some(&b'-');
            if matches!(s.get(at), Some(b'-' | b'+')) {
                at += 1;
            }
            let exp_end = digits_from(at);
            if exp_end == at {
                return None;
            }
            let magnitude = s[at..exp_end].iter().fold(0_i64, |acc, b| {
                (acc * 10 + i64::from(b - b'0')).min(EXPONENT_CLAMP)
            });
            exp = if negative { -magnitude } else { magnitude };
            at = exp_end;
        }
        (at == s.len()).then_some(Decimal {
            int: &s[..int_end],
            frac,
            exp,
        })
    }

    /// The value in units of 10^-`scale` of the written unit, rounded as asked.
    fn scaled(&self, scale: i64, round: Round) -> Result<u128, Malformation> {
        let digits = self.int.iter().chain(self.frac).map(|b| b - b'0');
        let count = self.int.len() + self.frac.len();
        // Position of the decimal point within the digit string once scaled; may lie outside it.
        let point = i64::try_from(self.int.len())
            .unwrap_or(i64::MAX)
            .saturating_add(self.exp)
            .saturating_add(scale);
        let kept = usize::try_from(point).unwrap_or(0).min(count);
        let mut acc: u128 = 0;
        for d in digits.clone().take(kept) {
            acc = acc
                .checked_mul(10)
                .and_then(|a| a.checked_add(u128::from(d)))
                .ok_or(Malformation::Overflow)?;
        }
        if acc != 0 {
            let zeros = point.saturating_sub(i64::try_from(count).unwrap_or(i64::MAX));
            for _ in 0..zeros.max(0) {
                // Stops at the first overflow, so at most ~39 rounds whatever the exponent.
                acc = acc.checked_mul(10).ok_or(Malformation::Overflow)?;
            }
        }
        let dropped = digits.skip(kept).any(|d| d != 0);
        if dropped && round == Round::Up {
            acc = acc.checked_add(1).ok_or(Malformation::Overflow)?;
        }
        Ok(acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECS: i64 = 9;
    const MILLIS: i64 = 6;

    fn secs(s: &str) -> Result<Duration, Malformation> {
        parse_decimal(s, SECS, Round::Down)
    }

    #[test]
    fn ows_is_spaces_and_tabs_only() {
        assert_eq!(trim_ows(" \t12\t "), "12");
        assert_eq!(trim_ows("\n12"), "\n12");
        assert_eq!(trim_ows("\u{a0}12"), "\u{a0}12");
    }

    #[test]
    fn whole_numbers() {
        assert_eq!(parse_whole("0"), Ok(0));
        assert_eq!(parse_whole("007"), Ok(7));
        assert_eq!(parse_whole("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_whole("18446744073709551616"), Err(Malformation::Overflow));
        assert_eq!(parse_whole(""), Err(Malformation::Empty));
        assert_eq!(parse_whole("-1"), Err(Malformation::Negative));
        assert_eq!(parse_whole("+1"), Err(Malformation::Syntax));
        assert_eq!(parse_whole("1.5"), Err(Malformation::Syntax));
        assert_eq!(parse_whole("1 2"), Err(Malformation::Syntax));
        assert_eq!(parse_whole("١"), Err(Malformation::Syntax)); // Arabic-Indic one: not ASCII
    }

    #[test]
    fn decimals_are_exact() {
        assert_eq!(secs("600.0"), Ok(Duration::from_secs(600)));
        assert_eq!(secs("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(secs("0.1"), Ok(Duration::from_millis(100)));
        assert_eq!(secs("1e-05"), Ok(Duration::from_micros(10)));
        assert_eq!(secs("1.5E+2"), Ok(Duration::from_secs(150)));
        assert_eq!(secs("0e999999999999999"), Ok(Duration::ZERO));
        assert_eq!(secs("000.000"), Ok(Duration::ZERO));
        assert_eq!(
            parse_decimal("1.5", MILLIS, Round::Down),
            Ok(Duration::from_micros(1500))
        );
    }

    #[test]
    fn rounding_below_a_nanosecond() {
        assert_eq!(secs("1.0000000019"), Ok(Duration::new(1, 1)));
        assert_eq!(
            parse_decimal("1.0000000011", SECS, Round::Up),
            Ok(Duration::new(1, 2))
        );
        assert_eq!(
            parse_decimal("1.0000000010", SECS, Round::Up),
            Ok(Duration::new(1, 1))
        );
        assert_eq!(
            parse_decimal("1e-99999999999", SECS, Round::Up),
            Ok(Duration::new(0, 1))
        );
        assert_eq!(secs("1e-99999999999"), Ok(Duration::ZERO));
    }

    #[test]
    fn decimal_overflow_is_an_error() {
        assert_eq!(secs("18446744073709551615.999999999"), Ok(Duration::MAX));
        assert_eq!(secs("18446744073709551616"), Err(Malformation::Overflow));
        assert_eq!(secs("1e20"), Err(Malformation::Overflow));
        assert_eq!(secs("1e99999999999999999999"), Err(Malformation::Overflow));
        assert_eq!(secs(&"9".repeat(100)), Err(Malformation::Overflow));
    }

    #[test]
    fn decimal_malformations_are_classified() {
        assert_eq!(secs(""), Err(Malformation::Empty));
        assert_eq!(secs("-0.5"), Err(Malformation::Negative));
        assert_eq!(secs("NaN"), Err(Malformation::NotFinite));
        assert_eq!(secs("inf"), Err(Malformation::NotFinite));
        assert_eq!(secs("-Infinity"), Err(Malformation::NotFinite));
        for bad in [
            ".5", "5.", "1e", "1e+", "1.2.3", "0x10", "+1", "1_000", "1,5", "--1", "- 1", "e5",
        ] {
            assert_eq!(secs(bad), Err(Malformation::Syntax), "{bad}");
        }
    }
}
