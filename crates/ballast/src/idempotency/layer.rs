//! [`IdempotencyLayer`] and its builder: the settings, checked once when the layer is built.

use std::sync::Arc;
use std::time::Duration;

use ballast_core::Backoff;
use ballast_store::{ExpiredDispatch, IdempotencyStore};
use http::HeaderName;
use tower::Layer;

use super::IdempotencyService;

/// A setting the builder refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidIdempotencyLayer {
    /// A size limit of zero would refuse every body.
    #[error("{field} must be greater than zero")]
    ZeroLimit {
        /// `body_limit` or `response_limit`.
        field: &'static str,
    },
    /// A zero default timeout would give a request without deadline headers no time at all.
    #[error("default_timeout must be greater than zero")]
    ZeroTimeout,
    /// The default timeout is over the cap, which would silently cut it.
    #[error("default_timeout ({default:?}) is larger than max_timeout ({max:?})")]
    DefaultOverMax {
        /// The default timeout given.
        default: Duration,
        /// The cap given.
        max: Duration,
    },
    /// The default principal is empty.
    #[error("default_principal must not be empty")]
    EmptyPrincipal,
    /// A zero first-write wait never gives the store a chance before the caller is answered.
    #[error("first_write_wait must be greater than zero")]
    ZeroFirstWriteWait,
    /// A zero lease would let the next request take over a key before its holder could renew it.
    #[error("lease must be greater than zero (the holder renews it every third of it)")]
    ZeroLease,
}

/// What the service does, shared by every clone.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) store: Arc<dyn IdempotencyStore>,
    pub(crate) require_key: bool,
    pub(crate) body_limit: usize,
    pub(crate) response_limit: usize,
    pub(crate) default_timeout: Duration,
    pub(crate) max_timeout: Duration,
    pub(crate) lease: Duration,
    pub(crate) expired_dispatch: ExpiredDispatch,
    pub(crate) default_principal: String,
    pub(crate) stored_headers: Vec<HeaderName>,
    pub(crate) max_retry_after: Duration,
    pub(crate) first_write_wait: Duration,
    pub(crate) write_backoff: Backoff,
    /// Where requests the handler marks [`Defer`](super::deferred::Defer) are queued (none: they are answered
    /// as they are).
    pub(crate) deferred: Option<super::deferred::Deferred>,
}

