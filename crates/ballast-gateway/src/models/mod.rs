//! The model routes: what an OpenAI or Anthropic SDK, or an agent framework over them, calls when its `base_url`
//! is the gateway's.
//!
//! ```text
//! POST   /v1/responses                 a response (streamed or not), through the route's Responses deployments
//! GET    /v1/responses/{id}            a kept response, from the deployment that made it
//! DELETE /v1/responses/{id}            ... deleted there
//! POST   /v1/responses/{id}/cancel     ... a background one cancelled there
//! POST   /v1/chat/completions          a chat completion (streamed or not)
//! POST   /v1/embeddings                embeddings
//! POST   /v1/messages                  a message of Anthropic's Messages API (streamed or not)
//! POST   /v1/messages/count_tokens     ... its input tokens counted
//! GET    /v1/models                    the configured model routes
//! GET    /v1/models/{id}               one of them (`models.retrieve`)
//! ```
//!
//! Each is thin over the library's [`ModelClient`](ballast::model::ModelClient) (the route is chosen by `model`): the
//! request is read and checked (`request.rs` — its deadline from the caller's headers, its run, priority, hops,
//! trace, owner), the client calls the route's deployments under one deadline, and the result is written back
//! (`answer.rs`): the provider's answer byte for byte, a stream from its commit point with the API's own error
//! event if it fails later, or an OpenAI-style error with a stable code and an explicit `x-should-retry` — in
//! Anthropic's envelope on the Messages routes (`anthropic.rs`).
//! Unknown fields pass through both ways: the gateway reads only what routing, deadlines, truncation and state
//! need.

mod answer;
mod anthropic;
mod request;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use ballast::idempotency::Principal;
use ballast::{
    config::Api,
    model::{
        ChatRequest, ChatStream, EmbeddingsRequest, MessagesRequest, MessagesStream, ModelCall, ModelClient,
        ResponseIdCall, ResponseStream, ResponsesRequest,
    },
};
use http::HeaderMap;
use serde_json::json;

use crate::Gateway;
use crate::error::{AppError, OpenAiError, OpenAiRefused};
use crate::inbound::Inbound;

/// The Messages routes: their errors (a wrong method included) in Anthropic's envelope (`anthropic.rs`).
pub(crate) fn messages_routes() -> Router<Gateway> {
    let wrong_method =
        || async { OpenAiError(AppError::MethodNotAllowed { allowed: "POST" }).into_response() };
    Router::new()
        .route("/v1/messages", post(message).fallback(wrong_method))
        .route(
            "/v1/messages/count_tokens",
            post(count_tokens).fallback(wrong_method),
        )
        // Anthropic's other endpoints (`/v1/messages/batches`): not served, said in Anthropic's envelope.
        .route(
            "/v1/messages/{*rest}",
            axum::routing::any(crate::error::not_found),
        )
}

/// `routes`, every error of theirs rewritten in Anthropic's envelope.
pub(crate) fn anthropic_errors(routes: Router<Gateway>) -> Router<Gateway> {
    routes.layer(axum::middleware::map_response(anthropic::envelope))
}

/// The model routes, each answering OpenAI-style errors (a wrong method included).
pub(crate) fn routes() -> Router<Gateway> {
    let wrong_method = |allowed: &'static str| {
        move || async move { OpenAiError(AppError::MethodNotAllowed { allowed }).into_response() }
    };
    let only = |route: MethodRouter<Gateway>, allowed: &'static str| route.fallback(wrong_method(allowed));
    Router::new()
        .route("/v1/responses", only(post(create_response), "POST"))
        .route(
            "/v1/responses/{id}",
            only(get(retrieve_response).delete(delete_response), "GET, DELETE"),
        )
        .route("/v1/responses/{id}/cancel", only(post(cancel_response), "POST"))
        .route("/v1/chat/completions", only(post(chat_completion), "POST"))
        .route("/v1/embeddings", only(post(embeddings), "POST"))
        .route("/v1/models", only(get(list_models), "GET"))
        .route("/v1/models/{*id}", only(get(retrieve_model), "GET"))
}

