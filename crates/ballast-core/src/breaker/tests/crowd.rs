//! Crowds, not single calls: start order, overload answers, a burst with scattered failures, and the dead
//! upstreams a default breaker must still see (DESIGN.md, "Circuit breaker — a dead upstream, not a crowd").

use rand::{RngExt as _, SeedableRng};

use super::*;
use crate::DefaultRng;

/// A burst's fast failures finish before the slow successes that started with them: counted by start, they
/// wait for those successes, which reset the count.
#[test]
fn fast_failures_of_a_burst_wait_for_the_slow_successes_that_started_first() {
    let b = breaker(no_jitter().consecutive_failures(5).failure_rate(None));
    let slow: Vec<_> = (0..3).map(|_| b.try_acquire(at(0)).unwrap()).collect();
    let fast: Vec<_> = (0..20).map(|_| b.try_acquire(at(0)).unwrap()).collect();
    for permit in fast {
        assert_eq!(
            permit.record(CallResult::Failure, QUICK, at(5)),
            None,
            "held back"
        );
    }
    let s = b.snapshot(at(5));
    assert_eq!((s.state, s.in_flight, s.window_calls), (Closed, 3, 0));
    // The first-started answers: its success comes first in start order, then two more...
    let mut slow = slow.into_iter();
    slow.next().unwrap().record(CallResult::Success, QUICK, at(900));
    assert_eq!(
        b.snapshot(at(900)).window_calls,
        1,
        "the others started before the failures"
    );
    slow.next().unwrap().record(CallResult::Success, QUICK, at(950));
    // ...and once the last earlier call answers, the twenty failures count, in a row, after it.
    let t = slow
        .next()
        .unwrap()
        .record(CallResult::Success, QUICK, at(1000))
        .expect("twenty failures in a row by start");
    assert_eq!(t.reason, TransitionReason::ConsecutiveFailures(5));
}

#[test]
fn failures_after_every_earlier_call_answered_count_at_once() {
    let b = breaker(no_jitter().consecutive_failures(3).failure_rate(None));
    let early = b.try_acquire(at(0)).unwrap();
    early.record(CallResult::Success, QUICK, at(1));
    for ms in 2..4 {
        assert_eq!(call(&b, CallResult::Failure, at(ms)), None);
    }
    assert!(call(&b, CallResult::Failure, at(4)).is_some());
}

#[test]
fn a_call_that_never_answers_is_skipped_once_it_held_a_result_back_too_long() {
    let b = breaker(no_jitter().consecutive_failures(3).failure_rate(None));
    let stuck = b.try_acquire(at(0)).unwrap();
    for ms in 1..=3 {
        assert_eq!(
            call(&b, CallResult::Failure, at(ms)),
            None,
            "held back by the stuck call"
        );
    }
    // Held back since the call that started after it (at 1 ms) answered.
    assert_eq!(
        call(&b, CallResult::Failure, at(0) + machine::MAX_WAIT_FOR_EARLIER),
        None,
        "not yet"
    );
    let later = at(1) + machine::MAX_WAIT_FOR_EARLIER;
    let t = call(&b, CallResult::Failure, later).expect("the stuck call is skipped; in a row");
    assert_eq!(t.reason, TransitionReason::ConsecutiveFailures(3));
    assert_eq!(b.snapshot(later).skipped, 1);
    drop(stuck);
}

