//! [`CheckedStore`]: a store whose health is checked, not assumed.
//!
//! The store under it is probed ([`IdempotencyStore::check`]) by whoever runs the probes — the gateway, every
//! second — and the probes' results are its health. While the store is unhealthy, a claim is refused at once as
//! the store's unavailability (a side effect fails closed: nothing runs), instead of reaching a store known to be
//! gone — a black-holed server would hold each claim for the caller's whole time left. Every other operation goes
//! through: a final write after the upstream answered must keep trying, and a lookup that works is a true answer.
//! The first probe that passes again lifts the refusal.
//!
//! A probe that fails says the store is unhealthy at once; one that is only slow does not, until
//! [`SLOW_PROBES`] in a row are: a SQLite probe waits behind the requests queued before it, and a busy store is
//! not a dead one (refusing every side effect because the store is busy would turn load into an outage). Results
//! are applied in the order their probes started, so a slow old probe that passes never hides a newer failure.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::{
    ClaimOutcome, ClaimRequest, IdempotencyStore, OwnerToken, Record, Scope, StoreError, StoredResponse,
};

/// What the probes of a [`CheckedStore`] said last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreHealth {
    /// Whether the store is taken to work (before any probe: the store opened, so yes).
    pub healthy: bool,
    /// Why not.
    pub error: Option<String>,
}

/// Probes in a row that get no answer within their patience before a slow store counts as unhealthy.
pub const SLOW_PROBES: u32 = 3;

/// A store and what its probes said (module docs).
#[derive(Debug)]
pub struct CheckedStore {
    inner: Arc<dyn IdempotencyStore>,
    state: Mutex<Probes>,
}

#[derive(Debug)]
struct Probes {
    health: StoreHealth,
    /// The number the next probe starts with, and the latest whose result was applied.
    next: u64,
    applied: u64,
    /// Probes in a row that got no answer in time.
    slow: u32,
}

