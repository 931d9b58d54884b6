//! Rules 1-3 of the decision: is the outcome a failure, can a retry help, is a retry safe. No time, no budget.

use std::time::Duration;

use super::{AttemptOutcome, CallKind, ProblemKind, ResponseInfo, StopReason, UpstreamIdempotency};

/// What an outcome means before time, attempts and budgets are considered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// A success: the answer goes to the caller.
    Done,
    /// A failure no retry may or can fix.
    Stop(StopReason),
    /// A failure worth retrying, after the wait the upstream asked for (if it asked).
    Retry { retry_after: Option<Duration> },
}

/// A retryable failure after sending, by what it says about whether the upstream ran the operation. (A
/// never-sent error is retried for every kind of call: nothing reached the upstream, so a retry is the first
/// execution.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// A timeout or transport error after sending: the upstream may have acted, and no answer was received.
    LostAfterSending,
    /// 408, 425, 429, or a 409 "in progress": answered before the operation ran, so not a stored answer.
    RefusedBeforeRunning,
    /// 503 with `Retry-After`: the upstream refused the request for now and said when to come back (a
    /// maintenance page, a shed).
    Refusal,
    /// 500, 502, 503 (without `Retry-After`), 504, 529: the upstream (or a proxy in front of it) produced an error
    /// answer.
    ServerError,
    /// An error answer the upstream itself declared retryable (`x-should-retry: true`), whatever its status. For
    /// an upstream that deduplicates, it also says the answer was not stored: a retry with the same key would
    /// not replay it (Stripe sends `Stripe-Should-Retry: true` exactly when a retry can succeed).
    DeclaredRetryable,
}

/// Whether a retryable failure of a side-effecting call may be retried, by the upstream's deduplication.
///
/// The one table DESIGN.md's "Upstream idempotency" becomes; change a rule here and only here.
pub(super) const fn side_effect_may_retry(upstream: UpstreamIdempotency, failure: Failure) -> bool {
    match (upstream, failure) {
        // No deduplication: only an explicit refusal — answered before the operation ran — may be sent again;
        // anything else after sending could run it twice (DESIGN.md: never-sent errors and explicit refusals).
        (UpstreamIdempotency::None, Failure::RefusedBeforeRunning | Failure::Refusal) => true,
        (UpstreamIdempotency::None, _) => false,
        // Deduplicates, stores only successes: the same key makes any retry safe.
        (UpstreamIdempotency::Keyed, _) => true,
        // Stores every answer it produced: a 5xx would be replayed as the same 5xx — unless the upstream said
        // it may be retried, which it only says of an answer it did not store; the key still deduplicates. (A 503
        // with `Retry-After` is a refusal it did not store.)
        (UpstreamIdempotency::KeyedReplaysErrors, Failure::ServerError) => false,
        (UpstreamIdempotency::KeyedReplaysErrors, Failure::DeclaredRetryable) => true,
        (UpstreamIdempotency::KeyedReplaysErrors, _) => true,
    }
}

/// The retryable statuses (DESIGN.md): 408, 425, 429, 500, 502, 503, 504, 529, and 409 only "in progress".
pub(super) const fn retryable_status(status: u16, problem: ProblemKind) -> Option<Failure> {
    match status {
        408 | 425 | 429 => Some(Failure::RefusedBeforeRunning),
        409 if matches!(problem, ProblemKind::IdempotencyInProgress) => Some(Failure::RefusedBeforeRunning),
        500 | 502 | 503 | 504 | 529 => Some(Failure::ServerError),
        _ => None,
    }
}

/// Rules 1-3: success, whether a retry can help, whether it is safe for this kind of call.
pub(super) fn classify(outcome: &AttemptOutcome, kind: CallKind) -> Verdict {
    match outcome {
        AttemptOutcome::NeverSent => Verdict::Retry { retry_after: None },
        AttemptOutcome::Timeout | AttemptOutcome::TransportError => {
            if may_retry(kind, Failure::LostAfterSending) {
                Verdict::Retry { retry_after: None }
            } else {
                let timed_out = matches!(outcome, AttemptOutcome::Timeout);
                Verdict::Stop(StopReason::OutcomeUnknown { timed_out })
            }
        }
        AttemptOutcome::Response(response) => classify_answer(response, kind),
    }
}