/// The server side of idempotency: axum/tower middleware that makes any handler with a side effect safe to
/// retry (Stripe's semantics; IETF draft-ietf-httpapi-idempotency-key-header).
///
/// Why: a client that timed out cannot know whether its refund happened, so it retries — and without this layer
/// the customer is refunded twice (reference/004). With it, the first request with an `Idempotency-Key` claims
/// the key in an [`IdempotencyStore`](ballast_store::IdempotencyStore) before the handler runs, and every later
/// request with that key gets the first one's stored answer, or learns it is still running — never a second
/// execution. DESIGN.md ("Idempotency, server side") has the table; in short:
///
/// | request | answer |
/// |---|---|
/// | `GET`, `HEAD`, `OPTIONS`, `TRACE` (safe methods) | passed to the handler untouched |
/// | no key, key required (default) | 400 `urn:ballast:idempotency_key_missing` (not required: passed through) |
/// | key empty, over 255 characters, not printable ASCII, sent twice | 400 `urn:ballast:idempotency_key_invalid` |
/// | body over the limit | 413, nothing runs |
/// | JSON body naming a member twice | 400 `urn:ballast:json_duplicate_member`, nothing runs |
/// | first request | claimed (a short lease, renewed while it runs), marked `dispatched`, handler runs |
/// | same key while running | 409 `urn:ballast:idempotency_in_progress`, `Retry-After`, `x-should-retry: true` |
/// | same key, another request | 422 `urn:ballast:idempotency_key_reused`, nothing runs |
/// | same key after completion | the stored status, allow-listed headers and body, `Idempotent-Replayed: true` |
/// | same key after an unknown outcome | 502 `urn:ballast:outcome_unknown`, `x-should-retry: false` |
/// | store unreachable before the claim, or slower than the request's time left | 503 `urn:ballast:store_unavailable`, `Retry-After`, nothing runs (fail closed) |
///
/// - **Scope**: principal + route + key. The principal is the request's [`Principal`](crate::idempotency::Principal)
///   extension (inserted by an auth middleware outside this layer), else the configured default (`anonymous`).
///   The route is the method and the route's pattern (axum's `MatchedPath`, else the path):
///   `POST /refunds/{id}`.
/// - **Fingerprint**: `ballast_core::fingerprint` over the method, the path as sent (with its query), the
///   media type (normalised: `type/subtype` in lower case, only the `charset` kept) and the body — JSON
///   canonicalised (reordered keys and respelled numbers match, every number keeps its exact value), other
///   bodies byte for byte. A JSON body that names a member twice is a 400 `urn:ballast:json_duplicate_member`.
/// - **Lease**: short and fixed (10 s), independent of the deadline, and renewed every third of it while the
///   request runs (compare-and-set on its owner token), from the claim until its last write lands: a live
///   holder never loses its key to a retry, and a crashed one blocks the key for one lease. A handler still
///   running past `max_timeout` (the longest deadline the layer grants) is treated as gone: its lease runs out. A holder that vanished before
///   dispatch is taken over when its lease runs out; one that vanished after dispatch leaves `outcome_unknown`
///   ([`ExpiredDispatch`](ballast_store::ExpiredDispatch), configurable for handlers that deduplicate) — and
///   if it was only cut off from the store, its answer replaces that `outcome_unknown` when it lands.
/// - **Deadline**: the request's time left — its [`CallContext`](crate::context::CallContext)'s deadline, else the
///   smallest inbound deadline header (`ballast-timeout-ms`, `grpc-timeout`, ...; capped; a malformed one is a
///   400), else the default timeout. Every wait on the store before the answer is bounded by it, minus the
///   reserve: a 300 ms request never waits seconds for a slow store (503, nothing ran, the claim given back in
///   the background), and the handler's answer is never held past it for the first write. A request that
///   arrives with no time left past the reserve is 504 `urn:ballast:deadline_exceeded`; nothing runs.
/// - **The handler runs in a task of its own**, so a caller that disconnects does not cancel a side effect
///   half-way: the handler finishes and its answer is stored for the retry. A panic after dispatch leaves
///   `outcome_unknown` and answers 500.
/// - **What is stored**: the handler's response, unless it carries [`NotStored`](crate::idempotency::NotStored) (a refusal
///   before acting: the key is released and a retry runs) or [`OutcomeUnknown`](crate::idempotency::OutcomeUnknown) (the
///   key becomes `outcome_unknown`). A response over the response limit reaches the caller whole but cannot be
///   replayed (`outcome_unknown` for retries).
/// - **A store that fails after the handler answered** does not cost the caller the answer: the write is retried
///   in the background with jittered backoff until it lands; until then a retry gets 409. The same for a
///   claim that must be given back (nothing ran) and whose release failed: a key is never left `dispatched` —
///   and so later `outcome_unknown` — when nothing ran.
/// - **Status**: [`operation_status`](crate::idempotency::operation_status) and
///   [`operations_route`](crate::idempotency::operations_route) answer `in_progress`, `completed`, `outcome_unknown` or
///   `not_found` for a key, scoped to the caller's principal.
///
/// The service is always ready: it drives a clone of the inner service to readiness for each request (axum's
/// routes are always ready). Errors of the inner service are passed on; one after dispatch leaves
/// `outcome_unknown`.
///
/// ```
/// use std::sync::Arc;
///
/// use axum::{Router, routing::post};
/// use ballast::idempotency::IdempotencyLayer;
/// use tower::ServiceExt as _;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = ballast_store::open("sqlite::memory:", Default::default()).await.unwrap();
/// let refunds = Arc::new(std::sync::atomic::AtomicU32::new(0));
/// let counted = Arc::clone(&refunds);
/// let app = Router::new()
///     .route("/refunds", post(move || async move {
///         counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
///         (http::StatusCode::CREATED, "refunded")
///     }))
///     .layer(IdempotencyLayer::new(store));
/// let refund = || {
///     http::Request::post("/refunds")
///         .header("idempotency-key", "refund-order-7")
///         .body(axum::body::Body::from(r#"{"order": 7}"#))
///         .unwrap()
/// };
/// let first = app.clone().oneshot(refund()).await.unwrap();
/// let retry = app.oneshot(refund()).await.unwrap();
/// assert_eq!((first.status().as_u16(), retry.status().as_u16()), (201, 201));
/// assert_eq!(retry.headers()["idempotent-replayed"], "true");
/// assert_eq!(refunds.load(std::sync::atomic::Ordering::SeqCst), 1, "refunded once");
/// # }
/// ```
///
/// Built with [`IdempotencyLayer::builder`]; [`IdempotencyLayer::new`] takes every default.
#[derive(Clone, Debug)]
pub struct IdempotencyLayer {
    settings: Arc<Settings>,
}