/// A closed breaker grants permits without its lock: a thread that read the generation just before a
/// transition takes its place in the start order after the new generation began. Its ticket is late, and its
/// place must hold nothing back, recorded or dropped.
#[test]
fn a_late_permit_granted_across_a_transition_holds_nothing_back() {
    let b = breaker(no_jitter().consecutive_failures(2).failure_rate(None));
    let old = b.snapshot(at(0)).generation;
    let racing = || Permit {
        breaker: &b,
        ticket: machine::Ticket {
            generation: old,
            probe: false,
            seq: b.gate.next_seq.fetch_add(1, std::sync::atomic::Ordering::SeqCst),
            started: at(0),
        },
        done: false,
    };
    b.force_open(at(0));
    b.reset(at(1));
    let recorded = racing();
    let dropped = racing();
    assert_eq!(call(&b, CallResult::Failure, at(2)), None);
    assert_eq!(
        recorded.record(CallResult::Failure, QUICK, at(3)),
        None,
        "late: not counted"
    );
    assert_eq!(
        b.snapshot(at(3)).consecutive_failures,
        0,
        "still held back by the dropped one"
    );
    drop(dropped);
    assert!(
        call(&b, CallResult::Failure, at(4)).is_some(),
        "two failures in a row, the late permits' places skipped"
    );
}

#[test]
fn a_dropped_call_stops_holding_results_back() {
    let b = breaker(no_jitter().consecutive_failures(2).failure_rate(None));
    let cancelled = b.try_acquire(at(0)).unwrap();
    call(&b, CallResult::Failure, at(1));
    drop(cancelled);
    assert!(
        call(&b, CallResult::Failure, at(2)).is_some(),
        "both failures count once it is gone"
    );
}

/// A blip — every call of one instant failing — is not an outage: a streak must spread over 500 ms by default.
#[test]
fn a_streak_of_one_instant_does_not_open_a_default_breaker_but_a_spread_one_does() {
    let b = breaker(BreakerConfig::builder());
    for _ in 0..50 {
        assert_eq!(call(&b, CallResult::Failure, at(1_000)), None, "a blip");
    }
    assert_eq!(b.snapshot(at(1_000)).consecutive_failures, 50);
    call(&b, CallResult::Success, at(1_100));
    for ms in (2_000..2_450).step_by(50) {
        assert_eq!(
            call(&b, CallResult::Failure, at(ms)),
            None,
            "nine, over 400 ms: not yet"
        );
    }
    let t = call(&b, CallResult::Failure, at(2_500)).expect("spread over 500 ms");
    assert_eq!(t.reason, TransitionReason::ConsecutiveFailures(10));
}

/// A stream leaves the start order when it starts answering: a long stream does not hold back the results of
/// the calls after it, and its own result counts when it ends.
#[test]
fn a_stream_that_started_answering_holds_nothing_back() {
    let b = breaker(no_jitter().consecutive_failures(3).failure_rate(None));
    let stream = b.try_acquire(at(0)).unwrap().into_owned(&b);
    for ms in 1..3 {
        assert_eq!(call(&b, CallResult::Failure, at(ms)), None);
    }
    assert!(
        call(&b, CallResult::Failure, at(3)).is_some(),
        "not held back by the open stream"
    );
    // Its end, late, counts nothing in the new generation.
    assert_eq!(stream.record(CallResult::Failure, QUICK, at(60_000)), None);
    let b = breaker(no_jitter().consecutive_failures(2).failure_rate(None));
    let stream = b.try_acquire(at(0)).unwrap().into_owned(&b);
    call(&b, CallResult::Failure, at(1));
    assert!(
        stream.record(CallResult::Failure, QUICK, at(90_000)).is_some(),
        "its failure counts at its end"
    );
}

#[test]
fn permits_only_ever_dropped_do_not_grow_the_queue() {
    let b = breaker(BreakerConfig::builder());
    for ms in 0..100_000 {
        drop(b.try_acquire(at(ms)).unwrap());
    }
    let s = b.snapshot(at(100_000));
    assert_eq!((s.in_flight, s.skipped, s.window_calls), (0, 0, 0));
}

#[test]
fn overload_answers_are_not_health_signals() {
    let b = breaker(no_jitter().consecutive_failures(3).min_calls(3));
    for ms in 0..100 {
        assert_eq!(call(&b, CallResult::Overloaded, at(ms)), None);
    }
    let s = b.snapshot(at(100));
    assert_eq!((s.state, s.window_calls, s.consecutive_failures), (Closed, 0, 0));
    // Nor do they break a run of real failures.
    call(&b, CallResult::Failure, at(101));
    call(&b, CallResult::Overloaded, at(102));
    call(&b, CallResult::Failure, at(103));
    assert!(call(&b, CallResult::Failure, at(104)).is_some());
}

