//! The last write of a claim — complete, release or `outcome_unknown` — and its background retries.
//!
//! Why retry in the background: once the handler has acted, its answer belongs to the caller whatever the store
//! does, and the record must still end up saying what happened, or a retry could run the side effect again.
//! Until the write lands the record stays `dispatched`, so a retry meanwhile gets 409, never a second execution.
//! Writes are retried with jittered, capped backoff (AWS Builders' Library) until they land or the store says
//! [`StoreError::NotHeld`] (the lease ran out and another request took the record over, or the record is
//! gone): then nothing this request could write is true any more.

use std::sync::Arc;
use std::time::Duration;

use ballast_core::{Backoff, default_rng};
use ballast_store::{IdempotencyStore, OwnerToken, Scope, StoreError, StoredResponse};

/// How a claim ends.
#[derive(Debug)]
pub(crate) enum Settlement {
    /// The handler answered: store its response for replay.
    Complete(StoredResponse),
    /// The handler refused before acting ([`NotStored`](super::NotStored)): let a retry run.
    Release,
    /// The handler acted, or may have, and its outcome is lost.
    OutcomeUnknown,
}

/// A claim this request holds: where, and under which owner token.
#[derive(Debug)]
pub(crate) struct HeldClaim {
    pub(crate) store: Arc<dyn IdempotencyStore>,
    pub(crate) scope: Scope,
    pub(crate) owner: OwnerToken,
}

/// Whether the write needs no more tries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Written {
    /// It landed, or can never land (NotHeld, a record the store cannot read).
    Done,
    /// It failed or took too long: try again.
    Again,
}

impl HeldClaim {
    /// One try of `settlement`, given at most `wait`.
    pub(crate) async fn settle_once(&self, settlement: &Settlement, wait: Duration) -> Written {
        match tokio::time::timeout(wait, self.write(settlement)).await {
            Ok(Ok(())) => Written::Done,
            Ok(Err(StoreError::Unavailable(error))) => {
                tracing::warn!(scope = ?self.scope, %error, "idempotency write failed; retrying in the background");
                Written::Again
            }
            Ok(Err(error)) => {
                tracing::warn!(scope = ?self.scope, %error, "idempotency write refused; giving up");
                Written::Done
            }
            Err(_) => {
                tracing::warn!(scope = ?self.scope, ?wait, "idempotency write timed out; retrying in the background");
                Written::Again
            }
        }
    }

    /// Tries until the write is [`Written::Done`], sleeping a jittered `backoff` between tries; each try is given
    /// at most `wait`.
    pub(crate) async fn settle_until_done(&self, settlement: &Settlement, wait: Duration, backoff: Backoff) {
        let mut rng = default_rng(None);
        let mut previous = Duration::ZERO;
        let mut retry = 0u32;
        loop {
            previous = backoff.delay(retry, previous, &mut rng);
            tokio::time::sleep(previous).await;
            if self.settle_once(settlement, wait).await == Written::Done {
                return;
            }
            retry = retry.saturating_add(1);
        }
    }

    async fn write(&self, settlement: &Settlement) -> Result<(), StoreError> {
        let (store, scope, owner) = (&self.store, &self.scope, self.owner);
        match settlement {
            Settlement::Complete(response) => store.complete(scope, owner, response).await,
            Settlement::Release => store.release(scope, owner).await,
            Settlement::OutcomeUnknown => store.mark_outcome_unknown(scope, owner).await,
        }
    }
}
