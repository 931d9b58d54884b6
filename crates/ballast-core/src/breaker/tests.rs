//! Behaviour of the whole breaker: every rule of DESIGN.md's "Circuit breaker", late results, threads, and the
//! property that only the legal transitions ever happen.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use BreakerState::{Closed, HalfOpen, Open};

const MS: Duration = Duration::from_millis(1);
const QUICK: Duration = Duration::from_millis(10);

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

/// A breaker with no jitter (exact open times) unless the builder sets one.
fn breaker(config: BreakerConfigBuilder) -> Arc<CircuitBreaker> {
    Arc::new(CircuitBreaker::seeded(config.build().unwrap(), Some(7)))
}

fn no_jitter() -> BreakerConfigBuilder {
    BreakerConfig::builder().open_jitter(0.0)
}

/// One attempt at `now` that answers `result` quickly; panics if refused.
fn call(b: &Arc<CircuitBreaker>, result: CallResult, now: Instant) -> Option<Transition> {
    b.try_acquire(now).unwrap().record(result, QUICK, now)
}

/// Opens `b` with its consecutive trigger (`n` failures) at `now`.
fn trip(b: &Arc<CircuitBreaker>, now: Instant) {
    for _ in 0..b.config().consecutive_failures() {
        call(b, CallResult::Failure, now);
    }
    assert_eq!(b.state(now), Open);
}

#[test]
fn consecutive_failures_open_it_and_a_success_resets_the_count() {
    let b = breaker(no_jitter().consecutive_failures(3).failure_rate(None));
    call(&b, CallResult::Failure, at(0));
    call(&b, CallResult::Failure, at(1));
    call(&b, CallResult::Success, at(2));
    call(&b, CallResult::Failure, at(3));
    assert_eq!(call(&b, CallResult::Failure, at(4)), None);
    assert_eq!(b.snapshot(at(4)).consecutive_failures, 2);
    let t = call(&b, CallResult::Failure, at(5)).expect("third failure in a row opens");
    assert_eq!(
        t,
        Transition {
            from: Closed,
            to: Open,
            reason: TransitionReason::ConsecutiveFailures(3),
            at: at(5)
        }
    );
    let s = b.snapshot(at(5));
    assert_eq!((s.state, s.last_transition, s.transitions), (Open, Some(t), 1));
    assert_eq!(s.open_until, Some(at(5) + BreakerConfig::DEFAULT_OPEN_FOR));
}

#[test]
fn ignored_results_neither_count_nor_reset() {
    let b = breaker(no_jitter().consecutive_failures(3).failure_rate(None));
    call(&b, CallResult::Failure, at(0));
    call(&b, CallResult::Failure, at(0));
    call(&b, CallResult::Ignored, at(0));
    let s = b.snapshot(at(0));
    assert_eq!(
        (s.consecutive_failures, s.window_calls, s.window_failures),
        (2, 2, 2)
    );
    assert!(call(&b, CallResult::Failure, at(0)).is_some());
}

#[test]
fn client_errors_and_ignored_results_never_open_it() {
    let b = breaker(
        no_jitter()
            .consecutive_failures(1)
            .failure_rate(Some(0.01))
            .min_calls(1),
    );
    for i in 0..1000 {
        let status = [400, 401, 404, 409, 422, 429][i % 6];
        call(&b, CallResult::from_status(status), at(i as u64));
        call(&b, CallResult::Ignored, at(i as u64));
        drop(b.try_acquire(at(i as u64)).unwrap()); // a cancelled attempt
    }
    let s = b.snapshot(at(999));
    assert_eq!((s.state, s.transitions, s.window_failures), (Closed, 0, 0));
    call(&b, CallResult::from_status(502), at(1000));
    assert_eq!(b.state(at(1000)), Open, "the same breaker does open on a 5xx");
}

#[test]
fn rate_trigger_waits_for_min_calls() {
    let b = breaker(
        no_jitter()
            .consecutive_failures(0)
            .failure_rate(Some(0.5))
            .min_calls(10),
    );
    for i in 0..9 {
        assert_eq!(
            call(&b, CallResult::Failure, at(i)),
            None,
            "9 calls are below min_calls"
        );
    }
    // The rate is checked after every counted call: the 10th call brings the window to min_calls.
    let t = call(&b, CallResult::Success, at(9)).unwrap();
    assert_eq!(
        t.reason,
        TransitionReason::FailureRate {
            failures: 9,
            calls: 10
        }
    );
    assert_eq!(t.reason.rate(), Some(0.9));
}

