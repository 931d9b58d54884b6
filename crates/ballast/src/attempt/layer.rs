//! [`AttemptLayer`]: the per-try timeout of each attempt.

use std::sync::Arc;
use std::time::Duration;

use tower::Layer;

use super::AttemptService;
use super::headers::PerTry;

/// Bounds, labels and records each attempt: the innermost layer before the transport.
///
/// Each attempt gets `min(per_try, remaining - reserve)` of the call's deadline (refused with
/// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) when that is under the minimum attempt, timed out
/// with [`Error::Timeout`](crate::Error::Timeout)); carries `ballast-timeout-ms` and
/// `x-envoy-expected-rq-timeout-ms` (its timeout), `ballast-attempt` (the [`AttemptNumber`](crate::context::AttemptNumber),
/// 1 without one) and `ballast-hop` (the context's hop + 1); and is a line of the call's report. A read-only or
/// model attempt ends with its caller (a dropped future, the context's `cancel` token). A sent side-effecting
/// attempt never does: it runs on its own task to its own timeout, and when its caller has gone its outcome is
/// recorded in the report (marked background) and logged as a warning with its `Idempotency-Key`.
///
/// The transport below may answer with any body that becomes a [`Body`](crate::Body) (`Bytes`, or the
/// transports' own); the layer answers with a `Body`.
///
/// Without a [`CallContext`](crate::context::CallContext) the attempt gets `per_try` (shortened by an enclosing
/// [`scope`](crate::context::scope)) and its kind is read from the method, as for
/// [`DeadlineLayer`](crate::layer::DeadlineLayer).
#[derive(Clone, Copy, Debug)]
pub struct AttemptLayer {
    per_try: Duration,
}

impl AttemptLayer {
    /// A layer giving each attempt at most `per_try`, and never more than the call's deadline leaves after its
    /// reserve.
    pub fn new(per_try: Duration) -> Self {
        AttemptLayer { per_try }
    }
}

impl<S> Layer<S> for AttemptLayer {
    type Service = AttemptService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AttemptService {
            inner,
            per_try: Arc::new(PerTry::new(self.per_try)),
        }
    }
}
