//! One upstream MCP tool's attempts: [`McpTransport`] turns the tool call's request (its JSON arguments, as every
//! tool's) into a `tools/call` to the server, over the transport every attempt goes through, and the server's
//! reply back into an answer the pipeline already knows how to judge:
//!
//! | the server answered | the attempt's answer |
//! |---|---|
//! | a result (its `isError` too: a tool's own error is an answer) | 200, the result as the body |
//! | a JSON-RPC error: a mistake in the request (`-32700`, `-32600`, `-32601`, `-32602`) | 400, `{"error": ...}` |
//! | another JSON-RPC error | 500, `{"error": ...}` |
//! | an HTTP error (429, 503 ...) | itself |
//! | a 2xx holding no reply to the call | a transport error after sending: the call may have run |
//!
//! The session is the server's [`Session`]: agreed once (`initialize`, or the stateless version), shared by the
//! server's tools, and agreed again when the server says it forgot it (404 to a request with a session id: the
//! call was not run, so it is sent again at once).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response, StatusCode, header};
use serde_json::{Map, Value, json};
use tower::{Service, ServiceExt as _};

use super::wire::{self, Garbled, Reply};
use crate::body::Commit;
use crate::headers::{IDEMPOTENCY_KEY, TRACEPARENT};
use crate::sse::SseDecoder;
use crate::transport::{Answer as _, Transport};
use crate::{Body, CallContext, Error};

/// The commit rule of a call whose progress is passed on: the stream is handed over at its first event, and read
/// here event by event (`McpTransport::reply_of_stream`), within the attempt.
fn first_event(_event: &str) -> Commit {
    Commit::Now
}

/// The `_meta` key of the operation's idempotency key, sent with each call (a server that deduplicates can read
/// it; the gateway reads the same key from its callers).
pub const META_IDEMPOTENCY_KEY: &str = "ballast/idempotency_key";

/// What was agreed with a server: the protocol version, and its session id (none when it keeps none).
#[derive(Clone, Debug)]
pub(crate) struct Agreed {
    pub(crate) version: String,
    session: Option<HeaderValue>,
}

/// A server's session, shared by its tools and its listings.
#[derive(Debug)]
pub(crate) struct Session {
    /// The server's name (for errors).
    pub(crate) name: Arc<str>,
    pub(crate) uri: http::Uri,
    /// The server's configured headers (its credentials).
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    agreed: tokio::sync::Mutex<Option<Agreed>>,
}

impl Session {
    pub(crate) fn new(name: &str, uri: http::Uri, headers: Vec<(HeaderName, HeaderValue)>) -> Self {
        Session {
            name: Arc::from(name),
            uri,
            headers,
            agreed: tokio::sync::Mutex::new(None),
        }
    }

    /// The agreement, made now when there is none (one `initialize` at a time; the others wait for it). An
    /// answer that is not a session (an HTTP error) is handed back to be the attempt's answer.
    pub(crate) async fn agreed<T: Transport>(
        &self,
        transport: &T,
    ) -> Result<Result<Agreed, Response<Body>>, Error> {
        let mut agreed = self.agreed.lock().await;
        if let Some(agreed) = &*agreed {
            return Ok(Ok(agreed.clone()));
        }
        let made = self.initialize(transport).await?;
        if let Ok(made) = &made {
            *agreed = Some(made.clone());
        }
        Ok(made)
    }

    /// Forgets `stale`, the agreement a server no longer knows (unless another call already made a new one).
    async fn forget(&self, stale: &Agreed) {
        let mut agreed = self.agreed.lock().await;
        if agreed.as_ref().is_some_and(|a| a.session == stale.session) {
            *agreed = None;
        }
    }

    /// A POST of `body` to the server: its headers, the session's, `method` and `name` as Streamable HTTP
    /// names them.
    pub(crate) fn post(&self, body: Bytes, agreed: Option<&Agreed>, method: &'static str) -> Request<Bytes> {
        let mut request = Request::new(body);
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        let headers = request.headers_mut();
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
        self.set_headers(headers, agreed, method);
        request
    }

    fn set_headers(&self, headers: &mut http::HeaderMap, agreed: Option<&Agreed>, method: &'static str) {
        wire::set_post_headers(headers);
        headers.insert(wire::MCP_METHOD, HeaderValue::from_static(method));
        if let Some(agreed) = agreed {
            if let Ok(version) = HeaderValue::from_str(&agreed.version) {
                headers.insert(wire::MCP_PROTOCOL_VERSION, version);
            }
            if let Some(session) = &agreed.session {
                headers.insert(wire::MCP_SESSION_ID, session.clone());
            }
        }
    }