impl IdempotencyLayer {
    /// Default limit on a request body the layer buffers (DESIGN.md's `body_limit`): 8 MiB.
    pub const DEFAULT_BODY_LIMIT: usize = 8 << 20;
    /// Default request timeout when the caller sends no deadline header (DESIGN.md's `default_timeout`): 30 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// Default cap on a caller's deadline (DESIGN.md's `max_timeout`): 300 s.
    pub const DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(300);
    /// Default lease of a claim (DESIGN.md: 10 s), renewed every third of it while its request runs.
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);
    /// The principal of requests without a [`Principal`](crate::idempotency::Principal) extension, unless configured.
    pub const DEFAULT_PRINCIPAL: &str = super::markers::DEFAULT_PRINCIPAL;

    /// Response headers stored and replayed by default: those that describe the representation or where it lives.
    /// Anything per-exchange (dates, request ids, cookies, hop-by-hop headers) is left out: replaying it would lie.
    pub const DEFAULT_STORED_HEADERS: [HeaderName; 7] = super::replay::DEFAULT_STORED_HEADERS;

    /// A layer over `store` with every default: a key required, 8 MiB limits, 30 s default timeout capped at
    /// 300 s, a 10 s lease, an expired dispatch becomes `outcome_unknown`, principal `anonymous`.
    pub fn new(store: Arc<dyn IdempotencyStore>) -> Self {
        IdempotencyLayer {
            settings: Arc::new(IdempotencyLayerBuilder::new(store).settings),
        }
    }

    /// A builder over `store`, starting from the defaults.
    pub fn builder(store: Arc<dyn IdempotencyStore>) -> IdempotencyLayerBuilder {
        IdempotencyLayerBuilder::new(store)
    }

    /// The operation-status route of this layer's keys (see [`operations_route`](super::operations_route)):
    /// its store, and its default principal for requests that carry no [`Principal`](super::Principal).
    /// `routes` are the routes the layer protects, as it scopes them (`"POST /refunds"`).
    pub fn operations_route<S>(&self, routes: Vec<String>) -> axum::routing::MethodRouter<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        let principal = self.settings.default_principal.as_str().into();
        super::status::operations_route_for(Arc::clone(&self.settings.store), routes, principal)
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = IdempotencyService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IdempotencyService::new(inner, Arc::clone(&self.settings))
    }
}

/// Settings of an [`IdempotencyLayer`], checked by [`build`](IdempotencyLayerBuilder::build).
#[derive(Debug)]
pub struct IdempotencyLayerBuilder {
    settings: Settings,
}

impl IdempotencyLayerBuilder {
    fn new(store: Arc<dyn IdempotencyStore>) -> Self {
        IdempotencyLayerBuilder {
            settings: Settings {
                store,
                require_key: true,
                body_limit: IdempotencyLayer::DEFAULT_BODY_LIMIT,
                response_limit: IdempotencyLayer::DEFAULT_BODY_LIMIT,
                default_timeout: IdempotencyLayer::DEFAULT_TIMEOUT,
                max_timeout: IdempotencyLayer::DEFAULT_MAX_TIMEOUT,
                lease: IdempotencyLayer::DEFAULT_LEASE,
                expired_dispatch: ExpiredDispatch::OutcomeUnknown,
                default_principal: IdempotencyLayer::DEFAULT_PRINCIPAL.to_owned(),
                stored_headers: IdempotencyLayer::DEFAULT_STORED_HEADERS.to_vec(),
                max_retry_after: Duration::from_secs(1),
                first_write_wait: Duration::from_secs(2),
                write_backoff: Backoff::full_jitter(Duration::from_millis(100), Duration::from_secs(5))
                    .expect("100 ms <= 5 s"),
                deferred: None,
            },
        }
    }

    /// Whether a request without `Idempotency-Key` is refused (400, the default) or passed to the handler
    /// untouched (`false`: keys are optional, and only keyed requests are deduplicated).
    pub fn require_key(mut self, required: bool) -> Self {
        self.settings.require_key = required;
        self
    }

