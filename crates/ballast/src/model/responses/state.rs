//! Which deployment keeps the state a Responses request refers to (DESIGN.md, "Fallback and context").
//!
//! A provider keeps a response it made (unless `store: false`) and a conversation's items, and only that provider
//! can continue them: a request with `previous_response_id` sent to another deployment fails, or worse, a
//! compatible one answers without the context. So every response made through a route is recorded — its id, the
//! deployment that made it — and a request that names one (`previous_response_id`, `conversation`), like a
//! retrieve, delete or cancel of it, goes to that deployment only, with no fallback to another provider: its
//! retries, breaker and deadline as usual, and its error as the answer when it cannot serve.
//!
//! Records are kept per owner (the gateway's principal): one owner can never reach a response another made
//! through the same gateway. A deployment is recorded by its base URL and model, not its place in the route,
//! so a config that reorders its deployments still finds each response's home.
//!
//! Where records live ([`StateRecords`]): in the idempotency store for the store's retention when there is one
//! ([`StoreStateRecords`], what the gateway uses: one store, one retention, records that outlive a restart and are
//! shared by every instance on the same PostgreSQL or Redis), else in memory ([`MemoryStateRecords`], bounded,
//! the newest kept: a library user without a store).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use ballast_core::Instant;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::clock;

/// Provider state a request may refer to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StateId {
    /// A response (`resp_...`): `previous_response_id`, or the id of a retrieve, delete or cancel.
    Response(String),
    /// A conversation (`conv_...`).
    Conversation(String),
}

impl StateId {
    /// The record's key: `response:<id>`, `conversation:<id>`.
    pub fn key(&self) -> String {
        match self {
            StateId::Response(id) => format!("response:{id}"),
            StateId::Conversation(id) => format!("conversation:{id}"),
        }
    }

    /// The id as the provider knows it.
    pub fn id(&self) -> &str {
        match self {
            StateId::Response(id) | StateId::Conversation(id) => id,
        }
    }
}

impl fmt::Display for StateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateId::Response(id) => write!(f, "response {id:?}"),
            StateId::Conversation(id) => write!(f, "conversation {id:?}"),
        }
    }
}

/// The deployment that keeps some state: its base URL, model and account, as configured — what tells two
/// deployments apart when they differ only in their key (two accounts of one provider, for more quota).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StateHome {
    /// The deployment's `base_url`.
    pub base_url: String,
    /// The deployment's `model`.
    pub model: String,
    /// Its key: `env:<variable>` for a key named by its variable (a rotated key keeps its state), `key:<digest>`
    /// for one given as a value (the first 16 hex digits of a SHA-256), none without a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
}

/// A record of where state lives could not be written or read (declared with the call's errors, which carry it).
pub use crate::client::StateRecordError;

/// Where the records of which deployment keeps which state live (module docs).
pub trait StateRecords: Send + Sync + fmt::Debug {
    /// Records that `home` keeps `id` for `owner`. A record that exists already is kept (state has one home).
    fn record<'a>(
        &'a self,
        owner: &'a str,
        id: &'a StateId,
        home: &'a StateHome,
    ) -> BoxFuture<'a, Result<(), StateRecordError>>;

    /// Where `id` lives for `owner`, if it was recorded and is still kept.
    fn find<'a>(
        &'a self,
        owner: &'a str,
        id: &'a StateId,
    ) -> BoxFuture<'a, Result<Option<StateHome>, StateRecordError>>;
}

/// Records in memory: at most `capacity` (the oldest go first), each for `retention` — for a library user without
/// a store. Lost with the process.
#[derive(Debug)]
pub struct MemoryStateRecords {
    capacity: usize,
    retention: Duration,
    records: Mutex<Records>,
}

#[derive(Debug, Default)]
struct Records {
    by_key: HashMap<(String, String), (StateHome, Instant)>,
    /// Keys by age, oldest first.
    order: VecDeque<(String, String)>,
}