#[test]
fn rate_trigger_opens_at_exactly_the_threshold() {
    let b = breaker(
        no_jitter()
            .consecutive_failures(0)
            .failure_rate(Some(0.5))
            .min_calls(4),
    );
    call(&b, CallResult::Success, at(0));
    call(&b, CallResult::Failure, at(0));
    call(&b, CallResult::Success, at(0));
    assert_eq!(b.state(at(0)), Closed);
    let t = call(&b, CallResult::Failure, at(0)).unwrap(); // 2 of 4 = 50%
    assert_eq!(
        t.reason,
        TransitionReason::FailureRate {
            failures: 2,
            calls: 4
        }
    );
}

#[test]
fn rate_trigger_forgets_calls_that_left_the_window() {
    // 1 s window in 10 buckets; three failures at t = 0, then one success.
    let config = no_jitter()
        .consecutive_failures(0)
        .failure_rate(Some(0.5))
        .min_calls(4)
        .window(Duration::from_secs(1));
    let still_inside = breaker(config);
    let aged_out = breaker(config);
    for b in [&still_inside, &aged_out] {
        for _ in 0..3 {
            call(b, CallResult::Failure, at(0));
        }
    }
    assert!(
        call(&still_inside, CallResult::Success, at(999)).is_some(),
        "3 of 4 failed"
    );
    assert_eq!(call(&aged_out, CallResult::Success, at(1000)), None);
    let s = aged_out.snapshot(at(1000));
    assert_eq!((s.state, s.window_calls, s.window_failures), (Closed, 1, 0));
}

#[test]
fn slow_calls_count_as_failures_when_configured() {
    let slow = breaker(no_jitter().consecutive_failures(2).slow_call(Some(100 * MS)));
    let ok = |b: &Arc<CircuitBreaker>, latency| {
        b.try_acquire(at(0))
            .unwrap()
            .record(CallResult::Success, latency, at(0))
    };
    ok(&slow, 100 * MS); // exactly the threshold is not slower than it
    assert_eq!(slow.snapshot(at(0)).consecutive_failures, 0);
    ok(&slow, 101 * MS);
    assert_eq!(
        ok(&slow, 5_000 * MS).map(|t| t.reason),
        Some(TransitionReason::ConsecutiveFailures(2))
    );

    let unset = breaker(no_jitter().consecutive_failures(2));
    for _ in 0..10 {
        ok(&unset, Duration::from_secs(60));
    }
    assert_eq!(unset.state(at(0)), Closed);
}

#[test]
fn open_refuses_every_call_until_the_open_time_ends() {
    let b = breaker(
        no_jitter()
            .consecutive_failures(1)
            .open_for(Duration::from_secs(30)),
    );
    call(&b, CallResult::Failure, at(1_000));
    for t in [1_000, 1_001, 15_000, 30_999] {
        let refused = b.try_acquire(at(t)).unwrap_err();
        assert_eq!(
            refused,
            BreakerRejected::Open {
                retry_in: at(31_000).saturating_duration_since(at(t))
            }
        );
        assert_eq!(b.open_remaining(at(t)), refused.retry_in());
        assert_eq!(b.state(at(t)), Open);
    }
    let probe = b
        .try_acquire(at(31_000))
        .expect("half-open once the open time ends");
    assert!(probe.is_probe());
    let s = b.snapshot(at(31_000));
    assert_eq!(
        (s.state, s.open_remaining, s.probes_in_flight),
        (HalfOpen, None, 1)
    );
    assert_eq!(
        s.last_transition,
        Some(Transition {
            from: Open,
            to: HalfOpen,
            reason: TransitionReason::OpenTimeElapsed,
            at: at(31_000)
        })
    );
}

#[test]
fn reading_the_state_moves_open_to_half_open_at_the_instant_it_ended() {
    let b = breaker(
        no_jitter()
            .consecutive_failures(1)
            .open_for(Duration::from_secs(1)),
    );
    call(&b, CallResult::Failure, at(0));
    assert_eq!(b.state(at(5_000)), HalfOpen);
    assert_eq!(b.snapshot(at(5_000)).last_transition.unwrap().at, at(1_000));
}

