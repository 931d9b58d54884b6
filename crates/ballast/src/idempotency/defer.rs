//! A claim turned into a deferred operation (`crate::deferred`): the handler refused the request before acting
//! and marked it [`Defer`], so instead of giving the key back the layer queues the request with it, in one
//! transaction, and answers 202 — and a later request with the key, while the operation waits, gets the same
//! 202 instead of 409.
//!
//! When the queue write fails the caller gets the handler's own answer and the key is given back, as without a
//! queue. That is safe even when the write landed unseen: a deferral moves the record to a token of the
//! operation's own, so the give-back is refused and the operation runs once, as its record says.

use std::time::Duration;

use axum::body::Body;
use ballast_store::{NewOperation, Scope, StoreError};
use http::Response;

use super::deferred::{Defer, StoredRequest, accepted};
use super::layer::Settings;
use super::settle::{HeldClaim, KeepAlive, Sent, Settlement, finish};
use crate::clock;
use ballast_core::Deadline;

/// Queues the request `kept` as `marker` says and answers 202; on failure, `sent`'s own answer and the key given
/// back.
pub(super) async fn defer<E>(
    settings: &Settings,
    claim: &HeldClaim,
    renewing: KeepAlive,
    marker: Defer,
    kept: StoredRequest,
    sent: Sent<E>,
    deadline: &Deadline,
) {
    let deferred = settings.deferred.as_ref().expect("a kept request means a queue");
    let request = kept.encode();
    let (Some(request), true) = (request, deferred.handles(&marker.queue)) else {
        // Too large a target to keep, or a queue nobody works here (it would wait forever): answer as it is.
        tracing::warn!(queue = %marker.queue, "not deferring: no handler for the queue, or the request cannot be kept");
        return finish(
            claim,
            renewing,
            Settlement::Release,
            Some(sent),
            settings,
            deadline,
        )
        .await;
    };
    let operation = NewOperation {
        tool: marker.queue.clone(),
        priority: marker.priority as u8,
        request,
        max_attempts: marker.max_attempts,
        ttl: marker.ttl,
        due_in: marker.after.min(marker.ttl),
        last: None,
    };
    // The claim's renewals stop before the deferral: the operation's record lease is its own from then on.
    drop(renewing);
    let queue = deferred.queue();
    let wait = settings.first_write_wait.min(deadline.usable(clock::now()));
    let mut writing = std::pin::pin!(queue.defer(&claim.scope, claim.owner, &operation));
    let written = match tokio::time::timeout(wait, &mut writing).await {
        Ok(written) => written,
        Err(_) => {
            // The caller is answered now; the write may still land, and is then the truth (see the module docs).
            let (to, answer) = sent;
            let _ = to.send(answer);
            let written = writing.await;
            let none = None::<Sent<E>>;
            return after_write(settings, claim, &marker, written, none, deadline).await;
        }
    };
    after_write(settings, claim, &marker, written, Some(sent), deadline).await;
}

/// What follows the queue write: the 202, or the handler's answer and the key given back.
async fn after_write<E>(
    settings: &Settings,
    claim: &HeldClaim,
    marker: &Defer,
    written: Result<ballast_store::Operation, StoreError>,
    sent: Option<Sent<E>>,
    deadline: &Deadline,
) {
    let deferred = settings.deferred.as_ref().expect("a queue");
    match written {
        Ok(operation) => {
            crate::metrics::deferred(&marker.queue, "deferred");
            deferred.wake();
            if let Some((to, _)) = sent {
                let _ = to.send(Ok(accepted(&operation, &deferred.location(&claim.scope))));
            }
        }
        Err(StoreError::NotHeld) => {
            // Another request took the key over: nothing here is this request's to write.
            if let Some((to, answer)) = sent {
                let _ = to.send(answer);
            }
        }
        Err(error) => {
            tracing::warn!(scope = ?claim.scope, %error, "could not defer the request; answering as it is");
            finish(
                claim,
                claim.keep_alive(),
                Settlement::Release,
                sent,
                settings,
                deadline,
            )
            .await;
        }
    }
}

/// The 202 of the operation that holds `scope`'s key, when one waits (queued or in progress); `None` otherwise,
/// or when the store does not say within `wait`.
pub(super) async fn waiting(settings: &Settings, scope: &Scope, wait: Duration) -> Option<Response<Body>> {
    let deferred = settings.deferred.as_ref()?;
    let found = tokio::time::timeout(wait, deferred.queue().lookup(scope)).await;
    let operation = found.ok()?.ok()??;
    (!operation.state.is_finished()).then(|| accepted(&operation, &deferred.location(scope)))
}