impl CheckedStore {
    /// `inner`, healthy until a probe says otherwise.
    pub fn new(inner: Arc<dyn IdempotencyStore>) -> Self {
        CheckedStore {
            inner,
            state: Mutex::new(Probes {
                health: StoreHealth {
                    healthy: true,
                    error: None,
                },
                next: 1,
                applied: 0,
                slow: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Probes> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Probes the store, waiting at most `patience` for it, and applies the result (module docs); the health
    /// after it.
    pub async fn probe(&self, patience: Duration) -> StoreHealth {
        let number = {
            let mut state = self.lock();
            state.next += 1;
            state.next - 1
        };
        let result = tokio::time::timeout(patience, self.inner.check()).await;
        let mut state = self.lock();
        if number < state.applied {
            // A newer probe already spoke.
            return state.health.clone();
        }
        state.applied = number;
        let health = match result {
            Ok(Ok(())) => {
                state.slow = 0;
                StoreHealth {
                    healthy: true,
                    error: None,
                }
            }
            Ok(Err(error)) => {
                state.slow = 0;
                StoreHealth {
                    healthy: false,
                    error: Some(error.to_string()),
                }
            }
            Err(_) => {
                state.slow += 1;
                if state.slow < SLOW_PROBES {
                    return state.health.clone();
                }
                StoreHealth {
                    healthy: false,
                    error: Some(format!(
                        "the store answered none of its last {} probes within {} ms",
                        state.slow,
                        patience.as_millis()
                    )),
                }
            }
        };
        if state.health.healthy != health.healthy {
            match &health.error {
                Some(error) => tracing::error!(
                    %error,
                    "the idempotency store failed its probe: side effects are refused until it is back"
                ),
                None => {
                    tracing::info!("the idempotency store passes its probe again: side effects are served")
                }
            }
        }
        state.health = health.clone();
        health
    }

    /// What the probes said last.
    pub fn health(&self) -> StoreHealth {
        self.lock().health.clone()
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

    fn shared_state(&self) -> Option<Arc<dyn crate::SharedState>> {
        self.inner.shared_state()
    }

    fn deferred(&self) -> Option<Arc<dyn crate::DeferredQueue>> {
        self.inner.deferred()
    }

    async fn check(&self) -> Result<(), StoreError> {
        self.inner.check().await
    }
}

// In-memory SQLite stands under the store tested.
#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use std::sync::atomic::{AtomicU8, Ordering};

    use super::*;

    /// How the test store answers its probe.
    const WORKS: u8 = 0;
    const BROKEN: u8 = 1;
    const HANGS: u8 = 2;

    /// An in-memory SQLite store whose probe works, fails or never answers, as told; the rest is SQLite's (the
    /// checked store under test passes every other operation on, so only `claim` and `check` matter).
    #[derive(Debug)]
    struct Probed {
        inner: crate::SqliteStore,
        mode: AtomicU8,
    }

    #[async_trait::async_trait]
    impl IdempotencyStore for Probed {
        async fn claim(&self, scope: &Scope, claim: &ClaimRequest) -> Result<ClaimOutcome, StoreError> {
            self.inner.claim(scope, claim).await
        }
        async fn mark_dispatched(&self, _: &Scope, _: OwnerToken) -> Result<(), StoreError> {
            unreachable!("not used by these tests")
        }
        async fn renew(&self, _: &Scope, _: OwnerToken, _: Duration) -> Result<(), StoreError> {
            unreachable!("not used by these tests")
        }
        async fn complete(&self, _: &Scope, _: OwnerToken, _: &StoredResponse) -> Result<(), StoreError> {
            unreachable!("not used by these tests")
        }
        async fn mark_outcome_unknown(&self, _: &Scope, _: OwnerToken) -> Result<(), StoreError> {
            unreachable!("not used by these tests")
        }
        async fn release(&self, _: &Scope, _: OwnerToken) -> Result<(), StoreError> {
            unreachable!("not used by these tests")
        }
        async fn lookup(&self, scope: &Scope) -> Result<Option<Record>, StoreError> {
            self.inner.lookup(scope).await
        }
        async fn reap(&self) -> Result<u64, StoreError> {
            unreachable!("not used by these tests")
        }
        fn backend(&self) -> &'static str {
            "probed"
        }
        async fn check(&self) -> Result<(), StoreError> {
            match self.mode.load(Ordering::SeqCst) {
                WORKS => self.inner.check().await,
                BROKEN => Err(StoreError::unavailable("the disk is gone")),
                _ => std::future::pending().await,
            }
        }
    }

    async fn checked() -> (Arc<Probed>, CheckedStore) {
        let inner = crate::SqliteStore::open("sqlite::memory:", crate::StoreOptions::default())
            .await
            .unwrap();
        let probed = Arc::new(Probed {
            inner,
            mode: AtomicU8::new(WORKS),
        });
        let store = CheckedStore::new(Arc::clone(&probed) as Arc<dyn IdempotencyStore>);
        (probed, store)
    }

    fn claim() -> ClaimRequest {
        crate::conformance::request("{}", Duration::from_secs(60))
    }

    const PATIENCE: Duration = Duration::from_secs(1);

    #[tokio::test]
    async fn claims_are_refused_while_the_last_probe_failed_and_served_once_one_passes() {
        let (probed, store) = checked().await;
        assert!(store.probe(PATIENCE).await.healthy);
        assert!(
            store
                .claim(&crate::conformance::fresh_scope(), &claim())
                .await
                .is_ok()
        );
        probed.mode.store(BROKEN, Ordering::SeqCst);
        let health = store.probe(PATIENCE).await;
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
        probed.mode.store(WORKS, Ordering::SeqCst);
        assert!(store.probe(PATIENCE).await.healthy);
        assert!(
            store
                .claim(&crate::conformance::fresh_scope(), &claim())
                .await
                .is_ok()
        );
    }

    /// Regression (review): one probe that waited over a second behind queued work refused every side effect.
    #[tokio::test(start_paused = true)]
    async fn a_slow_store_is_unhealthy_only_after_several_slow_probes_in_a_row() {
        let (probed, store) = checked().await;
        probed.mode.store(HANGS, Ordering::SeqCst);
        for _ in 1..SLOW_PROBES {
            assert!(store.probe(PATIENCE).await.healthy, "slow, not dead");
        }
        let health = store.probe(PATIENCE).await;
        assert!(!health.healthy);
        assert!(health.error.unwrap().contains("none of its last 3 probes"));
        probed.mode.store(WORKS, Ordering::SeqCst);
        assert!(store.probe(PATIENCE).await.healthy);
    }
}
