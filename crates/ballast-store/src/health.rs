//! [`CheckedStore`]: a store whose health is checked, not assumed.
//!
//! The store under it is probed ([`IdempotencyStore::check`]) by whoever runs the probes — the gateway, every
//! second and on each `/status` — and the last probe's result is its health. While the last probe failed, a claim
//! is refused at once as the store's unavailability (a side effect fails closed: nothing runs), instead of
//! reaching a store known to be gone — a black-holed server would hold each claim for the caller's whole time
//! left. Every other operation goes through: a final write after the upstream answered must keep trying, and a
//! lookup that works is a true answer. The first probe that passes again lifts the refusal.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use crate::{
    ClaimOutcome, ClaimRequest, IdempotencyStore, OwnerToken, Record, Scope, StoreError, StoredResponse,
};

/// The last probe of a [`CheckedStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreHealth {
    /// Whether the last probe passed (before any probe: the store opened, so yes).
    pub healthy: bool,
    /// Why the last probe failed.
    pub error: Option<String>,
}

/// A store and the result of its last probe (module docs).
#[derive(Debug)]
pub struct CheckedStore {
    inner: Arc<dyn IdempotencyStore>,
    health: RwLock<StoreHealth>,
}

impl CheckedStore {
    /// `inner`, healthy until a probe says otherwise.
    pub fn new(inner: Arc<dyn IdempotencyStore>) -> Self {
        CheckedStore {
            inner,
            health: RwLock::new(StoreHealth {
                healthy: true,
                error: None,
            }),
        }
    }

    /// Probes the store, waiting at most `patience` for it, and keeps the result as its health.
    pub async fn probe(&self, patience: Duration) -> StoreHealth {
        let result = match tokio::time::timeout(patience, self.inner.check()).await {
            Ok(result) => result.map_err(|error| error.to_string()),
            Err(_) => Err(format!(
                "the store did not answer its probe within {} ms",
                patience.as_millis()
            )),
        };
        let health = StoreHealth {
            healthy: result.is_ok(),
            error: result.err(),
        };
        let mut current = self.health.write().unwrap_or_else(PoisonError::into_inner);
        if current.healthy != health.healthy {
            match &health.error {
                Some(error) => {
                    tracing::error!(%error, "the idempotency store failed its probe: side effects are refused until it is back")
                }
                None => {
                    tracing::info!("the idempotency store passes its probe again: side effects are served")
                }
            }
        }
        *current = health.clone();
        health
    }

    /// The last probe's result.
    pub fn health(&self) -> StoreHealth {
        self.health.read().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[async_trait::async_trait]
impl IdempotencyStore for CheckedStore {
    async fn claim(&self, scope: &Scope, claim: &ClaimRequest) -> Result<ClaimOutcome, StoreError> {
        let health = self.health();
        if !health.healthy {
            let why = health.error.unwrap_or_else(|| "its last probe failed".to_owned());
            return Err(StoreError::unavailable(why));
        }
        self.inner.claim(scope, claim).await
    }

    async fn mark_dispatched(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        self.inner.mark_dispatched(scope, owner).await
    }

    async fn renew(&self, scope: &Scope, owner: OwnerToken, lease: Duration) -> Result<(), StoreError> {
        self.inner.renew(scope, owner, lease).await
    }

    async fn complete(
        &self,
        scope: &Scope,
        owner: OwnerToken,
        response: &StoredResponse,
    ) -> Result<(), StoreError> {
        self.inner.complete(scope, owner, response).await
    }

    async fn mark_outcome_unknown(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        self.inner.mark_outcome_unknown(scope, owner).await
    }

    async fn release(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
        self.inner.release(scope, owner).await
    }

    async fn lookup(&self, scope: &Scope) -> Result<Option<Record>, StoreError> {
        self.inner.lookup(scope).await
    }

    async fn reap(&self) -> Result<u64, StoreError> {
        self.inner.reap().await
    }

    fn expires_records_itself(&self) -> bool {
        self.inner.expires_records_itself()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    async fn check(&self) -> Result<(), StoreError> {
        self.inner.check().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store whose probe fails while `broken` is set.
    #[derive(Debug)]
    struct Flaky {
        inner: Arc<dyn IdempotencyStore>,
        broken: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl IdempotencyStore for Flaky {
        async fn claim(&self, scope: &Scope, claim: &ClaimRequest) -> Result<ClaimOutcome, StoreError> {
            self.inner.claim(scope, claim).await
        }
        async fn mark_dispatched(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
            self.inner.mark_dispatched(scope, owner).await
        }
        async fn renew(&self, scope: &Scope, owner: OwnerToken, lease: Duration) -> Result<(), StoreError> {
            self.inner.renew(scope, owner, lease).await
        }
        async fn complete(
            &self,
            scope: &Scope,
            owner: OwnerToken,
            r: &StoredResponse,
        ) -> Result<(), StoreError> {
            self.inner.complete(scope, owner, r).await
        }
        async fn mark_outcome_unknown(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
            self.inner.mark_outcome_unknown(scope, owner).await
        }
        async fn release(&self, scope: &Scope, owner: OwnerToken) -> Result<(), StoreError> {
            self.inner.release(scope, owner).await
        }
        async fn lookup(&self, scope: &Scope) -> Result<Option<Record>, StoreError> {
            self.inner.lookup(scope).await
        }
        async fn reap(&self) -> Result<u64, StoreError> {
            self.inner.reap().await
        }
        fn backend(&self) -> &'static str {
            "flaky"
        }
        async fn check(&self) -> Result<(), StoreError> {
            if self.broken.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(StoreError::unavailable("the disk is gone"));
            }
            self.inner.check().await
        }
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn claims_are_refused_while_the_last_probe_failed_and_served_once_one_passes() {
        let sqlite = crate::SqliteStore::open("sqlite::memory:", crate::StoreOptions::default())
            .await
            .unwrap();
        let flaky = Arc::new(Flaky {
            inner: Arc::new(sqlite),
            broken: std::sync::atomic::AtomicBool::new(false),
        });
        let store = CheckedStore::new(Arc::clone(&flaky) as Arc<dyn IdempotencyStore>);
        let patience = Duration::from_secs(1);
        assert!(store.probe(patience).await.healthy);
        let claim = || crate::conformance::request("{}", Duration::from_secs(60));
        assert!(
            store
                .claim(&crate::conformance::fresh_scope(), &claim())
                .await
                .is_ok()
        );
        flaky.broken.store(true, std::sync::atomic::Ordering::SeqCst);
        let health = store.probe(patience).await;
        assert_eq!(
            health.error.as_deref(),
            Some("the idempotency store is unavailable: the disk is gone")
        );
        let refused = store
            .claim(&crate::conformance::fresh_scope(), &claim())
            .await
            .unwrap_err();
        assert!(refused.to_string().contains("the disk is gone"), "{refused}");
        // Lookups still answer: what the store says is true.
        assert!(store.lookup(&crate::conformance::fresh_scope()).await.is_ok());
        flaky.broken.store(false, std::sync::atomic::Ordering::SeqCst);
        assert!(store.probe(patience).await.healthy);
        assert!(
            store
                .claim(&crate::conformance::fresh_scope(), &claim())
                .await
                .is_ok()
        );
    }
}
