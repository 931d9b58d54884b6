//! After a failure: the error as it is, or the fallback — never a fallback that could repeat a side effect.
//!
//! Why the guard: a fallback is a second way to do what the call was for. For a read-only tool that is always
//! fine. For a side-effecting tool it is fine only when the first way provably did nothing: the review's probe
//! had a refund whose first attempt committed and lost its answer, the breaker open on that timeout, the retry
//! refused with `circuit_open` — and the fallback tool refunded again (two executions in the chaos ledger); a
//! static `{"status": "refunded"}` after a sent, unanswered attempt is the same lie in one line. So a
//! side-effecting tool falls back only when **no attempt may have reached the upstream**: every attempt in the
//! report is finished and `sent == false` (never sent, refused by the breaker, admission or the deadline). A 409
//! "in progress" is an answer to a sent attempt, so it blocks the fallback too. Otherwise the error comes back,
//! and `outcome_unknown` is set when an attempt was sent and got no answer, or the operation was still in
//! progress when the call ended: the caller must check before doing it again.
//!
//! When is the upstream "failing" (worth a fallback at all)? The breaker is open, admission shed the call, or the
//! retries ran out (attempts, budget, run allowance, a `Retry-After` too long) — not a 4xx, which is the
//! request's fault, nor a deadline or a cancellation.
//!
//! The report stays the call's own — its attempts, one of which may have acted, are never replaced — with the
//! fallback named in `fallback` and, for a fallback tool, that tool's report in `fallback_report`.

use ballast_core::StopReason;

use super::client::Fallback;
use super::ended::{Ended, Failure};
use super::send::in_progress;
use super::{ToolCall, ToolClient};
use crate::{AttemptRecord, AttemptResult, CallContext, Error, OutcomeReport, Report};

/// The name a static fallback response goes by in reports.
const STATIC_RESPONSE: &str = "static response";

impl ToolClient {
    /// Records what the failure means in the report, then goes to the fallback when it may, else ends with the
    /// failure.
    pub(super) async fn after_failure(&self, failure: Failure, call: ToolCall, ctx: &CallContext) -> Ended {
        self.record_failure(&failure, &ctx.report);
        match self.fallback_for(&failure, &ctx.report) {
            Some(fallback) => self.fall_back(fallback, call, ctx).await,
            None => failure.ended(self.name()),
        }
    }

    /// The error's code (when no layer wrote one), and for a side-effecting tool whether its outcome is unknown.
    fn record_failure(&self, failure: &Failure, report: &Report) {
        let side_effects = self.inner.tool.side_effects;
        let still_in_progress =
            matches!(failure, Failure::Answer(response) if in_progress(response).is_some());
        let code = match failure {
            Failure::Error(error) => Some(error.code()),
            Failure::Answer(_) => None,
        };
        report.update(|r| {
            if let Some(code) = code {
                r.code.get_or_insert(code);
            }
            if side_effects && (still_in_progress || sent_unanswered(&r.attempts)) {
                r.outcome_unknown = true;
            }
        });
    }

    /// The fallback to go to, if the upstream is failing and going elsewhere cannot repeat a side effect.
    fn fallback_for(&self, failure: &Failure, report: &Report) -> Option<&Fallback> {
        let fallback = self.inner.fallback.as_ref()?;
        let side_effects = self.inner.tool.side_effects;
        let may =
            report.read(|r| upstream_failing(failure, r) && (!side_effects || nothing_sent(&r.attempts)));
        may.then_some(fallback)
    }