#[test]
fn open_time_jitter_stays_in_bounds_and_follows_the_seed() {
    let config = BreakerConfig::builder()
        .consecutive_failures(1)
        .open_for(Duration::from_secs(10))
        .open_jitter(0.2)
        .build()
        .unwrap();
    let open_times = |seed| {
        let b = Arc::new(CircuitBreaker::seeded(config, Some(seed)));
        (0..200u64)
            .map(|i| {
                let now = at(i * 100_000);
                b.reset(now);
                call(&b, CallResult::Failure, now).unwrap();
                b.open_remaining(now).unwrap()
            })
            .collect::<Vec<_>>()
    };
    let draws = open_times(11);
    assert!(
        draws.iter().all(|d| (8_000 * MS..=12_000 * MS).contains(d)),
        "{draws:?}"
    );
    assert!(draws.iter().any(|d| *d < 8_500 * MS) && draws.iter().any(|d| *d > 11_500 * MS));
    assert_eq!(draws, open_times(11));
    assert_ne!(draws, open_times(12));
}

#[test]
fn a_reopened_breaker_draws_a_new_open_time() {
    let b = breaker(BreakerConfig::builder().consecutive_failures(1).open_jitter(0.5));
    call(&b, CallResult::Failure, at(0));
    let first = b.open_remaining(at(0)).unwrap();
    let probe_at = at(0) + first;
    let t = call(&b, CallResult::Failure, probe_at).unwrap();
    assert_eq!(
        (t.from, t.to, t.reason),
        (HalfOpen, Open, TransitionReason::ProbeFailed)
    );
    let second = b.open_remaining(probe_at).unwrap();
    assert_ne!(first, second);
    assert!((15_000 * MS..=45_000 * MS).contains(&second));
}

/// A breaker with M probes and S successes, already half-open at `at(30_000)`.
fn half_open(m: u32, s: u32) -> (Arc<CircuitBreaker>, Instant) {
    let b = breaker(
        no_jitter()
            .consecutive_failures(1)
            .half_open_probes(m)
            .success_threshold(s),
    );
    trip(&b, at(0));
    let now = at(30_000);
    assert_eq!(b.state(now), HalfOpen);
    (b, now)
}

#[test]
fn half_open_lets_at_most_m_probes_through() {
    let (b, now) = half_open(3, 3);
    let probes: Vec<_> = (0..3).map(|_| b.try_acquire(now).unwrap()).collect();
    assert!(probes.iter().all(Permit::is_probe));
    assert_eq!(
        b.try_acquire(now).unwrap_err(),
        BreakerRejected::ProbesBusy { probes: 3 }
    );
    assert_eq!(b.snapshot(now).probes_in_flight, 3);
}

#[test]
fn a_dropped_or_ignored_probe_frees_its_slot_without_counting() {
    let (b, now) = half_open(2, 2);
    let first = b.try_acquire(now).unwrap();
    let second = b.try_acquire(now).unwrap();
    assert!(b.try_acquire(now).is_err());
    drop(first);
    let third = b.try_acquire(now).expect("the dropped probe's slot is free");
    assert_eq!(second.record(CallResult::Ignored, QUICK, now), None);
    let fourth = b.try_acquire(now).expect("the ignored probe's slot is free");
    let s = b.snapshot(now);
    assert_eq!((s.state, s.probes_in_flight, s.probe_successes), (HalfOpen, 2, 0));
    drop((third, fourth));
    assert_eq!(b.snapshot(now).probes_in_flight, 0);
}

#[test]
fn closes_after_s_successes_with_a_fresh_window() {
    let (b, now) = half_open(3, 3);
    let probes: Vec<_> = (0..3).map(|_| b.try_acquire(now).unwrap()).collect();
    let mut transitions: Vec<_> = probes
        .into_iter()
        .map(|p| p.record(CallResult::Success, QUICK, now))
        .collect();
    let last = transitions.pop().unwrap().expect("the third success closes");
    assert_eq!(transitions, [None, None]);
    assert_eq!(
        (last.from, last.to, last.reason),
        (HalfOpen, Closed, TransitionReason::ProbesSucceeded(3))
    );
    let s = b.snapshot(now);
    assert_eq!(
        (
            s.state,
            s.window_calls,
            s.consecutive_failures,
            s.probes_in_flight
        ),
        (Closed, 0, 0, 0)
    );
    assert!(!b.try_acquire(now).unwrap().is_probe());
}

#[test]
fn more_successes_than_probes_go_through_in_waves() {
    let (b, now) = half_open(1, 3);
    for wave in 0..3 {
        let probe = b.try_acquire(now).unwrap();
        assert!(b.try_acquire(now).is_err(), "only one probe at a time");
        let t = probe.record(CallResult::Success, QUICK, now);
        assert_eq!(t.is_some(), wave == 2);
    }
    assert_eq!(b.state(now), Closed);
}

