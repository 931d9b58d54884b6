//! One attempt through the throttle and the breaker: ask both, call, tell both — or, for a stream, hand the
//! breaker's permit on inside the answer.

use std::sync::Arc;

use ballast_core::{AdaptiveThrottle, CallResult, CircuitBreaker, Instant, ThrottleOutcome};
use tower::Service;

use super::stream::{StreamPermit, restart_on_close};
use crate::{AttemptNumber, Body, Error, Overload, Report, clock};

/// Sends `request` through `inner` if `breaker` grants a permit, and records the outcome on it — or, for a 2xx
/// whose body is a stream, puts the permit in the body ([`StreamPermit`]), for its reader to record at its end.
///
/// The future owns the `Arc` the permit borrows. Dropped mid-attempt, it drops the permit unrecorded: a
/// cancelled attempt is not counted, and a probe slot it held is freed.
pub(super) async fn gated<S, B>(
    breaker: Arc<CircuitBreaker>,
    throttle: Option<Arc<AdaptiveThrottle>>,
    mut inner: S,
    request: http::Request<bytes::Bytes>,
    report: Option<Report>,
) -> Result<http::Response<Body>, Error>
where
    S: Service<http::Request<bytes::Bytes>, Response = http::Response<B>, Error = Error>,
    B: Into<Body>,
{
    let acquired = clock::now();
    let refuse = |refused: Error| {
        // An attempt a retry loop made is a line of the report, not sent (used alone, the layer refused a call,
        // not an attempt).
        let number = request.extensions().get::<AttemptNumber>();
        if let (Some(report), Some(AttemptNumber(number))) = (&report, number) {
            report.refused_attempt(*number, refused.to_string());
        }
        write_state(report.as_ref(), &breaker, acquired);
        Err(refused)
    };
    let permit = match breaker.try_acquire(acquired) {
        Ok(permit) => permit,
        Err(rejected) => {
            tracing::debug!(%rejected, "circuit breaker refused the attempt; nothing sent");
            // Not a request the throttle counts: the breaker, not the upstream, refused it.
            return refuse(Error::CircuitOpen {
                retry_in: rejected.retry_in(),
            });
        }
    };
    // The throttle is for an upstream whose breaker is closed: once it has opened, the breaker alone decides (its
    // half-open probes must reach the upstream), and the throttle neither refuses nor counts. Asked after the
    // breaker's permit (one lock fewer than reading the breaker's state first), its refusal drops the permit
    // unrecorded: to the breaker, the attempt never happened — the order of DESIGN.md's layers, throttle before
    // breaker, holds.
    let counted = throttle.as_ref().filter(|_| !permit.is_probe());
    if let Some(throttle) = counted
        && let Err(throttled) = throttle.try_admit(acquired)
    {
        tracing::debug!(%throttled, "adaptive throttle refused the attempt; nothing sent");
        drop(permit);
        return refuse(Error::Overloaded {
            reason: Overload::Throttled,
            retry_after: throttled.retry_in.or(Some(throttle.config().window() / 2)),
        });
    }
    let mut result = inner.call(request).await.map(|response| response.map(Into::into));
    let answered = clock::now();
    let latency = answered.saturating_duration_since(acquired);
    let judged = breaker_result(&result).or_else(|| slow_before_its_deadline(&result, &breaker, latency));
    if let Some(throttle) = counted
        && let Some(outcome) = throttle_outcome(&result, judged)
    {
        throttle.record(outcome, answered);
        // An overload answer that says when to come back: honoured while the throttle is refusing.
        if outcome == ThrottleOutcome::Overloaded
            && let Ok(response) = &result
            && let Some(retry_after) = crate::retry::classify_response(response).retry_after
        {
            throttle.hold(retry_after, answered);
        }
    }
    match (judged, &mut result) {
        // A stream's health shows only at its end: its reader records the permit (see `BreakerLayer`).
        (Some(CallResult::Success), Ok(response))
            if response.status().is_success() && response.body().is_stream() =>
        {
            let permit = StreamPermit::new(permit.into_owned(&breaker), latency, throttle.clone());
            let _whole_bodies_keep_no_permit = response.body_mut().keep_permit(permit);
        }
        (Some(outcome), _) => {
            if let Some(transition) = permit.record(outcome, latency, answered) {
                tracing::info!(%transition, "circuit breaker changed state");
                restart_on_close(throttle.as_deref(), transition.to, transition.reason);
            }
        }
        // Not about the upstream: the permit goes back unrecorded (and frees its probe slot).
        (None, _) => drop(permit),
    }
    write_state(report.as_ref(), &breaker, answered);
    result
}

