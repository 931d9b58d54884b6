//! Runs: the calls of one agent request, grouped by a run id.
//!
//! Why: an agent request is many calls (model, tool, model, tool...), often made as separate HTTP requests from
//! Python or TypeScript. A run keeps, for all of them, the earliest deadline it was ever given — so one deadline
//! holds across the whole request — and one retry allowance (reference/002's "retry budget per request"):
//! by default 3 retries plus half a retry per call the run makes, for the whole run, not 3 per call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ballast_core::{Deadline, Instant, RunAllowance, TraceContext};

/// One run: its id, its earliest deadline and its shared retry allowance.
#[derive(Debug)]
pub struct Run {
    id: String,
    trace: TraceContext,
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
            trace: crate::trace::new_trace(),
            deadline: Mutex::new(None),
            allowance,
        }
    }

    /// The run id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The run's trace: every call of the run that was given no trace of its own sends its id upstream (in
    /// `traceparent`) and logs it as its request id, so one agent request is one trace.
    pub fn trace(&self) -> TraceContext {
        self.trace
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
///
/// A call finds its run with one hash lookup (no allocation once the run exists); a run idle for `ttl` is never
/// found again (it is replaced by a fresh one), and the forgotten runs are swept out of memory at most every
/// `ttl / 8`, by whichever call comes then — not scanned on every call.
#[derive(Debug)]
pub struct Runs {
    allowance: u32,
    per_call: f64,
    ttl: Duration,
    state: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    /// Each run and when it was last used.
    runs: HashMap<String, (Arc<Run>, Instant)>,
    /// When the idle runs were last swept out.
    swept: Instant,
}

impl Runs {
    /// A registry giving each new run a fixed `allowance` of retries and forgetting runs unused for `ttl`.
    pub fn new(allowance: u32, ttl: Duration) -> Self {
        Runs {
            allowance,
            per_call: 0.0,
            ttl,
            state: Mutex::new(Registry::default()),
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
        let ttl = self.ttl;
        let alive = |used: Instant| now.saturating_duration_since(used) < ttl;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if now.saturating_duration_since(state.swept) >= ttl / 8 {
            state.runs.retain(|_, (_, used)| alive(*used));
            state.swept = now;
        }
        if let Some((run, used)) = state.runs.get_mut(id)
            && alive(*used)
        {
            *used = (*used).max(now);
            return Arc::clone(run);
        }
        // Unknown, or idle too long: a fresh run (the old one's allowance and deadline are forgotten).
        let allowance = RunAllowance::with_share(self.allowance, self.per_call);
        let run = Arc::new(Run::with_allowance(id.to_owned(), allowance));
        state.runs.insert(id.to_owned(), (Arc::clone(&run), now));
        run
    }

    /// The run `id` of `owner` (the gateway's principal): two owners' runs with one id are two runs, so one
    /// caller can neither shorten nor spend another's. Without an owner, [`Runs::get`].
    pub fn get_owned(&self, owner: Option<&str>, id: &str, now: Instant) -> Arc<Run> {
        match owner {
            // `/` is not in a principal's name: the joined key is unambiguous.
            Some(owner) => self.get(&format!("{owner}/{id}"), now),
            None => self.get(id, now),
        }
    }

    /// Runs used within `ttl` whose deadline, if they have one, is still ahead at `now`: the agent requests that
    /// may still make calls.
    pub fn live(&self, now: Instant) -> usize {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .runs
            .values()
            .filter(|(run, used)| {
                now.saturating_duration_since(*used) < self.ttl
                    && run.deadline().is_none_or(|d| !d.is_expired(now))
            })
            .count()
    }

    /// How many runs are remembered (runs idle for `ttl` and not yet swept out included).
    pub fn len(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .runs
            .len()
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

    /// Idle runs are swept out at most every ttl/8, but one idle for ttl is never found again in between.
    #[test]
    fn an_idle_run_is_never_found_even_before_the_sweep() {
        let runs = Runs::new(3, Duration::from_secs(80));
        let at = Instant::from_millis;
        let a = runs.get("a", at(0));
        assert!(a.allowance().try_take());
        // A sweep at 75 s (ttl/8 = 10 s since the last): `a` was used 75 s ago, still alive.
        runs.get("b", at(75_000));
        // At 81 s no sweep is due (6 s since), yet `a`, idle 81 s, is a fresh run.
        assert_eq!(runs.get("a", at(81_000)).allowance().left(), 3);
        // Many runs used once, then a sweep long after: all but the last one gone.
        for i in 0..1000 {
            runs.get(&format!("r{i}"), at(100_000));
        }
        assert_eq!(runs.len(), 1002, "a, b and the thousand");
        runs.get("z", at(200_000));
        assert_eq!(runs.len(), 1);
    }
}
