//! The admission state: running calls, the waiting queue, and the decisions on them.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::time::Duration;

use super::estimate::{self, LatencyEstimate};
use super::{AdmissionConfig, InvalidAdmission, Shed, ShedReason};
use crate::{Instant, Priority};

/// A waiter's place in the queue, in serving order: higher class, then earlier deadline, then arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Key {
    class: Reverse<Priority>,
    deadline: Instant,
    seq: u64,
}

/// A queued request's claim, for [`Admission::cancel`]. Unique for the life of the [`Admission`]: a ticket
/// whose waiter has left the queue never matches another one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ticket(Key);

impl Ticket {
    /// The class the request waits in.
    pub fn priority(&self) -> Priority {
        self.0.class.0
    }

    /// The request's deadline.
    pub fn deadline(&self) -> Instant {
        self.0.deadline
    }
}

/// The answer to [`Admission::offer`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "every offered request must run, wait or be answered"]
pub enum Offer<T> {
    /// A slot was free and is now the caller's: run now, then call [`Admission::release`]. The item comes back
    /// unused.
    Run(T),
    /// Wait: the item is held until [`Admission::release`] hands it a slot, or it is cancelled, expired or
    /// evicted.
    Queued {
        /// The claim to cancel with when the caller goes away.
        ticket: Ticket,
        /// The lower-class waiter pushed out to make room, to be answered now.
        evicted: Option<Shed<T>>,
    },
    /// Refused: answer the caller (503 `overloaded`, or 504 for an expired deadline).
    Shed(Shed<T>),
}

/// The answer to [`Admission::release`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "the next waiter must be woken and dropped waiters answered"]
pub struct Release<T> {
    /// The waiter that now owns the freed slot: wake it to run. `None`: the slot is free.
    pub next: Option<T>,
    /// Waiters skipped on the way because their deadline had passed or could no longer hold a typical call;
    /// answer them. Empty (and unallocated) in the common case.
    pub shed: Vec<Shed<T>>,
}

/// One upstream's admission: a concurrency limit and a bounded priority queue, as pure decisions.
///
/// `T` is whatever the shell needs to wake or answer a waiter (a oneshot sender, say); this type holds it and
/// hands it back, and never locks, sleeps or reads a clock.
///
/// # The rules
/// - **Offer.** An expired deadline (`deadline <= now`) is shed `expired`. Otherwise a free slot runs at once —
///   the queue is then empty, since a freed slot goes straight to the next waiter. With every slot busy: no
///   queue (capacity 0) sheds `queue_full`; a doomed request is shed `deadline_too_short`; a full queue evicts
///   its tail (below) if the tail's class is lower than the newcomer's, else sheds the newcomer `queue_full`;
///   then the newcomer waits.
/// - **Eviction victim: the queue's tail** — the lowest class, then the latest deadline, then the latest arrival.
///   It is the request the queue would serve last, so the least likely to be served in time under sustained
///   load, and the one with the most time left to retry after `Retry-After`.
/// - **Doomed, on offer:** `remaining < expected`, where `expected = (ahead + 1) * latency / limit + latency`:
///   the wait for a slot (a full pool finishes `limit` calls per typical latency — Little's law — and the
///   `ahead` waiters take the first slots to free) plus one typical latency to run. `ahead` counts the waiters
///   the queue would serve first: every higher class, and the newcomer's class with an earlier or equal
///   deadline. Higher classes arriving later may still overtake it, so this is the optimistic estimate: a
///   request is refused only when even that cannot fit.
/// - **Typical latency:** an exponentially weighted moving average of the latencies given to
///   [`Admission::release`], gain 1/8 (RFC 6298's smoothed RTT), seeded by
///   [`AdmissionConfig::typical_latency`]. With no seed and no report yet there is no estimate and the doomed
///   rule is off: the first requests of an idle service are never refused for want of one.
/// - **A free slot runs even a request with less than a typical latency left.** Deviation from a literal
///   reading of DESIGN.md (`remaining < 0 + latency`): with a free slot nobody waits, so running it costs
///   others nothing; the typical latency is a mean, not a bound; and a stale high estimate would otherwise
///   refuse every short-deadline request forever, since refused requests report no new latency. The deadline
///   layer still refuses an attempt that cannot hold `min_attempt`.
/// - **Release.** The freed slot goes to the first waiter in serving order. Waiters met on the way whose
///   deadline has passed are shed `expired`; a waiter with less than one typical latency left is shed
///   `deadline_too_short` while another waiter is queued behind it (the slot is then worth more to that one).
/// - **Retry-After:** the time the calls now running and waiting need to drain through the slots,
///   `(in_flight + queued) * latency / limit`, kept within [1 s, 30 s]; 1 s with no estimate; none for an
///   expired deadline (504, retrying cannot help).
///
/// Costs: an offer that runs is O(1); one that waits, a release, a cancel and an eviction are O(log n) in the
/// queue length (a `BTreeMap` keyed in serving order). The doomed rule is O(1) unless the estimate is
/// borderline, when it walks at most the same-class waiters ahead of the newcomer.
///
/// # Example
///
/// ```
/// use ballast_core::{Admission, AdmissionConfig, Instant, Offer, Priority, ShedReason};
/// use std::time::Duration;
///
/// let mut admission = Admission::new(AdmissionConfig::new(1, 1)).unwrap();
/// let now = Instant::ZERO;
/// let deadline = now + Duration::from_secs(5);
///
/// // The only slot is free: the search runs.
/// assert!(matches!(admission.offer(Priority::Sheddable, deadline, "search 1", now), Offer::Run(_)));
/// // The next search waits in the one queue place...
/// assert!(matches!(admission.offer(Priority::Sheddable, deadline, "search 2", now), Offer::Queued { .. }));
/// // ...until a payment takes it and the waiting search is answered 503.
/// let Offer::Queued { evicted: Some(shed), .. } = admission.offer(Priority::CriticalPlus, deadline, "pay", now)
/// else { panic!("the payment should wait and push the search out") };
/// assert_eq!((shed.item, shed.reason), ("search 2", ShedReason::Evicted));
///
/// // The first search finishes in 120 ms: its slot goes to the payment.
/// let release = admission.release(now + Duration::from_millis(120), Some(Duration::from_millis(120)));
/// assert_eq!(release.next, Some("pay"));
/// assert_eq!(admission.in_flight(), 1);
/// ```
#[derive(Debug)]
pub struct Admission<T> {
    limit: usize,
    capacity: usize,
    in_flight: usize,
    waiting: BTreeMap<Key, T>,
    by_class: [usize; 4],
    next_seq: u64,
    latency: LatencyEstimate,
}

