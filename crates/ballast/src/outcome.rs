//! What a trip through the stack did, as values — and the one rule for "outcome unknown".
//!
//! Why values: every decision above a layer (the retry layer's next step, a ToolClient's fallback and its 409
//! wait, a model route's move to the next deployment) is made on what the layers below returned, never on a
//! record they left somewhere. An attempt returns its answer or a typed [`Error`] that says whether it may have
//! reached the upstream ([`Error::may_have_reached_upstream`]); the retry layer returns a [`Trip`]: the result, why
//! its decision stopped, how many attempts it numbered and what they may have done ([`Reach`]). The edge of the
//! stack (a `ToolClient`, a model route, or the retry layer's own tower service) writes the report's verdict from
//! it ([`Verdict`]).

use ballast_core::{CallKind, ErrorCode, ResponseInfo, StopReason, answer_leaves_outcome_unknown};
use http::Response;

use crate::headers::is_replayed;
use crate::{Body, Error, Report};

/// What the attempts of a call may have done at the upstream, the worst of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reach {
    /// No attempt reached it: none was made, or each was never sent or refused locally.
    #[default]
    Nothing,
    /// Every attempt that may have reached it got an answer.
    Answered,
    /// An attempt may have reached it and got no answer that says what it did — a timeout, a reset, a caller that
    /// left while it ran, an answer that says the outcome is unknown — so what it did there is unknown.
    Unanswered,
}

impl Reach {
    /// What an attempt of a call of `kind` that the upstream answered so (`info`, read by
    /// [`classify_response`](crate::layer::classify_response)) may have done: an answer that leaves a side effect's
    /// outcome unknown ([`answer_leaves_outcome_unknown`]: the upstream says so, or a `none` upstream's 5xx that
    /// may come after the commit) is as good as none.
    pub(crate) fn of_answer(kind: CallKind, info: &ResponseInfo) -> Reach {
        if answer_leaves_outcome_unknown(kind, info) {
            Reach::Unanswered
        } else {
            Reach::Answered
        }
    }

    /// What an attempt that ended with `error` may have done.
    pub(crate) fn of_error(error: &Error) -> Reach {
        if error.may_have_reached_upstream() {
            Reach::Unanswered
        } else {
            Reach::Nothing
        }
    }

    /// This, then `later`: the worst of both.
    pub(crate) fn then(self, later: Reach) -> Reach {
        self.max(later)
    }
}

/// One trip through a call's stack (deadline, admission, retry, then the attempt-level layers).
#[derive(Debug)]
pub(crate) struct Trip {
    /// The upstream's last answer (also when the retry decision stopped on it), or why there is none.
    pub(crate) result: Result<Response<Body>, Error>,
    /// Why the retry decision stopped the call, when it did not succeed; `None` on success, and for a call
    /// refused before its first attempt by anything but the deadline.
    pub(crate) stop: Option<StopReason>,
    /// The attempt numbers the trip used (the next trip of the same operation numbers after them).
    pub(crate) attempts: u32,
    /// What its attempts may have done at the upstream.
    pub(crate) reach: Reach,
}

impl Trip {
    /// A trip that ended before any attempt: refused by the deadline or admission, or cancelled while waiting.
    pub(crate) fn refused(error: Error) -> Trip {
        Trip {
            stop: stop_of(&error),
            result: Err(error),
            attempts: 0,
            reach: Reach::Nothing,
        }
    }

    /// A trip whose work below was dropped by its deadline's own timer or its caller's cancellation before it
    /// returned: what it had sent by then is not known, so, for a side effect, the outcome is not either.
    pub(crate) fn dropped(error: Error) -> Trip {
        Trip {
            reach: Reach::Unanswered,
            ..Trip::refused(error)
        }
    }

    /// Whether the upstream answered 2xx and the decision did not stop on it.
    pub(crate) fn succeeded(&self) -> bool {
        self.stop.is_none() && self.result.as_ref().is_ok_and(|r| r.status().is_success())
    }

    /// Whether the answer is the upstream's stored answer to an earlier attempt (`Idempotent-Replayed: true`).
    pub(crate) fn replayed(&self) -> bool {
        self.result.as_ref().is_ok_and(is_replayed)
    }

    /// The stable code of a call that ended so: the error's, or the stop reason's for an answer it stopped on.
    pub(crate) fn code(&self) -> Option<ErrorCode> {
        match (&self.result, &self.stop) {
            (Err(error), _) => Some(error.code()),
            (Ok(_), Some(reason)) => Some(reason.code()),
            (Ok(_), None) => None,
        }
    }
}

/// The stop reason an error carries, if it is one.
pub(crate) fn stop_of(error: &Error) -> Option<StopReason> {
    match error {
        Error::DeadlineExceeded(exceeded) => Some(StopReason::Deadline(*exceeded)),
        Error::Stopped(reason) => Some(*reason),
        _ => None,
    }
}

