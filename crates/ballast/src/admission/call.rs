//! What the admission layer needs to know about a call, read once from its [`CallContext`].

use std::sync::Arc;
use std::time::Duration;

use ballast_core::{Deadline, DeadlineExceeded, Instant, Priority, Refused, ShedReason};

use crate::{CallContext, Cancel, Error, Overload, Report, current_deadline};

/// A call's class, deadline, cancellation and report. Without a [`CallContext`] (the layer used alone): class
/// `critical`, the enclosing [`scope`](crate::context::scope)'s deadline or none (it waits until a slot frees or its
/// future is dropped), no token, no report.
#[derive(Debug)]
pub(super) struct Call {
    pub(super) priority: Priority,
    deadline: Option<Deadline>,
    cancel: Cancel,
    /// What is called, for the shed counter's label.
    target: Option<Arc<str>>,
    /// Where a refusal's code is written, for a layer used as a tower service (a client writes its own verdict).
    report: Option<Report>,
}

impl Call {
    /// The call a request carries.
    pub(super) fn of<B>(request: &http::Request<B>) -> Self {
        match request.extensions().get::<CallContext>() {
            Some(ctx) => Call {
                report: Some(ctx.report.clone()),
                ..Call::of_context(ctx)
            },
            None => Call {
                priority: Priority::default(),
                deadline: current_deadline(),
                cancel: Cancel::never(),
                target: None,
                report: None,
            },
        }
    }

    /// The call of `ctx`, for a client that asks for a slot itself (and writes its own report).
    pub(super) fn of_context(ctx: &CallContext) -> Self {
        Call {
            priority: ctx.priority,
            deadline: Some(ctx.effective_deadline()),
            cancel: ctx.cancel.clone(),
            target: ctx.target.clone(),
            report: None,
        }
    }

    /// The deadline the core orders and sheds by (none: the end of time).
    pub(super) fn deadline_instant(&self) -> Instant {
        self.deadline.map_or(Instant::MAX, |d| d.instant())
    }

    /// The first instant at which the deadline can no longer hold an attempt (what is left after the reserve
    /// is under `min_attempt`): a slot granted after it could only be refused by the layers below, so the call
    /// stops waiting then. `None`: no deadline.
    pub(super) fn give_up_at(&self) -> Option<Instant> {
        self.deadline
            .map(|d| d.instant() - d.reserve() - d.min_attempt() + Duration::from_nanos(1))
    }

    /// Whether the caller has already gone.
    pub(super) fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when the caller cancels the call (never, without a token).
    pub(super) async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }

    /// The answer to a call the core refused or dropped for `reason`: `deadline_exceeded` for an expired
    /// deadline, else `overloaded` with the reason (`ballast-shed`) and the suggested `Retry-After`.
    pub(super) fn refusal(&self, reason: ShedReason, retry_after: Option<Duration>, now: Instant) -> Error {
        match reason {
            ShedReason::Expired => self.deadline_exceeded(now),
            _ => {
                crate::metrics::shed(self.target.as_ref(), self.priority.as_str(), reason.as_str());
                let reason = match reason {
                    ShedReason::QueueFull => Overload::QueueFull,
                    ShedReason::Evicted => Overload::Evicted,
                    // `DeadlineTooShort` (an expired deadline is answered above).
                    _ => Overload::DeadlineTooShort,
                };
                Error::Overloaded { reason, retry_after }
            }
        }
    }

    /// The answer to a call whose deadline can no longer hold an attempt: how much was left, what was needed.
    pub(super) fn deadline_exceeded(&self, now: Instant) -> Error {
        let deadline = self.deadline.unwrap_or(Deadline::at(Instant::MAX));
        Error::DeadlineExceeded(DeadlineExceeded {
            remaining: deadline.remaining(now),
            reserve: deadline.reserve(),
            min_attempt: deadline.min_attempt(),
            refused: Refused::Attempt,
        })
    }

    /// Writes a refusal of this layer (shed, or a deadline that ran out while waiting) into the call's report as
    /// its stable code, and logs it. A cancellation is the caller's own doing: nothing to report.
    pub(super) fn record(&self, error: &Error) {
        if !matches!(error, Error::Overloaded { .. } | Error::DeadlineExceeded(_)) {
            return;
        }
        tracing::debug!(priority = self.priority.as_str(), %error, "admission refused the call");
        if let Some(report) = &self.report {
            let code = error.code();
            report.update(|r| r.code = Some(code));
        }
    }
}
