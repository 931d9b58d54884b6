//! `POST /v1/messages` and `POST /v1/messages/count_tokens`: the mock model over Anthropic's Messages API,
//! behind the model endpoint's front door and faults.
//!
//! # The same faults as chat
//! A Messages request is the model endpoint (`model` in profiles and stats). Its faults are drawn under the key
//! chat's would be for the same conversation — `op/turn-N`, N its assistant messages — so an agent on Messages
//! meets, turn by turn and attempt by attempt, the faults an agent on Chat meets. A request naming no op (or one
//! that cannot be read) is keyed by a hash of its body, and answered 400 after the front door, as chat answers an
//! invalid request; so is a request without the `anthropic-version` header ("anthropic-version: header is
//! required", as the real API answers), so that a gateway that forgets it is caught.
//!
//! Faults speak Anthropic: an injected status is Anthropic's error for it (529 `overloaded_error`, 429
//! `rate_limit_error` with the endpoint's `retry-after`, a spent credit a 400, a spend limit a 429 with
//! `enforced_spend_limit_reached` and no `retry-after`); with `stream.error_delivery = "events"` a streamed
//! request gets a `200`, `message_start`, `ping`, then `event: error`. A cut ends the body in an error with no
//! `message_stop`; a stall waits between events; a stream error (`stream.error`) sends content deltas, then
//! `event: error` with `overloaded_error`, and ends. Hangs, resets and commit-then-lose are chat's.
//!
//! # Anthropic's headers
//! Every answer carries `request-id` (also the error body's `request_id`); a `200` or a `429` carries the
//! `anthropic-ratelimit-*` headers (`headers`).
//!
//! # Counting tokens
//! `POST /v1/messages/count_tokens` answers `{"input_tokens": N}`, N what the message's `usage.input_tokens`
//! would be. It needs the `anthropic-version` header too, but it is not the model endpoint: no faults, and not in
//! the stats (as `GET /v1/models`) — it is a helper a client calls beside the model, not a model call, and
//! faulting it would shift no attempt count of the conversation it measures.

mod headers;

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::Value;

use super::answer::{Answer, CHAOS_FAULT, Flavor};
use super::arrival::{Arrival, Door, answer, arrive, injected};
use super::body_hash;
use super::chat::MODEL;
use super::clock;
use super::lose::{self, ConnectionHandle};
use super::sse::{self, Pace};
use super::state::{App, Epoch};
use super::stats::Outcome;
use crate::model::{MessagesRequest, sse_event};
use crate::{ErrorDelivery, Fault, MessagesError};

/// The header every Messages request must carry.
const ANTHROPIC_VERSION: &str = "anthropic-version";

/// Answers one `POST /v1/messages`.
pub(crate) async fn create_message(
    State(app): State<App>,
    conn: Option<Extension<ConnectionHandle>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request_id = app.next_request_id();
    let conn = conn.map(|Extension(conn)| conn);
    let mut response = message(&app, conn, &headers, &body, &request_id).await;
    headers::stamp(&mut response, &request_id, clock::now().wall);
    response
}

/// Answers one `POST /v1/messages/count_tokens` (no faults, no stats).
pub(crate) async fn count_tokens(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    let request_id = app.next_request_id();
    let counted = read(&headers, &body).and_then(|request| MessagesRequest::count_tokens(&request));
    let mut response = match counted {
        Ok(count) => Answer::ok(count),
        Err(error) => refusal(&error, &request_id),
    }
    .into_response();
    headers::stamp(&mut response, &request_id, clock::now().wall);
    response
}

/// The body as JSON, if the request has the `anthropic-version` header.
fn read(headers: &HeaderMap, body: &[u8]) -> Result<Value, MessagesError> {
    if !headers.contains_key(ANTHROPIC_VERSION) {
        return Err(MessagesError::MissingVersion);
    }
    serde_json::from_slice(body)
        .map_err(|_| MessagesError::InvalidRequest("The request body is not valid JSON.".into()))
}

