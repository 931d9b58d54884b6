//! `POST /v1/embeddings`: the mock embeddings behind their own front door and faults.
//!
//! The endpoint is `embeddings` in profiles and stats, with every fault an endpoint has: outages, the capacity
//! limit, latency, error statuses (in OpenAI's format), hangs, resets and commit-then-lose (the vectors computed,
//! the answer lost). An embeddings request names no operation, so its faults are keyed by a hash of its body: an
//! identical retry is the same operation, and meets attempt 2's draw. Stream faults do not apply (the answer is
//! never streamed).

use axum::Extension;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;

use super::answer::{Answer, Flavor};
use super::arrival::{Arrival, Door, answer, arrive, injected};
use super::body_hash;
use super::lose::{self, ConnectionHandle};
use super::state::App;
use super::stats::Outcome;
use crate::{Fault, ModelError};

/// The embeddings endpoint's name in profiles and stats.
pub(crate) const EMBEDDINGS: &str = "embeddings";

/// Answers one embeddings request.
pub(crate) async fn create_embeddings(
    State(app): State<App>,
    conn: Option<Extension<ConnectionHandle>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let op = body_hash(&body);
    let epoch = app.epoch();
    let conn = conn.map(|Extension(conn)| conn);
    let door = Door {
        stopping: app.stopping(),
        conn: conn.clone(),
    };
    let Arrival {
        draw,
        mut visit,
        slot: _slot,
    } = match arrive(&epoch, EMBEDDINGS, &op, &headers, Flavor::Model, door).await {
        Ok(arrival) => arrival,
        Err(refused) => return refused,
    };
    let request: Result<Value, _> = serde_json::from_slice(&body);
    let vectors = || match &request {
        Ok(request) => crate::embeddings(request),
        Err(_) => Err(ModelError::InvalidRequest(
            "The body is not a JSON embeddings request.".into(),
        )),
    };
    match draw.fault {
        Fault::Status {
            status,
            retry_after,
            quota,
        } => answer(&mut visit, injected(Flavor::Model, status, retry_after, quota)),
        Fault::Hang => {
            visit.count(Outcome::Hang, false);
            lose::hang(app.stopping(), conn).await
        }
        Fault::Reset => {
            visit.count(Outcome::Reset, false);
            lose::reset(conn).await
        }
        Fault::CommitThenLose(mode) => {
            let _work = vectors();
            visit.count(Outcome::CommitThenLose, false);
            lose::lose(mode, app.stopping(), conn).await
        }
        // Stream faults have no stream to fault, and only MCP answers garbage and is-error: served normally.
        Fault::None
        | Fault::StreamCut { .. }
        | Fault::StreamStall { .. }
        | Fault::StreamError { .. }
        | Fault::Garbage
        | Fault::IsError => match vectors() {
            Ok(body) => answer(&mut visit, Answer::ok(body)),
            Err(error) => {
                let status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::BAD_REQUEST);
                answer(
                    &mut visit,
                    Answer {
                        status,
                        ..Answer::ok(error.body())
                    },
                )
            }
        },
    }
}
