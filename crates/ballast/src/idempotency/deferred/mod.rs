//! Deferred operations (DESIGN.md, "Deferred operations"; reference/000's batch retry queue): a side-effecting
//! request that cannot be served now, and whose caller can wait, is accepted — `202 Accepted` with `Location:
//! /operations/{key}` — and worked later, in priority order, under a concurrency limit, with its one key.
//!
//! Why a queue and not a refusal: in a flash sale many calls time out or are shed at once. Retried at once they
//! are the storm; dropped, the payment is lost and the agent has to invent a retry of its own. Queued by class,
//! they are worked when the upstream has room, each with the key it came with, so the upstream sees one
//! operation however many attempts it takes, and nothing runs twice.
//!
//! How it fits with [`IdempotencyLayer`](crate::idempotency::IdempotencyLayer): the handler behind the layer
//! marks an answer that acted on nothing with [`Defer`] when its caller can wait; the layer, built with
//! [`IdempotencyLayerBuilder::deferred`](crate::idempotency::IdempotencyLayerBuilder::deferred), turns the claim
//! it holds into a queued operation in one transaction ([`DeferredQueue::defer`]) and answers 202. The
//! [`Deferred`] workers (started with [`Deferred::start`]) take operations from the store under leases they
//! renew, send each attempt through the handler registered for its queue (with a [`DeferredAttempt`] in the
//! request's extensions), and end it with its record. Several processes on one store share the queue.
//!
//! ```no_run
//! # async fn example(store: std::sync::Arc<dyn ballast::idempotency::store::IdempotencyStore>) {
//! use std::time::Duration;
//! use ballast::deferred::{Deferred, Handler};
//!
//! let refund = tower::service_fn(|request: http::Request<axum::body::Body>| async move {
//!     // ... the same work the live route does, for `request` (its body and `Idempotency-Key`) ...
//!     Ok::<_, std::convert::Infallible>(http::Response::new(axum::body::Body::from("{\"refunded\":true}")))
//! });
//! let deferred = Deferred::builder(store)
//!     .expect("the store has a queue")
//!     .handler("refund", Handler::new(refund).concurrency(2))
//!     .build();
//! let _workers = deferred.start();
//! # }
//! ```
//!
//! # Layout
//! - `stored` — the request as kept with the operation (its target, media type and body).
//! - `json` — an operation as JSON, and the 202 answer.
//! - `worker` — the taking loop and one attempt, with its lease renewed.
//! - `builder` — [`DeferredBuilder`].
//! - `lease` — a worker's lease, renewed while it holds an operation.
//! - `ends` — an operation's end: its last write, retried until it lands, then the [`Deferred`]'s hook.

mod builder;
mod ends;
mod json;
mod lease;
mod stored;
mod worker;

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use ballast_core::{Backoff, Deadline, Priority};
use ballast_store::{DeferredQueue, IdempotencyStore, Operation, Scope};
use http::{Request, Response};
use tokio::sync::{Notify, Semaphore};
use tower::util::BoxCloneSyncService;

pub use builder::DeferredBuilder;
pub use json::{accepted, operation_json, priority_name};
pub(crate) use stored::StoredRequest;
pub use worker::Workers;

/// Default deferred attempts in flight at once in one process, over every queue.
pub const DEFAULT_CONCURRENCY: usize = 4;
/// Default deferred attempts of one queue in flight at once in one process.
pub const DEFAULT_QUEUE_CONCURRENCY: usize = 2;
/// Default backoff between an operation's attempts: full jitter from 1 s, capped at 60 s.
pub const DEFAULT_BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));
/// Default longest time one attempt may take (capped by the operation's ttl).
pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// A worker's lease on the operation it holds: short, so a killed worker's operation is taken again within
/// seconds; renewed every third of it while the attempt runs.
pub const WORKER_LEASE: Duration = Duration::from_secs(10);
/// How often an idle worker looks for due work (a deferral in this process wakes it at once).
pub const POLL: Duration = Duration::from_millis(250);

/// Put into a response's extensions by the handler behind an
/// [`IdempotencyLayer`](crate::idempotency::IdempotencyLayer) built with a [`Deferred`]: "nothing acted, the
/// caller can wait: queue it". Only with [`NotStored`](crate::idempotency::NotStored) (an answer that acted on
/// something is never deferred). Without a queue on the layer the response goes to the caller as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Defer {
    pub(crate) queue: String,
    pub(crate) priority: Priority,
    pub(crate) ttl: Duration,
    pub(crate) max_attempts: u32,
    pub(crate) after: Duration,
}

impl Defer {
    /// Queue the request on `queue` (a name a [`Handler`] was registered under) for at most `ttl`; class
    /// `critical`, 5 attempts, the first one due at once.
    pub fn new(queue: impl Into<String>, ttl: Duration) -> Self {
        Defer {
            queue: queue.into(),
            priority: Priority::Critical,
            ttl,
            max_attempts: 5,
            after: Duration::ZERO,
        }
    }

    /// Its class in the queue: higher classes are worked first.
    #[must_use]
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Attempts it may make (at least 1).
    #[must_use]
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts.max(1);
        self
    }

    /// Its first attempt no sooner than `after` from now (a refusal's `Retry-After`).
    #[must_use]
    pub fn after(mut self, after: Duration) -> Self {
        self.after = after;
        self
    }
}