/// The front door, then the request's checks, then its fault.
async fn message(
    app: &App,
    conn: Option<ConnectionHandle>,
    headers: &HeaderMap,
    body: &[u8],
    request_id: &str,
) -> Response {
    let parsed = read(headers, body);
    let request = parsed
        .as_ref()
        .map_err(Clone::clone)
        .and_then(MessagesRequest::parse);
    let op = request
        .as_ref()
        .ok()
        .and_then(MessagesRequest::fault_key)
        .unwrap_or_else(|| body_hash(body));
    let epoch = app.epoch();
    let door = Door {
        stopping: app.stopping(),
        conn: conn.clone(),
    };
    let flavor = Flavor::Messages { request_id };
    let mut arrival = match arrive(&epoch, MODEL, &op, headers, flavor, door).await {
        Ok(arrival) => arrival,
        Err(refused) => return refused,
    };
    match request {
        Ok(request) => respond(app, &epoch, arrival, &request, conn, request_id).await,
        Err(error) => answer(&mut arrival.visit, refusal(&error, request_id)),
    }
}

/// Plays the attempt's fault.
async fn respond(
    app: &App,
    epoch: &Epoch,
    arrival: Arrival,
    request: &MessagesRequest<'_>,
    conn: Option<ConnectionHandle>,
    request_id: &str,
) -> Response {
    let Arrival {
        draw,
        mut visit,
        slot,
    } = arrival;
    let pace = Pace::of(&epoch.profile, MODEL);
    match draw.fault {
        Fault::Status {
            status,
            retry_after,
            quota,
        } => {
            let error = injected(Flavor::Messages { request_id }, status, retry_after, quota);
            let in_stream = request.stream
                && epoch.profile.endpoint(MODEL).stream.error_delivery == ErrorDelivery::Events;
            // The preamble needs an answer; a request the model refuses gets the injected status instead.
            match in_stream.then(|| request.reply(&epoch.profile.model)) {
                Some(Ok(reply)) => {
                    visit.count(Outcome::Status(error.status.as_u16()), false);
                    let events = reply.failure(&MessagesError::Injected { status, quota });
                    let mut response = sse::stream(&frames(&events), Fault::None, pace, (visit, slot));
                    response
                        .headers_mut()
                        .insert(CHAOS_FAULT, HeaderValue::from_static("injected"));
                    response
                }
                _ => answer(&mut visit, error),
            }
        }
        Fault::Hang => {
            visit.count(Outcome::Hang, false);
            lose::hang(app.stopping(), conn).await
        }
        Fault::Reset => {
            visit.count(Outcome::Reset, false);
            lose::reset(conn).await
        }
        Fault::CommitThenLose(mode) => {
            // The model has no side effect: it does its work, and the answer is lost.
            let _work = request.reply(&epoch.profile.model);
            visit.count(Outcome::CommitThenLose, false);
            lose::lose(mode, app.stopping(), conn).await
        }
        fault @ (Fault::None
        | Fault::StreamCut { .. }
        | Fault::StreamStall { .. }
        | Fault::StreamError { .. }
        // Only MCP answers these; here they are served normally.
        | Fault::Garbage
        | Fault::IsError) => {
            let reply = match request.reply(&epoch.profile.model) {
                Ok(reply) => reply,
                Err(error) => return answer(&mut visit, refusal(&error, request_id)),
            };
            if !request.stream {
                return answer(&mut visit, Answer::ok(reply.message));
            }
            let (outcome, events) = match fault {
                Fault::StreamError { after_chunks } => {
                    (Outcome::StreamError, reply.overloaded_after(after_chunks))
                }
                Fault::StreamCut { .. } => (Outcome::StreamCut, reply.events),
                _ => (Outcome::Status(200), reply.events),
            };
            visit.count(outcome, false);
            sse::stream(&frames(&events), fault, pace, (visit, slot))
        }
    }
}

/// Events as server-sent events: `event: <type>` and `data: <json>`.
fn frames(events: &[Value]) -> Vec<Bytes> {
    events.iter().map(|event| Bytes::from(sse_event(event))).collect()
}

/// A refusal as an answer, in Anthropic's format.
fn refusal(error: &MessagesError, request_id: &str) -> Answer {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
    Answer {
        status,
        ..Answer::ok(error.body(request_id))
    }
}
