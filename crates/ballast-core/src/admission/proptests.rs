//! Admission invariants over random sequences of offer, release, cancel, expire and passing time, checked
//! against a simple model of who runs and who waits.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

use super::*;
use crate::Instant;

#[derive(Clone, Debug)]
enum Op {
    Offer { class: usize, deadline_ms: u64 },
    Release { latency_ms: Option<u64> },
    Cancel { pick: usize },
    Expire,
    Advance { ms: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..4usize, 0..3000u64).prop_map(|(class, deadline_ms)| Op::Offer { class, deadline_ms }),
        3 => proptest::option::of(0..1000u64).prop_map(|latency_ms| Op::Release { latency_ms }),
        1 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        1 => Just(Op::Expire),
        2 => (0..400u64).prop_map(|ms| Op::Advance { ms }),
    ]
}

/// What the test knows about each waiter, keyed by item id (ids grow with arrival, like the queue's sequence).
type Waiting = BTreeMap<u32, (Ticket, Priority, Instant)>;

/// The model: every offered item ends exactly once, and the queue holds exactly the items the model says.
struct Model {
    running: usize,
    waiting: Waiting,
    ended: HashSet<u32>,
    stale: Vec<Ticket>,
}

impl Model {
    /// `item` has left admission (ran, shed, evicted, cancelled or expired); `from_queue` says whether it was
    /// waiting. Fails on a second ending.
    fn end(&mut self, item: u32, from_queue: bool) -> Result<(), TestCaseError> {
        prop_assert!(self.ended.insert(item), "item {item} ended twice");
        let was_waiting = self.waiting.remove(&item);
        prop_assert_eq!(was_waiting.is_some(), from_queue, "item {} waiting?", item);
        if let Some((ticket, ..)) = was_waiting {
            self.stale.push(ticket);
        }
        Ok(())
    }

    /// The serving order of a waiter: class (highest first), deadline, arrival.
    fn order(&self, item: u32) -> (Reverse<Priority>, Instant, u32) {
        let (_, priority, deadline) = self.waiting[&item];
        (Reverse(priority), deadline, item)
    }

    fn by_class(&self) -> [usize; 4] {
        let mut counts = [0; 4];
        for (_, priority, _) in self.waiting.values() {
            counts[*priority as usize] += 1;
        }
        counts
    }
}

/// A shed for room (queue full, evicted) of class `priority` is legal only if nothing lower was waiting.
fn no_lower_class_waiting(before: [usize; 4], priority: Priority) -> Result<(), TestCaseError> {
    let lower = before[..priority as usize].iter().sum::<usize>();
    prop_assert_eq!(
        lower,
        0,
        "{} shed for room while lower classes waited: {:?}",
        priority,
        before
    );
    Ok(())
}

fn offer(
    admission: &mut Admission<u32>,
    model: &mut Model,
    (item, priority, deadline, now): (u32, Priority, Instant, Instant),
) -> Result<(), TestCaseError> {
    let before = admission.queued_by_class();
    let (in_flight, queued) = (admission.in_flight(), admission.queued());
    match admission.offer(priority, deadline, item, now) {
        Offer::Run(run) => {
            prop_assert_eq!(run, item);
            prop_assert!(in_flight < admission.limit() && queued == 0 && deadline > now);
            model.running += 1;
            model.end(item, false)?;
        }
        Offer::Queued { ticket, evicted } => {
            prop_assert_eq!((ticket.priority(), ticket.deadline()), (priority, deadline));
            if let Some(shed) = evicted {
                prop_assert_eq!(shed.reason, ShedReason::Evicted);
                prop_assert!(shed.priority < priority);
                no_lower_class_waiting(before, shed.priority)?;
                model.end(shed.item, true)?;
            }
            model.waiting.insert(item, (ticket, priority, deadline));
        }
        Offer::Shed(shed) => {
            prop_assert_eq!((shed.item, shed.priority), (item, priority));
            match shed.reason {
                ShedReason::QueueFull => {
                    prop_assert_eq!(queued, admission.capacity());
                    no_lower_class_waiting(before, priority)?;
                }
                ShedReason::Expired => prop_assert!(deadline <= now),
                ShedReason::DeadlineTooShort { remaining, expected } => {
                    prop_assert!(remaining < expected && in_flight == admission.limit());
                }
                ShedReason::Evicted => prop_assert!(false, "a newcomer is never evicted"),
            }
            model.end(item, false)?;
        }
    }
    Ok(())
}

