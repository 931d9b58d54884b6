//! A sent side-effecting attempt is never abandoned: it runs on its own task, to its own timeout.
//!
//! Why: once a refund request has left, the upstream may act on it whether or not anyone waits for the answer.
//! Dropping the attempt would not undo the refund — it would only lose the one fact that matters, whether the
//! refund happened. So the attempt runs on a spawned task; the caller awaits its outcome through a channel, and
//! if the caller is gone (its future dropped, its token cancelled) the task still finishes, records the outcome
//! in the call's report marked `background` (and `outcome_unknown` when it got no answer after sending), and
//! logs a warning with the idempotency key to look it up by. Exactly one of the two happens: an outcome the task
//! delivered just as the caller cancelled is handed to the caller (it is there: no reason to hide it), and one
//! delivered but never read (the caller's future dropped in between) is marked by the caller's end on drop.

use std::future::Future;
use std::sync::Arc;

use ballast_core::Deadline;
use http::{Response, Uri};
use tokio::sync::oneshot;
use tracing::Instrument as _;

use super::record::{AttemptRecorder, Recorded};
use crate::{Body, Cancel, Error, context};

/// What the background task needs besides the attempt itself.
#[derive(Debug)]
pub(super) struct Detached {
    /// Records the attempt's outcome.
    pub(super) recorder: AttemptRecorder,
    /// The attempt's number, for the log.
    pub(super) number: u32,
    /// The `Idempotency-Key` the attempt carries, for the log.
    pub(super) idempotency_key: Option<String>,
    /// The call's name, for the log.
    pub(super) target: Option<Arc<str>>,
    /// Where it was sent, for the log.
    pub(super) uri: Uri,
    /// The call's deadline, kept in scope on the task.
    pub(super) deadline: Option<Deadline>,
}

/// What the task hands the caller: the outcome, and where it is recorded.
struct Delivery {
    outcome: Result<Response<Body>, Error>,
    recorded: Recorded,
}

/// Runs `attempt` on its own task and waits for its outcome, or for `cancel` (then the task goes on alone).
///
/// The outcome reaches the caller, or it is marked in the report as finished after the caller left — never
/// neither: a task whose outcome was delivered just as the caller cancelled (both ready in the same poll) or
/// dropped its future (before reading it) must not count as delivered.
pub(super) async fn run_detached<F>(
    attempt: F,
    detached: Detached,
    cancel: &Cancel,
) -> Result<Response<Body>, Error>
where
    F: Future<Output = Result<Response<Body>, Error>> + Send + 'static,
{
    let (deliver, delivered) = oneshot::channel();
    let Detached {
        recorder,
        number,
        idempotency_key,
        target,
        uri,
        deadline,
    } = detached;
    let named = Named {
        number,
        idempotency_key,
        target,
        uri,
    };
    let mut waiting = Waiting {
        delivered,
        named: named.clone(),
    };
    let task = async move {
        let outcome = attempt.await;
        let recorded = recorder.finish(&outcome);
        if let Err(undelivered) = deliver.send(Delivery { outcome, recorded }) {
            finished_after_caller_left(&undelivered.recorded, &named);
        }
    }
    .in_current_span();
    // The task leaves the caller's task-local scope behind: a call made below still sees the deadline.
    match deadline {
        Some(deadline) => drop(crate::background::spawn(context::scope(deadline, task))),
        None => drop(crate::background::spawn(task)),
    }
    tokio::select! {
        biased;
        // Checked once more: an outcome already delivered reaches the caller rather than being left unread.
        () = cancel.cancelled() => waiting.take().unwrap_or(Err(Error::Cancelled)),
        delivered = &mut waiting.delivered => match delivered {
            Ok(delivery) => delivery.outcome,
            Err(_task_ended_without_an_outcome) => Err(Error::transport(
                true,
                "the attempt's task ended without an outcome (it panicked or the runtime stopped)",
            )),
        },
    }
}

/// What names the attempt in the warning logged when it finishes after its caller left.
#[derive(Clone, Debug)]
struct Named {
    number: u32,
    idempotency_key: Option<String>,
    target: Option<Arc<str>>,
    uri: Uri,
}

/// The caller's end of the channel. Closed when the caller stops waiting (cancelled, or its future dropped), so
/// a later delivery fails and the task marks the outcome itself; an outcome delivered before the close but never
/// read is marked here.
struct Waiting {
    delivered: oneshot::Receiver<Delivery>,
    named: Named,
}

impl Waiting {
    /// The outcome, if the task has delivered it; after this, none can be.
    fn take(&mut self) -> Option<Result<Response<Body>, Error>> {
        self.delivered.close();
        self.delivered.try_recv().ok().map(|delivery| delivery.outcome)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.delivered.close();
        // Err once the outcome was read (or will be marked by the task, which can no longer deliver).
        if let Ok(unread) = self.delivered.try_recv() {
            finished_after_caller_left(&unread.recorded, &self.named);
        }
    }
}

/// The caller is gone: the outcome lives only in the report (the attempt's line, marked background; an attempt
/// that got no answer after it was sent made the outcome unknown when it ended) and the log.
fn finished_after_caller_left(recorded: &Recorded, named: &Named) {
    recorded.report.mark_background(recorded.index);
    tracing::warn!(
        call = named.target.as_deref(),
        uri = %named.uri,
        attempt = named.number,
        idempotency_key = named.idempotency_key.as_deref(),
        outcome = %recorded.description(),
        "a side-effecting attempt finished after its caller left; its outcome is in the call's report"
    );
}
