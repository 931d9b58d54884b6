use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn throttle() -> AdaptiveThrottle {
    AdaptiveThrottle::seeded(ThrottleConfig::default(), Some(7))
}

/// Refusals out of `n` asks at `now`.
fn refusals(t: &AdaptiveThrottle, n: usize, now: Instant) -> usize {
    (0..n).filter(|_| t.try_admit(now).is_err()).count()
}

#[test]
fn a_steady_twenty_percent_of_overload_answers_is_never_throttled() {
    let t = throttle();
    for i in 0..10_000_u64 {
        let now = at(i);
        assert!(t.try_admit(now).is_ok(), "attempt {i} refused");
        let outcome = if i % 5 == 0 {
            ThrottleOutcome::Overloaded
        } else {
            ThrottleOutcome::Accepted
        };
        t.record(outcome, now);
    }
    assert_eq!(t.snapshot(at(10_000)).refused_total, 0);
}

#[test]
fn a_burst_asked_at_once_is_not_refused_before_anything_ended() {
    let t = throttle();
    assert_eq!(
        refusals(&t, 500, at(0)),
        0,
        "asks are not requests until they end"
    );
}

#[test]
fn an_upstream_refusing_everything_is_refused_locally_and_recovers_after_the_window() {
    let t = throttle();
    for i in 0..1000 {
        t.record(ThrottleOutcome::Overloaded, at(i / 2));
    }
    let snapshot = t.snapshot(at(500));
    assert_eq!((snapshot.requests, snapshot.accepts), (1000, 0));
    assert!(snapshot.probability > 0.99);
    assert!(refusals(&t, 1000, at(500)) > 980);
    // The window (2 s) forgets; the refusals made it longer only by their own bucket.
    assert_eq!(t.snapshot(at(2600)).requests, 0);
    assert_eq!(refusals(&t, 100, at(2600)), 0);
}

/// Admitting a calm upstream's attempts skips the lock until the newest bucket ends: accepts that age out
/// without anything new recorded must still raise the probability.
#[test]
fn accepts_ageing_out_throttle_without_a_new_record() {
    let t = throttle();
    for _ in 0..20 {
        t.record(ThrottleOutcome::Accepted, at(0));
    }
    for _ in 0..20 {
        t.record(ThrottleOutcome::Overloaded, at(1_500));
    }
    assert_eq!(refusals(&t, 100, at(1_550)), 0, "half accepted: nothing refused");
    assert!(
        refusals(&t, 100, at(2_050)) > 80,
        "the accepts of the first bucket aged out: the refusals are all that is left"
    );
}

#[test]
fn timeouts_are_not_accepts_but_answers_of_any_status_are() {
    let t = throttle();
    for ms in 0..30 {
        t.record(ThrottleOutcome::Unanswered, at(ms));
    }
    assert_eq!(t.snapshot(at(30)).accepts, 0);
    assert!(t.snapshot(at(30)).probability > 0.9, "timeouts are not accepts");
    t.restart();
    for ms in 0..30 {
        t.record(ThrottleOutcome::Accepted, at(ms));
    }
    let snapshot = t.snapshot(at(30));
    assert_eq!(
        (snapshot.requests, snapshot.accepts, snapshot.probability),
        (30, 30, 0.0)
    );
}

/// After an upstream refused everything, a recovered one is sent everything again within a few windows, with
/// attempts asked all along: each refusal is a request, so the probability's excess halves about every window
/// (`p' = 2p - 1`), from near 1 to 0 in about five windows.
#[test]
fn a_recovered_upstream_is_sent_everything_again_within_a_few_windows() {
    let t = throttle();
    // 4 s of everything refused for load, 100 asks a second.
    for ms in (0..4000).step_by(10) {
        if t.try_admit(at(ms)).is_ok() {
            t.record(ThrottleOutcome::Overloaded, at(ms));
        }
    }
    assert!(t.snapshot(at(4000)).probability > 0.9);
    // Recovered from 4 s: every admitted attempt is accepted.
    let mut refused_after = Vec::new();
    for ms in (4000..20_000).step_by(10) {
        if t.try_admit(at(ms)).is_ok() {
            t.record(ThrottleOutcome::Accepted, at(ms));
        } else {
            refused_after.push(ms);
        }
    }
    let last = refused_after.last().copied().unwrap_or(4000);
    assert!(
        last < 4000 + 12_000,
        "still refusing at {last} ms, 12 s (six windows) after the recovery"
    );
    // And most of it within three windows: the share refused halves window by window.
    let late = refused_after.iter().filter(|&&ms| ms >= 4000 + 6000).count();
    assert!(
        late * 10 < refused_after.len(),
        "{late} of {} refusals after three windows",
        refused_after.len()
    );
}

