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

#[cfg(feature = "idempotency")]
mod shared;
#[cfg(feature = "idempotency")]
pub(crate) use shared::SharedTake;

/// One run: its id, its earliest deadline and its shared retry allowance.
#[derive(Debug)]
pub struct Run {
    id: String,
    trace: TraceContext,
    deadline: Mutex<Option<Deadline>>,
    allowance: RunAllowance,
    /// The run in the store many instances share, when there is one (`run/shared.rs`).
    #[cfg(feature = "idempotency")]
    shared: Option<shared::SharedRun>,
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
            #[cfg(feature = "idempotency")]
            shared: None,
        }
    }

    /// Counts one call of the run (each logical call, however many attempts it makes): its allowance grows by
    /// its share — here, and in the shared store with the next retry this instance asks it for.
    pub fn note_call(&self) {
        self.allowance.note_call();
        #[cfg(feature = "idempotency")]
        if let Some(shared) = &self.shared {
            shared.note_call();
        }
    }

    /// The retries left to the run: the shared store's count as last read when the run is shared, else this
    /// process's.
    pub fn retries_left(&self) -> u32 {
        #[cfg(feature = "idempotency")]
        if let Some(left) = self.shared.as_ref().and_then(shared::SharedRun::left) {
            return left;
        }
        self.allowance.left()
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

/// The runs of one process, by owner and id, forgotten `ttl` after their last use — and, past their bounds, least
/// recently used first.
///
/// A call finds its run with two hash lookups (no allocation once the run exists); a run idle for `ttl` is never
/// found again (it is replaced by a fresh one), and the forgotten runs are swept out of memory at most every
/// `ttl / 8`, by whichever call comes then — not scanned on every call.
///
/// Why bounds: run ids are the caller's, so a caller that names a new one on every call (a bug, or a hostile
/// principal: 200 000 ids held ~130 MB for ten minutes) would grow the registry without end. At most
/// `max_runs_per_owner` runs are kept per owner and `max_runs` in all; a new run past either bound first evicts
/// the eighth of that owner's (or of all) runs used least recently — one scan for many evictions. An agent
/// request in progress uses its run every few seconds, so it is the last to go; and an owner's flood evicts its
/// own runs, never another's (until the total bound, where every owner's oldest go first). An evicted run that is
/// called again starts afresh — a new allowance, no deadline until a call brings one — and
/// [`Runs::find`] says so ([`RunOrigin::Restarted`]), so the caller can be told.
#[derive(Debug)]
pub struct Runs {
    allowance: u32,
    per_call: f64,
    ttl: Duration,
    max_runs: usize,
    max_per_owner: usize,
    state: Mutex<Registry>,
    /// The store many instances share, when the runs live there too (`run/shared.rs`).
    #[cfg(feature = "idempotency")]
    sharing: Option<Arc<crate::sharing::Sharing>>,
}

/// How [`Runs::find`] came by the run it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOrigin {
    /// The run was known: this call continues it.
    Known,
    /// A run never seen (or forgotten after `ttl` idle): this call starts it.
    New,
    /// A run the registry had evicted for want of room: this call starts it again, with a fresh allowance and
    /// without the deadline it had.
    Restarted,
}

/// The owner of runs named without one.
const NO_OWNER: &str = "";

#[derive(Debug, Default)]
struct Registry {
    /// Each owner's runs, each with when it was last used.
    owners: HashMap<String, HashMap<String, (Arc<Run>, Instant)>>,
    /// Runs in `owners`, all owners together.
    total: usize,
    /// When the idle runs were last swept out.
    swept: Instant,
    /// Digests of (owner, id) of runs evicted for room, oldest first, so a call of one is told it restarted it.
    evicted: Evicted,
    /// Runs evicted for room since the start.
    evicted_total: u64,
}

/// The digests of the runs evicted last: at most [`Evicted::CAPACITY`], the oldest forgotten first.
#[derive(Debug, Default)]
struct Evicted {
    order: std::collections::VecDeque<u64>,
    set: std::collections::HashSet<u64>,
}