/// 200 calls at once, 20% of them failing fast (5 ms) at random, the rest succeeding slowly (50-500 ms), then
/// each agent's next three calls as its previous one ends: a default breaker never opens, on any of 50 seeds.
#[test]
fn a_burst_with_twenty_percent_scattered_failures_never_opens_a_default_breaker() {
    for seed in 0..50 {
        let b = Arc::new(CircuitBreaker::seeded(BreakerConfig::default(), Some(seed)));
        let mut rng = DefaultRng::seed_from_u64(seed);
        // (ends at, started at index) events, processed in time order: a tiny event loop.
        let mut in_flight: Vec<(u64, Permit<'_>, bool, u32)> = Vec::new();
        for _ in 0..200 {
            in_flight.push(start(&b, &mut rng, 0, 4));
        }
        while !in_flight.is_empty() {
            let next = (0..in_flight.len()).min_by_key(|&i| in_flight[i].0).unwrap();
            let (end, permit, failed, left) = in_flight.swap_remove(next);
            let result = if failed {
                CallResult::Failure
            } else {
                CallResult::Success
            };
            let changed = permit.record(result, QUICK, at(end));
            assert_eq!(changed, None, "seed {seed}: opened at {end} ms");
            if left > 1 {
                in_flight.push(start(&b, &mut rng, end, left - 1));
            }
        }
        assert_eq!(b.state(at(60_000)), Closed, "seed {seed}");
    }
}

/// One call started at `now`: its end, its permit, whether it fails, and the calls its agent has left.
fn start<'a>(
    b: &'a Arc<CircuitBreaker>,
    rng: &mut DefaultRng,
    now: u64,
    left: u32,
) -> (u64, Permit<'a>, bool, u32) {
    let permit = b.try_acquire(at(now)).unwrap();
    let failed = rng.random::<f64>() < 0.2;
    let took = if failed { 5 } else { rng.random_range(50..=500) };
    (now + took, permit, failed, left)
}

/// A dead upstream under steady traffic (one call every 50 ms): a default breaker opens within a second of the
/// first failures — when they fail fast (503, connection refused), and when they hang until a 1 s per-try
/// timeout.
#[test]
fn a_default_breaker_sees_a_dead_upstream_within_a_second_of_its_first_outcomes() {
    for hang in [Duration::ZERO, Duration::from_secs(1)] {
        let b = breaker(BreakerConfig::builder());
        let mut pending: Vec<(Instant, Permit<'_>)> = Vec::new();
        let mut opened = None;
        for tick in 0..200_u64 {
            let now = at(10_000 + tick * 50);
            // Calls whose per-try timeout ended by now fail, in the order they started.
            pending.sort_by_key(|(end, _)| *end);
            while pending.first().is_some_and(|(end, _)| *end <= now) {
                let (end, permit) = pending.remove(0);
                if permit.record(CallResult::Failure, hang, end).is_some() && opened.is_none() {
                    opened = Some(end);
                }
            }
            if opened.is_some() {
                break;
            }
            match b.try_acquire(now) {
                Ok(permit) if hang.is_zero() => {
                    if permit.record(CallResult::Failure, QUICK, now).is_some() {
                        opened = Some(now);
                    }
                }
                Ok(permit) => pending.push((now + hang, permit)),
                Err(_) => break,
            }
        }
        let opened = opened.expect("opened");
        let first_outcome = at(10_000) + hang;
        assert!(
            opened.saturating_duration_since(first_outcome) <= Duration::from_secs(1),
            "hang {hang:?}: opened {:?} after the first outcome",
            opened.saturating_duration_since(first_outcome)
        );
    }
}