    /// `initialize` (then `notifications/initialized`): the version the server speaks and its session id. A
    /// server that knows no `initialize` (the stateless version only) is spoken to statelessly.
    async fn initialize<T: Transport>(&self, transport: &T) -> Result<Result<Agreed, Response<Body>>, Error> {
        let id = wire::next_id();
        let body = wire::request(id, "initialize", wire::initialize_params());
        let answer = send(transport, self.post(body, None, "initialize")).await?;
        let status = answer.status();
        let stateless = Agreed {
            version: wire::STATELESS_VERSION.to_owned(),
            session: None,
        };
        if matches!(
            status,
            StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED
        ) {
            return Ok(Ok(stateless));
        }
        if !status.is_success() {
            return Ok(Err(answer));
        }
        let session = answer.headers().get(wire::MCP_SESSION_ID).cloned();
        let bytes = answer.body().as_bytes().cloned().unwrap_or_default();
        let agreed = match wire::reply(answer.headers().get(header::CONTENT_TYPE), &bytes, id) {
            Ok(Reply::Result(result)) => Agreed {
                version: (result.get("protocolVersion").and_then(Value::as_str))
                    .unwrap_or(wire::ASKED_VERSION)
                    .to_owned(),
                session,
            },
            // No `initialize` (the stateless version only): nothing to tell it either.
            Ok(Reply::Error(_)) => return Ok(Ok(stateless)),
            Err(Garbled(reason)) => {
                let why = format!(
                    "MCP server {} answered initialize with garbage: {reason}",
                    self.name
                );
                return Err(Error::transport(false, why));
            }
        };
        // The server is told the client is ready; what it answers changes nothing (a stateless server 202s).
        let ready = self.post(
            wire::notification("notifications/initialized"),
            Some(&agreed),
            "notifications/initialized",
        );
        let _ = send(transport, ready).await;
        Ok(Ok(agreed))
    }
}

/// Sends `request` through `transport`, the answer as a whole [`Body`].
pub(crate) async fn send<T: Transport>(
    transport: &T,
    request: Request<Bytes>,
) -> Result<Response<Body>, Error> {
    let answer = transport.clone().oneshot(request).await?;
    Ok(answer.into_answer())
}

/// The transport of one upstream MCP tool (see the module's docs).
#[derive(Clone, Debug)]
pub(crate) struct McpTransport<T> {
    pub(crate) inner: T,
    pub(crate) session: Arc<Session>,
    /// The tool's name at the server.
    pub(crate) tool: Arc<str>,
}

impl<T: Transport> Service<Request<Bytes>> for McpTransport<T> {
    type Response = Response<Body>;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { this.call_tool(request).await })
    }
}

impl<T: Transport> McpTransport<T> {
    async fn call_tool(self, request: Request<Bytes>) -> Result<Response<Body>, Error> {
        let (mut parts, arguments) = request.into_parts();
        // Progress wanted: the server's answer is read as a stream when it is one, each notification passed on.
        let progress = parts.extensions.get::<crate::tool::Progress>().cloned();
        if progress.is_some()
            && let Some(ctx) = parts.extensions.get_mut::<CallContext>()
        {
            ctx.stream = Some(first_event);
            ctx.stream_events_only = true;
        }
        let arguments: Value = serde_json::from_slice(&arguments).unwrap_or_else(|_| json!({}));
        let mut meta = Map::new();
        if let Some(key) = parts.headers.get(IDEMPOTENCY_KEY).and_then(|v| v.to_str().ok()) {
            meta.insert(META_IDEMPOTENCY_KEY.to_owned(), Value::from(key));
        }
        if let Some(trace) = parts.headers.get(TRACEPARENT).and_then(|v| v.to_str().ok()) {
            meta.insert("traceparent".to_owned(), Value::from(trace));
        }
        // Twice at most: again only when the server forgot the session (it ran nothing).
        for _ in 0..2 {
            let agreed = match self.session.agreed(&self.inner).await? {
                Ok(agreed) => agreed,
                Err(answer) => return Ok(answer),
            };
            let id = wire::next_id();
            let token = format!("ballast-{id}");
            let mut meta = meta.clone();
            if progress.is_some() {
                meta.insert("progressToken".to_owned(), Value::from(token.as_str()));
            }
            let params = json!({
                "name": &*self.tool,
                "arguments": arguments,
                "_meta": wire::request_meta(&agreed.version, meta),
            });
            let mut request = Request::from_parts(parts.clone(), wire::request(id, "tools/call", params));
            *request.uri_mut() = self.session.uri.clone();
            *request.method_mut() = http::Method::POST;
            let headers = request.headers_mut();
            headers.remove(header::CONTENT_LENGTH);
            self.session.set_headers(headers, Some(&agreed), "tools/call");
            if let Ok(name) = HeaderValue::from_str(&self.tool) {
                headers.insert(wire::MCP_NAME, name);
            }
            let answer = send(&self.inner, request).await?;
            if answer.status() == StatusCode::NOT_FOUND && agreed.session.is_some() {
                self.session.forget(&agreed).await;
                continue;
            }
            return self.judge(answer, id, progress.as_ref(), &token).await;
        }
        Err(Error::transport(
            false,
            format!(
                "MCP server {} forgot its session twice in a row",
                self.session.name
            ),
        ))
    }

