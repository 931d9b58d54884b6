//! The status of an operation by its key: what a client polls after a 409 in-progress, or after it lost the
//! answer (reference/000's status polling), instead of re-sending a side effect.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};
use ballast_core::IdempotencyKey;
use ballast_store::{IdempotencyStore, InFlight, RecordState, Scope, StoreError, StoredResponse};
use http::{Extensions, StatusCode};
use serde_json::{Value, json};

use super::Principal;
use super::markers::DEFAULT_PRINCIPAL;
use super::problem::Problem;
use super::replay::result_json;

/// Where an operation is, as [`operation_status`] finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OperationStatus {
    /// Claimed or dispatched, its answer not stored yet: poll again.
    InProgress {
        /// The route the key was used on.
        route: String,
        /// Claimed (not sent yet) or dispatched.
        state: InFlight,
        /// Time left on its holder's lease.
        lease_left: Duration,
    },
    /// Finished: the stored response, what a retry with the key gets replayed.
    Completed {
        /// The route the key was used on.
        route: String,
        /// The stored response.
        response: StoredResponse,
    },
    /// Sent, and nobody knows whether it acted: it will not run again with this key. Also a request whose
    /// holder vanished after sending it (its lease ran out while `dispatched`); if the layer is configured with
    /// [`ExpiredDispatch::TakeOver`](ballast_store::ExpiredDispatch::TakeOver), a retry with the key re-sends it.
    OutcomeUnknown {
        /// The route the key was used on.
        route: String,
    },
    /// The key's request was deferred (`crate::deferred`): the operation as the queue keeps it — `queued`,
    /// `in_progress`, or how it ended.
    Deferred(ballast_store::Operation),
    /// No live record of this key for this principal on these routes (never used, released, past its
    /// retention, or claimed by a holder that vanished before sending anything): a retry with the key runs.
    NotFound,
}

/// The status of `key` sent by `principal` on any of `routes` (each as the layer names them: method and
/// pattern, e.g. `POST /refunds`); the first route, in order, with a record answers. Another principal's
/// records are never seen: the store looks up by principal + route + key.
pub async fn operation_status(
    store: &dyn IdempotencyStore,
    principal: &str,
    routes: &[String],
    key: &IdempotencyKey,
) -> Result<OperationStatus, StoreError> {
    for route in routes {
        let scope = Scope::new(principal, route.as_str(), key.clone());
        let operation = match store.deferred() {
            Some(queue) => queue.lookup(&scope).await?,
            None => None,
        };
        let record = store.lookup(&scope).await?;
        if let Some(operation) = operation
            && !later_record(&operation, record.as_ref())
        {
            return Ok(OperationStatus::Deferred(operation));
        }
        let Some(record) = record else {
            continue;
        };
        let route = route.clone();
        // A record in flight whose lease ran out has lost its holder: no answer will ever be stored, so it is
        // not in progress (a poller would wait for the whole retention). Lost before dispatch, nothing was
        // sent and a retry runs: as if absent. Lost after dispatch: what the next claim makes it.
        let abandoned = record.lease_left.is_zero();
        return Ok(match record.state {
            RecordState::Claimed if abandoned => continue,
            RecordState::Dispatched if abandoned => OperationStatus::OutcomeUnknown { route },
            RecordState::Claimed | RecordState::Dispatched => OperationStatus::InProgress {
                route,
                state: if record.state == RecordState::Claimed {
                    InFlight::Claimed
                } else {
                    InFlight::Dispatched
                },
                lease_left: record.lease_left,
            },
            RecordState::Completed(response) => OperationStatus::Completed { route, response },
            RecordState::OutcomeUnknown => OperationStatus::OutcomeUnknown { route },
        });
    }
    Ok(OperationStatus::NotFound)
}

/// Whether `record` is newer than `operation` of its key: an operation that expired or gave up released its key,
/// and a later request with it made this record; one still waiting past its ttl may have had its record taken
/// over and ended by a live request. (An operation within its ttl holds the record; one that completed, was
/// rejected or is unknown left the record it made — the same answer.)
fn later_record(operation: &ballast_store::Operation, record: Option<&ballast_store::Record>) -> bool {
    use ballast_store::OperationState;
    let Some(record) = record else {
        return false;
    };
    match operation.state {
        OperationState::Expired => true,
        // Past its ttl (and its grace) a live request may have taken the record over and ended it.
        OperationState::Queued | OperationState::InProgress if operation.expires_in.is_zero() => {
            matches!(
                record.state,
                RecordState::Completed(_) | RecordState::OutcomeUnknown
            )
        }
        OperationState::Failed => match &record.state {
            RecordState::Completed(response) => operation.last.as_ref() != Some(response),
            _ => true,
        },
        _ => false,
    }
}

/// A `GET` route answering [`operation_status`] as JSON for the key in its last path parameter (mount it as
/// `.route("/operations/{key}", operations_route(store, routes))`), scoped to the request's
/// [`Principal`] (or `anonymous`, as the layer does by default).
///
/// Answers 200 `{"key", "status": "in_progress" | "completed" | "outcome_unknown", "route", ...}` — for a
/// deferred request also `queued`, `failed` and `expired`, as `crate::deferred::operation_json` writes them — with, when
/// completed, `"result": {"status", "headers", "body"}` (the body as JSON when it was stored as JSON, else as
/// text); 404 `{"key", "status": "not_found"}`; 400 for a malformed key; 503 when the store is unreachable.
///
/// A layer built with another default principal serves its status with
/// [`IdempotencyLayer::operations_route`](super::IdempotencyLayer::operations_route), which uses the layer's own.
pub fn operations_route<S>(store: Arc<dyn IdempotencyStore>, routes: Vec<String>) -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    operations_route_for(store, routes, DEFAULT_PRINCIPAL.into())
}

