//! The shared admission state, the slot a running call holds, and handing a freed slot to the next waiter.
//!
//! A slot is a value ([`Slot`]): whoever holds it owns one unit of the concurrency limit, and dropping it gives
//! the unit back. A freed slot is not returned to a pool and re-taken — it is *handed over*: the core's
//! `release` names the next waiter, and a new `Slot` is sent to it through its oneshot channel. If that waiter
//! has just gone away, the send fails and the slot comes straight back to be handed on; if it goes away after
//! the send, the channel drops the unread slot, whose `Drop` hands it on. So no interleaving of wake-ups,
//! timeouts and dropped futures can lose a slot or run more calls than the limit.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ballast_core::{Admission, Instant, Release, Shed, ShedReason};
use tokio::sync::oneshot;

use crate::clock;

/// What a parked call is woken with.
#[derive(Debug)]
pub(super) enum Wake {
    /// A slot: run now.
    Run(Slot),
    /// Dropped from the queue (evicted, or its deadline could no longer hold a typical call): answer it.
    Shed {
        /// Why.
        reason: ShedReason,
        /// The suggested `Retry-After`.
        retry_after: Option<Duration>,
    },
}

/// How the core holds a parked call: the sending half of its wake-up.
pub(super) type Waiter = oneshot::Sender<Wake>;

/// One upstream's admission, shared by every clone of the layer and its services.
#[derive(Debug)]
pub(super) struct Shared {
    admission: Mutex<Admission<Waiter>>,
}

impl Shared {
    pub(super) fn new(admission: Admission<Waiter>) -> Self {
        Shared {
            admission: Mutex::new(admission),
        }
    }

    /// The core's state. Held only for one pure decision: never across an await, never while a [`Wake`] or a
    /// [`Slot`] is dropped (a slot's drop takes this lock again).
    pub(super) fn lock(&self) -> MutexGuard<'_, Admission<Waiter>> {
        // Every core decision leaves the state consistent or panics before changing it: a poisoned lock still
        // guards a usable state, so carry on rather than refuse every call to this upstream from now on.
        self.admission.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One unit of the concurrency limit, held by a running call. Dropping it frees the unit for the next waiter.
#[derive(Debug)]
pub(crate) struct Slot {
    /// `None` once given back (or defused after a failed hand-over).
    shared: Option<Arc<Shared>>,
    started: Instant,
    /// Reported to the core's typical-latency estimate on release; `None` says nothing about the upstream.
    latency: Option<Duration>,
    /// When the call ended, if it has been read already (the release reuses it rather than read the clock).
    ended: Option<Instant>,
}

impl Slot {
    /// A slot taken at `started`.
    pub(super) fn new(shared: Arc<Shared>, started: Instant) -> Self {
        Slot {
            shared: Some(shared),
            started,
            latency: None,
            ended: None,
        }
    }

    /// The call finished and its hold time tells the core how long calls to this upstream take: report it on
    /// release. (A call dropped or refused locally reports nothing.)
    pub(super) fn report_latency(&mut self) {
        let ended = clock::now();
        self.latency = Some(ended.saturating_duration_since(self.started));
        self.ended = Some(ended);
    }

    /// The slot of a stream that started answering, kept until the stream ends: released then, at that time
    /// (its latency, to the first event, was reported already).
    pub(crate) fn for_stream(mut self) -> Self {
        self.ended = None;
        self
    }

    /// Forgets the slot without releasing it: the caller releases it itself.
    fn defuse(mut self) {
        self.shared = None;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.take() {
            hand_over(&shared, self.latency, self.ended.take());
        }
    }
}

/// Frees one slot: the core gives it to the next waiter, which is woken with it, or marks it free.
/// At `now` when the caller has just read it (else the clock is read).
pub(super) fn hand_over(shared: &Arc<Shared>, latency: Option<Duration>, now: Option<Instant>) {
    let mut latency = latency;
    let mut now = now;
    loop {
        let now = now.take().unwrap_or_else(clock::now);
        let Release { next, shed } = shared.lock().release(now, latency.take());
        answer_sheds(shed);
        let Some(waiter) = next else { return };
        match waiter.send(Wake::Run(Slot::new(Arc::clone(shared), now))) {
            // The waiter left between the core's choice and the wake-up: free its slot in turn.
            Err(Wake::Run(slot)) => slot.defuse(),
            Ok(()) | Err(Wake::Shed { .. }) => return,
        }
    }
}

/// Wakes the waiters the core dropped from its queue with their answer (outside the lock).
pub(super) fn answer_sheds(shed: Vec<Shed<Waiter>>) {
    for dropped in shed {
        tracing::debug!(
            reason = dropped.reason.as_str(),
            priority = dropped.priority.as_str(),
            "admission dropped a queued call"
        );
        // A waiter that has already gone needs no answer.
        let _ = dropped.item.send(Wake::Shed {
            reason: dropped.reason,
            retry_after: dropped.retry_after,
        });
    }
}
