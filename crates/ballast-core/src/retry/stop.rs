//! Why a call stopped: a reason a caller can match, print, and map to a stable error code.

use std::fmt;
use std::time::Duration;

use crate::{DeadlineExceeded, ErrorCode};

/// Why the retry decision stopped a call that failed.
///
/// Each reason maps to a stable [`ErrorCode`] ([`code`](StopReason::code)); its `Display` says what happened and
/// what the caller can do. The shell answers with the last upstream error (or the code's fixed status) and
/// `x-should-retry: <should_retry_header()>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// The wait before the next attempt would not leave the reserve and `min_attempt` before the deadline.
    Deadline(DeadlineExceeded),
    /// A side-effecting call to an upstream that does not deduplicate (`none`) lost its answer after sending:
    /// the side effect may or may not have happened.
    OutcomeUnknown {
        /// Whether the attempt timed out (`false`: the connection failed).
        timed_out: bool,
    },
    /// A side-effecting call got an answer that does not say whether the operation happened: the upstream said
    /// its outcome is unknown, or an upstream that does not deduplicate (`none`) answered a 5xx that may come after
    /// the commit. Never re-sent automatically.
    OutcomeUnknownAnswer {
        /// The upstream's status.
        status: u16,
    },
    /// The upstream's answer is not in the retryable set (a 4xx such as 400, 401, 404, 422).
    NotRetryable {
        /// The upstream's status.
        status: u16,
    },
    /// The upstream said `x-should-retry: false`.
    UpstreamSaidNoRetry {
        /// The upstream's status.
        status: u16,
    },
    /// A side-effecting call to an upstream that does not deduplicate (`none`) got a retryable error answer: the
    /// upstream may have acted, and a retry could act again.
    NotDeduplicated {
        /// The upstream's status.
        status: u16,
    },
    /// A side-effecting call to an upstream that stores errors per key (`keyed_replays_errors`) got a 5xx: a
    /// retry with the same key would replay the same 5xx.
    StoredError {
        /// The upstream's status.
        status: u16,
    },
    /// The upstream's quota is spent (`insufficient_quota`): waiting does not help.
    InsufficientQuota {
        /// The upstream's status (usually 429).
        status: u16,
    },
    /// The request does not fit the model's context window.
    ContextLengthExceeded {
        /// The upstream's status (usually 400).
        status: u16,
    },
    /// The upstream asked for a wait longer than `max_retry_after`.
    RetryAfterTooLong {
        /// The wait asked for.
        asked: Duration,
        /// The longest wait the policy accepts.
        max: Duration,
    },
    /// The failure was retryable, but the request came from a layer that retries itself (another Ballast, an SDK
    /// already retrying): retries happen at exactly one layer, so this one made a single attempt. Only chosen
    /// when a retry here would otherwise have gone ahead (attempts, deadline, run allowance and budget allowed
    /// it); else the call stops with the reason that would have stopped that retry.
    RetriesAtCaller,
    /// The call made `max_attempts` attempts.
    AttemptsExhausted {
        /// Attempts made.
        attempts: u32,
    },
    /// The upstream's retry budget refused the retry.
    RetryBudgetExhausted,
    /// The run's retry allowance (`ballast-run-id`) is spent.
    RunAllowanceExhausted,
    /// The upstream's adaptive throttle refused the retry before it was sent: the upstream refused most recent
    /// attempts for load. The call ends with the last real answer.
    Throttled,
    /// The deployment's account limits (requests or tokens per minute) had no room for the retry before the
    /// deadline. The call ends with the last real answer.
    Limited,
}

