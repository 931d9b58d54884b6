//! Why a profile is refused. Every error names the field's path and the value as written, so the person who
//! wrote the profile can find it: `endpoints.create_refund.errors.503: 1.5 is not a rate (0..=1)`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use ballast_human::{DurationError, format_duration};

/// A profile that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not TOML, an unknown key, or a value of the wrong type. Parsing stops at the first of these.
    #[error("{}", syntax(path, message, *line, *column))]
    Syntax {
        /// The key's path (`endpoints.create_refund.hnag`), empty when the error is not inside a key.
        path: String,
        /// What the parser said, on one line (for an unknown key: the key and the keys its table knows).
        message: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// 1-based column (in characters), when known.
        column: Option<usize>,
    },
    /// Values that break the profile's rules: every one of them, one per line.
    #[error("{}", lines(problems))]
    Invalid {
        /// The broken rules, in the order of the profile (never empty).
        problems: Vec<FieldError>,
    },
    /// A preset name that does not exist.
    #[error("unknown preset {name:?} (known presets: {})", super::Profile::PRESETS.join(", "))]
    UnknownPreset {
        /// The name asked for.
        name: String,
    },
}

fn syntax(path: &str, message: &str, line: Option<usize>, column: Option<usize>) -> String {
    let mut text = if path.is_empty() {
        message.to_owned()
    } else {
        format!("{path}: {message}")
    };
    if let (Some(line), Some(column)) = (line, column) {
        text.push_str(&format!(" (line {line}, column {column})"));
    }
    text
}

fn lines(problems: &[FieldError]) -> String {
    let lines: Vec<String> = problems.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

/// One value that breaks a rule, and where it is.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct FieldError {
    /// The field's path: `endpoints.model.latency`, `scripts[0].steps[2]`.
    pub path: String,
    /// What is wrong with it.
    pub problem: Problem,
}

/// What is wrong with a value.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// A rate outside `0..=1`, or not a number.
    #[error("{value} is not a rate (0..=1)")]
    NotARate {
        /// The rate as read.
        value: f64,
    },
    /// The mutually exclusive rates of one endpoint add up to more than 1.
    #[error("rates sum to {}, over 1 ({})", Rate(*sum), parts(rates))]
    RatesOverOne {
        /// Their sum.
        sum: f64,
        /// Each non-zero rate, by its key (`errors.503`, `hang`, `stream.cut`, `stream.error`).
        rates: Vec<(String, f64)>,
    },
    /// A latency whose 99th percentile is below its median.
    #[error("p99 ({}) is under p50 ({})", format_duration(*p99), format_duration(*p50))]
    P99UnderP50 {
        /// The median.
        p50: Duration,
        /// The 99th percentile.
        p99: Duration,
    },
    /// A duration that must be above zero is zero (a median latency, a keep-alive interval).
    #[error("must be above 0s")]
    Zero,
    /// A stall of 0s (or none given) for a stream whose stall rate is above 0.
    #[error("must be above 0s when stall > 0")]
    ZeroStall,
    /// A count that must be at least 1 is 0 (concurrency, context size, `stream.error_after_chunks`).
    #[error("0 must be at least 1")]
    ZeroCount,
    /// A chunk count of 0 for a stream fault whose rate is above 0.
    #[error("0 must be at least 1 when {rate} > 0")]
    ZeroChunks {
        /// The rate's key (`cut`, `stall`).
        rate: &'static str,
    },
    /// Not a duration.
    #[error("{value} is not a duration: {reason}")]
    NotADuration {
        /// The value as written (quoted if text).
        value: String,
        /// Why.
        reason: DurationError,
    },
    /// A duration written as something other than a string (a boolean, a table, ...).
    #[error("{value} is not a duration: expected a string such as \"40ms\"")]
    DurationNotAString {
        /// The value as written.
        value: String,
    },
    /// A `Retry-After` that is not a whole number of seconds (the header carries seconds).
    #[error("{} is not a whole number of seconds (Retry-After carries seconds)", format_duration(*value))]
    NotWholeSeconds {
        /// The duration.
        value: Duration,
    },
    /// A `retry_after` of the wrong shape.
    #[error(
        "{value} is not a Retry-After (write \"1s\", {{ seconds = \"1s\" }} or {{ http_date = \"2s\" }})"
    )]
    NotARetryAfter {
        /// The value as written.
        value: String,
    },
    /// An `errors` key that is not an error status.
    #[error("{key:?} is not an error status (a number in 400..=599)")]
    NotAnErrorStatus {
        /// The key as written.
        key: String,
    },
    /// An outage that ends before it starts.
    #[error("end ({}) is not after start ({})", format_duration(*end), format_duration(*start))]
    OutageEndsBeforeStart {
        /// Its start.
        start: Duration,
        /// Its end.
        end: Duration,
    },
    /// A script step that is not one.
    #[error(
        "{value} is not a step (ok, hang, reset, commit_then_lose, insufficient_quota, spend_limit, stream_error, \
         garbage, is_error or a status in 400..=599)"
    )]
    NotAStep {
        /// The step as written.
        value: String,
    },
    /// An endpoint name outside 1 to 64 of `A-Z a-z 0-9 _ -`.
    #[error("{name:?} is not an endpoint name (1 to 64 of A-Z, a-z, 0-9, _ and -)")]
    NotAnEndpointName {
        /// The name.
        name: String,
    },
    /// A text or list that must not be empty is.
    #[error("must not be empty")]
    Empty,
    /// A second script for the same endpoint and operation (only the first would ever be used).
    #[error("same endpoint and op as scripts[{first}]")]
    DuplicateScript {
        /// Index of the first script.
        first: usize,
    },
}

/// A rate or a sum of rates, without the float noise of a sum (`0.30000000000000004` shows as `0.3`).
struct Rate(f64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", (self.0 * 1e9).round() / 1e9)
    }
}

fn parts(rates: &[(String, f64)]) -> String {
    let parts: Vec<String> = rates
        .iter()
        .map(|(key, rate)| format!("{key} = {}", Rate(*rate)))
        .collect();
    parts.join(", ")
}

/// Collects the problems of one validation pass.
#[derive(Default)]
pub(super) struct Problems(pub(super) Vec<FieldError>);

impl Problems {
    /// Records `problem` at `path`.
    pub(super) fn push(&mut self, path: impl Into<String>, problem: Problem) {
        self.0.push(FieldError {
            path: path.into(),
            problem,
        });
    }

    /// `Ok(value)` when nothing was recorded, else every problem.
    pub(super) fn into_result<T>(self, value: T) -> Result<T, ProfileError> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(ProfileError::Invalid { problems: self.0 })
        }
    }
}
