//! The taking loop and one attempt.
//!
//! One loop per [`Deferred`](super::Deferred) takes due operations, one at a time, from the queues that have a
//! free slot — a process-wide slot and one of the queue's — so the store picks the highest class among them
//! (payments before lookups) and no queue takes more than its share. Each taken operation runs in a task of its
//! own: its lease renewed every third of it, its attempt marked begun before anything is sent, the handler's
//! answer read into a [`Tried`](ballast_core::deferred::Tried), and the end or the next wait written with the
//! record (`ends`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use ballast_core::deferred::{Tried, next, on_take};
use ballast_core::{Deadline, Priority};
use ballast_store::{OwnerToken, Scope, StoreError, StoredResponse, Taken};
use http::{HeaderValue, Request, Response, header};
use http_body_util::BodyExt as _;
use tokio::sync::OwnedSemaphorePermit;
use tower::ServiceExt as _;

use super::ends::{End, end};
use super::lease::renew;
use super::{Deferred, DeferredAttempt, StoredRequest};
use crate::headers::{BALLAST_ATTEMPTS, IDEMPOTENCY_KEY};
use crate::idempotency::{NotStored, OutcomeUnknown, Principal};
use crate::{background, clock};

/// The largest answer a deferred attempt keeps (as the idempotency layer's default): one over it is read as an
/// unknown outcome, never stored cut short.
const RESPONSE_LIMIT: usize = 1024 * 1024;

/// A [`Deferred`]'s running loop: stopped when dropped. Attempts already running finish and write their end.
#[derive(Debug)]
pub struct Workers {
    taking: tokio::task::AbortHandle,
}

impl Drop for Workers {
    fn drop(&mut self) {
        self.taking.abort();
    }
}

impl Deferred {
    /// Starts this process's workers: a loop that takes due operations of the registered queues and works each
    /// in a task of its own. Keep the [`Workers`]; dropping them stops taking.
    pub fn start(&self) -> Workers {
        let taking = background::spawn(take_loop(self.clone()));
        Workers {
            taking: taking.abort_handle(),
        }
    }
}

/// The slots an attempt holds until it ends: the process's and its queue's.
type Slots = (OwnedSemaphorePermit, OwnedSemaphorePermit);

async fn take_loop(deferred: Deferred) {
    let inner = &deferred.inner;
    let mut failures: u32 = 0;
    loop {
        let slot = Arc::clone(&inner.slots)
            .acquire_owned()
            .await
            .expect("the slots are never closed");
        let open: Vec<String> = (inner.handlers.iter())
            .filter(|(_, queue)| queue.slots.available_permits() > 0)
            .map(|(name, _)| name.clone())
            .collect();
        let woken = inner.wake.notified();
        if open.is_empty() {
            // Every queue is at its limit: an attempt's end frees one.
            drop(slot);
            let _ = tokio::time::timeout(inner.poll, woken).await;
            continue;
        }
        let worker = OwnerToken::random();
        match inner.queue.take(&open, worker, inner.lease).await {
            Ok(Some(taken)) => {
                failures = 0;
                let Some(queue) = inner.handlers.get(&taken.operation.tool) else {
                    tracing::error!(queue = %taken.operation.tool, "the store gave an operation of a queue nobody asked for");
                    continue;
                };
                // Only this loop takes queue slots, and it saw one free.
                let Ok(queue_slot) = Arc::clone(&queue.slots).try_acquire_owned() else {
                    continue;
                };
                background::spawn(work(deferred.clone(), taken, worker, (slot, queue_slot)));
            }
            Ok(None) => {
                drop(slot);
                let _ = tokio::time::timeout(inner.poll, woken).await;
            }
            Err(error) => {
                drop(slot);
                failures = failures.saturating_add(1);
                tracing::warn!(%error, "could not take deferred work; trying again");
                let wait = inner.poll.saturating_mul(2u32.saturating_pow(failures.min(5)));
                tokio::time::sleep(wait.min(Duration::from_secs(5))).await;
            }
        }
    }
}