impl Evicted {
    /// Enough to tell a restart for the runs of the last evictions (16 bytes and a little each).
    const CAPACITY: usize = 16_384;

    fn insert(&mut self, digest: u64) {
        if self.set.insert(digest) {
            self.order.push_back(digest);
        }
        while self.order.len() > Self::CAPACITY {
            if let Some(oldest) = self.order.pop_front() {
                self.set.remove(&oldest);
            }
        }
    }

    /// Whether `digest` was evicted (and forgets it: the run is back).
    fn take(&mut self, digest: u64) -> bool {
        self.set.remove(&digest)
    }
}

/// A digest of (owner, id), the same in every process (no random keys: a collision only mislabels one answer).
fn digest(owner: &str, id: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one((owner, id))
}

impl Runs {
    /// A registry giving each new run a fixed `allowance` of retries and forgetting runs unused for `ttl`, with
    /// the default bounds ([`RunConfig`](ballast_config::RunConfig)'s).
    pub fn new(allowance: u32, ttl: Duration) -> Self {
        let defaults = ballast_config::RunConfig::default();
        Runs {
            allowance,
            per_call: 0.0,
            ttl,
            max_runs: defaults.max_runs as usize,
            max_per_owner: defaults.max_runs_per_principal as usize,
            state: Mutex::new(Registry::default()),
            #[cfg(feature = "idempotency")]
            sharing: None,
        }
    }

    /// The registry of a `[run]` configuration: `retry_allowance` retries per run plus
    /// `retry_allowance_per_call` per call the run makes, runs forgotten after `ttl`, at most `max_runs` (and
    /// `max_runs_per_principal` per owner) kept.
    pub fn of(config: &ballast_config::RunConfig) -> Self {
        Runs {
            per_call: config.retry_allowance_per_call,
            max_runs: (config.max_runs as usize).max(1),
            max_per_owner: (config.max_runs_per_principal as usize).max(1),
            ..Runs::new(config.retry_allowance, config.ttl)
        }
    }

    /// The run `id`, created if unknown (or forgotten), used at `now`.
    pub fn get(&self, id: &str, now: Instant) -> Arc<Run> {
        self.find(None, id, now).0
    }

    /// The run `id` of `owner` (the gateway's principal): two owners' runs with one id are two runs, so one
    /// caller can neither shorten nor spend another's. Without an owner, [`Runs::get`].
    pub fn get_owned(&self, owner: Option<&str>, id: &str, now: Instant) -> Arc<Run> {
        self.find(owner, id, now).0
    }

    /// [`Runs::get_owned`], and whether the call continues the run, starts it, or starts it again after it was
    /// evicted for room.
    pub fn find(&self, owner: Option<&str>, id: &str, now: Instant) -> (Arc<Run>, RunOrigin) {
        let owner = owner.unwrap_or(NO_OWNER);
        let ttl = self.ttl;
        let alive = |used: Instant| now.saturating_duration_since(used) < ttl;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if now.saturating_duration_since(state.swept) >= ttl / 8 {
            state.sweep(alive);
            state.swept = now;
        }
        if let Some((run, used)) = state.owners.get_mut(owner).and_then(|runs| runs.get_mut(id))
            && alive(*used)
        {
            *used = (*used).max(now);
            return (Arc::clone(run), RunOrigin::Known);
        }
        // Unknown, or idle too long: a fresh run (the old one's allowance and deadline are forgotten).
        let allowance = RunAllowance::with_share(self.allowance, self.per_call);
        #[cfg_attr(not(feature = "idempotency"), allow(unused_mut))]
        let mut run = Run::with_allowance(id.to_owned(), allowance);
        #[cfg(feature = "idempotency")]
        if let Some(sharing) = &self.sharing {
            run.shared = Some(shared::SharedRun::new(
                Arc::clone(sharing),
                ballast_store::RunKey::new(owner, id),
                ballast_store::AllowanceRule {
                    base: self.allowance,
                    share: self.per_call,
                },
                ttl,
            ));
        }
        let run = Arc::new(run);
        let owned = state.owners.get(owner).map_or(0, HashMap::len);
        // The runs used least recently go first, runs idle past `ttl` among them (they are the oldest): no sweep
        // of everything per new run at the bound.
        if owned >= self.max_per_owner {
            state.evict(Some(owner), self.max_per_owner, alive);
        }
        if state.total >= self.max_runs {
            state.evict(None, self.max_runs, alive);
        }
        let origin = if state.evicted.take(digest(owner, id)) {
            RunOrigin::Restarted
        } else {
            RunOrigin::New
        };
        let runs = state.owners.entry(owner.to_owned()).or_default();
        if runs.insert(id.to_owned(), (Arc::clone(&run), now)).is_none() {
            state.total += 1;
        }
        (run, origin)
    }

