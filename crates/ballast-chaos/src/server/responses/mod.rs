//! `POST /v1/responses` and the stored responses (`GET`, `DELETE`, `POST .../cancel`): the mock model over the
//! Responses API, behind the model endpoint's front door and faults.
//!
//! # The same faults as chat
//! A Responses request is the model endpoint (`model` in profiles and stats). Its faults are drawn under the
//! key chat's would be for the same conversation — `op/turn-N`, counting the turns of the conversation it
//! continues (the items of its `previous_response_id` or `conversation`, then its input) — so an agent on
//! Responses meets, turn by turn and attempt by attempt, the faults an agent on Chat meets. A request naming no op
//! (or one that cannot be read, or whose `previous_response_id` this server does not hold) is keyed by a hash of
//! its body, and answered 400 after the front door, as chat answers an invalid request.
//!
//! # What is kept, and when
//! A response is kept (unless `store: false`) and a conversation grows once the model has answered: on a normal
//! answer, a stream that is then cut or stalls, and a commit-then-lose — the model did the work and the state
//! changed, only the answer was lost, so a retry of a turn of a `conversation` meets the items of the lost one.
//! An injected error status, a hang or a reset keeps nothing. A streamed request whose injected error comes as
//! events (`stream.error_delivery = "events"`), or that fails after content (`stream.error`: events up to the
//! Nth delta, then `error` and `response.failed`), is kept as `failed`. `background: true` answers `queued` and the
//! answer runs on the first `GET` (or continuation); `cancel` while queued makes it `cancelled`. A background
//! request that also streams is streamed as a foreground one.

mod retrieve;

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;

use super::response_store::Stored;
pub(crate) use retrieve::{cancel_response, delete_response, get_response};

use super::answer::{Answer, CHAOS_FAULT, Flavor};
use super::arrival::{Arrival, Door, answer, arrive, injected};
use super::body_hash;
use super::chat::MODEL;
use super::lose::{self, ConnectionHandle};
use super::sse::{self, Pace};
use super::state::{App, Epoch};
use super::stats::Outcome;
use crate::model::{ResponsesRequest, sse_event};
use crate::{ErrorDelivery, Fault, ResponsesError, ResponsesReply};

/// A request read, and the history it continues.
struct Prepared<'a> {
    request: ResponsesRequest<'a>,
    history: Vec<Value>,
}

/// Answers one `POST /v1/responses`.
pub(crate) async fn create_response(
    State(app): State<App>,
    conn: Option<Extension<ConnectionHandle>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let prepared = parsed.as_ref().map(|request| {
        let request = ResponsesRequest::parse(request)?;
        let history = app
            .responses()
            .history(request.previous_response_id, request.conversation)?;
        Ok::<_, ResponsesError>(Prepared { request, history })
    });
    let op = match &prepared {
        Some(Ok(prepared)) => prepared.request.fault_key(&prepared.history),
        _ => None,
    }
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
    match prepared {
        Some(Ok(prepared)) => respond(&app, &epoch, arrival, prepared, conn).await,
        Some(Err(error)) => answer(&mut arrival.visit, refusal(&error)),
        None => {
            let error = ResponsesError::InvalidRequest {
                message: "The body is not a JSON Responses request.".into(),
                param: None,
            };
            answer(&mut arrival.visit, refusal(&error))
        }
    }
}

