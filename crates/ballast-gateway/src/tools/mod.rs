//! `POST /v1/tools/{name}`: a tool call from any language, under the tool's policy.
//!
//! Each configured tool has a route of its own, in this order (DESIGN.md, "Admission"):
//!
//! ```text
//! prepare (method, headers, key, body, deadline) -> IdempotencyLayer (replay, in progress, claim)
//!     -> the tool's ToolClient (admission -> retry -> throttle -> breaker -> attempt) -> the answer
//! ```
//!
//! - `prepare` refuses what cannot run before anything is claimed: a wrong method, an unreadable header, a
//!   side-effecting call without a key (nor a run and step to derive one), a body over the limit or not JSON,
//!   a deadline (the run's included) that cannot hold an attempt. It settles the call's deadline once — the
//!   smallest deadline header, else the run's, else the default — so the store waits and the call share it.
//! - A keyless call that repeats one just answered with a final failure is answered from it (`repeats.rs`):
//!   a client that retries on status alone adds no upstream load. A keyed call's repeats are the idempotency
//!   layer's.
//! - The idempotency layer answers replays and in-progress keys from the store, before admission: they never
//!   queue or get shed. A claimed call runs in a task of its own, so a caller that disconnects does not cut a
//!   side effect half-way: its answer is stored for the retry.
//! - The handler calls the tool and turns the result into the answer: the upstream's own answer passed on
//!   (stored for replays), or the gateway's problem+json (`error.rs`) — `crate::tool_answer` —, marked not-stored when nothing reached
//!   the upstream, or outcome-unknown when something may have.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use ballast::context::CallContext;
use ballast::idempotency::store::ExpiredDispatch;
use ballast::idempotency::{IdempotencyLayer, Principal};
use ballast::{
    policy::{Deadline, IdempotencyKey},
    tool::{ToolCall, ToolClient},
};
use ballast_core::CallKind;
use http::{HeaderValue, Method};
use tower::Service;

use crate::Gateway;
use crate::error::{AppError, Refused};
use crate::inbound::Inbound;
use crate::repeats::Identity;
use ballast::headers::{
    BALLAST_ATTEMPTS, BALLAST_CODE, BALLAST_FALLBACK, BALLAST_IDEMPOTENCY_KEY, IDEMPOTENCY_KEY,
};

mod route;

/// A tool request that passed `prepare`: what the handler needs.
#[derive(Debug)]
struct Prepared {
    /// The body, checked to be JSON, sent on byte for byte.
    arguments: bytes::Bytes,
    inbound: Inbound,
    /// The caller's principal: its runs are its own.
    owner: String,
    key: Option<IdempotencyKey>,
    /// The call's deadline as `prepare` settled it (the run's folded in).
    deadline: Deadline,
    /// The explicit deadline the caller sent (offered to its run).
    explicit: Option<Deadline>,
    /// Whether this call started its run again after the run was evicted for room.
    run_restarted: bool,
    /// Whether the caller can wait for a deferred answer (`deferred/`).
    ask: crate::deferred::Ask,
    /// Whether the request is traced (`telemetry/`): its answer then says what the call did (`CallTrace`).
    traced: bool,
}

/// A route as one boxed service: a tool's (`route`'s, for the MCP route's tools), and `/mcp` itself.
pub(crate) type ToolRoute = tower::util::BoxCloneSyncService<Request, Response, Infallible>;

/// The routes of every configured tool, and the answer for a tool that is not configured.
pub(crate) fn routes(gateway: &Gateway) -> Result<Router<Gateway>, crate::StartError> {
    let mut router = Router::new();
    for tool in &gateway.inner.config.tools {
        let Some(client) = gateway.inner.tools.get(&tool.name) else {
            continue;
        };
        router = router.route_service(&format!("/v1/tools/{}", tool.name), route(gateway, client)?);
    }
    Ok(router.route("/v1/tools/{name}", any(unknown_tool)))
}

/// The route of the tool `client` calls (a `[[tools]]` entry, or an upstream MCP server's tool): what
/// `POST /v1/tools/{name}` and the MCP route's `tools/call` both go through.
pub(crate) fn route(
    gateway: &Gateway,
    client: &ToolClient,
) -> Result<
    impl Service<Request, Response = Response, Error = Infallible, Future = route::Answer>
    + Clone
    + Send
    + Sync
    + 'static,
    crate::StartError,
