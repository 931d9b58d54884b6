//! One test per admission rule (the invariants over random sequences are in `proptests.rs`).

use std::time::Duration;

use super::*;
use crate::Instant;
use Priority::{Critical, CriticalPlus, Sheddable, SheddablePlus};

const MS: Duration = Duration::from_millis(1);

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn admission(limit: usize, queue: usize, latency_ms: Option<u64>) -> Admission<u32> {
    let config = AdmissionConfig {
        limit,
        queue,
        typical_latency: latency_ms.map(Duration::from_millis),
    };
    Admission::new(config).unwrap()
}

/// Takes every slot with running calls (items 1000..) at time 0.
fn fill(admission: &mut Admission<u32>) {
    for i in 0..admission.limit() {
        let item = 1000 + i as u32;
        assert_eq!(
            admission.offer(Critical, at(60_000), item, at(0)),
            Offer::Run(item)
        );
    }
}

fn queued(offer: Offer<u32>) -> (Ticket, Option<Shed<u32>>) {
    match offer {
        Offer::Queued { ticket, evicted } => (ticket, evicted),
        other => panic!("expected to wait, got {other:?}"),
    }
}

fn shed(offer: Offer<u32>) -> Shed<u32> {
    match offer {
        Offer::Shed(shed) => shed,
        other => panic!("expected a shed, got {other:?}"),
    }
}

/// Offers at time 0 and expects the request to wait, with no eviction.
fn wait(admission: &mut Admission<u32>, priority: Priority, deadline_ms: u64, item: u32) -> Ticket {
    let (ticket, evicted) = queued(admission.offer(priority, at(deadline_ms), item, at(0)));
    assert_eq!(evicted, None);
    ticket
}

/// Releases slots at time 0 until nobody waits, returning the waiters in the order they were served.
fn serving_order(admission: &mut Admission<u32>) -> Vec<u32> {
    let mut order = Vec::new();
    while let Release {
        next: Some(item),
        shed,
    } = admission.release(at(0), None)
    {
        assert_eq!(shed, vec![]);
        order.push(item);
    }
    order
}

#[test]
fn runs_up_to_the_limit_then_queues() {
    let mut admission = admission(3, 10, None);
    fill(&mut admission);
    assert_eq!(admission.in_flight(), 3);
    wait(&mut admission, Critical, 5000, 1);
    assert_eq!((admission.in_flight(), admission.queued()), (3, 1));

    let release = admission.release(at(10), None);
    assert_eq!(
        release,
        Release {
            next: Some(1),
            shed: vec![]
        }
    );
    assert_eq!((admission.in_flight(), admission.queued()), (3, 0));
    assert_eq!(admission.release(at(20), None).next, None);
    assert_eq!(admission.in_flight(), 2);
    assert_eq!(admission.offer(Sheddable, at(5000), 2, at(20)), Offer::Run(2));
}

#[test]
fn fifo_within_equal_class_and_deadline() {
    let mut admission = admission(1, 10, None);
    fill(&mut admission);
    for item in 1..=5 {
        wait(&mut admission, SheddablePlus, 5000, item);
    }
    assert_eq!(serving_order(&mut admission), [1, 2, 3, 4, 5]);
}

#[test]
fn higher_class_first_whatever_the_deadline() {
    let mut admission = admission(1, 10, None);
    fill(&mut admission);
    wait(&mut admission, Sheddable, 100, 1);
    wait(&mut admission, SheddablePlus, 200, 2);
    wait(&mut admission, CriticalPlus, 900, 3);
    wait(&mut admission, Critical, 300, 4);
    assert_eq!(serving_order(&mut admission), [3, 4, 2, 1]);
}

#[test]
fn earlier_deadline_first_within_a_class() {
    let mut admission = admission(1, 10, None);
    fill(&mut admission);
    wait(&mut admission, Critical, 500, 1);
    wait(&mut admission, Critical, 100, 2);
    wait(&mut admission, Critical, 300, 3);
    assert_eq!(serving_order(&mut admission), [2, 3, 1]);
}

