//! One attempt through the breaker: ask, call, tell.

use std::sync::Arc;

use ballast_core::{CallResult, CircuitBreaker, Instant};
use bytes::Bytes;
use tower::Service;

use crate::{Error, Report, clock};

/// Sends `request` through `inner` if `breaker` grants a permit, and records the outcome on it.
///
/// The future owns the `Arc` the permit borrows. Dropped mid-attempt, it drops the permit unrecorded: a
/// cancelled attempt is not counted, and a probe slot it held is freed.
pub(super) async fn gated<S>(
    breaker: Arc<CircuitBreaker>,
    mut inner: S,
    request: http::Request<Bytes>,
    report: Option<Report>,
) -> Result<http::Response<Bytes>, Error>
where
    S: Service<http::Request<Bytes>, Response = http::Response<Bytes>, Error = Error>,
{
    let acquired = clock::now();
    let permit = match breaker.try_acquire(acquired) {
        Ok(permit) => permit,
        Err(rejected) => {
            tracing::debug!(%rejected, "circuit breaker refused the attempt; nothing sent");
            write_state(report.as_ref(), &breaker, acquired);
            return Err(Error::CircuitOpen {
                retry_in: rejected.retry_in(),
            });
        }
    };
    let result = inner.call(request).await;
    let answered = clock::now();
    match breaker_result(&result) {
        Some(outcome) => {
            let latency = answered.saturating_duration_since(acquired);
            if let Some(transition) = permit.record(outcome, latency, answered) {
                tracing::info!(%transition, "circuit breaker changed state");
            }
        }
        // Not about the upstream: the permit goes back unrecorded (and frees its probe slot).
        None => drop(permit),
    }
    write_state(report.as_ref(), &breaker, answered);
    result
}

/// What an attempt's result tells the breaker; `None` when it tells it nothing (see `BreakerLayer`).
pub(super) fn breaker_result(result: &Result<http::Response<Bytes>, Error>) -> Option<CallResult> {
    match result {
        Ok(response) if crate::headers::is_replayed(response) => Some(CallResult::Ignored),
        Ok(response) => Some(CallResult::from_status(response.status().as_u16())),
        Err(error) if error.attempt_outcome().is_some() => Some(CallResult::Failure),
        Err(_) => None,
    }
}

/// Writes the breaker's state at `now` (the attempt's answer or refusal, just read) into the call's report, if
/// the call has one.
fn write_state(report: Option<&Report>, breaker: &CircuitBreaker, now: Instant) {
    if let Some(report) = report {
        let state = breaker.state(now);
        report.update(|r| r.breaker = Some(state));
    }
}
