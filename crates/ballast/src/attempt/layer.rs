//! [`AttemptLayer`]: the per-try timeout of each attempt.

use std::time::Duration;

use tower::Layer;

use super::AttemptService;

/// Bounds, labels and records each attempt: the innermost layer before the transport. See the
/// [module docs](super).
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
            per_try: self.per_try,
        }
    }
}
