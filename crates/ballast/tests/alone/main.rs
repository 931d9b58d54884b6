//! The library's tests that need the process to themselves: what they observe is process-wide — the tracker of
//! background work (`ballast::background::drain` waits for every task of the process) and tracing's callsite
//! interest (a thread-local subscriber misses spans whose callsites another test registers at the same moment).
//! In a binary apart from `it`, and one at a time ([`alone`]).

mod attempt_warning;
mod drain;
mod spans;
#[path = "../it/support/mod.rs"]
mod support;

use tokio::sync::{Mutex, MutexGuard};

/// Held for the whole of each test of this binary, so that no two of them run at once.
pub(crate) async fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::const_new(());
    ALONE.lock().await
}
