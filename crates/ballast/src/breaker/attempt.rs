//! One attempt through the breaker: ask, call, tell — or, for a stream, hand the permit on inside the answer.

use std::sync::Arc;

use ballast_core::{CallResult, CircuitBreaker, Instant};
use tower::Service;

use super::StreamPermit;
use crate::{AttemptNumber, Body, Error, Report, clock};

/// Sends `request` through `inner` if `breaker` grants a permit, and records the outcome on it — or, for a 2xx
/// whose body is a stream, puts the permit in the body ([`StreamPermit`]), for its reader to record at its end.
///
/// The future owns the `Arc` the permit borrows. Dropped mid-attempt, it drops the permit unrecorded: a
/// cancelled attempt is not counted, and a probe slot it held is freed.
pub(super) async fn gated<S, B>(
    breaker: Arc<CircuitBreaker>,
    mut inner: S,
    request: http::Request<bytes::Bytes>,
    report: Option<Report>,
) -> Result<http::Response<Body>, Error>
where
    S: Service<http::Request<bytes::Bytes>, Response = http::Response<B>, Error = Error>,
    B: Into<Body>,
{
    let acquired = clock::now();
    let permit = match breaker.try_acquire(acquired) {
        Ok(permit) => permit,
        Err(rejected) => {
            tracing::debug!(%rejected, "circuit breaker refused the attempt; nothing sent");
            let refused = Error::CircuitOpen {
                retry_in: rejected.retry_in(),
            };
            // An attempt a retry loop made is a line of the report, not sent (used alone, the layer refused a call,
            // not an attempt).
            let number = request.extensions().get::<AttemptNumber>();
            if let (Some(report), Some(AttemptNumber(number))) = (&report, number) {
                report.refused_attempt(*number, refused.to_string());
            }
            write_state(report.as_ref(), &breaker, acquired);
            return Err(refused);
        }
    };
    let mut result = inner.call(request).await.map(|response| response.map(Into::into));
    let answered = clock::now();
    let latency = answered.saturating_duration_since(acquired);
    match (breaker_result(&result), &mut result) {
        // A stream's health shows only at its end: its reader records the permit (see `BreakerLayer`).
        (Some(CallResult::Success), Ok(response))
            if response.status().is_success() && response.body().is_stream() =>
        {
            let permit = StreamPermit::new(permit.into_owned(&breaker), latency);
            let _whole_bodies_keep_no_permit = response.body_mut().keep_permit(permit);
        }
        (Some(outcome), _) => {
            if let Some(transition) = permit.record(outcome, latency, answered) {
                tracing::info!(%transition, "circuit breaker changed state");
            }
        }
        // Not about the upstream: the permit goes back unrecorded (and frees its probe slot).
        (None, _) => drop(permit),
    }
    write_state(report.as_ref(), &breaker, answered);
    result
}

/// What an attempt's result tells the breaker; `None` when it tells it nothing (see `BreakerLayer`).
pub(super) fn breaker_result(result: &Result<http::Response<Body>, Error>) -> Option<CallResult> {
    match result {
        Ok(response) if crate::headers::is_replayed(response) => Some(CallResult::Ignored),
        Ok(response) => Some(CallResult::from_status(response.status().as_u16())),
        Err(error) if error.attempt_outcome().is_some() => Some(CallResult::Failure),
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
