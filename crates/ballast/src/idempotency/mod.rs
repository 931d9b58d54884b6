//! The server side of idempotency (DESIGN.md, "Idempotency, server side"): [`IdempotencyLayer`], axum/tower
//! middleware in front of a handler with a side effect. Its docs hold the behaviour; here, where each part lives:
//!
//! - `layer` — the layer, its builder and defaults; `request` — reading a keyed request (key, scope, lease,
//!   fingerprint, body limit); `dispatch` — the handler in a task of its own and the record's end; `settle` —
//!   the last write and its background retries; `replay` — stored responses in and out; `problem` — every answer
//!   of the layer's own (problem+json); `status` — the operation status lookup; `markers` — the extension types;
//!   `reaper` — reaping on a timer.

mod defer;
pub mod deferred;
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
use ballast_store::{ClaimOutcome, InFlight, StoreError};
use bytes::Bytes;
use futures::future::BoxFuture;
use http::{Method, Request, Response};
use http_body::Body as HttpBody;
use tokio::sync::oneshot;
use tower::{Service, ServiceExt as _};

/// The idempotency stores, from `ballast-store`: the [`IdempotencyStore`](store::IdempotencyStore) trait, its
/// backends (SQLite, Redis, PostgreSQL) and [`open`](store::open), which opens the one a config names.
pub mod store {
    pub use ballast_store::*;
}

pub use layer::{IdempotencyLayer, IdempotencyLayerBuilder, InvalidIdempotencyLayer};
pub use markers::{NotStored, OutcomeUnknown, Principal};
pub use problem::problem_json;
pub use reaper::spawn_reaper;
pub(crate) use replay::{DEFAULT_STORED_HEADERS, result_json, to_stored};
pub use status::{OperationStatus, operation_status, operations_route};

use self::layer::Settings;
use self::problem::Problem;
use self::settle::{HeldClaim, Settlement, Written};
use crate::{BoxError, clock};

/// The service of [`IdempotencyLayer`]: see its docs for what it does.
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
    // From the claim on, the request runs in a task of its own: a caller that disconnects between the claim and
    // the dispatch must not leave a claim that nobody holds (every retry would get 409 until the lease ran out).
    // The request goes on, once, and its answer is stored for the retry.
    let (answer_tx, answer_rx) = tokio::sync::oneshot::channel();
    crate::background::spawn(claim_and_run(inner, settings, incoming, answer_tx));
    // The task always answers (the handler's panics are caught); a closed channel means the runtime stops.
    answer_rx
        .await
        .unwrap_or_else(|_| Ok(Problem::HandlerPanicked.into_response()))
}

/// Claims the request's key and runs it, or answers what the record says, on `answer`.
async fn claim_and_run<S, RB>(
    inner: S,
    settings: Arc<Settings>,
    incoming: request::Incoming,
    answer: oneshot::Sender<Result<Response<Body>, S::Error>>,
) where
    S: Service<Request<Body>, Response = Response<RB>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    RB: HttpBody<Data = Bytes> + Send + 'static,
    RB::Error: Into<BoxError>,
{
    let now = clock::now();
    let held = HeldClaim {
        store: Arc::clone(&settings.store),
        scope: incoming.scope,
        owner: incoming.claim.owner,
        lease: settings.lease,
        since: now,
        renew_until: now + settings.max_timeout,
    };
    let wait = incoming.deadline.usable(now);
    if wait.is_zero() {
        // No time left past the reserve: the store is not even asked, and nothing runs.
        let problem = Problem::DeadlineExceeded {
            left: incoming.deadline.remaining(now),
            reserve: incoming.deadline.reserve(),
        };
        let _ = answer.send(Ok(problem.into_response()));
        return;
    }
    let (store, scope, claim) = (Arc::clone(&held.store), held.scope.clone(), incoming.claim);
    let mut claiming = std::pin::pin!(async move { store.claim(&scope, &claim).await });
    let claimed = match tokio::time::timeout(wait, &mut claiming).await {
        Ok(claimed) => claimed,
        Err(_) => {
            tracing::warn!(scope = ?held.scope, ?wait, "the idempotency store did not answer the claim in time; not running the request");
            let _ = answer.send(Ok(Problem::StoreTooSlow { waited: wait }.into_response()));
            // The claim may land all the same: once it is decided, give back what it took (nothing ran).
            match claiming.await {
                Ok(
                    ClaimOutcome::Acquired
                    | ClaimOutcome::TookOver {
                        was: InFlight::Claimed,
                    },
                )
                | Err(StoreError::Unavailable(_)) => give_back(&held, &settings).await,
                // A take-over of an expired dispatch is left to its lease, as if this request had never come.
                _ => {}
            }
            return;
        }
    };
    let problem = match claimed {
        Ok(ClaimOutcome::Acquired | ClaimOutcome::TookOver { .. }) => {
            crate::metrics::idempotency("claimed");
            let (deadline, request) = (incoming.deadline, incoming.request);
            return dispatch::dispatch(inner, settings, held, deadline, request, answer).await;
        }
        Ok(ClaimOutcome::Completed(stored)) => {
            crate::metrics::idempotency("replayed");
            let _ = answer.send(Ok(replay::replay(stored)));
            return;
        }
        Ok(ClaimOutcome::InProgress { lease_left, .. }) => {
            crate::metrics::idempotency("conflict");
            // A key whose operation waits in the queue: the same 202 as when it was deferred.
            if let Some(accepted) = defer::waiting(&settings, &held.scope, wait).await {
                let _ = answer.send(Ok(accepted));
                return;
            }
            Problem::InProgress {
                retry_after: lease_left.min(settings.max_retry_after),
            }
        }
        Ok(ClaimOutcome::OutcomeUnknown) => {
            crate::metrics::idempotency("unknown");
            Problem::OutcomeUnknown
        }
        Ok(ClaimOutcome::FingerprintMismatch) => {
            crate::metrics::idempotency("mismatch");
            Problem::KeyReused
        }
        Ok(_) => Problem::StoreFailed,
        Err(StoreError::Unavailable(error)) => {
            tracing::warn!(scope = ?held.scope, %error, "idempotency store unavailable; not running the request");
            let _ = answer.send(Ok(Problem::StoreUnavailable.into_response()));
            // Refused, or lost on the way back: the claim may have landed.
            give_back(&held, &settings).await;
            return;
        }
        Err(error) => {
            tracing::error!(scope = ?held.scope, %error, "idempotency claim failed");
            Problem::StoreFailed
        }
    };
    let _ = answer.send(Ok(problem.into_response()));
}

/// Releases a claim that may have landed although this request will not run (nothing ran), once the caller has
/// its answer: tried with the background writes' backoff for at most one lease. Not longer, unlike the other
/// final writes: a claim nobody renews frees its key when its lease runs out anyway, and a loop per failed
/// request for as long as a store is down would hammer it when it comes back.
async fn give_back(held: &HeldClaim, settings: &Settings) {
    let release = async {
        if held
            .settle_once(&Settlement::Release, settings.first_write_wait)
            .await
            == Written::Again
        {
            held.settle_until_done(
                &Settlement::Release,
                settings.first_write_wait,
                settings.write_backoff,
            )
            .await;
        }
    };
    if tokio::time::timeout(settings.lease, release).await.is_err() {
        tracing::warn!(scope = ?held.scope, "could not give back a claim that may have landed; its lease frees it");
    }
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
