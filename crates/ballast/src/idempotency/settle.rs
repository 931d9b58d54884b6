//! A held claim: its lease kept alive while the request runs, and its last write — complete, release or
//! `outcome_unknown` — with its background retries.
//!
//! Why retry in the background: once the handler has acted, its answer belongs to the caller whatever the store
//! does, and the record must still end up saying what happened, or a retry could run the side effect again.
//! Until the write lands the record stays `dispatched`, so a retry meanwhile gets 409, never a second execution.
//! Writes are retried with jittered, capped backoff (AWS Builders' Library) until they land or the store says
//! [`StoreError::NotHeld`] (the lease ran out and another request took the record over, or the record is
//! gone): then nothing this request could write is true any more. A release is retried the same way: a claim
//! given back because nothing ran must not stay `dispatched` (and so become `outcome_unknown` later).
//!
//! Why renew: the lease is short (DESIGN.md: 10 s) so a crashed holder blocks its key for seconds, and the
//! live holder renews it every third of it while its request runs, so a slow handler never loses its key to a
//! retry — which would answer `outcome_unknown` for a handler that is about to succeed, or run it twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ballast_core::{Backoff, Instant, default_rng};
use ballast_store::{IdempotencyStore, OwnerToken, Scope, StoreError, StoredResponse};

use ballast_core::Deadline;
use tokio::sync::oneshot;

use super::layer::Settings;
use crate::clock;

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

/// A claim this request holds: where, under which owner token, for how long a lease, since when, and until
/// when it is renewed.
#[derive(Debug)]
pub(crate) struct HeldClaim {
    pub(crate) store: Arc<dyn IdempotencyStore>,
    pub(crate) scope: Scope,
    pub(crate) owner: OwnerToken,
    pub(crate) lease: Duration,
    /// Just before the claim was sent: its lease runs from no earlier than this (the store may have taken the
    /// claim at once and been slow to say so).
    pub(crate) since: Instant,
    /// The last renewal: a handler still running then (past the longest deadline the layer grants) is treated
    /// as gone — its lease runs out, and its answer still settles the record if it ever comes.
    pub(crate) renew_until: Instant,
}

/// The renewal of a held claim's lease, running until dropped.
#[derive(Debug)]
pub(crate) struct KeepAlive {
    renewing: tokio::task::AbortHandle,
    /// Set when the guard is dropped: a renewal refused after that met the holder's own last write, not a
    /// take-over, and is not worth a warning.
    ended: Arc<AtomicBool>,
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        self.ended.store(true, Ordering::Release);
        self.renewing.abort();
    }
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
    /// Renews the lease every third of it, counted from [`since`](HeldClaim::since) (so the first renewal is
    /// due at once when the claim's reply was slow), until the guard is dropped or
    /// [`renew_until`](HeldClaim::renew_until). A renewal that fails is logged and tried again at the next tick
    /// (the holder keeps running: its last write settles the record when the store is back); one the store
    /// refuses (another request took the key over after the lease ran out) ends it.
    pub(crate) fn keep_alive(&self) -> KeepAlive {
        let (store, scope, owner, lease) = (
            Arc::clone(&self.store),
            self.scope.clone(),
            self.owner,
            self.lease,
        );
        let (since, until) = (self.since, self.renew_until);
        let ended = Arc::new(AtomicBool::new(false));
        let ended_seen = Arc::clone(&ended);
        let every = lease / 3;
        let renewing = crate::background::spawn(async move {
            let mut due = since + every;
            loop {
                if due > until {
                    tracing::warn!(scope = ?scope, "idempotency handler still running past the longest deadline; its lease is left to run out");
                    return;
                }
                tokio::time::sleep_until(clock::to_tokio(due)).await;
                due = clock::now() + every;
                match tokio::time::timeout(every, store.renew(&scope, owner, lease)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(StoreError::NotHeld)) => {
                        if !ended_seen.load(Ordering::Acquire) {
                            tracing::warn!(scope = ?scope, "idempotency lease lost: another request took the key over");
                        }
                        return;
                    }
                    Ok(Err(error)) => {
                        tracing::warn!(scope = ?scope, %error, "idempotency lease renewal failed; trying again");
                    }
                    Err(_) => {
                        tracing::warn!(scope = ?scope, "idempotency lease renewal timed out; trying again")
                    }
                }
            }
        });
        KeepAlive {
            renewing: renewing.abort_handle(),
            ended,
        }
    }

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
/// What the caller gets: the handler's answer, the handler's error, or the layer's problem.
pub(crate) type Answer<E> = Result<http::Response<axum::body::Body>, E>;

/// An answer and where it goes.
pub(crate) type Sent<E> = (oneshot::Sender<Answer<E>>, Answer<E>);

/// The record's last write, then the caller's answer (if it was not given yet): one try of `settlement`, given
/// the first-write wait but never past the caller's deadline minus the reserve, so a caller that retries right
/// after its answer finds the record final; then, if it did not land, the answer and tries in the background
/// until it does. The lease is renewed until the write lands (`renewing` is dropped then), so a retry meanwhile
/// is told "in progress", never run twice or told "outcome unknown".
pub(crate) async fn finish<E>(
    claim: &HeldClaim,
    renewing: KeepAlive,
    settlement: Settlement,
    answer: Option<Sent<E>>,
    settings: &Settings,
    deadline: &Deadline,
) {
    let wait = settings.first_write_wait.min(deadline.usable(clock::now()));
    // With no time left the caller is answered at once, and the first try comes after.
    let first = if wait.is_zero() {
        None
    } else {
        Some(claim.settle_once(&settlement, wait).await)
    };
    if let Some((to, answer)) = answer {
        let _ = to.send(answer);
    }
    let written = match first {
        Some(written) => written,
        None => claim.settle_once(&settlement, settings.first_write_wait).await,
    };
    if written == Written::Again {
        claim
            .settle_until_done(&settlement, settings.first_write_wait, settings.write_backoff)
            .await;
    }
    drop(renewing);
}