impl<T> Admission<T> {
    /// An idle admission with these parameters.
    pub fn new(config: AdmissionConfig) -> Result<Self, InvalidAdmission> {
        config.validate()?;
        Ok(Admission {
            limit: config.limit,
            capacity: config.queue,
            in_flight: 0,
            waiting: BTreeMap::new(),
            by_class: [0; 4],
            next_seq: 0,
            latency: LatencyEstimate::seeded(config.typical_latency),
        })
    }

    /// A request of class `priority` that must finish by `deadline` asks for a slot at `now`.
    pub fn offer(&mut self, priority: Priority, deadline: Instant, item: T, now: Instant) -> Offer<T> {
        if deadline <= now {
            return Offer::Shed(self.shed(item, priority, ShedReason::Expired));
        }
        if self.in_flight < self.limit {
            // A free slot means an empty queue (a freed slot goes straight to the next waiter), so nobody is
            // overtaken; and no doomed-work check, see the module docs.
            self.in_flight += 1;
            return Offer::Run(item);
        }
        if self.capacity == 0 {
            return Offer::Shed(self.shed(item, priority, ShedReason::QueueFull));
        }
        let key = Key {
            class: Reverse(priority),
            deadline,
            seq: self.next_seq,
        };
        if let Some(reason) = self.doomed(&key, deadline.saturating_duration_since(now)) {
            return Offer::Shed(self.shed(item, priority, reason));
        }
        let mut evicted = None;
        if self.waiting.len() >= self.capacity {
            // The victim is the queue's tail: the lowest class, latest deadline, latest arrival.
            match self.waiting.last_entry() {
                Some(tail) if tail.key().class.0 < priority => {
                    let (victim, victim_item) = tail.remove_entry();
                    self.by_class[victim.class.0 as usize] -= 1;
                    evicted = Some(self.shed(victim_item, victim.class.0, ShedReason::Evicted));
                }
                _ => return Offer::Shed(self.shed(item, priority, ShedReason::QueueFull)),
            }
        }
        self.next_seq += 1;
        self.waiting.insert(key, item);
        self.by_class[priority as usize] += 1;
        Offer::Queued {
            ticket: Ticket(key),
            evicted,
        }
    }

