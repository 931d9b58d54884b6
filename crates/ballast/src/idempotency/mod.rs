//! The server side of idempotency: [`IdempotencyLayer`], axum/tower middleware that makes any handler with a
//! side effect safe to retry (Stripe's semantics; IETF draft-ietf-httpapi-idempotency-key-header).
//!
//! Why: a client that timed out cannot know whether its refund happened, so it retries — and without this layer
//! the customer is refunded twice (reference/004). With it, the first request with an `Idempotency-Key` claims
//! the key in an [`IdempotencyStore`](ballast_store::IdempotencyStore) before the handler runs, and every later
//! request with that key gets the first one's stored answer, or learns it is still running — never a second
//! execution. DESIGN.md ("Idempotency, server side") has the table; in short:
//!
//! | request | answer |
//! |---|---|
//! | `GET`, `HEAD`, `OPTIONS`, `TRACE` (safe methods) | passed to the handler untouched |
//! | no key, key required (default) | 400 `urn:ballast:idempotency-key-missing` (not required: passed through) |
//! | key empty, over 255 characters, not printable ASCII, sent twice | 400 `urn:ballast:idempotency-key-invalid` |
//! | body over the limit | 413, nothing runs |
//! | first request | claimed (lease = the request's deadline + grace), marked `dispatched`, handler runs |
//! | same key while running | 409 `urn:ballast:idempotency-in-progress`, `Retry-After`, `x-should-retry: true` |
//! | same key, another request | 422 `urn:ballast:idempotency-key-reused`, nothing runs |
//! | same key after completion | the stored status, allow-listed headers and body, `Idempotent-Replayed: true` |
//! | same key after an unknown outcome | 502 `urn:ballast:outcome_unknown`, `x-should-retry: false` |
//! | store unreachable before the claim | 503 `urn:ballast:store-unavailable`, nothing runs (fail closed) |
//!
//! - **Scope**: principal + route + key. The principal is the request's [`Principal`] extension (inserted by an
//!   auth middleware outside this layer), else the configured default (`anonymous`). The route is the method
//!   and the route's pattern (axum's `MatchedPath`, else the path): `POST /refunds/{id}`.
//! - **Fingerprint**: `ballast_core::fingerprint` over the method, the path as sent (with its query), the
//!   content type and the body — JSON canonicalised (reordered keys match), other bodies byte for byte.
//! - **Lease**: the request's time left — its [`CallContext`](crate::CallContext)'s deadline, else the smallest
//!   inbound deadline header (`ballast-timeout-ms`, `grpc-timeout`, ...; capped; a malformed one is a 400),
//!   else the default timeout — plus the grace (10 s). A holder that vanished before dispatch is taken over
//!   when it runs out; one that vanished after dispatch leaves `outcome_unknown`
//!   ([`ExpiredDispatch`](ballast_store::ExpiredDispatch), configurable for handlers that deduplicate).
//! - **The handler runs in a task of its own**, so a caller that disconnects does not cancel a side effect
//!   half-way: the handler finishes and its answer is stored for the retry. A panic after dispatch leaves
//!   `outcome_unknown` and answers 500.
//! - **What is stored**: the handler's response, unless it carries [`NotStored`] (a refusal before acting: the
//!   key is released and a retry runs) or [`OutcomeUnknown`] (the key becomes `outcome_unknown`). A response
//!   over the response limit reaches the caller whole but cannot be replayed (`outcome_unknown` for retries).
//! - **A store that fails after the handler answered** does not cost the caller the answer: the write is retried
//!   in the background with jittered backoff until it lands; until then a retry gets 409.
//! - **Status**: [`operation_status`] and [`operations_route`] answer `in_progress`, `completed`,
//!   `outcome_unknown` or `not_found` for a key, scoped to the caller's principal.
//!
//! The service is always ready: it drives a clone of the inner service to readiness for each request (axum's
//! routes are always ready). Errors of the inner service are passed on; one after dispatch leaves
//! `outcome_unknown`.
//!
//! ```
//! use std::sync::Arc;
//!
//! use axum::{Router, routing::post};
//! use ballast::IdempotencyLayer;
//! use tower::ServiceExt as _;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let store = ballast_store::open("sqlite::memory:", Default::default()).await.unwrap();
//! let refunds = Arc::new(std::sync::atomic::AtomicU32::new(0));
//! let counted = Arc::clone(&refunds);
//! let app = Router::new()
//!     .route("/refunds", post(move || async move {
//!         counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
//!         (http::StatusCode::CREATED, "refunded")
//!     }))
//!     .layer(IdempotencyLayer::new(store));
//! let refund = || {
//!     http::Request::post("/refunds")
//!         .header("idempotency-key", "refund-order-7")
//!         .body(axum::body::Body::from(r#"{"order": 7}"#))
//!         .unwrap()
//! };
//! let first = app.clone().oneshot(refund()).await.unwrap();
//! let retry = app.oneshot(refund()).await.unwrap();
//! assert_eq!((first.status(), retry.status()), (201, 201));
//! assert_eq!(retry.headers()["idempotent-replayed"], "true");
//! assert_eq!(refunds.load(std::sync::atomic::Ordering::SeqCst), 1, "refunded once");
//! # }
//! ```