/// [`operations_route`] with `default_principal` for requests that carry no [`Principal`].
pub(crate) fn operations_route_for<S>(
    store: Arc<dyn IdempotencyStore>,
    routes: Vec<String>,
    default_principal: Arc<str>,
) -> MethodRouter<S>
where
    S: Clone + Send + Sync + 'static,
{
    let routes = Arc::new(routes);
    get(move |Path(key): Path<String>, extensions: Extensions| {
        let (store, routes) = (Arc::clone(&store), Arc::clone(&routes));
        let default_principal = Arc::clone(&default_principal);
        async move { status_answer(&*store, &routes, &key, &extensions, &default_principal).await }
    })
}

async fn status_answer(
    store: &dyn IdempotencyStore,
    routes: &[String],
    key: &str,
    extensions: &Extensions,
    default_principal: &str,
) -> Response {
    let key = match IdempotencyKey::parse(key) {
        Ok(key) => key,
        Err(invalid) => return Problem::KeyInvalid(invalid).into_response(),
    };
    let principal = extensions
        .get::<Principal>()
        .map_or(default_principal, Principal::name);
    match operation_status(store, principal, routes, &key).await {
        Ok(OperationStatus::NotFound) => {
            let body = json!({"key": key.as_str(), "status": "not_found"});
            (StatusCode::NOT_FOUND, Json(body)).into_response()
        }
        Ok(status) => Json(status_json(&key, status)).into_response(),
        Err(StoreError::Unavailable(_)) => Problem::StoreUnavailable.into_response(),
        Err(_) => Problem::StoreFailed.into_response(),
    }
}

fn status_json(key: &IdempotencyKey, status: OperationStatus) -> Value {
    match status {
        OperationStatus::InProgress {
            route,
            state,
            lease_left,
        } => json!({
            "key": key.as_str(), "status": "in_progress", "route": route,
            "state": if state == InFlight::Claimed { "claimed" } else { "dispatched" },
            "lease_left_ms": u64::try_from(lease_left.as_millis()).unwrap_or(u64::MAX),
        }),
        OperationStatus::Completed { route, response } => json!({
            "key": key.as_str(), "status": "completed", "route": route, "result": result_json(&response),
        }),
        OperationStatus::OutcomeUnknown { route } => json!({
            "key": key.as_str(), "status": "outcome_unknown", "route": route, "code": "outcome_unknown",
        }),
        OperationStatus::Deferred(operation) => crate::deferred::operation_json(&operation),
        OperationStatus::NotFound => json!({"key": key.as_str(), "status": "not_found"}),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ballast_core::{IdempotencyKey, fingerprint};
    use ballast_store::{Operation, OperationState, Record, RecordState, Scope, StoredResponse};
    use bytes::Bytes;

    use super::later_record;

    fn operation(state: OperationState, expires_in: Duration, last: Option<StoredResponse>) -> Operation {
        Operation {
            scope: Scope::new("p", "POST /r", IdempotencyKey::parse("k").unwrap()),
            tool: "r".into(),
            priority: 2,
            state,
            attempts: 1,
            max_attempts: 5,
            request: Bytes::new(),
            last,
            age: Duration::from_secs(1),
            due_in: Duration::ZERO,
            expires_in,
            took: None,
        }
    }

    fn record(state: RecordState) -> Record {
        Record {
            state,
            fingerprint: fingerprint("POST", "/r", None, b"").unwrap(),
            lease_left: Duration::ZERO,
        }
    }

    fn answer(status: u16) -> StoredResponse {
        StoredResponse {
            status,
            headers: vec![],
            body: Bytes::from_static(b"{}"),
        }
    }

    #[test]
    fn the_operation_speaks_for_its_key_until_it_released_it_or_outlived_its_ttl() {
        let minute = Duration::from_secs(60);
        let held = record(RecordState::Claimed);
        let done = record(RecordState::Completed(answer(200)));
        // Waiting within its ttl: the operation, whatever the record says.
        assert!(!later_record(
            &operation(OperationState::Queued, minute, None),
            Some(&done)
        ));
        // Waiting past its ttl: a record a live request ended is newer; one still held is the operation's.
        assert!(later_record(
            &operation(OperationState::Queued, Duration::ZERO, None),
            Some(&done)
        ));
        assert!(!later_record(
            &operation(OperationState::InProgress, Duration::ZERO, None),
            Some(&held)
        ));
        // Ended: expired released the key, so any record is a later call's; failed kept it only when rejected.
        assert!(later_record(
            &operation(OperationState::Expired, Duration::ZERO, None),
            Some(&held)
        ));
        let rejected = operation(OperationState::Failed, Duration::ZERO, Some(answer(422)));
        assert!(!later_record(
            &rejected,
            Some(&record(RecordState::Completed(answer(422))))
        ));
        assert!(later_record(&rejected, Some(&done)));
        assert!(!later_record(
            &operation(OperationState::Completed, Duration::ZERO, Some(answer(200))),
            Some(&done)
        ));
        assert!(!later_record(
            &operation(OperationState::Expired, Duration::ZERO, None),
            None
        ));
    }
}
