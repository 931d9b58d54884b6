//! Configuration errors: every one names the field's path and the offending value.

use std::fmt;
use std::path::PathBuf;

use ballast_core::{InvalidBackoff, InvalidBreaker, InvalidBudget, InvalidRetryPolicy, UnknownName};

use crate::{DurationError, SizeError};

/// Everything wrong with a configuration, in file order where it has one. Never empty.
///
/// Displays one error per line: `tools[2].per_try_timeout: "12x" is not a duration: ...`.
#[derive(Debug)]
pub struct ConfigErrors {
    errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// Wraps errors; `None` when there are none.
    pub(crate) fn from_vec(errors: Vec<ConfigError>) -> Option<Self> {
        (!errors.is_empty()).then_some(ConfigErrors { errors })
    }

    pub(crate) fn one(error: ConfigError) -> Self {
        ConfigErrors { errors: vec![error] }
    }

    /// The errors.
    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }

    /// The errors, owned.
    pub fn into_vec(self) -> Vec<ConfigError> {
        self.errors
    }

    /// The same errors with each path rewritten by `rename`: a config built in code names its fields as its
    /// builder does (`tools[0].concurrency` -> `concurrency`).
    pub fn map_paths(mut self, rename: impl Fn(&str) -> String) -> Self {
        for error in &mut self.errors {
            if let ConfigError::Syntax { path, .. } | ConfigError::Invalid { path, .. } = error {
                *path = rename(path);
            }
        }
        self
    }

    /// Gives each rule error the line its path names in `text`, the file the config was read from.
    pub(crate) fn located(mut self, text: &str) -> Self {
        let lines = crate::lines::Lines::of(text);
        for error in &mut self.errors {
            if let ConfigError::Invalid { path, line, .. } = error
                && line.is_none()
            {
                *line = lines.line(path);
            }
        }
        self
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// One thing wrong with a configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
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
    #[error("{}", SyntaxDisplay { path, message, line: *line, column: *column })]
    Syntax {
        /// The key's path (`tools[1].upstream.urll`), empty when the error is not inside a key.
        path: String,
        /// What the parser said, on one line.
        message: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// 1-based column (in characters), when known.
        column: Option<usize>,
    },
    /// A value that breaks a rule.
    #[error("{path}: {problem}{}", line.map(|line| format!(" (line {line})")).unwrap_or_default())]
    Invalid {
        /// The field's path: `models[0].deployments[1].base_url`.
        path: String,
        /// What is wrong.
        problem: Problem,
        /// The 1-based line of the value in the file (of its table, for a key that is missing), when the config
        /// came from text ([`Config::from_toml_str`](crate::Config::from_toml_str), [`Config::load`](crate::Config::load)).
        line: Option<usize>,
    },
}

impl ConfigError {
    /// The 1-based line in the file it points at, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Syntax { line, .. } | ConfigError::Invalid { line, .. } => *line,
        }
    }

    /// The field's path, when the error has one.
    pub fn path(&self) -> Option<&str> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Syntax { path, .. } | ConfigError::Invalid { path, .. } => {
                (!path.is_empty()).then_some(path.as_str())
            }
        }
    }
}

struct SyntaxDisplay<'a> {
    path: &'a str,
    message: &'a str,
    line: Option<usize>,
    column: Option<usize>,
}

impl fmt::Display for SyntaxDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let location = match (self.line, self.column) {
            (Some(line), Some(column)) => format!("line {line}, column {column}"),
            (Some(line), None) => format!("line {line}"),
            _ => String::new(),
        };
        match (self.path.is_empty(), location.is_empty()) {
            (false, false) => write!(f, "{}: {} ({location})", self.path, self.message),
            (false, true) => write!(f, "{}: {}", self.path, self.message),
            (true, false) => write!(f, "{location}: {}", self.message),
            (true, true) => f.write_str(self.message),
        }
    }
}