mod dispatch;
mod layer;
mod markers;
mod problem;
mod reaper;
mod replay;
mod request;
mod settle;
mod status;

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use ballast_store::{ClaimOutcome, StoreError};
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Method, Request, Response};
use http_body::Body as HttpBody;
use tower::{Service, ServiceExt as _};

pub use layer::{
    DEFAULT_BODY_LIMIT, DEFAULT_GRACE, DEFAULT_MAX_TIMEOUT, DEFAULT_PRINCIPAL, DEFAULT_STORED_HEADERS,
    DEFAULT_TIMEOUT, IdempotencyLayer, IdempotencyLayerBuilder, InvalidIdempotencyLayer,
};
pub use markers::{NotStored, OutcomeUnknown, Principal};
pub use reaper::spawn_reaper;
pub use status::{OperationStatus, operation_status, operations_route};

use self::layer::Settings;
use self::problem::Problem;
use self::settle::HeldClaim;
use crate::BoxError;

/// The service of [`IdempotencyLayer`]: see the [module docs](self).
#[derive(Clone, Debug)]
pub struct IdempotencyService<S> {
    inner: S,
    settings: Arc<Settings>,
}

impl<S> IdempotencyService<S> {
    pub(crate) fn new(inner: S, settings: Arc<Settings>) -> Self {
        IdempotencyService { inner, settings }
    }
}

impl<S, B, RB> Service<Request<B>> for IdempotencyService<S>
where
    S: Service<Request<Body>, Response = Response<RB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    RB: HttpBody<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, S::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Each request drives its own clone of the inner service to readiness (it may run in a task of its own).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        Box::pin(handle(self.inner.clone(), Arc::clone(&self.settings), request))
    }
}

/// One request through the table of the module docs.
async fn handle<S, B, RB>(
    inner: S,
    settings: Arc<Settings>,
    request: Request<B>,
) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<RB>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    RB: HttpBody<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    if is_safe(request.method()) {
        return pass_through(inner, request).await;
    }
    let key = match request::read_key(request.headers()) {
        Ok(Some(key)) => key,
        Ok(None) if !settings.require_key => return pass_through(inner, request).await,
        Ok(None) => return Ok(Problem::KeyMissing.into_response()),
        Err(problem) => return Ok(problem.into_response()),
    };
    let incoming = match request::read(request, key, &settings).await {
        Ok(incoming) => incoming,
        Err(problem) => return Ok(problem.into_response()),
    };
    let problem = match settings.store.claim(&incoming.scope, &incoming.claim).await {
        Ok(ClaimOutcome::Acquired | ClaimOutcome::TookOver { .. }) => {
            let claim = HeldClaim {
                store: Arc::clone(&settings.store),
                scope: incoming.scope,
                owner: incoming.claim.owner,
            };
            return dispatch::dispatch(inner, settings, claim, incoming.request).await;
        }
        Ok(ClaimOutcome::Completed(stored)) => return Ok(replay::replay(stored)),
        Ok(ClaimOutcome::InProgress { lease_left, .. }) => Problem::InProgress {
            retry_after: lease_left.min(settings.max_retry_after),
        },
        Ok(ClaimOutcome::OutcomeUnknown) => Problem::OutcomeUnknown,
        Ok(ClaimOutcome::FingerprintMismatch) => Problem::KeyReused,
        Ok(_) => Problem::StoreFailed,
        Err(StoreError::Unavailable(error)) => {
            tracing::warn!(scope = ?incoming.scope, %error, "idempotency store unavailable; not running the request");
            Problem::StoreUnavailable
        }
        Err(error) => {
            tracing::error!(scope = ?incoming.scope, %error, "idempotency claim failed");
            Problem::StoreFailed
        }
    };
    Ok(problem.into_response())
}

/// RFC 9110's safe methods: they promise no side effect, so they carry no key and are never deduplicated.
fn is_safe(method: &Method) -> bool {
    [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE].contains(method)
}

async fn pass_through<S, B, RB>(inner: S, request: Request<B>) -> Result<Response<Body>, S::Error>
where
    S: Service<Request<Body>, Response = Response<RB>>,
    B: HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    RB: HttpBody<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    let response = inner.oneshot(request.map(Body::new)).await?;
    Ok(response.map(Body::new))
}
