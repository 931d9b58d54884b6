//! The suite's cases for account limits in [`SharedState`](crate::SharedState): reservations and corrections
//! decide as ballast-core's GCRA does (`limit` module), on the store's clock, and hold across instances.
//!
//! The limits here are slow (seconds per unit) so that a case never waits for one: what it checks is the wait
//! the store names, within the time the case itself took, not a wait it sits through.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ballast_core::Gcra;

use super::shared::{two_instances, unique};
use super::{Opener, PATIENCE};
use crate::{Charge, Reservation};

/// Slack for the time a case takes between the store's decisions (they are made on the store's clock as the
/// calls arrive): a wait the store names may be this much shorter than the one computed from the first call.
const SLACK: Duration = Duration::from_millis(1500);

/// A fresh limit of one unit per `interval` with `tolerance`, charged `cost` units.
fn limit(interval: Duration, tolerance: Duration, cost: f64) -> Charge {
    Charge {
        key: unique("rpm|conformance"),
        rate: Gcra::from_parts(interval.as_secs_f64() * 1e6, tolerance.as_secs_f64() * 1e6),
        cost,
    }
}

/// Asserts `reservation` is `Refused` with a retry-after a little under `about` (the case's own time).
#[track_caller]
fn assert_refused_near(reservation: Reservation, about: Duration) {
    match reservation {
        Reservation::Refused(wait) => assert!(
            wait <= about && wait + SLACK > about,
            "refused with {wait:?}, expected about {about:?}"
        ),
        other => panic!("expected a refusal after about {about:?}, got {other:?}"),
    }
}

const NOW: Duration = Duration::ZERO;
const SECOND: Duration = Duration::from_secs(1);

/// A quiet limit lets a burst of its tolerance go at once (`tolerance / interval + 1` units), then refuses
/// with the time to its next unit.
pub async fn a_burst_goes_at_once_then_refusals_say_when(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let charge = limit(10 * SECOND, 30 * SECOND, 1.0);
    for (n, store) in [&one, &other, &one, &other].into_iter().enumerate() {
        let reservation = store.reserve(std::slice::from_ref(&charge), NOW).await.unwrap();
        assert_eq!(reservation, Reservation::Granted(NOW), "unit {n} of the burst");
    }
    assert_refused_near(
        one.reserve(std::slice::from_ref(&charge), NOW).await.unwrap(),
        10 * SECOND,
    );
    assert_refused_near(other.reserve(&[charge], NOW).await.unwrap(), 10 * SECOND);
}

/// A caller that may wait long enough is granted its wait, and the slot is booked: the next caller waits behind
/// it.
pub async fn a_caller_that_may_wait_books_its_slot(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let charge = [limit(10 * SECOND, Duration::ZERO, 1.0)];
    assert_eq!(
        one.reserve(&charge, NOW).await.unwrap(),
        Reservation::Granted(NOW)
    );
    let waits = match other.reserve(&charge, 60 * SECOND).await.unwrap() {
        Reservation::Granted(wait) => wait,
        refused => panic!("a caller that may wait a minute must be granted: {refused:?}"),
    };
    assert!(waits <= 10 * SECOND && waits + SLACK > 10 * SECOND, "{waits:?}");
    assert_refused_near(one.reserve(&charge, 15 * SECOND).await.unwrap(), 20 * SECOND);
}

/// Charges reserved together are booked together or not at all: a refusal of one books none of the others,
/// and a grant books every one.
pub async fn charges_are_booked_together_or_not_at_all(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let (spent, roomy) = (
        limit(10 * SECOND, Duration::ZERO, 1.0),
        limit(10 * SECOND, 100 * SECOND, 1.0),
    );
    assert_eq!(
        one.reserve(std::slice::from_ref(&spent), NOW).await.unwrap(),
        Reservation::Granted(NOW)
    );
    let together = other.reserve(&[roomy.clone(), spent.clone()], NOW).await.unwrap();
    assert_refused_near(together, 10 * SECOND);
    // The roomy limit's whole burst (100 s / 10 s + 1) is still there: the refusal booked none of it.
    for n in 0..11 {
        let alone = one.reserve(std::slice::from_ref(&roomy), NOW).await.unwrap();
        assert_eq!(alone, Reservation::Granted(NOW), "unit {n} of the roomy limit");
    }
    assert_refused_near(other.reserve(&[roomy], NOW).await.unwrap(), 10 * SECOND);

    let (first, second) = (
        limit(10 * SECOND, Duration::ZERO, 1.0),
        limit(10 * SECOND, Duration::ZERO, 2.0),
    );
    let both = [first.clone(), second.clone()];
    assert_eq!(one.reserve(&both, NOW).await.unwrap(), Reservation::Granted(NOW));
    assert_refused_near(other.reserve(&[first], NOW).await.unwrap(), 10 * SECOND);
    assert_refused_near(other.reserve(&[second], NOW).await.unwrap(), 20 * SECOND);
}

