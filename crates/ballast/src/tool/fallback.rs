//! After a failure: the error as it is, or the fallback — never a fallback that could repeat a side effect.
//!
//! Why the guard: a fallback is a second way to do what the call was for. For a read-only tool that is always
//! fine. For a side-effecting tool it is fine only when the first way provably did nothing: the review's probe
//! had a refund whose first attempt committed and lost its answer, the breaker open on that timeout, the retry
//! refused with `circuit_open` — and the fallback tool refunded again (two executions in the chaos ledger); a
//! static `{"status": "refunded"}` after a sent, unanswered attempt is the same lie in one line. So a
//! side-effecting tool falls back only when **no attempt may have reached the upstream**: every attempt of the
//! operation, by what it returned, was never sent or refused by the breaker, admission or the deadline
//! ([`Reach::Nothing`]). A 409 "in progress" is an answer to a sent attempt, so it blocks the fallback too. Otherwise the error comes back,
//! and `outcome_unknown` is set when an attempt was sent and got no answer, or the operation was still in
//! progress when the call ended: the caller must check before doing it again.
//!
//! When is the upstream "failing" (worth a fallback at all)? By the one rule tools and model routes share
//! (`outcome::upstream_failing`): the breaker is open, admission shed or the throttle refused the call, or the
//! retries ran out (attempts, budget, run allowance, a `Retry-After` too long for `max_retry_after` or for the
//! deadline) — not a 4xx, which is the request's fault, nor a deadline that cannot hold an attempt, nor a
//! cancellation.
//!
//! The report stays the call's own — its attempts, one of which may have acted, are never replaced — with the
//! fallback named in `fallback` and, for a fallback tool, that tool's report in `fallback_report`.

use super::client::{Ended, Fallback, Operation};
use super::{ToolCall, ToolClient};
use crate::CallContext;
use crate::client::Failure;
use crate::outcome::{Reach, Trip};

/// The name a static fallback response (`fallback_response`) goes by in reports (`OutcomeReport::fallback`).
pub const STATIC_RESPONSE: &str = "static response";

impl ToolClient {
    /// Goes to the fallback when the operation's failure says the upstream is failing and going elsewhere cannot
    /// repeat a side effect (`unknown`: the verdict says the outcome is unknown); else ends with the failure.
    pub(super) async fn after_failure(
        &self,
        operation: Operation,
        unknown: bool,
        call: ToolCall,
        ctx: &CallContext,
    ) -> Ended {
        match self.fallback_for(&operation.trip, unknown) {
            Some(fallback) => self.fall_back(fallback, call, ctx).await,
            None => Ended::failed(Failure::of(operation.trip.result)),
        }
    }

    /// The fallback to go to, if the upstream is failing and going elsewhere cannot repeat a side effect.
    fn fallback_for(&self, trip: &Trip, unknown: bool) -> Option<&Fallback> {
        let fallback = self.inner.fallback.as_ref()?;
        may_fall_back(self.inner.tool.side_effects, trip, unknown).then_some(fallback)
    }

    /// Answers from `fallback` under the call's deadline and cancellation, recording it in the call's report.
    async fn fall_back(&self, fallback: &Fallback, call: ToolCall, ctx: &CallContext) -> Ended {
        match fallback {
            Fallback::Response(body) => {
                ctx.report
                    .update(|r| r.fallback = Some(STATIC_RESPONSE.to_owned()));
                Ended::Answer {
                    status: 200,
                    content_type: Some(http::HeaderValue::from_static("application/json")),
                    bytes: bytes::Bytes::from(body.to_string()),
                    parsed: std::sync::OnceLock::from(body.clone()),
                }
            }
            Fallback::Tool(tool) => {
                let mut call = call;
                call.options.deadline = Some(ctx.effective_deadline());
                let (ended, report) = Ended::of_fallback(Box::pin(tool.call(call)).await);
                ctx.report.update(|r| {
                    r.fallback = Some(tool.name().to_owned());
                    r.outcome_unknown |= report.outcome_unknown;
                    r.fallback_report = Some(Box::new(report));
                });
                ended
            }
        }
    }
}

