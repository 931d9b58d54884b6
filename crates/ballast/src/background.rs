//! Work Ballast leaves running after the call that started it has returned, and how to wait for it at shutdown.
//!
//! Why it exists: some work must outlive its caller. A side-effecting attempt that was sent runs to its own
//! timeout even when its caller goes away (dropping it would not undo a refund, only lose whether it happened);
//! on the server side, a claimed idempotent request runs to its end, renews its lease while it runs, and keeps
//! trying to store its answer if the store hiccups. A process that exits without waiting for that work loses
//! exactly the facts Ballast exists to keep: whether the refund happened, what its answer was.
//!
//! Every such task is spawned here, on one tracker for the process ([`tokio_util::task::TaskTracker`]), so a
//! service can stop taking requests, then [`drain`] with a grace period, then exit:
//!
//! ```no_run
//! # async fn shutdown() {
//! use std::time::Duration;
//! // ... stop accepting requests first ...
//! let drained = ballast::background::drain(Duration::from_secs(10)).await;
//! if !drained.finished {
//!     eprintln!("{} background tasks still running at exit", drained.still_running);
//! }
//! # }
//! ```

use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

/// The process's background tasks.
static TASKS: LazyLock<TaskTracker> = LazyLock::new(TaskTracker::new);

/// Spawns `task` on the current runtime, tracked.
pub(crate) fn spawn<F>(task: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    TASKS.spawn(task)
}

/// Background tasks running now (across every runtime of the process).
pub fn running() -> usize {
    TASKS.len()
}

/// What [`drain`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Drained {
    /// Every background task ended within the grace period.
    pub finished: bool,
    /// The tasks still running when it returned (0 when `finished`).
    pub still_running: usize,
}

/// Waits until every background task has ended, at most `grace` (on tokio's clock). Tasks spawned while it waits
/// are waited for too. Call it once, at shutdown, after the service has stopped taking requests; background work
/// may start again afterwards (the tracker is reopened).
pub async fn drain(grace: Duration) -> Drained {
    TASKS.close();
    let finished = tokio::time::timeout(grace, TASKS.wait()).await.is_ok();
    TASKS.reopen();
    Drained {
        finished,
        still_running: if finished { 0 } else { TASKS.len() },
    }
}