/// Whether an answer carried a `Retry-After` (or `retry-after-ms`).
fn has_retry_after<B>(response: &http::Response<B>) -> bool {
    let headers = response.headers();
    headers.contains_key(http::header::RETRY_AFTER) || headers.contains_key(crate::headers::RETRY_AFTER_MS)
}

/// What an answer tells the breaker: its status, and for a 503 whether it named a `Retry-After` (looked up only
/// then: the headers of every other answer say nothing more).
fn answer_result<B>(response: &http::Response<B>) -> CallResult {
    let status = response.status().as_u16();
    CallResult::from_answer(status, status == 503 && has_retry_after(response))
}

/// What an attempt's result tells the breaker; `None` when it tells it nothing (see `BreakerLayer`).
pub(super) fn breaker_result(result: &Result<http::Response<Body>, Error>) -> Option<CallResult> {
    match result {
        Ok(response) if crate::headers::is_replayed(response) => Some(CallResult::Ignored),
        Ok(response) => Some(answer_result(response)),
        // The caller's own deadline ended the attempt: how slow the upstream is was never measured.
        Err(error) if error.cut_by_deadline() => None,
        Err(error) if error.attempt_outcome().is_some() => Some(CallResult::Failure),
        Err(_) => None,
    }
}

/// An attempt the caller's deadline cut after it had already run longer than the breaker's `slow_call` (when
/// set): however it would have ended, it would have been a slow call, so it is a failure. This is how a breaker
/// still sees an upstream hang when its callers' deadlines are all shorter than the per-try timeout.
fn slow_before_its_deadline(
    result: &Result<http::Response<Body>, Error>,
    breaker: &CircuitBreaker,
    latency: std::time::Duration,
) -> Option<CallResult> {
    let cut = matches!(result, Err(error) if error.cut_by_deadline());
    let slow = breaker.config().slow_call().is_some_and(|slow| latency > slow);
    (cut && slow).then_some(CallResult::Failure)
}

/// What an attempt's result tells the throttle; `None` when it tells it nothing (a local refusal below, a
/// cancellation).
fn throttle_outcome(
    result: &Result<http::Response<Body>, Error>,
    judged: Option<CallResult>,
) -> Option<ThrottleOutcome> {
    match result {
        // Any answer but an overload refusal is an accept (a replay too: the upstream answered).
        Ok(_) if judged == Some(CallResult::Overloaded) => Some(ThrottleOutcome::Overloaded),
        Ok(_) => Some(ThrottleOutcome::Accepted),
        // The caller's deadline ended it (see `breaker_result`): neither accepted nor refused.
        Err(error) if error.cut_by_deadline() => None,
        // A timeout, a reset, a connection refused: nothing accepted.
        Err(error) if error.attempt_outcome().is_some() => Some(ThrottleOutcome::Unanswered),
        Err(_) => None,
    }
}

/// Writes the breaker's state at `now` (the attempt's answer or refusal, just read) into the call's report, if
/// the call has one: with the line of an attempt it refused, what this layer writes there.
fn write_state(report: Option<&Report>, breaker: &CircuitBreaker, now: Instant) {
    if let Some(report) = report {
        let state = breaker.state(now);
        report.update(|r| r.breaker = Some(state));
    }
}
