//! The one error type of the Ballast stack.
//!
//! Every layer of the tool stack and every transport returns [`Error`], so layers compose in any order and a
//! caller matches one enum. Each variant says what happened in terms the caller can act on, maps to a stable
//! [`ErrorCode`] (DESIGN.md, "Error answers"), and tells the retry decision what kind of attempt outcome it was
//! ([`Error::attempt_outcome`]).

use std::fmt;
use std::time::Duration;

use ballast_core::{AttemptOutcome, DeadlineExceeded, ErrorCode, StopReason};

/// A boxed error from below (a transport, a body).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a call was refused for overload with nothing sent: [`Error::Overloaded`]'s reason, and the value of the
/// `ballast-shed` header ([`as_str`](Self::as_str)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Overload {
    /// The upstream's queue is full of work of the same or a higher class: nothing below the call could make room.
    QueueFull,
    /// The call was pushed out of a full queue by a call of a higher class.
    Evicted,
    /// The deadline would pass before the call could finish: the expected wait for a slot plus the typical
    /// latency is longer than what is left.
    DeadlineTooShort,
    /// The upstream's adaptive throttle refused it: the upstream has been refusing most requests (DESIGN.md,
    /// "Overload").
    Throttled,
    /// The deployment's account limits (requests or tokens per minute) have no room before the deadline would
    /// need the attempt (`models.deployments.limits`; DESIGN.md "Many instances").
    Limited,
}

impl Overload {
    /// The value of the `ballast-shed` header and the `reason` label of `ballast_shed_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overload::QueueFull => "queue_full",
            Overload::Evicted => "evicted",
            Overload::DeadlineTooShort => "deadline_too_short",
            Overload::Throttled => "throttled",
            Overload::Limited => "limit",
        }
    }

    /// Whether a later try may find room: refused for room or by the throttle, not because the deadline
    /// cannot hold the wait (a retry cannot help that).
    pub fn for_room(self) -> bool {
        !matches!(self, Overload::DeadlineTooShort)
    }
}

impl fmt::Display for Overload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a call failed without an upstream answer to return.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The deadline passed, or what is left cannot hold another attempt or wait.
    #[error(transparent)]
    DeadlineExceeded(#[from] DeadlineExceeded),
    /// Shed by admission: the upstream's queue is full or the call could not be served before its deadline.
    #[error("overloaded ({reason}); {}", retry_hint(*retry_after))]
    Overloaded {
        /// Why (the `ballast-shed` header's value).
        reason: Overload,
        /// When a retry may find room.
        retry_after: Option<Duration>,
    },
    /// The upstream's circuit breaker is open: nothing was sent.
    #[error("circuit open: the upstream is failing, nothing was sent; {} or use a fallback", retry_hint(*retry_in))]
    CircuitOpen {
        /// Time left open, when known.
        retry_in: Option<Duration>,
    },
    /// An attempt was sent and got no answer within its timeout.
    #[error("{}", describe_timeout(*after, *by_deadline))]
    Timeout {
        /// The attempt's timeout.
        after: Duration,
        /// Whether the attempt's timeout was what the caller's deadline left, shorter than the per-try timeout (and
        /// than a model route's share of the time for the deployment): the caller's own deadline ended the
        /// attempt, which says nothing about the upstream's health — the breaker and the throttle do not count it
        /// (DESIGN.md, "Circuit breaker"). `false` for the per-try timeout and the route's share.
        by_deadline: bool,
    },
    /// The transport failed. `sent: false` when the request provably never left (connection refused, DNS,
    /// TLS handshake): retrying it is always safe.
    #[error("transport error ({}): {source}", if *sent { "after sending" } else { "never sent" })]
    Transport {
        /// Whether the request may have reached the upstream.
        sent: bool,
        /// The underlying error.
        source: BoxError,
    },
    /// The retry decision stopped the call without an upstream answer to return (for example an attempt that
    /// timed out on a side-effecting tool whose upstream does not deduplicate: the outcome is unknown).
    #[error("{0}")]
    Stopped(StopReason),
    /// A request or response body was larger than allowed.
    #[error("body over the {limit}-byte limit")]
    BodyTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The caller cancelled the call.
    #[error("cancelled by the caller")]
    Cancelled,
}

/// A timeout in words: the per-try timeout's, or the caller's deadline's.
fn describe_timeout(after: Duration, by_deadline: bool) -> String {
    let ms = after.as_millis();
    if by_deadline {
        format!("the call's deadline arrived {ms} ms into the attempt, before an answer")
    } else {
        format!("the attempt timed out after {ms} ms without an answer")
    }
}