impl StopReason {
    /// The stable error code of DESIGN.md's "Error answers" this reason answers with.
    pub const fn code(&self) -> ErrorCode {
        match self {
            StopReason::Deadline(_) => ErrorCode::DeadlineExceeded,
            StopReason::OutcomeUnknown { .. } | StopReason::OutcomeUnknownAnswer { .. } => {
                ErrorCode::OutcomeUnknown
            }
            StopReason::RetryBudgetExhausted => ErrorCode::RetryBudgetExhausted,
            StopReason::RunAllowanceExhausted => ErrorCode::RunAllowanceExhausted,
            StopReason::NotRetryable { .. }
            | StopReason::UpstreamSaidNoRetry { .. }
            | StopReason::NotDeduplicated { .. }
            | StopReason::StoredError { .. }
            | StopReason::InsufficientQuota { .. }
            | StopReason::ContextLengthExceeded { .. }
            | StopReason::RetryAfterTooLong { .. }
            | StopReason::RetriesAtCaller
            | StopReason::Throttled
            | StopReason::Limited
            | StopReason::AttemptsExhausted { .. } => ErrorCode::UpstreamError,
        }
    }

    /// What the gateway tells its own caller in `x-should-retry`.
    ///
    /// `false` for every reason but one: Ballast spent the retries, the deadline passed, the outcome is unknown,
    /// or a retry cannot help. The exception is [`StopReason::RetriesAtCaller`]: the failure was retryable and the
    /// caller is the layer that retries, so it is told `true` — with `false` no layer would retry at all.
    pub const fn should_retry_header(&self) -> bool {
        matches!(self, StopReason::RetriesAtCaller)
    }

    /// Whether a model route moves to its next deployment (DESIGN.md, "Fallback"): on exhausted retries, a
    /// refused budget or allowance, a `Retry-After` too long, or insufficient quota — and on a wait that does not
    /// fit before the deadline while an attempt still does (the fallback needs no wait). Not when the deadline
    /// cannot hold an attempt (the fallback shares it), on an answer another deployment would give too
    /// (`NotRetryable`), on a context-length error (the route's opt-in handling decides), nor on
    /// [`RetriesAtCaller`](StopReason::RetriesAtCaller): an attempt at the fallback is a second attempt made by
    /// this layer, which is exactly what the one-layer rule forbids; the caller, told `x-should-retry: true`, is
    /// the layer that tries again (and reaches the fallback itself once the primary's breaker opens).
    pub fn moves_to_fallback(&self) -> bool {
        match self {
            StopReason::Deadline(exceeded) => exceeded.attempt_fits(),
            _ => matches!(
                self,
                StopReason::AttemptsExhausted { .. }
                    | StopReason::RetryBudgetExhausted
                    | StopReason::RunAllowanceExhausted
                    | StopReason::RetryAfterTooLong { .. }
                    | StopReason::InsufficientQuota { .. }
                    | StopReason::Throttled
                    | StopReason::Limited
            ),
        }
    }

