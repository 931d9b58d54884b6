//! Many threads on one breaker.

use std::sync::Barrier;
use std::thread;

use super::*;

#[test]
fn breakers_and_permits_can_cross_threads() {
    fn shared<T: Send + Sync + 'static>() {}
    fn moved<T: Send + 'static>() {}
    shared::<CircuitBreaker>();
    moved::<Permit>();
    moved::<OwnedPermit>();
}

#[test]
fn concurrent_records_are_never_lost() {
    let b = breaker(no_jitter().failure_rate(None));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                for _ in 0..10_000 {
                    call(&b, CallResult::Success, at(0));
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let s = b.snapshot(at(0));
    // A thread descheduled between its permit and its result holds the others' results back; past the start
    // order's bound its call is skipped (counted nowhere), never lost silently.
    assert_eq!((s.window_calls + s.skipped, s.in_flight), (40_000, 0), "{s:?}");
}

#[test]
fn concurrent_probes_never_exceed_m() {
    let (b, now) = half_open_breaker(2, 2);
    let barrier = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (b, barrier) = (Arc::clone(&b), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                let permit = b.try_acquire(now).ok();
                barrier.wait(); // hold the permits until every thread has tried
                permit.is_some()
            })
        })
        .collect();
    let granted = threads
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|g| *g)
        .count();
    assert_eq!(granted, 2);
    assert_eq!(b.snapshot(now).probes_in_flight, 0, "every permit was dropped");
}

#[test]
fn a_mixed_concurrent_load_keeps_the_invariants() {
    let b = breaker(
        BreakerConfig::builder()
            .consecutive_failures(3)
            .min_calls(5)
            .open_for(Duration::from_millis(50)),
    );
    let threads: Vec<_> = (0..4u64)
        .map(|id| {
            let b = Arc::clone(&b);
            thread::spawn(move || {
                for i in 0..5_000u64 {
                    let now = at(i);
                    if let Ok(permit) = b.try_acquire(now) {
                        match (i + id) % 4 {
                            0 => drop(permit),
                            1 | 2 => _ = permit.record(CallResult::Failure, QUICK, now),
                            _ => _ = permit.record(CallResult::Success, QUICK, now),
                        }
                    }
                    assert!(b.snapshot(now).probes_in_flight <= 3);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let s = b.snapshot(at(5_000));
    assert!(
        s.transitions > 0,
        "two failures in three calls trip the rate trigger"
    );
    assert!(s.last_transition.unwrap().is_automatic());
}