/// In the extensions of a request a [`Deferred`] worker sends its queue's handler: which attempt this is and by
/// when it must end. The request also carries the operation's `Idempotency-Key` and its
/// [`Principal`](crate::idempotency::Principal).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeferredAttempt {
    /// The queue (the name the handler was registered under).
    pub queue: Arc<str>,
    /// This attempt's number, from 1.
    pub attempt: u32,
    /// The attempt's deadline: the attempt timeout, or the operation's ttl if that ends first.
    pub deadline: Deadline,
    /// The operation's class.
    pub priority: Priority,
}

/// The service a queue's attempts go through: a request in, a response out, with the markers the
/// idempotency layer reads ([`NotStored`](crate::idempotency::NotStored),
/// [`OutcomeUnknown`](crate::idempotency::OutcomeUnknown)) and, optionally, a `ballast-attempts` header (`0`:
/// refused before anything was sent, so the attempt does not count).
pub type AttemptService = BoxCloneSyncService<Request<Body>, Response<Body>, Infallible>;

/// A queue's handler and how it is worked.
#[derive(Clone)]
pub struct Handler {
    service: AttemptService,
    concurrency: usize,
    deduplicates: bool,
}

impl fmt::Debug for Handler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handler")
            .field("concurrency", &self.concurrency)
            .field("deduplicates", &self.deduplicates)
            .finish_non_exhaustive()
    }
}

impl Handler {
    /// Attempts go through `service`; [`DEFAULT_QUEUE_CONCURRENCY`] at once; the upstream does not deduplicate.
    pub fn new<S>(service: S) -> Self
    where
        S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        Handler {
            service: BoxCloneSyncService::new(service),
            concurrency: DEFAULT_QUEUE_CONCURRENCY,
            deduplicates: false,
        }
    }

    /// Attempts of this queue in flight at once in this process (at least 1).
    #[must_use]
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Whether the upstream deduplicates by the key: then an attempt whose answer was lost (or whose worker
    /// died) is sent again with the same key; otherwise it ends `outcome_unknown`.
    #[must_use]
    pub fn deduplicates(mut self, deduplicates: bool) -> Self {
        self.deduplicates = deduplicates;
        self
    }
}

/// An operation that ended, as the [`DeferredBuilder::on_end`] hook sees it (after its end was written).
#[derive(Clone, Debug)]
pub struct Ended {
    /// The operation as it ended (its state, attempts, last answer, how long it took).
    pub operation: Operation,
}

/// The hook called for each operation this process ends.
pub type OnEnd = Arc<dyn Fn(Ended) + Send + Sync>;

/// The deferred queue of one store and the handlers that work it. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Deferred {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) queue: Arc<dyn DeferredQueue>,
    pub(crate) handlers: HashMap<String, Queue>,
    pub(crate) slots: Arc<Semaphore>,
    pub(crate) attempt_timeout: Duration,
    pub(crate) lease: Duration,
    pub(crate) poll: Duration,
    pub(crate) backoff: Backoff,
    pub(crate) operations_path: String,
    pub(crate) on_end: Option<OnEnd>,
    /// The answer headers an ended operation keeps (as the idempotency layer's allow-list).
    pub(crate) stored_headers: Vec<http::HeaderName>,
    /// Woken by a deferral in this process, and by an attempt's end: idle workers look again at once.
    pub(crate) wake: Notify,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deferred")
            .field("queue", &self.queue)
            .field("handlers", &self.handlers.keys().collect::<Vec<_>>())
            .field("slots", &self.slots.available_permits())
            .finish_non_exhaustive()
    }
}

/// A queue's handler with its own slots.
#[derive(Debug)]
pub(crate) struct Queue {
    pub(crate) name: Arc<str>,
    pub(crate) handler: Handler,
    pub(crate) slots: Arc<Semaphore>,
}

/// The store has no deferred queue (a store of your own that does not implement one).
#[derive(Debug, thiserror::Error)]
#[error("the {backend} store keeps no deferred queue")]
pub struct NoQueue {
    backend: &'static str,
}

impl Deferred {
    /// A builder for the queue of `store` (every built-in backend has one).
    pub fn builder(store: Arc<dyn IdempotencyStore>) -> Result<DeferredBuilder, NoQueue> {
        let queue = store.deferred().ok_or(NoQueue {
            backend: store.backend(),
        })?;
        Ok(DeferredBuilder::new(queue))
    }

    /// The store's queue.
    pub fn queue(&self) -> &Arc<dyn DeferredQueue> {
        &self.inner.queue
    }

    /// Whether `queue` has a handler (only such operations can be worked here).
    pub fn handles(&self, queue: &str) -> bool {
        self.inner.handlers.contains_key(queue)
    }

    /// Where an operation's status is read: `{operations_path}/{key}` (the `Location` of a 202), the key
    /// percent-encoded but for RFC 3986's unreserved characters, so that a key with `/`, `?`, `#` or `%` in it
    /// names itself, not another path.
    pub fn location(&self, scope: &Scope) -> String {
        format!(
            "{}/{}",
            self.inner.operations_path,
            path_segment(scope.key().as_str())
        )
    }

    /// The queues it has handlers for.
    pub fn queues(&self) -> impl Iterator<Item = &str> {
        self.inner.handlers.keys().map(String::as_str)
    }

    /// Wakes idle workers of this process (a deferral just landed).
    pub(crate) fn wake(&self) {
        self.inner.wake.notify_waiters();
    }
}

/// `text` as one path segment: RFC 3986's unreserved characters as they are, every other byte `%XX`.
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_are_one_path_segment_in_a_location() {
        assert_eq!(super::path_segment("pay-42_a.b~c"), "pay-42_a.b~c");
        assert_eq!(super::path_segment("a/b?c#d%e f"), "a%2Fb%3Fc%23d%25e%20f");
    }
}
