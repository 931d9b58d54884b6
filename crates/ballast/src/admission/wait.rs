//! Asking for a slot, and waiting for one in the queue.

use std::sync::Arc;

use ballast_core::{Offer, Ticket};
use tokio::sync::oneshot;

use super::call::Call;
use super::slot::{Shared, Slot, Wake, answer_sheds};
use crate::{Error, Overload, clock};

/// The admission's first answer to `call`: a slot, a refusal, or a place in the queue to wait in.
pub(super) enum Admit {
    /// A slot was free: run now.
    Run(Slot),
    /// Cancelled, shed, or its deadline already past.
    Refused(Error),
    /// Queued: wait for a slot ([`Waiting::until_woken`]).
    Queued(Waiting),
}

/// Asks for a slot for `call`, now: the decision needs no waiting, only the wait for a queued call does.
pub(super) fn offer(shared: &Arc<Shared>, call: &Call) -> Admit {
    if call.is_cancelled() {
        return Admit::Refused(Error::Cancelled);
    }
    let now = clock::now();
    let (waiter, wake) = oneshot::channel();
    let offer = shared
        .lock()
        .offer(call.priority, call.deadline_instant(), waiter, now);
    match offer {
        Offer::Run(_unused) => Admit::Run(Slot::new(Arc::clone(shared), now)),
        Offer::Shed(shed) => Admit::Refused(call.refusal(shed.reason, shed.retry_after, now)),
        Offer::Queued { ticket, evicted } => {
            let waiting = Waiting {
                shared: Arc::clone(shared),
                ticket,
                wake,
            };
            answer_sheds(evicted.into_iter().collect());
            Admit::Queued(waiting)
        }
    }
}

/// A call parked in the queue. Dropping it (the call gave up, or its future was dropped) takes its ticket out
/// of the queue, so no waiter is ever left behind; a slot handed to it in the meantime is dropped with its
/// receiver and so handed on.
pub(super) struct Waiting {
    shared: Arc<Shared>,
    ticket: Ticket,
    wake: oneshot::Receiver<Wake>,
}

impl Waiting {
    /// Waits for a slot, bounded by the deadline (until it can no longer hold an attempt) and by the caller's
    /// cancellation.
    pub(super) async fn until_woken(mut self, call: &Call) -> Result<Slot, Error> {
        let give_up = async {
            match call.give_up_at() {
                Some(at) => clock::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            // A slot that arrives together with the timeout is taken: the layers below judge the deadline.
            biased;
            wake = &mut self.wake => match wake {
                Ok(Wake::Run(slot)) => Ok(slot),
                Ok(Wake::Shed { reason, retry_after }) => Err(call.refusal(reason, retry_after, clock::now())),
                // The core dropped the waiter without an answer: only possible if this upstream's admission
                // state were torn down, which the shared `Arc` prevents. Answer as a shed all the same.
                Err(_) => Err(Error::Overloaded { reason: Overload::Evicted, retry_after: None }),
            },
            () = give_up => Err(call.deadline_exceeded(clock::now())),
            () = call.cancelled() => Err(Error::Cancelled),
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        // `None` when it already left the queue: woken (its slot, if unread, is freed with the receiver) or shed.
        let waiter = self.shared.lock().cancel(self.ticket);
        drop(waiter);
    }
}