/// `POST /v1/responses`.
async fn create_response(
    State(gateway): State<Gateway>,
    Extension(caller): Extension<Principal>,
    inbound: Inbound,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, OpenAiRefused> {
    let prepared = request::prepare::<ResponsesRequest>(
        &gateway,
        &caller,
        inbound,
        &headers,
        body,
        (Api::Responses, "/v1/responses"),
    )
    .await?;
    Ok(once(&gateway, prepared, async |client, call, settled| {
        if settled.stream {
            answer::from_stream(
                client.respond_stream(call).await,
                ResponseStream::into_sse,
                settled,
            )
        } else {
            answer::from_answer(client.respond(call).await, settled)
        }
    })
    .await)
}

/// `POST /v1/chat/completions`.
async fn chat_completion(
    State(gateway): State<Gateway>,
    Extension(caller): Extension<Principal>,
    inbound: Inbound,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, OpenAiRefused> {
    let prepared = request::prepare::<ChatRequest>(
        &gateway,
        &caller,
        inbound,
        &headers,
        body,
        (Api::Chat, "/v1/chat/completions"),
    )
    .await?;
    Ok(once(&gateway, prepared, async |client, call, settled| {
        if settled.stream {
            answer::from_stream(client.stream(call).await, ChatStream::into_sse, settled)
        } else {
            answer::from_answer(client.complete(call).await, settled)
        }
    })
    .await)
}

/// `POST /v1/embeddings`.
async fn embeddings(
    State(gateway): State<Gateway>,
    Extension(caller): Extension<Principal>,
    inbound: Inbound,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, OpenAiRefused> {
    let prepared = request::prepare::<EmbeddingsRequest>(
        &gateway,
        &caller,
        inbound,
        &headers,
        body,
        (Api::Embeddings, "/v1/embeddings"),
    )
    .await?;
    Ok(once(&gateway, prepared, async |client, call, settled| {
        answer::from_answer(client.embed(call).await, settled)
    })
    .await)
}

/// The Messages API's endpoints.
const MESSAGES: (Api, &str) = (Api::Messages, "/v1/messages");
const COUNT_TOKENS: (Api, &str) = (Api::Messages, "/v1/messages/count_tokens");

/// `POST /v1/messages`.
async fn message(
    State(gateway): State<Gateway>,
    Extension(caller): Extension<Principal>,
    inbound: Inbound,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, OpenAiRefused> {
    let prepared =
        request::prepare::<MessagesRequest>(&gateway, &caller, inbound, &headers, body, MESSAGES).await?;
    Ok(once(&gateway, prepared, async |client, call, settled| {
        if settled.stream {
            answer::from_stream(
                client.message_stream(call).await,
                MessagesStream::into_sse,
                settled,
            )
        } else {
            answer::from_answer(client.message(call).await, settled)
        }
    })
    .await)
}

/// `POST /v1/messages/count_tokens`.
async fn count_tokens(
    State(gateway): State<Gateway>,
    Extension(caller): Extension<Principal>,
    inbound: Inbound,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, OpenAiRefused> {
    let prepared =
        request::prepare::<MessagesRequest>(&gateway, &caller, inbound, &headers, body, COUNT_TOKENS).await?;
    Ok(once(&gateway, prepared, async |client, call, settled| {
        answer::from_answer(client.count_tokens(call).await, settled)
    })
    .await)
}

/// The answer `call` makes of a prepared request — unless the request repeats one just answered with a final
/// failure: then that failure again, nothing sent. A final failure is kept for the repeats to come (`repeats.rs`).
async fn once<R>(
    gateway: &Gateway,
    prepared: request::Prepared<R>,
    call: impl AsyncFnOnce(ModelClient, ModelCall<R>, &request::Settled) -> Response,
) -> Response {
    let request::Prepared {
        client,
        call: model_call,
        settled,
        identity,
    } = prepared;
    let repeats = &gateway.inner.repeats;
    if let Some(replay) = repeats.answer(&identity, client.name(), &settled.deadline) {
        return replay;
    }
    let response = call(client, model_call, &settled).await;
    repeats.keep(&identity, response).await
}

/// `GET /v1/responses/{id}`.
async fn retrieve_response(
    State(gateway): State<Gateway>,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    inbound: Inbound,
) -> Result<Response, OpenAiRefused> {
    on_response(&gateway, &caller, inbound, id, query, Operation::Retrieve).await
}

/// `DELETE /v1/responses/{id}`.
async fn delete_response(
    State(gateway): State<Gateway>,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    inbound: Inbound,
) -> Result<Response, OpenAiRefused> {
    on_response(&gateway, &caller, inbound, id, query, Operation::Delete).await
}

/// `POST /v1/responses/{id}/cancel`.
async fn cancel_response(
    State(gateway): State<Gateway>,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    inbound: Inbound,
) -> Result<Response, OpenAiRefused> {
    on_response(&gateway, &caller, inbound, id, query, Operation::Cancel).await
}

/// What is done with a kept response.
#[derive(Clone, Copy)]
enum Operation {
    Retrieve,
    Delete,
    Cancel,
}

/// A retrieve, delete or cancel of response `id` (with the caller's `query`, passed on): sent to the deployment
/// that made it, whichever route that is (the caller names no model): the first route whose records know it for
/// this caller. Streaming a retrieved response (`stream=true`) is not served: answered 400.
async fn on_response(
    gateway: &Gateway,
    caller: &Principal,
    inbound: Inbound,
    id: String,
    query: Option<String>,
    operation: Operation,
) -> Result<Response, OpenAiRefused> {
    let settled = request::settle_state_call(gateway, caller, inbound).await?;
    if query
        .as_deref()
        .is_some_and(|q| q.split('&').any(|pair| pair.eq_ignore_ascii_case("stream=true")))
    {
        let message =
            "streaming a retrieved response (stream=true) is not served by the gateway; retrieve it whole";
        return Ok(OpenAiError(AppError::InvalidRequest {
            message: message.to_owned(),
        })
        .into_response());
    }
    let mut routes: Vec<_> = (gateway.inner.models.iter())
        .filter(|client| client.speaks(Api::Responses))
        .collect();
    routes.sort_by(|a, b| a.name().cmp(b.name()));
    let mut last = None;
    for client in routes {
        let mut call: ResponseIdCall = ModelCall::for_response(id.clone());
        if let Some(query) = &query {
            call = call.query(query.clone());
        }
        let call = request::with_options(call, gateway, caller, &settled);
        let result = match operation {
            Operation::Retrieve => client
                .retrieve_response(call)
                .await
                .map(|a| answer::answered(a, &settled)),
            Operation::Delete => client
                .delete_response(call)
                .await
                .map(|a| answer::answered(a, &settled)),
            Operation::Cancel => client
                .cancel_response(call)
                .await
                .map(|a| answer::answered(a, &settled)),
        };
        match result {
            Ok(response) => return Ok(response),
            // Not this route's: the next one may know it.
            Err(ballast::CallError::Refused {
                refusal: ballast::Refusal::UnknownState(_),
                ..
            }) => continue,
            Err(error) => {
                last = Some(error);
                break;
            }
        }
    }
    Ok(match last {
        Some(error) => answer::failed(error, &settled),
        None => answer::unknown_response(&id),
    })
}

/// `GET /v1/models`: the configured model routes, as OpenAI lists models.
async fn list_models(State(gateway): State<Gateway>) -> Response {
    let names = route_names(&gateway);
    let (first, last) = (names.first().copied(), names.last().copied());
    let data: Vec<_> = names.into_iter().map(model_object).collect();
    // OpenAI's list, with the page fields Anthropic's SDKs read (`models.list()`): one page, all of it.
    axum::Json(json!({"object": "list", "data": data, "has_more": false, "first_id": first, "last_id": last}))
        .into_response()
}

/// `GET /v1/models/{id}`: the model route `id`, as `GET /v1/models` lists it; 404 `model_not_found` (naming the
/// routes there are) for any other.
async fn retrieve_model(State(gateway): State<Gateway>, Path(id): Path<String>) -> Response {
    let names = route_names(&gateway);
    if names.contains(&id.as_str()) {
        return axum::Json(model_object(&id)).into_response();
    }
    let models = names.into_iter().map(str::to_owned).collect();
    OpenAiError(AppError::UnknownModel { name: id, models }).into_response()
}

/// The configured model routes' names, sorted.
fn route_names(gateway: &Gateway) -> Vec<&str> {
    let mut names: Vec<&str> = gateway
        .inner
        .config
        .models
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    names.sort_unstable();
    names
}

/// A model route as OpenAI's model object, which is Anthropic's too.
fn model_object(name: &str) -> serde_json::Value {
    // OpenAI's fields, and Anthropic's (`type`, `display_name`, `created_at`): each SDK reads its own.
    json!({"id": name, "object": "model", "created": 0, "owned_by": "ballast",
           "type": "model", "display_name": name, "created_at": "1970-01-01T00:00:00Z"})
}
