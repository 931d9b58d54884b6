//! The two services every request passes through before its route: [`Finish`] (what every answer carries, and
//! the request's span) around everything, [`Authenticate`] (the caller's principal, or 401) around the routes
//! that need it.
//!
//! Why services of our own and not axum's `from_fn`: `from_fn` clones and boxes the service under it on every
//! request so that its `Next` can own it — measured with callgrind, a few thousand instructions a layer and a
//! request. These call the service under them as tower intends (ready, then called: axum's routes are always
//! ready), with one boxed future each; what they do is what the `from_fn` functions did, in the same order.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use ballast::headers::{TRACEPARENT, X_REQUEST_ID, X_SHOULD_RETRY};
use http::HeaderValue;
use rand::RngExt as _;
use tower::{Layer, Service};
use tracing::Instrument as _;

use crate::Gateway;
use crate::auth::Unauthenticated;
use crate::error::{AppError, OpenAiError, set_retry_after};
use crate::telemetry::Telemetry;

/// A boxed answer.
type Answer = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// The layer of [`Finish`]: with `telemetry`, the requests it samples are traced (`crate::telemetry`).
#[derive(Clone, Debug, Default)]
pub(crate) struct FinishLayer {
    pub(crate) telemetry: Option<Telemetry>,
}

impl<S> Layer<S> for FinishLayer {
    type Service = Finish<S>;

    fn layer(&self, inner: S) -> Finish<S> {
        Finish {
            inner,
            telemetry: self.telemetry.clone(),
        }
    }
}

/// Runs the request in its span and finishes its answer ([`finish`]); traces it when telemetry is on and its
/// trace is sampled.
#[derive(Clone, Debug)]
pub(crate) struct Finish<S> {
    inner: S,
    telemetry: Option<Telemetry>,
}

impl<S> Service<Request> for Finish<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Answer {
        let traced = match &self.telemetry {
            None => None,
            Some(telemetry) => telemetry.begin(&mut request),
        };
        let (request_id, span) = request_span(&request);
        let answer = span.in_scope(|| self.inner.call(request));
        Box::pin(async move {
            let response = match answer.instrument(span.clone()).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            let response = finish(response, request_id, &span);
            Ok(match traced {
                None => response,
                Some(traced) => traced.finish(response),
            })
        })
    }
}

/// The layer of [`Authenticate`].
#[derive(Clone, Debug)]
pub(crate) struct AuthenticateLayer {
    pub(crate) gateway: Gateway,
    /// Whether its 401 is OpenAI-style (the model routes: an SDK raises its own exception on it).
    pub(crate) openai: bool,
}

impl<S> Layer<S> for AuthenticateLayer {
    type Service = Authenticate<S>;

    fn layer(&self, inner: S) -> Authenticate<S> {
        Authenticate {
            gateway: self.gateway.clone(),
            openai: self.openai,
            inner,
        }
    }
}

/// Names the caller ([`Principal`](ballast::idempotency::Principal), and its [`Caller`](crate::auth::Caller)) in
/// the request's extensions, or answers 401 without calling the service under it.
#[derive(Clone, Debug)]
pub(crate) struct Authenticate<S> {
    gateway: Gateway,
    openai: bool,
    inner: S,
}

impl<S> Service<Request> for Authenticate<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Answer {
        match self.gateway.inner.principals.authenticate(request.headers()) {
            Ok(caller) => {
                request.extensions_mut().insert(caller.principal.clone());
                request.extensions_mut().insert(caller);
                Box::pin(self.inner.call(request))
            }
            Err(refused) => {
                let error = match refused {
                    Unauthenticated::Refused => AppError::Unauthorized,
                    Unauthenticated::Repeated { header } => AppError::HeaderRepeated { header },
                };
                let response = if self.openai {
                    OpenAiError(error).into_response()
                } else {
                    error.into_response()
                };
                Box::pin(std::future::ready(Ok(response)))
            }
        }
    }
}

/// The request's id — its `x-request-id`, else the trace id of its `traceparent`, else a new one — and its span,
/// in which every log line of the request carries that id ([`FinishLayer`] runs the request in it).
pub(crate) fn request_span(request: &Request) -> (HeaderValue, tracing::Span) {
    let request_id = request_id(request);
    let span = tracing::info_span!(
        "ballast.request",
        request_id = %request_id.to_str().unwrap_or_default(),
        method = %request.method(),
        path = %request.uri().path(),
        status = tracing::field::Empty,
    );
    (request_id, span)
}

/// What every answer carries: `x-request-id` (see [`request_span`]), an explicit `x-should-retry` on every error,
/// and every `Retry-After` jittered and capped at 60 s; its status is recorded on the request's span.
pub(crate) fn finish(mut response: Response, request_id: HeaderValue, span: &tracing::Span) -> Response {
    span.record("status", response.status().as_u16());
    let status = response.status();
    let headers = response.headers_mut();
    headers.insert(X_REQUEST_ID, request_id);
    if status.as_u16() >= 400 && !headers.contains_key(X_SHOULD_RETRY) {
        headers.insert(X_SHOULD_RETRY, HeaderValue::from_static("false"));
    }
    if let Some(wait) = ballast::headers::retry_after(headers) {
        set_retry_after(headers, crate::error::jittered(wait, &mut rand::rng()));
    }
    response
}

/// The request's id: its `x-request-id` when it is short printable ASCII, else its trace's id, else a new one.
fn request_id(request: &Request) -> HeaderValue {
    let headers = request.headers();
    if let Some(id) = headers.get(X_REQUEST_ID).filter(|v| {
        (1..=128).contains(&v.len()) && v.to_str().is_ok_and(|s| s.bytes().all(|b| b.is_ascii_graphic()))
    }) {
        return id.clone();
    }
    let id = headers
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| ballast_core::TraceContext::parse(v).ok())
        .map_or_else(new_request_id, |trace| trace.trace_id_hex().to_string());
    HeaderValue::from_str(&id).expect("hex is a valid header value")
}

/// A new request id: a UUIDv4 (32 hex digits) from the thread's generator (rand's `ThreadRng`, seeded by the
/// system), as the library draws trace ids — not `Uuid::new_v4`, which asks the kernel for every id (a
/// `getrandom` system call on each request that brings no id of its own).
fn new_request_id() -> String {
    uuid::Builder::from_random_bytes(rand::rng().random())
        .into_uuid()
        .simple()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_request_id_is_a_uuid_v4_in_32_hex_digits() {
        let (a, b) = (new_request_id(), new_request_id());
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }
}
