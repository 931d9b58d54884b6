//! Configuration words (`full`, `critical_plus`, `keyed`...) parsed with one error type.

/// A name that is not one of the accepted ones (for every `FromStr` of a configuration word in this crate).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not one of {}", expected.join(", "))]
pub struct UnknownName {
    /// What was given.
    pub value: String,
    /// What is accepted.
    pub expected: &'static [&'static str],
}

impl UnknownName {
    pub(crate) fn new(value: &str, expected: &'static [&'static str]) -> Self {
        UnknownName {
            value: value.to_owned(),
            expected,
        }
    }
}
