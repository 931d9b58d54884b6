//! A run in the store many gateway instances share (DESIGN.md, "Many instances"): any instance serving a call of
//! the run sees the same deadline and spends from the same allowance.
//!
//! Why the hot path stays cheap: the deadline only ever moves earlier, so an instance that has read a run keeps
//! what it read, and asks the store again only when a call brings a deadline earlier than the store's (by more
//! than [`EARLIER_BY`]: an agent that sends what it has left on every call offers the same deadline again, a few
//! milliseconds later), or at the run's next call a second or more after its last read ([`READ_AGAIN_AFTER`]) —
//! so a deadline another instance learns reaches this one within a second (each call is bounded by its own
//! headers meanwhile), while a run costs at most one read a second per instance. The allowance is touched only when a retry is asked
//! for: each call adds its share locally, and the calls not yet reported travel with the next retry taken here.
//! A call counted on another instance reaches the store with that instance's next retry, so the shared
//! allowance can lag by a few calls' shares — it errs on the side of fewer retries.
//!
//! While the store is lost ([`Sharing`]), a run falls back to this instance's own view: the deadlines its calls
//! brought here and a local allowance, as a single instance has — never an error for the caller.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ballast_config::ServerConfig;
use ballast_core::{Deadline, Instant};
use ballast_store::{AllowanceRule, RunKey};

use super::{Run, RunOrigin, Runs};
use crate::sharing::{PATIENCE, Sharing};

/// How much earlier than the deadline an instance knows a call's own deadline must be to be written to the store.
pub(super) const EARLIER_BY: Duration = Duration::from_millis(10);
/// How long an instance trusts what it read of a run (its deadline, or that it has none) before its next call of
/// the run reads it again.
pub(super) const READ_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// The shared part of a [`Run`].
#[derive(Debug)]
pub(super) struct SharedRun {
    sharing: Arc<Sharing>,
    key: RunKey,
    rule: AllowanceRule,
    ttl: Duration,
    /// When this instance last read the run from the store (ns on the clock; 0: never).
    synced_at: AtomicU64,
    /// The run's deadline as the store last said (ns on the clock; 0: none, or not read yet).
    stored: AtomicU64,
    /// Calls of the run counted here and not yet reported to the store.
    unreported: AtomicU64,
    /// The retries the store said were left, at its last answer (`u64::MAX`: none yet).
    left: AtomicU64,
}

impl SharedRun {
    pub(super) fn new(sharing: Arc<Sharing>, key: RunKey, rule: AllowanceRule, ttl: Duration) -> Self {
        SharedRun {
            sharing,
            key,
            rule,
            ttl,
            synced_at: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            unreported: AtomicU64::new(0),
            left: AtomicU64::new(u64::MAX),
        }
    }

    pub(super) fn note_call(&self) {
        self.unreported.fetch_add(1, Ordering::Relaxed);
    }

    /// The retries left as the store last said, if it said.
    pub(super) fn left(&self) -> Option<u32> {
        let left = self.left.load(Ordering::Relaxed);
        (left != u64::MAX).then(|| u32::try_from(left).unwrap_or(u32::MAX))
    }
}

/// What [`Run::take_shared_retry`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SharedTake {
    /// The store gave the run a retry.
    Taken,
    /// The store says the run has none left.
    Spent,
    /// The store could not be asked: the caller decides with the local allowance.
    Lost,
}

impl Run {
    /// Whether the run's retries are decided in the shared store now.
    pub(crate) fn is_shared_now(&self) -> bool {
        self.shared
            .as_ref()
            .is_some_and(|shared| shared.sharing.is_reachable())
    }

