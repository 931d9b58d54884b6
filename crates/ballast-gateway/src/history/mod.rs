//! The last 15 minutes of each target's calls, retries and sheds, for `/status` (`history`, `failures`) and the
//! dashboard's charts: an operator who opens the page at 2 a.m. sees what happened before, not an empty chart.
//!
//! Why read the Prometheus recorder and not count again: the request path already counts every call, retry and
//! shed once (`ballast::metrics`); a background task renders the recorder every [`INTERVAL`] and keeps the
//! differences (`ring`), so keeping a history costs a request nothing. A gateway without a recorder (the library's
//! `app` alone, as a test builds it) has no history: `/status` says `null` (`admin`).

mod ring;
mod totals;

use std::sync::{Arc, Mutex};

use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::Value;

use ring::{INTERVAL, Ring};
use totals::Totals;

/// The history, shared by the task that records it and `/status`.
#[derive(Clone, Debug, Default)]
pub(crate) struct History {
    ring: Arc<Mutex<Ring>>,
}

impl History {
    fn record(&self, totals: Totals) {
        let now = ballast::clock::now();
        self.ring
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .record(totals, now);
    }

    fn read<T>(&self, read: impl FnOnce(&Ring) -> T) -> T {
        read(&self.ring.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }

    /// `/status`'s `history`: per target, one point per interval, oldest first (`ring`'s `to_json`).
    pub(crate) fn to_json(&self) -> Value {
        let now = ballast::clock::now();
        self.read(|ring| ring.to_json(now))
    }

    /// `/status`'s `failures`: the calls that failed in the last 15 minutes by target and code, the latest first.
    pub(crate) fn failures_json(&self) -> Value {
        let now = ballast::clock::now();
        self.read(|ring| ring.failures_json(now))
    }
}

/// Reads the counters of `handle` every [`INTERVAL`] into `history`, until dropped (`serve` runs it beside its
/// other tasks and aborts it when serving ends).
pub(crate) async fn record(history: History, handle: PrometheusHandle) {
    let mut every = tokio::time::interval(INTERVAL);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first tick is at once: the first interval ends one INTERVAL after the start.
    every.tick().await;
    loop {
        every.tick().await;
        history.record(Totals::parse(&handle.render()));
    }
}
