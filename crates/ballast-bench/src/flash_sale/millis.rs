//! Durations in the JSON: milliseconds, fractional (`null` for none) — one place for every report's fields.

use std::time::Duration;

use serde::Serializer;

/// Serializes a duration as milliseconds (fractional).
pub(super) fn millis<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64() * 1000.0)
}

/// Serializes a duration as milliseconds, `null` for none.
pub(super) fn millis_opt<S: Serializer>(
    duration: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match duration {
        Some(duration) => millis(duration, serializer),
        None => serializer.serialize_none(),
    }
}
