//! What the retry decision is told: one attempt's outcome and the kind of call it belonged to.
//!
//! The shell turns what it saw into these plain values before asking: an error before the request left becomes
//! [`AttemptOutcome::NeverSent`], an HTTP answer becomes a [`ResponseInfo`] (status, `x-should-retry`, the wait
//! the upstream asked for as one `Duration`, and the structured problem code). Wall-clock forms (an HTTP-date
//! `Retry-After`) are converted by the shell; the core never sees a wall clock.

use std::time::Duration;

use super::UpstreamIdempotency;

/// What one attempt came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    /// The request provably never left: connection refused, DNS failure, TLS handshake failure, or a refusal by a
    /// local layer before sending. Always safe to retry.
    NeverSent,
    /// The connection failed after the request was (or may have been) sent: a reset, a broken pipe, a protocol
    /// error. The upstream may have acted.
    TransportError,
    /// The attempt's timeout passed after the request was sent. The upstream may have acted.
    Timeout,
    /// The upstream answered.
    Response(ResponseInfo),
}

impl AttemptOutcome {
    /// An answer with this status and no headers of interest: shorthand for `Response(ResponseInfo::status(s))`.
    pub const fn status(status: u16) -> Self {
        AttemptOutcome::Response(ResponseInfo::status(status))
    }

    /// Whether the upstream's answer is a success (1xx-3xx): the call is done.
    pub const fn is_success(&self) -> bool {
        match self {
            AttemptOutcome::Response(response) => response.is_success(),
            _ => false,
        }
    }
}

/// What the retry decision needs from an upstream's answer.
///
/// Built from the status and then the headers present:
///
/// ```
/// use ballast_core::{ProblemKind, ResponseInfo};
/// use std::time::Duration;
///
/// let answer = ResponseInfo::status(429)
///     .with_retry_after_headers(Some(Duration::from_secs(2)), Some(Duration::from_millis(1500)))
///     .with_problem(ProblemKind::from_code("rate_limit_exceeded"));
/// assert_eq!(answer.retry_after, Some(Duration::from_millis(1500))); // retry-after-ms is more precise
/// assert_eq!(answer.problem, ProblemKind::None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResponseInfo {
    /// The HTTP status.
    pub status: u16,
    /// `x-should-retry: true|false`, when the upstream sent it.
    pub should_retry: Option<bool>,
    /// The wait the upstream asked for (`retry-after-ms`, else `Retry-After` as delta-seconds or HTTP-date
    /// converted by the shell), when it sent one.
    pub retry_after: Option<Duration>,
    /// The structured problem the answer reports, if it is one the decision knows.
    pub problem: ProblemKind,
}

impl ResponseInfo {
    /// An answer with `status` and nothing else of interest.
    pub const fn status(status: u16) -> Self {
        ResponseInfo {
            status,
            should_retry: None,
            retry_after: None,
            problem: ProblemKind::None,
        }
    }

    /// The same answer with `x-should-retry: <should_retry>`.
    pub const fn with_should_retry(mut self, should_retry: bool) -> Self {
        self.should_retry = Some(should_retry);
        self
    }

    /// The same answer asking for a wait of `retry_after` before the next attempt.
    pub const fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }

    /// The same answer with the wait from whichever of the two headers is present. When both are, the
    /// millisecond one (`retry-after-ms`, sent by OpenAI and honoured by its SDKs) wins: it is the more precise
    /// statement of the same wait, and `Retry-After` is whole seconds.
    pub const fn with_retry_after_headers(
        mut self,
        retry_after: Option<Duration>,
        retry_after_ms: Option<Duration>,
    ) -> Self {
        self.retry_after = match retry_after_ms {
            Some(ms) => Some(ms),
            None => retry_after,
        };
        self
    }

    /// The same answer reporting `problem`.
    pub const fn with_problem(mut self, problem: ProblemKind) -> Self {
        self.problem = problem;
        self
    }

    /// Whether the status is a success for the caller (1xx-3xx): nothing to retry.
    pub const fn is_success(&self) -> bool {
        self.status >= 100 && self.status < 400
    }
}

/// A structured problem an answer reports that changes what a retry can do.
///
/// Recognised from structured codes only (a problem+json `type`, an OpenAI-style `error.code`), never from
/// message text: message patterns for providers that only report in text live in their own per-provider module.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProblemKind {
    /// Nothing the decision treats specially.
    #[default]
    None,
    /// Another request with the same idempotency key is still running (`urn:ballast:idempotency_in_progress`,
    /// Stripe's `idempotency_key_in_use`): a 409 with it is worth retrying after the wait asked.
    IdempotencyInProgress,
    /// The account's quota is spent (OpenAI's `insufficient_quota`): waiting does not help; a model route moves
    /// to its next deployment at once.
    InsufficientQuota,
    /// The request does not fit the model's context window (OpenAI's `context_length_exceeded`): the same
    /// request fails the same way; a route may move to a larger-context deployment or truncate.
    ContextLengthExceeded,
    /// The upstream says the operation's outcome is unknown: an idempotency layer's `urn:ballast:outcome_unknown`
    /// (its request was sent and nobody knows whether it acted) or `urn:ballast:handler_panicked` (its handler
    /// failed after the request was dispatched), an OpenAI-style `outcome_unknown` code, or another Ballast's
    /// `ballast-outcome: unknown`. A caller that believes it checks the operation before doing it again.
    OutcomeUnknown,
    /// Another Ballast refused the request before anything ran: `urn:ballast:deadline_exceeded` (no time left),
    /// `urn:ballast:store_unavailable` (its idempotency store could not be asked), `urn:ballast:overloaded`,
    /// `urn:ballast:circuit_open`. Ballast answers `outcome_unknown` whenever a sent attempt may have acted, so a
    /// caller believes these said nothing happened, even as a 5xx from a side effect.
    NotRun,
}