/// A limit holds across instances: 2 instances x 8 tasks reserving as fast as they can for a second admit no
/// more than GCRA allows in the time it took, `tolerance / interval + 1 + elapsed / interval`.
pub async fn a_limit_holds_across_instances(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let (interval, tolerance) = (Duration::from_millis(20), Duration::from_millis(100));
    let charge = Arc::new(limit(interval, tolerance, 1.0));
    let granted = Arc::new(AtomicUsize::new(0));
    let start = crate::clock::monotonic_now();
    let stop = crate::clock::monotonic_after(SECOND);
    let mut callers = tokio::task::JoinSet::new();
    for store in [&one, &other] {
        for _ in 0..8 {
            let (store, charge, granted) = (Arc::clone(store), Arc::clone(&charge), Arc::clone(&granted));
            callers.spawn(async move {
                while !crate::clock::passed(stop) {
                    let reservation = store.reserve(std::slice::from_ref(&*charge), NOW).await.unwrap();
                    if let Reservation::Granted(wait) = reservation {
                        assert_eq!(wait, NOW, "a caller that may not wait is never told to");
                        granted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    }
    while let Some(caller) = callers.join_next().await {
        caller.unwrap();
    }
    let elapsed = start.elapsed();
    let granted = granted.load(Ordering::Relaxed) as f64;
    let burst = tolerance.as_secs_f64() / interval.as_secs_f64() + 1.0;
    let bound = burst + elapsed.as_secs_f64() / interval.as_secs_f64();
    assert!(
        granted <= bound + 1e-9,
        "{granted} granted in {elapsed:?}, GCRA allows {bound:.1}"
    );
    // And the limit is not simply closed: most of what it allows went through.
    let expected = burst + SECOND.as_secs_f64() / interval.as_secs_f64();
    assert!(granted >= expected / 2.0, "only {granted} granted in {elapsed:?}");
    assert!(elapsed < PATIENCE, "the reservations took {elapsed:?}");
}

/// `correct` moves the TAT by `delta x interval`: more units push the next send later, a refund brings it
/// back — but never into the past, so a refund larger than the booking leaves no credit behind.
pub async fn corrections_move_the_tat_and_refunds_stop_at_now(opener: Opener) {
    let Some((one, other)) = two_instances(opener).await else {
        return;
    };
    let interval = 2 * SECOND;
    let charge = limit(interval, Duration::ZERO, 1.0);
    let charges = std::slice::from_ref(&charge);
    assert_eq!(
        one.reserve(charges, NOW).await.unwrap(),
        Reservation::Granted(NOW)
    );
    other.correct(&charge, 2.0).await.unwrap();
    assert_refused_near(one.reserve(charges, NOW).await.unwrap(), 3 * interval);
    one.correct(&charge, -2.0).await.unwrap();
    assert_refused_near(other.reserve(charges, NOW).await.unwrap(), interval);
    // Refund far more than was booked: the TAT stops at now, not 9 intervals before it, so two more units
    // put the next send two intervals from now.
    other.correct(&charge, -10.0).await.unwrap();
    one.correct(&charge, 2.0).await.unwrap();
    assert_refused_near(other.reserve(charges, NOW).await.unwrap(), 2 * interval);
}

/// For the backends' own tests: limits whose TATs are planted ahead of the store's clock at `now` µs (`None`:
/// absent), so that what a reservation writes does not depend on the instant the store decides — the send time
/// is the latest TAT minus its tolerance, exact in doubles — and can be compared to the bit with ballast-core's
/// `reserve_all`. Intervals and costs are fractional, so the products round as the store must round them.
/// Returns the charges, the TATs to plant, the new TATs `reserve_all` computes, and the wait it names at `now`.
#[cfg(test)]
pub(crate) fn planted_limits(now: f64) -> (Vec<Charge>, Vec<Option<f64>>, Vec<f64>, f64) {
    let charge = |per_minute, burst_ms, cost| Charge {
        key: unique("tpm|planted"),
        rate: Gcra::per_minute(per_minute, Duration::from_millis(burst_ms)),
        cost,
    };
    let charges = vec![
        charge(7, 1_500, 1.0),
        charge(90_000, 1_000, 1234.5),
        charge(3, 1_000, 0.25),
    ];
    let planted = vec![Some(now + 40e6), Some(now + 75e6), None];
    let limits: Vec<(Gcra, f64, f64)> = charges
        .iter()
        .zip(&planted)
        .map(|(c, tat)| (c.rate, tat.unwrap_or(0.0), c.cost))
        .collect();
    let (wait, tats) = ballast_core::reserve_all(&limits, now, 3600e6).expect("granted within the hour");
    (charges, planted, tats, wait)
}