> {
    let server = &gateway.inner.config.server;
    let tool = client.config();
    let expired = if tool.upstream_idempotency.deduplicates() {
        ExpiredDispatch::TakeOver
    } else {
        ExpiredDispatch::OutcomeUnknown
    };
    let idempotency = IdempotencyLayer::builder(Arc::clone(&gateway.inner.store))
        .require_key(tool.side_effects)
        .body_limit(usize::try_from(server.body_limit).unwrap_or(usize::MAX))
        .default_timeout(server.default_timeout)
        .max_timeout(server.max_timeout)
        .expired_dispatch(expired)
        .max_retry_after(server.max_retry_after)
        .store_header(BALLAST_CODE)
        .store_header(BALLAST_FALLBACK);
    // Side effects that cannot be served now and whose caller can wait are queued (`deferred/`).
    let idempotency = match &gateway.inner.deferred {
        Some(queue) if tool.side_effects => idempotency.deferred(&queue.deferred),
        _ => idempotency,
    };
    let idempotency = idempotency
        .build()
        .map_err(|source| crate::StartError::Idempotency {
            tool: tool.name.clone(),
            source,
        })?;
    let handler_client = ToolClient::clone(client);
    // The handler's future boxed: the idempotency layer runs a claimed call in a task of its own, whose future
    // would otherwise hold the whole call inline (kilobytes, copied at every move of the task).
    let handler = tower::service_fn(move |request: Request| {
        let client = ToolClient::clone(&handler_client);
        let call: route::Answer = Box::pin(async move { Ok(call_tool(client, request).await) });
        call
    });
    let route = tower::ServiceBuilder::new()
        .layer(route::PrepareLayer {
            gateway: gateway.clone(),
            client: ToolClient::clone(client),
        })
        .layer(idempotency)
        .service(handler);
    Ok(route)
}

/// A tool name nobody configured: 404 listing the tools. A configured name percent-encoded in the path
/// (`lookup%5Forder`) is not decoded into a call — a tool's route is its name as written — but told so, never as
/// a tool that does not exist.
async fn unknown_tool(
    State(gateway): State<Gateway>,
    axum::extract::Path(name): axum::extract::Path<String>,
    uri: http::Uri,
) -> AppError {
    let mut tools: Vec<String> = gateway
        .inner
        .config
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    tools.sort();
    let written = uri.path().strip_prefix("/v1/tools/").unwrap_or(uri.path());
    if written != name && tools.contains(&name) {
        return AppError::EncodedToolName {
            written: written.to_owned(),
            name,
        };
    }
    AppError::UnknownTool { name, tools }
}

/// Refuses what cannot run, settles the deadline and the key, hands the request to `inner` (the idempotency layer
/// over the handler), and finishes every answer of the route.
async fn prepare<S>(gateway: Gateway, client: ToolClient, mut inner: S, request: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let started = ballast::clock::now();
    let (prepared, request) = match check(&gateway, &client, request, started).await {
        Ok(checked) => checked,
        Err(refused) => return refused.into_problem(),
    };
    crate::metrics::sdk_retry(client.name(), prepared.inbound.sdk_retry);
    let deadline = prepared.deadline;
    let run_restarted = prepared.run_restarted;
    let key = prepared.key.clone();
    // A keyed call's repeats are the idempotency layer's: replayed by key.
    let identity = key.is_none().then(|| {
        let (path, headers) = (request.uri().path(), request.headers());
        Identity::of(
            &prepared.owner,
            path,
            headers,
            prepared.arguments.clone(),
            prepared.inbound.sdk_retry,
        )
    });
    let repeats = &gateway.inner.repeats;
    let replay = (identity.as_ref()).and_then(|identity| repeats.answer(identity, client.name(), &deadline));
    let mut response = match replay {
        Some(replay) => replay,
        None => {
            let response = call_once(&client, &mut inner, request, prepared, key.as_ref()).await;
            match &identity {
                Some(identity) => repeats.keep(identity, response).await,
                None => response,
            }
        }
    };
    let headers = response.headers_mut();
    crate::error::insert_remaining(headers, &deadline);
    crate::error::tell_restart(headers, run_restarted);
    if let Some(key) = key.and_then(|k| HeaderValue::from_str(k.as_str()).ok()) {
        headers.insert(BALLAST_IDEMPOTENCY_KEY, key);
    }
    // A replay or an in-progress answer made no attempt of its own.
    if !headers.contains_key(BALLAST_ATTEMPTS) {
        headers.insert(BALLAST_ATTEMPTS, HeaderValue::from_static("0"));
    }
    response
}

/// Calls `inner` (the idempotency layer over the handler) with `request`, as `prepare` settled it.
async fn call_once<S>(
    client: &ToolClient,
    inner: &mut S,
    request: Request,
    prepared: Prepared,
    key: Option<&IdempotencyKey>,
) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let deadline = prepared.deadline;
    let (mut parts, body) = request.into_parts();
    if let Some(key) = key
        && let Ok(value) = HeaderValue::from_str(key.as_str())
    {
        parts.headers.insert(IDEMPOTENCY_KEY, value);
    }
    let kind = CallKind::tool(client.config().side_effects, client.config().upstream_idempotency);
    parts.extensions.insert(CallContext::new(kind, deadline));
    parts.extensions.insert(Arc::new(prepared));
    // Ready at once: the idempotency service drives its own clone of the handler to readiness.
    let ready = std::future::poll_fn(|cx| inner.poll_ready(cx)).await;
    match ready {
        Ok(()) => inner.call(Request::from_parts(parts, body)).await,
        Err(never) => Err(never),
    }
    .unwrap_or_else(|never| match never {})
}