/// Whether a side effect of a call may or may not have happened.
///
/// The rule, for side-effecting calls that did not succeed: unknown when an attempt may have reached the upstream
/// and got no answer that says what it did ([`Reach::Unanswered`]: a timeout, a transport error after sending, an
/// attempt the caller left while it ran, an answer that says the outcome is unknown), or when the retry decision
/// said so (a stop reason whose code is `outcome_unknown`). Only two answers
/// settle a lost attempt: a success (the operation happened, once: the upstream deduplicates by key, or this was
/// the only attempt that reached it) and a replay (`Idempotent-Replayed: true`: the upstream's stored outcome of
/// the operation). Any other later answer leaves it unknown: a 409 "in progress" says the lost attempt is still
/// running; a 5xx, 429 or 408 may come from a proxy or a rate limiter before the key is looked up, and an
/// upstream that stores only successes (`keyed`) answers an error without telling whether an earlier attempt
/// acted; a 4xx such as 400 may be a validation made before the key is looked up. Whatever stopped the call —
/// attempts, budget, run allowance, deadline, an open circuit, the caller — does not change what the upstream may
/// have done.
pub(crate) fn outcome_unknown(
    kind: CallKind,
    settled: bool,
    reach: Reach,
    stop: Option<&StopReason>,
) -> bool {
    matches!(kind, CallKind::SideEffectingTool(_))
        && !settled
        && (reach == Reach::Unanswered || stop.is_some_and(|s| s.code() == ErrorCode::OutcomeUnknown))
}

/// What a side effect's outcome is, as one trip can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SideEffect {
    /// A success or a replay settled it: whatever earlier attempts did, it is known now.
    Settled,
    /// This trip leaves it unknown.
    Unknown,
    /// This trip tells nothing either way (a read-only call, or nothing of it reached the upstream unanswered):
    /// what an earlier trip of the same call said stands.
    Untold,
}

/// The call-level lines of a report: why the call stopped, its code, whether its answer was a replay, and its side
/// effect's outcome — written by the edge of a stack from the values it got back, never read by a layer.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Verdict {
    pub(crate) stop: Option<StopReason>,
    pub(crate) code: Option<ErrorCode>,
    pub(crate) replayed: bool,
    pub(crate) side_effect: SideEffect,
}

impl Verdict {
    /// The verdict on one trip of a call of `kind`.
    pub(crate) fn of(kind: CallKind, trip: &Trip) -> Verdict {
        let replayed = trip.replayed();
        let settled = trip.succeeded() || replayed;
        let side_effect = if settled {
            SideEffect::Settled
        } else if outcome_unknown(kind, false, trip.reach, trip.stop.as_ref()) {
            SideEffect::Unknown
        } else {
            SideEffect::Untold
        };
        // Precedence (DESIGN.md, "Idempotency, client side"): once a sent attempt may have acted, the code is
        // `outcome_unknown`, whatever stopped the call afterwards (an open breaker, a spent budget, the deadline).
        let code = match side_effect {
            SideEffect::Unknown => Some(ErrorCode::OutcomeUnknown),
            SideEffect::Settled | SideEffect::Untold => trip.code(),
        };
        Verdict {
            stop: trip.stop,
            code,
            replayed,
            side_effect,
        }
    }

    /// Writes the verdict into `report` (a side effect left untold keeps what the report says).
    pub(crate) fn write(&self, report: &Report) {
        let verdict = *self;
        report.update(|r| {
            r.stop = verdict.stop;
            r.code = verdict.code;
            r.replayed = verdict.replayed;
            match verdict.side_effect {
                SideEffect::Settled => r.outcome_unknown = false,
                SideEffect::Unknown => r.outcome_unknown = true,
                SideEffect::Untold => {}
            }
        });
    }
}

/// Whether a call's end says its upstream is failing, so that the next deployment or the fallback may answer —
/// the one fallback rule of tools and model routes: the core's rule for why the retries stopped
/// ([`StopReason::moves_to_fallback`]: attempts, budget or run allowance spent, a `Retry-After` too long, a spent
/// quota, throttled, a deadline that still holds an attempt), and the layers' own refusals (an open breaker, a
/// call shed or throttled, the deadline — the primary's share — spent while an attempt still fits). Never a
/// 4xx, a deadline that cannot hold an attempt, or a cancellation. `result` is the end: an answer (`Ok`), or
/// the error.
pub(crate) fn upstream_failing(result: Result<(), &Error>, stop: Option<&StopReason>) -> bool {
    match result {
        Ok(()) => stop.is_some_and(StopReason::moves_to_fallback),
        Err(Error::CircuitOpen { .. } | Error::Overloaded { .. }) => true,
        Err(Error::Stopped(reason)) => reason.moves_to_fallback(),
        Err(Error::DeadlineExceeded(exceeded)) => exceeded.attempt_fits(),
        Err(_) => false,
    }
}

/// A record of the verdict with what is left of the upstream's retry budget (`budget_left`) and of the call's
/// run's allowance: the one writer of a call's verdict, for the retry layer at the edge of a tower stack, a tool's
/// client and a model route (each over its own trips).
pub(crate) fn write_verdict(verdict: &Verdict, ctx: &crate::CallContext, budget_left: u64) {
    verdict.write(&ctx.report);
    let run_allowance_left = ctx.run.as_ref().map(|run| run.retries_left());
    ctx.report.update(|r| {
        r.budget_left = Some(budget_left);
        r.run_allowance_left = run_allowance_left;
    });
}

