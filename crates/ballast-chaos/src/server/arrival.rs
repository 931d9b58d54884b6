//! The front door every model and tool request passes, in this order: count it in, number the attempt, refuse it
//! during an outage, take a capacity slot (or refuse it), draw its fault, wait its latency.
//!
//! The order mirrors a real service: an outage and an overload are decided before the endpoint does anything
//! (so they never execute a side effect and are never stored under an idempotency key), and the latency is the
//! endpoint's own time, spent while holding its capacity slot.

use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use tokio::sync::OwnedSemaphorePermit;

use super::answer::{Answer, Flavor, retry_after_value, seconds_until};
use super::clock;
use super::state::Epoch;
use super::stats::{Outcome, Visit};
use tokio_util::sync::CancellationToken;

use super::lose::{self, ConnectionHandle};
use crate::{Draw, Outage, OutageAnswer, Quota, RetryAfterForm};

/// The header that carries the attempt number (1-based) of a request, set by Ballast on every attempt.
pub(crate) const ATTEMPT_HEADER: &str = "ballast-attempt";

/// A request past the front door.
#[derive(Debug)]
pub(crate) struct Arrival {
    /// What it meets.
    pub(crate) draw: Draw,
    /// Its place in the stats; counts its outcome.
    pub(crate) visit: Visit,
    /// Its capacity slot, if the endpoint has a limit; held until the request ends.
    pub(crate) slot: Option<OwnedSemaphorePermit>,
}

/// Where a request came from: what a hang during an outage needs to end it.
pub(crate) struct Door<'a> {
    /// Cancelled when the server stops.
    pub(crate) stopping: &'a CancellationToken,
    /// The connection, to reset it (only under `serve`).
    pub(crate) conn: Option<ConnectionHandle>,
}

/// Lets a request to `endpoint` for operation `op` in, or answers it (outage, shed) with a `flavor` body.
pub(crate) async fn arrive(
    epoch: &Epoch,
    endpoint: &str,
    op: &str,
    headers: &HeaderMap,
    flavor: Flavor<'_>,
    door: Door<'_>,
) -> Result<Arrival, Response> {
    let mut visit = Visit::enter(epoch.stats.clone(), endpoint);
    let attempt = attempt_header(headers).unwrap_or_else(|| epoch.count_attempt(endpoint, op));
    let faults = epoch.profile.endpoint(endpoint);
    let age = clock::now().instant.duration_since(epoch.started);
    if let Some((left, how)) = outage_left(&faults.outages, age) {
        let message = format!(
            "{endpoint} is down (chaos outage) for another {} ms",
            left.as_millis()
        );
        let retry_after = match how {
            OutageAnswer::RetryAfter => Some(seconds_until(left)),
            OutageAnswer::NoRetryAfter => None,
            OutageAnswer::Hang => {
                visit.count(Outcome::Outage, false);
                return Err(lose::hang(door.stopping, door.conn).await);
            }
        };
        let answer = Answer::refused(flavor, "outage", message, retry_after);
        return Err(reply(&mut visit, answer, Outcome::Outage));
    }
    let slot = match epoch.gate(endpoint) {
        None => None,
        Some(gate) => match gate.enter().await {
            Ok(slot) => Some(slot),
            Err(_shed) => {
                let message =
                    format!("{endpoint} is at capacity and its queue is full (chaos capacity limit)");
                let retry_after = faults.retry_after.map(render_retry_after);
                let answer = Answer::refused(flavor, "shed_capacity", message, retry_after);
                return Err(reply(&mut visit, answer, Outcome::ShedCapacity));
            }
        },
    };
    let draw = epoch.profile.fault_for(endpoint, op, attempt);
    if !draw.latency.is_zero() {
        tokio::time::sleep(draw.latency).await;
    }
    Ok(Arrival { draw, visit, slot })
}

/// Answers `answer`, counting it as `outcome`.
fn reply(visit: &mut Visit, answer: Answer, outcome: Outcome) -> Response {
    visit.count(outcome, false);
    answer.into_response()
}

/// Answers `answer`, counting its status (and whether it is a replay).
pub(crate) fn answer(visit: &mut Visit, answer: Answer) -> Response {
    visit.count(Outcome::Status(answer.status.as_u16()), answer.replayed);
    answer.into_response()
}

/// An injected error status, with `Retry-After` rendered now.
pub(crate) fn injected(
    flavor: Flavor<'_>,
    status: u16,
    retry_after: Option<RetryAfterForm>,
    quota: Option<Quota>,
) -> Answer {
    Answer::injected(flavor, status, retry_after.map(render_retry_after), quota)
}

fn render_retry_after(form: RetryAfterForm) -> super::answer::RetryAfter {
    retry_after_value(form, clock::now().wall)
}

/// The attempt number from `ballast-attempt`, when present and a number from 1.
fn attempt_header(headers: &HeaderMap) -> Option<u32> {
    let value = headers.get(ATTEMPT_HEADER)?.to_str().ok()?;
    value.trim().parse().ok().filter(|attempt| *attempt >= 1)
}

/// The time left of the outage window covering `age` (time since the start), if any, and what it answers (of
/// overlapping windows, the one that lasts longest).
fn outage_left(outages: &[Outage], age: Duration) -> Option<(Duration, OutageAnswer)> {
    outages
        .iter()
        .filter(|window| window.start <= age && age < window.end)
        .map(|window| (window.end - age, window.answer))
        .max_by_key(|(left, _)| *left)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn an_outage_covers_its_window_from_start_to_before_end() {
        let windows = [Outage {
            start: secs(10),
            end: secs(13),
            answer: OutageAnswer::NoRetryAfter,
        }];
        let left = |age| outage_left(&windows, age).map(|(left, _)| left);
        assert_eq!(left(secs(9)), None);
        assert_eq!(left(secs(10)), Some(secs(3)));
        assert_eq!(
            left(Duration::from_millis(12_500)),
            Some(Duration::from_millis(500))
        );
        assert_eq!(left(secs(13)), None);
        assert_eq!(
            outage_left(&windows, secs(11)).map(|(_, how)| how),
            Some(OutageAnswer::NoRetryAfter)
        );
    }

    #[test]
    fn overlapping_outages_last_until_the_later_end() {
        let windows = [
            Outage {
                start: secs(0),
                end: secs(5),
                answer: OutageAnswer::Hang,
            },
            Outage {
                start: secs(2),
                end: secs(9),
                answer: OutageAnswer::RetryAfter,
            },
        ];
        assert_eq!(
            outage_left(&windows, secs(3)),
            Some((secs(6), OutageAnswer::RetryAfter))
        );
    }

    #[test]
    fn the_attempt_header_counts_from_one() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(ATTEMPT_HEADER, HeaderValue::from_str(value).expect("header"));
            attempt_header(&headers)
        };
        assert_eq!(with("2"), Some(2));
        assert_eq!(with(" 3 "), Some(3));
        assert_eq!(with("0"), None);
        assert_eq!(with("two"), None);
        assert_eq!(attempt_header(&HeaderMap::new()), None);
    }
}