    /// Runs used within `ttl` whose deadline, if they have one, is still ahead at `now`: the agent requests that
    /// may still make calls.
    pub fn live(&self, now: Instant) -> usize {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .owners
            .values()
            .flat_map(HashMap::values)
            .filter(|(run, used)| {
                now.saturating_duration_since(*used) < self.ttl
                    && run.deadline().is_none_or(|d| !d.is_expired(now))
            })
            .count()
    }

    /// How many runs are remembered (runs idle for `ttl` and not yet swept out included).
    pub fn len(&self) -> usize {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).total
    }

    /// Whether no run is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs evicted for room since the registry was made.
    pub fn evicted_total(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .evicted_total
    }

    /// The bounds: runs kept at most in all, and per owner.
    pub fn bounds(&self) -> (usize, usize) {
        (self.max_runs, self.max_per_owner)
    }
}

impl Registry {
    /// Forgets the runs that are no longer `alive`.
    fn sweep(&mut self, alive: impl Fn(Instant) -> bool) {
        for runs in self.owners.values_mut() {
            runs.retain(|_, (_, used)| alive(*used));
        }
        self.owners.retain(|_, runs| !runs.is_empty());
        self.total = self.owners.values().map(HashMap::len).sum();
    }

    /// Evicts the eighth (at least one) of `bound` runs used least recently, of `owner`'s runs or of all — never
    /// one with a call in flight (a call holds its run: a long stream's run is not forgotten under it). A run
    /// still `alive` is remembered as evicted, so its next call is told it restarted it; one idle past its ttl was
    /// forgotten anyway.
    fn evict(&mut self, owner: Option<&str>, bound: usize, alive: impl Fn(Instant) -> bool) {
        fn idle<'a>((id, (run, used)): (&'a String, &'a (Arc<Run>, Instant))) -> Option<(Instant, &'a str)> {
            (Arc::strong_count(run) == 1).then_some((*used, id.as_str()))
        }
        let mut candidates: Vec<(Instant, &str, &str)> = match owner {
            Some(owner) => (self.owners.get_key_value(owner).into_iter())
                .flat_map(|(owner, runs)| {
                    runs.iter()
                        .filter_map(idle)
                        .map(move |(used, id)| (used, owner.as_str(), id))
                })
                .collect(),
            None => (self.owners.iter())
                .flat_map(|(owner, runs)| {
                    runs.iter()
                        .filter_map(idle)
                        .map(move |(used, id)| (used, owner.as_str(), id))
                })
                .collect(),
        };
        let count = (bound / 8).clamp(1, candidates.len().max(1));
        if candidates.len() > count {
            candidates.select_nth_unstable_by_key(count - 1, |(used, _, _)| *used);
            candidates.truncate(count);
        }
        let victims: Vec<(String, String, bool)> = candidates
            .into_iter()
            .map(|(used, owner, id)| (owner.to_owned(), id.to_owned(), alive(used)))
            .collect();
        let mut evicted = 0;
        for (owner, id, alive) in victims {
            if let Some(runs) = self.owners.get_mut(&owner)
                && runs.remove(&id).is_some()
            {
                evicted += 1;
                if alive {
                    self.evicted.insert(digest(&owner, &id));
                }
                if runs.is_empty() {
                    self.owners.remove(&owner);
                }
            }
        }
        self.total -= evicted;
        self.evicted_total += evicted as u64;
        crate::metrics::runs_evicted(evicted as u64);
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

