//! Closed and open: the triggers, what counts, the open time and its jitter.

use super::*;

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
    assert!((2_500 * MS..=7_500 * MS).contains(&second));
}

#[test]
fn the_longest_open_time_with_the_widest_jitter_opens_without_overflow() {
    let b = breaker(
        BreakerConfig::builder()
            .consecutive_failures(1)
            .open_for(BreakerConfig::MAX_OPEN_FOR)
            .open_jitter(0.99),
    );
    trip(&b, at(0));
    let left = b.open_remaining(at(0)).expect("open");
    let (low, high) = b.config().open_time_bounds();
    assert!((low..=high).contains(&left), "{left:?}");
}
