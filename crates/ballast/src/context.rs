//! What every layer knows about the call it is handling, carried in the request's extensions.
//!
//! Why extensions: tower layers only see the request. The outermost layer (the deadline layer, or a
//! `ToolClient`) puts one [`CallContext`] in `http::Request::extensions`; every layer below reads it — the
//! deadline, the run, the priority, what kind of call it is, its cancellation. What a layer learns it returns (a
//! typed outcome, a stream as a body value); the context's [`Report`] is only where each layer records what it
//! did, for the user to read.
//! The deadline also lives in a task-local scope ([`scope`], [`current_deadline`]), so a call made while
//! handling another call (a tool that calls a tool) sees the earliest deadline without being handed it;
//! [`CallContext::effective_deadline`] folds it in, so every layer works to the earliest of all three.

use std::future::Future;
use std::sync::Arc;

use ballast_core::TraceContext;
use ballast_core::{CallKind, Deadline, Instant, Priority};
pub use tokio_util::sync::CancellationToken;

use crate::body::CommitRule;
use ballast_config::ServerConfig;

use crate::{Report, Run};

/// The state of one logical call, shared by every layer of the stack (request extensions).
#[derive(Clone, Debug)]
pub struct CallContext {
    /// The call's own deadline (its run's folded in by the layers that settle it; an enclosing
    /// [`scope`] is folded in by [`effective_deadline`](Self::effective_deadline) wherever it is read).
    pub deadline: Deadline,
    /// The trace the call belongs to: its id is the request id of the call's spans, and each attempt sends it in
    /// `traceparent` with a parent id of its own.
    pub trace: TraceContext,
    /// Whether each attempt sends the trace upstream (`traceparent`, with a parent id of its own): when it is the
    /// caller's (given to the call, or carried by the request), not one Ballast made for its own request id.
    pub propagate_trace: bool,
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
    /// The name of what is called (a tool, a model deployment), for logs; `None` until someone names it (the
    /// deadline layer names an unnamed call after its setting or the request's path).
    pub target: Option<Arc<str>>,
    /// The user's record of the call. Each layer writes only what it did (the attempt layer its attempts, the
    /// breaker its state, the edge of the stack the verdict); no layer reads it to decide anything.
    pub report: Report,
    /// Fires when the caller gives up: sleeps and queued work stop at once.
    pub cancel: Cancel,
    /// For a streamed call: the rule that says which event of the answer commits it (the transport reads a 2xx
    /// up to that event within the attempt's timeout and hands the rest up as a stream).
    pub(crate) stream: Option<CommitRule>,
    /// Whether `stream` applies only to an answer that is a stream of events (an MCP call's, `crate::mcp`).
    pub(crate) stream_events_only: bool,
    /// The call's own explicit deadline (the only kind that becomes its run's), offered to the run in the store
    /// many instances share when the call's trip starts (`Run::sync`).
    pub(crate) run_offer: Option<Deadline>,
}

impl CallContext {
    /// How the transport reads the call's 2xx answer as a stream, when it does.
    pub(crate) fn stream_read(&self) -> Option<crate::body::StreamRead> {
        self.stream.map(|commits| crate::body::StreamRead {
            commits,
            events_only: self.stream_events_only,
        })
    }