/// An upstream refusing everything said when to come back: every attempt is refused until then (not drawn), the
/// refusals are not counted, and at that time the window holds only what it answered.
#[test]
fn a_retry_after_holds_a_refusing_upstream_until_it_passes() {
    let t = throttle();
    for ms in 0..20 {
        t.record(ThrottleOutcome::Overloaded, at(ms));
        t.hold(Duration::from_secs(5), at(ms));
    }
    let refused = t.try_admit(at(100)).unwrap_err();
    assert_eq!(
        (refused.probability, refused.retry_in),
        (1.0, Some(Duration::from_millis(4919)))
    );
    assert_eq!(refusals(&t, 1000, at(1000)), 1000, "every one, not a draw");
    assert_eq!(
        t.snapshot(at(1000)).requests,
        20,
        "the hold's refusals are not requests"
    );
    // At 5 s the window has forgotten the refusals of the upstream: everything goes.
    assert_eq!(refusals(&t, 100, at(5019)), 0);
    // A Retry-After while the throttle is not refusing holds nothing (a flash sale's random 429s).
    let calm = throttle();
    for ms in 0..50 {
        calm.record(ThrottleOutcome::Accepted, at(ms));
    }
    calm.record(ThrottleOutcome::Overloaded, at(50));
    calm.hold(Duration::from_secs(30), at(50));
    assert_eq!(refusals(&calm, 100, at(60)), 0);
    // And a day is held a minute at most.
    let long = throttle();
    for ms in 0..20 {
        long.record(ThrottleOutcome::Overloaded, at(ms));
    }
    long.hold(Duration::from_secs(86_400), at(20));
    assert_eq!(
        long.try_admit(at(20)).unwrap_err().retry_in,
        Some(crate::DEFAULT_MAX_RETRY_AFTER)
    );
}