    /// A running call finished at `now`, taking `latency` in the upstream (`None` when it says nothing about the
    /// upstream's speed: it never reached it, or was cancelled). Its slot goes to the next waiter, if any.
    ///
    /// A release with no call running (a bug in the caller) changes nothing.
    pub fn release(&mut self, now: Instant, latency: Option<Duration>) -> Release<T> {
        let mut shed = Vec::new();
        if self.in_flight == 0 {
            return Release { next: None, shed };
        }
        if let Some(latency) = latency {
            self.latency.record(latency);
        }
        while let Some((key, item)) = self.waiting.pop_first() {
            let priority = key.class.0;
            self.by_class[priority as usize] -= 1;
            let remaining = key.deadline.saturating_duration_since(now);
            if remaining.is_zero() {
                shed.push(self.shed(item, priority, ShedReason::Expired));
                continue;
            }
            if let Some(expected) = self.latency.get()
                && remaining < expected
                && !self.waiting.is_empty()
            {
                let reason = ShedReason::DeadlineTooShort { remaining, expected };
                shed.push(self.shed(item, priority, reason));
                continue;
            }
            return Release {
                next: Some(item),
                shed,
            };
        }
        self.in_flight -= 1;
        Release { next: None, shed }
    }

    /// The waiter holding `ticket` went away (client disconnect): it leaves the queue and its item comes back.
    /// `None` when it had already left (run, shed, expired or cancelled).
    pub fn cancel(&mut self, ticket: Ticket) -> Option<T> {
        let item = self.waiting.remove(&ticket.0)?;
        self.by_class[ticket.priority() as usize] -= 1;
        Some(item)
    }

    /// Removes every waiter whose deadline has passed at `now`, to be answered `deadline_exceeded`.
    pub fn expire(&mut self, now: Instant) -> Vec<Shed<T>> {
        let mut expired = Vec::new();
        for priority in Priority::ALL.into_iter().rev() {
            let class = Reverse(priority);
            let first = Key {
                class,
                deadline: Instant::ZERO,
                seq: 0,
            };
            let last = Key {
                class,
                deadline: now,
                seq: u64::MAX,
            };
            let before = expired.len();
            expired.extend(
                self.waiting
                    .extract_if(first..=last, |_, _| true)
                    .map(|(_, item)| Shed {
                        item,
                        priority,
                        reason: ShedReason::Expired,
                        retry_after: None,
                    }),
            );
            self.by_class[priority as usize] -= expired.len() - before;
        }
        expired
    }

    /// Calls running now (never above [`Admission::limit`]).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Requests waiting for a slot (never above [`Admission::capacity`]).
    pub fn queued(&self) -> usize {
        self.waiting.len()
    }

    /// Requests waiting, per class, lowest class first (the order of [`Priority::ALL`]).
    pub fn queued_by_class(&self) -> [usize; 4] {
        self.by_class
    }

    /// The concurrency limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The queue capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The current typical-latency estimate; `None` before a seed or a first report.
    pub fn typical_latency(&self) -> Option<Duration> {
        self.latency.get()
    }

    /// The doomed-work rule for a newcomer that would wait at `key` with `remaining` until its deadline.
    fn doomed(&self, key: &Key, remaining: Duration) -> Option<ShedReason> {
        let latency = self.latency.get()?;
        let fit = estimate::waiters_that_fit(remaining, latency, self.limit);
        let class = key.class.0 as usize;
        let higher: usize = self.by_class[class + 1..].iter().sum();
        if higher + self.by_class[class] < fit {
            return None;
        }
        // Borderline: count the same-class waiters ahead (earlier or equal deadline), stopping at the bound.
        let ahead = if higher >= fit {
            higher
        } else {
            let first = Key {
                deadline: Instant::ZERO,
                seq: 0,
                ..*key
            };
            higher + self.waiting.range(first..*key).take(fit - higher).count()
        };
        (ahead >= fit).then(|| ShedReason::DeadlineTooShort {
            remaining,
            expected: estimate::expected_finish(ahead, latency, self.limit),
        })
    }

    fn shed(&self, item: T, priority: Priority, reason: ShedReason) -> Shed<T> {
        let retry_after = (reason != ShedReason::Expired).then(|| {
            estimate::retry_after(
                self.in_flight + self.waiting.len(),
                self.latency.get(),
                self.limit,
            )
        });
        Shed {
            item,
            priority,
            reason,
            retry_after,
        }
    }
}
