//! The server's state: one *epoch* per profile.
//!
//! Everything a profile swap resets — the profile, the start time, the ledger, the stats, the attempt counters,
//! the idempotency keys and the capacity gates — lives in one [`Epoch`], and `POST /admin/profile` replaces the
//! whole epoch at once. A request holds the epoch it arrived in, so a request still running across a swap
//! finishes against its old epoch and never leaks into the new ledger or stats. Stored responses and
//! conversations are the server's, not the epoch's: a swap keeps them (a provider keeps its state whatever
//! faults it meets).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use tokio_util::sync::CancellationToken;

use super::capacity::CapacityGate;
use super::clock;
use super::ids::Ids;
use super::keys::Keys;
use super::ledger::Ledger;
use super::lock::lock;
use super::response_store::ResponseStore;
use super::stats::Stats;
use crate::Profile;

/// The shared state of the handlers.
#[derive(Clone, Debug)]
pub(crate) struct App(Arc<AppInner>);

#[derive(Debug)]
struct AppInner {
    epoch: RwLock<Arc<Epoch>>,
    stopping: CancellationToken,
    /// Stored responses and conversations: the server's, kept across profile swaps (see `responses::store`).
    responses: ResponseStore,
    /// The `request-id`s of Anthropic's answers.
    request_ids: Ids,
}

impl App {
    /// The state of a server serving `profile`; `stopping` fires when the server shuts down (hangs end then).
    pub(crate) fn new(profile: Profile, stopping: CancellationToken) -> App {
        App(Arc::new(AppInner {
            epoch: RwLock::new(Arc::new(Epoch::new(profile))),
            stopping,
            responses: ResponseStore::default(),
            request_ids: Ids::new("req_"),
        }))
    }

    /// The current epoch.
    pub(crate) fn epoch(&self) -> Arc<Epoch> {
        self.0
            .epoch
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Starts a new epoch serving `profile`: everything is reset and the start time is now.
    pub(crate) fn swap(&self, profile: Profile) {
        let epoch = Arc::new(Epoch::new(profile));
        *self.0.epoch.write().unwrap_or_else(PoisonError::into_inner) = epoch;
    }

    /// Fires when the server shuts down.
    pub(crate) fn stopping(&self) -> &CancellationToken {
        &self.0.stopping
    }

    /// The stored responses and conversations.
    pub(crate) fn responses(&self) -> &ResponseStore {
        &self.0.responses
    }

    /// A new `request-id` for an answer of the Messages API, unique per server.
    pub(crate) fn next_request_id(&self) -> String {
        self.0.request_ids.next()
    }
}

/// The state of one profile, from its start.
#[derive(Debug)]
pub(crate) struct Epoch {
    /// The fault profile.
    pub(crate) profile: Profile,
    /// When it started (outage windows are measured from it).
    pub(crate) started: tokio::time::Instant,
    /// Executions of side effects.
    pub(crate) ledger: Mutex<Ledger>,
    /// Request statistics (shared with the in-flight guards).
    pub(crate) stats: Arc<Mutex<Stats>>,
    /// Idempotency keys of the side-effecting tools.
    pub(crate) keys: Keys,
    attempts: Mutex<HashMap<(String, String), u32>>,
    gates: Mutex<HashMap<String, Arc<CapacityGate>>>,
}

impl Epoch {
    fn new(profile: Profile) -> Epoch {
        Epoch {
            profile,
            started: clock::now().instant,
            ledger: Mutex::default(),
            stats: Arc::default(),
            keys: Keys::default(),
            attempts: Mutex::default(),
            gates: Mutex::default(),
        }
    }

    /// Counts an attempt of `op` on `endpoint` and returns its number (1-based).
    pub(crate) fn count_attempt(&self, endpoint: &str, op: &str) -> u32 {
        let mut attempts = lock(&self.attempts);
        let count = attempts.entry((endpoint.to_owned(), op.to_owned())).or_insert(0);
        *count = count.saturating_add(1);
        *count
    }

    /// The capacity gate of `endpoint`, if its profile has a capacity limit (one gate per endpoint, also when the
    /// limit comes from `default`).
    pub(crate) fn gate(&self, endpoint: &str) -> Option<Arc<CapacityGate>> {
        let capacity = self.profile.endpoint(endpoint).capacity?;
        let mut gates = lock(&self.gates);
        let gate = gates
            .entry(endpoint.to_owned())
            .or_insert_with(|| Arc::new(CapacityGate::new(capacity)));
        Some(gate.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Capacity;

    #[test]
    fn attempts_are_counted_per_endpoint_and_op() {
        let app = App::new(Profile::default(), CancellationToken::new());
        let epoch = app.epoch();
        assert_eq!(epoch.count_attempt("model", "a"), 1);
        assert_eq!(epoch.count_attempt("model", "a"), 2);
        assert_eq!(epoch.count_attempt("model", "b"), 1);
        assert_eq!(epoch.count_attempt("create_refund", "a"), 1);
    }

    #[test]
    fn a_swap_starts_everything_afresh() {
        let app = App::new(Profile::default(), CancellationToken::new());
        let old = app.epoch();
        old.count_attempt("model", "a");
        lock(&old.ledger).record("create_refund", "a", None);
        app.swap(Profile {
            seed: 7,
            ..Profile::default()
        });
        let new = app.epoch();
        assert_eq!(new.profile.seed, 7);
        assert_eq!(new.count_attempt("model", "a"), 1);
        assert_eq!(lock(&new.ledger).view().totals.executions, 0);
        assert_eq!(
            lock(&old.ledger).view().totals.executions,
            1,
            "the old epoch is untouched"
        );
    }

    #[test]
    fn each_endpoint_gets_its_own_gate_from_the_default_capacity() {
        let mut profile = Profile::default();
        profile.default.capacity = Some(Capacity {
            concurrent: 1,
            queue: 0,
        });
        let app = App::new(profile, CancellationToken::new());
        let epoch = app.epoch();
        let model = epoch.gate("model").expect("a gate");
        let tool = epoch.gate("create_refund").expect("a gate");
        assert!(!Arc::ptr_eq(&model, &tool));
        assert!(Arc::ptr_eq(&model, &epoch.gate("model").expect("a gate")));
    }

    #[test]
    fn no_capacity_no_gate() {
        let app = App::new(Profile::default(), CancellationToken::new());
        assert!(app.epoch().gate("model").is_none());
    }
}
