//! Fixtures of the idempotency layer tests: stores per backend, a store that fails on demand, an axum app whose
//! handlers count their runs and can be held at a gate, requests with keys, and bounded polling.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::routing::post;
use ballast::idempotency::{IdempotencyLayer, NotStored, OutcomeUnknown, Principal, operations_route};
use ballast_store::conformance::{service_unavailable, service_url};
use ballast_store::{
    ClaimOutcome, ClaimRequest, IdempotencyStore, OwnerToken, Record, Scope, StoreError, StoreOptions,
    StoredResponse,
};
use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::watch;
use tower::ServiceExt as _;

/// Longest wait for something real time decides (a lease, a background write): a broken layer fails the test
/// instead of hanging it.
pub(crate) const PATIENCE: Duration = Duration::from_secs(15);

/// The routes the test app serves under the layer, as the layer names them (for the status lookup).
pub(crate) const ROUTES: [&str; 5] = [
    "POST /refunds",
    "POST /refunds/{id}",
    "POST /reject",
    "POST /lost",
    "POST /big",
];

/// The embedded store, in memory.
pub(crate) async fn sqlite() -> Arc<dyn IdempotencyStore> {
    ballast_store::open("sqlite::memory:", StoreOptions::default())
        .await
        .expect("an in-memory SQLite store")
}

/// The store of a server backend named by `var` (default `default`), or `None` (skipped, with the reason
/// printed) when it cannot be opened and the run allows skipping.
pub(crate) async fn server_store(what: &str, var: &str, default: &str) -> Option<Arc<dyn IdempotencyStore>> {
    let url = service_url(var, default);
    match ballast_store::open(&url, StoreOptions::default()).await {
        Ok(store) => Some(store),
        Err(error) => service_unavailable(what, error),
    }
}

/// What the handlers did, and the gate they wait at.
#[derive(Clone, Debug)]
pub(crate) struct Handlers {
    runs: Arc<AtomicU32>,
    finished: Arc<AtomicU32>,
    started: watch::Sender<u32>,
    gate: watch::Sender<bool>,
}

impl Handlers {
    /// Handlers whose gate is open (they answer at once) or closed (they wait for [`open`](Handlers::open)).
    pub(crate) fn new(gate_open: bool) -> Self {
        Handlers {
            runs: Arc::default(),
            finished: Arc::default(),
            started: watch::channel(0).0,
            gate: watch::channel(gate_open).0,
        }
    }

    /// How many times a handler started (the side effects).
    pub(crate) fn runs(&self) -> u32 {
        self.runs.load(Ordering::SeqCst)
    }

    /// How many handlers got past the gate and answered.
    pub(crate) fn finished(&self) -> u32 {
        self.finished.load(Ordering::SeqCst)
    }

    /// Waits until `n` handlers have started (bounded by [`PATIENCE`]).
    pub(crate) async fn started(&self, n: u32) {
        let mut started = self.started.subscribe();
        within(started.wait_for(|&count| count >= n))
            .await
            .expect("sender alive");
    }

    /// Lets every waiting handler (and every later one) answer.
    pub(crate) fn open(&self) {
        self.gate.send_replace(true);
    }