#[test]
fn full_queue_evicts_the_lowest_class_waiter_with_the_latest_deadline() {
    let mut admission = admission(1, 3, None);
    fill(&mut admission);
    wait(&mut admission, Sheddable, 500, 1);
    wait(&mut admission, Sheddable, 900, 2);
    wait(&mut admission, SheddablePlus, 100, 3);

    let (_, evicted) = queued(admission.offer(Critical, at(5000), 4, at(0)));
    let evicted = evicted.expect("a sheddable waiter makes room");
    assert_eq!(
        (evicted.item, evicted.priority, evicted.reason),
        (2, Sheddable, ShedReason::Evicted)
    );
    assert_eq!(evicted.retry_after, Some(Duration::from_secs(1)));
    assert_eq!(admission.queued(), 3);
    assert_eq!(admission.queued_by_class(), [1, 1, 1, 0]);
    assert_eq!(serving_order(&mut admission), [4, 3, 1]);
}

#[test]
fn among_equal_deadlines_the_latest_arrival_is_evicted() {
    let mut admission = admission(1, 2, None);
    fill(&mut admission);
    wait(&mut admission, Sheddable, 500, 1);
    wait(&mut admission, Sheddable, 500, 2);
    let (_, evicted) = queued(admission.offer(SheddablePlus, at(500), 3, at(0)));
    assert_eq!(evicted.map(|shed| shed.item), Some(2));
}

#[test]
fn full_queue_sheds_a_newcomer_no_higher_than_every_waiter() {
    let mut admission = admission(1, 2, None);
    fill(&mut admission);
    wait(&mut admission, CriticalPlus, 500, 1);
    wait(&mut admission, SheddablePlus, 500, 2);
    for (priority, item) in [(SheddablePlus, 3), (Sheddable, 4)] {
        let shed = shed(admission.offer(priority, at(100), item, at(0)));
        assert_eq!(
            (shed.item, shed.priority, shed.reason),
            (item, priority, ShedReason::QueueFull)
        );
    }
    assert_eq!(serving_order(&mut admission), [1, 2]);
}

#[test]
fn no_queue_means_run_or_shed() {
    let mut admission = admission(1, 0, None);
    assert_eq!(admission.offer(Sheddable, at(500), 1, at(0)), Offer::Run(1));
    let shed = shed(admission.offer(CriticalPlus, at(500), 2, at(0)));
    assert_eq!(shed.reason, ShedReason::QueueFull);
    assert_eq!(admission.release(at(10), None).next, None);
    assert_eq!(admission.offer(CriticalPlus, at(500), 3, at(10)), Offer::Run(3));
}

#[test]
fn the_limit_is_never_exceeded() {
    let mut admission = admission(4, 100, None);
    let runs = (0..50)
        .filter(|&item| matches!(admission.offer(Critical, at(5000), item, at(0)), Offer::Run(_)))
        .count();
    assert_eq!((runs, admission.in_flight(), admission.queued()), (4, 4, 46));
    for _ in 0..46 {
        assert!(admission.release(at(1), None).next.is_some());
        assert_eq!(admission.in_flight(), 4);
    }
}

#[test]
fn cancel_removes_only_that_waiter_once() {
    let mut admission = admission(1, 10, None);
    fill(&mut admission);
    wait(&mut admission, Critical, 500, 1);
    let second = wait(&mut admission, Critical, 500, 2);
    wait(&mut admission, Sheddable, 500, 3);
    assert_eq!((second.priority(), second.deadline()), (Critical, at(500)));

    assert_eq!(admission.cancel(second), Some(2));
    assert_eq!(admission.cancel(second), None);
    assert_eq!(admission.queued_by_class(), [1, 0, 1, 0]);
    // A later waiter with the same class and deadline never matches the old ticket.
    wait(&mut admission, Critical, 500, 4);
    assert_eq!(admission.cancel(second), None);
    assert_eq!(serving_order(&mut admission), [1, 4, 3]);
}

