//! A shared store in memory for in-process tests of many instances: the `SharedState` semantics (ballast-store's
//! conformance suite pins the real backends to them) on the test's paused clock, and switches that lose it or
//! make its reservations slow.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ballast::clock;
use ballast::idempotency::store::{
    AllowanceRule, Charge, Reservation, RetryTake, RunKey, RunState, SharedState, StoreError,
};

#[derive(Debug, Default)]
struct Runs {
    /// Deadline (µs on the clock), calls, taken.
    runs: HashMap<RunKey, (Option<f64>, u64, u64)>,
    tats: HashMap<String, f64>,
    instances: HashMap<String, f64>,
}

/// The store (module docs). Clones share it.
#[derive(Clone, Debug, Default)]
pub(crate) struct MemoryShared {
    state: Arc<Mutex<Runs>>,
    lost: Arc<AtomicBool>,
    slow: Arc<AtomicBool>,
}

fn now_us() -> f64 {
    clock::now().elapsed_since_origin().as_secs_f64() * 1e6
}

impl MemoryShared {
    /// Loses the store (every operation fails) or brings it back.
    pub(crate) fn lose(&self, lost: bool) {
        self.lost.store(lost, Ordering::SeqCst);
    }

    /// Makes each reservation answer a second late (a busy store), or on time again.
    pub(crate) fn slow(&self, slow: bool) {
        self.slow.store(slow, Ordering::SeqCst);
    }

    fn up(&self) -> Result<std::sync::MutexGuard<'_, Runs>, StoreError> {
        if self.lost.load(Ordering::SeqCst) {
            return Err(StoreError::unavailable("lost by the test"));
        }
        Ok(self.state.lock().unwrap())
    }
}

#[async_trait::async_trait]
impl SharedState for MemoryShared {
    async fn visit_run(
        &self,
        run: &RunKey,
        offer: Option<Duration>,
        _ttl: Duration,
    ) -> Result<RunState, StoreError> {
        let now = now_us();
        let mut state = self.up()?;
        let entry = state.runs.entry(run.clone()).or_default();
        if let Some(offer) = offer {
            let at = now + offer.as_secs_f64() * 1e6;
            entry.0 = Some(entry.0.map_or(at, |d| d.min(at)));
        }
        Ok(RunState {
            deadline_in_ms: entry.0.map(|d| ((d - now) / 1e3).floor() as i64),
            calls: entry.1,
            taken: entry.2,
        })
    }

    async fn take_run_retry(
        &self,
        run: &RunKey,
        calls: u64,
        rule: AllowanceRule,
        _ttl: Duration,
    ) -> Result<RetryTake, StoreError> {
        let mut state = self.up()?;
        let entry = state.runs.entry(run.clone()).or_default();
        entry.1 += calls;
        let limit = rule.limit(entry.1);
        let taken = entry.2 < limit;
        if taken {
            entry.2 += 1;
        }
        Ok(RetryTake {
            taken,
            left: limit.saturating_sub(entry.2),
        })
    }

    async fn give_back_run_retry(&self, run: &RunKey) -> Result<(), StoreError> {
        let mut state = self.up()?;
        if let Some(entry) = state.runs.get_mut(run) {
            entry.2 = entry.2.saturating_sub(1);
        }
        Ok(())
    }

    async fn reserve(&self, charges: &[Charge], max_wait: Duration) -> Result<Reservation, StoreError> {
        if self.slow.load(Ordering::SeqCst) {
            clock::sleep_until(clock::now() + Duration::from_secs(1)).await;
        }
        let now = now_us();
        let mut state = self.up()?;
        let all: Vec<_> = (charges.iter())
            .map(|c| (c.rate, state.tats.get(&c.key).copied().unwrap_or(0.0), c.cost))
            .collect();
        match ballast_core::reserve_all(&all, now, max_wait.as_secs_f64() * 1e6) {
            Ok((wait, tats)) => {
                for (charge, tat) in charges.iter().zip(tats) {
                    state.tats.insert(charge.key.clone(), tat);
                }
                Ok(Reservation::Granted(Duration::from_secs_f64(wait / 1e6)))
            }
            Err(wait) => Ok(Reservation::Refused(Duration::from_secs_f64(wait / 1e6))),
        }
    }

    async fn correct(&self, limit: &Charge, delta: f64) -> Result<(), StoreError> {
        let now = now_us();
        let mut state = self.up()?;
        let tat = state.tats.get(&limit.key).copied().unwrap_or(0.0);
        state
            .tats
            .insert(limit.key.clone(), limit.rate.correct(tat, now, delta));
        Ok(())
    }

    async fn heartbeat(&self, instance: &str, ttl: Duration) -> Result<u32, StoreError> {
        let now = now_us();
        let mut state = self.up()?;
        state.instances.insert(instance.to_owned(), now);
        let ttl = ttl.as_secs_f64() * 1e6;
        state.instances.retain(|_, seen| now - *seen < ttl);
        Ok(state.instances.len() as u32)
    }
}