impl ProblemKind {
    /// The problem a structured code names: a problem+json `type` URI or a provider's `error.code`.
    /// Unknown codes are [`ProblemKind::None`].
    pub fn from_code(code: &str) -> Self {
        match code {
            // The spelling of DESIGN.md (`urn:ballast:<code>`), and the hyphens of earlier Ballast versions.
            "urn:ballast:idempotency_in_progress"
            | "urn:ballast:idempotency-in-progress"
            | "idempotency_key_in_use" => ProblemKind::IdempotencyInProgress,
            "urn:ballast:outcome_unknown"
            | "urn:ballast:outcome-unknown"
            | "urn:ballast:handler_panicked"
            | "urn:ballast:handler-panicked"
            | "outcome_unknown"
            | "handler_panicked" => ProblemKind::OutcomeUnknown,
            "urn:ballast:deadline_exceeded"
            | "urn:ballast:store_unavailable"
            | "urn:ballast:store-unavailable"
            | "urn:ballast:overloaded"
            | "urn:ballast:circuit_open" => ProblemKind::NotRun,
            // OpenAI's code; Anthropic's spend limit (a 429 no wait fixes).
            "insufficient_quota" | "enforced_spend_limit_reached" => ProblemKind::InsufficientQuota,
            "context_length_exceeded" => ProblemKind::ContextLengthExceeded,
            _ => ProblemKind::None,
        }
    }
}

/// What kind of call an attempt belonged to: decides whether an attempt that may have reached the upstream can be
/// sent again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// A model call (chat completion): no side effect outside the answer, retried whenever retryable.
    Model,
    /// A tool with `side_effects = false`: retried whenever retryable.
    ReadOnlyTool,
    /// A tool with `side_effects = true`: what a retry may do depends on the upstream's deduplication.
    SideEffectingTool(UpstreamIdempotency),
}

impl CallKind {
    /// The kind of a configured tool call.
    pub const fn tool(side_effects: bool, upstream_idempotency: UpstreamIdempotency) -> Self {
        if side_effects {
            CallKind::SideEffectingTool(upstream_idempotency)
        } else {
            CallKind::ReadOnlyTool
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn retry_after_ms_wins_over_retry_after_when_both_are_present() {
        let both = ResponseInfo::status(429).with_retry_after_headers(Some(2000 * MS), Some(1500 * MS));
        assert_eq!(both.retry_after, Some(1500 * MS));
        let seconds = ResponseInfo::status(429).with_retry_after_headers(Some(2000 * MS), None);
        assert_eq!(seconds.retry_after, Some(2000 * MS));
        let millis = ResponseInfo::status(429).with_retry_after_headers(None, Some(7 * MS));
        assert_eq!(millis.retry_after, Some(7 * MS));
        let neither = ResponseInfo::status(429).with_retry_after_headers(None, None);
        assert_eq!(neither.retry_after, None);
    }

    #[test]
    fn problem_kinds_come_from_structured_codes() {
        assert_eq!(
            ProblemKind::from_code("urn:ballast:idempotency-in-progress"),
            ProblemKind::IdempotencyInProgress
        );
        assert_eq!(
            ProblemKind::from_code("idempotency_key_in_use"),
            ProblemKind::IdempotencyInProgress
        );
        assert_eq!(
            ProblemKind::from_code("insufficient_quota"),
            ProblemKind::InsufficientQuota
        );
        assert_eq!(
            ProblemKind::from_code("context_length_exceeded"),
            ProblemKind::ContextLengthExceeded
        );
        assert_eq!(ProblemKind::from_code("rate_limit_exceeded"), ProblemKind::None);
        assert_eq!(ProblemKind::from_code("Insufficient_Quota"), ProblemKind::None);
    }

    #[test]
    fn success_is_1xx_to_3xx() {
        for s in [100, 200, 201, 204, 302, 399] {
            assert!(ResponseInfo::status(s).is_success(), "{s}");
        }
        for s in [0, 99, 400, 409, 500, 529] {
            assert!(!ResponseInfo::status(s).is_success(), "{s}");
        }
        assert!(AttemptOutcome::status(200).is_success());
        assert!(!AttemptOutcome::Timeout.is_success());
    }

    #[test]
    fn tool_kind_follows_side_effects() {
        assert_eq!(
            CallKind::tool(false, UpstreamIdempotency::None),
            CallKind::ReadOnlyTool
        );
        assert_eq!(
            CallKind::tool(true, UpstreamIdempotency::Keyed),
            CallKind::SideEffectingTool(UpstreamIdempotency::Keyed)
        );
    }
}
