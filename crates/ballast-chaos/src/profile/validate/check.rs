//! Checks of single values: rates, durations, `Retry-After`, statuses, script steps, names. Each records its
//! problem at the path it is given and returns `None` for a value it refused.

use std::time::Duration;

use crate::profile::error::{Problem, Problems};
use crate::profile::{RetryAfterForm, ScriptStep, Window};
use ballast_human::{DurationError, parse_duration};

/// A rate: a finite number in `0..=1`.
pub(super) fn rate(problems: &mut Problems, path: String, value: f64) -> Option<f64> {
    if (0.0..=1.0).contains(&value) {
        Some(value)
    } else {
        problems.push(path, Problem::NotARate { value });
        None
    }
}

/// A duration string (ballast-human's grammar, the same as `ballast.toml`'s).
pub(super) fn duration(problems: &mut Problems, path: String, value: &toml::Value) -> Option<Duration> {
    let parsed = match value {
        toml::Value::String(text) => parse_duration(text),
        toml::Value::Integer(n) => Err(DurationError::MissingUnit {
            number: n.to_string(),
        }),
        toml::Value::Float(x) => Err(DurationError::MissingUnit {
            number: x.to_string(),
        }),
        _ => {
            let value = value.to_string();
            problems.push(path, Problem::DurationNotAString { value });
            return None;
        }
    };
    parsed
        .map_err(|reason| {
            let value = value.to_string();
            problems.push(path, Problem::NotADuration { value, reason });
        })
        .ok()
}

/// `"1s"` or `{ seconds = "1s" }` (delta-seconds), or `{ http_date = "2s" }` (an HTTP-date that far ahead); whole
/// seconds either way, since both forms of the header carry seconds.
pub(super) fn retry_after(
    problems: &mut Problems,
    path: &str,
    value: &toml::Value,
) -> Option<RetryAfterForm> {
    let (path, text, date) = match value {
        toml::Value::String(_) | toml::Value::Integer(_) | toml::Value::Float(_) => {
            (path.to_owned(), value, false)
        }
        toml::Value::Table(table) if table.len() == 1 => match table.iter().next() {
            Some((key, inner)) if key == "seconds" => (format!("{path}.seconds"), inner, false),
            Some((key, inner)) if key == "http_date" => (format!("{path}.http_date"), inner, true),
            Some((key, inner)) if key == "millis" => {
                let wait = duration(problems, format!("{path}.millis"), inner)?;
                return Some(RetryAfterForm::Millis(
                    wait.as_millis().try_into().unwrap_or(u64::MAX),
                ));
            }
            _ => return not_a_retry_after(problems, path, value),
        },
        _ => return not_a_retry_after(problems, path, value),
    };
    let wait = duration(problems, path.clone(), text)?;
    if wait.subsec_nanos() != 0 {
        problems.push(path, Problem::NotWholeSeconds { value: wait });
        return None;
    }
    Some(if date {
        RetryAfterForm::HttpDate(wait)
    } else {
        RetryAfterForm::Seconds(wait.as_secs())
    })
}

/// A window `{ start, end }` at `at`, `end` after `start`.
pub(super) fn window(
    problems: &mut Problems,
    at: &str,
    start: &toml::Value,
    end: &toml::Value,
) -> Option<Window> {
    let start = duration(problems, format!("{at}.start"), start);
    let end = duration(problems, format!("{at}.end"), end);
    let (start, end) = (start?, end?);
    if end <= start {
        problems.push(at.to_owned(), Problem::OutageEndsBeforeStart { start, end });
        return None;
    }
    Some(Window { start, end })
}

fn not_a_retry_after(problems: &mut Problems, path: &str, value: &toml::Value) -> Option<RetryAfterForm> {
    let value = value.to_string();
    problems.push(path, Problem::NotARetryAfter { value });
    None
}

/// An `errors` key: an error status written canonically (`503`, not `0503`).
pub(super) fn error_status(problems: &mut Problems, path: String, key: &str) -> Option<u16> {
    match key.parse::<u16>() {
        Ok(status) if (400..=599).contains(&status) && status.to_string() == key => Some(status),
        _ => {
            problems.push(path, Problem::NotAnErrorStatus { key: key.into() });
            None
        }
    }
}

/// A script step: `"ok"`, `"hang"`, `"reset"`, `"commit_then_lose"`, `"insufficient_quota"`, `"spend_limit"`,
/// `"stream_error"`, `"garbage"`, `"is_error"`, or an error status as text or number.
pub(super) fn step(problems: &mut Problems, path: String, value: &toml::Value) -> Option<ScriptStep> {
    let status = |n: i64| {
        u16::try_from(n)
            .ok()
            .filter(|s| (400..=599).contains(s))
            .map(ScriptStep::Status)
    };
    let step = match value {
        toml::Value::String(text) => match text.as_str() {
            "ok" => Some(ScriptStep::Ok),
            "hang" => Some(ScriptStep::Hang),
            "reset" => Some(ScriptStep::Reset),
            "commit_then_lose" => Some(ScriptStep::CommitThenLose),
            "insufficient_quota" => Some(ScriptStep::InsufficientQuota),
            "spend_limit" => Some(ScriptStep::SpendLimit),
            "stream_error" => Some(ScriptStep::StreamError),
            "garbage" => Some(ScriptStep::Garbage),
            "is_error" => Some(ScriptStep::IsError),
            digits if digits.bytes().all(|b| b.is_ascii_digit()) && !digits.starts_with('0') => {
                digits.parse().ok().and_then(status)
            }
            _ => None,
        },
        toml::Value::Integer(n) => status(*n),
        _ => None,
    };
    if step.is_none() {
        let value = value.to_string();
        problems.push(path, Problem::NotAStep { value });
    }
    step
}

/// An endpoint name: 1 to 64 of `A-Z a-z 0-9 _ -` (OpenAI's rule for function names, so a tool's endpoint is
/// named as the model calls it).
pub(super) fn endpoint_name(problems: &mut Problems, path: String, name: &str) {
    let fits = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !fits {
        problems.push(path, Problem::NotAnEndpointName { name: name.into() });
    }
}
