//! [`ServiceTransport`]: the attempt handed to any tower service in process.

use std::fmt;
use std::marker::PhantomData;
use std::task::{Context, Poll};

use ballast_config::DEFAULT_BODY_LIMIT;
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Request, Response};
use http_body_util::Full;
use tower::{Service, ServiceExt as _};

use super::read::read_answer;
use crate::{Body, BoxError, CallContext, Error};

/// Hands each attempt to a tower service (an axum `Router`, a hyper client, a test double) and reads its answer,
/// at most its body limit (whole, or for a streamed call's 2xx up to its commit point): the transport contract of [`HttpTransport`](crate::transport::HttpTransport) without
/// a socket, so tests run the chaos upstream in process under paused time.
///
/// The request body is given to the service as `B` (made `From<Bytes>`): [`http_body_util::Full<Bytes>`] with
/// [`new`](ServiceTransport::new) — any axum `Router` takes it — or any other with
/// [`with_request_body`](ServiceTransport::with_request_body). The answer's body may be any [`http_body::Body`].
///
/// Errors: the service failing to become ready is [`Error::Transport`] `{ sent: false }` (it never had the
/// request); the service failing the call is `{ sent: true }` (it had the request, and in process nothing tells
/// whether it acted); a body that fails midway is `{ sent: true }`; a body over the limit is
/// [`Error::BodyTooLarge`].
///
/// ```
/// use ballast::transport::ServiceTransport;
/// use bytes::Bytes;
/// use tower::ServiceExt as _;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let chaos = ballast_chaos::router(ballast_chaos::Profile::default());
/// let transport = ServiceTransport::new(chaos).with_body_limit(64 * 1024);
/// let request = http::Request::post("http://chaos/tools/lookup_order")
///     .body(Bytes::from_static(br#"{"op": "op-1", "order_id": "A-1"}"#))
///     .unwrap();
/// let answer = transport.oneshot(request).await.unwrap();
/// assert_eq!(answer.status(), 200);
/// # }
/// ```
pub struct ServiceTransport<S, B = Full<Bytes>> {
    service: S,
    body_limit: usize,
    request_body: PhantomData<fn() -> B>,
}

impl<S> ServiceTransport<S> {
    /// A transport handing requests to `service` with a [`Full<Bytes>`] body and reading answers of at most the
    /// configuration's default `server.body_limit` (8 MiB).
    pub fn new(service: S) -> Self {
        Self::with_request_body(service)
    }
}

impl<S, B> ServiceTransport<S, B> {
    /// A transport handing requests to `service` with a `B` body (`ServiceTransport::<_, B>::with_request_body`),
    /// reading answers of at most the default `server.body_limit` (8 MiB).
    pub fn with_request_body(service: S) -> Self {
        ServiceTransport {
            service,
            body_limit: super::answer_limit(DEFAULT_BODY_LIMIT),
            request_body: PhantomData,
        }
    }

    /// The same transport reading answers of at most `limit` bytes (a config's `server.body_limit`).
    #[must_use]
    pub fn with_body_limit(mut self, limit: u64) -> Self {
        self.body_limit = super::answer_limit(limit);
        self
    }
}

impl<S: Clone, B> Clone for ServiceTransport<S, B> {
    fn clone(&self) -> Self {
        ServiceTransport {
            service: self.service.clone(),
            body_limit: self.body_limit,
            request_body: PhantomData,
        }
    }
}

impl<S: fmt::Debug, B> fmt::Debug for ServiceTransport<S, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceTransport")
            .field("service", &self.service)
            .field("body_limit", &self.body_limit)
            .finish()
    }
}

impl<S, B, R> Service<Request<Bytes>> for ServiceTransport<S, B>
where
    S: Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: From<Bytes> + Send + 'static,
    R: http_body::Body + Send + 'static,
    R::Data: Send,
    R::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = Error;
    type Future = BoxFuture<'static, Result<Response<Body>, Error>>;

    /// Always ready: the service's readiness is awaited inside the attempt, under its timeout.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let mut service = self.service.clone();
        let limit = self.body_limit;
        let stream = request
            .extensions()
            .get::<CallContext>()
            .and_then(CallContext::stream_read);
        Box::pin(async move {
            let request = request.map(B::from);
            let ready = service.ready().await.map_err(|e| Error::transport(false, e))?;
            let response = ready.call(request).await.map_err(|e| Error::transport(true, e))?;
            read_answer(response, limit, stream, |error| Error::transport(true, error)).await
        })
    }
}