    fn bounded(max_runs: u32, per_owner: u32) -> Runs {
        Runs::of(&ballast_config::RunConfig {
            max_runs,
            max_runs_per_principal: per_owner,
            ..ballast_config::RunConfig::default()
        })
    }

    /// Regression: 200 000 distinct run ids from one principal were all kept (~130 MB for ten minutes).
    #[test]
    fn an_owners_flood_of_run_ids_evicts_its_own_least_recent_runs_never_anothers() {
        let runs = bounded(1_000, 100);
        let at = Instant::from_millis;
        // Neither run is held by a call in flight: only recency keeps them.
        assert!(
            runs.find(Some("victim"), "working", at(0))
                .0
                .allowance()
                .try_take()
        );
        assert!(runs.find(Some("flood"), "hot", at(0)).0.allowance().try_take());
        for i in 0..10_000u64 {
            runs.find(Some("flood"), &format!("r{i}"), at(i));
            // The flood's one run in use is used again and again: it stays.
            if i % 10 == 0 {
                runs.find(Some("flood"), "hot", at(i));
            }
            assert!(runs.len() <= 101, "bounded: {}", runs.len());
        }
        assert_eq!(
            runs.find(Some("victim"), "working", at(10_000)).1,
            RunOrigin::Known
        );
        assert_eq!(
            runs.get_owned(Some("victim"), "working", at(10_000))
                .allowance()
                .left(),
            2
        );
        let (hot_again, origin) = runs.find(Some("flood"), "hot", at(10_000));
        assert_eq!((origin, hot_again.allowance().left()), (RunOrigin::Known, 2));
        assert!(runs.evicted_total() >= 9_800, "{}", runs.evicted_total());
        // An evicted run called again starts afresh, and says so once.
        let (again, origin) = runs.find(Some("flood"), "r0", at(10_001));
        assert_eq!((origin, again.allowance().left()), (RunOrigin::Restarted, 3));
        assert_eq!(runs.find(Some("flood"), "r0", at(10_002)).1, RunOrigin::Known);
        assert_eq!(
            runs.find(Some("flood"), "never-seen", at(10_003)).1,
            RunOrigin::New
        );
    }

    /// Regression (review): a run whose call was still in flight (a long stream) could be evicted under it.
    #[test]
    fn a_run_with_a_call_in_flight_is_never_evicted() {
        let runs = bounded(100, 10);
        let at = Instant::from_millis;
        let (held, _) = runs.find(Some("a"), "streaming", at(0));
        for i in 0..1_000u64 {
            runs.find(Some("a"), &format!("r{i}"), at(1 + i));
        }
        let (again, origin) = runs.find(Some("a"), "streaming", at(2_000));
        assert_eq!(origin, RunOrigin::Known, "held by its call, it stayed");
        assert!(Arc::ptr_eq(&held, &again));
    }

    #[test]
    fn the_total_bound_holds_across_owners_least_recent_first() {
        let runs = bounded(100, 100);
        let at = Instant::from_millis;
        for i in 0..1_000u64 {
            runs.find(Some(&format!("owner-{}", i % 50)), &format!("r{i}"), at(i));
            assert!(runs.len() <= 100, "{}", runs.len());
        }
        // The newest runs are kept, the oldest went.
        assert_eq!(runs.find(Some("owner-49"), "r999", at(1_000)).1, RunOrigin::Known);
        assert_eq!(
            runs.find(Some("owner-0"), "r0", at(1_001)).1,
            RunOrigin::Restarted
        );
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
