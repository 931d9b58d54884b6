//! What the retry layer writes in the call's report: each attempt (unless a layer below did) and the end.

use std::time::Duration;

use ballast_core::{CallKind, Instant, StopReason};
use bytes::Bytes;
use http::Response;

use super::Shared;
use crate::headers::is_replayed;
use crate::{AttemptRecord, AttemptResult, CallContext, Error, Report};

/// How a call ended.
#[derive(Debug)]
pub(super) enum End {
    /// The decision said done: the upstream's success.
    Answered(Result<Response<Bytes>, Error>),
    /// The decision stopped the call after an attempt that ended so.
    Stopped(StopReason, Result<Response<Bytes>, Error>),
    /// Not an upstream outcome: a local rejection below, or the caller cancelled.
    Rejected(Error),
}

/// Attempts recorded so far (the index the next one will have).
pub(super) fn recorded(report: &Report) -> usize {
    let mut count = 0;
    report.update(|r| count = r.attempts.len());
    count
}

/// Records attempt `number`, which ended with `result` after `took`, unless a layer below recorded it since
/// index `from` (a record it left pending is completed).
pub(super) fn record_attempt(
    report: &Report,
    from: usize,
    number: u32,
    result: &Result<Response<Bytes>, Error>,
    took: Duration,
) {
    let (outcome, sent) = match result {
        Ok(response) => (AttemptResult::Status(response.status().as_u16()), true),
        Err(error) => (AttemptResult::Error(error.to_string()), !never_left(error)),
    };
    // The caller cancelled while a layer below runs the attempt on (a sent side-effecting attempt is never
    // abandoned): it is still running, and the layer below records how it ends.
    let still_running = matches!(result, Err(Error::Cancelled));
    report.update(
        |r| match r.attempts.iter_mut().skip(from).find(|a| a.number == number) {
            Some(below) if below.result == AttemptResult::Pending && still_running => {}
            Some(below) if below.result == AttemptResult::Pending => {
                below.result = outcome;
                below.duration = took;
                below.sent |= sent;
            }
            Some(_recorded_below) => {}
            None => r.attempts.push(AttemptRecord {
                number,
                result: outcome,
                duration: took,
                sent,
                background: false,
            }),
        },
    );
}

/// Whether `error` proves the attempt never reached the upstream: a never-sent transport error, or a local
/// refusal below (circuit open, no time left for an attempt, shed by admission).
pub(super) fn never_left(error: &Error) -> bool {
    matches!(
        error,
        Error::Transport { sent: false, .. }
            | Error::CircuitOpen { .. }
            | Error::DeadlineExceeded(_)
            | Error::Overloaded { .. }
    )
}

/// Whether a side effect of the call may or may not have happened, by its attempts and its end.
///
/// The rule, for side-effecting calls that did not succeed: unknown when an attempt may have reached the upstream
/// and got no answer (a timeout, a transport error after sending, an attempt the caller left while it ran — still
/// pending, or cancelled), and no later answer settled it. Only two answers settle it: a success (the operation
/// happened, once: the upstream deduplicates by key, or this was the only attempt that reached it) and a replay
/// (`Idempotent-Replayed: true`: the upstream's stored outcome of the operation). Any other later answer leaves
/// it unknown: a 409 "in progress" says the lost attempt is still running; a 5xx, 429 or 408 may come from a
/// proxy or a rate limiter before the key is looked up, and an upstream that stores only successes (`keyed`)
/// answers an error without telling whether an earlier attempt acted; a 4xx such as 400 may be a validation
/// made before the key is looked up. Whatever stopped the call — attempts, budget, run allowance, deadline, an
/// open circuit, the caller — does not change what the upstream may have done. (The deadline layer applies it
/// too, to a call it ends — deadline passed, caller cancelled — before this layer could.)
pub(crate) fn outcome_unknown(
    kind: CallKind,
    succeeded: bool,
    replayed: bool,
    attempts: &[AttemptRecord],
) -> bool {
    let unanswered = |a: &AttemptRecord| match a.result {
        AttemptResult::Pending => true,
        AttemptResult::Error(_) => a.sent,
        AttemptResult::Status(_) => false,
    };
    matches!(kind, CallKind::SideEffectingTool(_))
        && !succeeded
        && !replayed
        && attempts.iter().any(unanswered)
}

/// Writes how the call ended in its report and returns what the caller gets: the upstream's answer when there
/// was one (also when the decision stopped the call), else the error — [`Error::Stopped`] when the decision
/// stopped after an attempt's error (whose text stays in the report's attempt). `now` is the end's instant (the
/// budget left is read at it).
pub(super) fn finish(
    shared: &Shared,
    ctx: &CallContext,
    end: End,
    now: Instant,
) -> Result<Response<Bytes>, Error> {
    let (result, stop) = match end {
        End::Answered(result) => (result, None),
        End::Stopped(reason, Ok(response)) => (Ok(response), Some(reason)),
        End::Stopped(reason, Err(_attempt_error)) => (Err(Error::Stopped(reason)), Some(reason)),
        End::Rejected(error) => {
            let stop = match &error {
                Error::DeadlineExceeded(exceeded) => Some(StopReason::Deadline(*exceeded)),
                _ => None,
            };
            (Err(error), stop)
        }
    };
    let code = match (&result, &stop) {
        (Err(error), _) => Some(error.code()),
        (Ok(_), Some(reason)) => Some(reason.code()),
        (Ok(_), None) => None,
    };
    let replayed = result.as_ref().is_ok_and(is_replayed);
    let succeeded = result.is_ok() && stop.is_none();
    let budget_left = shared.budget.available(now);
    let run_allowance_left = ctx.run.as_ref().map(|run| run.allowance().left());
    ctx.report.update(|r| {
        r.stop = stop;
        r.code = code;
        // Judged afresh from every attempt of the call (a caller that sends the call again through this layer,
        // with the same report, gets a verdict on the whole history: a replay now settles a loss then).
        r.outcome_unknown = matches!(stop, Some(StopReason::OutcomeUnknown { .. }))
            || outcome_unknown(ctx.kind, succeeded, replayed, &r.attempts);
        r.replayed = replayed;
        r.budget_left = Some(budget_left);
        r.run_allowance_left = run_allowance_left;
    });
    result
}
