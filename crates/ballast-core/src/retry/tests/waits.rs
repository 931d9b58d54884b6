//! Rules 6-7: how long to wait, and whether the wait fits before the deadline.

use super::*;
use crate::{Backoff, Deadline, Refused};

#[test]
fn retry_after_is_the_wait() {
    let throttled = answer(ResponseInfo::status(429).with_retry_after(2 * SECOND));
    assert_eq!(
        first(CallKind::Model, throttled),
        RetryDecision::Retry { after: 2 * SECOND }
    );
    let zero = answer(ResponseInfo::status(503).with_retry_after(Duration::ZERO));
    assert_eq!(
        first(CallKind::Model, zero),
        RetryDecision::Retry {
            after: Duration::ZERO
        }
    );
}

#[test]
fn retry_after_jitter_only_lengthens_the_wait() {
    let jittered = RetryPolicy::default();
    let budget = Counted::unlimited();
    for (asked, most) in [(2 * SECOND, 2200 * MS), (30 * SECOND, 31 * SECOND)] {
        let outcome = answer(ResponseInfo::status(429).with_retry_after(asked));
        let waits: Vec<Duration> = (0..200)
            .map(|seed| {
                let mut call = CallState::new(CallKind::Model, Deadline::after(at(0), 60 * SECOND));
                match jittered.decide(
                    &outcome,
                    &mut call,
                    at(0),
                    &budget,
                    None,
                    &mut default_rng(Some(seed)),
                ) {
                    RetryDecision::Retry { after } => after,
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        assert!(waits.iter().all(|w| (asked..=most).contains(w)), "{waits:?}");
        assert!(
            waits.iter().any(|w| *w > asked + (most - asked) / 2),
            "spread over the window"
        );
    }
}

#[test]
fn retry_after_jitter_is_trimmed_to_the_deadline_never_below_the_wait_asked() {
    // 2.1 s left: 2 s asked + 50 ms reserve + 50 ms minimum attempt leaves no room for jitter.
    let mut call = CallState::new(CallKind::Model, Deadline::after(at(0), 2100 * MS));
    let outcome = answer(ResponseInfo::status(429).with_retry_after(2 * SECOND));
    let budget = Counted::unlimited();
    let decision = RetryPolicy::default().decide(&outcome, &mut call, at(0), &budget, None, &mut rng());
    assert_eq!(decision, RetryDecision::Retry { after: 2 * SECOND });
}

#[test]
fn retry_after_over_the_cap_stops_at_once() {
    let asked = |wait| answer(ResponseInfo::status(503).with_retry_after(wait));
    let mut long = CallState::new(CallKind::Model, Deadline::after(at(0), 120 * SECOND));
    let budget = Counted::unlimited();
    let decision = policy().decide(&asked(61 * SECOND), &mut long, at(0), &budget, None, &mut rng());
    let reason = StopReason::RetryAfterTooLong {
        asked: 61 * SECOND,
        max: 60 * SECOND,
    };
    assert_eq!(decision, stop(reason));
    assert!(reason.moves_to_fallback());
    let mut long = CallState::new(CallKind::Model, Deadline::after(at(0), 120 * SECOND));
    let at_cap = policy().decide(&asked(60 * SECOND), &mut long, at(0), &budget, None, &mut rng());
    assert_eq!(at_cap, RetryDecision::Retry { after: 60 * SECOND });
    let strict = policy().with_max_retry_after(Duration::ZERO);
    let decision = strict.decide(
        &asked(MS),
        &mut call(CallKind::Model),
        at(0),
        &budget,
        None,
        &mut rng(),
    );
    assert!(matches!(
        decision,
        RetryDecision::Stop(StopReason::RetryAfterTooLong { .. })
    ));
}

#[test]
fn retry_after_beyond_the_deadline_stops_instead_of_retrying_early() {
    let mut short = CallState::new(CallKind::Model, Deadline::after(at(0), SECOND));
    let outcome = answer(ResponseInfo::status(429).with_retry_after(2 * SECOND));
    let budget = Counted::unlimited();
    match policy().decide(&outcome, &mut short, at(0), &budget, None, &mut rng()) {
        RetryDecision::Stop(StopReason::Deadline(exceeded)) => {
            assert_eq!(exceeded.refused, Refused::Wait(2 * SECOND));
            assert_eq!(exceeded.remaining, SECOND);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(budget.withdrawn(), 0);
}

#[test]
fn without_retry_after_the_backoff_draws_the_wait() {
    // Full jitter, base 100 ms: the first retry waits U(0, 100 ms), the second U(0, 200 ms).
    let budget = Counted::unlimited();
    let run = |seed| {
        let mut call = call(CallKind::Model);
        let mut rng = default_rng(Some(seed));
        let mut waits = Vec::new();
        while let RetryDecision::Retry { after } = policy().decide(
            &AttemptOutcome::status(503),
            &mut call,
            at(0),
            &budget,
            None,
            &mut rng,
        ) {
            waits.push(after);
        }
        waits
    };
    let waits = run(3);
    assert_eq!(waits.len(), 2);
    assert!(waits[0] <= 100 * MS && waits[1] <= 200 * MS, "{waits:?}");
    assert_eq!(run(3), waits);
    assert!(
        (0..20).any(|seed| run(seed)[1] > 100 * MS),
        "the second window is wider"
    );
}

#[test]
fn decorrelated_backoff_grows_from_the_previous_wait() {
    let backoff = Backoff::decorrelated(100 * MS, 10 * SECOND).unwrap();
    let policy = RetryPolicy::new(10, backoff).unwrap();
    let budget = Counted::unlimited();
    let mut call = call(CallKind::Model);
    let mut rng = rng();
    let mut previous = 100 * MS;
    for _ in 0..5 {
        let RetryDecision::Retry { after } = policy.decide(
            &AttemptOutcome::Timeout,
            &mut call,
            at(0),
            &budget,
            None,
            &mut rng,
        ) else {
            panic!("retries left");
        };
        assert!(
            (100 * MS..=previous * 3).contains(&after),
            "{after:?} after {previous:?}"
        );
        assert_eq!(call.previous_sleep(), after);
        previous = after;
    }
}

#[test]
fn a_backoff_that_does_not_fit_before_the_deadline_stops() {
    // base = cap = 500 ms: decorrelated jitter always draws exactly 500 ms.
    let fixed = RetryPolicy::new(3, Backoff::decorrelated(500 * MS, 500 * MS).unwrap()).unwrap();
    let budget = Counted::unlimited();
    let decide = |left_ms| {
        let mut call = CallState::new(CallKind::Model, Deadline::after(at(0), left_ms * MS));
        fixed.decide(
            &AttemptOutcome::NeverSent,
            &mut call,
            at(0),
            &budget,
            None,
            &mut rng(),
        )
    };
    assert_eq!(decide(600), RetryDecision::Retry { after: 500 * MS });
    assert!(
        matches!(decide(599), RetryDecision::Stop(StopReason::Deadline(e)) if e.refused == Refused::Wait(500 * MS))
    );
}
