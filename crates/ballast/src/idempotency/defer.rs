//! A claim turned into a deferred operation (`crate::deferred`): the handler refused the request before acting
//! and marked it [`Defer`], so instead of giving the key back the layer queues the request with it, in one
//! transaction, and answers 202 — and a later request with the key, while the operation waits, gets the same
//! 202 instead of 409.
//!
//! When the queue write fails the store is asked whether it landed all the same: queued, the caller gets the 202;
//! not, the key is given back and the caller told the store failed (503, retry with the same key). The give-back
//! is safe even if the write lands later: a deferral moves the record to a token of the operation's own, so the
//! give-back is refused, the operation runs once, and the caller's retry with the key finds it.

use std::time::Duration;

use axum::body::Body;
use ballast_store::{NewOperation, Scope, StoreError};
use http::Response;

use super::deferred::{Defer, StoredRequest, accepted};
use super::layer::Settings;
use super::problem::Problem;
use super::settle::{HeldClaim, KeepAlive, Sent, Settlement, finish};
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
    // The claim's lease is renewed until the write is decided: a store slow to take it must not let the key's
    // lease run out under a retry (which would call a call that never acted `outcome_unknown`). A renewal that
    // arrives after the deferral is refused (the record has the operation's token by then) and changes nothing.
    let queue = deferred.queue();
    // Given the first write's wait even past the caller's deadline (a caller that can wait is owed the truth
    // more than the time): a deferral is answered 202 only once written.
    let wait = settings.first_write_wait;
    let written = tokio::time::timeout(wait, queue.defer(&claim.scope, claim.owner, &operation)).await;
    drop(renewing);
    let written = match written {
        Ok(written) => written,
        Err(_) => Err(StoreError::unavailable(format!(
            "the deferral was not decided within {wait:?}"
        ))),
    };
    let (to, answer) = sent;
    match written {
        Ok(operation) => {
            crate::metrics::deferred(&marker.queue, "deferred");
            deferred.wake();
            let _ = to.send(Ok(accepted(&operation, &deferred.location(&claim.scope))));
        }
        // Another request took the key over: nothing here is this request's to write.
        Err(StoreError::NotHeld) => {
            let _ = to.send(answer);
        }
        Err(error) => {
            // It may have landed all the same (a reply lost after the commit): the store says which. Queued, the
            // caller is told so; not, the key is given back (refused if the deferral landed after all: the record
            // has the operation's token) and the caller told to retry with it — never the handler's refusal,
            // which could say "do not retry" of a call that is about to run.
            tracing::warn!(scope = ?claim.scope, %error, "could not defer the request");
            let found = tokio::time::timeout(settings.first_write_wait, queue.lookup(&claim.scope)).await;
            if let Ok(Ok(Some(operation))) = found
                && !operation.state.is_finished()
            {
                let _ = to.send(Ok(accepted(&operation, &deferred.location(&claim.scope))));
                return;
            }
            let _ = answer;
            let unavailable = Ok(Problem::StoreUnavailable.into_response());
            finish(
                claim,
                claim.keep_alive(),
                Settlement::Release,
                Some((to, unavailable)),
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
    waits(&operation).then(|| accepted(&operation, &deferred.location(scope)))
}

/// Whether `operation` still holds its key: not ended, and within its ttl. Past it, a live request may take the
/// record over once its grace is out, and the record, not the operation, says what the key did.
pub(super) fn waits(operation: &ballast_store::Operation) -> bool {
    !operation.state.is_finished() && !operation.expires_in.is_zero()
}