    async fn run(&self) {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.started.send_modify(|count| *count += 1);
        let mut gate = self.gate.subscribe();
        let _ = gate.wait_for(|&open| open).await;
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

/// The app: `POST /refunds` and `/refunds/{id}` (201, the body echoed, a stored and an unstored header),
/// `/reject` (400 marked [`NotStored`]), `/lost` (504 marked [`OutcomeUnknown`]), `/big` (a 64-byte body),
/// `/panic` (panics), `/panic-body` (answers 201 with a body that panics when read) — every handler counted and held at the gate — behind `layer`, behind a middleware that
/// turns an `x-test-principal` header into a [`Principal`]; and `GET /operations/{key}`.
pub(crate) fn app(layer: IdempotencyLayer, handlers: &Handlers, store: Arc<dyn IdempotencyStore>) -> Router {
    let routes = ROUTES.iter().map(|r| (*r).to_owned()).collect();
    Router::new()
        .route("/refunds", post(refund))
        .route("/refunds/{id}", post(refund))
        .route("/reject", post(marked))
        .route("/lost", post(marked))
        .route("/big", post(big))
        .route("/panic", post(panics))
        .route("/panic-body", post(panicking_body))
        .layer(layer)
        .route("/operations/{key}", operations_route(store, routes))
        .layer(middleware::from_fn(principal_from_header))
        .with_state(handlers.clone())
}

async fn refund(State(handlers): State<Handlers>, body: Bytes) -> Response<Body> {
    handlers.run().await;
    Response::builder()
        .status(StatusCode::CREATED)
        .header("content-type", "application/json")
        .header("location", "/refunds/1")
        .header("x-per-exchange", "not replayed")
        .body(Body::from(body))
        .expect("a valid response")
}

async fn marked(State(handlers): State<Handlers>, request: Request) -> Response<Body> {
    handlers.run().await;
    let mut response = Response::new(Body::from("marked"));
    if request.uri().path() == "/reject" {
        *response.status_mut() = StatusCode::BAD_REQUEST;
        response.extensions_mut().insert(NotStored);
    } else {
        *response.status_mut() = StatusCode::GATEWAY_TIMEOUT;
        response.extensions_mut().insert(OutcomeUnknown);
    }
    response
}

async fn big(State(handlers): State<Handlers>) -> Vec<u8> {
    handlers.run().await;
    vec![b'x'; 64]
}

async fn panics(State(handlers): State<Handlers>) -> &'static str {
    handlers.run().await;
    panic!("the handler fails after acting")
}

async fn panicking_body(State(handlers): State<Handlers>) -> Response<Body> {
    handlers.run().await;
    let body = futures::stream::once(async {
        if true {
            panic!("the response body fails after the handler acted");
        }
        Ok::<_, std::io::Error>(Bytes::from_static(b"never"))
    });
    Response::builder()
        .status(StatusCode::CREATED)
        .body(Body::from_stream(body))
        .expect("a valid response")
}

async fn principal_from_header(mut request: Request, next: Next) -> axum::response::Response {
    let principal = request
        .headers()
        .get("x-test-principal")
        .and_then(|v| v.to_str().ok())
        .map(Principal::new);
    if let Some(principal) = principal {
        request.extensions_mut().insert(principal);
    }
    next.run(request).await
}

/// `POST path` with `key` (if any) and a JSON `body`.
pub(crate) fn post_json(path: &str, key: Option<&str>, body: &str) -> http::Request<Body> {
    post_with(path, key, "application/json", body.as_bytes())
}

/// `POST path` with `key` (if any), `content_type` and `body`.
pub(crate) fn post_with(
    path: &str,
    key: Option<&str>,
    content_type: &str,
    body: &[u8],
) -> http::Request<Body> {
    let mut request = http::Request::post(path).header("content-type", content_type);
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    request.body(Body::from(body.to_vec())).expect("a valid request")
}

/// Sends `request` through `app`; the status, headers and body.
pub(crate) async fn send(app: &Router, request: http::Request<Body>) -> Answer {
    let response = within(app.clone().oneshot(request)).await.expect("infallible");
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.expect("a body");
    Answer { parts, body }
}

/// A whole answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) parts: http::response::Parts,
    pub(crate) body: Bytes,
}

impl Answer {
    /// The status code.
    pub(crate) fn status(&self) -> u16 {
        self.parts.status.as_u16()
    }

    /// A header's value as text, if present.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.parts.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as JSON.
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {:?}", self.body))
    }

    /// The problem+json `type`.
    pub(crate) fn problem_type(&self) -> String {
        assert_eq!(self.header("content-type"), Some("application/problem+json"));
        self.json()["type"].as_str().expect("a type").to_owned()
    }

    /// Whether it is a replay.
    pub(crate) fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }
}

/// `future`, or a panic after [`PATIENCE`].
pub(crate) async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future)
        .await
        .expect("gave up waiting (PATIENCE)")
}