/// Accepts are counted without the lock; none is lost when threads record at once, across bucket changes.
#[test]
fn concurrent_records_are_all_counted() {
    let t = std::sync::Arc::new(throttle());
    let threads: Vec<_> = (0..4_u64)
        .map(|thread| {
            let t = std::sync::Arc::clone(&t);
            std::thread::spawn(move || {
                for i in 0..5_000_u64 {
                    // Ten buckets of 100 ms, visited by every thread in turn.
                    let now = Instant::from_nanos(i * 200_000 + thread);
                    let outcome = if i % 10 == 0 {
                        ThrottleOutcome::Overloaded
                    } else {
                        ThrottleOutcome::Accepted
                    };
                    t.record(outcome, now);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let s = t.snapshot(at(1_000));
    assert_eq!((s.requests, s.accepts), (20_000, 18_000));
}

/// An upstream that turns to refusing everything is held at its word once five attempts in a row, over half a
/// second, came back unaccepted: before the accepts from before the outage have aged out of the window (the
/// probability still 0). Five of one instant (a burst meeting a full upstream) hold nothing.
#[test]
fn five_refusals_in_a_row_over_half_a_second_hold_before_the_probability_rises() {
    let healthy = || {
        let t = throttle();
        for ms in 0..100 {
            t.record(ThrottleOutcome::Accepted, at(ms));
        }
        t
    };
    let t = healthy();
    for ms in [100, 300, 500, 700] {
        t.record(ThrottleOutcome::Overloaded, at(ms));
        t.hold(Duration::from_secs(1), at(ms));
    }
    assert_eq!(t.snapshot(at(700)).probability, 0.0);
    assert_eq!(
        refusals(&t, 100, at(700)),
        0,
        "four in a row over 600 ms: not yet"
    );
    t.record(ThrottleOutcome::Unanswered, at(750));
    t.record(ThrottleOutcome::Overloaded, at(800));
    t.hold(Duration::from_secs(1), at(800));
    assert_eq!(
        t.try_admit(at(800)).unwrap_err().retry_in,
        Some(Duration::from_secs(1)),
        "a timeout is not an accept: six in a row over 700 ms"
    );
    // The refusals of one instant do not last half a second.
    let t = healthy();
    for _ in 0..20 {
        t.record(ThrottleOutcome::Overloaded, at(200));
        t.hold(Duration::from_secs(1), at(200));
    }
    assert_eq!(refusals(&t, 100, at(300)), 0, "a burst meeting a full upstream");
    // One accept ends the run: the next Retry-After holds nothing.
    let t = healthy();
    for ms in (100..1_000).step_by(100) {
        let outcome = if ms == 600 {
            ThrottleOutcome::Accepted
        } else {
            ThrottleOutcome::Overloaded
        };
        t.record(outcome, at(ms));
    }
    t.hold(Duration::from_secs(1), at(900));
    assert_eq!(refusals(&t, 100, at(900)), 0, "three in a row since the accept");
    // A run that went quiet for longer than the window is over: an hour-old run of timeouts holds nothing now.
    let t = throttle();
    for ms in [0, 200, 400, 600] {
        t.record(ThrottleOutcome::Unanswered, at(ms));
    }
    let later = at(3_600_000);
    t.record(ThrottleOutcome::Overloaded, later);
    t.hold(Duration::from_secs(30), later);
    assert_eq!(refusals(&t, 100, later), 0, "a new run of one");
}

/// Accepts counted without the lock can bring the window to `min_requests` and so raise the probability from 0:
/// the step that folds them must see it.
#[test]
fn accepts_folded_into_the_window_settle_the_probability() {
    let t = throttle();
    t.record(ThrottleOutcome::Accepted, at(0));
    for _ in 0..7 {
        t.record(ThrottleOutcome::Overloaded, at(0));
    }
    // Lock-free: the first accept of the bucket opened it.
    t.record(ThrottleOutcome::Accepted, at(0));
    t.record(ThrottleOutcome::Accepted, at(0));
    // Calm at most until the bucket ends; the next ask after it folds them and sees p = 4/11.
    assert!(refusals(&t, 1000, at(100)) > 250, "p = 4/11, not calm");
    let s = t.snapshot(at(100));
    assert_eq!((s.accepts, s.refused_total > 250), (3, true));
}

#[test]
fn restart_forgets_the_window() {
    let t = throttle();
    for ms in 0..100 {
        t.record(ThrottleOutcome::Overloaded, at(ms));
    }
    t.restart();
    assert_eq!(t.snapshot(at(100)).requests, 0);
    assert_eq!(refusals(&t, 100, at(100)), 0);
}

#[test]
fn invalid_settings_are_refused() {
    assert!(matches!(
        ThrottleConfig::new(0.5, Duration::from_secs(2), 20, 10),
        Err(InvalidThrottle::AcceptMultiplier(_))
    ));
    assert!(ThrottleConfig::new(f64::NAN, Duration::from_secs(2), 20, 10).is_err());
    assert!(matches!(
        ThrottleConfig::new(2.0, Duration::from_millis(5), 20, 10),
        Err(InvalidThrottle::Window { .. })
    ));
    assert!(matches!(
        ThrottleConfig::new(2.0, Duration::from_secs(2), 0, 10),
        Err(InvalidThrottle::WindowBuckets(0))
    ));
    assert_eq!(
        ThrottleConfig::new(2.0, Duration::from_secs(2), 20, 10).unwrap(),
        ThrottleConfig::default()
    );
}

proptest! {
    /// The refusal rate follows the formula: over many draws at fixed counts, the share refused is the
    /// probability.
    #[test]
    fn refusals_follow_the_formula(accepted in 0_u64..400, overloaded in 10_u64..400) {
        let config = ThrottleConfig::new(2.0, Duration::from_secs(100), 10, 10).unwrap();
        let t = AdaptiveThrottle::seeded(config, Some(accepted * 1000 + overloaded));
        for _ in 0..accepted {
            t.record(ThrottleOutcome::Accepted, at(0));
        }
        for _ in 0..overloaded {
            t.record(ThrottleOutcome::Overloaded, at(0));
        }
        let requests = accepted + overloaded;
        let expected = config.probability(requests, accepted);
        prop_assert_eq!(expected, ((requests as f64 - 2.0 * accepted as f64) / (requests as f64 + 1.0)).max(0.0));
        // Draw against a snapshot of the counts: restart and refill before every draw. A draw is a request the
        // throttle counts, admitted or refused, so without the refill the counts drift (regression: refilled only
        // after refusals, a low probability drew hundreds of admits in a row, each raising the next draw's odds,
        // and the share came out twice the formula's).
        let draws = 200;
        let mut refused = 0;
        for _ in 0..draws {
            t.restart();
            for _ in 0..accepted { t.record(ThrottleOutcome::Accepted, at(0)); }
            for _ in 0..overloaded { t.record(ThrottleOutcome::Overloaded, at(0)); }
            if t.try_admit(at(0)).is_err() {
                refused += 1;
            }
        }
        let share = f64::from(refused) / f64::from(draws);
        // Binomial: within 5 standard deviations (and 0 exactly when the formula says 0).
        let sd = (expected * (1.0 - expected) / f64::from(draws)).sqrt();
        if expected == 0.0 {
            prop_assert_eq!(refused, 0);
        } else {
            prop_assert!((share - expected).abs() <= 5.0 * sd + 1e-9, "share {share} expected {expected}");
        }
    }

    /// Nothing is refused while at least half the attempts are accepted, whatever the mix and counts.
    #[test]
    fn nothing_is_refused_while_half_are_accepted(accepted in 0_u64..500, other in 0_u64..500) {
        prop_assume!(accepted * 2 >= accepted + other);
        prop_assert_eq!(ThrottleConfig::default().probability(accepted + other, accepted), 0.0);
    }
}