#[cfg(test)]
mod tests {
    use ballast_core::UpstreamIdempotency;
    use bytes::Bytes;

    use super::*;

    const REFUND: CallKind = CallKind::SideEffectingTool(UpstreamIdempotency::None);

    fn status(code: u16) -> Result<Response<Body>, Error> {
        Ok(Response::builder().status(code).body(Body::empty()).unwrap())
    }

    fn trip(result: Result<Response<Body>, Error>, stop: Option<StopReason>, reach: Reach) -> Trip {
        Trip {
            result,
            stop,
            attempts: 1,
            reach,
        }
    }

    #[test]
    fn an_attempt_reaches_the_upstream_unless_its_error_proves_otherwise() {
        let keyed = CallKind::SideEffectingTool(UpstreamIdempotency::Keyed);
        assert_eq!(
            Reach::of_answer(keyed, &ResponseInfo::status(503)),
            Reach::Answered
        );
        let timeout = Error::timeout(std::time::Duration::from_secs(1));
        assert_eq!(Reach::of_error(&timeout), Reach::Unanswered);
        assert_eq!(
            Reach::of_error(&Error::transport(false, "refused")),
            Reach::Nothing
        );
        // An answer that does not say what happened is as good as none.
        assert_eq!(
            Reach::of_answer(REFUND, &ResponseInfo::status(500)),
            Reach::Unanswered
        );
        let said = ResponseInfo::status(502).with_problem(ballast_core::ProblemKind::OutcomeUnknown);
        assert_eq!(Reach::of_answer(keyed, &said), Reach::Unanswered);
        assert_eq!(Reach::of_answer(CallKind::ReadOnlyTool, &said), Reach::Answered);
        assert_eq!(Reach::Answered.then(Reach::Nothing), Reach::Answered);
        assert_eq!(Reach::Unanswered.then(Reach::Answered), Reach::Unanswered);
    }

    #[test]
    fn only_a_success_or_a_replay_settles_a_lost_attempt() {
        let lost_then = |result| Verdict::of(REFUND, &trip(result, None, Reach::Unanswered));
        assert_eq!(lost_then(status(200)).side_effect, SideEffect::Settled);
        let replayed = Ok(Response::builder()
            .status(500)
            .header("idempotent-replayed", "true")
            .body(Body::from(Bytes::new()))
            .unwrap());
        let verdict = Verdict::of(
            REFUND,
            &trip(
                replayed,
                Some(StopReason::NotRetryable { status: 500 }),
                Reach::Unanswered,
            ),
        );
        assert_eq!(verdict.side_effect, SideEffect::Settled);
        assert!(verdict.replayed);
        let gave_up = trip(
            status(503),
            Some(StopReason::AttemptsExhausted { attempts: 3 }),
            Reach::Unanswered,
        );
        let verdict = Verdict::of(REFUND, &gave_up);
        assert_eq!(verdict.side_effect, SideEffect::Unknown);
        assert_eq!(
            verdict.code,
            Some(ErrorCode::OutcomeUnknown),
            "the code says it first"
        );
        let read_only = Verdict::of(CallKind::ReadOnlyTool, &gave_up);
        assert_eq!(read_only.side_effect, SideEffect::Untold);
        let nothing_sent = trip(Err(Error::CircuitOpen { retry_in: None }), None, Reach::Nothing);
        assert_eq!(Verdict::of(REFUND, &nothing_sent).side_effect, SideEffect::Untold);
    }

    #[test]
    fn an_untold_side_effect_keeps_what_the_report_says() {
        let report = Report::default();
        report.update(|r| r.outcome_unknown = true);
        let nothing = trip(Err(Error::CircuitOpen { retry_in: None }), None, Reach::Nothing);
        Verdict::of(REFUND, &nothing).write(&report);
        let snapshot = report.snapshot();
        assert!(snapshot.outcome_unknown, "an earlier trip's loss stands");
        assert_eq!(snapshot.code, Some(ErrorCode::CircuitOpen));
        // Precedence: an open breaker after a lost attempt is `outcome_unknown`.
        let lost_then_open = trip(
            Err(Error::CircuitOpen { retry_in: None }),
            None,
            Reach::Unanswered,
        );
        assert_eq!(
            Verdict::of(REFUND, &lost_then_open).code,
            Some(ErrorCode::OutcomeUnknown)
        );
        Verdict::of(REFUND, &trip(status(200), None, Reach::Unanswered)).write(&report);
        assert!(!report.snapshot().outcome_unknown, "settled");
    }

    #[test]
    fn work_dropped_by_the_deadline_leaves_a_side_effect_unknown() {
        let dropped = Trip::dropped(Error::Cancelled);
        assert_eq!(Verdict::of(REFUND, &dropped).side_effect, SideEffect::Unknown);
        let refused = Trip::refused(Error::Cancelled);
        assert_eq!(Verdict::of(REFUND, &refused).side_effect, SideEffect::Untold);
    }
}
