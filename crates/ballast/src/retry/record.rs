//! What the retry layer writes in the call's report: each attempt (unless a layer below did) and the end.

use std::time::Duration;

use ballast_core::{AttemptOutcome, StopReason};
use bytes::Bytes;
use http::Response;

use super::Shared;
use crate::headers::is_replayed;
use crate::{AttemptRecord, AttemptResult, CallContext, Error, Report, clock};

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
        Err(error) => {
            let sent = error
                .attempt_outcome()
                .is_some_and(|outcome| outcome != AttemptOutcome::NeverSent);
            (AttemptResult::Error(error.to_string()), sent)
        }
    };
    report.update(
        |r| match r.attempts.iter_mut().skip(from).find(|a| a.number == number) {
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

/// Writes how the call ended in its report and returns what the caller gets: the upstream's answer when there
/// was one (also when the decision stopped the call), else the error — [`Error::Stopped`] when the decision
/// stopped after an attempt's error (whose text stays in the report's attempt).
pub(super) fn finish(shared: &Shared, ctx: &CallContext, end: End) -> Result<Response<Bytes>, Error> {
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
    let budget_left = shared.budget.available(clock::now());
    let run_allowance_left = ctx.run.as_ref().map(|run| run.allowance().left());
    ctx.report.update(|r| {
        r.stop = stop;
        r.code = code;
        r.outcome_unknown |= matches!(stop, Some(StopReason::OutcomeUnknown { .. }));
        r.replayed = replayed;
        r.budget_left = Some(budget_left);
        r.run_allowance_left = run_allowance_left;
    });
    result
}
