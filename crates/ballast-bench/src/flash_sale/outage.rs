//! The dead-upstream measures of a run (`dead-upstream:*` scenarios): from the outage's start until conversations
//! fail fast, and from its end until they succeed again — each the worst over a strategy's runs.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{DEADLINE_SLACK, FAST_FAILURE, Record, Run};

/// The largest of a dead-upstream measure over the runs (`None` when any run never got there, or no run has an
/// outage).
pub(super) fn worst(runs: &[Run], measure: fn(&Run) -> Option<Option<Duration>>) -> Option<Duration> {
    let measured: Vec<Option<Duration>> = runs.iter().filter_map(measure).collect();
    if measured.is_empty() || measured.iter().any(Option::is_none) {
        return None;
    }
    measured.into_iter().flatten().max()
}

/// From the outage's start until the conversations started from then to the outage's end fail fast (in at most
/// 1 s, scaled): at least 95 % of them, and at least 80 % of those of every second — the rest are the probes a
/// breaker lets through and the attempts a throttle still admits, which are meant to reach the upstream; the
/// per-second rule keeps a slow second from hiding in a long outage's average. `None` for a run without an
/// outage; `Some(None)` when they never did.
pub(super) fn fail_fast_after(run: &Run) -> Option<Option<Duration>> {
    let (start, end) = run.outage?;
    let fast = FAST_FAILURE.mul_f64(run.time_scale);
    let second = Duration::from_secs(1).mul_f64(run.time_scale);
    let mut during: Vec<&Record> = run
        .records
        .iter()
        .filter(|record| start <= record.started && record.started < end)
        .collect();
    during.sort_by_key(|record| record.started);
    let failed_fast = |record: &&Record| !record.outcome.succeeded && record.took <= fast;
    let holds_from = |i: usize| {
        let rest = &during[i..];
        let overall = rest.iter().filter(|r| failed_fast(r)).count() as f64 >= 0.95 * rest.len() as f64;
        let from = rest[0].started;
        let mut seconds: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
        for record in rest {
            let bucket = ((record.started - from).as_secs_f64() / second.as_secs_f64()) as u32;
            let entry = seconds.entry(bucket).or_default();
            entry.0 += usize::from(failed_fast(record));
            entry.1 += 1;
        }
        overall
            && seconds
                .values()
                .all(|&(fast, all)| fast as f64 >= 0.8 * all as f64)
    };
    Some(
        (0..during.len())
            .find(|&i| holds_from(i))
            .map(|i| (during[i].started - start).div_f64(run.time_scale)),
    )
}

/// From the outage's end until at least 99 % of the conversations started from then on succeed.
pub(super) fn recovered_after(run: &Run) -> Option<Option<Duration>> {
    let (_, end) = run.outage?;
    let mut after: Vec<&Record> = run
        .records
        .iter()
        .filter(|record| record.started >= end)
        .collect();
    after.sort_by_key(|record| record.started);
    let within = |record: &Record| record.outcome.succeeded && record.took <= run.deadline + DEADLINE_SLACK;
    // The earliest start from which the rest succeed at 99 % or more.
    let mut succeeded_after = 0;
    let mut found = None;
    for (i, record) in after.iter().enumerate().rev() {
        succeeded_after += usize::from(within(record));
        let count = after.len() - i;
        if succeeded_after as f64 >= 0.99 * count as f64 {
            found = Some((record.started - end).div_f64(run.time_scale));
        }
    }
    Some(found)
}
