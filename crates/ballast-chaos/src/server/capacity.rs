//! The capacity limit: K requests served at once, a bounded queue, and 503 at once beyond it.
//!
//! This is what turns a client's retry storm into an overload, as on a real service: while the queue has room a
//! request waits (its latency grows), once it is full the excess is refused at once — it does not wait for a
//! timeout. The queue is FIFO (tokio's semaphore is fair).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::Capacity;

/// One endpoint's capacity limit.
#[derive(Debug)]
pub(crate) struct CapacityGate {
    slots: Arc<Semaphore>,
    queue: usize,
    waiting: AtomicUsize,
}

/// The request was refused: every slot is busy and the queue is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shed;

impl CapacityGate {
    /// A gate with `capacity.concurrent` slots and room for `capacity.queue` waiters.
    pub(crate) fn new(capacity: Capacity) -> CapacityGate {
        CapacityGate {
            slots: Arc::new(Semaphore::new(capacity.concurrent)),
            queue: capacity.queue,
            waiting: AtomicUsize::new(0),
        }
    }

    /// A slot, at once when one is free, after waiting in the queue when it has room; else [`Shed`] at once.
    /// The slot is held until the permit is dropped (for a stream, when the stream ends).
    pub(crate) async fn enter(&self) -> Result<OwnedSemaphorePermit, Shed> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        self.waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w < self.queue).then_some(w + 1)
            })
            .map_err(|_| Shed)?;
        let _place = QueuePlace(&self.waiting);
        // The semaphore is never closed, so acquiring fails never; `Shed` keeps the function total anyway.
        self.slots.clone().acquire_owned().await.map_err(|_| Shed)
    }
}

/// A place in the queue, given back when the waiter gets its slot or goes away.
struct QueuePlace<'a>(&'a AtomicUsize);

impl Drop for QueuePlace<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::task::Poll;

    use futures::poll;

    use super::*;

    fn gate(concurrent: usize, queue: usize) -> CapacityGate {
        CapacityGate::new(Capacity { concurrent, queue })
    }

    #[tokio::test]
    async fn beyond_slots_and_queue_is_shed_at_once() {
        let gate = gate(2, 1);
        let _a = gate.enter().await.expect("first slot");
        let _b = gate.enter().await.expect("second slot");
        let mut queued = pin!(gate.enter());
        assert!(
            poll!(queued.as_mut()).is_pending(),
            "the third request waits in the queue"
        );
        assert_eq!(gate.enter().await.err(), Some(Shed));
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_waiter_and_frees_its_queue_place() {
        let gate = gate(1, 1);
        let first = gate.enter().await.expect("slot");
        let mut queued = pin!(gate.enter());
        assert!(poll!(queued.as_mut()).is_pending());
        drop(first);
        let Poll::Ready(Ok(_second)) = poll!(queued.as_mut()) else {
            panic!("the waiter gets the freed slot");
        };
        let mut next = pin!(gate.enter());
        assert!(poll!(next.as_mut()).is_pending(), "the queue place is free again");
    }

    #[tokio::test]
    async fn a_waiter_that_goes_away_gives_its_place_back() {
        let gate = gate(1, 1);
        let _held = gate.enter().await.expect("slot");
        {
            let mut queued = pin!(gate.enter());
            assert!(poll!(queued.as_mut()).is_pending());
        }
        let mut again = pin!(gate.enter());
        assert!(
            poll!(again.as_mut()).is_pending(),
            "the dropped waiter's place is free"
        );
    }

    #[tokio::test]
    async fn a_zero_queue_sheds_as_soon_as_the_slots_are_busy() {
        let gate = gate(1, 0);
        let _held = gate.enter().await.expect("slot");
        assert_eq!(gate.enter().await.err(), Some(Shed));
    }
}