#[test]
fn fewer_successes_than_probes_close_early_and_the_rest_arrive_late() {
    let (b, now) = half_open(3, 1);
    let mut probes: Vec<_> = (0..3).map(|_| b.try_acquire(now).unwrap()).collect();
    assert!(
        probes
            .pop()
            .unwrap()
            .record(CallResult::Success, QUICK, now)
            .is_some()
    );
    for late in probes {
        assert_eq!(late.record(CallResult::Failure, QUICK, now), None);
    }
    let s = b.snapshot(now);
    assert_eq!((s.state, s.window_calls, s.consecutive_failures), (Closed, 0, 0));
}

#[test]
fn any_probe_failure_reopens_and_other_probes_become_late() {
    let (b, now) = half_open(3, 3);
    let probes: Vec<_> = (0..3).map(|_| b.try_acquire(now).unwrap()).collect();
    let [a, c, d] = <[_; 3]>::try_from(probes).unwrap();
    assert_eq!(a.record(CallResult::Success, QUICK, now), None);
    let t = c.record(CallResult::Failure, QUICK, now).unwrap();
    assert_eq!(
        (t.from, t.to, t.reason, t.at),
        (HalfOpen, Open, TransitionReason::ProbeFailed, now)
    );
    assert_eq!(b.open_remaining(now), Some(BreakerConfig::DEFAULT_OPEN_FOR));
    assert_eq!(d.record(CallResult::Success, QUICK, now), None);
    assert_eq!(b.state(now), Open);
}

#[test]
fn a_call_started_before_the_breaker_opened_cannot_reopen_it() {
    let b = breaker(no_jitter().consecutive_failures(1));
    let slow_call = b.try_acquire(at(0)).unwrap(); // closed generation
    call(&b, CallResult::Failure, at(1)); // opens
    let probe = b.try_acquire(at(30_001)).unwrap(); // half-open
    assert_eq!(slow_call.record(CallResult::Failure, QUICK, at(30_002)), None);
    let s = b.snapshot(at(30_002));
    assert_eq!((s.state, s.probes_in_flight), (HalfOpen, 1));
    drop(probe);
}

#[test]
fn a_result_from_before_a_reclose_does_not_enter_the_new_window() {
    let b = breaker(no_jitter().consecutive_failures(1).half_open_probes(1));
    let old = b.try_acquire(at(0)).unwrap();
    trip(&b, at(0));
    call(&b, CallResult::Success, at(30_000)); // closes again
    assert_eq!(old.record(CallResult::Failure, QUICK, at(30_001)), None);
    let s = b.snapshot(at(30_001));
    assert_eq!((s.state, s.window_calls, s.consecutive_failures), (Closed, 0, 0));
}

#[test]
fn a_probe_from_an_earlier_half_open_period_is_late() {
    let (b, now) = half_open(2, 1);
    let old_probe = b.try_acquire(now).unwrap();
    call(&b, CallResult::Failure, now); // reopens: a new half-open period follows
    let later = now + BreakerConfig::DEFAULT_OPEN_FOR;
    let current = b.try_acquire(later).unwrap();
    let other = b.try_acquire(later).unwrap();
    assert_ne!(old_probe.generation(), current.generation());
    drop(old_probe); // must not free a slot of the current period
    assert_eq!(
        b.try_acquire(later).unwrap_err(),
        BreakerRejected::ProbesBusy { probes: 2 }
    );
    drop(other);
    let again = b.try_acquire(later).unwrap();
    // An old success would have closed it (S = 1); the current period decides.
    assert_eq!(b.snapshot(later).probes_in_flight, 2);
    drop((current, again));
}

#[test]
fn operators_can_force_open_and_reset() {
    let b = breaker(no_jitter());
    let t = b.force_open(at(5));
    assert_eq!((t.from, t.to, t.reason), (Closed, Open, TransitionReason::Manual));
    assert!(!t.is_automatic());
    assert!(b.try_acquire(at(6)).is_err());
    let t = b.reset(at(7));
    assert_eq!(
        (t.from, t.to, t.reason, t.at),
        (Open, Closed, TransitionReason::Manual, at(7))
    );
    assert!(b.try_acquire(at(7)).is_ok());
}

#[test]
fn breakers_and_permits_can_cross_threads() {
    fn shared<T: Send + Sync + 'static>() {}
    fn moved<T: Send + 'static>() {}
    shared::<CircuitBreaker>();
    moved::<Permit>();
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
    assert_eq!(b.snapshot(at(0)).window_calls, 40_000);
}