    /// Answers from `fallback` under the call's deadline and cancellation, recording it in the call's report.
    async fn fall_back(&self, fallback: &Fallback, call: ToolCall, ctx: &CallContext) -> Ended {
        match fallback {
            Fallback::Response(body) => {
                ctx.report
                    .update(|r| r.fallback = Some(STATIC_RESPONSE.to_owned()));
                Ended::Answer {
                    status: 200,
                    body: body.clone(),
                }
            }
            Fallback::Tool(tool) => {
                let call = ToolCall {
                    deadline: Some(ctx.effective_deadline()),
                    ..call
                };
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

/// Whether the failure says the upstream is failing (see the module docs), not the request.
fn upstream_failing(failure: &Failure, report: &OutcomeReport) -> bool {
    let gave_up = |reason: &StopReason| {
        matches!(
            reason,
            StopReason::AttemptsExhausted { .. }
                | StopReason::RetryBudgetExhausted
                | StopReason::RunAllowanceExhausted
                | StopReason::RetryAfterTooLong { .. }
        )
    };
    match failure {
        Failure::Answer(_) => !report.outcome_unknown && report.stop.as_ref().is_some_and(gave_up),
        Failure::Error(Error::CircuitOpen { .. } | Error::Overloaded { .. }) => true,
        Failure::Error(Error::Stopped(reason)) => gave_up(reason),
        Failure::Error(_) => false,
    }
}

/// Whether no attempt may have reached the upstream: all finished, none sent.
fn nothing_sent(attempts: &[AttemptRecord]) -> bool {
    attempts
        .iter()
        .all(|a| !a.sent && a.result != AttemptResult::Pending)
}

/// Whether an attempt may have reached the upstream and got no answer (or is still running).
fn sent_unanswered(attempts: &[AttemptRecord]) -> bool {
    attempts.iter().any(|a| match a.result {
        AttemptResult::Pending => true,
        AttemptResult::Error(_) => a.sent,
        AttemptResult::Status(_) => false,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn attempt(result: AttemptResult, sent: bool) -> AttemptRecord {
        AttemptRecord {
            number: 1,
            result,
            duration: Duration::ZERO,
            sent,
            background: false,
        }
    }

    #[test]
    fn only_finished_unsent_attempts_leave_nothing_sent() {
        let refused = attempt(AttemptResult::Error("circuit open".into()), false);
        let timeout = attempt(AttemptResult::Error("timeout".into()), true);
        let answered = attempt(AttemptResult::Status(503), true);
        let pending = attempt(AttemptResult::Pending, false);
        assert!(nothing_sent(&[]));
        assert!(nothing_sent(&[refused.clone(), refused.clone()]));
        assert!(!nothing_sent(&[timeout.clone(), refused.clone()]));
        assert!(!nothing_sent(std::slice::from_ref(&answered)));
        assert!(!nothing_sent(std::slice::from_ref(&pending)));
        assert!(sent_unanswered(&[answered.clone(), timeout]));
        assert!(sent_unanswered(&[pending]));
        assert!(!sent_unanswered(&[answered, refused]));
    }

    #[test]
    fn the_upstream_is_failing_when_it_is_open_shed_or_out_of_retries() {
        let report = OutcomeReport::default();
        let open = Failure::Error(Error::CircuitOpen { retry_in: None });
        assert!(upstream_failing(&open, &report));
        let budget = Failure::Error(Error::Stopped(StopReason::RetryBudgetExhausted));
        assert!(upstream_failing(&budget, &report));
        assert!(!upstream_failing(&Failure::Error(Error::Cancelled), &report));
        let bad_request = http::Response::builder()
            .status(400)
            .body(bytes::Bytes::new())
            .unwrap();
        let not_retryable = OutcomeReport {
            stop: Some(StopReason::NotRetryable { status: 400 }),
            ..OutcomeReport::default()
        };
        assert!(!upstream_failing(&Failure::Answer(bad_request), &not_retryable));
        let unavailable = http::Response::builder()
            .status(503)
            .body(bytes::Bytes::new())
            .unwrap();
        let exhausted = OutcomeReport {
            stop: Some(StopReason::AttemptsExhausted { attempts: 3 }),
            ..OutcomeReport::default()
        };
        assert!(upstream_failing(&Failure::Answer(unavailable), &exhausted));
    }
}
