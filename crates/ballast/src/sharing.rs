//! [`Sharing`]: the state many gateway instances share through one store (runs, account limits), and what an
//! instance does while that store cannot be reached (DESIGN.md, "Many instances").
//!
//! Why a declared failure mode and not a silent one: a limiter that quietly becomes per-instance when its store
//! fails lets N instances send N times the account's limit (LiteLLM's users report exactly that). So every use
//! of the store goes through [`Sharing::ask`], which answers `None` at once while the store is known to be lost,
//! and each user says what `None` means: a run falls back to what the call's own headers say, a limit to the
//! instance's share (the limit divided by the instances seen alive lately) or to refusal, as configured — and
//! `/status` and `ballast_shared_state_reachable` say which mode this instance is in.
//!
//! Why a short patience: a store that black-holes requests must not hold every call of a run for the client's
//! connection timeout. An operation that takes longer than [`PATIENCE`] (or the call's time) is decided without
//! the store; one that fails loses the store at once, as does a heartbeat ([`Sharing::heartbeat`], every second
//! from the gateway) that fails or gets no answer in a second — and the next heartbeat that reaches it finds it
//! again.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ballast_store::{SharedState, StoreError};

/// The longest one operation on the shared store may take before the store counts as lost.
pub const PATIENCE: Duration = Duration::from_millis(250);
/// How long an instance counts as alive after its last heartbeat: many missed beats, so a slow second does not
/// halve every other instance's share.
pub const ALIVE_FOR: Duration = Duration::from_secs(30);

/// The shared store as runs and limits use it (module docs). Cheap to share (`Arc`).
#[derive(Debug)]
pub struct Sharing {
    state: Arc<dyn SharedState>,
    instance: String,
    reachable: AtomicBool,
    /// Instances seen alive at the last heartbeat that reached the store (this one included; at least 1).
    instances: AtomicU32,
    /// Why the store counts as lost, when it does.
    error: Mutex<Option<String>>,
    /// When an operation last went to the store while it counted as lost (ns on the clock).
    tried_lost: AtomicU64,
}

/// What [`Sharing::status`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharingStatus {
    /// Whether runs and limits are decided in the shared store now.
    pub reachable: bool,
    /// The instances seen alive lately (this one included).
    pub instances: u32,
    /// Why the store counts as lost.
    pub error: Option<String>,
    /// This instance's id in the store's list of live instances.
    pub instance: String,
}

impl Sharing {
    /// Sharing through `state`, this instance named by a new random id, reachable until an operation fails.
    pub fn new(state: Arc<dyn SharedState>) -> Self {
        Sharing {
            state,
            instance: uuid::Uuid::new_v4().to_string(),
            reachable: AtomicBool::new(true),
            instances: AtomicU32::new(1),
            error: Mutex::new(None),
            tried_lost: AtomicU64::new(0),
        }
    }

    /// The store's shared state.
    pub fn state(&self) -> &Arc<dyn SharedState> {
        &self.state
    }

    /// Whether the shared store is taken to work now.
    pub fn is_reachable(&self) -> bool {
        self.reachable.load(Ordering::Relaxed)
    }

    /// The instances seen alive at the last heartbeat that reached the store (at least 1).
    pub fn instances(&self) -> u32 {
        self.instances.load(Ordering::Relaxed).max(1)
    }

    /// What the last operations said: reachable or not, why, and the instances seen.
    pub fn status(&self) -> SharingStatus {
        SharingStatus {
            reachable: self.is_reachable(),
            instances: self.instances(),
            error: self.error.lock().unwrap_or_else(PoisonError::into_inner).clone(),
            instance: self.instance.clone(),
        }
    }

    /// Says this instance is alive and learns how many are; the one way a lost store is found again. Run every
    /// second by the gateway.
    pub async fn heartbeat(&self) {
        let beat = self.state.heartbeat(&self.instance, ALIVE_FOR);
        match tokio::time::timeout(PATIENCE * 4, beat).await {
            Ok(Ok(alive)) => {
                self.instances.store(alive.max(1), Ordering::Relaxed);
                self.found();
                crate::metrics::shared_state_reachable(true);
            }
            Ok(Err(error)) => self.lost(&error.to_string()),
            Err(_) => self.lost("the shared store did not answer a heartbeat in time"),
        }
    }

    /// `operation`'s answer while the store works, within `patience` (at most [`PATIENCE`]); `None` at once while
    /// the store is lost, when this operation is slower than that, and when it fails (the store then counts as
    /// lost until a heartbeat reaches it).
    pub async fn ask<T>(
        &self,
        patience: Duration,
        operation: impl Future<Output = Result<T, StoreError>>,
    ) -> Option<T> {
        if !self.is_reachable() && !self.try_while_lost() {
            return None;
        }
        match tokio::time::timeout(patience.min(PATIENCE), operation).await {
            Ok(Ok(answer)) => {
                // Reached: a store lost before is found again (without a heartbeat loop too: a library user's).
                self.found();
                Some(answer)
            }
            Ok(Err(error)) => {
                self.lost(&error.to_string());
                None
            }
            // Slow, not lost: this operation decides without the store (a busy PostgreSQL commits late under
            // load; flipping every instance's mode on one slow answer would make the modes flap). A store that
            // stays silent is lost at the next heartbeat, which waits longer.
            Err(_) => {
                tracing::debug!("the shared store did not answer in time: deciding without it this once");
                None
            }
        }
    }

    /// Whether an operation may go to the store while it counts as lost: one a second, so a store that is back
    /// is found by whoever uses it, heartbeat or not.
    fn try_while_lost(&self) -> bool {
        let now = crate::clock::now().as_nanos().max(1);
        let last = self.tried_lost.load(Ordering::Relaxed);
        now.saturating_sub(last) >= Duration::from_secs(1).as_nanos() as u64
            && self
                .tried_lost
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    fn lost(&self, why: &str) {
        if self.reachable.swap(false, Ordering::Relaxed) {
            tracing::warn!(
                error = why,
                "shared store lost: runs follow each call's own headers, limits their configured on_store_loss"
            );
        }
        *self.error.lock().unwrap_or_else(PoisonError::into_inner) = Some(why.to_owned());
        crate::metrics::shared_state_reachable(false);
    }

    fn found(&self) {
        if !self.reachable.swap(true, Ordering::Relaxed) {
            tracing::info!("shared store back: runs and limits are shared again");
            *self.error.lock().unwrap_or_else(PoisonError::into_inner) = None;
            crate::metrics::shared_state_reachable(true);
        }
    }
}
