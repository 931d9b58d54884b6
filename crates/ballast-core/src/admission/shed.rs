//! Why a request was refused, and what the shell answers with.

use std::fmt;
use std::time::Duration;

use crate::{ErrorCode, Priority};

/// Why admission refused a request or dropped a waiter. The `ballast-shed` header carries [`ShedReason::as_str`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShedReason {
    /// The queue is full of work of the same or a higher class: nothing below the newcomer could make room.
    QueueFull,
    /// The waiter was pushed out of a full queue by a request of a higher class.
    Evicted,
    /// The deadline would pass before the call could finish: `remaining` is shorter than `expected`, the
    /// estimated wait for a slot plus the typical latency.
    DeadlineTooShort {
        /// Time left until the deadline when the decision was made.
        remaining: Duration,
        /// The estimated wait for a slot plus the typical latency.
        expected: Duration,
    },
    /// The deadline passed before a slot was free (answered as `deadline_exceeded`, not `overloaded`).
    Expired,
}

impl ShedReason {
    /// Every value [`ShedReason::as_str`] gives, one per reason: the gateway registers `ballast_shed_total` at
    /// zero with each, so an alert sees a first shed rise from 0.
    pub const NAMES: [&'static str; 4] = ["queue_full", "evicted", "deadline_too_short", "expired"];

    /// The value of the `ballast-shed` header and the `reason` label of `ballast_shed_total`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ShedReason::QueueFull => "queue_full",
            ShedReason::Evicted => "evicted",
            ShedReason::DeadlineTooShort { .. } => "deadline_too_short",
            ShedReason::Expired => "expired",
        }
    }

    /// The stable error code of the answer: `overloaded` (503), or `deadline_exceeded` (504) for
    /// [`ShedReason::Expired`].
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ShedReason::Expired => ErrorCode::DeadlineExceeded,
            ShedReason::QueueFull | ShedReason::Evicted | ShedReason::DeadlineTooShort { .. } => {
                ErrorCode::Overloaded
            }
        }
    }

    /// Whether the request was refused to make or keep room for other work (`queue_full`, `evicted`): the
    /// sheds that must never hit a higher class while a lower one waits.
    pub fn is_for_room(&self) -> bool {
        matches!(self, ShedReason::QueueFull | ShedReason::Evicted)
    }
}

impl fmt::Display for ShedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShedReason::QueueFull => f.write_str(
                "the upstream is at its concurrency limit and its queue is full of work at least as important; \
                 retry after the suggested delay or send less",
            ),
            ShedReason::Evicted => f.write_str(
                "the request waited for a slot but was pushed out by more important work; retry after the \
                 suggested delay",
            ),
            ShedReason::DeadlineTooShort { remaining, expected } => write!(
                f,
                "the request had {remaining:?} left but would need about {expected:?} (wait for a slot plus \
                 the upstream's typical latency); retry later or with a longer deadline"
            ),
            ShedReason::Expired => f.write_str(
                "the deadline passed while the request waited for a slot; it was not sent upstream",
            ),
        }
    }
}

/// A request admission refused or dropped: the shell's waiter handle back, with what to answer it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a shed request must be answered"]
pub struct Shed<T> {
    /// The handle the shell offered (answer it: the request will not run).
    pub item: T,
    /// The request's class (the `priority` label of `ballast_shed_total`).
    pub priority: Priority,
    /// Why.
    pub reason: ShedReason,
    /// The suggested `Retry-After`: the time the work now in the system needs to drain (see
    /// [`Admission`](crate::Admission)).
    /// `None` for [`ShedReason::Expired`]: the deadline has passed, retrying cannot help.
    pub retry_after: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_are_stable() {
        let too_short = ShedReason::DeadlineTooShort {
            remaining: Duration::from_millis(10),
            expected: Duration::from_millis(30),
        };
        let cases = [
            (ShedReason::QueueFull, "queue_full", ErrorCode::Overloaded, true),
            (ShedReason::Evicted, "evicted", ErrorCode::Overloaded, true),
            (too_short, "deadline_too_short", ErrorCode::Overloaded, false),
            (ShedReason::Expired, "expired", ErrorCode::DeadlineExceeded, false),
        ];
        for (reason, name, code, for_room) in cases {
            assert_eq!(reason.as_str(), name);
            assert_eq!(reason.error_code(), code);
            assert_eq!(reason.is_for_room(), for_room);
        }
        let names: Vec<&str> = cases.iter().map(|case| case.0.as_str()).collect();
        assert_eq!(names, ShedReason::NAMES, "NAMES lists every reason, once");
    }

    #[test]
    fn deadline_message_says_what_was_left_and_needed() {
        let reason = ShedReason::DeadlineTooShort {
            remaining: Duration::from_millis(10),
            expected: Duration::from_millis(30),
        };
        let message = reason.to_string();
        assert!(message.contains("10ms") && message.contains("30ms"), "{message}");
    }
}
