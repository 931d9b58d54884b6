//! One attempt through the breaker: ask, call, tell (a stream: tell later).

use std::sync::Arc;
use std::time::Duration;

use ballast_core::{BreakerRejected, CallResult, CircuitBreaker, Instant, OwnedPermit, Permit, Transition};
use bytes::Bytes;
use tower::Service;

use super::StreamPermit;
use crate::attempt::StreamedAttempt;
use crate::{Error, Report, clock};

/// Sends `request` through `inner` if `breaker` grants a permit, and records the outcome on it — or, for a
/// streamed attempt that answered 2xx, hands the permit on with the answer ([`StreamPermit`]).
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
    let streamed = request.extensions().get::<StreamedAttempt>().is_some();
    let permit = match Held::acquire(&breaker, streamed, acquired) {
        Ok(permit) => permit,
        Err(rejected) => {
            tracing::debug!(%rejected, "circuit breaker refused the attempt; nothing sent");
            write_state(report.as_ref(), &breaker, acquired);
            return Err(Error::CircuitOpen {
                retry_in: rejected.retry_in(),
            });
        }
    };
    let mut result = inner.call(request).await;
    let answered = clock::now();
    let latency = answered.saturating_duration_since(acquired);
    match (breaker_result(&result), permit, &mut result) {
        // A stream's health shows only at its end: the permit travels with the answer (see `BreakerLayer`).
        (Some(CallResult::Success), Held::Owned(permit), Ok(response)) if response.status().is_success() => {
            response
                .extensions_mut()
                .insert(StreamPermit::new(permit, latency));
        }
        (Some(outcome), permit, _) => {
            if let Some(transition) = permit.record(outcome, latency, answered) {
                tracing::info!(%transition, "circuit breaker changed state");
            }
        }
        // Not about the upstream: the permit goes back unrecorded (and frees its probe slot).
        (None, permit, _) => drop(permit),
    }
    write_state(report.as_ref(), &breaker, answered);
    result
}

/// A permit: borrowed for an attempt judged by its answer, owned for a streamed one (it may outlive the call).
enum Held<'a> {
    Borrowed(Permit<'a>),
    Owned(OwnedPermit),
}

impl<'a> Held<'a> {
    fn acquire(
        breaker: &'a Arc<CircuitBreaker>,
        streamed: bool,
        now: Instant,
    ) -> Result<Self, BreakerRejected> {
        if streamed {
            breaker.try_acquire_owned(now).map(Held::Owned)
        } else {
            breaker.try_acquire(now).map(Held::Borrowed)
        }
    }

    fn record(self, result: CallResult, latency: Duration, now: Instant) -> Option<Transition> {
        match self {
            Held::Borrowed(permit) => permit.record(result, latency, now),
            Held::Owned(permit) => permit.record(result, latency, now),
        }
    }
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