    /// Largest request body buffered for the fingerprint; larger ones get 413 and nothing runs.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.settings.body_limit = bytes;
        self
    }

    /// Largest response body stored for replay. A larger one still reaches the caller, whole, but cannot be
    /// replayed: the key becomes `outcome_unknown` for retries.
    pub fn response_limit(mut self, bytes: usize) -> Self {
        self.settings.response_limit = bytes;
        self
    }

    /// The request's timeout when it carries no deadline header and no [`CallContext`](crate::context::CallContext).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.settings.default_timeout = timeout;
        self
    }

    /// Cap on any deadline a caller sends, and on how long a handler's lease is renewed.
    pub fn max_timeout(mut self, timeout: Duration) -> Self {
        self.settings.max_timeout = timeout;
        self
    }

    /// A claim's lease (default 10 s). The holder renews it every third of it while its request runs, so it
    /// bounds only how long a crashed holder blocks its key (and how long a holder cut off from the store keeps
    /// it before a retry settles it), never how long a handler may take.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease;
        self
    }

    /// What a claim does with an expired `dispatched` record: [`ExpiredDispatch::OutcomeUnknown`] (default —
    /// the handler is not known to deduplicate) or [`ExpiredDispatch::TakeOver`] (the handler deduplicates by
    /// the key itself, so running it again is safe).
    pub fn expired_dispatch(mut self, expired: ExpiredDispatch) -> Self {
        self.settings.expired_dispatch = expired;
        self
    }

    /// The principal of requests without a [`Principal`](crate::idempotency::Principal) extension.
    pub fn default_principal(mut self, name: impl Into<String>) -> Self {
        self.settings.default_principal = name.into();
        self
    }

    /// Another response header to store and replay, besides [`IdempotencyLayer::DEFAULT_STORED_HEADERS`].
    pub fn store_header(mut self, name: HeaderName) -> Self {
        if !self.settings.stored_headers.contains(&name) {
            self.settings.stored_headers.push(name);
        }
        self
    }

    /// Longest `Retry-After` on a 409 in-progress answer (default 1 s; shorter when the holder's lease runs
    /// out sooner): a client should come back soon, not when the lease ends.
    pub fn max_retry_after(mut self, wait: Duration) -> Self {
        self.settings.max_retry_after = wait;
        self
    }

    /// How long the caller's answer waits for the first store write (default 2 s, and never past the request's
    /// deadline minus the reserve). If the write fails or takes longer, the caller is answered anyway and the
    /// write goes on in the background.
    pub fn first_write_wait(mut self, wait: Duration) -> Self {
        self.settings.first_write_wait = wait;
        self
    }

    /// The jittered backoff between background store writes (default full jitter, 100 ms to 5 s).
    pub fn write_backoff(mut self, backoff: Backoff) -> Self {
        self.settings.write_backoff = backoff;
        self
    }

    /// Queues requests the handler marks [`Defer`](super::deferred::Defer) on `deferred` (with its
    /// [`NotStored`](super::NotStored): nothing acted) and answers them 202 with the operation; a later request
    /// with the key while it waits gets the same 202. Without it (the default) such answers go to the caller
    /// as they are.
    pub fn deferred(mut self, deferred: &super::deferred::Deferred) -> Self {
        self.settings.deferred = Some(deferred.clone());
        self
    }

    /// The layer, once the settings are checked.
    pub fn build(self) -> Result<IdempotencyLayer, InvalidIdempotencyLayer> {
        let s = &self.settings;
        if s.body_limit == 0 {
            return Err(InvalidIdempotencyLayer::ZeroLimit { field: "body_limit" });
        }
        if s.response_limit == 0 {
            return Err(InvalidIdempotencyLayer::ZeroLimit {
                field: "response_limit",
            });
        }
        if s.default_timeout.is_zero() {
            return Err(InvalidIdempotencyLayer::ZeroTimeout);
        }
        if s.default_timeout > s.max_timeout {
            return Err(InvalidIdempotencyLayer::DefaultOverMax {
                default: s.default_timeout,
                max: s.max_timeout,
            });
        }
        if s.default_principal.is_empty() {
            return Err(InvalidIdempotencyLayer::EmptyPrincipal);
        }
        if s.first_write_wait.is_zero() {
            return Err(InvalidIdempotencyLayer::ZeroFirstWriteWait);
        }
        if s.lease.is_zero() {
            return Err(InvalidIdempotencyLayer::ZeroLease);
        }
        Ok(IdempotencyLayer {
            settings: Arc::new(self.settings),
        })
    }
}
