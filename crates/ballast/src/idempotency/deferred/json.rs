//! An operation as its caller reads it — in the 202 that accepted it and at `GET {operations}/{key}` — and the
//! 202 itself.
//!
//! `{"key", "status", "route", "queue", "priority", "attempts", "max_attempts", "age_ms"}`, and by state:
//! `queued` adds `next_attempt_in_ms` and `expires_in_ms` (and `last`, the answer that made it wait, if any);
//! `in_progress` adds `expires_in_ms`; `completed` adds `result` (the upstream's answer, as a replay gives it);
//! `failed` adds `last` when there was an answer; `outcome_unknown` adds `code: "outcome_unknown"`; every ended
//! one adds `took_ms`.

use std::time::Duration;

use axum::body::Body;
use ballast_core::Priority;
use ballast_store::{Operation, OperationState};
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::headers::set_retry_after;
use crate::idempotency::result_json;

/// `Preference-Applied` (RFC 7240): the caller's `Prefer: respond-async` was honoured.
const PREFERENCE_APPLIED: &str = "preference-applied";

/// Whole milliseconds, saturating.
fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The name of a class the store keeps as a rank (`sheddable` 0 … `critical_plus` 3).
pub fn priority_name(rank: u8) -> &'static str {
    Priority::ALL
        .get(usize::from(rank))
        .map_or("unknown", |priority| priority.as_str())
}

/// `operation` as JSON (see the module docs).
pub fn operation_json(operation: &Operation) -> Value {
    let mut out = json!({
        "key": operation.scope.key().as_str(),
        "status": operation.state.as_str(),
        "route": operation.scope.route(),
        "queue": operation.tool,
        "priority": priority_name(operation.priority),
        "attempts": operation.attempts,
        "max_attempts": operation.max_attempts,
        "age_ms": ms(operation.age),
    });
    let fields = out.as_object_mut().expect("an object");
    match operation.state {
        OperationState::Queued => {
            fields.insert("next_attempt_in_ms".into(), json!(ms(operation.due_in)));
            fields.insert("expires_in_ms".into(), json!(ms(operation.expires_in)));
        }
        OperationState::InProgress => {
            fields.insert("expires_in_ms".into(), json!(ms(operation.expires_in)));
        }
        OperationState::OutcomeUnknown => {
            fields.insert("code".into(), json!("outcome_unknown"));
        }
        OperationState::Completed | OperationState::Failed | OperationState::Expired => {}
    }
    if let Some(last) = &operation.last {
        let name = if operation.state == OperationState::Completed {
            "result"
        } else {
            "last"
        };
        fields.insert(name.into(), result_json(last));
    }
    if let Some(took) = operation.took {
        fields.insert("took_ms".into(), json!(ms(took)));
    }
    out
}

/// `202 Accepted` for a request deferred as `operation`: the operation as JSON, `Location` where to poll it,
/// `Preference-Applied: respond-async`, and `Retry-After` when its first attempt is due (at least a second: a
/// hint for pollers).
pub fn accepted(operation: &Operation, location: &str) -> Response<Body> {
    let body = serde_json::to_vec(&operation_json(operation)).expect("JSON values serialize");
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::ACCEPTED;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(location) = HeaderValue::from_str(location) {
        headers.insert(header::LOCATION, location);
    }
    headers.insert(PREFERENCE_APPLIED, HeaderValue::from_static("respond-async"));
    set_retry_after(headers, operation.due_in.max(Duration::from_secs(1)));
    response
}
