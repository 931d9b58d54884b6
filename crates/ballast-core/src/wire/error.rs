//! The one error of the wire forms: a header value that does not have its header's form.

use std::fmt;

use super::{
    BALLAST_TIMEOUT_MS, ENVOY_EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT, RETRY_AFTER, RETRY_AFTER_MS,
    STAINLESS_READ_TIMEOUT, STAINLESS_TIMEOUT, X_SHOULD_RETRY,
};

/// How many bytes of an offending value an error keeps: enough to recognise it in a log or a 400 body, not
/// enough to let a client echo kilobytes through our error answers.
const KEPT_VALUE_BYTES: usize = 64;

/// A header value Ballast cannot read. The gateway answers it with a 400 that names the header and the value
/// (DESIGN.md, "Deadline": "A malformed value is a 400 naming the header and the value").
///
/// ```
/// use ballast_core::{DeadlineHeader, Malformation, WireError};
///
/// let err = DeadlineHeader::GrpcTimeout.parse("12x").unwrap_err();
/// assert!(matches!(err, WireError::Malformed { header: "grpc-timeout", why: Malformation::UnknownUnit, .. }));
/// assert_eq!(
///     err.to_string(),
///     r#"grpc-timeout: "12x" is not a gRPC timeout (1-8 digits then one of H M S m u n): unknown unit"#
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The value of `header` does not have the form the header requires.
    Malformed {
        /// The header's name, lowercase (one of this module's header constants).
        header: &'static str,
        /// The value as received, cut to its first 64 bytes (on a character boundary) when longer.
        value: String,
        /// What is wrong with it.
        why: Malformation,
    },
}

impl WireError {
    pub(super) fn malformed(header: &'static str, value: &str, why: Malformation) -> Self {
        WireError::Malformed {
            header,
            value: kept(value).to_owned(),
            why,
        }
    }

    /// The header the error is about.
    pub fn header(&self) -> &'static str {
        match self {
            WireError::Malformed { header, .. } => header,
        }
    }

    /// The form the header's value must have, in words (`a gRPC timeout (1-8 digits then one of H M S m u n)`).
    pub fn expected(&self) -> &'static str {
        expected_form(self.header())
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Malformed { header, value, why } => {
                write!(f, "{header}: {value:?} is not {}", self.expected())?;
                match why.detail() {
                    Some(detail) => write!(f, ": {detail}"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// What is wrong with a malformed header value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Malformation {
    /// Nothing but optional whitespace.
    Empty,
    /// Not of the header's form (a letter where a digit belongs, a stray character, inner whitespace...).
    Syntax,
    /// A number with a minus sign: no header here takes a negative value.
    Negative,
    /// `NaN` or an infinity, which some float printers produce.
    NotFinite,
    /// A number too large to be a duration (or, for whole numbers, too large for 64 bits).
    Overflow,
    /// A `grpc-timeout` with more than the 8 digits the gRPC spec allows.
    TooManyDigits,
    /// A `grpc-timeout` whose last character is a letter other than `H M S m u n`.
    UnknownUnit,
}

impl Malformation {
    /// The words added after the expected form, if any.
    fn detail(self) -> Option<&'static str> {
        match self {
            Malformation::Syntax => None,
            Malformation::Empty => Some("empty"),
            Malformation::Negative => Some("negative"),
            Malformation::NotFinite => Some("not a finite number"),
            Malformation::Overflow => Some("too large"),
            Malformation::TooManyDigits => Some("more than 8 digits"),
            Malformation::UnknownUnit => Some("unknown unit"),
        }
    }
}

fn expected_form(header: &str) -> &'static str {
    match header {
        BALLAST_TIMEOUT_MS | ENVOY_EXPECTED_RQ_TIMEOUT_MS => "a whole number of milliseconds",
        GRPC_TIMEOUT => "a gRPC timeout (1-8 digits then one of H M S m u n)",
        STAINLESS_TIMEOUT => "a whole number of seconds",
        STAINLESS_READ_TIMEOUT => "a non-negative decimal number of seconds",
        RETRY_AFTER => "a Retry-After (delta-seconds or an HTTP-date)",
        RETRY_AFTER_MS => "a non-negative decimal number of milliseconds",
        X_SHOULD_RETRY => "true or false",
        _ => "a valid value",
    }
}

/// The first `KEPT_VALUE_BYTES` of `value`, cut on a character boundary.
fn kept(value: &str) -> &str {
    if value.len() <= KEPT_VALUE_BYTES {
        return value;
    }
    let mut end = KEPT_VALUE_BYTES;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_names_the_header_the_value_and_the_form() {
        let err = WireError::malformed(GRPC_TIMEOUT, "12x", Malformation::Syntax);
        assert_eq!(
            err.to_string(),
            r#"grpc-timeout: "12x" is not a gRPC timeout (1-8 digits then one of H M S m u n)"#
        );
        let err = WireError::malformed(BALLAST_TIMEOUT_MS, "-5", Malformation::Negative);
        assert_eq!(
            err.to_string(),
            r#"ballast-timeout-ms: "-5" is not a whole number of milliseconds: negative"#
        );
        assert_eq!(err.header(), BALLAST_TIMEOUT_MS);
    }

    #[test]
    fn control_characters_are_escaped_in_the_message() {
        let err = WireError::malformed(X_SHOULD_RETRY, "tr\nue", Malformation::Syntax);
        assert_eq!(
            err.to_string(),
            r#"x-should-retry: "tr\nue" is not true or false"#
        );
    }

    #[test]
    fn long_values_are_cut_on_a_character_boundary() {
        let long = format!("{}é{}", "1".repeat(63), "2".repeat(500));
        let WireError::Malformed { value, .. } =
            WireError::malformed(GRPC_TIMEOUT, &long, Malformation::Syntax);
        assert_eq!(value, "1".repeat(63));
        let WireError::Malformed { value, .. } =
            WireError::malformed(GRPC_TIMEOUT, "1S x", Malformation::Syntax);
        assert_eq!(value, "1S x");
    }
}