/// One taken operation: ended at once, or one attempt and what follows it.
async fn work(deferred: Deferred, taken: Taken, worker: OwnerToken, slots: Slots) {
    let inner = Arc::clone(&deferred.inner);
    let operation = taken.operation;
    let queue = &inner.handlers[&operation.tool];
    let renewing = renew(
        Arc::clone(&inner.queue),
        operation.scope.clone(),
        worker,
        inner.lease,
    );
    let ending = End {
        deferred: &deferred,
        operation: &operation,
        worker,
        renewing,
        slots,
        taken_at: clock::now(),
    };
    let deduplicates = queue.handler.deduplicates;
    let (attempts, max) = (operation.attempts, operation.max_attempts);
    if let Some(next) = on_take(
        taken.interrupted,
        operation.expires_in,
        attempts,
        max,
        deduplicates,
    ) {
        return end(ending, next, None, false).await;
    }
    let Some(stored) = StoredRequest::decode(&operation.request) else {
        tracing::error!(scope = ?operation.scope, "a deferred request this version cannot read; giving it up");
        return end(ending, ballast_core::deferred::Next::GiveUp, None, false).await;
    };
    let started = clock::now();
    match tokio::time::timeout(
        inner.lease / 3,
        inner.queue.begin_attempt(&operation.scope, worker),
    )
    .await
    {
        Ok(Ok(())) => {}
        Ok(Err(StoreError::NotHeld)) => return,
        Ok(Err(_)) | Err(_) => {
            // Nothing was sent: queue it again (which also clears a begin that landed unseen).
            tracing::warn!(scope = ?operation.scope, "could not mark a deferred attempt begun; not sending it");
            let wait = ballast_core::deferred::Next::Retry { after: inner.poll };
            return end(ending, wait, None, false).await;
        }
    }
    let timeout = inner.attempt_timeout.min(operation.expires_in);
    let deadline = Deadline::after(started, timeout);
    let attempt = DeferredAttempt {
        queue: Arc::clone(&queue.name),
        attempt: attempts + 1,
        deadline,
        priority: Priority::ALL[usize::from(operation.priority.min(3))],
    };
    let request = build(&operation.scope, stored, attempt);
    // The handler ends by the attempt's deadline; a handler that does not is treated as one whose answer was
    // lost (it may still be acting).
    let service = queue.handler.service.clone();
    let answered = tokio::time::timeout(timeout + Duration::from_secs(5), service.oneshot(request)).await;
    let (tried, answer) = match answered {
        Ok(Ok(response)) => read(response, &inner.stored_headers).await,
        Ok(Err(never)) => match never {},
        Err(_) => (Tried::Unknown, None),
    };
    let attempted = !matches!(tried, Tried::Refused { attempted: false, .. });
    let left = operation
        .expires_in
        .saturating_sub(clock::now().saturating_duration_since(started));
    let mut rng = ballast_core::default_rng(None);
    let next = next(tried, attempts, max, left, deduplicates, &inner.backoff, &mut rng);
    end(ending, next, answer, attempted).await;
}

/// The request a deferred attempt sends: the stored target, media type and body, the operation's key and
/// principal, and the [`DeferredAttempt`].
fn build(scope: &Scope, stored: StoredRequest, attempt: DeferredAttempt) -> Request<Body> {
    let method = scope.route().split_once(' ').map_or("POST", |(method, _)| method);
    let mut request = Request::new(Body::from(stored.body));
    *request.method_mut() = http::Method::from_bytes(method.as_bytes()).unwrap_or(http::Method::POST);
    *request.uri_mut() = stored
        .target
        .parse()
        .unwrap_or_else(|_| http::Uri::from_static("/"));
    let headers = request.headers_mut();
    if let Ok(key) = HeaderValue::from_str(scope.key().as_str()) {
        headers.insert(IDEMPOTENCY_KEY, key);
    }
    if let Some(value) = stored.content_type.and_then(|t| HeaderValue::from_str(&t).ok()) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    request.extensions_mut().insert(Principal::new(scope.principal()));
    request.extensions_mut().insert(attempt);
    request
}

/// What an attempt's answer says, and the answer as the store keeps it (`None` when it cannot be kept whole).
async fn read(response: Response<Body>, allowed: &[http::HeaderName]) -> (Tried, Option<StoredResponse>) {
    let (parts, body) = response.into_parts();
    if parts.extensions.get::<OutcomeUnknown>().is_some() {
        return (Tried::Unknown, None);
    }
    let bytes = match http_body_util::Limited::new(body, RESPONSE_LIMIT).collect().await {
        Ok(collected) => collected.to_bytes(),
        // Cut short or over the limit: what it said cannot be kept, and it may have acted.
        Err(_) if parts.extensions.get::<NotStored>().is_none() => return (Tried::Unknown, None),
        Err(_) => bytes::Bytes::new(),
    };
    let stored = crate::idempotency::to_stored(&parts, bytes, allowed);
    let tried = if parts.extensions.get::<NotStored>().is_some() {
        let unsent = parts
            .headers
            .get(BALLAST_ATTEMPTS)
            .is_some_and(|v| v.as_bytes() == b"0");
        Tried::Refused {
            attempted: !unsent,
            retry_after: crate::headers::retry_after(&parts.headers),
        }
    } else if parts.status.is_success() {
        Tried::Succeeded
    } else {
        Tried::Rejected
    };
    (tried, Some(stored))
}