#[test]
fn expire_drains_every_waiter_whose_deadline_passed() {
    let mut admission = admission(1, 10, None);
    fill(&mut admission);
    wait(&mut admission, CriticalPlus, 100, 1);
    wait(&mut admission, Sheddable, 200, 2);
    wait(&mut admission, Sheddable, 300, 3);
    wait(&mut admission, Critical, 200, 4);
    wait(&mut admission, CriticalPlus, 201, 5);

    let expired = admission.expire(at(200));
    let items: Vec<u32> = expired.iter().map(|shed| shed.item).collect();
    assert_eq!(items, [1, 4, 2]);
    assert!(
        expired
            .iter()
            .all(|shed| shed.reason == ShedReason::Expired && shed.retry_after.is_none())
    );
    assert_eq!(admission.queued_by_class(), [1, 0, 0, 1]);
    assert_eq!(admission.expire(at(200)), vec![]);
    assert_eq!(serving_order(&mut admission), [5, 3]);
}

#[test]
fn an_expired_deadline_is_refused_even_with_a_free_slot() {
    let mut admission = admission(2, 10, None);
    let shed = shed(admission.offer(CriticalPlus, at(100), 1, at(100)));
    assert_eq!(
        (shed.item, shed.reason, shed.retry_after),
        (1, ShedReason::Expired, None)
    );
    assert_eq!(shed.reason.error_code(), crate::ErrorCode::DeadlineExceeded);
    assert_eq!(admission.in_flight(), 0);
}

#[test]
fn doomed_newcomer_is_refused_with_what_it_had_and_needed() {
    // 2 slots at 100 ms: a full pool frees a slot every 50 ms.
    let mut admission = admission(2, 100, Some(100));
    fill(&mut admission);
    for item in 1..=3 {
        wait(&mut admission, CriticalPlus, 10_000, item);
    }
    // Behind 3 waiters it is the 4th to get a slot: 4 * 50 ms of wait + 100 ms to run = 300 ms.
    let shed = shed(admission.offer(Critical, at(299), 4, at(0)));
    let expected = ShedReason::DeadlineTooShort {
        remaining: 299 * MS,
        expected: 300 * MS,
    };
    assert_eq!((shed.item, shed.reason), (4, expected));
    assert_eq!(shed.reason.error_code(), crate::ErrorCode::Overloaded);
    // Exactly enough time waits.
    wait(&mut admission, Critical, 300, 5);
}

#[test]
fn doomed_rule_counts_only_the_waiters_served_first() {
    let mut admission = admission(1, 100, Some(100));
    fill(&mut admission);
    for item in 1..=3 {
        wait(&mut admission, Critical, 1000, item);
    }
    // An earlier deadline in the same class goes first: nobody ahead, 100 + 100 ms fits in 250 ms.
    wait(&mut admission, Critical, 250, 4);
    // A lower class waits behind all four: 5 slots of 100 ms + 100 ms is over 450 ms.
    let shed = shed(admission.offer(Sheddable, at(450), 5, at(0)));
    let expected = ShedReason::DeadlineTooShort {
        remaining: 450 * MS,
        expected: 600 * MS,
    };
    assert_eq!(shed.reason, expected);
    // Same class, 350 ms: only the 250 ms waiter is ahead (300 ms expected), not all four (600 ms).
    wait(&mut admission, Critical, 350, 6);
}

#[test]
fn without_an_estimate_the_doomed_rule_waits_for_a_first_report() {
    let mut admission = admission(1, 10, None);
    fill(&mut admission);
    wait(&mut admission, Critical, 1, 1);
    assert_eq!(admission.typical_latency(), None);

    assert_eq!(admission.release(at(0), Some(100 * MS)).next, Some(1));
    assert_eq!(admission.typical_latency(), Some(100 * MS));
    let shed = shed(admission.offer(Critical, at(1), 2, at(0)));
    assert!(matches!(shed.reason, ShedReason::DeadlineTooShort { .. }));
}

