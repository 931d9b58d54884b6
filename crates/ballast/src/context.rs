//! What every layer knows about the call it is handling, carried in the request's extensions.
//!
//! Why extensions: tower layers only see the request. The outermost layer (the deadline layer, or a
//! `ToolClient`) puts one [`CallContext`] in `http::Request::extensions`; every layer below reads it — the
//! deadline, the run, the priority, what kind of call it is — and writes what it learns into its [`Report`].
//! The deadline also lives in a task-local scope ([`scope`], [`current_deadline`]), so a call made while
//! handling another call (a tool that calls a tool) sees the earliest deadline without being handed it;
//! [`CallContext::effective_deadline`] folds it in, so every layer works to the earliest of all three.

use std::future::Future;
use std::sync::Arc;

use ballast_core::{CallKind, Deadline, Priority};
use tokio_util::sync::CancellationToken;

use crate::{Report, Run};

/// The state of one logical call, shared by every layer of the stack (request extensions).
#[derive(Clone, Debug)]
pub struct CallContext {
    /// The call's deadline (the earliest of everything it was given).
    pub deadline: Deadline,
    /// The run the call belongs to, if any: its allowance is shared by all its calls.
    pub run: Option<Arc<Run>>,
    /// Its admission class.
    pub priority: Priority,
    /// Ballast hops before this one (from an inbound `ballast-hop`); outbound requests carry `hop + 1`.
    pub hop: u32,
    /// Whether this layer may retry: false when the caller already retries (another Ballast, an SDK's retry).
    pub retries_here: bool,
    /// Model call, read-only tool, or side-effecting tool with its upstream's deduplication.
    pub kind: CallKind,
    /// Where the layers record what happened.
    pub report: Report,
    /// Cancelled when the caller gives up: sleeps and queued work stop at once. Behind an `Arc` because the
    /// context is cloned by every layer and a token's own clone takes a lock.
    pub cancel: Arc<CancellationToken>,
}

impl CallContext {
    /// A context for a call of `kind` under `deadline`: critical priority, no run, first hop, retries allowed.
    pub fn new(kind: CallKind, deadline: Deadline) -> Self {
        CallContext {
            deadline,
            run: None,
            priority: Priority::default(),
            hop: 0,
            retries_here: true,
            kind,
            report: Report::default(),
            cancel: Arc::new(CancellationToken::new()),
        }
    }

    /// The deadline every layer works to: the earliest of the context's own, its run's, and the enclosing
    /// deadline [`scope`]'s (a call made while handling another call, or under a caller's `scope`, never
    /// outlives it, whatever its context says).
    pub fn effective_deadline(&self) -> Deadline {
        let deadline = match &self.run {
            Some(run) => run
                .deadline()
                .map_or(self.deadline, |d| self.deadline.earliest(&d)),
            None => self.deadline,
        };
        current_deadline().map_or(deadline, |scoped| deadline.earliest(&scoped))
    }
}

/// The attempt number of the request an attempt-level layer is handling (1-based), set by the retry layer on
/// each attempt's copy of the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptNumber(pub u32);

tokio::task_local! {
    static DEADLINE: Deadline;
}

/// Runs `future` with `deadline` as the task's deadline; inside it, [`current_deadline`] returns the earlier of
/// `deadline` and any deadline already in scope (a nested scope can shorten, never extend).
pub async fn scope<F: Future>(deadline: Deadline, future: F) -> F::Output {
    let deadline = current_deadline().map_or(deadline, |outer| outer.earliest(&deadline));
    DEADLINE.scope(deadline, future).await
}

/// [`scope`] as a named future, the deadline in scope read now: what a layer returns from `call` (one future
/// fewer to nest and move than the `async fn`).
pub(crate) fn scoped<F: Future>(
    deadline: Deadline,
    future: F,
) -> tokio::task::futures::TaskLocalFuture<Deadline, F> {
    let deadline = current_deadline().map_or(deadline, |outer| outer.earliest(&deadline));
    DEADLINE.scope(deadline, future)
}

/// Runs `f` with `deadline` in scope, as [`scope`] runs a future: for the synchronous part of a call (a service's
/// `call`) made on the deadline's behalf.
pub(crate) fn sync_scoped<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
    let deadline = current_deadline().map_or(deadline, |outer| outer.earliest(&deadline));
    DEADLINE.sync_scope(deadline, f)
}

/// The deadline of the enclosing [`scope`], if any.
pub fn current_deadline() -> Option<Deadline> {
    DEADLINE.try_with(|d| *d).ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ballast_core::Instant;

    use super::*;

    #[tokio::test]
    async fn nested_scopes_keep_the_earliest_deadline() {
        let outer = Deadline::at(Instant::from_millis(1_000));
        let later = Deadline::at(Instant::from_millis(5_000));
        let sooner = Deadline::at(Instant::from_millis(200));
        assert_eq!(current_deadline(), None);
        scope(outer, async {
            assert_eq!(current_deadline().map(|d| d.instant()), Some(outer.instant()));
            scope(later, async {
                assert_eq!(
                    current_deadline().map(|d| d.instant()),
                    Some(outer.instant()),
                    "never extended"
                );
            })
            .await;
            scope(sooner, async {
                assert_eq!(
                    current_deadline().map(|d| d.instant()),
                    Some(sooner.instant()),
                    "shortened"
                );
            })
            .await;
        })
        .await;
    }

    #[test]
    fn a_run_shortens_the_call_deadline() {
        let run = Arc::new(Run::new("run-1".into(), 3));
        run.offer_deadline(Deadline::at(Instant::from_millis(100)));
        let mut ctx = CallContext::new(CallKind::Model, Deadline::at(Instant::from_millis(1_000)));
        ctx.run = Some(run);
        assert_eq!(ctx.effective_deadline().instant(), Instant::from_millis(100));
        let _ = Duration::ZERO;
    }

    #[tokio::test]
    async fn an_enclosing_scope_shortens_the_effective_deadline() {
        let run = Arc::new(Run::new("run-1".into(), 3));
        run.offer_deadline(Deadline::at(Instant::from_millis(800)));
        let mut ctx = CallContext::new(CallKind::Model, Deadline::at(Instant::from_millis(1_000)));
        ctx.run = Some(run);
        let scoped = |ms| {
            scope(Deadline::at(Instant::from_millis(ms)), async {
                ctx.effective_deadline()
            })
        };
        assert_eq!(
            scoped(300).await.instant(),
            Instant::from_millis(300),
            "the scope's, earliest"
        );
        assert_eq!(
            scoped(900).await.instant(),
            Instant::from_millis(800),
            "the run's, earliest"
        );
        assert_eq!(
            ctx.effective_deadline().instant(),
            Instant::from_millis(800),
            "no scope"
        );
    }
}
