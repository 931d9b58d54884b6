//! [`spawn_reaper`]: deletes expired records on a timer.

use std::sync::Arc;
use std::time::Duration;

use ballast_store::IdempotencyStore;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// Calls [`reap`](IdempotencyStore::reap) on `store` every `every` (at least 1 ms) until the returned task is
/// aborted — and, when the store keeps a deferred queue, the queue's own reap (ended operations past the
/// retention) and the end of operations nobody works past their ttl and grace
/// ([`expire_abandoned`](ballast_store::DeferredQueue::expire_abandoned)).
///
/// Expired records are already invisible (stores check retention on every read); reaping only keeps the store
/// from growing. A failed reap is logged and tried again at the next tick.
pub fn spawn_reaper(store: Arc<dyn IdempotencyStore>, every: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every.max(Duration::from_millis(1)));
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            match store.reap().await {
                Ok(reaped) => {
                    tracing::debug!(reaped, backend = store.backend(), "reaped idempotency records")
                }
                Err(error) => {
                    tracing::warn!(%error, backend = store.backend(), "reaping idempotency records failed")
                }
            }
            if let Some(queue) = store.deferred() {
                match queue.reap().await {
                    Ok(reaped) => tracing::debug!(reaped, "reaped ended deferred operations"),
                    Err(error) => tracing::warn!(%error, "reaping deferred operations failed"),
                }
                // Operations of a tool no instance works any more (renamed, removed) end once their ttl and its
                // grace are over, instead of waiting forever.
                match queue.expire_abandoned(ballast_store::RECORD_GRACE).await {
                    Ok(0) => {}
                    Ok(ended) => {
                        tracing::info!(ended, "ended deferred operations nobody worked past their ttl")
                    }
                    Err(error) => tracing::warn!(%error, "ending abandoned deferred operations failed"),
                }
            }
        }
    })
}
