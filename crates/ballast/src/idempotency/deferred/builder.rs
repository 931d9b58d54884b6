//! [`DeferredBuilder`]: a [`Deferred`]'s handlers, limits and timing, checked into one.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ballast_core::Backoff;
use ballast_store::DeferredQueue;
use tokio::sync::{Notify, Semaphore};

use super::{
    DEFAULT_ATTEMPT_TIMEOUT, DEFAULT_BACKOFF, DEFAULT_CONCURRENCY, Deferred, Ended, Handler, Inner, OnEnd,
    POLL, Queue, WORKER_LEASE,
};

/// Builds a [`Deferred`].
pub struct DeferredBuilder {
    queue: Arc<dyn DeferredQueue>,
    handlers: HashMap<String, Handler>,
    concurrency: usize,
    attempt_timeout: Duration,
    lease: Duration,
    poll: Duration,
    operations_path: String,
    on_end: Option<OnEnd>,
    stored_headers: Vec<http::HeaderName>,
    backoff: Backoff,
}

impl fmt::Debug for DeferredBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeferredBuilder")
            .field("handlers", &self.handlers)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl DeferredBuilder {
    /// Every default, over `queue`.
    pub(super) fn new(queue: Arc<dyn DeferredQueue>) -> Self {
        DeferredBuilder {
            queue,
            handlers: HashMap::new(),
            concurrency: DEFAULT_CONCURRENCY,
            attempt_timeout: DEFAULT_ATTEMPT_TIMEOUT,
            lease: WORKER_LEASE,
            poll: POLL,
            operations_path: "/operations".to_owned(),
            on_end: None,
            stored_headers: super::super::DEFAULT_STORED_HEADERS.to_vec(),
            backoff: Backoff::full_jitter(DEFAULT_BACKOFF.0, DEFAULT_BACKOFF.1).expect("1 s <= 60 s"),
        }
    }

    /// Keeps the answer header `name` with an ended operation's answer, as
    /// [`IdempotencyLayerBuilder::store_header`](crate::idempotency::IdempotencyLayerBuilder::store_header) does
    /// for replays (give both the same list).
    #[must_use]
    pub fn store_header(mut self, name: http::HeaderName) -> Self {
        if !self.stored_headers.contains(&name) {
            self.stored_headers.push(name);
        }
        self
    }

    /// Works the queue `name` (what [`Defer::new`] names) with `handler`.
    #[must_use]
    pub fn handler(mut self, name: impl Into<String>, handler: Handler) -> Self {
        self.handlers.insert(name.into(), handler);
        self
    }

    /// Deferred attempts in flight at once in this process, over every queue (default
    /// [`DEFAULT_CONCURRENCY`]; at least 1).
    #[must_use]
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Longest time one attempt may take (default [`DEFAULT_ATTEMPT_TIMEOUT`]; the operation's ttl caps it).
    #[must_use]
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
        self
    }

    /// A worker's lease (default [`WORKER_LEASE`]) and how often an idle worker looks for due work (default
    /// [`POLL`]): shorter for tests.
    #[must_use]
    pub fn timing(mut self, lease: Duration, poll: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(30));
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// The jittered backoff between an operation's attempts (default full jitter from 1 s to 60 s); a refusal's
    /// `Retry-After` is honoured when it asks for longer.
    #[must_use]
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Where operations' statuses are served (default `/operations`): the 202's `Location` is this path and the
    /// key.
    #[must_use]
    pub fn operations_path(mut self, path: impl Into<String>) -> Self {
        self.operations_path = path.into().trim_end_matches('/').to_owned();
        self
    }

    /// Called for each operation this process ends, after its end was written (a callback, a metric).
    #[must_use]
    pub fn on_end(mut self, hook: impl Fn(Ended) + Send + Sync + 'static) -> Self {
        self.on_end = Some(Arc::new(hook));
        self
    }

    /// The queue, ready to [`start`](Deferred::start).
    pub fn build(self) -> Deferred {
        let handlers = (self.handlers.into_iter())
            .map(|(name, handler)| {
                let slots = Arc::new(Semaphore::new(handler.concurrency));
                let queue = Queue {
                    name: name.as_str().into(),
                    handler,
                    slots,
                };
                (name, queue)
            })
            .collect();
        let backoff = self.backoff;
        Deferred {
            inner: Arc::new(Inner {
                queue: self.queue,
                handlers,
                slots: Arc::new(Semaphore::new(self.concurrency)),
                attempt_timeout: self.attempt_timeout,
                lease: self.lease,
                poll: self.poll,
                backoff,
                operations_path: self.operations_path,
                on_end: self.on_end,
                stored_headers: self.stored_headers,
                wake: Notify::new(),
            }),
        }
    }
}
