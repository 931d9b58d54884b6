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
use tower::{Layer, Service};
use tracing::Instrument as _;

use crate::Gateway;
use crate::auth::Unauthenticated;
use crate::error::{AppError, OpenAiError};

/// A boxed answer.
type Answer = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// The layer of [`Finish`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FinishLayer;

impl<S> Layer<S> for FinishLayer {
    type Service = Finish<S>;

    fn layer(&self, inner: S) -> Finish<S> {
        Finish { inner }
    }
}

/// Runs the request in its span and finishes its answer ([`crate::app::finish`]).
#[derive(Clone, Debug)]
pub(crate) struct Finish<S> {
    inner: S,
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

    fn call(&mut self, request: Request) -> Answer {
        let (request_id, span) = crate::app::request_span(&request);
        let answer = span.in_scope(|| self.inner.call(request));
        Box::pin(async move {
            let response = match answer.instrument(span.clone()).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok(crate::app::finish(response, request_id, &span))
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
