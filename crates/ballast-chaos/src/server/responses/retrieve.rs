//! `GET /v1/responses/{id}`, `DELETE /v1/responses/{id}` and `POST /v1/responses/{id}/cancel`: the stored
//! responses, without faults (a gateway routes these to the deployment that holds the response; what is tested
//! is that routing, not this server's reliability).

use axum::extract::{Path, State};
use axum::response::{IntoResponse as _, Response};

use super::refusal;
use crate::server::answer::Answer;
use crate::server::state::App;

/// `GET /v1/responses/{id}`: the response (a queued background response runs first), or a 404.
pub(crate) async fn get_response(State(app): State<App>, Path(id): Path<String>) -> Response {
    reply(app.responses().get(&id))
}

/// `DELETE /v1/responses/{id}`: `{"id", "object": "response", "deleted": true}`, or a 404.
pub(crate) async fn delete_response(State(app): State<App>, Path(id): Path<String>) -> Response {
    reply(app.responses().delete(&id))
}

/// `POST /v1/responses/{id}/cancel`: a queued background response, now `cancelled`; a 400 for one that cannot be
/// cancelled; a 404.
pub(crate) async fn cancel_response(State(app): State<App>, Path(id): Path<String>) -> Response {
    reply(app.responses().cancel(&id))
}

fn reply(result: Result<serde_json::Value, crate::ResponsesError>) -> Response {
    match result {
        Ok(body) => Answer::ok(body).into_response(),
        Err(error) => refusal(&error).into_response(),
    }
}
