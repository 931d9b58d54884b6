//! A tool's route as ordinary tower layers: [`PrepareLayer`] over the `IdempotencyLayer` over the handler,
//! composed with `ServiceBuilder` (`tools/mod.rs`).
//!
//! Why a layer of our own and not `post(handler).layer(idempotency).layer(from_fn(prepare))`: axum's `from_fn`
//! boxes and clones the service under it on every request, and the method router boxes and clones each layer
//! again — measured, 25 boxed-service clones and their allocations a tool call. The method check is `prepare`'s
//! own (a 405 for anything but POST, as the method router's fallback under `prepare` answered), so the route
//! needs no method router; the composition is the same, in the same order, with one boxed future.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::response::Response;
use ballast::tool::ToolClient;
use tower::{Layer, Service};

use crate::Gateway;

/// A boxed answer of a route's service.
pub(super) type Answer = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

/// The layer of [`Prepare`], for one tool.
#[derive(Clone)]
pub(super) struct PrepareLayer {
    pub(super) gateway: Gateway,
    pub(super) client: ToolClient,
}

impl<S> Layer<S> for PrepareLayer {
    type Service = Prepare<S>;

    fn layer(&self, inner: S) -> Prepare<S> {
        Prepare {
            gateway: self.gateway.clone(),
            client: self.client.clone(),
            inner,
        }
    }
}

/// `prepare` (`tools/mod.rs`: refuse what cannot run, settle the deadline and the key, finish every answer),
/// then `inner` (the idempotency layer over the handler).
#[derive(Clone)]
pub(super) struct Prepare<S> {
    gateway: Gateway,
    client: ToolClient,
    inner: S,
}

impl<S> Service<Request> for Prepare<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // `prepare` drives its clone of `inner` to readiness, under the request.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let (gateway, client, inner) = (self.gateway.clone(), self.client.clone(), self.inner.clone());
        Box::pin(async move { Ok(super::prepare(gateway, client, inner, request).await) })
    }
}