/// Sends `request()` every 25 ms until `done` accepts the answer (bounded by [`PATIENCE`]); the last answer.
pub(crate) async fn poll_until(
    app: &Router,
    request: impl Fn() -> http::Request<Body>,
    done: impl Fn(&Answer) -> bool,
) -> Answer {
    within(async {
        loop {
            let answer = send(app, request()).await;
            if done(&answer) {
                return answer;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
}

/// A store that wraps a real one and fails on demand, as an unreachable store would.
#[derive(Debug)]
pub(crate) struct FlakyStore {
    inner: Arc<dyn IdempotencyStore>,
    /// Claims fail.
    pub(crate) claims_fail: AtomicBool,
    /// `mark_dispatched` fails.
    pub(crate) dispatch_fails: AtomicBool,
    /// `mark_dispatched` finds the claim taken over (`NotHeld`), as when the lease ran out before dispatch.
    pub(crate) dispatch_not_held: AtomicBool,
    /// `complete` fails.
    pub(crate) completes_fail: AtomicBool,
    /// Failed `complete` calls so far.
    pub(crate) failed_completes: AtomicU32,
    /// `reap` calls so far.
    pub(crate) reaps: AtomicU32,
    /// `mark_dispatched` waits at a gate: it signals [`dispatch_entered`](FlakyStore::dispatch_entered) and
    /// goes on at [`dispatch_open`](FlakyStore::dispatch_open).
    pub(crate) hold_dispatch: AtomicBool,
    /// Signalled when a held `mark_dispatched` starts waiting.
    pub(crate) dispatch_entered: tokio::sync::Notify,
    /// Lets a held `mark_dispatched` go on.
    pub(crate) dispatch_open: tokio::sync::Notify,
    /// `mark_dispatched` lands, and its reply is lost (the caller sees the store unavailable).
    pub(crate) dispatch_reply_lost: AtomicBool,
    /// `claim` waits at a gate (a black-holed store) until [`claim_open`](FlakyStore::claim_open).
    pub(crate) hold_claim: AtomicBool,
    /// Lets a held `claim` go on.
    pub(crate) claim_open: tokio::sync::Notify,
    /// `complete` waits at a gate until [`complete_open`](FlakyStore::complete_open).
    pub(crate) hold_complete: AtomicBool,
    /// Lets a held `complete` go on.
    pub(crate) complete_open: tokio::sync::Notify,
    /// How many of the next `release` calls fail.
    pub(crate) releases_to_fail: AtomicU32,
    /// Failed `release` calls so far.
    pub(crate) failed_releases: AtomicU32,
    /// `renew` fails.
    pub(crate) renewals_fail: AtomicBool,
    /// Renewals that landed so far.
    pub(crate) renewals: AtomicU32,
    /// Renewals that came after the lease had already run out (the key was up for grabs meanwhile).
    pub(crate) lapsed_renewals: AtomicU32,
    /// How long a claim's reply takes after the claim landed, in milliseconds.
    pub(crate) claim_reply_delay_ms: AtomicU32,
}

impl FlakyStore {
    /// A healthy wrapper around `inner`.
    pub(crate) fn new(inner: Arc<dyn IdempotencyStore>) -> Arc<Self> {
        Arc::new(FlakyStore {
            inner,
            claims_fail: AtomicBool::new(false),
            dispatch_fails: AtomicBool::new(false),
            dispatch_not_held: AtomicBool::new(false),
            completes_fail: AtomicBool::new(false),
            failed_completes: AtomicU32::new(0),
            reaps: AtomicU32::new(0),
            hold_dispatch: AtomicBool::new(false),
            dispatch_entered: tokio::sync::Notify::new(),
            dispatch_open: tokio::sync::Notify::new(),
            dispatch_reply_lost: AtomicBool::new(false),
            hold_claim: AtomicBool::new(false),
            claim_open: tokio::sync::Notify::new(),
            hold_complete: AtomicBool::new(false),
            complete_open: tokio::sync::Notify::new(),
            releases_to_fail: AtomicU32::new(0),
            failed_releases: AtomicU32::new(0),
            renewals_fail: AtomicBool::new(false),
            renewals: AtomicU32::new(0),
            lapsed_renewals: AtomicU32::new(0),
            claim_reply_delay_ms: AtomicU32::new(0),
        })
    }

    fn down(flag: &AtomicBool) -> Result<(), StoreError> {
        if flag.load(Ordering::SeqCst) {
            return Err(StoreError::unavailable("the test made the store unreachable"));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl IdempotencyStore for FlakyStore {
    async fn claim(&self, scope: &Scope, claim: &ClaimRequest) -> Result<ClaimOutcome, StoreError> {
        Self::down(&self.claims_fail)?;
        if self.hold_claim.load(Ordering::SeqCst) {
            self.claim_open.notified().await;
        }
        let outcome = self.inner.claim(scope, claim).await;
        let delay = self.claim_reply_delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay.into())).await;
        }
        outcome
    }

    async fn mark_dispatched(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        Self::down(&self.dispatch_fails)?;
        if self.dispatch_not_held.load(Ordering::SeqCst) {
            return Err(StoreError::NotHeld);
        }
        if self.hold_dispatch.load(Ordering::SeqCst) {
            self.dispatch_entered.notify_one();
            self.dispatch_open.notified().await;
        }
        self.inner.mark_dispatched(scope, owner).await?;
        if self.dispatch_reply_lost.load(Ordering::SeqCst) {
            return Err(StoreError::unavailable("the test lost the store's reply"));
        }
        Ok(())
    }

    async fn renew(&self, scope: &Scope, owner: OwnerToken, lease: Duration) -> Result<(), StoreError> {
        Self::down(&self.renewals_fail)?;
        let before = self.inner.lookup(scope).await?;
        if before.is_some_and(|record| record.lease_left.is_zero()) {
            self.lapsed_renewals.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.renew(scope, owner, lease).await?;
        self.renewals.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn complete(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        if let Err(error) = Self::down(&self.completes_fail) {
            self.failed_completes.fetch_add(1, Ordering::SeqCst);
            return Err(error);
        }
        if self.hold_complete.load(Ordering::SeqCst) {
            self.complete_open.notified().await;
        }
        self.inner.complete(scope, owner, response).await
    }

    async fn mark_outcome_unknown(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        self.inner.mark_outcome_unknown(scope, owner).await
    }

    async fn release(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        let fail = self
            .releases_to_fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        if fail.is_ok() {
            self.failed_releases.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::unavailable("the test failed the release"));
        }
        self.inner.release(scope, owner).await
    }

    async fn lookup(&self, scope: &Scope) -> Result<Option<Record>, StoreError> {
        self.inner.lookup(scope).await
    }

    async fn reap(&self) -> Result<u64, StoreError> {
        self.reaps.fetch_add(1, Ordering::SeqCst);
        self.inner.reap().await
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
}
