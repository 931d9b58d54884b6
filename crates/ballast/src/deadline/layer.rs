//! [`DeadlineLayer`]: the settings a plain tower user gives the outermost layer.

use std::sync::Arc;
use std::time::Duration;

use ballast_core::{CallKind, Priority};
use tower::Layer;

use super::DeadlineService;

/// Puts every call under one deadline: the outermost layer of a Ballast stack.
///
/// Per-step timeouts add up (3 steps x 30 s = 90 s); one absolute deadline per request does not. For each call
/// this layer:
/// - settles its [`CallContext`](crate::context::CallContext): the one the request carries, its deadline shortened by its
///   run (which is offered the deadline and keeps the earliest), or a new one — the scope's deadline or
///   `default_timeout` from now, with this layer's kind and priority — and holds the call to its effective
///   deadline ([`CallContext::effective_deadline`](crate::context::CallContext::effective_deadline): the enclosing
///   [`scope`](crate::context::scope)'s folded in);
/// - refuses it at once ([`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded)) when what is left cannot
///   hold an attempt;
/// - runs the layers below inside [`scope`](crate::context::scope)`(deadline, ..)`, dropped at the deadline less its reserve
///   ([`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded)) or when the context's `cancel` token fires
///   ([`Error::Cancelled`](crate::Error::Cancelled)) — on its own timer and its own watch, whatever the layers
///   below do (an answer they give at that very moment is taken over the drop);
/// - names a call that arrives unnamed ([`CallContext::target`](crate::context::CallContext::target), and its report's
///   target) after [`target`](Self::target) or the request's path;
/// - writes the total time into the report, and on an error its code and stop reason — and, for a side effect
///   whose work below it dropped, that the outcome is unknown.
///
/// The settings [`kind`](Self::kind) and [`priority`](Self::priority) apply only to requests that arrive **without**
/// a context: a `ToolClient` (or any caller) that puts one in the request's extensions has already said what the
/// call is. [`target`](Self::target) names any call that arrives unnamed.
#[derive(Clone, Debug)]
pub struct DeadlineLayer {
    pub(super) default_timeout: Duration,
    pub(super) kind: Option<CallKind>,
    pub(super) priority: Priority,
    pub(super) target: Option<Arc<str>>,
}

impl DeadlineLayer {
    /// A layer giving calls that arrive with no deadline (no context, no enclosing [`scope`](crate::context::scope))
    /// `default_timeout` from the moment they enter.
    pub fn new(default_timeout: Duration) -> Self {
        DeadlineLayer {
            default_timeout,
            kind: None,
            priority: Priority::default(),
            target: None,
        }
    }

    /// The kind of the calls that arrive without a context. Unset, it is read from the method: `GET`, `HEAD` and
    /// `OPTIONS` are read-only tools, every other method a side-effecting tool whose upstream does not
    /// deduplicate (`upstream_idempotency = "none"`) — the safe reading, which never repeats a side effect.
    /// Model calls are `POST`s: say [`CallKind::Model`] here so their sent attempts may be retried.
    pub fn kind(mut self, kind: CallKind) -> Self {
        self.kind = Some(kind);
        self
    }

    /// The admission class of the calls that arrive without a context (default: `critical`).
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The name of the upstream (a tool or model route) for the calls that arrive unnamed (no context, or one whose
    /// [`target`](crate::context::CallContext::target) is `None`): their context and their report take it. Unset, they are
    /// named after the request's URI path.
    pub fn target(mut self, name: impl Into<String>) -> Self {
        self.target = Some(Arc::from(name.into()));
        self
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = DeadlineService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineService {
            inner,
            settings: self.clone(),
        }
    }
}