/// When a retry may help, in words: `retry in 1.25 s`, or `retry later` when nobody knows.
fn retry_hint(after: Option<Duration>) -> String {
    match after {
        Some(after) => format!("retry in {:.2} s", after.as_secs_f64()),
        None => "retry later".to_owned(),
    }
}

impl Error {
    /// The stable code of DESIGN.md's "Error answers".
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::DeadlineExceeded(_) => ErrorCode::DeadlineExceeded,
            Error::Overloaded { .. } => ErrorCode::Overloaded,
            Error::CircuitOpen { .. } => ErrorCode::CircuitOpen,
            Error::Stopped(reason) => reason.code(),
            Error::Timeout { .. }
            | Error::Transport { .. }
            | Error::BodyTooLarge { .. }
            | Error::Cancelled => ErrorCode::UpstreamError,
        }
    }

    /// What this error means to the retry decision, when it is an attempt's outcome: never sent, a timeout, or
    /// a transport error after sending. `None` for errors that are not about an attempt (local rejections).
    pub fn attempt_outcome(&self) -> Option<AttemptOutcome> {
        match self {
            Error::Timeout { .. } => Some(AttemptOutcome::Timeout),
            Error::Transport { sent: false, .. } => Some(AttemptOutcome::NeverSent),
            Error::Transport { sent: true, .. } => Some(AttemptOutcome::TransportError),
            _ => None,
        }
    }

    /// Whether the attempt that ended with this error may have reached the upstream — and so, for a side
    /// effect, may have acted. Only the errors that prove it never left say no: a transport error before sending
    /// (connection refused, DNS, TLS), and the local refusals (an open circuit, a deadline that could not hold the
    /// attempt, a shed). A timeout, a reset, a body that failed or was too large, an attempt its caller left while
    /// it ran (cancelled) may all have reached it.
    ///
    /// The one rule behind every judgement of "was it sent": the report's `sent`, "outcome unknown", the
    /// fallback that must not repeat a side effect, the retry given back when its attempt never went out.
    pub fn may_have_reached_upstream(&self) -> bool {
        match self {
            Error::Transport { sent, .. } => *sent,
            Error::DeadlineExceeded(_) | Error::Overloaded { .. } | Error::CircuitOpen { .. } => false,
            Error::Timeout { .. } | Error::Stopped(_) | Error::BodyTooLarge { .. } | Error::Cancelled => true,
        }
    }

    /// An attempt's timeout after `after`, the per-try one (`by_deadline: false`).
    pub fn timeout(after: Duration) -> Self {
        Error::Timeout {
            after,
            by_deadline: false,
        }
    }

    /// Whether this is an attempt ended by its caller's deadline rather than by the upstream (see
    /// [`Error::Timeout`]): neither the breaker nor the throttle counts it.
    pub fn cut_by_deadline(&self) -> bool {
        matches!(
            self,
            Error::Timeout {
                by_deadline: true,
                ..
            }
        )
    }

    /// A transport error.
    pub fn transport(sent: bool, source: impl Into<BoxError>) -> Self {
        Error::Transport {
            sent,
            source: source.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_errors_map_to_outcomes_and_codes() {
        let never = Error::transport(false, "connection refused");
        assert_eq!(never.attempt_outcome(), Some(AttemptOutcome::NeverSent));
        assert!(never.to_string().contains("never sent"));
        let after = Error::transport(true, "reset");
        assert_eq!(after.attempt_outcome(), Some(AttemptOutcome::TransportError));
        let timeout = Error::timeout(Duration::from_secs(1));
        assert_eq!(timeout.attempt_outcome(), Some(AttemptOutcome::Timeout));
        assert_eq!(Error::CircuitOpen { retry_in: None }.attempt_outcome(), None);
        assert_eq!(
            Error::CircuitOpen { retry_in: None }.code(),
            ErrorCode::CircuitOpen
        );
        let unknown = Error::Stopped(StopReason::OutcomeUnknown { timed_out: true });
        assert_eq!(unknown.code(), ErrorCode::OutcomeUnknown);
    }

    #[test]
    fn only_errors_that_prove_nothing_left_say_it_never_reached_the_upstream() {
        let never = [
            Error::transport(false, "connection refused"),
            Error::CircuitOpen { retry_in: None },
            Error::Overloaded {
                reason: Overload::QueueFull,
                retry_after: None,
            },
        ];
        assert!(never.iter().all(|e| !e.may_have_reached_upstream()));
        let maybe = [
            Error::transport(true, "reset"),
            Error::timeout(Duration::from_secs(1)),
            Error::BodyTooLarge { limit: 8 },
            Error::Cancelled,
        ];
        assert!(maybe.iter().all(Error::may_have_reached_upstream));
    }
}