/// Plays the attempt's fault.
async fn respond(
    app: &App,
    epoch: &Epoch,
    arrival: Arrival,
    prepared: Prepared<'_>,
    conn: Option<ConnectionHandle>,
) -> Response {
    let Arrival {
        draw,
        mut visit,
        slot,
    } = arrival;
    let Prepared { request, history } = prepared;
    let pace = Pace::of(&epoch.profile, MODEL);
    match draw.fault {
        Fault::Status {
            status,
            retry_after,
            quota,
        } => {
            let error = injected(Flavor::Model, status, retry_after, quota);
            let in_stream = request.stream
                && epoch.profile.endpoint(MODEL).stream.error_delivery == ErrorDelivery::Events;
            if !in_stream {
                return answer(&mut visit, error);
            }
            visit.count(Outcome::Status(status), false);
            let frames = failure(app, &request, history, &error.body);
            let mut response = sse::stream(&frames, Fault::None, pace, (visit, slot));
            response
                .headers_mut()
                .insert(CHAOS_FAULT, HeaderValue::from_static("injected"));
            response
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
            // The model does its work and the state changes; the answer is lost.
            let id = app.responses().next_id();
            if let Ok(reply) = request.reply(&history, &epoch.profile.model, &id) {
                commit(app, &request, history, id, &reply);
            }
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
            let id = app.responses().next_id();
            let reply = match request.reply(&history, &epoch.profile.model, &id) {
                Ok(reply) => reply,
                Err(error) => return answer(&mut visit, refusal(&error)),
            };
            if let (true, Fault::StreamError { after_chunks }) = (request.stream, fault) {
                // The stream fails: what is kept is the failed response, as for an error delivered as events.
                visit.count(Outcome::StreamError, false);
                let events = request.overloaded_after(&reply, &id, after_chunks);
                keep_failed(app, &request, history, id, &events);
                let frames: Vec<Bytes> = events.iter().map(|event| Bytes::from(sse_event(event))).collect();
                return sse::stream(&frames, Fault::None, pace, (visit, slot));
            }
            let shown = commit(app, &request, history, id, &reply);
            if !request.stream {
                return answer(&mut visit, Answer::ok(shown));
            }
            let cut = matches!(fault, Fault::StreamCut { .. });
            visit.count(
                if cut {
                    Outcome::StreamCut
                } else {
                    Outcome::Status(200)
                },
                false,
            );
            let frames: Vec<Bytes> = reply
                .events
                .iter()
                .map(|event| Bytes::from(sse_event(event)))
                .collect();
            sse::stream(&frames, fault, pace, (visit, slot))
        }
    }
}

/// Keeps what an answer changes — the conversation's new items, the response (unless `store: false`) — and
/// returns the response to show: the answer, or for `background: true` the queued response.
fn commit(
    app: &App,
    request: &ResponsesRequest<'_>,
    history: Vec<Value>,
    id: String,
    reply: &ResponsesReply,
) -> Value {
    let output: Vec<Value> = reply.response["output"].as_array().cloned().unwrap_or_default();
    let store = app.responses();
    if let Some(conversation) = request.conversation {
        store.extend_conversation(conversation, reply.input.iter().chain(&output).cloned());
    }
    if !request.store {
        return reply.response.clone();
    }
    let mut asked = history;
    asked.extend(reply.input.iter().cloned());
    let mut answered = asked.clone();
    answered.extend(output);
    // A background request that streams is streamed, and kept, as a foreground one.
    if request.background && !request.stream {
        let queued = request.pending(&id, "queued");
        let stored = Stored {
            response: queued.clone(),
            context: asked,
            background: true,
            pending: Some((reply.response.clone(), answered)),
        };
        store.keep(id, stored);
        return queued;
    }
    let stored = Stored {
        response: reply.response.clone(),
        context: answered,
        background: request.background,
        pending: None,
    };
    store.keep(id, stored);
    reply.response.clone()
}

/// The frames of a stream that fails after its preamble with the error `body`; the failed response is kept
/// (unless `store: false`), continuing from what was asked.
fn failure(app: &App, request: &ResponsesRequest<'_>, history: Vec<Value>, body: &Value) -> Vec<Bytes> {
    let id = app.responses().next_id();
    let events = request.failure_events(&id, body);
    keep_failed(app, request, history, id, &events);
    events.iter().map(|event| Bytes::from(sse_event(event))).collect()
}

/// Keeps the failed response `id` that the last of `events` carries (unless `store: false`), continuing from what
/// was asked.
fn keep_failed(app: &App, request: &ResponsesRequest<'_>, history: Vec<Value>, id: String, events: &[Value]) {
    if request.store
        && let Some(failed) = events.last().and_then(|event| event.get("response"))
    {
        let mut asked = history;
        asked.extend(request.input().iter().cloned());
        let stored = Stored {
            response: failed.clone(),
            context: asked,
            background: request.background,
            pending: None,
        };
        app.responses().keep(id, stored);
    }
}

/// A refusal as an answer.
pub(super) fn refusal(error: &ResponsesError) -> Answer {
    let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
    Answer {
        status,
        ..Answer::ok(error.body())
    }
}