impl MemoryStateRecords {
    /// What a client keeps without a store: 100,000 records, each for 24 hours (the store's default retention).
    pub const DEFAULT_CAPACITY: usize = 100_000;

    /// Records of at most `capacity` states, each kept `retention`.
    pub fn new(capacity: usize, retention: Duration) -> Self {
        MemoryStateRecords {
            capacity: capacity.max(1),
            retention,
            records: Mutex::new(Records::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn put(&self, owner: &str, id: &StateId, home: &StateHome) {
        let key = (owner.to_owned(), id.key());
        let now = clock::now();
        let mut records = self.lock();
        if records.by_key.get(&key).is_some_and(|(_, until)| now < *until) {
            return;
        }
        if records
            .by_key
            .insert(key.clone(), (home.clone(), now + self.retention))
            .is_none()
        {
            records.order.push_back(key);
        }
        while records.by_key.len() > self.capacity {
            let Some(oldest) = records.order.pop_front() else {
                break;
            };
            records.by_key.remove(&oldest);
        }
    }

    fn get(&self, owner: &str, id: &StateId) -> Option<StateHome> {
        let now = clock::now();
        let records = self.lock();
        let (home, until) = records.by_key.get(&(owner.to_owned(), id.key()))?;
        (now < *until).then(|| home.clone())
    }
}

impl Default for MemoryStateRecords {
    fn default() -> Self {
        Self::new(
            Self::DEFAULT_CAPACITY,
            ballast_config::StoreConfig::default().retention,
        )
    }
}

impl StateRecords for MemoryStateRecords {
    fn record<'a>(
        &'a self,
        owner: &'a str,
        id: &'a StateId,
        home: &'a StateHome,
    ) -> BoxFuture<'a, Result<(), StateRecordError>> {
        self.put(owner, id, home);
        Box::pin(std::future::ready(Ok(())))
    }

    fn find<'a>(
        &'a self,
        owner: &'a str,
        id: &'a StateId,
    ) -> BoxFuture<'a, Result<Option<StateHome>, StateRecordError>> {
        Box::pin(std::future::ready(Ok(self.get(owner, id))))
    }
}

#[cfg(feature = "idempotency")]
pub use in_store::StoreStateRecords;

#[cfg(feature = "idempotency")]
mod in_store {
    use std::sync::Arc;
    use std::time::Duration;

    use ballast_core::{IdempotencyKey, fingerprint};
    use ballast_store::{
        ClaimOutcome, ClaimRequest, ExpiredDispatch, IdempotencyStore, OwnerToken, RecordState, Scope,
        StoredResponse,
    };
    use futures::future::BoxFuture;

    use super::{StateHome, StateId, StateRecordError, StateRecords};
    use crate::BoxError;

    /// The route of every record in the store: no tool or model route is named so (`:` is not allowed in one).
    const ROUTE: &str = "ballast:provider-state";
    /// How long a record's claim is held before it is completed (a moment: both writes are one after the other).
    const LEASE: Duration = Duration::from_secs(10);

    /// Records in the idempotency store, kept for its retention: each one a completed record under its own route,
    /// its body the home. Why the idempotency store and not a table of its own: one store to configure and run,
    /// one retention, and every backend's atomicity and expiry as its conformance suite pins them — a record is
    /// written once (the first home stays) and read by key, which the claim and lookup already do.
    #[derive(Debug, Clone)]
    pub struct StoreStateRecords {
        store: Arc<dyn IdempotencyStore>,
    }

    impl StoreStateRecords {
        /// Records in `store`.
        pub fn new(store: Arc<dyn IdempotencyStore>) -> Self {
            StoreStateRecords { store }
        }