#[test]
fn concurrent_probes_never_exceed_m() {
    let (b, now) = half_open(2, 2);
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

#[derive(Clone, Debug)]
enum Op {
    Acquire,
    Record {
        which: usize,
        result: CallResult,
        latency_ms: u64,
    },
    Drop {
        which: usize,
    },
    Advance {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let result = prop_oneof![
        Just(CallResult::Success),
        Just(CallResult::Failure),
        Just(CallResult::Ignored)
    ];
    prop_oneof![
        4 => Just(Op::Acquire),
        4 => (any::<usize>(), result, 0u64..200).prop_map(|(which, result, latency_ms)| Op::Record {
            which,
            result,
            latency_ms
        }),
        1 => any::<usize>().prop_map(|which| Op::Drop { which }),
        2 => (0u64..400).prop_map(|ms| Op::Advance { ms }),
    ]
}

fn config() -> impl Strategy<Value = BreakerConfig> {
    (
        (
            0u32..4,
            proptest::option::of(0.2f64..=1.0),
            1u32..6,
            100u64..2_000,
            1u32..10,
        ),
        (
            proptest::option::of(50u64..150),
            50u64..500,
            0.0f64..0.5,
            1u32..4,
            1u32..6,
        ),
    )
        .prop_map(
            |((cf, rate, min_calls, window, buckets), (slow, open_for, jitter, m, s))| {
                BreakerConfig::builder()
                    .consecutive_failures(cf)
                    .failure_rate(rate)
                    .min_calls(min_calls)
                    .window(Duration::from_millis(window))
                    .window_buckets(buckets)
                    .slow_call(slow.map(Duration::from_millis))
                    .open_for(Duration::from_millis(open_for))
                    .open_jitter(jitter)
                    .half_open_probes(m)
                    .success_threshold(s)
                    .build()
                    .unwrap()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn only_legal_transitions_happen(config in config(), seed: u64, ops in prop::collection::vec(op(), 1..200)) {
        let b = Arc::new(CircuitBreaker::seeded(config, Some(seed)));
        let m = config.half_open_probes();
        let (shortest, longest) = config.open_time_bounds();
        let mut now = at(1_000);
        let mut held: Vec<Permit> = Vec::new();
        for op in ops {
            let before = b.snapshot(now);
            let mut reported = None;
            match op {
                Op::Acquire => match b.try_acquire(now) {
                    Ok(permit) => {
                        prop_assert_ne!(before.state, Open, "a permit while open");
                        held.push(permit);
                    }
                    Err(BreakerRejected::Open { retry_in }) => {
                        prop_assert_eq!(before.state, Open);
                        prop_assert_eq!(Some(retry_in), before.open_remaining);
                        prop_assert!(!retry_in.is_zero());
                    }
                    Err(BreakerRejected::ProbesBusy { probes }) => {
                        prop_assert_eq!((before.state, before.probes_in_flight, probes), (HalfOpen, m, m));
                    }
                },
                Op::Record { which, result, latency_ms } if !held.is_empty() => {
                    let permit = held.swap_remove(which % held.len());
                    reported = permit.record(result, Duration::from_millis(latency_ms), now);
                }
                Op::Drop { which } if !held.is_empty() => drop(held.swap_remove(which % held.len())),
                Op::Record { .. } | Op::Drop { .. } => {}
                Op::Advance { ms } => now = now + Duration::from_millis(ms),
            }
            let after = b.snapshot(now);
            match after.transitions - before.transitions {
                0 => {
                    prop_assert_eq!(after.state, before.state);
                    prop_assert_eq!(reported, None);
                }
                1 => {
                    let t = after.last_transition.unwrap();
                    prop_assert!(t.is_automatic(), "illegal transition {}", t);
                    prop_assert_eq!((t.from, t.to), (before.state, after.state));
                    prop_assert!(reported.is_none() || reported == Some(t));
                }
                n => prop_assert!(false, "{} transitions in one step", n),
            }
            // Half-open probes in flight: never above M, and exactly the current-generation probes we hold.
            let ours = held.iter().filter(|p| p.is_probe() && p.generation() == after.generation).count();
            prop_assert!(after.probes_in_flight <= m);
            prop_assert_eq!(ours, after.probes_in_flight as usize);
            if after.state != HalfOpen {
                prop_assert_eq!(after.probes_in_flight, 0);
            }
            if let (Open, Some(until), Some(t)) = (after.state, after.open_until, after.last_transition) {
                prop_assert!(until >= t.at + shortest && until <= t.at + longest);
                prop_assert!(until > now);
            }
            if after.state == Closed && config.consecutive_failures() > 0 {
                prop_assert!(after.consecutive_failures < config.consecutive_failures());
            }
        }
    }
}
