//! Sizes written for people: `"8MiB"`, `"512KiB"`, `"1MB"`.
//!
//! Grammar (docs/config.md, "Sizes"): `digits unit`, no spaces, a whole number. Both unit families are accepted
//! with their standard meaning, so a value means what it says: IEC binary units `KiB`, `MiB`, `GiB`, `TiB`
//! (powers of 1024) and SI decimal units `kB` (or `KB`), `MB`, `GB`, `TB` (powers of 1000), and `B` for bytes.
//! A bare number is refused: `"8"` could mean bytes or mebibytes, and a wrong guess is a 1 MiB-versus-1 B bug.

use std::fmt;

const UNITS: [(&str, u64); 10] = [
    ("B", 1),
    ("kB", 1_000),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

/// Why a text is not a size.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SizeError {
    /// Nothing was written.
    #[error("it is empty")]
    Empty,
    /// A number with no unit, such as `"8"`.
    #[error("a unit is required (e.g. \"{number}B\" or \"{number}MiB\")")]
    MissingUnit {
        /// The number as written.
        number: String,
    },
    /// A unit this grammar does not know (including lower-case `b`, which would read as bits).
    #[error("unknown unit {unit:?} (use B, KiB, MiB, GiB, TiB, kB, MB, GB or TB)")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
    },
    /// Not a plain whole number (a sign, a fraction, a space).
    #[error("write a whole number followed by a unit, e.g. \"512KiB\"")]
    NotWhole,
    /// More than `u64::MAX` bytes.
    #[error("it is too large")]
    TooLarge,
}

/// Parses a size in bytes.
///
/// ```
/// use ballast_human::parse_size;
///
/// assert_eq!(parse_size("8MiB"), Ok(8 * 1024 * 1024));
/// assert_eq!(parse_size("1MB"), Ok(1_000_000));
/// assert!(parse_size("8").is_err()); // a unit is required
/// ```
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    if text.is_empty() {
        return Err(SizeError::Empty);
    }
    let digits_len = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_len);
    if digits.is_empty() || !unit.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(SizeError::NotWhole);
    }
    if unit.is_empty() {
        return Err(SizeError::MissingUnit {
            number: digits.to_owned(),
        });
    }
    let (_, multiplier) =
        UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .ok_or_else(|| SizeError::UnknownUnit {
                unit: unit.to_owned(),
            })?;
    let number: u64 = digits.parse().map_err(|_| SizeError::TooLarge)?;
    number.checked_mul(*multiplier).ok_or(SizeError::TooLarge)
}

/// A size in its canonical spelling: the largest IEC unit that divides it, else the largest SI unit that does,
/// else bytes (`"8MiB"`, `"1MB"`, `"1500B"`). [`parse_size`] reads it back to the same value.
///
/// ```
/// use ballast_human::format_size;
///
/// assert_eq!(format_size(8 * 1024 * 1024).to_string(), "8MiB");
/// ```
pub fn format_size(bytes: u64) -> impl fmt::Display {
    HumanSize(bytes)
}

struct HumanSize(u64);

impl fmt::Display for HumanSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes = self.0;
        // Preference: IEC from the largest, then SI from the largest; `kB` is the SI spelling we print.
        let preferred = ["TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "kB"];
        for name in preferred {
            let Some((_, unit)) = UNITS.iter().find(|(n, _)| *n == name) else {
                continue;
            };
            if bytes != 0 && bytes.is_multiple_of(*unit) {
                return write!(f, "{}{name}", bytes / unit);
            }
        }
        write!(f, "{bytes}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn both_unit_families_mean_what_they_say() {
        let cases = [
            ("0B", 0),
            ("1500B", 1_500),
            ("512KiB", 512 * 1024),
            ("8MiB", 8 << 20),
            ("2GiB", 2 << 30),
            ("1TiB", 1 << 40),
            ("1kB", 1_000),
            ("1KB", 1_000),
            ("1MB", 1_000_000),
            ("3GB", 3_000_000_000),
            ("1TB", 1_000_000_000_000),
        ];
        for (text, bytes) in cases {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        use SizeError::*;
        let cases = [
            ("", Empty),
            ("8", MissingUnit { number: "8".into() }),
            ("8mib", UnknownUnit { unit: "mib".into() }),
            ("8Mb", UnknownUnit { unit: "Mb".into() }),
            ("8M", UnknownUnit { unit: "M".into() }),
            ("1.5MiB", NotWhole),
            ("-1MiB", NotWhole),
            ("8 MiB", NotWhole),
            ("MiB", NotWhole),
            ("99999999999999999999B", TooLarge),
            ("17179869184GiB", TooLarge),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_size(text), Err(expected), "{text:?}");
        }
        assert_eq!(
            parse_size("8").unwrap_err().to_string(),
            "a unit is required (e.g. \"8B\" or \"8MiB\")"
        );
    }

    #[test]
    fn canonical_spelling() {
        let cases = [
            (0, "0B"),
            (1_500, "1500B"),
            (8 << 20, "8MiB"),
            (1_000_000, "1MB"),
            (1_024_000, "1000KiB"),
            (2_000, "2kB"),
        ];
        for (bytes, text) in cases {
            assert_eq!(format_size(bytes).to_string(), text);
        }
    }

    proptest! {
        #[test]
        fn formatting_reads_back(bytes: u64) {
            let text = format_size(bytes).to_string();
            prop_assert_eq!(parse_size(&text), Ok(bytes), "{}", text);
        }
    }
}