    /// A context for a call of `kind` under `deadline`: critical priority, no run, first hop, retries allowed, a
    /// cancellation token of its own.
    pub fn new(kind: CallKind, deadline: Deadline) -> Self {
        CallContext {
            deadline,
            trace: crate::trace::new_trace(),
            propagate_trace: false,
            run: None,
            priority: Priority::default(),
            hop: 0,
            retries_here: true,
            kind,
            target: None,
            report: Report::default(),
            cancel: Cancel::new(),
            stream: None,
            stream_events_only: false,
            run_offer: None,
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

/// A call's cancellation: a token the caller can cancel, or none — then nothing but dropping the call's future
/// ends it, and nothing is watched.
///
/// Cheap to clone (a token's own clone takes a lock; this is a reference count). Every wait of the stack watches
/// it: the admission queue, the retry layer's backoff, each attempt, a ToolClient's 409 wait, a committed stream.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Option<Arc<CancellationToken>>);

impl Cancel {
    /// A cancellation with a token of its own.
    pub fn new() -> Self {
        Cancel(Some(Arc::new(CancellationToken::new())))
    }

    /// No cancellation: the call ends only when its future is dropped.
    pub fn never() -> Self {
        Cancel(None)
    }

    /// Fires when `token` is cancelled (a child of it: cancelling this one leaves `token` alone).
    pub fn child_of(token: &CancellationToken) -> Self {
        Cancel(Some(Arc::new(token.child_token())))
    }

    /// Cancels the call (nothing, for [`Cancel::never`]).
    pub fn cancel(&self) {
        if let Some(token) = &self.0 {
            token.cancel();
        }
    }

    /// Whether the call was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.as_ref().is_some_and(|token| token.is_cancelled())
    }

    /// Completes when the call is cancelled; never, for [`Cancel::never`].
    pub async fn cancelled(&self) {
        match &self.0 {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
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
    scoped(deadline, future).await
}

/// [`scope`] as a named future, the deadline in scope read now.
pub(crate) fn scoped<F: Future>(
    deadline: Deadline,
    future: F,
) -> tokio::task::futures::TaskLocalFuture<Deadline, F> {
    let deadline = current_deadline().map_or(deadline, |outer| outer.earliest(&deadline));
    DEADLINE.scope(deadline, future)
}

/// The deadline of the enclosing [`scope`], if any.
pub fn current_deadline() -> Option<Deadline> {
    DEADLINE.try_with(|d| *d).ok()
}

/// A call's deadline: the one rule, for the library's calls and the gateway's routes alike (DESIGN.md, "Runs").
/// The earliest of the call's own deadline `own` (offered to `run`, which keeps the earliest any call gave it),
/// its call-only `bound` (an SDK's per-request timeout: never the run's), the enclosing [`scope`]'s and `run`'s;
/// when none is set, `default` from `now` (the library's calls: `server.default_timeout`). Each with the server's
/// reserve and least attempt.
pub fn call_deadline(
    run: Option<&Run>,
    own: Option<Deadline>,
    bound: Option<Deadline>,
    default: std::time::Duration,
    server: &ServerConfig,
    now: Instant,
) -> Deadline {
    let settle = |d: Deadline| {
        d.with_reserve(server.reserve)
            .with_min_attempt(server.min_attempt)
    };
    let mut deadline = match (run, own) {
        (Some(run), Some(own)) => Some(run.offer_deadline(settle(own))),
        (Some(run), None) => run.deadline(),
        (None, own) => own.map(settle),
    };
    for bound in [bound.map(settle), current_deadline()].into_iter().flatten() {
        deadline = Some(deadline.map_or(bound, |d| d.earliest(&bound)));
    }
    deadline.unwrap_or_else(|| settle(Deadline::after(now, default)))
}

tokio::task_local! {
    static SHARE: Instant;
}

/// Runs `future` within `deadline` shortened to `share`, the end of the time a model route gives one deployment
/// (its primary's share, so a hanging primary leaves the fallback time). Unlike a caller's deadline, the share is
/// the route's own limit on the deployment, as its per-try timeout is: an attempt it cuts is the deployment's
/// timeout, counted by its breaker and throttle ([`share_end`]).
pub(crate) fn shared<F: Future>(
    deadline: Deadline,
    share: Instant,
    future: F,
) -> tokio::task::futures::TaskLocalFuture<Instant, tokio::task::futures::TaskLocalFuture<Deadline, F>> {
    SHARE.scope(share, scoped(deadline.shorten_to(share), future))
}

/// The end of the deployment's share of the call's time, inside [`shared`].
pub(crate) fn share_end() -> Option<Instant> {
    SHARE.try_with(|s| *s).ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ballast_core::Instant;

    use super::*;

    /// The one rule of a call's deadline: the earliest of its own, its bound, the scope's and its run's; the
    /// default when none; the run offered only the call's own deadline.
    #[tokio::test]
    async fn a_calls_deadline_is_the_earliest_it_was_given_and_only_its_own_reaches_its_run() {
        let server = ServerConfig::default();
        let now = Instant::from_millis(0);
        let at = |ms| Deadline::at(Instant::from_millis(ms));
        let instant = |d: Deadline| d.instant().saturating_duration_since(now).as_millis();
        let default = Duration::from_secs(7);
        assert_eq!(
            instant(call_deadline(None, None, None, default, &server, now)),
            7_000
        );
        let settled = call_deadline(None, Some(at(3_000)), Some(at(2_000)), default, &server, now);
        assert_eq!(instant(settled), 2_000, "the bound is earlier");
        assert_eq!(settled.reserve(), server.reserve, "with the server's reserve");

        let run = Run::new("run-1".into(), 3);
        let first = call_deadline(
            Some(&run),
            Some(at(5_000)),
            Some(at(1_000)),
            default,
            &server,
            now,
        );
        assert_eq!(instant(first), 1_000);
        assert_eq!(
            run.deadline().map(instant),
            Some(5_000),
            "the bound never becomes the run's"
        );
        let later = call_deadline(Some(&run), Some(at(9_000)), None, default, &server, now);
        assert_eq!(instant(later), 5_000, "never later than the run's");
        let bare = call_deadline(Some(&run), None, None, default, &server, now);
        assert_eq!(
            instant(bare),
            5_000,
            "a call of the run without its own deadline gets the run's"
        );
        let scoped = scope(at(400), async {
            call_deadline(Some(&run), None, None, default, &server, now)
        })
        .await;
        assert_eq!(instant(scoped), 400, "the enclosing scope's is earlier");
    }

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