    /// The reason's short stable name, for machines (logs, metrics, a report's JSON): `deadline`,
    /// `attempts_exhausted`, ... — never renamed.
    pub const fn as_str(&self) -> &'static str {
        match self {
            StopReason::Deadline(_) => "deadline",
            StopReason::OutcomeUnknown { .. } => "outcome_unknown",
            StopReason::OutcomeUnknownAnswer { .. } => "outcome_unknown_answer",
            StopReason::NotRetryable { .. } => "not_retryable",
            StopReason::UpstreamSaidNoRetry { .. } => "upstream_said_no_retry",
            StopReason::NotDeduplicated { .. } => "not_deduplicated",
            StopReason::StoredError { .. } => "stored_error",
            StopReason::InsufficientQuota { .. } => "insufficient_quota",
            StopReason::ContextLengthExceeded { .. } => "context_length_exceeded",
            StopReason::RetryAfterTooLong { .. } => "retry_after_too_long",
            StopReason::RetriesAtCaller => "retries_at_caller",
            StopReason::AttemptsExhausted { .. } => "attempts_exhausted",
            StopReason::RetryBudgetExhausted => "retry_budget_exhausted",
            StopReason::RunAllowanceExhausted => "run_allowance_exhausted",
            StopReason::Throttled => "throttled",
            StopReason::Limited => "limited",
        }
    }

    /// The upstream's status when the reason is about its answer.
    pub const fn status(&self) -> Option<u16> {
        match self {
            StopReason::NotRetryable { status }
            | StopReason::OutcomeUnknownAnswer { status }
            | StopReason::UpstreamSaidNoRetry { status }
            | StopReason::NotDeduplicated { status }
            | StopReason::StoredError { status }
            | StopReason::InsufficientQuota { status }
            | StopReason::ContextLengthExceeded { status } => Some(*status),
            _ => None,
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::Deadline(exceeded) => exceeded.fmt(f),
            StopReason::OutcomeUnknown { timed_out } => write!(
                f,
                "outcome unknown: the attempt {} after the request was sent, and the upstream does not deduplicate \
                 requests (upstream_idempotency = none), so the side effect may or may not have happened; it is \
                 not retried automatically: check the operation before trying again",
                if *timed_out { "timed out" } else { "lost its connection" }
            ),
            StopReason::OutcomeUnknownAnswer { status } => write!(
                f,
                "outcome unknown: the upstream answered {status} after the request was sent, which does not say \
                 whether the side effect happened (the upstream said its outcome is unknown, or it does not \
                 deduplicate requests and a {status} may come after the commit); it is not retried automatically: \
                 check the operation before trying again"
            ),
            StopReason::NotRetryable { status } => write!(
                f,
                "upstream error: the upstream answered {status}, which a retry cannot fix; correct the request"
            ),
            StopReason::UpstreamSaidNoRetry { status } => write!(
                f,
                "upstream error: the upstream answered {status} with x-should-retry: false; retrying will not help"
            ),
            StopReason::NotDeduplicated { status } => write!(
                f,
                "upstream error: the upstream answered {status} and does not deduplicate requests \
                 (upstream_idempotency = none), so it may have acted and a retry could act twice; check the \
                 operation before trying again, or set upstream_idempotency = \"keyed\" if it honours Idempotency-Key"
            ),
            StopReason::StoredError { status } => write!(
                f,
                "upstream error: the upstream answered {status} and stores answers per Idempotency-Key \
                 (upstream_idempotency = keyed_replays_errors), so a retry with the same key would replay the same \
                 error; use a new key only once you know the operation did not happen"
            ),
            StopReason::InsufficientQuota { status } => write!(
                f,
                "upstream error: the upstream answered {status} insufficient_quota; waiting will not help: add \
                 quota to the account or use another deployment"
            ),
            StopReason::ContextLengthExceeded { status } => write!(
                f,
                "upstream error: the upstream answered {status}: the request does not fit the model's context \
                 window; shorten it or use a model with a larger context"
            ),
            StopReason::RetryAfterTooLong { asked, max } => write!(
                f,
                "upstream error: the upstream asked to wait {} ms before retrying, more than max_retry_after \
                 ({} ms); try again later or use another deployment",
                asked.as_millis(),
                max.as_millis()
            ),
            StopReason::RetriesAtCaller => f.write_str(
                "upstream error: the failure is retryable, but this request came from a layer that retries itself \
                 (ballast-hop or x-stainless-retry-count), so Ballast made one attempt; the caller may retry",
            ),
            StopReason::AttemptsExhausted { attempts } => write!(
                f,
                "upstream error: gave up after {attempts} attempts (max_attempts); the upstream kept failing: try \
                 again later"
            ),
            StopReason::RetryBudgetExhausted => f.write_str(
                "retry budget exhausted: the upstream's retry budget refused another retry (too many retries \
                 against it recently), so the last upstream error is returned; try again later",
            ),
            StopReason::RunAllowanceExhausted => f.write_str(
                "run allowance exhausted: the calls of this run (one agent request) have used the retries it \
                 allows them, so the last upstream error is returned; a new agent request starts a new run",
            ),
            StopReason::Throttled => f.write_str(
                "throttled: the upstream refused most recent attempts for load, so the retry was refused here \
                 before it was sent (adaptive throttling) and the last upstream error is returned; try again later",
            ),
            StopReason::Limited => f.write_str(
                "limited: the deployment's account limits (requests or tokens per minute, shared by every \
                 instance) had no room for the retry before the deadline, so it was not sent and the last \
                 upstream error is returned; try again later",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Deadline, Instant};

    const MS: Duration = Duration::from_millis(1);

    fn every_reason() -> Vec<StopReason> {
        let deadline = Deadline::after(Instant::ZERO, 100 * MS);
        let exceeded = deadline.check_wait(500 * MS, Instant::ZERO).unwrap_err(); // an attempt still fits
        vec![
            StopReason::Deadline(exceeded),
            StopReason::OutcomeUnknown { timed_out: true },
            StopReason::OutcomeUnknownAnswer { status: 500 },
            StopReason::NotRetryable { status: 404 },
            StopReason::UpstreamSaidNoRetry { status: 503 },
            StopReason::NotDeduplicated { status: 503 },
            StopReason::StoredError { status: 500 },
            StopReason::InsufficientQuota { status: 429 },
            StopReason::ContextLengthExceeded { status: 400 },
            StopReason::RetryAfterTooLong {
                asked: 90_000 * MS,
                max: 60_000 * MS,
            },
            StopReason::RetriesAtCaller,
            StopReason::AttemptsExhausted { attempts: 3 },
            StopReason::RetryBudgetExhausted,
            StopReason::RunAllowanceExhausted,
        ]
    }

    #[test]
    fn codes_headers_and_fallbacks_follow_design() {
        use ErrorCode::*;
        let table: Vec<_> = every_reason()
            .iter()
            .map(|r| (r.code(), r.should_retry_header(), r.moves_to_fallback()))
            .collect();
        assert_eq!(
            table,
            [
                (DeadlineExceeded, false, true),
                (OutcomeUnknown, false, false),
                (OutcomeUnknown, false, false),
                (UpstreamError, false, false),
                (UpstreamError, false, false),
                (UpstreamError, false, false),
                (UpstreamError, false, false),
                (UpstreamError, false, true),
                (UpstreamError, false, false),
                (UpstreamError, false, true),
                (UpstreamError, true, false),
                (UpstreamError, false, true),
                (RetryBudgetExhausted, false, true),
                (RunAllowanceExhausted, false, true),
            ]
        );
    }

    #[test]
    fn no_fallback_when_the_deadline_cannot_hold_an_attempt() {
        let deadline = Deadline::after(Instant::ZERO, 99 * MS);
        let exceeded = deadline.check_wait(Duration::ZERO, Instant::ZERO).unwrap_err();
        assert!(!StopReason::Deadline(exceeded).moves_to_fallback());
    }

    #[test]
    fn messages_say_what_happened_and_what_to_do() {
        let messages: Vec<String> = every_reason().iter().map(ToString::to_string).collect();
        for m in &messages {
            assert!(m.contains(';') || m.contains(':'), "{m}");
        }
        assert!(
            messages[0].starts_with("deadline exceeded: 100 ms left"),
            "{}",
            messages[0]
        );
        assert!(messages[1].contains("timed out") && messages[1].contains("check the operation"));
        assert!(messages[2].contains("answered 500") && messages[2].contains("check the operation"));
        assert!(messages[3].contains("answered 404"));
        assert!(messages[9].contains("90000 ms") && messages[9].contains("(60000 ms)"));
        assert!(messages[11].contains("after 3 attempts"));
        assert!(
            !messages[13].contains("ballast-run-id"),
            "the library's words, not the gateway's"
        );
        for m in &messages {
            assert!(!m.contains("Some(") && !m.contains("None"), "no Debug forms: {m}");
        }
        let names: std::collections::HashSet<_> = every_reason().iter().map(StopReason::as_str).collect();
        assert_eq!(names.len(), every_reason().len(), "one name a reason");
        assert!(
            StopReason::OutcomeUnknown { timed_out: false }
                .to_string()
                .contains("lost its connection")
        );
    }

    #[test]
    fn status_is_reported_for_answers_only() {
        assert_eq!(StopReason::StoredError { status: 502 }.status(), Some(502));
        assert_eq!(StopReason::RetryBudgetExhausted.status(), None);
        assert_eq!(StopReason::OutcomeUnknown { timed_out: true }.status(), None);
    }
}
