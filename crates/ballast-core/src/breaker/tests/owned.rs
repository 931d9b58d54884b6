//! Owned permits: the same rules as borrowed ones, and they outlive every other handle on the breaker.

use super::*;

/// One owned attempt at `now` that answers `result` quickly; panics if refused.
fn call_owned(b: &Arc<CircuitBreaker>, result: CallResult, now: Instant) -> Option<Transition> {
    b.try_acquire_owned(now).unwrap().record(result, QUICK, now)
}

#[test]
fn owned_outcomes_count_like_borrowed_ones() {
    let b = breaker(no_jitter().consecutive_failures(3).failure_rate(None));
    call_owned(&b, CallResult::Failure, at(0));
    call_owned(&b, CallResult::Failure, at(1));
    call_owned(&b, CallResult::Success, at(2));
    assert_eq!(
        b.snapshot(at(2)).consecutive_failures,
        0,
        "a success resets the count"
    );
    call_owned(&b, CallResult::Failure, at(3));
    call_owned(&b, CallResult::Ignored, at(4));
    call_owned(&b, CallResult::Failure, at(5));
    assert_eq!(
        b.snapshot(at(5)).consecutive_failures,
        2,
        "ignored changes nothing"
    );
    let t = call_owned(&b, CallResult::Failure, at(6)).expect("the third in a row opens");
    assert_eq!(
        (t.from, t.to, t.reason),
        (Closed, Open, TransitionReason::ConsecutiveFailures(3))
    );
    assert!(b.try_acquire_owned(at(7)).is_err(), "refused while open");
}

#[test]
fn an_owned_permit_outlives_every_other_handle_on_its_breaker() {
    let b = breaker(no_jitter().consecutive_failures(1));
    let permit = b.try_acquire_owned(at(0)).unwrap();
    let watcher = Arc::downgrade(&b);
    drop(b);
    let transition = permit.record(CallResult::Failure, QUICK, at(5_000));
    assert!(transition.is_some(), "recorded on the live breaker");
    assert!(watcher.upgrade().is_none(), "and the permit held the last handle");
}

#[test]
fn a_dropped_or_ignored_owned_probe_frees_its_slot_without_counting() {
    let (b, now) = half_open_breaker(2, 2);
    let first = b.try_acquire_owned(now).unwrap();
    let second = b.try_acquire_owned(now).unwrap();
    assert!(first.is_probe() && second.is_probe());
    assert!(b.try_acquire_owned(now).is_err());
    drop(first);
    let third = b
        .try_acquire_owned(now)
        .expect("the dropped probe's slot is free");
    assert_eq!(second.record(CallResult::Ignored, QUICK, now), None);
    let fourth = b.try_acquire(now).expect("the ignored probe's slot is free");
    let s = b.snapshot(now);
    assert_eq!((s.state, s.probes_in_flight, s.probe_successes), (HalfOpen, 2, 0));
    drop((third, fourth));
    assert_eq!(b.snapshot(now).probes_in_flight, 0);
}

#[test]
fn an_owned_probe_holds_its_slot_until_it_is_recorded() {
    let (b, now) = half_open_breaker(1, 1);
    let probe = b.try_acquire_owned(now).unwrap();
    let later = now + Duration::from_secs(60);
    assert_eq!(
        b.try_acquire(later).unwrap_err(),
        BreakerRejected::ProbesBusy { probes: 1 },
        "however long it runs"
    );
    let t = probe.record(CallResult::Success, QUICK, later).expect("closes");
    assert_eq!((t.from, t.to), (HalfOpen, Closed));
}

#[test]
fn late_owned_permits_count_nothing_and_free_nothing() {
    // A closed-generation permit recorded after the breaker opened and went half-open.
    let b = breaker(no_jitter().consecutive_failures(1).half_open_probes(1));
    let stream = b.try_acquire_owned(at(0)).unwrap();
    b.force_open(at(1));
    let probe = b.try_acquire(at(30_001)).unwrap();
    assert_eq!(stream.record(CallResult::Failure, QUICK, at(30_002)), None);
    assert_eq!(b.snapshot(at(30_002)).probes_in_flight, 1);
    drop(probe);

    // A probe of an earlier half-open period, dropped: the current period's slot stays taken.
    let (b, now) = half_open_breaker(1, 1);
    let old = b.try_acquire_owned(now).unwrap();
    b.force_open(now);
    let later = now + BreakerConfig::DEFAULT_OPEN_FOR;
    let current = b.try_acquire_owned(later).unwrap();
    assert_ne!(old.generation(), current.generation());
    drop(old);
    assert_eq!(
        b.try_acquire(later).unwrap_err(),
        BreakerRejected::ProbesBusy { probes: 1 }
    );
    drop(current);
}

/// A borrowed probe made owned keeps its slot (the borrow ends, the ticket does not), and counts when recorded.
#[test]
fn a_borrowed_permit_made_owned_keeps_its_ticket() {
    let (b, now) = half_open_breaker(1, 1);
    let owned = b.try_acquire(now).unwrap().into_owned(&b);
    assert!(owned.is_probe());
    assert_eq!(
        b.try_acquire(now).unwrap_err(),
        BreakerRejected::ProbesBusy { probes: 1 },
        "the slot stays taken after the borrowed permit is gone"
    );
    let t = owned.record(CallResult::Success, QUICK, now).expect("closes");
    assert_eq!((t.from, t.to), (HalfOpen, Closed));

    // Dropped unrecorded, it frees the slot as a borrowed probe would.
    let (b, now) = half_open_breaker(1, 1);
    drop(b.try_acquire(now).unwrap().into_owned(&b));
    assert_eq!(b.snapshot(now).probes_in_flight, 0);
}

#[test]
#[should_panic(expected = "another breaker")]
fn a_permit_made_owned_with_another_breaker_panics() {
    let b = breaker(no_jitter());
    let other = breaker(no_jitter());
    let _ = b.try_acquire(at(0)).unwrap().into_owned(&other);
}