/// What is wrong with one value. Messages start with the value as written.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// A required key is missing.
    #[error("is required")]
    Required,
    /// `version` is missing.
    #[error("is missing: a Ballast config starts with the line `version = 1`")]
    MissingVersion,
    /// `version` is not 1.
    #[error("{found} is not supported: this Ballast reads `version = 1`")]
    UnsupportedVersion {
        /// The version as written.
        found: String,
    },
    /// An empty string or list where something is needed.
    #[error("must not be empty")]
    Empty,
    /// Not a duration.
    #[error("{value} is not a duration: {reason}")]
    NotADuration {
        /// The value as written (strings quoted).
        value: String,
        /// Why.
        reason: DurationError,
    },
    /// Not a size.
    #[error("{value} is not a size: {reason}")]
    NotASize {
        /// The value as written (strings quoted).
        value: String,
        /// Why.
        reason: SizeError,
    },
    /// A number or duration outside its range.
    #[error("{value} must be {must_be}")]
    Range {
        /// The value as written.
        value: String,
        /// The rule, e.g. `at least 1`, `between 0 and 1`.
        must_be: String,
    },
    /// A value that must relate to another field's value (`default_timeout <= max_timeout`).
    #[error("{value} must be {must_be} {other} ({other_value})")]
    Relation {
        /// This field's value.
        value: String,
        /// `at most`, `at least`, `more than`.
        must_be: &'static str,
        /// The other field's path (or an expression over fields).
        other: String,
        /// The other side's value.
        other_value: String,
    },
    /// A word that is not one of the accepted ones.
    #[error(transparent)]
    NotOneOf(#[from] UnknownName),
    /// Backoff parameters ballast-core refuses for a reason this crate does not word itself.
    #[error(transparent)]
    Backoff(InvalidBackoff),
    /// A breaker setting ballast-core's builder refuses; the path ends in [`InvalidBreaker::field`]. Displayed
    /// as ballast-core words it, after the field name: `1.5 is not in (0, 1] ...`.
    #[error("{}", breaker_reason(.0))]
    Breaker(InvalidBreaker),
    /// Retry-budget settings ballast-core refuses for a reason this crate does not word itself (the known
    /// ones are reported as [`Problem::Range`] at the field's path).
    #[error(transparent)]
    Budget(InvalidBudget),
    /// A retry policy ballast-core refuses for a reason this crate does not word itself (`max_attempts = 0` is
    /// reported as [`Problem::Range`] at its path).
    #[error(transparent)]
    RetryPolicy(InvalidRetryPolicy),
    /// A name used twice.
    #[error("{name:?} is already used by {first}")]
    Duplicate {
        /// The name.
        name: String,
        /// The path of the first entry with that name.
        first: String,
    },
    /// A name with characters that are not allowed.
    #[error("{value:?} is not a valid name: {rule}")]
    InvalidName {
        /// The name as written.
        value: String,
        /// What a name may be.
        rule: &'static str,
    },
    /// Not an environment variable name.
    #[error(
        "{value:?} is not an environment variable name (ASCII letters, digits and _, not starting with a digit)"
    )]
    InvalidEnvName {
        /// The name as written.
        value: String,
    },
    /// Not a usable URL.
    #[error("{value:?} is not a valid URL: {reason}")]
    InvalidUrl {
        /// The URL as written (credentials hidden).
        value: String,
        /// Why.
        reason: &'static str,
    },
    /// A URL that carries credentials, which belong in the environment.
    #[error("{value:?} contains credentials, which must not be in the config file: {instead}")]
    CredentialsInUrl {
        /// The URL with its credentials replaced by `***`.
        value: String,
        /// What to do instead.
        instead: &'static str,
    },
    /// A store URL with an unsupported scheme.
    #[error(
        "{value:?} is not a supported store URL (use sqlite://PATH, sqlite::memory:, redis://, \
         postgres:// or postgresql://)"
    )]
    UnsupportedStore {
        /// The URL as written (credentials hidden).
        value: String,
    },
    /// Not an IP address and port.
    #[error("{value:?} is not an IP address and port (e.g. \"127.0.0.1:8080\" or \"[::1]:8080\")")]
    InvalidListen {
        /// The value as written.
        value: String,
    },
    /// `server.listen` off loopback with no principal to authenticate callers.
    #[error(
        "{value} is not a loopback address and no [[principals]] are configured: anyone who can reach it could \
         call every tool; add a principal or listen on 127.0.0.1"
    )]
    OpenListen {
        /// The address.
        value: String,
    },
    /// `server.admin_listen` on the address or port of `server.listen`.
    #[error(
        "{value} overlaps server.listen ({listen}): /metrics and /status need an address of their own (another \
         port), or leave admin_listen out to serve them on listen"
    )]
    SharedListen {
        /// The admin address.
        value: String,
        /// `server.listen`.
        listen: String,
    },
    /// Not an HTTP header name.
    #[error(
        "{value:?} is not an HTTP header name (RFC 9110: letters, digits and !#$%&'*+-.^_`|~, at least one)"
    )]
    InvalidHeaderName {
        /// The name as written.
        value: String,
    },
    /// A header Ballast sets itself, or that must never come from the config.
    #[error("{name:?} cannot be configured: {reason}")]
    ReservedHeader {
        /// The name, lower case.
        name: String,
        /// Who sets it.
        reason: &'static str,
    },
    /// A literal header value an HTTP header cannot carry. The value is not repeated: it might be a secret.
    #[error(
        "is not a valid header value: use visible ASCII characters, spaces and tabs (no line breaks or control \
         characters)"
    )]
    InvalidHeaderValue,
    /// A literal value for a header that carries credentials. The value is not repeated.
    #[error(
        "a literal value for {name:?} would put a secret in the config file; secrets belong in the environment: \
         {name} = {{ env = \"VAR\" }} (with prefix = \"Bearer \" for a bearer token)"
    )]
    SecretHeaderLiteral {
        /// The name, lower case.
        name: String,
    },
    /// A header prefix that cannot begin a header value.
    #[error(
        "{value:?} cannot begin a header value: use visible ASCII characters, spaces and tabs (no line breaks or \
         control characters)"
    )]
    InvalidHeaderPrefix {
        /// The prefix as written.
        value: String,
    },
    /// Two keys that exclude each other are both set.
    #[error("cannot be set together with {other}")]
    Conflict {
        /// The other key.
        other: &'static str,
    },
    /// None of the keys of which one is needed is set.
    #[error("needs one of {choices}")]
    MissingOneOf {
        /// The keys, e.g. `key_env or key_hash_env`.
        choices: &'static str,
    },
    /// `fallback_tool` names no configured tool.
    #[error("{name:?} is not a configured tool")]
    UnknownTool {
        /// The name.
        name: String,
    },
    /// `fallback_tool` names its own tool.
    #[error("{name:?} is this tool itself; a tool cannot fall back to itself")]
    SelfFallback {
        /// The name.
        name: String,
    },
    /// Fallback tools that lead back to where they started.
    #[error("fallback cycle: {}", cycle.join(" -> "))]
    FallbackCycle {
        /// The tools on the cycle, the first repeated at the end.
        cycle: Vec<String>,
    },
    /// `upstream_idempotency` set on a tool without side effects.
    #[error(
        "{value:?} only applies to side-effecting tools: set side_effects = true if this call changes \
         anything (then it gets an idempotency key), or remove upstream_idempotency"
    )]
    NeedsSideEffects {
        /// The value as written.
        value: String,
    },
    /// A static `fallback_response` on a tool with side effects: it would report an operation that never ran.
    #[error(
        "a static fallback_response on a tool with side_effects = true would answer as if the operation had run \
         when it did not (a payment reported done); remove it, or use fallback_tool (called only when no attempt \
         of the operation was sent)"
    )]
    StaticFallbackForSideEffects,
    /// `on_overflow = "fallback"` with a single deployment.
    #[error("\"fallback\" needs a second deployment to fall back to")]
    NeedsFallbackDeployment,
    /// An `input_schema` that is not a JSON Schema of an object.
    #[error("is not an object schema: {reason}")]
    NotObjectSchema {
        /// What is wrong.
        reason: &'static str,
    },
    /// A `fallback_response` value JSON cannot hold.
    #[error("{value} cannot be written as JSON")]
    NotJson {
        /// The value.
        value: String,
    },
}

/// ballast-core's reason, which starts with the field's name (`failure_rate: 1.5 is not in (0, 1] ...`), without
/// that name: the config error puts the field's whole path there instead.
fn breaker_reason(error: &InvalidBreaker) -> String {
    match error {
        // ballast-core's advice, "turn the rate trigger off instead of setting 0", is about its builder's
        // `None`; in the file 0 is how the trigger is turned off, so it never reaches the builder.
        InvalidBreaker::FailureRate(rate) => {
            format!("{rate} is not in (0, 1] (0 turns the rate trigger off)")
        }
        other => {
            let message = other.to_string();
            match message
                .strip_prefix(other.field())
                .and_then(|m| m.strip_prefix(": "))
            {
                Some(reason) => reason.to_owned(),
                None => message,
            }
        }
    }
}