    /// Brings the run's deadline in step with the store's, offering `offer` (a call's explicit deadline) when it
    /// is earlier than the one known here (module docs). A deadline read from the store gets `reserve` and
    /// `min_attempt`. Does nothing for a run that is not shared, or while the store is lost.
    pub(crate) async fn sync(
        &self,
        offer: Option<Deadline>,
        (reserve, min_attempt): (Duration, Duration),
        now: Instant,
    ) {
        let Some(shared) = &self.shared else { return };
        let known = self.deadline();
        // Compared with what the store is known to hold, not with this instance's own view: a deadline applied
        // here must still reach the others.
        let stored = shared.stored.load(Ordering::Relaxed);
        let stored = (stored != 0).then(|| Instant::from_nanos(stored));
        let earlier = match (offer, stored) {
            (Some(offer), Some(stored)) => offer.instant() + EARLIER_BY < stored,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let synced_at = shared.synced_at.load(Ordering::Relaxed);
        let fresh =
            synced_at != 0 && now.as_nanos().saturating_sub(synced_at) < READ_AGAIN_AFTER.as_nanos() as u64;
        if fresh && !earlier {
            return;
        }
        let offered = offer
            .filter(|_| earlier)
            .map(|offer| offer.instant().saturating_duration_since(now));
        let patience = known
            .or(offer)
            .map_or(PATIENCE, |deadline| deadline.remaining(now).min(PATIENCE));
        let visit = shared.sharing.state().visit_run(&shared.key, offered, shared.ttl);
        let Some(state) = shared.sharing.ask(patience, visit).await else {
            return;
        };
        shared.synced_at.store(now.as_nanos().max(1), Ordering::Relaxed);
        if let Some(ms) = state.deadline_in_ms {
            let at = if ms >= 0 {
                now + Duration::from_millis(ms.unsigned_abs())
            } else {
                Instant::from_nanos(
                    now.as_nanos()
                        .saturating_sub(Duration::from_millis(ms.unsigned_abs()).as_nanos() as u64),
                )
            };
            // The earliest wins here too: an answer overtaken by a later one never moves it back.
            let at_nanos = at.as_nanos().max(1);
            let _ = (shared.stored).fetch_update(Ordering::Relaxed, Ordering::Relaxed, |was| {
                (was == 0 || at_nanos < was).then_some(at_nanos)
            });
            self.offer_deadline(
                Deadline::at(at)
                    .with_reserve(reserve)
                    .with_min_attempt(min_attempt),
            );
        }
        let limit = shared.rule.limit(state.calls);
        shared
            .left
            .store(limit.saturating_sub(state.taken), Ordering::Relaxed);
    }

    /// Takes one retry from the run's allowance in the shared store, reporting the calls counted here since the
    /// last report; waits at most `patience`.
    pub(crate) async fn take_shared_retry(&self, patience: Duration) -> SharedTake {
        let Some(shared) = &self.shared else {
            return SharedTake::Lost;
        };
        let calls = shared.unreported.swap(0, Ordering::Relaxed);
        let take = shared
            .sharing
            .state()
            .take_run_retry(&shared.key, calls, shared.rule, shared.ttl);
        match shared.sharing.ask(patience, take).await {
            Some(took) => {
                shared.left.store(took.left, Ordering::Relaxed);
                if took.taken {
                    SharedTake::Taken
                } else {
                    SharedTake::Spent
                }
            }
            // Not counted again: a take that timed out may have landed, and under-counting errs toward fewer
            // retries, the safe side.
            None => SharedTake::Lost,
        }
    }

    /// Gives back a retry taken from the shared store that never went out, in the background (a refund must not
    /// hold the call).
    pub(crate) fn give_back_shared(&self) {
        let Some(shared) = &self.shared else { return };
        let sharing = Arc::clone(&shared.sharing);
        let key = shared.key.clone();
        if let Some(left) = shared.left() {
            shared.left.store(u64::from(left) + 1, Ordering::Relaxed);
        }
        crate::background::spawn(async move {
            let _ = sharing
                .ask(PATIENCE, sharing.state().give_back_run_retry(&key))
                .await;
        });
    }
}

impl Runs {
    /// The same registry keeping its runs in `sharing` too: every instance on that store sees one deadline and
    /// one allowance per run.
    pub fn with_sharing(mut self, sharing: Arc<Sharing>) -> Self {
        self.sharing = Some(sharing);
        self
    }

    /// The store the runs are shared through, if any.
    pub fn sharing(&self) -> Option<&Arc<Sharing>> {
        self.sharing.as_ref()
    }

    /// [`Runs::find`], then the run in step with the shared store ([`Run::sync`]), offering `offer` — a call's
    /// explicit deadline, the only kind that becomes a run's.
    pub async fn visit(
        &self,
        owner: Option<&str>,
        id: &str,
        offer: Option<Deadline>,
        server: &ServerConfig,
        now: Instant,
    ) -> (Arc<Run>, RunOrigin) {
        let (run, origin) = self.find(owner, id, now);
        run.sync(offer, (server.reserve, server.min_attempt), now).await;
        (run, origin)
    }
}
