//! Rules 1-3: what is retried at all.

use super::*;
use crate::ErrorCode;

#[test]
fn never_sent_is_retried_for_every_kind() {
    for kind in KINDS {
        assert!(is_retry(first(kind, AttemptOutcome::NeverSent)), "{kind:?}");
    }
}

#[test]
fn lost_after_sending_is_retried_unless_the_upstream_does_not_deduplicate() {
    for kind in KINDS {
        for outcome in [AttemptOutcome::Timeout, AttemptOutcome::TransportError] {
            assert_eq!(
                is_retry(first(kind, outcome)),
                kind != NONE,
                "{kind:?} {outcome:?}"
            );
        }
    }
    let timed_out = first(NONE, AttemptOutcome::Timeout);
    assert_eq!(timed_out, stop(StopReason::OutcomeUnknown { timed_out: true }));
    let reset = first(NONE, AttemptOutcome::TransportError);
    assert_eq!(reset, stop(StopReason::OutcomeUnknown { timed_out: false }));
    assert_eq!(
        StopReason::OutcomeUnknown { timed_out: true }.code(),
        ErrorCode::OutcomeUnknown
    );
}

#[test]
fn retryable_statuses_are_retried_when_a_retry_is_safe() {
    for kind in [CallKind::Model, CallKind::ReadOnlyTool, KEYED] {
        for status in RETRYABLE {
            assert!(
                is_retry(first(kind, AttemptOutcome::status(status))),
                "{kind:?} {status}"
            );
        }
        assert!(is_retry(first(kind, in_progress())), "{kind:?}");
    }
}

#[test]
fn other_4xx_and_5xx_are_final() {
    for status in [400, 401, 403, 404, 405, 409, 410, 413, 422, 451, 501, 505, 599] {
        for kind in KINDS {
            let decision = first(kind, AttemptOutcome::status(status));
            // A `none` upstream's 5xx may come after the commit: final, and the outcome unknown.
            let expected = if kind == NONE && status >= 500 {
                StopReason::OutcomeUnknownAnswer { status }
            } else {
                StopReason::NotRetryable { status }
            };
            assert_eq!(decision, stop(expected), "{kind:?}");
        }
    }
}

#[test]
fn a_409_is_retried_only_when_in_progress() {
    assert!(is_retry(first(CallKind::Model, in_progress())));
    let plain = first(CallKind::Model, AttemptOutcome::status(409));
    assert_eq!(plain, stop(StopReason::NotRetryable { status: 409 }));
}

#[test]
fn successes_are_done_whatever_the_headers_and_cost_nothing() {
    let budget = Counted::unlimited();
    for status in [200, 201, 204, 304] {
        let said_retry = answer(ResponseInfo::status(status).with_should_retry(true));
        for outcome in [AttemptOutcome::status(status), said_retry] {
            let decision = policy().decide(&outcome, &mut call(NONE), at(0), &budget, None, &mut rng());
            assert_eq!(decision, RetryDecision::Done);
        }
    }
    assert_eq!(budget.withdrawn(), 0);
}

#[test]
fn x_should_retry_overrides_the_status() {
    let refused = first(
        CallKind::Model,
        answer(ResponseInfo::status(503).with_should_retry(false)),
    );
    assert_eq!(refused, stop(StopReason::UpstreamSaidNoRetry { status: 503 }));
    let asked = first(
        CallKind::Model,
        answer(ResponseInfo::status(400).with_should_retry(true)),
    );
    assert!(is_retry(asked));
}

/// DESIGN.md, "Upstream idempotency": a `none` upstream retries never-sent errors and explicit refusals — answered
/// before the operation ran — and nothing else; a 5xx after sending may come after the commit: the outcome is
/// unknown, never re-sent.
#[test]
fn a_none_upstream_retries_only_never_sent_errors_and_explicit_refusals() {
    for status in [408, 425, 429] {
        assert!(is_retry(first(NONE, AttemptOutcome::status(status))), "{status}");
    }
    assert!(
        is_retry(first(NONE, in_progress())),
        "a 409 in progress: an idempotency layer holds the key"
    );
    let refused = answer(ResponseInfo::status(503).with_retry_after(std::time::Duration::from_secs(1)));
    assert!(
        is_retry(first(NONE, refused)),
        "503 with Retry-After: refused for now"
    );
    for status in [500, 502, 503, 504, 529] {
        let decision = first(NONE, AttemptOutcome::status(status));
        assert_eq!(
            decision,
            stop(StopReason::OutcomeUnknownAnswer { status }),
            "{status}"
        );
        assert_eq!(
            StopReason::OutcomeUnknownAnswer { status }.code(),
            ErrorCode::OutcomeUnknown
        );
    }
}