    /// The attempt's answer to the server's `answer` to request `id` (the module's table); a stream of events is
    /// read to the reply, each progress notification for `token` handed to `progress`.
    async fn judge(
        &self,
        answer: Response<Body>,
        id: u64,
        progress: Option<&crate::tool::Progress>,
        token: &str,
    ) -> Result<Response<Body>, Error> {
        if !answer.status().is_success() {
            return Ok(answer);
        }
        let garbled = |reason: String| {
            let server = &self.session.name;
            Error::transport(
                true,
                format!("MCP server {server} answered tools/call with garbage: {reason}"),
            )
        };
        let (parts, body) = answer.into_parts();
        let reply = match body.into_stream() {
            Ok(stream) => reply_of_stream(stream, id, progress, token).await?,
            Err(bytes) => wire::reply(parts.headers.get(header::CONTENT_TYPE), &bytes, id),
        };
        let (status, body) = match reply {
            Ok(Reply::Result(result)) if wire::is_call_result(&result) => (StatusCode::OK, result),
            Ok(Reply::Result(_)) => return Err(garbled("its result is not a tool call's result".to_owned())),
            Ok(Reply::Error(error)) => (error_status(&error), json!({"error": error})),
            Err(Garbled(reason)) => return Err(garbled(reason)),
        };
        let mut response = Response::new(Body::whole(serde_json::to_vec(&body).unwrap_or_default()));
        *response.status_mut() = status;
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(response)
    }
}

/// The reply to request `id` in a stream of events, read to it: each progress notification for `token` handed to
/// `progress` as it arrives. Within the attempt: its timeout bounds the read.
async fn reply_of_stream(
    stream: crate::body::Stream,
    id: u64,
    progress: Option<&crate::tool::Progress>,
    token: &str,
) -> Result<Result<Reply, Garbled>, Error> {
    use http_body_util::BodyExt as _;
    let crate::body::Stream {
        head,
        mut rest,
        event_limit,
        ..
    } = stream;
    let mut decoder = SseDecoder::new(event_limit);
    decoder.push(&head);
    loop {
        loop {
            let event = match decoder.next_event() {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(_) => return Err(Error::BodyTooLarge { limit: event_limit }),
            };
            if event.trim().is_empty() {
                continue;
            }
            let message: Value = match serde_json::from_str(&event) {
                Ok(message) => message,
                Err(e) => return Ok(Err(Garbled(format!("an event of its stream is not JSON: {e}")))),
            };
            if let (Some(progress), Some(params)) = (progress, wire::progress_of(&message, token)) {
                progress.report(params);
                continue;
            }
            match wire::reply_in(message, id) {
                Ok(Some(reply)) => return Ok(Ok(reply)),
                Ok(None) => {}
                Err(garbled) => return Ok(Err(garbled)),
            }
        }
        match rest.frame().await {
            None => return Ok(Err(Garbled("its stream ended without the response".to_owned()))),
            Some(Err(error)) => return Err(Error::transport(true, error)),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    decoder.push(&data);
                }
            }
        }
    }
}

/// The status a JSON-RPC error is judged by: a mistake in the request is the caller's (400: never retried),
/// anything else the server's (500).
fn error_status(error: &Value) -> StatusCode {
    match error.get("code").and_then(Value::as_i64) {
        Some(-32700 | -32600 | -32601 | -32602) => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
