//! `POST /v1/chat/completions`: the mock model behind the front door and its faults.
//!
//! Faults are keyed by the conversation's operation id and turn (`op/turn-N`, N the assistant messages so far),
//! so each turn of an agent conversation meets its own faults; a request naming no op is keyed by a hash of its
//! body. An injected error reaches a streamed request as its HTTP status, or — with the profile's
//! `stream.error_delivery = "events"` — as the role chunk and then `data: {"error": {...}}` (no `[DONE]`). A
//! stream error (`stream.error`) sends content chunks first, then OpenAI's overload the same way.

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;

use super::answer::{Answer, CHAOS_FAULT, Flavor};
use super::arrival::{Arrival, Door, answer, arrive, injected};
use super::body_hash;
use super::lose::{self, ConnectionHandle};
use super::sse::{self, Pace};
use super::state::{App, Epoch};
use super::stats::Outcome;
use crate::model::{SSE_DONE, sse_data};
use crate::{ErrorDelivery, Fault, ModelError};

/// The model endpoint's name in profiles and stats.
pub(crate) const MODEL: &str = "model";

/// Answers one chat-completions request.
pub(crate) async fn chat_completions(
    State(app): State<App>,
    conn: Option<Extension<ConnectionHandle>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request: Option<Value> = serde_json::from_slice(&body).ok();
    // Each turn of a conversation is its own request: its faults are keyed by the operation and the turn (the
    // assistant messages so far), so the turns of one conversation do not all meet the same fault.
    let op = request
        .as_ref()
        .and_then(crate::model::chat_fault_key)
        .unwrap_or_else(|| body_hash(&body));
    let epoch = app.epoch();
    let conn = conn.map(|Extension(conn)| conn);
    let door = Door {
        stopping: app.stopping(),
        conn: conn.clone(),
    };
    let mut arrival = match arrive(&epoch, MODEL, &op, &headers, Flavor::Model, door).await {
        Ok(arrival) => arrival,
        Err(refused) => return refused,
    };
    let Some(request) = request else {
        let error = ModelError::InvalidRequest("the body is not a JSON chat-completions request".into());
        return answer(&mut arrival.visit, model_error(&error));
    };
    respond(&app, &epoch, arrival, &request, conn).await
}

/// Plays the attempt's fault.
async fn respond(
    app: &App,
    epoch: &Epoch,
    arrival: Arrival,
    request: &Value,
    conn: Option<ConnectionHandle>,
) -> Response {
    let Arrival {
        draw,
        mut visit,
        slot,
    } = arrival;
    let streamed = request.get("stream") == Some(&Value::Bool(true));
    let pace = Pace::of(&epoch.profile, MODEL);
    match draw.fault {
        Fault::Status {
            status,
            retry_after,
            quota,
        } => {
            let error = injected(Flavor::Model, status, retry_after, quota);
            let in_stream =
                streamed && epoch.profile.endpoint(MODEL).stream.error_delivery == ErrorDelivery::Events;
            // The role chunk needs an answer; a request the model refuses gets the injected status instead.
            match in_stream.then(|| crate::reply(request, &epoch.profile.model)) {
                Some(Ok(reply)) => {
                    visit.count(Outcome::Status(status), false);
                    let frames: Vec<Bytes> = reply
                        .chunks
                        .iter()
                        .take(1)
                        .chain([&error.body])
                        .map(|chunk| Bytes::from(sse_data(chunk)))
                        .collect();
                    let mut response = sse::stream(&frames, Fault::None, pace, (visit, slot));
                    response
                        .headers_mut()
                        .insert(CHAOS_FAULT, axum::http::HeaderValue::from_static("injected"));
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
            let _work = crate::reply(request, &epoch.profile.model);
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
            let reply = match crate::reply(request, &epoch.profile.model) {
                Ok(reply) => reply,
                Err(error) => return answer(&mut visit, model_error(&error)),
            };
            if !streamed {
                return answer(&mut visit, Answer::ok(reply.completion));
            }
            let (outcome, chunks, done) = match fault {
                Fault::StreamError { after_chunks } => {
                    (Outcome::StreamError, reply.overloaded_after(after_chunks), None)
                }
                Fault::StreamCut { .. } => (Outcome::StreamCut, reply.chunks, Some(SSE_DONE)),
                _ => (Outcome::Status(200), reply.chunks, Some(SSE_DONE)),
            };
            visit.count(outcome, false);
            let frames: Vec<Bytes> = chunks
                .iter()
                .map(|chunk| Bytes::from(sse_data(chunk)))
                .chain(done.map(|done| Bytes::from_static(done.as_bytes())))
                .collect();
            sse::stream(&frames, fault, pace, (visit, slot))
        }
    }
}

fn model_error(error: &ModelError) -> Answer {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
    Answer {
        status,
        ..Answer::ok(error.body())
    }
}