/// DESIGN.md, "Idempotency, client side": the client believes the server — an answer that says the outcome is
/// unknown stops a side effect's call whatever it says of retries, as an unanswered sent attempt does.
#[test]
fn an_answer_that_says_the_outcome_is_unknown_stops_a_side_effect() {
    let unknown = |status| {
        answer(
            ResponseInfo::status(status)
                .with_problem(ProblemKind::OutcomeUnknown)
                .with_should_retry(true),
        )
    };
    for kind in [NONE, KEYED, REPLAYS] {
        for status in [502, 500, 409] {
            assert_eq!(
                first(kind, unknown(status)),
                stop(StopReason::OutcomeUnknownAnswer { status }),
                "{kind:?} {status}"
            );
        }
    }
    // A read-only call has no side effect to be unknown.
    assert!(is_retry(first(CallKind::ReadOnlyTool, unknown(502))));
    for code in [
        "urn:ballast:outcome_unknown",
        "urn:ballast:handler_panicked",
        "outcome_unknown",
        "urn:ballast:outcome-unknown",
        "urn:ballast:handler-panicked",
    ] {
        assert_eq!(
            ProblemKind::from_code(code),
            ProblemKind::OutcomeUnknown,
            "{code}"
        );
    }
}

/// The client believes the server the other way too: another Ballast's refusal before anything ran
/// (`urn:ballast:deadline_exceeded`, `store_unavailable`, `overloaded`, `circuit_open`) is not an unknown
/// outcome, even as a 5xx of a `none` upstream — and a `none` upstream still does not re-send on it.
#[test]
fn a_refusal_before_running_is_not_an_unknown_outcome() {
    for code in [
        "urn:ballast:deadline_exceeded",
        "urn:ballast:store_unavailable",
        "urn:ballast:overloaded",
        "urn:ballast:circuit_open",
    ] {
        assert_eq!(ProblemKind::from_code(code), ProblemKind::NotRun, "{code}");
    }
    let refused = ResponseInfo::status(504).with_problem(ProblemKind::NotRun);
    assert!(!crate::answer_leaves_outcome_unknown(NONE, &refused));
    let decision = first(NONE, answer(refused));
    assert!(
        !matches!(
            decision,
            RetryDecision::Stop(StopReason::OutcomeUnknownAnswer { .. })
        ),
        "{decision:?}"
    );
    assert!(
        !is_retry(decision),
        "a 504 is no explicit refusal to wait for: {decision:?}"
    );
}

/// Regression (review finding 2): `x-should-retry: true` used to override the upstream idempotency table, so
/// a `none` upstream's 5xx was re-sent and the side effect could run twice.
#[test]
fn the_upstream_may_declare_an_answer_retryable_but_not_a_resend_safe() {
    for status in [500, 503, 400, 409] {
        let declared = || answer(ResponseInfo::status(status).with_should_retry(true));
        // A 5xx may also come after the commit: the outcome is unknown.
        let expected = if status >= 500 {
            StopReason::OutcomeUnknownAnswer { status }
        } else {
            StopReason::NotDeduplicated { status }
        };
        assert_eq!(
            first(NONE, declared()),
            stop(expected),
            "nothing deduplicates a second send to a `none` upstream"
        );
        // The upstream says it did not store this answer, and the key deduplicates the retry.
        for kind in [REPLAYS, KEYED, CallKind::Model, CallKind::ReadOnlyTool] {
            assert!(is_retry(first(kind, declared())), "{kind:?} {status}");
        }
    }
    for kind in KINDS {
        let refused = first(kind, answer(ResponseInfo::status(429).with_should_retry(false)));
        assert_eq!(
            refused,
            stop(StopReason::UpstreamSaidNoRetry { status: 429 }),
            "{kind:?}"
        );
    }
}

#[test]
fn keyed_replays_errors_does_not_retry_a_5xx_but_retries_what_was_not_stored() {
    for status in [500, 502, 503, 504, 529] {
        let decision = first(REPLAYS, AttemptOutcome::status(status));
        assert_eq!(decision, stop(StopReason::StoredError { status }));
    }
    for status in [408, 425, 429] {
        assert!(
            is_retry(first(REPLAYS, AttemptOutcome::status(status))),
            "{status}"
        );
    }
    assert!(is_retry(first(REPLAYS, in_progress())));
    assert!(is_retry(first(REPLAYS, AttemptOutcome::Timeout)));
    assert!(is_retry(first(REPLAYS, AttemptOutcome::TransportError)));
}

#[test]
fn insufficient_quota_is_never_waited_for() {
    let budget = Counted::unlimited();
    let quota = ResponseInfo::status(429)
        .with_retry_after(SECOND)
        .with_should_retry(true)
        .with_problem(ProblemKind::InsufficientQuota);
    let decision = policy().decide(
        &answer(quota),
        &mut call(CallKind::Model),
        at(0),
        &budget,
        None,
        &mut rng(),
    );
    let reason = StopReason::InsufficientQuota { status: 429 };
    assert_eq!(decision, stop(reason));
    assert!(reason.moves_to_fallback());
    assert_eq!(budget.withdrawn(), 0);
}

#[test]
fn context_length_exceeded_stops() {
    let too_long = ResponseInfo::status(400).with_problem(ProblemKind::ContextLengthExceeded);
    let decision = first(CallKind::Model, answer(too_long));
    assert_eq!(decision, stop(StopReason::ContextLengthExceeded { status: 400 }));
}