/// The checks of `prepare`, in order; the request with its body put back, as the tool's arguments: JSON, an
/// empty body as `{}`, so an empty body and `{}` are one request under one key.
async fn check(
    gateway: &Gateway,
    client: &ToolClient,
    request: Request,
    now: ballast_core::Instant,
) -> Result<(Prepared, Request), Refused> {
    if request.method() != Method::POST {
        return Err(AppError::MethodNotAllowed { allowed: "POST" }.into());
    }
    let server = &gateway.inner.config.server;
    let inbound = Inbound::read(request.headers(), server)?;
    let ask = crate::deferred::Ask::read(request.headers(), client.config().side_effects)?;
    let (mut parts, body) = request.into_parts();
    let traced =
        gateway.inner.telemetry.is_some() && parts.extensions.get::<crate::telemetry::Traced>().is_some();
    let owner = parts
        .extensions
        .get::<Principal>()
        .map_or(crate::auth::ANONYMOUS, Principal::name)
        .to_owned();
    let (deadline, run_restarted, refused) =
        crate::inbound::unary_deadline(gateway, &owner, &inbound, now).await;
    let tool = client.config();
    if let Err(exceeded) = deadline.attempt_timeout(std::time::Duration::MAX, now) {
        return Err(refused(AppError::too_late(
            &tool.name,
            &exceeded,
            inbound.run_id.as_deref(),
        )));
    }
    let key = if tool.side_effects {
        let missing = || AppError::KeyMissing {
            tool: tool.name.clone(),
        };
        Some(inbound.key_for(&tool.name).ok_or_else(|| refused(missing()))?)
    } else {
        inbound.key.clone()
    };
    let bytes = crate::body::read_body(body, server, deadline, now)
        .await
        .map_err(refused)?;
    let arguments = crate::body::json_arguments(bytes).map_err(refused)?;
    let explicit = inbound.explicit_timeout.map(|t| Deadline::after(now, t));
    // What the idempotency layer fingerprints is the arguments as read: a JSON body, whatever its sender called
    // it (curl's `-d` says `application/x-www-form-urlencoded`).
    parts.headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(http::header::CONTENT_LENGTH);
    let request = Request::from_parts(parts, Body::from(arguments.clone()));
    let prepared = Prepared {
        arguments,
        inbound,
        owner,
        key,
        deadline,
        explicit,
        run_restarted,
        ask,
        traced,
    };
    Ok((prepared, request))
}

/// Calls the tool and answers.
async fn call_tool(client: ToolClient, request: Request) -> Response {
    let Some(prepared) = request.extensions().get::<Arc<Prepared>>().cloned() else {
        // `prepare` always runs first; without it there is nothing to call.
        return AppError::BodyUnreadable.into_response();
    };
    let inbound = &prepared.inbound;
    let mut call = ToolCall::from_json(prepared.arguments.clone()).call_deadline(prepared.deadline);
    if let Some(explicit) = prepared.explicit {
        call = call.deadline(explicit);
    }
    if let Some(run) = &inbound.run_id {
        call = call.run(run.as_str()).owner(prepared.owner.as_str());
    }
    if let Some((step, ordinal)) = &inbound.step {
        call = call.step(step.as_str(), *ordinal);
    }
    if let Some(key) = &prepared.key {
        // The upstream's key is the principal's own (`IdempotencyKey::for_principal`): an upstream account shared
        // by several principals never sees two principals' operations under one key.
        call = call.idempotency_key(key.for_principal(&prepared.owner));
    }
    if let Some(progress) = request.extensions().get::<ballast::mcp::Progress>() {
        // A call over MCP whose caller asked for progress (`mcp/`).
        call = call.on_progress(progress.clone());
    }
    let call = crate::inbound::with_inbound!(call, inbound);
    let result = client.call(call).await;
    let tool = client.config();
    let priority = inbound.priority.unwrap_or(tool.priority);
    let defer = match &result {
        Err(error) => crate::deferred::marker(tool, prepared.ask, priority, error),
        Ok(_) => None,
    };
    let traced = prepared.traced.then(|| {
        let report = result.as_ref().map_or_else(|e| e.report(), |a| &a.report);
        crate::telemetry::CallTrace::ended(crate::telemetry::Called::Tool, report.clone())
    });
    let mut response = crate::tool_answer::answer(client.name(), prepared.key.as_ref(), result);
    if let Some(traced) = traced {
        response.extensions_mut().insert(traced);
    }
    if let Some(defer) = defer {
        // A lost answer at an upstream that deduplicates is deferred as nothing-acted: its re-send carries the key.
        if response
            .extensions_mut()
            .remove::<ballast::idempotency::OutcomeUnknown>()
            .is_some()
        {
            response.extensions_mut().insert(ballast::idempotency::NotStored);
            response.headers_mut().remove(ballast::headers::BALLAST_OUTCOME);
        }
        response.extensions_mut().insert(defer);
    }
    response
}