#[test]
fn a_free_slot_runs_even_a_short_deadline() {
    let mut admission = admission(1, 10, Some(1000));
    assert_eq!(admission.offer(Sheddable, at(1), 1, at(0)), Offer::Run(1));
}

#[test]
fn release_skips_expired_and_doomed_waiters_but_runs_the_last_one() {
    let mut admission = admission(1, 10, Some(100));
    fill(&mut admission);
    wait(&mut admission, CriticalPlus, 250, 1);
    wait(&mut admission, Critical, 1000, 2);
    wait(&mut admission, Critical, 400, 3);
    wait(&mut admission, Sheddable, 2000, 4);

    // At 320 ms: 1 has expired, 3 has 80 ms left for a 100 ms call while others wait; 2 runs.
    let release = admission.release(at(320), None);
    assert_eq!(release.next, Some(2));
    let shed: Vec<_> = release.shed.iter().map(|shed| (shed.item, shed.reason)).collect();
    let too_short = ShedReason::DeadlineTooShort {
        remaining: 80 * MS,
        expected: 100 * MS,
    };
    assert_eq!(shed, [(1, ShedReason::Expired), (3, too_short)]);
    assert_eq!(release.shed[0].retry_after, None);
    assert!(release.shed[1].retry_after.is_some());
    assert_eq!((admission.in_flight(), admission.queued()), (1, 1));

    // At 1950 ms 4 has 50 ms left, but nobody else wants the slot: it runs.
    assert_eq!(
        admission.release(at(1950), None),
        Release {
            next: Some(4),
            shed: vec![]
        }
    );
}

#[test]
fn a_release_without_a_running_call_changes_nothing() {
    let mut admission = admission(2, 10, None);
    assert_eq!(
        admission.release(at(0), Some(100 * MS)),
        Release {
            next: None,
            shed: vec![]
        }
    );
    assert_eq!((admission.in_flight(), admission.typical_latency()), (0, None));
}

#[test]
fn the_estimate_learns_from_reported_latencies_only() {
    let mut admission = admission(4, 10, Some(100));
    fill(&mut admission);
    let _ = admission.release(at(0), Some(900 * MS));
    assert_eq!(admission.typical_latency(), Some(200 * MS));
    let _ = admission.release(at(0), None);
    assert_eq!(admission.typical_latency(), Some(200 * MS));
}

#[test]
fn retry_after_is_the_time_the_backlog_needs() {
    // 2 running + 4 waiting through 2 slots at 1 s each: 3 s.
    for (latency_ms, retry_after) in [
        (Some(1000), 3 * Duration::from_secs(1)),
        (None, Duration::from_secs(1)),
    ] {
        let mut admission = admission(2, 4, latency_ms);
        fill(&mut admission);
        for item in 1..=4 {
            wait(&mut admission, Critical, 60_000, item);
        }
        let shed = shed(admission.offer(Sheddable, at(60_000), 5, at(0)));
        assert_eq!(
            (shed.reason, shed.retry_after),
            (ShedReason::QueueFull, Some(retry_after))
        );
    }
}

#[test]
fn invalid_parameters_are_refused_at_construction() {
    let zero_limit = Admission::<u32>::new(AdmissionConfig::new(0, 10));
    assert_eq!(zero_limit.unwrap_err(), InvalidAdmission::ZeroLimit);
    let zero_latency =
        Admission::<u32>::new(AdmissionConfig::new(1, 10).with_typical_latency(Duration::ZERO));
    assert_eq!(zero_latency.unwrap_err(), InvalidAdmission::ZeroTypicalLatency);
    let admission = Admission::<u32>::new(AdmissionConfig::new(3, 0)).unwrap();
    assert_eq!(
        (admission.limit(), admission.capacity(), admission.queued()),
        (3, 0, 0)
    );
}
