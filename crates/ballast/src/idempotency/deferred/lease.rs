//! A worker's lease on the operation it holds, renewed every third of it until the worker lets go: a live worker
//! never loses its operation to another, and a killed one holds it for one short lease.

use std::sync::Arc;
use std::time::Duration;

use ballast_store::{DeferredQueue, OwnerToken, Scope, StoreError};

use crate::background;

/// The renewal of a worker's lease, running until dropped.
pub(super) struct Renewing(tokio::task::AbortHandle);

impl Drop for Renewing {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(super) fn renew(
    queue: Arc<dyn DeferredQueue>,
    scope: Scope,
    worker: OwnerToken,
    lease: Duration,
) -> Renewing {
    let every = lease / 3;
    let task = background::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match tokio::time::timeout(every, queue.renew(&scope, worker, lease)).await {
                Ok(Ok(())) => {}
                Ok(Err(StoreError::NotHeld)) => return,
                Ok(Err(error)) => {
                    tracing::warn!(?scope, %error, "deferred lease renewal failed; trying again")
                }
                Err(_) => tracing::warn!(?scope, "deferred lease renewal timed out; trying again"),
            }
        }
    });
    Renewing(task.abort_handle())
}