/// Whether an error answer to a side-effecting call leaves the operation's outcome unknown (DESIGN.md,
/// "Upstream idempotency" and "Idempotency, client side"): the upstream says so ([`ProblemKind::OutcomeUnknown`]),
/// or an upstream that does not deduplicate (`none`) answered a 5xx that is not an explicit refusal (a 503 with
/// `Retry-After`, or another Ballast's [`ProblemKind::NotRun`]): such a 5xx may come after the commit (Stripe
/// treats a 500 so). A read-only or model call's answer never does.
///
/// The one rule behind the decision (such an answer stops the call: it is never re-sent automatically) and behind
/// the shell's verdict (the call's outcome is unknown, exactly as for a sent attempt that got no answer).
pub const fn answer_leaves_outcome_unknown(kind: CallKind, response: &ResponseInfo) -> bool {
    let CallKind::SideEffectingTool(upstream) = kind else {
        return false;
    };
    match response.problem {
        ProblemKind::OutcomeUnknown => return true,
        ProblemKind::NotRun => return false,
        _ => {}
    }
    let server_error = response.status >= 500 && response.status <= 599;
    let refusal = response.status == 503 && response.retry_after.is_some();
    matches!(upstream, UpstreamIdempotency::None) && server_error && !refusal
}

fn classify_answer(response: &ResponseInfo, kind: CallKind) -> Verdict {
    let status = response.status;
    if response.is_success() {
        return Verdict::Done;
    }
    // An answer after which nobody knows whether the side effect happened stops the call, whatever else it says:
    // a retry could act twice, and the caller must check first.
    if answer_leaves_outcome_unknown(kind, response) {
        return Verdict::Stop(StopReason::OutcomeUnknownAnswer { status });
    }
    // Problems a wait cannot fix stop whatever the headers say: the same request fails the same way.
    match response.problem {
        ProblemKind::InsufficientQuota => return Verdict::Stop(StopReason::InsufficientQuota { status }),
        ProblemKind::ContextLengthExceeded => {
            return Verdict::Stop(StopReason::ContextLengthExceeded { status });
        }
        ProblemKind::None
        | ProblemKind::IdempotencyInProgress
        | ProblemKind::OutcomeUnknown
        | ProblemKind::NotRun => {}
    }
    // The upstream's word overrides the status classification only. `false` stops everything; `true` makes the
    // answer retryable, but whether re-sending a side effect is safe stays the table's call: an upstream that
    // does not deduplicate (`none`) could act twice whatever it says.
    let failure = match response.should_retry {
        Some(false) => return Verdict::Stop(StopReason::UpstreamSaidNoRetry { status }),
        Some(true) => Failure::DeclaredRetryable,
        None => match retryable_status(status, response.problem) {
            None => return Verdict::Stop(StopReason::NotRetryable { status }),
            Some(Failure::ServerError) if status == 503 && response.retry_after.is_some() => Failure::Refusal,
            Some(failure) => failure,
        },
    };
    if may_retry(kind, failure) {
        Verdict::Retry {
            retry_after: response.retry_after,
        }
    } else {
        Verdict::Stop(unsafe_to_retry(kind, failure, status))
    }
}

fn may_retry(kind: CallKind, failure: Failure) -> bool {
    match kind {
        CallKind::Model | CallKind::ReadOnlyTool => true,
        CallKind::SideEffectingTool(upstream) => side_effect_may_retry(upstream, failure),
    }
}

/// Why a retryable answer of a side-effecting call is not retried.
fn unsafe_to_retry(kind: CallKind, failure: Failure, status: u16) -> StopReason {
    match (kind, failure) {
        (CallKind::SideEffectingTool(UpstreamIdempotency::KeyedReplaysErrors), Failure::ServerError) => {
            StopReason::StoredError { status }
        }
        _ => StopReason::NotDeduplicated { status },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn side_effect_table_follows_design() {
        use Failure::*;
        use UpstreamIdempotency as U;
        let failures = [
            LostAfterSending,
            RefusedBeforeRunning,
            Refusal,
            ServerError,
            DeclaredRetryable,
        ];
        let row = |u| failures.map(|f| side_effect_may_retry(u, f));
        assert_eq!(row(U::None), [false, true, true, false, false]);
        assert_eq!(row(U::Keyed), [true, true, true, true, true]);
        assert_eq!(row(U::KeyedReplaysErrors), [true, true, true, false, true]);
    }

    #[test]
    fn retryable_statuses_are_exactly_the_design_set() {
        let retryable: Vec<u16> = (0..=999)
            .filter(|s| retryable_status(*s, ProblemKind::None).is_some())
            .collect();
        assert_eq!(retryable, [408, 425, 429, 500, 502, 503, 504, 529]);
        assert_eq!(
            retryable_status(409, ProblemKind::IdempotencyInProgress),
            Some(Failure::RefusedBeforeRunning)
        );
        assert_eq!(retryable_status(409, ProblemKind::None), None);
        // "In progress" makes only a 409 retryable.
        assert_eq!(retryable_status(400, ProblemKind::IdempotencyInProgress), None);
    }
}
