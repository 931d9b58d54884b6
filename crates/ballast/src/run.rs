//! Runs: the calls of one agent request, grouped by a run id.
//!
//! Why: an agent request is many calls (model, tool, model, tool...), often made as separate HTTP requests from
//! Python or TypeScript. A run keeps, for all of them, the earliest deadline it was ever given — so one deadline
//! holds across the whole request — and one retry allowance (reference/002's "retry budget per request"):
//! by default 3 retries plus half a retry per call the run makes, for the whole run, not 3 per call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ballast_core::{Deadline, Instant, RunAllowance};

/// One run: its id, its earliest deadline and its shared retry allowance.
#[derive(Debug)]
pub struct Run {
    id: String,
    deadline: Mutex<Option<Deadline>>,
    allowance: RunAllowance,
}

impl Run {
    /// A run with a fixed `allowance` of retries and no deadline yet.
    pub fn new(id: String, allowance: u32) -> Self {
        Run::with_allowance(id, RunAllowance::new(allowance))
    }

    /// A run with `allowance` and no deadline yet.
    pub fn with_allowance(id: String, allowance: RunAllowance) -> Self {
        Run {
            id,
            deadline: Mutex::new(None),
            allowance,
        }
    }

    /// The run id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Records a deadline a call of the run was given; the run keeps the earliest. Returns the run's deadline.
    pub fn offer_deadline(&self, deadline: Deadline) -> Deadline {
        let mut current = self.deadline.lock().unwrap_or_else(PoisonError::into_inner);
        let earliest = current.map_or(deadline, |d| d.earliest(&deadline));
        *current = Some(earliest);
        earliest
    }

    /// The earliest deadline any call of the run was given, if any.
    pub fn deadline(&self) -> Option<Deadline> {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The retries left to all the calls of the run.
    pub fn allowance(&self) -> &RunAllowance {
        &self.allowance
    }
}

/// The runs of one process, by id, forgotten `ttl` after their last use.
#[derive(Debug)]
pub struct Runs {
    allowance: u32,
    per_call: f64,
    ttl: Duration,
    runs: Mutex<HashMap<String, (Arc<Run>, Instant)>>,
}

impl Runs {
    /// A registry giving each new run a fixed `allowance` of retries and forgetting runs unused for `ttl`.
    pub fn new(allowance: u32, ttl: Duration) -> Self {
        Runs {
            allowance,
            per_call: 0.0,
            ttl,
            runs: Mutex::new(HashMap::new()),
        }
    }

    /// The registry of a `[run]` configuration: `retry_allowance` retries per run plus
    /// `retry_allowance_per_call` per call the run makes, runs forgotten after `ttl`.
    pub fn of(config: &ballast_config::RunConfig) -> Self {
        Runs {
            per_call: config.retry_allowance_per_call,
            ..Runs::new(config.retry_allowance, config.ttl)
        }
    }

    /// The run `id`, created if unknown (or forgotten), used at `now`.
    pub fn get(&self, id: &str, now: Instant) -> Arc<Run> {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let ttl = self.ttl;
        runs.retain(|_, (_, used)| now.saturating_duration_since(*used) < ttl);
        let entry = runs.entry(id.to_owned()).or_insert_with(|| {
            let allowance = RunAllowance::with_share(self.allowance, self.per_call);
            (Arc::new(Run::with_allowance(id.to_owned(), allowance)), now)
        });
        entry.1 = now;
        Arc::clone(&entry.0)
    }

    /// How many runs are remembered.
    pub fn len(&self) -> usize {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether no run is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_keeps_the_earliest_deadline() {
        let run = Run::new("r".into(), 3);
        assert_eq!(run.deadline(), None);
        run.offer_deadline(Deadline::at(Instant::from_millis(500)));
        let kept = run.offer_deadline(Deadline::at(Instant::from_millis(900)));
        assert_eq!(kept.instant(), Instant::from_millis(500));
        run.offer_deadline(Deadline::at(Instant::from_millis(100)));
        assert_eq!(
            run.deadline().map(|d| d.instant()),
            Some(Instant::from_millis(100))
        );
    }

    #[test]
    fn the_registry_shares_a_run_by_id_and_forgets_idle_ones() {
        let runs = Runs::new(3, Duration::from_secs(60));
        let a = runs.get("a", Instant::from_millis(0));
        assert!(a.allowance().try_take());
        let again = runs.get("a", Instant::from_millis(10_000));
        assert_eq!(again.allowance().left(), 2, "the same run, the same allowance");
        let later = runs.get("b", Instant::from_millis(80_000));
        assert_eq!(later.allowance().left(), 3);
        assert_eq!(runs.len(), 1, "run a was idle for over a minute and is forgotten");
        assert_eq!(runs.get("a", Instant::from_millis(80_000)).allowance().left(), 3);
    }
}
