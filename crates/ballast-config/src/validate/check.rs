//! [`Checker`]: collects every error with its path, and reads one value at a time with its default.
//!
//! Each reader reports what is wrong and returns `None`, so the caller keeps going (to find the next error) and
//! skips the cross-field rules that involve a value already reported.

use std::str::FromStr;
use std::time::Duration;

use ballast_core::UnknownName;

use crate::error::{ConfigError, Problem};
use crate::raw::HumanValue;
use crate::{format_duration, parse_duration, parse_size};

/// `prefix.key`, or `key` at the top level.
pub(crate) fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

/// `prefix[index]`.
pub(crate) fn index(prefix: &str, index: usize) -> String {
    format!("{prefix}[{index}]")
}

/// A duration as the file wrote it (without quotes), or in canonical form when it was left to its default.
pub(crate) fn written(raw: Option<&HumanValue>, value: Duration) -> String {
    raw.map_or_else(|| format_duration(value).to_string(), HumanValue::bare)
}

/// What a duration must be besides well-formed.
#[derive(Clone, Copy)]
pub(crate) enum DurationRule {
    /// Zero is fine.
    Any,
    /// More than zero.
    Positive,
    /// From `min` to `max`, both included; the text says so as the docs do (`between 1s and 7d`).
    Within(Duration, Duration, &'static str),
}

/// Collected errors.
#[derive(Default)]
pub(crate) struct Checker {
    errors: Vec<ConfigError>,
}

impl Checker {
    pub(crate) fn report(&mut self, path: impl Into<String>, problem: Problem) {
        self.errors.push(ConfigError::Invalid {
            path: path.into(),
            problem,
            line: None,
        });
    }

    pub(crate) fn into_errors(self) -> Vec<ConfigError> {
        self.errors
    }

    /// A duration, or `default` when omitted.
    pub(crate) fn duration(
        &mut self,
        path: &str,
        raw: Option<&HumanValue>,
        default: Duration,
        rule: DurationRule,
    ) -> Option<Duration> {
        let Some(raw) = raw else { return Some(default) };
        // A bare number fails here with "units are required".
        let duration = match parse_duration(&raw.bare()) {
            Ok(duration) => duration,
            Err(reason) => {
                let value = raw.to_string();
                self.report(path, Problem::NotADuration { value, reason });
                return None;
            }
        };
        let must_be = match rule {
            DurationRule::Any => None,
            DurationRule::Positive => duration.is_zero().then(|| "more than zero".to_owned()),
            DurationRule::Within(min, max, rule) => {
                (!(min..=max).contains(&duration)).then(|| rule.to_owned())
            }
        };
        match must_be {
            Some(must_be) => {
                let value = raw.to_string();
                self.report(path, Problem::Range { value, must_be });
                None
            }
            None => Some(duration),
        }
    }

    /// A size in bytes (more than zero), or `default` when omitted.
    pub(crate) fn size(&mut self, path: &str, raw: Option<&HumanValue>, default: u64) -> Option<u64> {
        let Some(raw) = raw else { return Some(default) };
        match parse_size(&raw.bare()) {
            Ok(0) => {
                let must_be = "more than zero".to_owned();
                self.report(
                    path,
                    Problem::Range {
                        value: raw.to_string(),
                        must_be,
                    },
                );
                None
            }
            // A bare number never gets here: it has no unit, which is an error.
            Ok(bytes) => Some(bytes),
            Err(reason) => {
                let value = raw.to_string();
                self.report(path, Problem::NotASize { value, reason });
                None
            }
        }
    }

    /// A whole number in `min..=u32::MAX`, or `default` when omitted.
    pub(crate) fn int(&mut self, path: &str, raw: Option<i64>, default: u32, min: u32) -> Option<u32> {
        self.int_in(path, raw, default, min, u32::MAX)
    }

    /// A whole number in `min..=max`, or `default` when omitted.
    pub(crate) fn int_in(
        &mut self,
        path: &str,
        raw: Option<i64>,
        default: u32,
        min: u32,
        max: u32,
    ) -> Option<u32> {
        let Some(raw) = raw else { return Some(default) };
        let must_be = if raw < i64::from(min) {
            format!("at least {min}")
        } else if raw > i64::from(max) {
            format!("at most {max}")
        } else {
            // In range just above: min..=max fits a u32.
            return u32::try_from(raw).ok();
        };
        self.report(
            path,
            Problem::Range {
                value: raw.to_string(),
                must_be,
            },
        );
        None
    }

    /// A number that `ok` accepts (NaN never is), or `default` when omitted.
    pub(crate) fn float(
        &mut self,
        path: &str,
        raw: Option<f64>,
        default: f64,
        ok: fn(f64) -> bool,
        must_be: &str,
    ) -> Option<f64> {
        let Some(raw) = raw else { return Some(default) };
        if !raw.is_nan() && ok(raw) {
            return Some(raw);
        }
        let must_be = must_be.to_owned();
        self.report(
            path,
            Problem::Range {
                value: raw.to_string(),
                must_be,
            },
        );
        None
    }

    /// A configuration word (`critical`, `full`...), or `default` when omitted.
    pub(crate) fn word<T: FromStr<Err = UnknownName>>(
        &mut self,
        path: &str,
        raw: Option<&String>,
        default: T,
    ) -> Option<T> {
        let Some(raw) = raw else { return Some(default) };
        match raw.parse() {
            Ok(word) => Some(word),
            Err(unknown) => {
                self.report(path, Problem::NotOneOf(unknown));
                None
            }
        }
    }
}

/// Asks a ballast-core constructor (`build`) about a table's settings, reporting every value it refuses.
///
/// ballast-core stops at its first refusal. So each refusal goes to `repair`, which reports it at its field and
/// puts that value back to its default (or returns `false` for a refusal it cannot place), and ballast-core is
/// asked again: at most once per value, plus once. The result is `Some` only when the first ask succeeded, so a
/// table with any refused value yields nothing (and the config, which has errors, is never returned).
pub(crate) fn ask_core<S, T, E>(
    settings: &mut S,
    values: usize,
    build: impl Fn(&S) -> Result<T, E>,
    mut repair: impl FnMut(&mut S, E) -> bool,
) -> Option<T> {
    for ask in 0..=values {
        match build(settings) {
            Ok(built) => return (ask == 0).then_some(built),
            Err(error) => {
                if !repair(settings, error) {
                    return None;
                }
            }
        }
    }
    None
}