/// Whether an operation that ended with `trip` may go to a fallback: its upstream is failing, and — for a side
/// effect — no attempt of it may have reached the upstream (DESIGN.md: no fallback once an attempt was sent).
fn may_fall_back(side_effects: bool, trip: &Trip, unknown: bool) -> bool {
    upstream_failing(trip, unknown) && (!side_effects || trip.reach == Reach::Nothing)
}

/// Whether the operation's end says the upstream is failing (the one rule, `outcome::upstream_failing`), and no
/// answer left its outcome unknown.
fn upstream_failing(trip: &Trip, unknown: bool) -> bool {
    let end = trip.result.as_ref().map(|_| ());
    !(unknown && end.is_ok()) && crate::outcome::upstream_failing(end, trip.stop.as_ref())
}

#[cfg(test)]
mod tests {
    use ballast_core::StopReason;

    use super::*;
    use crate::Error;

    fn trip(result: Result<http::Response<crate::Body>, Error>, stop: Option<StopReason>) -> Trip {
        Trip {
            result,
            stop,
            attempts: 1,
            reach: Reach::Answered,
        }
    }

    /// No fallback once an attempt of a side effect was sent, answered or not; a read-only call falls back
    /// whenever its upstream is failing.
    #[test]
    fn a_side_effect_falls_back_only_when_nothing_was_sent() {
        let open = |reach| Trip {
            reach,
            ..trip(Err(Error::CircuitOpen { retry_in: None }), None)
        };
        assert!(may_fall_back(true, &open(Reach::Nothing), false));
        assert!(
            !may_fall_back(true, &open(Reach::Answered), false),
            "the upstream saw the request"
        );
        assert!(
            !may_fall_back(true, &open(Reach::Unanswered), true),
            "it may have acted"
        );
        for reach in [Reach::Nothing, Reach::Answered, Reach::Unanswered] {
            assert!(may_fall_back(false, &open(reach), false), "read-only: {reach:?}");
        }
        let bad_request = trip(answer(400), Some(StopReason::NotRetryable { status: 400 }));
        assert!(
            !may_fall_back(false, &bad_request, false),
            "the request's fault, not the upstream's"
        );
    }

    fn answer(status: u16) -> Result<http::Response<crate::Body>, Error> {
        Ok(http::Response::builder()
            .status(status)
            .body(crate::Body::empty())
            .unwrap())
    }

    #[test]
    fn the_upstream_is_failing_when_it_is_open_shed_or_out_of_retries() {
        let open = trip(Err(Error::CircuitOpen { retry_in: None }), None);
        assert!(upstream_failing(&open, false));
        let budget = trip(Err(Error::Stopped(StopReason::RetryBudgetExhausted)), None);
        assert!(upstream_failing(&budget, false));
        assert!(!upstream_failing(&trip(Err(Error::Cancelled), None), false));
        let bad_request = trip(answer(400), Some(StopReason::NotRetryable { status: 400 }));
        assert!(!upstream_failing(&bad_request, false));
        let exhausted = trip(answer(503), Some(StopReason::AttemptsExhausted { attempts: 3 }));
        assert!(upstream_failing(&exhausted, false));
        assert!(
            !upstream_failing(&exhausted, true),
            "an answer after a lost attempt: the operation may have happened"
        );
    }

    /// The rule tools share with model routes: a wait too long for the deadline while an attempt still fits is a
    /// failing upstream (as a `Retry-After` over `max_retry_after` is); a deadline that cannot hold an attempt is
    /// not — a fallback could not run in it either.
    #[test]
    fn a_wait_the_deadline_cannot_hold_falls_back_only_while_an_attempt_still_fits() {
        use std::time::Duration;
        let exceeded = |remaining_ms| ballast_core::DeadlineExceeded {
            remaining: Duration::from_millis(remaining_ms),
            reserve: Duration::from_millis(50),
            min_attempt: Duration::from_millis(100),
            refused: ballast_core::Refused::Wait(Duration::from_secs(60)),
        };
        let stopped = |remaining_ms| trip(answer(429), Some(StopReason::Deadline(exceeded(remaining_ms))));
        assert!(upstream_failing(&stopped(5_000), false), "time for an attempt");
        assert!(!upstream_failing(&stopped(100), false), "no time for anything");
        let refused = trip(Err(Error::DeadlineExceeded(exceeded(5_000))), None);
        assert!(upstream_failing(&refused, false));
    }
}
