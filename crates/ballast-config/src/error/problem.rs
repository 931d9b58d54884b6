//! [`Problem`]: what is wrong with one value, worded for the person who wrote it.

use ballast_core::{InvalidBackoff, InvalidBreaker, InvalidBudget, InvalidRetryPolicy, UnknownName};

use crate::{DurationError, SizeError};

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
    /// `defer` on a tool without side effects.
    #[error(
        "only a side-effecting tool can be deferred: its idempotency key is what the operation is kept and \
         answered by, while a read-only call is simply retried by its caller; set side_effects = true if this \
         call changes anything, or remove defer"
    )]
    DeferNeedsSideEffects,
    /// One of two keys that only work together is set without the other.
    #[error("needs {other} too: {reason}")]
    NeedsPair {
        /// The missing key.
        other: &'static str,
        /// Why the two go together.
        reason: &'static str,
    },
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