        async fn put(&self, owner: &str, id: &StateId, home: &StateHome) -> Result<(), BoxError> {
            let scope = scope(owner, id)?;
            let body = serde_json::to_vec(home)?;
            let claim = ClaimRequest {
                fingerprint: fingerprint("PUT", ROUTE, Some("application/json"), &body)?,
                owner: OwnerToken::random(),
                lease: LEASE,
                expired_dispatch: ExpiredDispatch::TakeOver,
            };
            match self.store.claim(&scope, &claim).await? {
                ClaimOutcome::Acquired | ClaimOutcome::TookOver { .. } => {
                    let stored = StoredResponse {
                        status: 200,
                        headers: Vec::new(),
                        body: body.into(),
                    };
                    self.store.complete(&scope, claim.owner, &stored).await?;
                }
                // Recorded already (the first home stays), or being recorded right now.
                _ => {}
            }
            Ok(())
        }

        async fn get(&self, owner: &str, id: &StateId) -> Result<Option<StateHome>, BoxError> {
            let Some(record) = self.store.lookup(&scope(owner, id)?).await? else {
                return Ok(None);
            };
            match record.state {
                RecordState::Completed(stored) => Ok(Some(serde_json::from_slice(&stored.body)?)),
                _ => Ok(None),
            }
        }
    }

    fn scope(owner: &str, id: &StateId) -> Result<Scope, BoxError> {
        Ok(Scope::new(owner, ROUTE, IdempotencyKey::parse(&id.key())?))
    }

    impl StateRecords for StoreStateRecords {
        fn record<'a>(
            &'a self,
            owner: &'a str,
            id: &'a StateId,
            home: &'a StateHome,
        ) -> BoxFuture<'a, Result<(), StateRecordError>> {
            Box::pin(async move {
                self.put(owner, id, home)
                    .await
                    .map_err(|source| StateRecordError {
                        id: id.to_string(),
                        action: "written",
                        source,
                    })
            })
        }

        fn find<'a>(
            &'a self,
            owner: &'a str,
            id: &'a StateId,
        ) -> BoxFuture<'a, Result<Option<StateHome>, StateRecordError>> {
            Box::pin(async move {
                self.get(owner, id).await.map_err(|source| StateRecordError {
                    id: id.to_string(),
                    action: "read",
                    source,
                })
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(model: &str) -> StateHome {
        StateHome {
            base_url: "http://a/v1".into(),
            model: model.into(),
            account: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn records_are_per_owner_first_home_wins_bounded_and_expire() {
        let records = MemoryStateRecords::new(2, Duration::from_secs(60));
        let (a, b, c) = (
            StateId::Response("resp_a".into()),
            StateId::Response("resp_b".into()),
            StateId::Conversation("conv_c".into()),
        );
        records.record("alice", &a, &home("m1")).await.unwrap();
        records.record("alice", &a, &home("m2")).await.unwrap();
        assert_eq!(records.find("alice", &a).await.unwrap(), Some(home("m1")));
        assert_eq!(records.find("bob", &a).await.unwrap(), None, "another owner's");
        records.record("alice", &b, &home("m1")).await.unwrap();
        records.record("alice", &c, &home("m1")).await.unwrap();
        assert_eq!(records.find("alice", &a).await.unwrap(), None, "the oldest went");
        assert!(records.find("alice", &c).await.unwrap().is_some());
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(
            records.find("alice", &c).await.unwrap(),
            None,
            "past its retention"
        );
    }

    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn records_in_the_store_are_per_owner_and_the_first_home_wins() {
        let store = ballast_store::open("sqlite::memory:", ballast_store::StoreOptions::default())
            .await
            .unwrap();
        let records = StoreStateRecords::new(store);
        let id = StateId::Response("resp_1".into());
        assert_eq!(records.find("alice", &id).await.unwrap(), None);
        records.record("alice", &id, &home("m1")).await.unwrap();
        records.record("alice", &id, &home("m2")).await.unwrap();
        assert_eq!(records.find("alice", &id).await.unwrap(), Some(home("m1")));
        assert_eq!(records.find("bob", &id).await.unwrap(), None);
    }
}
