//! An attempt's aftermath: the operation queued again or ended, with its record, in one write — retried with
//! backoff until it lands (the lease renewed meanwhile, so no other worker takes it as interrupted), then the
//! slots freed, idle workers woken, and, for an end, the metric and the [`Deferred`]'s hook.

use std::time::Duration;

use ballast_core::Backoff;
use ballast_core::deferred::Next;
use ballast_store::{Finish, Operation, OwnerToken, StoreError, StoredResponse};

use super::lease::Renewing;
use super::{Deferred, Ended};
use crate::clock;

/// What a worker holds while it writes an operation's end.
pub(super) struct End<'a> {
    pub(super) deferred: &'a Deferred,
    pub(super) operation: &'a Operation,
    pub(super) worker: OwnerToken,
    pub(super) renewing: Renewing,
    pub(super) slots: (
        tokio::sync::OwnedSemaphorePermit,
        tokio::sync::OwnedSemaphorePermit,
    ),
    /// When the worker took it.
    pub(super) taken_at: ballast_core::Instant,
}

/// The write `next` asks for.
enum Write {
    Again(Duration),
    Finish(Finish),
}

/// Writes what `next` says of the operation (`answer`: the attempt's, when it had one; `attempted`: the
/// attempt reached the upstream), then frees the slots.
pub(super) async fn end(ending: End<'_>, next: Next, answer: Option<StoredResponse>, attempted: bool) {
    let write = match (next, answer.clone()) {
        (Next::Retry { after }, _) => Write::Again(after),
        (Next::Complete, Some(answer)) => Write::Finish(Finish::Completed(answer)),
        (Next::Reject, Some(answer)) => Write::Finish(Finish::Rejected(answer)),
        // Success or refusal without an answer to keep: read as lost, which `read` never gives; be safe.
        (Next::Complete | Next::Reject | Next::OutcomeUnknown, _) => Write::Finish(Finish::OutcomeUnknown),
        (Next::GiveUp, last) => Write::Finish(Finish::GaveUp(last)),
        (Next::Expire, _) => Write::Finish(Finish::Expired),
    };
    let inner = &ending.deferred.inner;
    let scope = &ending.operation.scope;
    let backoff = Backoff::full_jitter(Duration::from_millis(100), Duration::from_secs(5)).expect("valid");
    let mut rng = ballast_core::default_rng(None);
    let mut tries: u32 = 0;
    let landed = loop {
        let queue = &inner.queue;
        let result = match &write {
            Write::Again(after) => {
                let last = answer.as_ref();
                let call = queue.reschedule(scope, ending.worker, *after, attempted, last);
                tokio::time::timeout(inner.lease / 3, call).await
            }
            Write::Finish(finish) => {
                tokio::time::timeout(
                    inner.lease / 3,
                    queue.finish(scope, ending.worker, finish, attempted),
                )
                .await
            }
        };
        match result {
            Ok(Ok(())) => break true,
            Ok(Err(StoreError::NotHeld)) => {
                // After a try whose answer was lost, the store may hold exactly what this write meant.
                if tries > 0 && already_written(inner, ending.operation, &write).await {
                    break true;
                }
                tracing::warn!(
                    ?scope,
                    "a deferred operation was taken over before its end was written"
                );
                break false;
            }
            Ok(Err(error)) => {
                tracing::warn!(?scope, %error, "could not write a deferred operation's end; retrying")
            }
            Err(_) => tracing::warn!(?scope, "writing a deferred operation's end timed out; retrying"),
        }
        tokio::time::sleep(backoff.delay(tries, Duration::ZERO, &mut rng)).await;
        tries = tries.saturating_add(1);
    };
    drop(ending.renewing);
    drop(ending.slots);
    inner.wake.notify_waiters();
    if !landed {
        return;
    }
    let queue = ending.operation.tool.as_str();
    let Write::Finish(finish) = write else {
        crate::metrics::deferred(queue, "retried");
        return;
    };
    let state = finish.state();
    crate::metrics::deferred(queue, state.as_str());
    let Some(hook) = &inner.on_end else {
        return;
    };
    let mut operation = ending.operation.clone();
    operation.state = state;
    operation.attempts = operation.attempts.saturating_add(u32::from(attempted));
    operation.last = finish.last().cloned();
    operation.due_in = Duration::ZERO;
    operation.took = Some(operation.age + clock::now().saturating_duration_since(ending.taken_at));
    hook(Ended { operation });
}

/// Whether the store already holds what `write` meant (an earlier try landed, its answer lost): the operation
/// queued again with no worker, or ended as `write` ends it.
async fn already_written(inner: &super::Inner, operation: &Operation, write: &Write) -> bool {
    let found = tokio::time::timeout(inner.lease / 3, inner.queue.lookup(&operation.scope)).await;
    let Ok(Ok(Some(now))) = found else {
        return false;
    };
    match write {
        Write::Again(_) => now.state == ballast_store::OperationState::Queued,
        Write::Finish(finish) => now.state == finish.state(),
    }
}