fn release(
    admission: &mut Admission<u32>,
    model: &mut Model,
    now: Instant,
    latency: Option<Duration>,
) -> Result<(), TestCaseError> {
    let release = admission.release(now, latency);
    if model.running == 0 {
        prop_assert_eq!(
            release,
            Release {
                next: None,
                shed: vec![]
            }
        );
        return Ok(());
    }
    // Skipped waiters come first in serving order, then the one served, then everyone still waiting.
    let mut served_order: Vec<_> = release.shed.iter().map(|shed| model.order(shed.item)).collect();
    served_order.extend(release.next.map(|item| model.order(item)));
    let first_left = model
        .waiting
        .keys()
        .copied()
        .filter(|item| !served_order.iter().any(|o| o.2 == *item));
    let first_left = first_left.map(|item| model.order(item)).min();
    prop_assert!(served_order.windows(2).all(|pair| pair[0] < pair[1]));
    if let (Some(last), Some(left)) = (served_order.last(), first_left) {
        prop_assert!(*last < left, "served {:?} before {:?}", last, left);
    }
    for shed in release.shed {
        let skipped = matches!(
            shed.reason,
            ShedReason::Expired | ShedReason::DeadlineTooShort { .. }
        );
        prop_assert!(skipped, "release skipped a waiter for {:?}", shed.reason);
        model.end(shed.item, true)?;
    }
    match release.next {
        Some(item) => {
            prop_assert!(model.waiting[&item].2 > now);
            model.end(item, true)?;
        }
        None => {
            prop_assert!(model.waiting.is_empty());
            model.running -= 1;
        }
    }
    Ok(())
}

fn cancel(admission: &mut Admission<u32>, model: &mut Model, pick: usize) -> Result<(), TestCaseError> {
    if model.waiting.is_empty() {
        if let Some(stale) = model.stale.get(pick % model.stale.len().max(1)) {
            prop_assert_eq!(admission.cancel(*stale), None);
        }
        return Ok(());
    }
    let item = *model.waiting.keys().nth(pick % model.waiting.len()).unwrap();
    let ticket = model.waiting[&item].0;
    prop_assert_eq!(admission.cancel(ticket), Some(item));
    prop_assert_eq!(admission.cancel(ticket), None);
    model.end(item, true)
}

fn expire(admission: &mut Admission<u32>, model: &mut Model, now: Instant) -> Result<(), TestCaseError> {
    for shed in admission.expire(now) {
        prop_assert_eq!((shed.reason, shed.retry_after), (ShedReason::Expired, None));
        prop_assert!(model.waiting[&shed.item].2 <= now);
        model.end(shed.item, true)?;
    }
    prop_assert!(model.waiting.values().all(|(_, _, deadline)| *deadline > now));
    Ok(())
}

fn check_state(admission: &Admission<u32>, model: &Model) -> Result<(), TestCaseError> {
    prop_assert!(admission.in_flight() <= admission.limit());
    prop_assert!(admission.queued() <= admission.capacity());
    prop_assert_eq!(admission.in_flight(), model.running);
    prop_assert_eq!(admission.queued_by_class(), model.by_class());
    prop_assert_eq!(admission.queued(), model.waiting.len());
    // Nobody waits while a slot is free.
    prop_assert!(admission.queued() == 0 || admission.in_flight() == admission.limit());
    Ok(())
}

proptest! {
    #![proptest_config(Config {
        cases: 1000,
        rng_seed: RngSeed::Fixed(0xBA11A57),
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn admission_keeps_its_invariants(
        limit in 1..5usize,
        capacity in 0..8usize,
        seed_ms in proptest::option::of(1..500u64),
        ops in proptest::collection::vec(op(), 0..200),
    ) {
        let config = AdmissionConfig { limit, queue: capacity, typical_latency: seed_ms.map(Duration::from_millis) };
        let mut admission = Admission::new(config).unwrap();
        let mut model = Model { running: 0, waiting: Waiting::new(), ended: HashSet::new(), stale: Vec::new() };
        let mut now = Instant::ZERO;
        let mut offered = 0u32;
        for op in ops {
            match op {
                Op::Offer { class, deadline_ms } => {
                    let deadline = now + Duration::from_millis(deadline_ms);
                    offer(&mut admission, &mut model, (offered, Priority::ALL[class], deadline, now))?;
                    offered += 1;
                }
                Op::Release { latency_ms } => {
                    release(&mut admission, &mut model, now, latency_ms.map(Duration::from_millis))?;
                }
                Op::Cancel { pick } => cancel(&mut admission, &mut model, pick)?,
                Op::Expire => expire(&mut admission, &mut model, now)?,
                Op::Advance { ms } => now = now + Duration::from_millis(ms),
            }
            check_state(&admission, &model)?;
        }
        // Whoever still waits is still in the queue, exactly once.
        for (item, (ticket, ..)) in model.waiting.clone() {
            prop_assert_eq!(admission.cancel(ticket), Some(item));
            model.end(item, true)?;
        }
        prop_assert_eq!(model.ended.len(), offered as usize);
        prop_assert_eq!(admission.queued(), 0);
    }
}
